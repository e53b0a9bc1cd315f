"""Primitives that move computation: compute_at, reverse_compute_at, compute_inline,
reverse_compute_inline, and the region-covering loop nests they share.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir.arith import NonAffine, int_bounds, linear_form, simplify
from ..ir.expr import LE, LT, Var, all_of, const
from ..ir.functor import REMOVE, replace_loads, substitute
from ..ir.index import index_of
from ..ir.region import union_region, first_hole
from ..ir.stmt import BlockRealize, BufferStore, For, TRUE
from .tree import (Namer, body_of, children, loop_role, contains_block, find_block, find_loop,
                   insert_in, iter_dims, loads_of, loops_of, readers, realizes_in, realizes_under,
                   remove_block, replace_block, writers)

# thread loops above a compute-at point over which the region is widened: those whose
# iterations share the buffer. A ``local`` buffer is private to one (thread, virtual
# thread) pair: a stage computed at a loop inside a vthread loop covers that virtual
# thread's part only (widening it made each vthread write back, and read, the others'
# rows too: a race on the output and reads of other threads' registers).
_RELAX = {"shared": ("threadIdx", "vthread"), "local": (),
          "global": ("threadIdx", "vthread", "blockIdx")}


def all_ranges(func) -> dict:
    """Loop name -> (0, extent - 1) for every loop of ``func`` (shared: do not change it)."""
    return index_of(func).ranges


def access_sites(realize: BlockRealize, indices_list: list, below: list, relaxed: list) -> list:
    """Index tuples in loop variables, each with the loops that vary."""
    ranged = {lp.var.name: (0, lp.extent - 1) for lp in list(below) + list(relaxed)}
    return [(_in_loop_vars(realize, idx), ranged) for idx in indices_list]


def _in_loop_vars(realize: BlockRealize, idx: tuple) -> tuple:
    """``idx`` (indices in the block's iteration variables) in loop variables, simplified;
    kept on the realize per index tuple of its block."""
    memo = getattr(realize, "_sites", None)
    if memo is None:
        memo = {}
        object.__setattr__(realize, "_sites", memo)
    hit = memo.get(id(idx))
    if hit is not None and hit[0] is idx:
        return hit[1]
    bind = {iv.var.name: v for iv, v in zip(realize.block.iter_vars, realize.iter_values)}
    out = tuple(simplify(substitute(i, bind)) for i in idx)
    memo[id(idx)] = (idx, out)
    return out


def relaxed_loops(path: list, scope: str) -> list:
    tags = _RELAX.get(scope, ())
    return [lp for lp in path if lp.kind == "thread" and lp.thread.split(".")[0] in tags]


def cover_nest(block, dims: list, region: list, func, ranges: dict):
    """Loops over ``region`` for the iteration variables mapped to buffer dims
    (``dims[i]``), full loops for the others; guarded where it may overrun."""
    namer = Namer(func)
    loop_vars, values, guards = [], [], []
    extents = []
    for n, (iv, d) in enumerate(zip(block.iter_vars, dims)):
        v = Var(namer(f"ax{n}"))
        if d is None:
            ext, val = iv.extent, v
        else:
            lo, ext = region[d]
            val = simplify(lo + v)
        loop_vars.append(v)
        extents.append(ext)
        values.append(val)
    inner_ranges = dict(ranges)
    inner_ranges.update({v.name: (0, e - 1) for v, e in zip(loop_vars, extents)})
    for iv, val in zip(block.iter_vars, values):
        try:
            lo, hi = int_bounds(val, inner_ranges)
        except NonAffine:
            lo, hi = -1, iv.extent
        if lo < 0:
            guards.append(LE(const(0), val))
        if hi > iv.extent - 1:
            guards.append(LT(val, const(iv.extent)))
    stmt = BlockRealize(tuple(values), simplify(all_of(*guards)) if guards else TRUE, block)
    for v, e in reversed(list(zip(loop_vars, extents))):
        stmt = For(v, e, stmt)
    return stmt


def _region_or_fail(sites, buf, func, prim, name):
    region = union_region(sites, buf.shape, all_ranges(func))
    if region is None:
        raise ScheduleError(f"{prim}: the region of {buf.name} needed at loop {name!r} cannot be "
                            "analysed (non-affine indices)")
    return region


def insert_reader_after(func, block: str, reader, dims: list, prim: str):
    """Insert ``reader`` (a block reading what ``block`` writes, its iteration
    variables mapped to the written buffer's dims by ``dims``) right after the
    highest loop that holds ``block`` alone, covering what ``block`` writes per
    iteration of the loops above."""
    prod, ppath = find_block(func, block)
    buf = prod.block.body.buffer
    loops = loops_of(ppath)
    anchor = len(loops)
    while anchor > 0 and {r.block.name for r in realizes_in(loops[anchor - 1])} == {block}:
        anchor -= 1
    parent_loops, below = loops[:anchor], loops[anchor:]
    parent = parent_loops[-1].var.name if parent_loops else None
    sites = access_sites(prod, [prod.block.body.indices], below,
                         relaxed_loops(parent_loops, buf.scope))
    region = _region_or_fail(sites, buf, func, prim, parent or "root")
    nest = cover_nest(reader, dims, region, func, all_ranges(func))
    kids = children(body_of(func, parent))
    pos = max(i for i, k in enumerate(kids) if contains_block(k, {block})) + 1
    return insert_in(func, parent, pos, nest)


def _index_of(kids: list, names, last: bool):
    hits = [i for i, k in enumerate(kids) if contains_block(k, names)]
    if not hits:
        return None
    return hits[-1] if last else hits[0]


def _check_inputs_ready(out, inputs: set, loop: str, prim: str, block: str):
    """Writers of ``inputs`` outside ``loop`` must run before it."""
    from .tree import block_names
    order = block_names(out)
    node, _ = find_loop(out, loop)
    inside = [r.block.name for r in realizes_in(node.body)]
    start = order.index(inside[0])
    for buf in inputs:
        for w in writers(out, buf):
            if w not in inside and order.index(w) > start:
                raise ScheduleError(f"{prim}: block {block!r} reads {buf}, which block {w!r} "
                                    f"writes only after loop {loop!r}; it cannot move there")


def _inputs(func, block) -> set:
    """Buffers whose writers must run before ``block``: what it reads, and its own output
    when other blocks write it too (the init of a decomposed reduction: the update reads
    the accumulator the init block writes)."""
    names = {b.name for b in block.reads()}
    own = block.body.buffer.name
    if any(w != block.name for w in writers(func, own)):
        names.add(own)
    return names


def compute_at(func, block: str, loop: str):
    """Move producer ``block`` under ``loop``, computing only what the consumers
    there need per iteration."""
    prod, dims, region, out, first_consumer, sites = _planned(func, block, loop)
    if region is None:   # checked analysable, not yet computed
        region = _region_or_fail(sites, prod.block.body.buffer, func, "compute_at", loop)
    nest = cover_nest(prod.block, dims, region, func, all_ranges(func))
    return insert_in(out, loop, first_consumer, nest)


def can_compute_at(func, block: str, loop: str) -> bool:
    """Would ``compute_at(func, block, loop)`` succeed? Its checks alone: the loop nest
    it would build and insert is not built, and the region it would cover is only
    computed when it is not plainly analysable."""
    try:
        _planned(func, block, loop, need_region=False)
    except ScheduleError:
        return False
    return True


def _planned(func, block: str, loop: str, need_region: bool = False) -> tuple:
    """``_compute_at_plan``, kept on the (immutable) function for the last (block, loop)
    asked: ``sample_compute_location`` checks the place ``compute_at`` then uses."""
    key = (block, loop)
    memo = getattr(func, "_compute_at_plan", None)
    if memo is not None and memo[0] == key:
        if isinstance(memo[1], ScheduleError):   # a fresh copy: no frames kept on func
            raise type(memo[1])(*memo[1].args)
        return memo[1]
    try:
        plan = _compute_at_plan(func, block, loop, need_region)
    except ScheduleError as e:
        object.__setattr__(func, "_compute_at_plan", (key, type(e)(*e.args)))  # no frames
        raise
    object.__setattr__(func, "_compute_at_plan", (key, plan))
    return plan


def _analysable(sites: list, func) -> bool:
    """Is the region of ``sites`` surely analysable (``union_region`` not None)? True when
    every index is a sum of constant multiples of the function's loop variables: then no
    bound can fail. False: not known without computing it."""
    loops = index_of(func).loops
    for idx, _ in sites:
        for e in idx:
            terms, _ = linear_form(simplify(e))
            if not all(type(a) is Var and a.name in loops for a in terms):
                return False
    return True


def _without(func, block: str):
    """``remove_block(func, block)``, kept on ``func`` for the last block asked (every
    loop tried for a compute location removes the same block)."""
    memo = getattr(func, "_without", None)
    if memo is None or memo[0] != block:
        memo = (block, remove_block(func, block))
        object.__setattr__(func, "_without", memo)
    return memo[1]


def _compute_at_plan(func, block: str, loop: str, need_region: bool = True) -> tuple:
    """compute_at's checks and what it needs to build the nest: (producer realize, its
    iteration variables' buffer dims, the region needed per iteration of ``loop`` (None
    when not ``need_region`` and surely analysable), the function without the producer,
    where the nest goes under ``loop``, the consumers' access sites)."""
    prod, ppath = find_block(func, block, "compute_at")
    target, lpath = find_loop(func, loop, "compute_at")
    if any(lp.var.name == loop for lp in loops_of(ppath)):
        raise ScheduleError(f"compute_at: block {block!r} is already under loop {loop!r}; pick a "
                            "loop of its consumers")
    buf = prod.block.body.buffer
    consumers = [c for c in readers(func, buf.name) if c != block]
    if not consumers:
        raise ScheduleError(f"compute_at: no block reads {buf.name}, the output of {block!r}; "
                            "there is nothing to compute it for")
    under = {r.block.name for r in realizes_in(target.body)}
    for c in consumers:
        if c not in under:
            raise ScheduleError(f"compute_at: consumer block {c!r} of {block!r} is not under "
                                f"loop {loop!r}; it would be left without data")
    if writers(func, buf.name) != [block]:
        raise ScheduleError(f"compute_at: {buf.name} is written by several blocks "
                            f"{writers(func, buf.name)}")
    dims = iter_dims(prod.block, prod.block.body.indices)
    if dims is None or any(d is not None and iv.kind == "R"
                           for iv, d in zip(prod.block.iter_vars, dims)):
        raise ScheduleError(f"compute_at: block {block!r} must write {buf.name} at its spatial "
                            "iteration variables")
    relaxed = relaxed_loops(loops_of(lpath) + [target], buf.scope)
    sites = []
    for r, rpath in realizes_under(target.body):
        if r.block.name in consumers:
            sites += access_sites(r, [ld.indices for ld in loads_of(r.block, buf.name)],
                                  loops_of(rpath), relaxed)
    region = None
    if need_region or not _analysable(sites, func):
        region = _region_or_fail(sites, buf, func, "compute_at", loop)
    out = _without(func, block)
    kids = children(find_loop(out, loop)[0].body)
    first_consumer = _index_of(kids, set(consumers), last=False)
    inputs = _inputs(out, prod.block)
    _check_inputs_ready(out, inputs, loop, "compute_at", block)
    producers = {w for b in inputs for w in writers(out, b)}
    last_producer = _index_of(kids, producers, last=True)
    if last_producer is not None and last_producer >= first_consumer:
        raise ScheduleError(f"compute_at: under loop {loop!r} an input of {block!r} is produced "
                            "after its consumers start; move that producer first")
    return prod, dims, region, out, first_consumer, sites


def reverse_compute_at(func, block: str, loop: str):
    """Move consumer ``block`` under ``loop``, consuming per iteration what the
    producers there have just written."""
    cons, cpath = find_block(func, block, "reverse_compute_at")
    target, lpath = find_loop(func, loop, "reverse_compute_at")
    if any(lp.var.name == loop for lp in loops_of(cpath)):
        raise ScheduleError(f"reverse_compute_at: block {block!r} is already under loop {loop!r}")
    under = {r.block.name for r in realizes_in(target.body)}
    bufs = [b for b in cons.block.reads() if writers(func, b.name)
            and set(writers(func, b.name)) <= under]
    if not bufs:
        raise ScheduleError(f"reverse_compute_at: block {block!r} reads nothing produced under "
                            f"loop {loop!r}")
    if len(bufs) > 1:
        raise ScheduleError(f"reverse_compute_at: block {block!r} reads several buffers produced "
                            f"under loop {loop!r} ({', '.join(b.name for b in bufs)})")
    buf = bufs[0]
    idx_list = [ld.indices for ld in loads_of(cons.block, buf.name)]
    dims = iter_dims(cons.block, idx_list[0])
    if dims is None or any(ix != idx_list[0] for ix in idx_list):
        raise ScheduleError(f"reverse_compute_at: block {block!r} must read {buf.name} at its "
                            "iteration variables")
    for iv, d in zip(cons.block.iter_vars, dims):
        if d is not None and iv.kind == "R":
            raise ScheduleError(f"reverse_compute_at: block {block!r} reduces over a dimension "
                                f"of {buf.name}; the region produced per iteration of {loop!r} "
                                "is only part of the reduction")
    relaxed = relaxed_loops(loops_of(lpath) + [target], buf.scope)
    outer = {lp.var.name for lp in loops_of(lpath)} | {loop}
    sites = []
    for r, rpath in realizes_under(target.body):
        if r.block.body.buffer.name == buf.name:
            for lp_name in outer:
                if "R" in loop_role(lp_name, r):
                    raise ScheduleError(f"reverse_compute_at: loop {lp_name!r} iterates the "
                                        f"reduction of {r.block.name!r}; under {loop!r} its "
                                        f"result {buf.name} is still partial")
            sites += access_sites(r, [r.block.body.indices], loops_of(rpath), relaxed)
    region = _region_or_fail(sites, buf, func, "reverse_compute_at", loop)
    if buf.scope == "local":
        for r, rpath in realizes_under(target.body):
            bound = [lp for lp in loops_of(rpath) if lp.kind == "thread"
                     and lp.thread.startswith("threadIdx")]
            if r.block.body.buffer.name == buf.name and bound:
                raise ScheduleError(
                    f"reverse_compute_at: {buf.name} is local to each thread and its producer "
                    f"{r.block.name!r} runs under {bound[0].thread} loop {bound[0].var.name!r} "
                    f"inside {loop!r}: every thread would copy out the whole region from its "
                    f"own registers; put {block!r} under {bound[-1].var.name!r} or deeper")
    hole = first_hole(sites)
    if hole is not None:
        _, dim, points, box = hole
        raise ScheduleError(
            f"reverse_compute_at: under loop {loop!r} the producers of {buf.name} write "
            f"{points} of the {box} elements of its dimension {dim} that {block!r} would "
            f"cover (a loop inside {loop!r} strides over that dimension), so it would copy "
            f"elements nobody wrote: move {block!r} under a loop outside the strided one, or "
            f"reorder the strided loop outside {loop!r}")
    # the region is per dim of buf; the consumer iterates its own dims
    nest = cover_nest(cons.block, dims, region, func, all_ranges(func))
    out = remove_block(func, block)
    kids = children(find_loop(out, loop)[0].body)
    inputs = _inputs(out, cons.block)
    _check_inputs_ready(out, inputs, loop, "reverse_compute_at", block)
    producers = {w for b in inputs for w in writers(out, b)}
    last_producer = _index_of(kids, producers, last=True)
    later = set(readers(out, cons.block.body.buffer.name))
    first_consumer = _index_of(kids, later, last=False)
    if first_consumer is not None and first_consumer <= last_producer:
        raise ScheduleError(f"reverse_compute_at: a reader of {block!r}'s output under loop "
                            f"{loop!r} runs before the producers finish")
    return insert_in(out, loop, last_producer + 1, nest)


def compute_inline(func, block: str):
    """Replace every read of ``block``'s output by its expression; remove the block."""
    b, buf, dims = _inline_plan(func, block)

    def inline(ld):
        if ld.buffer.name != buf.name:
            return None
        return substitute(b.body.value, {iv.var.name: ld.indices[d]
                                         for iv, d in zip(b.iter_vars, dims)})
    out = remove_block(func, block)
    for name in readers(out, buf.name):
        r, _ = find_block(out, name)
        st = r.block.body
        new = r.block.with_(body=st.with_(value=replace_loads(st.value, inline)))
        out = replace_block(out, name, r.with_(block=new))
    return out.with_(alloc_buffers=tuple(x for x in out.alloc_buffers if x.name != buf.name))


def can_compute_inline(func, block: str) -> bool:
    """Would ``compute_inline(func, block)`` succeed? Its checks alone."""
    try:
        _inline_plan(func, block)
    except ScheduleError:
        return False
    return True


def _inline_plan(func, block: str) -> tuple:
    """compute_inline's checks; (the block, the buffer it writes, its dims)."""
    prod, _ = find_block(func, block, "compute_inline")
    b = prod.block
    buf = b.body.buffer
    if b.is_reduction or b.init is not None:
        raise ScheduleError(f"compute_inline: block {block!r} is a reduction; only injective "
                            "blocks (one store per point) can be inlined")
    if buf in func.params:
        raise ScheduleError(f"compute_inline: {buf.name} is an output of the function; only "
                            "intermediate buffers can be inlined")
    dims = iter_dims(b, b.body.indices)
    if dims is None or None in dims:
        raise ScheduleError(f"compute_inline: block {block!r} must write {buf.name} at exactly "
                            "its iteration variables")
    if writers(func, buf.name) != [block] or loads_of(b, buf.name):
        raise ScheduleError(f"compute_inline: {buf.name} is written by more than block {block!r}")
    return b, buf, dims


def reverse_compute_inline(func, block: str):
    """Fold injective consumer ``block`` into the store of its producer; remove it."""
    cons, _ = find_block(func, block, "reverse_compute_inline")
    c = cons.block
    if c.is_reduction or c.init is not None or loads_of(c, c.body.buffer.name):
        # an init, or a read of its own output, makes it an accumulation even when every
        # axis is spatial (rfactor over an extent-1 reduction leaves such a block)
        raise ScheduleError(f"reverse_compute_inline: block {block!r} is a reduction; only "
                            "injective consumers can be inlined into their producer")
    bufs = [x for x in c.reads() if x in func.alloc_buffers and writers(func, x.name)]
    if len(bufs) != 1:
        raise ScheduleError(f"reverse_compute_inline: block {block!r} must read exactly one "
                            f"intermediate buffer, it reads {[x.name for x in bufs]}")
    buf = bufs[0]
    loads = loads_of(c, buf.name)
    dims = iter_dims(c, loads[0].indices)
    if len(loads) != 1 or dims is None or None in dims:
        raise ScheduleError(f"reverse_compute_inline: block {block!r} must read {buf.name} once, "
                            "at exactly its iteration variables")
    ws = writers(func, buf.name)
    if len(ws) != 1:
        raise ScheduleError(f"reverse_compute_inline: {buf.name} has writers {ws}; need one")
    prod, _ = find_block(func, ws[0])
    p = prod.block
    if p.is_reduction or p.init is not None:
        raise ScheduleError(f"reverse_compute_inline: producer {p.name!r} is a reduction; "
                            f"applying {block!r} to partial results would be wrong")
    others = [x for x in readers(func, buf.name) if x != block]
    if others:
        raise ScheduleError(f"reverse_compute_inline: {buf.name} is also read by {others}")
    mapping = {iv.var.name: p.body.indices[d] for iv, d in zip(c.iter_vars, dims)}
    value = replace_loads(substitute(c.body.value, mapping),
                          lambda ld: p.body.value if ld.buffer.name == buf.name else None)
    store = BufferStore(c.body.buffer, value,
                        tuple(simplify(substitute(i, mapping)) for i in c.body.indices))
    out = remove_block(func, block)
    out = replace_block(out, p.name, prod.with_(block=p.with_(body=store)))
    return out.with_(alloc_buffers=tuple(x for x in out.alloc_buffers if x.name != buf.name))


__all__ = ["compute_at", "reverse_compute_at", "compute_inline", "reverse_compute_inline",
           "can_compute_at", "can_compute_inline", "cover_nest", "REMOVE"]
