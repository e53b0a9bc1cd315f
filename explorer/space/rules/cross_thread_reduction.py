"""Cross-thread reduction (GPU): let the threads of a block share one reduction."""
from __future__ import annotations

from ...schedule.loop_prims import CROSS_THREAD_REDUCTION
from .. import analysis as A
from ..rule import ScheduleRule
from .add_rfactor import reorder_and_fuse_reduction_loops


class CrossThreadReduction(ScheduleRule):
    """For a reduction with little spatial parallelism: fuse its reduction loops, split
    them ``[None, t]`` with ``t`` sampled from ``thread_extents`` and bind the inner part
    to threadIdx.x (a sketch), besides the unchanged schedule (another). The block is
    annotated ``cross_thread_reduction`` first: ``bind`` refuses a reduction loop on
    threads otherwise, and marks the bound loop for the code generator.

    Differs from MetaSchedule: no fusion of the reduction into its consumer's loops
    (MetaSchedule's step 3); the reduction keeps a kernel of its own.
    """

    def __init__(self, thread_extents=(4, 8, 16, 32, 64, 128, 256, 512)):
        self.thread_extents = tuple(thread_extents)

    def apply(self, sch, block) -> list:
        t = self.target
        if t is None or not t.is_gpu:
            return [sch]
        if not A.needs_rfactor(sch.func, sch.get(block), t.max_threads_per_block, t.warp_size):
            return [sch]
        cands = [x for x in self.thread_extents if x <= t.max_threads_per_block]
        if not cands:
            return [sch]
        new = sch.copy()
        extent = new.sample_categorical(cands, [1.0 / len(cands)] * len(cands))
        fused, _ = reorder_and_fuse_reduction_loops(new, block)
        _, inner = new.split(fused, [None, extent])
        # declared, so that bind accepts a reduction loop on threads and marks it for the
        # code generator (a reduction loop bound without it is a race)
        new.annotate(block, CROSS_THREAD_REDUCTION, 1)
        new.bind(inner, "threadIdx.x")
        return [new, sch]
