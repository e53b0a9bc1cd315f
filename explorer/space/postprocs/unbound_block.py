"""Rewrite unbound blocks: nothing runs on a GPU outside a thread binding."""
from __future__ import annotations

from ...schedule.tree import block_names, find_block, loops_of
from ..postproc import Postproc
from ..rules.auto_bind import bind_block_thread_idx


class RewriteUnboundBlock(Postproc):
    """Bind every block that no rule bound (no blockIdx/threadIdx loop around it) to
    blockIdx.x x threadIdx.x, with as many threads as the target allows
    (only blockIdx.x when threadIdx is bound already)."""

    def __init__(self, max_threadblocks: int = 256):
        self.max_threadblocks = max_threadblocks

    def apply(self, sch) -> None:
        limit = getattr(self.target, "max_threads_per_block", 1024)
        for name in block_names(sch.func):
            _, path = find_block(sch.func, name)
            if any(lp.kind == "thread" and lp.thread.startswith("blockIdx")
                   for lp in loops_of(path)):
                continue
            bind_block_thread_idx(sch, sch.get_block(name), self.max_threadblocks, limit)
