"""Lowering: from the scheduled loop/block tree to the plain loop nest.

What happens here, in order:
1. every block is replaced by its stores with the iteration variables
   substituted by their bindings; a block predicate (from a split that does
   not divide, or a region larger than the buffer) becomes an ``if``; the init
   of a reduction that was not decomposed runs under ``if <reduce vars> == 0``;
2. every intermediate buffer is *compacted*: allocated at the lowest loop that
   encloses all its accesses and shrunk to the region touched per iteration of
   that loop, with indices rebased (``_alloc_point``, ``_compact``). On a GPU
   the placement follows who shares the buffer:

   - ``shared``: one copy per thread block, so it is hoisted above the
     threadIdx/vthread loops around its accesses. Hoisting must not widen it
     over the serial loops *inside* those thread loops: in
     ``for tx: for k_0: fetch A_shared[.., k_0*8 : k_0*8+8]; use it`` every
     thread runs iteration ``k_0`` together (the code generator puts a barrier
     after the fetch and before the next one overwrites it), so the buffer
     holds one iteration's tile. Rule: the region is taken with the
     allocation loops *and* the serial/unrolled loops common to all accesses
     below the first hoisted thread loop held fixed (only the thread loops
     and the loops not common to all accesses vary); its lower bound, which
     may then depend on such a loop (``k_0*8``), is subtracted from every
     index. A loop across which the buffer carries data stops this: a
     reduction accumulating into the buffer over it, or a read in one
     iteration of what another wrote (then the loop varies too, from the
     innermost such loop outwards, as for the allocation point itself);
   - ``local``: private to a thread, so always allocated inside the
     threadIdx loops around its accesses. A virtual thread's registers are
     the real thread's, so it is hoisted above a vthread loop only when no
     threadIdx loop is inside that vthread loop (order threadIdx > vthread);
     its indices keep their vthread term, so each virtual thread owns its
     part and none overlaps another's. With the tiling order blockIdx >
     vthread > threadIdx it is allocated per (vthread, thread) pair;
   - ``global`` (an intermediate between kernels): above every thread loop,
     widened over everything below (blocks do not synchronize, so it is never
     reused across iterations of a loop inside them);
3. index expressions are simplified with the loop ranges known.

The result is a ``PrimFunc`` whose body holds only ``For``, ``SeqStmt``,
``IfThenElse``, ``Allocate`` and ``BufferStore``: what the interpreter and the
code generators consume.
"""
from __future__ import annotations

from .errors import LowerError
from .ir.arith import NonAffine, from_lin, int_bounds, lin_diff, simplify
from .ir.expr import EQ, Buffer, BufferLoad, Expr, IntImm, all_of, conjuncts, const, is_true
from .ir.region import full_region, union_region
from .ir.functor import (collect_loads, expr_vars, replace_loads, substitute, transform_stmt,
                         walk_stmt)
from .ir.stmt import (Allocate, BlockRealize, BufferStore, For, IfThenElse, PrimFunc, SeqStmt, Stmt,
                      seq)


def lower(func) -> PrimFunc:
    """Lower a PrimFunc or a Schedule to a plain loop nest."""
    func = getattr(func, "func", func)
    if not isinstance(func, PrimFunc):
        raise LowerError(f"lower takes a PrimFunc or a Schedule, not {type(func).__name__}")
    if dict(func.attrs).get("lowered"):
        return func
    carry = _carried_loops(func)
    body = _lower_blocks(func.body, {})
    body = _compact(body, func, carry)
    return PrimFunc(func.name, func.params, body, (), func.attrs + (("lowered", True),))


# ------------------------------------------------------------------ blocks

def _lower_blocks(s: Stmt, ranges: dict) -> Stmt:
    if isinstance(s, For):
        inner = dict(ranges)
        inner[s.var.name] = (0, s.extent - 1)
        return s.with_(body=_lower_blocks(s.body, inner))
    if isinstance(s, BlockRealize):
        return _lower_realize(s, ranges)
    if isinstance(s, SeqStmt):
        return seq([_lower_blocks(x, ranges) for x in s.stmts])
    raise LowerError(f"unexpected {type(s).__name__} in a scheduled function")


def _sub_store(st: BufferStore, bind: dict, ranges: dict) -> BufferStore:
    return BufferStore(st.buffer, _simplify_loads(substitute(st.value, bind), ranges),
                       tuple(simplify(substitute(i, bind), ranges) for i in st.indices))


