"""Mutate categorical: pick another candidate of a sampled choice no other mutator owns."""
from __future__ import annotations

from ...errors import ExplorerError
from ...schedule import Schedule
from ..mutator import Mutator
from ..replay import replay
from .thread_binding import thread_counts
from .tile_size import is_fetch_length
from .unroll import categorical_uses, is_unroll_step, other_choice

_TRIES = 8


class MutateCategorical(Mutator):
    """Change one ``sample_categorical`` decision to another of its candidates, among
    those the other default mutators do not change: unroll steps (``MutateUnroll``),
    cooperative-fetch vector lengths (``MutateTileSize``) and thread counts
    (``MutateThreadBinding``) are theirs. What is left are the rules' own choices, which
    without this a candidate kept as it was sampled: the memory-bound rule's software
    prefetch distance and streaming stores (annotation values), its row reductions'
    accumulator width and its streamed transposes' tile and run lengths (split factors)::

        v3 = sch.sample_categorical([0, 1, 2], probs, decision=0)   # no prefetch
        ->  decision=2                                               # two rows ahead

    TVM's MetaSchedule has no such mutator (its only categorical one is
    ``MutateUnroll``); its rules' other categorical choices are sampled once per
    candidate. A choice that only an annotation reads leaves the loop nest's shape as
    it was; one that is a split factor changes the extents of the loops it splits, so
    the child is replayed, and a choice with which it no longer replays (a later
    sampled tiling of a loop whose extent changed) is not proposed: another choice or
    another categorical is drawn, up to ``_TRIES``; None when none replays."""

    def apply(self, trace, rng, workload):
        cands = free_categoricals(trace)
        if not cands:
            return None
        shaping = set(categorical_uses(trace, lambda ins, x: ins.kind != "annotate"))
        for _ in range(_TRIES):
            idx = rng.choice(cands)
            child = other_choice(trace, idx, rng)
            if child is not None and (idx not in shaping or _replays(child, workload)):
                return child
        return None


def free_categoricals(trace) -> list:
    """Indices of the decided ``sample_categorical`` instructions of more than one
    candidate that no other mutator owns (see ``MutateCategorical``)."""
    owned = set(categorical_uses(trace, lambda ins, x: is_unroll_step(ins, x)
                                 or is_fetch_length(ins, x)))
    owned |= set(thread_counts(trace))
    return [i for i in trace.sampling_indices()
            if trace.insts[i].kind == "sample_categorical" and i in trace.decisions
            and i not in owned and len(trace.insts[i].inputs[0]) > 1]


def _replays(trace, workload) -> bool:
    try:
        replay(trace, Schedule(workload, seed=0))
    except ExplorerError:
        return False
    return True
