"""Rewrite parallel / vectorize / unroll annotations into loop kinds."""
from __future__ import annotations

from ...ir.functor import iter_nodes
from ...ir.stmt import BlockRealize, For, SeqStmt
from ...schedule.tree import block_names, realizes_in
from .. import analysis as A
from ..postproc import Postproc

MAX_UNROLL_DEPTH = 8


class RewriteParallelVectorizeUnroll(Postproc):
    """For every block annotated by ``ParallelizeVectorizeUnroll`` (MetaSchedule's
    ``AdjustParallelVectorize`` and ``RewriteUnroll``):

    - fuse the outer spatial loops until their product exceeds the parallel limit (or a
      loop holds more than one statement) and make the fused loop ``parallel``;
    - fuse the inner spatial loops while their product stays within the vector limit
      and the accesses stay contiguous, and ``vectorize`` the fused loop;
    - annotate the outermost loop ``pragma_auto_unroll_max_step = n`` and unroll, from the
      innermost out, the serial loops whose unrolled body stays within ``n`` statements
      (a vectorized loop counts as one statement, as in TVM, where it is already a vector
      instruction when loops are unrolled)::

        for i in range(64): for j in range(64): for k in range(64): C += ...
        -> for i in parallel(64): for k in range(64): for j in vectorized(64): ...

    Loops are unrolled after every block's parallel and vector loops are fixed, so an
    unroll never takes a loop another block would vectorize.
    """

    def apply(self, sch) -> None:
        unrolls = []
        for name in block_names(sch.func):
            anns = A.block_annotations(sch.func, name)
            keys = [k for k in (A.PARALLEL, A.VECTORIZE, A.UNROLL_EXPLICIT, A.UNROLL_IMPLICIT)
                    if k in anns]
            if not keys:
                continue
            block = sch.get_block(name)
            for k in keys:
                sch.unannotate(block, k)
            loops = sch.get_loops(block)
            if not loops:
                continue
            n_par, n_vec = plan_parallel_vectorize(sch.func, name, anns.get(A.PARALLEL),
                                                   anns.get(A.VECTORIZE))
            if n_par > 0:
                fused = sch.fuse(*loops[:n_par])
                sch.parallel(fused)
                loops = [fused] + loops[n_par:]
            if n_vec > 0:
                fused = sch.fuse(*loops[len(loops) - n_vec:])
                sch.vectorize(fused)
                loops = loops[:len(loops) - n_vec] + [fused]
            step = anns.get(A.UNROLL_EXPLICIT, anns.get(A.UNROLL_IMPLICIT))
            reduction = A.realize_of(sch.func, name)[0].block.is_reduction
            if step and step > 0 and reduction:
                unrolls.append((loops[0], int(step), A.UNROLL_EXPLICIT in anns))
        for loop, step, explicit in unrolls:
            self._unroll(sch, loop, step, explicit)

    @staticmethod
    def _unroll(sch, loop, step: int, explicit: bool) -> None:
        node = A.loop_node(sch, loop)
        if A.AUTO_UNROLL_MAX_STEP in dict(node.annotations):
            return
        sch.annotate(loop, A.AUTO_UNROLL_MAX_STEP, step)
        sch.annotate(loop, A.UNROLL_EXPLICIT_PRAGMA, int(explicit))
        node = A.loop_node(sch, loop)
        todo = set(unroll_plan(node, step)[3])
        # the kinds under ``loop`` as they are now: only the unrolls below change them,
        # each loop once; asking ``sch.func`` would apply each unroll as it comes
        serial = {lp.var.name for lp in iter_nodes(node)
                  if type(lp) is For and lp.kind == "serial"}
        for r in realizes_in(node):
            if not todo:
                break
            block = sch.get_block(r.block.name)
            for lp in sch.get_loops(block):
                name = sch.get(lp)
                if name in todo and name in serial:
                    sch.unroll(lp)
                    todo.discard(name)


def plan_parallel_vectorize(func, block: str, max_parallel, max_vector) -> tuple:
    """(number of outer loops to fuse and parallelize, number of inner loops to fuse and
    vectorize); 0 or -1 when none."""
    n_par = n_vec = -1
    if not max_parallel and not max_vector:
        return n_par, n_vec
    _, loops = A.realize_of(func, block)
    n = len(loops)
    known: dict = {}

    def kind_of(lp) -> str:     # on demand: each costs a walk of the blocks under lp
        if lp.var.name not in known:
            known[lp.var.name] = A.loop_iter_type(func, lp.var.name)
        return known[lp.var.name]

    if max_parallel:
        n_par, prod = 0, 1
        for lp in loops:
            if not A.is_free(lp) or kind_of(lp) != "S":
                break
            n_par += 1
            prod *= lp.extent
            if prod > max_parallel or not A.is_single_stmt(lp):
                break
        n_par = -1 if prod == 1 else n_par
    if max_vector:
        max_fusible = A.vectorizable_depth(func, block)
        n_vec, prod = 0, 1
        for lp in reversed(loops):
            if (n_vec >= max_fusible or not A.is_free(lp) or not A.is_single_stmt(lp)
                    or kind_of(lp) != "S"):
                break
            prod *= lp.extent
            if prod > max_vector:
                break
            n_vec += 1
        n_vec = -1 if prod == 1 else n_vec
    if n_par != -1 and n_vec != -1:
        n_par = min(n_par, n - n_vec)
    return n_par, n_vec


def unroll_plan(stmt, max_step: int) -> tuple:
    """TVM's ``UnrollLoop`` decision over ``stmt``: (statements when unrolled, depth of
    loops kept, depth of loops unrolled, names of the loops to unroll)."""
    if isinstance(stmt, BlockRealize):
        return 1, 0, 0, []
    if isinstance(stmt, SeqStmt):
        steps, normal, depth, names = 0, 0, 0, []
        for s in stmt.stmts:
            a, b, c, d = unroll_plan(s, max_step)
            steps, normal, depth, names = steps + a, max(normal, b), max(depth, c), names + d
        return steps, normal, depth, names
    assert isinstance(stmt, For)
    steps, normal, depth, names = unroll_plan(stmt.body, max_step)
    if stmt.kind == "vectorized":
        return steps, normal, depth, names
    auto = (stmt.kind == "serial" and normal == 0 and depth <= MAX_UNROLL_DEPTH
            and stmt.extent * steps <= max_step)
    if auto or stmt.kind == "unrolled":
        return steps * stmt.extent, normal, depth + 1, names + ([stmt.var.name] if auto else [])
    return steps, normal + 1, depth, names
