"""MutateComputeLocation repairs the later compute locations a move invalidates.

A compute location is the index of a loop of the block's consumer, and the blocks are
placed consumer first; moving one block changes the loops its producers' later
decisions index. Before the repair 12 of 54 direct mutations of a 16x64 softmax
(``benchmarks/mutation_validity.py --target llvm --ops softmax --each --shapes small``)
did not replay. Every child here must replay, pass postprocessing and equal numpy."""
import random

from explorer import Target, build, ops
from explorer.schedule import Schedule
from explorer.space import DesignSpace
from explorer.space.mutators.compute_location import MutateComputeLocation, repair
from explorer.space.replay import replay

WL = ops.softmax(16, 64)
TARGET = Target("llvm")

def _locations(trace):
    return {i: d for i, d in trace.decisions.items()
            if trace.insts[i].kind == "sample_compute_location"}

def test_every_direct_mutation_of_a_softmax_replays():
    space = DesignSpace(WL, TARGET)
    parents = [space.design_trace(p.trace) for p in space.sample(20, seed=0)]
    rng = random.Random(0)
    mutator = MutateComputeLocation()
    children = []
    for n in range(54):
        child = mutator.apply(parents[n % len(parents)], rng, WL)
        assert child is not None
        replay(child, Schedule(WL, seed=0))          # raises if it does not replay
        assert space.apply(child) is not None
        children.append(child)
    moved = [c for c, p in zip(children, parents * 3)
             if sum(_locations(c)[i] != d for i, d in _locations(p).items()) > 1]
    assert moved, "no mutation needed a repair: the case this test is for is gone"
    args = WL.make_args(seed=1)
    for child in moved[:3]:
        build(space.apply(child), TARGET)(*args)
        WL.check(args, rtol=1e-4, atol=1e-6)

def test_repair_leaves_a_trace_that_replays_unchanged():
    space = DesignSpace(WL, TARGET)
    trace = space.design_trace(space.sample(1, seed=3)[0].trace)
    first = min(_locations(trace))
    assert repair(trace, first, random.Random(0), WL).decisions == trace.decisions

def test_repair_is_seeded():
    space = DesignSpace(WL, TARGET)
    parents = [space.design_trace(p.trace) for p in space.sample(6, seed=0)]

    def run(seed):
        rng = random.Random(seed)
        return [MutateComputeLocation().apply(p, rng, WL).decisions for p in parents * 3]
    assert run(5) == run(5)
