"""The streamed register transpose's tiles (``MemoryBoundTiling``): rows in tiles of
``min_stream_tile`` to ``max_stream_tile``, each output row written in runs of
``min_stream_run`` to ``max_stream_run`` (32 or 64 elements: the best runs at 1024 x
1024 and 4096 x 1024 on the session-12 Intel Xeon), counted in elements whatever the
target's lanes; the parallel loop over the runs (``register runs``) where they make a
task per core, else over the row tiles (``register``); sampled transposes of both and
of the shortest run equal numpy."""
import numpy as np
import pytest

from explorer import build, lower, ops
from explorer.ir.functor import walk_stmt
from explorer.ir.stmt import For
from explorer.space import DesignSpace
from explorer.space.defaults import default_rules
from explorer.space.rules import MemoryBoundTiling
from host_targets import host_and_avx2

TARGETS = host_and_avx2()


def _register_sketches(space, n, seed):
    """Sampled schedules that chose the streamed register sketch, with their two tile
    instructions (rows, runs): (schedule, [(candidates, decision), ...])."""
    out = []
    for sch in space.sample(n, seed=seed):
        tr = sch.trace
        cats = [(ins.inputs[0], tr.decisions[i]) for i, ins in enumerate(tr.insts)
                if ins.kind == "sample_categorical" and ins.inputs[0] != [0, 1]]
        if len(cats) == 2:
            out.append((sch, cats))
    return out


@pytest.mark.parametrize("target", TARGETS, ids=[f"{t.vector_lanes}lanes" for t in TARGETS])
def test_runs_are_32_or_64_elements_and_rows_128_to_512(target):
    lanes = target.vector_lanes
    wl = ops.transpose(512, 1024)        # B is 1024 x 512
    found = _register_sketches(DesignSpace(wl, target), 16, seed=0)
    assert found, "no register sketch among 16 samples"
    (rows, _), (runs, _) = found[0][1]
    assert [r * lanes for r in rows] == [128, 256, 512]
    assert [r * lanes for r in runs] == [32, 64]


def test_stream_runs_are_parameters_and_the_shortest_run_is_correct():
    target = TARGETS[0]
    lanes = target.vector_lanes
    wl = ops.transpose(256, 512)
    rule = MemoryBoundTiling(min_stream_run=2 * lanes, max_stream_run=4 * lanes)
    space = DesignSpace(wl, target, rules=[rule if isinstance(r, MemoryBoundTiling) else r
                                           for r in default_rules(target)])
    found = _register_sketches(space, 24, seed=1)
    assert found and all(runs == [2, 4] for _, (_, (runs, _)) in found)
    shortest = next((sch for sch, (_, (runs, pick)) in found if runs[pick] == 2), None)
    assert shortest is not None, "no sample took the shortest run"
    args = wl.make_args(seed=3)
    build(shortest, target)(*args)
    np.testing.assert_array_equal(args[1], args[0].T)


@pytest.mark.parametrize("M,N,axis", [(512, 1024, "j"), (64, 1024, "i")])
def test_streamed_sketch_runs_parallel_where_they_make_a_task_per_core(M, N, axis):
    """B = A^T is N x M. Where B's columns make a task per core in runs of
    ``max_stream_run``, the streamed sketch runs the runs in parallel (``register
    runs``: B's columns, j), else its row tiles (``register``: B's rows, i); each
    sampled schedule equals numpy."""
    target = TARGETS[0].with_(num_cores=2)
    wl = ops.transpose(M, N)
    found = _register_sketches(DesignSpace(wl, target), 12, seed=2)
    assert found, "no streamed sketch among 12 samples"
    for sch, _ in found[:3]:
        func = lower(sch)
        par = [n for n, _ in walk_stmt(func.body) if isinstance(n, For) and n.kind == "parallel"]
        assert [n.var.name.split("_")[0] for n in par] == [axis], func.script()
        args = wl.make_args(seed=4)
        build(sch, target)(*args)
        np.testing.assert_array_equal(args[1], args[0].T)
