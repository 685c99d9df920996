"""planner/cli/gc_pause.py: the collector is off inside a block and back as it was after the last block ends,
whatever the nesting and however two threads' blocks overlap."""

import gc
import threading

from planner.cli.gc_pause import paused


def test_off_inside_and_restored_after():
    assert gc.isenabled()
    with paused():
        assert not gc.isenabled()
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer block is still open
    assert gc.isenabled()


def test_a_caller_that_disabled_the_collector_keeps_it_disabled():
    gc.disable()
    try:
        with paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_blocks_of_two_threads_leave_it_enabled():
    # A opens, B opens, A closes, B closes: the order that, checked without a shared count, left it off
    a_open, b_open, a_closed = threading.Event(), threading.Event(), threading.Event()
    inside_b_after_a: list[bool] = []

    def a():
        with paused():
            a_open.set()
            b_open.wait(5)
        a_closed.set()

    def b():
        a_open.wait(5)
        with paused():
            b_open.set()
            a_closed.wait(5)
            inside_b_after_a.append(gc.isenabled())  # B's block is still open after A's ended

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert inside_b_after_a == [False]
    assert gc.isenabled()
