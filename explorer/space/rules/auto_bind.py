"""Auto-bind: give every block not yet on GPU threads a blockIdx.x / threadIdx.x binding."""
from __future__ import annotations

from .. import analysis as A
from ..rule import ScheduleRule


def bind_block_thread_idx(sch, block, max_threadblocks: int, max_threads: int,
                          get_factor=None) -> bool:
    """Fuse the outer spatial loops of ``block``, split them ``[None, threads]`` and bind
    blockIdx.x / threadIdx.x (MetaSchedule's ``BindBlockThreadIdx``). ``get_factor(n)``
    gives the thread count for at most ``n`` threads (an int or an ExprRV); by default
    ``n``. A block whose loops carry threadIdx already only gets blockIdx.x. Returns
    whether anything was bound."""
    func, name = sch.func, sch.get(block)
    _, loops = A.realize_of(func, name)
    n = len(loops)
    i_block = i_thread = i_multi = -1
    i_spatial = -1
    for i, lp in enumerate(loops):
        if lp.kind == "thread" and lp.thread.startswith("blockIdx") and i_block == -1:
            i_block = i
        if lp.kind == "thread" and lp.thread.startswith("threadIdx") and i_thread == -1:
            i_thread = i
        if lp.kind != "serial" and i_multi == -1:
            i_multi = i
        if not A.is_single_stmt(lp) and i_multi == -1:
            i_multi = i + 1
        if A.loop_iter_type(func, lp.var.name) == "S" and i_spatial == i - 1:
            i_spatial += 1
    i_multi = n if i_multi == -1 else i_multi
    if i_block != -1 or i_spatial == -1:
        return False  # bound already, or no spatial loop to bind (VerifyGPUCode says so)
    rvs = sch.get_loops(block)
    if i_thread != -1:
        k = min(i_multi, i_thread, i_spatial + 1)
        if k == 0:
            return False
        sch.bind(sch.fuse(*rvs[:k]), "blockIdx.x")
        return True
    k = min(i_multi, i_spatial + 1)
    if k == 0:
        return False
    fused = sch.fuse(*rvs[:k])
    extent = A.loop_node(sch, fused).extent
    if extent <= max_threadblocks * max_threads:
        factor = min(extent, max_threads)
        factor = get_factor(factor) if get_factor is not None else factor
        outer, inner = sch.split(fused, [None, factor])
        sch.bind(outer, "blockIdx.x")
        sch.bind(inner, "threadIdx.x")
    else:
        serial, bx, tx = sch.split(fused, [None, max_threadblocks, max_threads])
        sch.reorder(bx, tx, serial)
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    return True


class AutoBind(ScheduleRule):
    """Bind unbound blocks to GPU threads; the thread count is sampled from
    ``thread_extents`` (those not above the loop extent and the target's limit)."""

    def __init__(self, max_threadblocks: int = 256, thread_extents=(32, 64, 128, 256, 512, 1024)):
        self.max_threadblocks = max_threadblocks
        self.thread_extents = tuple(thread_extents)

    def apply(self, sch, block) -> list:
        limit = getattr(self.target, "max_threads_per_block", 1024)

        def get_factor(max_extent: int):
            cands = [t for t in self.thread_extents if t <= max_extent]
            if not cands:
                return max_extent
            if len(cands) == 1:
                return cands[0]
            return sch.sample_categorical(cands, [1.0 / len(cands)] * len(cands))

        bind_block_thread_idx(sch, block, self.max_threadblocks, limit, get_factor)
        return [sch]
