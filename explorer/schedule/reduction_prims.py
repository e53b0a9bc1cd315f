"""Reduction primitives: decompose_reduction (init as its own block) and rfactor."""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir.arith import simplify
from ..ir.expr import Add, BufferLoad, Max, Min, Var, all_of, conjuncts
from ..ir.functor import expr_vars, substitute
from ..ir.stmt import Block, BlockRealize, BufferStore, For, IterVar, TRUE
from .block_prims import insert_reader_after
from .tree import (Namer, children, body_of, find_block, find_loop, insert_in, iter_dims,
                   loops_of, realizes_under, replace_block)


def decompose_reduction(func, block: str, loop: str):
    """Move the init of reduction ``block`` into a new block ``<block>_init`` placed
    before ``loop``, looping over the spatial loops from ``loop`` inwards."""
    real, path = find_block(func, block, "decompose_reduction")
    b = real.block
    if b.init is None:
        raise ScheduleError(f"decompose_reduction: block {block!r} has no init (not a "
                            "reduction, or already decomposed)")
    loops = loops_of(path)
    names = [lp.var.name for lp in loops]
    if loop not in names:
        raise ScheduleError(f"decompose_reduction: loop {loop!r} is not an ancestor of block "
                            f"{block!r}")
    inner = loops[names.index(loop):]
    s_vars, r_vars = set(), set()
    for iv, val in zip(b.iter_vars, real.iter_values):
        (s_vars if iv.kind == "S" else r_vars).update(expr_vars(val))
    for lp in loops[:names.index(loop)]:
        if lp.var.name in r_vars:
            raise ScheduleError(f"decompose_reduction: loop {lp.var.name!r} outside {loop!r} "
                                f"iterates the reduction of {block!r}; the init would run on "
                                "every one of its iterations: decompose at or above it")
    namer = Namer(func)
    mapping, new_loops = {}, []
    for lp in inner:
        n = lp.var.name
        if n in s_vars and n in r_vars:
            raise ScheduleError(f"decompose_reduction: loop {n!r} binds both spatial and "
                                f"reduction variables of {block!r}; split them apart first")
        if n in s_vars:
            v = Var(namer(f"{n}_init"))
            mapping[n] = v
            new_loops.append(lp.with_(var=v))
    r_loop_names = {lp.var.name for lp in inner} - set(mapping)
    if not _injective(real, [lp for lp in inner if lp.var.name not in r_vars]):
        raise ScheduleError(f"decompose_reduction: under loop {loop!r} block {block!r} computes "
                            "some elements more than once (a recomputing compute_at?); the init "
                            "would run once for several reductions: decompose inside that loop")
    preds = [c for c in conjuncts(real.predicate) if not expr_vars(c) & r_loop_names]
    ivs = tuple(iv for iv in b.iter_vars if iv.kind == "S")
    vals = tuple(substitute(v, mapping) for iv, v in zip(b.iter_vars, real.iter_values)
                 if iv.kind == "S")
    init_block = Block(namer(f"{block}_init"), ivs, b.init)
    stmt = BlockRealize(vals, simplify(substitute(all_of(*preds), mapping)), init_block)
    for lp in reversed(new_loops):
        stmt = lp.with_(body=stmt)
    out = replace_block(func, block, real.with_(block=b.with_(init=None)))
    parent = loops[names.index(loop) - 1].var.name if names.index(loop) > 0 else None
    kids = children(body_of(out, parent))
    pos = next(i for i, k in enumerate(kids) if isinstance(k, For) and k.var.name == loop)
    return insert_in(out, parent, pos, stmt), init_block.name


def _injective(real, loops: list, limit: int = 1 << 20) -> bool:
    """Do the spatial bindings take each value at most once as ``loops`` vary
    (points the predicate excludes do not count)? Proved for affine keys, else
    enumerated with numpy."""
    n = 1
    for lp in loops:
        n *= lp.extent
    if n > limit:
        return False
    return _distinct_keys(real, loops) or _enumerated_injective(real, loops)


