"""The spare pool (grader/judge/workers.py): a take() that comes while a spare is being started
gets that spare, instead of starting a second one beside it (two torch imports on two cores).
Gradescope's judge and the watcher's restarts take a spare right after asking for one."""
import threading
import time

import pytest

from grader.judge import workers


class SlowSpare:
    """A spare whose start takes a while (a Popen under load), with no process behind it."""
    made = []

    def __init__(self, limits, isolation):
        time.sleep(0.3)
        self.proc = self
        self.given = None
        SlowSpare.made.append(self)

    def poll(self):
        return None  # alive

    def go(self, source):
        self.given = source

    def kill(self):
        pass


@pytest.fixture
def pool(monkeypatch):
    """A pool of one SlowSpare, closed after the test."""
    monkeypatch.setattr(workers, "Spare", SlowSpare)
    SlowSpare.made = []
    made = workers.SparePool(limits=None, isolation="process", size=1)
    yield made
    made.close()


def taking(pool):
    """(a thread taking a spare from `pool`, the list it puts what it took in)."""
    taken = []
    taker = threading.Thread(target=lambda: taken.append(pool.take("x")), daemon=True)
    taker.start()
    return taker, taken


def test_a_take_waits_for_the_spare_being_started(pool):
    pool.fill()
    spare, warm = pool.take("source text")  # at once: the maker thread is still starting it
    assert warm and spare is SlowSpare.made[0] and spare.given == "source text"
    assert len(SlowSpare.made) == 1  # no second, cold one


def test_a_take_with_nothing_being_started_starts_one_itself(pool):
    spare, warm = pool.take("x")  # never filled: nobody is starting one
    assert not warm and SlowSpare.made == [spare]


def test_a_pool_closed_while_a_take_waits_lets_it_go(pool):
    pool.fill()
    taker, taken = taking(pool)
    pool.close()
    taker.join(timeout=5)
    assert not taker.is_alive() and len(taken) == 1


def test_a_take_waiting_for_a_start_that_never_comes_is_let_go_by_close(pool):
    """fill() marks a start as coming before it wakes the maker thread; a pool closed in between
    starts nothing, and a take() waiting meanwhile is let go (it starts its own)."""
    with pool.lock:
        pool.making = True  # fill()'s mark, the maker thread not yet woken
    taker, taken = taking(pool)
    taker.join(0.3)
    assert taker.is_alive()  # waiting for the start
    pool.close()
    taker.join(5)
    assert not taker.is_alive() and len(taken) == 1


class BrokenSpare:
    """A start that raises what the maker thread does not expect (no uid left, say)."""

    def __init__(self, limits, isolation):
        time.sleep(0.1)
        raise RuntimeError("all worker uids are in use")


def test_a_take_after_the_maker_thread_died_raises_instead_of_waiting(monkeypatch):
    monkeypatch.setattr(workers, "Spare", BrokenSpare)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # the maker's own death
    pool = workers.SparePool(limits=None, isolation="process", size=1)
    try:
        pool.fill()
        pool.maker.join(5)
        assert not pool.maker.is_alive()
        pool.fill()  # asked again: nobody is left to start it
        taker, taken = taking(pool)
        taker.join(5)
        assert not taker.is_alive() and taken == []  # it raised (the start's own error)
    finally:
        pool.close()
