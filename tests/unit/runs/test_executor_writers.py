"""The executor's per-process gate: responses are read once no group of the process is writing."""
from __future__ import annotations

import threading
import time

from tickwork_local.sending import Writers

# A cap no wait here comes near unless it wrongly waits for it: the verdicts do not depend on speed.
LONG_CAP_SECONDS = 30.0


def test_reading_goes_ahead_at_once_when_no_group_is_writing() -> None:
    started = time.monotonic()
    Writers().wait_until_none(LONG_CAP_SECONDS)
    assert time.monotonic() - started < LONG_CAP_SECONDS / 2


def test_reading_waits_for_the_last_writer_to_finish() -> None:
    writers, writing, written = Writers(), threading.Event(), threading.Event()

    def write_for_a_while() -> None:
        with writers.held(), writers.held():  # two groups writing at once
            writing.set()
            time.sleep(0.2)
            written.set()

    writer = threading.Thread(target=write_for_a_while)
    writer.start()
    assert writing.wait(LONG_CAP_SECONDS)
    started = time.monotonic()
    writers.wait_until_none(LONG_CAP_SECONDS)
    assert written.is_set() and time.monotonic() - started < LONG_CAP_SECONDS / 2
    writer.join()


def test_reading_never_waits_longer_than_its_cap() -> None:
    writers = Writers()
    with writers.held():
        started = time.monotonic()
        writers.wait_until_none(0.1)
        assert 0.1 <= time.monotonic() - started < LONG_CAP_SECONDS / 2