def _enumerated_injective(real, loops: list) -> bool:
    """``_injective`` by listing every point of ``loops``."""
    import numpy as np
    from ..ir.eval import evaluate
    n = 1
    for lp in loops:
        n *= lp.extent
    grids = np.meshgrid(*[np.arange(lp.extent) for lp in loops], indexing="ij") if loops else []
    env = {lp.var.name: g.ravel() for lp, g in zip(loops, grids)}
    size = n
    keys, mult = np.zeros(size, dtype=np.int64), 1
    for iv, v in zip(real.block.iter_vars, real.iter_values):
        if iv.kind != "S":
            continue
        vals = np.broadcast_to(evaluate(v, env, default=0), (size,))
        keys = keys + vals.astype(np.int64) * mult
        mult *= iv.extent + 1
    pred = np.broadcast_to(evaluate(real.predicate, env, default=0), (size,)).astype(bool)
    keys = keys[pred]
    return len(np.unique(keys)) == len(keys)


def _distinct_keys(real, loops: list) -> bool:
    """True when the key ``_injective`` enumerates, ``sum(binding * mult)`` over the
    spatial variables, is provably distinct at every point of ``loops`` without listing
    them: an affine function ``c + sum(a_j * x_j)`` of the loops with each ``|a_j|``
    larger than the span of the smaller ones (a mixed radix). False: not proved, then
    the points are enumerated."""
    from ..ir.arith import linear_terms
    coefs: dict = {}
    mult = 1
    names = {lp.var.name for lp in loops}
    for iv, v in zip(real.block.iter_vars, real.iter_values):
        if iv.kind != "S":
            continue
        atoms: list = []
        linear_terms(v, mult, coefs, atoms)
        if any(expr_vars(a) & names for _, a in atoms):   # others: constant over the loops
            return False
        mult *= iv.extent + 1
    span = 0
    for a, ext in sorted((abs(coefs.get(lp.var.name, 0)), lp.extent) for lp in loops
                         if lp.extent > 1):
        if a <= span:
            return False
        span += a * (ext - 1)
    return True


def _combiner(b: Block):
    v, st = b.body.value, b.body
    acc = BufferLoad(st.buffer, st.indices)
    for cls, name in ((Add, "sum"), (Max, "max"), (Min, "min")):
        if isinstance(v, cls):
            if v.a == acc:
                return name, v.b
            if v.b == acc:
                return name, v.a
    return None, None


def _split_predicate(real, b: Block, r_loops: list, loop_to_iv: dict, red_bind: dict):
    """(predicate on spatial loops, reduce_where) of the rfactor block.

    A split of a reduction loop that overshoots guards the reduce loops together
    (``k_0 * 16 + k_1 < 1001``). In the rfactor block one of them is a spatial
    variable, so that guard becomes a condition on the block's own iteration
    variables: it stays with the block when compute_at rebuilds its loops, and
    the init still runs for partial sums whose every term lies past the end."""
    r_names = {lp.var.name for lp in r_loops}
    spatial, reduce = [], [substitute(b.reduce_where, red_bind)]
    for c in conjuncts(real.predicate):
        used = expr_vars(c)
        if not used & r_names:
            spatial.append(c)
        elif used <= r_names:
            reduce.append(substitute(c, loop_to_iv))
        else:
            raise ScheduleError(f"rfactor: the guard {c} of block {b.name!r} mixes spatial and "
                                "reduction loops; split them apart before rfactor")
    return simplify(all_of(*spatial)), simplify(all_of(*reduce))


