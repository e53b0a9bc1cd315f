"""Rewrite reduction blocks: initialize once before the reduction loops."""
from __future__ import annotations

from ...schedule.tree import block_names
from .. import analysis as A
from ..postproc import Postproc


class RewriteReductionBlock(Postproc):
    """``decompose_reduction`` every reduction at its outermost non-spatial loop, so the
    init runs in its own loop nest instead of behind an ``if k == 0`` in every
    iteration. Reductions run across threads (threadIdx-bound reduction loops) keep
    their init, as in MetaSchedule."""

    def apply(self, sch) -> None:
        for name in block_names(sch.func):
            r, loops = A.realize_of(sch.func, name)
            if r.block.init is None or _cross_thread(sch.func, r, loops):
                continue
            kinds = [A.loop_iter_type(sch.func, lp.var.name) for lp in loops]
            point = next((i for i, k in enumerate(kinds) if k != "S"), None)
            if point is None:
                continue
            block = sch.get_block(name)
            sch.decompose_reduction(block, sch.get_loops(block)[point])


def _cross_thread(func, realize, loops) -> bool:
    from ...ir.functor import expr_vars
    red_vars = set()
    for iv, val in zip(realize.block.iter_vars, realize.iter_values):
        if iv.kind == "R":
            red_vars |= expr_vars(val)
    return any(lp.kind == "thread" and lp.var.name in red_vars for lp in loops)
