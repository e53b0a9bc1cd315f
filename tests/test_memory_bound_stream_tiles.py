"""The streamed register transpose's tiles (``MemoryBoundTiling``): rows in tiles of
``min_stream_tile`` to ``max_stream_tile``, each output row written in runs of
``min_stream_run`` to ``max_stream_run`` (32 or 64 elements: the best runs at 1024 x
1024 and 4096 x 1024 on the session-12 Intel Xeon), counted in elements whatever the
target's lanes; the parallel loop over the row tiles (``register``) or over the runs
(``register runs``); sampled transposes of both and of the shortest run equal numpy."""
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


def test_register_runs_sketch_parallel_over_the_runs_and_equal_numpy():
    """Both streamed sketches are sampled: ``register`` runs its row tiles (B's rows, i)
    in parallel, ``register runs`` its runs (B's columns, j); each equals numpy."""
    target = TARGETS[0]
    wl = ops.transpose(512, 1024)
    seen = set()
    for sch, _ in _register_sketches(DesignSpace(wl, target), 24, seed=2):
        func = lower(sch)
        par = [n for n, _ in walk_stmt(func.body) if isinstance(n, For) and n.kind == "parallel"]
        assert len(par) == 1, func.script()
        axis = par[0].var.name.split("_")[0]
        if axis in seen:
            continue
        seen.add(axis)
        args = wl.make_args(seed=4)
        build(sch, target)(*args)
        np.testing.assert_array_equal(args[1], args[0].T)
    assert seen == {"i", "j"}, seen
