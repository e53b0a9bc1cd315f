"""Parallel-vectorize-unroll: mark the function for parallel outer loops, vector inner
loops and a sampled unroll depth; the postprocessor of the same name does the work."""
from __future__ import annotations

from ...schedule.tree import block_names, realizes_under
from ..analysis import PARALLEL, UNROLL_EXPLICIT, UNROLL_IMPLICIT, VECTORIZE
from ..rule import ScheduleRule


class ParallelizeVectorizeUnroll(ScheduleRule):
    """Annotate every block with the largest parallel extent (``max_jobs_per_core`` x
    cores), the largest vector extent, and an unroll step limit sampled uniformly from
    ``unroll_max_steps`` (not sampled when the function has no reduction).

    MetaSchedule annotates its root block; we have no root block, so every block of
    the function carries the same values (one ``sample_categorical`` for all, as there).
    ``RewriteParallelVectorizeUnroll`` turns the annotations into loop kinds.
    """

    def __init__(self, max_jobs_per_core: int = 16, max_vectorize_extent: int = 64,
                 unroll_max_steps=(0, 16, 64, 512), unroll_explicit: bool = True):
        self.max_jobs_per_core = max_jobs_per_core
        self.max_vectorize_extent = max_vectorize_extent
        self.unroll_max_steps = tuple(unroll_max_steps)
        self.unroll_explicit = unroll_explicit

    def apply(self, sch, block) -> list:
        return [sch]

    def apply_root(self, sch) -> list:
        blocks = [sch.get_block(n) for n in block_names(sch.func)]
        parallel = None
        if self.max_jobs_per_core > 0:
            cores = max(1, getattr(self.target, "num_cores", 1) or 1)
            parallel = self.max_jobs_per_core * cores
        step = None
        has_reduction = any(r.block.is_reduction for r, _ in realizes_under(sch.func.body))
        if self.unroll_max_steps and has_reduction:
            n = len(self.unroll_max_steps)
            step = sch.sample_categorical(list(self.unroll_max_steps), [1.0 / n] * n)
        key = UNROLL_EXPLICIT if self.unroll_explicit else UNROLL_IMPLICIT
        for b in blocks:
            if parallel is not None:
                sch.annotate(b, PARALLEL, parallel)
            if self.max_vectorize_extent > 0:
                sch.annotate(b, VECTORIZE, self.max_vectorize_extent)
            if step is not None:
                sch.annotate(b, key, step)
        return [sch]
