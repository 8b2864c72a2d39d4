"""tickwork_local.sending: the Reader, the one thread that waits for every sent request's response, and
Writers, which groups hold while they write an instant's requests.

Real sockets (a socketpair stands in for a connection to a target); events with generous timeouts, and
negative checks only over short waits, which a loaded machine cannot turn into false failures.
"""
from __future__ import annotations

import gc
import socket
import threading
import time
from typing import Iterator

import pytest

from tickwork_local.sending import Reader, Writers

WAIT_SECONDS = 10.0
QUIET_SECONDS = 0.2  # long enough for a wrong callback to show up, short enough to keep the suite fast


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    yield ours, theirs
    ours.close()
    theirs.close()


@pytest.fixture
def reader() -> Iterator[Reader]:
    made = Reader()
    yield made
    made.close()


class Handed:
    """A `ready` callback noting when the reader called it."""

    def __init__(self) -> None:
        self.at: list[float] = []
        self.event = threading.Event()

    def __call__(self) -> None:
        self.at.append(time.monotonic())
        self.event.set()


def test_a_watched_socket_is_handed_over_once_its_answer_arrives_and_not_before(
    reader: Reader, pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    handed = Handed()
    reader.watch(ours, time.monotonic() + 60, handed)
    assert not handed.event.wait(QUIET_SECONDS)
    answered = time.monotonic()
    theirs.send(b"HTTP/1.1 200 OK\r\n")
    assert handed.event.wait(WAIT_SECONDS)
    assert len(handed.at) == 1 and handed.at[0] >= answered
    assert ours.recv(100) == b"HTTP/1.1 200 OK\r\n"  # the reader only watched: the bytes are the reader's caller's
    time.sleep(QUIET_SECONDS)
    assert len(handed.at) == 1  # handed over once, though the socket stays readable until it is read


def test_a_socket_that_stays_silent_is_handed_over_at_its_deadline(
    reader: Reader, pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, _ = pair
    handed = Handed()
    deadline = time.monotonic() + 0.3
    reader.watch(ours, deadline, handed)
    assert handed.event.wait(WAIT_SECONDS)
    assert handed.at[0] >= deadline


def test_many_sockets_are_each_handed_over_by_what_happens_to_them(reader: Reader) -> None:
    pairs = [socket.socketpair() for _ in range(20)]
    try:
        handed: dict[int, str] = {}
        done = threading.Semaphore(0)

        def ready(i: int, why: str) -> None:
            handed[i] = why
            done.release()

        for i, (ours, _) in enumerate(pairs):
            deadline = time.monotonic() + (0.2 if i % 2 else 60)
            reader.watch(ours, deadline, lambda i=i: ready(i, "answer" if i % 2 == 0 else "deadline"))
        for ours, theirs in pairs[::2]:
            theirs.send(b"x")
        for _ in pairs:
            assert done.acquire(timeout=WAIT_SECONDS)
        assert handed == {i: "answer" if i % 2 == 0 else "deadline" for i in range(20)}
    finally:
        for ours, theirs in pairs:
            ours.close()
            theirs.close()


def test_nothing_is_handed_over_while_hold_holds_it(pair: tuple[socket.socket, socket.socket]) -> None:
    """SharedSender's hold waits while groups write their instant's requests; the reader keeps what
    became readable until then."""
    ours, theirs = pair
    writing = threading.Event()
    writing.set()
    held = Reader(hold=lambda: _wait_while(writing))
    try:
        ready = threading.Event()
        held.watch(ours, time.monotonic() + 60, ready.set)
        theirs.send(b"x")
        assert not ready.wait(QUIET_SECONDS)
        writing.clear()
        assert ready.wait(WAIT_SECONDS)
    finally:
        held.close()


def _wait_while(flag: threading.Event) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while flag.is_set() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_closed_socket_is_handed_over_at_once(reader: Reader, pair: tuple[socket.socket, socket.socket]) -> None:
    """Reading it then fails the attempt with the error a blocking read would have had."""
    ours, _ = pair
    ours.close()
    ready = threading.Event()
    reader.watch(ours, time.monotonic() + 60, ready.set)
    assert ready.wait(WAIT_SECONDS)


def test_a_closed_reader_refuses_new_sockets_and_its_thread_is_gone(pair: tuple[socket.socket, socket.socket]) -> None:
    made = Reader()
    made.close()
    assert not made._thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        made.watch(pair[0], time.monotonic() + 1, lambda: None)


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_while_any_group_writes_and_on_again_after_the_last(collector_on: None) -> None:
    writers = Writers(pause_gc=True)
    with writers.held():
        assert not gc.isenabled()
        with writers.held():  # a second group starts before the first is done
            assert not gc.isenabled()
        assert not gc.isenabled()  # the first is still writing
    assert gc.isenabled()


def test_a_collector_switched_off_by_someone_else_stays_off(collector_on: None) -> None:
    writers = Writers(pause_gc=True)
    gc.disable()
    with writers.held():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_writers_without_pause_gc_leave_the_collector_alone(collector_on: None) -> None:
    with Writers().held():
        assert gc.isenabled()


def test_the_collector_is_back_on_when_a_write_raises(collector_on: None) -> None:
    writers = Writers(pause_gc=True)
    with pytest.raises(OSError):
        with writers.held():
            raise OSError("broken pipe")
    assert gc.isenabled()
