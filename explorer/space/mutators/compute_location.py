"""Mutate compute location: move a block to another legal place."""
from __future__ import annotations

from ...errors import ExplorerError
from ...schedule import Schedule
from ..mutator import Mutator
from ..replay import replay

_TRIES = 8


class MutateComputeLocation(Mutator):
    """Replay the trace up to a ``sample_compute_location``, list the places where its
    block may go there (inline, root, a loop of its consumer), and pick another one.

    A location is the index of a loop of the block's consumer, and blocks are placed
    consumer first, so moving one block changes the loop list its producers' later
    decisions index: in a softmax, moving ``row_sum`` from ``norm``'s row loop to the
    root leaves ``row_sum_rf``'s decision 2 past ``row_sum``'s loops (12 of 54 such
    mutations of a 16x64 softmax failed to replay). Those later decisions are repaired:
    each one that is no longer legal takes a legal location at random, so the child
    replays (``repair``)."""

    def apply(self, trace, rng, workload):
        cands = [i for i in trace.sampling_indices()
                 if trace.insts[i].kind == "sample_compute_location" and i in trace.decisions]
        for _ in range(min(_TRIES, len(cands) * 2)):
            i = rng.choice(cands)
            try:
                sch = Schedule(workload, seed=0)
                env = replay(trace, sch, upto=i)
                options = sch.compute_location_options(sch.get(env[trace.insts[i].inputs[0]]))
            except ExplorerError:
                continue
            others = [o for o in options if o != trace.decisions[i]]
            if others:
                child = repair(trace.with_decision(i, rng.choice(others)), i, rng, workload)
                if child is not None:
                    return child
        return None


def repair(trace, after: int, rng, workload):
    """``trace`` with every ``sample_compute_location`` past instruction ``after`` whose
    decision is no longer a legal location given a legal one at random; None when the
    trace does not replay for another reason."""
    out = trace.copy()

    def check(idx, ins, env):
        if idx <= after or ins.kind != "sample_compute_location" or idx not in out.decisions:
            return
        name = sch.get(env[ins.inputs[0]])
        if not sch.compute_location_options(name, only=out.decisions[idx]):
            options = sch.compute_location_options(name)
            if options:
                out.decisions[idx] = rng.choice(options)

    sch = Schedule(workload, seed=0)
    try:
        replay(out, sch, before=check)
    except ExplorerError:
        return None
    return out
