"""The local runtime's per-process gate: responses are read once no group of the process is writing."""
from __future__ import annotations

import threading
import time

from tickwork_local.sending import Writers


def test_reading_goes_ahead_at_once_when_no_group_is_writing() -> None:
    started = time.monotonic()
    Writers().wait_until_none(2.0)
    assert time.monotonic() - started < 0.05


def test_reading_waits_for_the_last_writer_to_finish() -> None:
    writers, released = Writers(), threading.Event()

    def write_for_a_while() -> None:
        with writers.held(), writers.held():  # two groups writing at once
            time.sleep(0.2)
        released.set()

    writer = threading.Thread(target=write_for_a_while)
    writer.start()
    time.sleep(0.05)
    writers.wait_until_none(5.0)
    assert released.wait(0.05)
    writer.join()


def test_reading_never_waits_longer_than_its_cap() -> None:
    writers = Writers()
    with writers.held():
        started = time.monotonic()
        writers.wait_until_none(0.1)
        assert 0.09 <= time.monotonic() - started < 1.0
