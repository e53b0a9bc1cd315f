"""reverse_compute_at must not cover elements its producers do not write under the loop.

With a loop striding over a dimension *inside* the target loop (a vthread, or a
reordered split), the producer writes ``j_1 * 8 + c`` for ``j_1`` in [0, 2): 2 points of
a box of 9. Covering the box copied 7 elements nobody wrote over other iterations' (or
other threads') results: a wrong kernel on the CPU and a race on the GPU.
"""
from __future__ import annotations

import pytest

from explorer import Schedule, ScheduleError, build, ops


def _strided(gpu: bool):
    wl = ops.gemm(32, 32, 8)
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i2 = sch.split(i, [None, 8])
    j0, j1, j2 = sch.split(j, [None, 2, 8])
    sch.reorder(i0, j0, i2, j2, k, j1)
    if gpu:
        sch.bind(i0, "blockIdx.x")
        sch.bind(j0, "blockIdx.y")
        sch.bind(i2, "threadIdx.y")
        sch.bind(j2, "threadIdx.x")
        sch.bind(j1, "vthread.x")
    cw = sch.cache_write(c, 0, "local" if gpu else "global")
    return wl, sch, cw, (i2, j2, j1)


@pytest.mark.parametrize("gpu", [False, True], ids=["cpu", "gpu"])
def test_a_strided_producer_region_is_refused_and_nothing_changes(gpu):
    wl, sch, cw, (_, j2, _) = _strided(gpu)
    before, trace = sch.func, sch.trace.dumps()
    with pytest.raises(ScheduleError, match=r"write 2 of the 9 elements"):
        sch.reverse_compute_at(cw, j2)
    assert sch.func == before and sch.trace.dumps() == trace
    args = wl.make_args(0)                   # the schedule left as it was still computes C
    build(sch, "interp")(*args)
    wl.check(args)


def test_at_a_loop_outside_the_strided_one_it_is_accepted_and_correct():
    wl, sch, cw, (i2, _, _) = _strided(gpu=False)
    sch.reverse_compute_at(cw, i2)           # covers j_1 and j_2 whole: a dense box
    for target in ("interp", "llvm"):
        args = wl.make_args(1)
        build(sch, target)(*args)
        wl.check(args)


def test_a_local_cache_is_not_copied_out_above_its_threads():
    """Registers are per thread: a write-back placed above threadIdx.x would run in every
    thread and copy out elements other threads computed (the race check's complaint)."""
    wl, sch, cw, (i2, _, _) = _strided(gpu=True)
    before = sch.func
    with pytest.raises(ScheduleError, match=r"local to each thread.*threadIdx.x loop 'j_2'"):
        sch.reverse_compute_at(cw, i2)
    assert sch.func == before


def test_vthread_outside_the_threads_gives_each_thread_a_dense_tile():
    """The order the GPU space uses (blockIdx > vthread > threadIdx): accepted, correct
    on the race-checking interpreter."""
    wl = ops.gemm(32, 32, 8)
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i2 = sch.split(i, [None, 8])
    j0, j1, j2 = sch.split(j, [None, 2, 8])
    sch.reorder(i0, j0, j1, i2, j2, k)
    sch.bind(i0, "blockIdx.x")
    sch.bind(j0, "blockIdx.y")
    sch.bind(j1, "vthread.x")
    sch.bind(i2, "threadIdx.y")
    sch.bind(j2, "threadIdx.x")
    cw = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(cw, j2)
    args = wl.make_args(0)
    build(sch, "interp")(*args)
    wl.check(args)
