"""Rewrite cooperative fetch: the threads of a block copy a shared tile together."""
from __future__ import annotations

from ...errors import PostprocError
from ...schedule.tree import block_names, find_block, loops_of
from .. import analysis as A
from ..postproc import Postproc


class RewriteCooperativeFetch(Postproc):
    """For each cache block annotated ``meta_schedule.cooperative_fetch = v``: split its
    fused copy loop ``[None, threads, v]``, bind the middle to threadIdx.x (the extent of
    the threadIdx.x loop around it) and vectorize the inner (``v`` drops to 1 when it
    does not divide the copy)::

        for ax_fused in range(2048):                    # annotated, v = 4
        ->  for o in range(4): for t in thread_binding(128, "threadIdx.x"): for v in vectorized(4)
    """

    def apply(self, sch) -> None:
        for name in block_names(sch.func):
            anns = A.block_annotations(sch.func, name)
            if A.COOPERATIVE_FETCH not in anns:
                continue
            vec = int(anns[A.COOPERATIVE_FETCH])
            _, path = find_block(sch.func, name)
            threads = [lp.extent for lp in loops_of(path)
                       if lp.kind == "thread" and lp.thread == "threadIdx.x"]
            if not threads:
                raise PostprocError(f"cooperative fetch of block {name!r}: no threadIdx.x loop "
                                    "around it to share the copy; bind the tile first")
            block = sch.get_block(name)
            sch.unannotate(block, A.COOPERATIVE_FETCH)
            fused = sch.get_loops(block)[-1]
            if A.loop_node(sch, fused).extent % vec:
                vec = 1
            if vec > 1:
                _, tx, inner = sch.split(fused, [None, threads[-1], vec])
                sch.vectorize(inner)
            else:
                _, tx = sch.split(fused, [None, threads[-1]])
            sch.bind(tx, "threadIdx.x")
