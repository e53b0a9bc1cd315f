"""Mutate unroll: pick another unroll step limit."""
from __future__ import annotations

from .. import analysis as A
from ..mutator import Mutator
from ..replay import producers_of


def categorical_uses(trace, predicate) -> list:
    """Indices of ``sample_categorical`` instructions whose value some instruction uses in a
    way ``predicate(instruction, value_rv)`` accepts."""
    defined = producers_of(trace)
    out = []
    for ins in trace.insts:
        for x in _flat(ins.inputs):
            idx = defined.get(x) if _hashable(x) else None
            if (idx is not None and trace.insts[idx].kind == "sample_categorical"
                    and idx in trace.decisions and idx not in out and predicate(ins, x)):
                out.append(idx)
    return sorted(out)


def _flat(xs):
    for x in xs:
        if isinstance(x, (list, tuple)):
            yield from _flat(x)
        else:
            yield x


def _hashable(x) -> bool:
    try:
        hash(x)
        return True
    except TypeError:
        return False


def other_choice(trace, idx: int, rng, allowed=None):
    """``trace`` with categorical ``idx`` set to a different candidate, or None.
    ``allowed``: the candidate positions that may be picked (None: all)."""
    n = len(trace.insts[idx].inputs[0])
    if allowed is not None and len(allowed) < n:
        others = [k for k in allowed if k != trace.decisions[idx]]
        return trace.with_decision(idx, rng.choice(others)) if others else None
    if n < 2:
        return None
    choice = rng.randrange(n - 1)
    if choice >= trace.decisions[idx]:
        choice += 1
    return trace.with_decision(idx, choice)


def is_unroll_step(ins, x) -> bool:
    """Does ``ins`` use categorical value ``x`` as an unroll step limit?"""
    return (ins.kind == "annotate" and ins.inputs[1] in (A.UNROLL_EXPLICIT, A.UNROLL_IMPLICIT)
            and ins.inputs[2] is x)


class MutateUnroll(Mutator):
    """Change the sampled unroll step limit (``meta_schedule.unroll_explicit``) to another
    of its candidates."""

    def apply(self, trace, rng, workload):
        cands = [i for i in categorical_uses(trace, is_unroll_step)
                 if len(trace.insts[i].inputs[0]) > 1]
        return other_choice(trace, rng.choice(cands), rng) if cands else None
