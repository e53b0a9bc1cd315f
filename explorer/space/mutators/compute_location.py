"""Mutate compute location: move a block to another legal place."""
from __future__ import annotations

from ...errors import ExplorerError
from ...schedule import Schedule
from ..mutator import Mutator
from ..replay import replay

_TRIES = 8


class MutateComputeLocation(Mutator):
    """Replay the trace up to a ``sample_compute_location``, list the places where its
    block may go there (inline, root, a loop of its consumer), and pick another one."""

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
                return trace.with_decision(i, rng.choice(others))
        return None