def rfactor(func, loop: str, factor_axis: int):
    """Factor reduction loop ``loop`` out: a block ``<block>_rf`` reduces everything else
    into a buffer with an extra dimension (at ``factor_axis``) indexed by ``loop``; the
    original block then reduces over that dimension."""
    node, _ = find_loop(func, loop, "rfactor")
    blocks = realizes_under(node.body)
    if len(blocks) != 1:
        raise ScheduleError(f"rfactor: loop {loop!r} must contain exactly one block, it contains "
                            f"{[r.block.name for r, _ in blocks]}")
    real, _ = blocks[0]
    _, path = find_block(func, real.block.name)
    b = real.block
    kinds = {iv.kind for iv, v in zip(b.iter_vars, real.iter_values) if loop in expr_vars(v)}
    if kinds != {"R"}:
        raise ScheduleError(f"rfactor: loop {loop!r} must be a reduction loop of block "
                            f"{b.name!r} (it binds {sorted(kinds) or 'no'} variables)")
    comb, src = _combiner(b)
    if comb is None or b.init is None:
        raise ScheduleError(f"rfactor: block {b.name!r} is not a sum/max/min reduction of the "
                            "form X = X + e (or max/min); decomposed reductions cannot be factored")
    buf = b.body.buffer
    if not isinstance(factor_axis, int) or not 0 <= factor_axis <= buf.ndim:
        raise ScheduleError(f"rfactor: factor_axis {factor_axis!r} must be in [0, {buf.ndim}]")
    namer = Namer(func)
    rf_buf = buf.with_(name=namer(f"{buf.name}_rf"),
                       shape=buf.shape[:factor_axis] + (node.extent,) + buf.shape[factor_axis:])
    r_loops = [lp for lp in loops_of(path) if any(
        lp.var.name in expr_vars(v) for iv, v in zip(b.iter_vars, real.iter_values)
        if iv.kind == "R")]
    vr = Var(f"v_{loop}")
    s_ivs = [iv for iv in b.iter_vars if iv.kind == "S"]
    s_vals = [v for iv, v in zip(b.iter_vars, real.iter_values) if iv.kind == "S"]
    r_ivs = [IterVar(Var(f"v_{lp.var.name}"), lp.extent, "R") for lp in r_loops
             if lp.var.name != loop]
    loop_to_iv = {lp.var.name: Var(f"v_{lp.var.name}") for lp in r_loops}
    red_bind = {iv.var.name: substitute(v, loop_to_iv)
                for iv, v in zip(b.iter_vars, real.iter_values) if iv.kind == "R"}
    out_idx = b.body.indices
    rf_idx = out_idx[:factor_axis] + (vr,) + out_idx[factor_axis:]
    acc = BufferLoad(rf_buf, rf_idx)
    new_src = substitute(src, red_bind)
    val = {"sum": lambda: acc + new_src, "max": lambda: Max(acc, new_src),
           "min": lambda: Min(acc, new_src)}[comb]()
    spatial_pred, where = _split_predicate(real, b, r_loops, loop_to_iv, red_bind)
    rf_block = Block(rf_buf.name,
                     tuple(s_ivs) + (IterVar(vr, node.extent, "S"),) + tuple(r_ivs),
                     BufferStore(rf_buf, val, rf_idx),
                     BufferStore(rf_buf, b.init.value, rf_idx), reduce_where=where)
    rf_real = BlockRealize(tuple(s_vals) + (Var(loop),) + tuple(Var(lp.var.name)
                                                                 for lp in r_loops
                                                                 if lp.var.name != loop),
                           spatial_pred, rf_block)
    vw = Var(f"v_{loop}")
    wb_acc = BufferLoad(buf, out_idx)
    wb_src = BufferLoad(rf_buf, out_idx[:factor_axis] + (vw,) + out_idx[factor_axis:])
    wb_val = {"sum": lambda: wb_acc + wb_src, "max": lambda: Max(wb_acc, wb_src),
              "min": lambda: Min(wb_acc, wb_src)}[comb]()
    wb_block = Block(b.name, tuple(s_ivs) + (IterVar(vw, node.extent, "R"),),
                     BufferStore(buf, wb_val, out_idx), b.init)
    out = replace_block(func, b.name, rf_real)
    out = out.with_(alloc_buffers=out.alloc_buffers + (rf_buf,))
    dims = iter_dims(wb_block, wb_src.indices)
    return insert_reader_after(out, rf_block.name, wb_block, dims, "rfactor"), rf_block.name


__all__ = ["decompose_reduction", "rfactor", "TRUE"]