def _simplify_loads(e: Expr, ranges: dict) -> Expr:
    return replace_loads(e, lambda ld: BufferLoad(
        ld.buffer, tuple(simplify(i, ranges) for i in ld.indices)))


def _lower_realize(r: BlockRealize, ranges: dict) -> Stmt:
    """The block's stores under its guards. The init of a reduction runs at every
    spatial point the predicate admits, whatever the reduction's own conditions
    (parts of the predicate on reduce loops, ``reduce_where``) say: a partial sum
    whose reduction is empty must still start from the init value."""
    b = r.block
    bind = {iv.var.name: v for iv, v in zip(b.iter_vars, r.iter_values)}
    r_loops = set()
    for iv, v in zip(b.iter_vars, r.iter_values):
        if iv.kind == "R":
            r_loops |= expr_vars(v)
    spatial, reduce = [], []
    for c in conjuncts(simplify(r.predicate, ranges)):
        (reduce if expr_vars(c) & r_loops else spatial).append(c)
    update_cond = simplify(all_of(*reduce, substitute(b.reduce_where, bind)), ranges)
    body: Stmt = _sub_store(b.body, bind, ranges)
    if not is_true(update_cond):
        body = IfThenElse(update_cond, body)
    if b.init is not None:
        first = all_of(*[EQ(simplify(v, ranges), const(0))
                         for iv, v in zip(b.iter_vars, r.iter_values) if iv.kind == "R"])
        first = simplify(first, ranges)
        init = _sub_store(b.init, bind, ranges)
        body = seq([init if is_true(first) else IfThenElse(first, init), body])
    pred = simplify(all_of(*spatial), ranges)
    if not is_true(pred):
        body = IfThenElse(pred, body)
    return body


# -------------------------------------------------------------- compaction

def _carried_loops(func: PrimFunc) -> dict:
    """buffer name -> loops across whose iterations a reduction carries its value
    (the buffer must outlive them: it is allocated above the outermost)."""
    carry: dict = {}
    for node, path in walk_stmt(func.body):
        if not isinstance(node, BlockRealize) or not node.block.is_reduction:
            continue
        r_vars = set()
        for iv, v in zip(node.block.iter_vars, node.iter_values):
            if iv.kind == "R":
                r_vars |= expr_vars(v)
        names = {p.var.name for p in path if isinstance(p, For) and p.var.name in r_vars}
        carry.setdefault(node.block.body.buffer.name, set()).update(names)
    return carry


_HOIST = {"shared": ("threadIdx", "vthread"), "local": ("vthread",),
          "global": ("threadIdx", "vthread", "blockIdx")}
# scopes whose buffer, hoisted above thread loops, is still sized per iteration of the
# serial loops inside them (the threads sharing it run those iterations in step)
_PER_ITERATION = ("shared", "local")


def _accesses(body: Stmt) -> tuple:
    """(all, writes): buffer name -> list of (loop path, indices) of its loads and
    stores, and of its stores alone."""
    acc: dict = {}
    writes: dict = {}
    for node, path in walk_stmt(body):
        exprs = []
        if isinstance(node, BufferStore):
            site = ([p for p in path if isinstance(p, For)], node.indices)
            acc.setdefault(node.buffer.name, []).append(site)
            writes.setdefault(node.buffer.name, []).append(site)
            exprs = [node.value, *node.indices]
        elif isinstance(node, IfThenElse):
            exprs = [node.cond]
        for e in exprs:
            for ld in collect_loads(e):
                acc.setdefault(ld.buffer.name, []).append(
                    ([p for p in path if isinstance(p, For)], ld.indices))
    return acc, writes


def _covers(outer: list, inner: list, all_ranges: dict) -> bool:
    """Is region ``inner`` provably inside region ``outer`` (both [(lo, extent)])?"""
    for (lo_o, ext_o), (lo_i, ext_i) in zip(outer, inner):
        try:
            if int_bounds(simplify(lo_i - lo_o), all_ranges)[0] < 0:
                return False
            if int_bounds(simplify(lo_o + ext_o - lo_i - ext_i), all_ranges)[0] < 0:
                return False
        except NonAffine:
            return False
    return True


