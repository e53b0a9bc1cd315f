"""Add-rfactor: split a long reduction with little spatial parallelism into partial
reductions (``rfactor``) that can run in parallel."""
from __future__ import annotations

from ...errors import ScheduleError
from .. import analysis as A
from ..rule import ScheduleRule


def reorder_and_fuse_reduction_loops(sch, block) -> tuple:
    """Move the reduction loops innermost and fuse them: (fused loop, number of spatial
    loops). MetaSchedule's ``ReorderAndFuseReductionLoops``."""
    loops = sch.get_loops(block)
    kinds = [A.loop_iter_type(sch.func, sch.get(lp)) for lp in loops]
    spatial = [lp for lp, k in zip(loops, kinds) if k == "S"]
    reduce = [lp for lp, k in zip(loops, kinds) if k == "R"]
    if spatial + reduce != list(loops):
        sch.reorder(*spatial, *reduce)
    fused = sch.fuse(*reduce) if len(reduce) > 1 else reduce[0]
    return fused, len(spatial)


class AddRFactor(ScheduleRule):
    """For a reduction whose spatial extent is small next to its reduction extent: fuse the
    reduction loops, split them in two by ``sample_perfect_tile`` and ``rfactor`` at either
    part (two sketches), plus the original (a third). The original block is annotated so
    that random-compute-location also places the new rfactor block."""

    def __init__(self, max_jobs_per_core: int = 16, max_innermost_factor: int = 64):
        self.max_jobs_per_core = max_jobs_per_core
        self.max_innermost_factor = max_innermost_factor

    def apply(self, sch, block) -> list:
        cores = max(1, getattr(self.target, "num_cores", 1) or 1)
        if not A.needs_rfactor(sch.func, sch.get(block), self.max_jobs_per_core * cores, cores):
            return [sch]
        original = sch.copy()
        fused, n_spatial = reorder_and_fuse_reduction_loops(sch, block)
        factors = sch.sample_perfect_tile(fused, n=2,
                                          max_innermost_factor=self.max_innermost_factor)
        parts = sch.split(fused, factors)
        out = []
        for part in parts:
            tmp = sch.copy()
            try:
                tmp.rfactor(part, n_spatial)
            except ScheduleError:
                continue
            tmp.annotate(block, A.RANDOM_COMPUTE_PRODUCER, 1)
            out.append(tmp)
        return out + [original]
