"""A large read's blocks, each read while the caller works on the one before
(``query_dsl/read_ahead.py``): in order, into alternating buffers, the next read running
while the caller holds the current block, a read's error raised at its block, and a caller
that stops early returning only once the read ahead of it is done."""

from __future__ import annotations

import threading

import pytest

from query_dsl.read_ahead import read_ahead

DEADLINE_S = 10.0


def test_blocks_come_in_order_into_alternating_buffers() -> None:
    asked: list[tuple[int, int]] = []

    def read(start: int, buffer: int) -> int:
        asked.append((start, buffer))
        return start * 10

    assert list(read_ahead(read, [0, 5, 10, 15])) == [(0, 0), (5, 50), (10, 100), (15, 150)]
    assert asked == [(0, 0), (5, 1), (10, 0), (15, 1)]


def test_one_block_is_read_inline() -> None:
    threads: list[threading.Thread] = []

    def read(start: int, buffer: int) -> int:
        threads.append(threading.current_thread())
        return start

    assert list(read_ahead(read, [7])) == [(7, 7)]
    assert threads == [threading.current_thread()]
    assert list(read_ahead(read, [])) == []


def test_the_next_block_is_read_while_the_caller_holds_the_current_one() -> None:
    started = {start: threading.Event() for start in (0, 1, 2)}
    threads: dict[int, threading.Thread] = {}

    def read(start: int, buffer: int) -> int:
        threads[start] = threading.current_thread()
        started[start].set()
        return start

    blocks = read_ahead(read, [0, 1, 2])
    assert next(blocks) == (0, 0)
    # the caller holds block 0 and has not asked for more: block 1 is read meanwhile
    assert started[1].wait(DEADLINE_S)
    assert threads[1] is not threading.current_thread()
    # but not block 2, whose buffer (0) is block 0's, still held
    assert not started[2].is_set()
    assert list(blocks) == [(1, 1), (2, 2)]


def test_a_read_that_fails_raises_at_its_block() -> None:
    def read(start: int, buffer: int) -> int:
        if start == 2:
            raise ValueError("block 2 is unreadable")
        return start

    blocks = read_ahead(read, [0, 1, 2, 3])
    assert next(blocks) == (0, 0)
    assert next(blocks) == (1, 1)
    with pytest.raises(ValueError, match="block 2 is unreadable"):
        next(blocks)


def test_a_caller_that_stops_early_returns_once_the_read_ahead_is_done() -> None:
    release = threading.Event()
    reading = threading.Event()
    done: list[int] = []

    def read(start: int, buffer: int) -> int:
        if start:
            reading.set()
            assert release.wait(DEADLINE_S)
            done.append(start)
        return start

    blocks = read_ahead(read, [0, 1, 2])
    assert next(blocks) == (0, 0)
    assert reading.wait(DEADLINE_S)  # block 1 is being read
    closer = threading.Thread(target=blocks.close)
    closer.start()
    closer.join(0.05)
    assert closer.is_alive()  # waits for the read ahead: its buffer is not touched after
    release.set()
    closer.join(DEADLINE_S)
    assert not closer.is_alive()
    assert done == [1]