def _alloc_point(paths: list, scope: str, carried: set = frozenset()) -> tuple:
    """(allocation loops, inner loops held fixed): the buffer is allocated in the
    innermost of the first and sized per iteration of both (see the docstring)."""
    common = paths[0]
    for p in paths[1:]:
        n = 0
        while n < len(common) and n < len(p) and common[n].var == p[n].var:
            n += 1
        common = common[:n]
    hoist = _HOIST.get(scope, ())
    for n, loop in enumerate(common):
        if loop.var.name in carried:
            return list(common[:n]), []
        if loop.kind == "thread" and loop.thread.split(".")[0] in hoist:
            if scope == "local" and any(lp.kind == "thread" and lp.thread.startswith("threadIdx")
                                        for lp in common[n:]):
                continue    # never above the threads that own it
            inner = []
            if scope in _PER_ITERATION:
                for lp in common[n:]:
                    if lp.var.name in carried:
                        break
                    if lp.kind in ("serial", "unrolled"):
                        inner.append(lp)
            return list(common[:n]), inner
    return list(common), []


def _region(buf: Buffer, sites: list, point: list, all_ranges: dict):
    """Per dimension (lo, extent) of what ``sites`` touch per iteration of ``point``."""
    fixed = {lp.var.name for lp in point}
    prepared = [(idx, {lp.var.name: (0, lp.extent - 1) for lp in path
                       if lp.var.name not in fixed}) for path, idx in sites]
    return union_region(prepared, buf.shape, all_ranges)


def _minus(i: Expr, lo: Expr) -> Expr:
    """``simplify(i - lo)``; for int32 indices from the linear forms, without the node."""
    if i.dtype == "int32" and lo.dtype == "int32":
        return from_lin(*lin_diff(i, lo))
    return simplify(i - lo, None)


def _compact(body: Stmt, func: PrimFunc, carry: dict) -> Stmt:
    acc, writes = _accesses(body)
    all_ranges = {n.var.name: (0, n.extent - 1) for n, _ in walk_stmt(body) if isinstance(n, For)}
    plan: dict = {}
    allocs: dict = {}
    for buf in func.alloc_buffers:
        sites = acc.get(buf.name)
        if not sites:
            continue
        point, inner = _alloc_point([p for p, _ in sites], buf.scope,
                                    carry.get(buf.name, set()))
        # per iteration of the point (and of the inner loops held fixed), what is read
        # must have been written in that iteration; otherwise data flows across
        # iterations: let the innermost fixed loop vary, then allocate higher
        region = None
        while point or inner:
            fixed = point + inner
            wr = _region(buf, writes.get(buf.name, []), fixed, all_ranges)
            rd = _region(buf, sites, fixed, all_ranges)
            if wr is not None and rd is not None and _covers(wr, rd, all_ranges):
                region = rd     # the region at the point found
                break
            if inner:
                inner = inner[:-1]
            else:
                point = point[:-1]
        else:
            region = _region(buf, sites, [], all_ranges)
        if region is None:
            region = full_region(buf.shape)
        new_buf = buf.with_(shape=tuple(ext for _, ext in region))
        plan[buf.name] = (new_buf, [lo for lo, _ in region])
        key = point[-1].var.name if point else None
        allocs.setdefault(key, []).append(new_buf)

    def shift(buf, idx):
        new_buf, los = plan[buf.name]
        return new_buf, tuple(i if isinstance(lo, IntImm) and lo.value == 0 else _minus(i, lo)
                              for i, lo in zip(idx, los))

    def rewrite_expr(e):
        def fn(ld):
            if ld.buffer.name in plan:
                return BufferLoad(*shift(ld.buffer, ld.indices))
            return None
        return replace_loads(e, fn)

    def rewrite(s):
        if isinstance(s, BufferStore):
            buf, idx = s.buffer, s.indices
            if buf.name in plan:
                buf, idx = shift(buf, idx)
            return BufferStore(buf, rewrite_expr(s.value), tuple(rewrite_expr(i) for i in idx))
        if isinstance(s, IfThenElse):
            return s.with_(cond=rewrite_expr(s.cond))
        if isinstance(s, For) and s.var.name in allocs:
            inner = s.body
            for b in reversed(allocs[s.var.name]):
                inner = Allocate(b, inner)
            return s.with_(body=inner)
        return None

    body = transform_stmt(body, rewrite)
    for b in reversed(allocs.get(None, [])):
        body = Allocate(b, body)
    return body

