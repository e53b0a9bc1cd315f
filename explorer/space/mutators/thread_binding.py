"""Mutate thread binding: pick another number of threads for an auto-bound loop."""
from __future__ import annotations

from ..mutator import Mutator
from .unroll import categorical_uses, other_choice


class MutateThreadBinding(Mutator):
    """Change a sampled thread count: a ``sample_categorical`` whose value splits a loop
    whose part is then bound to threadIdx.x (auto-bind, cross-thread reduction).
    Only counts within the target's ``max_threads_per_block`` are picked (the rules
    sample among those only; a trace made for another target may hold more)."""

    def apply(self, trace, rng, workload):
        cands = [i for i in thread_counts(trace) if len(trace.insts[i].inputs[0]) > 1]
        if not cands:
            return None
        idx = rng.choice(cands)
        allowed = None
        limit = getattr(self.target, "max_threads_per_block", None)
        if limit is not None:
            allowed = [k for k, n in enumerate(trace.insts[idx].inputs[0])
                       if isinstance(n, int) and n <= limit]
        return other_choice(trace, idx, rng, allowed)


def thread_counts(trace) -> list:
    """Indices of the ``sample_categorical`` instructions whose value is the factor of a
    split whose part is bound to threadIdx (what ``MutateThreadBinding`` changes)."""
    bound = {ins.inputs[0] for ins in trace.insts
             if ins.kind == "bind" and ins.inputs[1].startswith("threadIdx")}

    def splits_bound_loop(ins, x) -> bool:
        if ins.kind != "split":
            return False
        return any(f is x and out in bound for f, out in zip(ins.inputs[1], ins.outputs))
    return categorical_uses(trace, splits_bound_loop)
