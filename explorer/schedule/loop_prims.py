"""Loop primitives: split, fuse, reorder, and loop kinds (parallel, vectorize, unroll, bind).

They rewrite only loops and the bindings of the blocks beneath: the blocks'
bodies never change. Each function takes a PrimFunc and names, and returns the
new PrimFunc (and the names of new loops).
"""
from __future__ import annotations

import math

from ..errors import ScheduleError
from ..limits import MAX_EXTENT, MAX_LOOP_DEPTH
from ..ir.arith import simplify
from ..ir.expr import LT, FloorDiv, FloorMod, Var, all_of, const
from ..ir.functor import substitute
from ..ir.stmt import THREAD_TAGS, For
from .tree import Namer, find_loop, loops_of, map_realizes, realizes_in, realizes_under, loop_role, replace_loop


def _rebind(stmt, mapping: dict, guard=None):
    """Substitute loop vars in every binding/predicate beneath; add ``guard``."""
    def fn(r):
        vals = tuple(simplify(substitute(v, mapping)) for v in r.iter_values)
        pred = substitute(r.predicate, mapping)
        if guard is not None:
            pred = all_of(pred, guard)
        pred = simplify(pred)
        if pred is r.predicate and all(a is b for a, b in zip(vals, r.iter_values)):
            return None     # nothing to change: the realize (and its loops) as they are
        return r.with_(iter_values=vals, predicate=pred)
    return map_realizes(stmt, fn)


def split(func, loop: str, factors: list) -> tuple:
    """for i in range(n)  ->  for i_0 in range(n/f): for i_1 in range(f)  (i = i_0*f + i_1).

    At most one factor may be None (inferred); a product larger than the extent
    adds a guard ``i_0*f + i_1 < n`` to the blocks beneath. The product must fit
    the int32 index type (``limits.MAX_EXTENT``)."""
    node, path = find_loop(func, loop, "split")
    _check_factor_list(loop, factors)
    known = math.prod(f for f in factors if f is not None)
    factors = [f if f is not None else -(-node.extent // known) for f in factors]
    total = math.prod(factors)
    if total < node.extent:
        raise ScheduleError(f"split: loop {loop!r}: factors {factors} multiply to {total}, "
                            f"less than the extent {node.extent}; use None for one factor")
    if total > MAX_EXTENT:
        raise ScheduleError(f"split: loop {loop!r}: factors {factors} multiply to {total}, "
                            f"more than {MAX_EXTENT} (2**31 - 1), the largest loop extent "
                            f"(indices are int32); use factors whose product is near the "
                            f"extent {node.extent}")
    _check_depth(loop, path, node, len(factors))
    if node.kind != "serial":
        raise ScheduleError(f"split: loop {loop!r} is {node.kind}; split it before changing "
                            "its kind")
    namer = Namer(func)
    new_vars = [Var(namer(f"{loop}_{i}")) for i in range(len(factors))]
    expr, stride = const(0), 1
    for v, f in reversed(list(zip(new_vars, factors))):
        expr = expr + (v if stride == 1 else v * stride)
        stride *= f
    expr = simplify(expr)
    guard = LT(expr, const(node.extent)) if total != node.extent else None
    inner = _rebind(node.body, {loop: expr}, guard)
    for v, f in reversed(list(zip(new_vars, factors))):
        inner = For(v, f, inner)
    return replace_loop(func, loop, inner), [v.name for v in new_vars]


def _check_factor_list(loop: str, factors: list) -> None:
    if not factors:
        raise ScheduleError(f"split: loop {loop!r} needs at least one factor")
    if len(factors) > MAX_LOOP_DEPTH:
        raise ScheduleError(f"split: loop {loop!r}: {len(factors)} factors; at most "
                            f"{MAX_LOOP_DEPTH} loops may nest")
    if sum(f is None for f in factors) > 1:
        raise ScheduleError(f"split: loop {loop!r}: at most one factor may be None, got {factors}")
    for f in factors:
        if f is not None and (not isinstance(f, int) or isinstance(f, bool) or f <= 0):
            raise ScheduleError(f"split: loop {loop!r}: factor {f!r} must be a positive int "
                                "or None")
        if f is not None and f > MAX_EXTENT:
            raise ScheduleError(f"split: loop {loop!r}: factor {f} is more than {MAX_EXTENT} "
                                "(2**31 - 1), the largest loop extent (indices are int32)")


def _check_depth(loop: str, path: tuple, node: For, parts: int) -> None:
    """A split into ``parts`` loops must keep every nest within MAX_LOOP_DEPTH."""
    below = max((len(loops_of(p)) for _, p in realizes_under(node.body)), default=0)
    depth = len(loops_of(path)) + parts + below
    if depth > MAX_LOOP_DEPTH:
        raise ScheduleError(f"split: loop {loop!r}: splitting it into {parts} loops would nest "
                            f"{depth} loops; at most {MAX_LOOP_DEPTH} may nest (use fewer "
                            "factors, or fuse loops first)")


def fuse(func, loops: list) -> tuple:
    """for i: for j  ->  for i_j_fused in range(ni*nj)  (i = f // nj, j = f % nj)."""
    if not loops:
        raise ScheduleError("fuse: give at least one loop")
    nodes = [find_loop(func, n, "fuse")[0] for n in loops]
    for outer, inner, on, inn in zip(nodes, nodes[1:], loops, loops[1:]):
        if outer.body is not inner and outer.body != inner:
            raise ScheduleError(f"fuse: loops {on!r} and {inn!r} are not adjacent (the body of "
                                f"{on!r} must be exactly loop {inn!r})")
    for n, node in zip(loops, nodes):
        if node.kind != "serial":
            raise ScheduleError(f"fuse: loop {n!r} is {node.kind}; fuse serial loops, then "
                                "change the kind of the fused loop")
    if len(nodes) == 1:
        return func, loops[0]
    for r in realizes_in(nodes[-1].body):
        roles = {n: loop_role(n, r) for n in loops}
        spatial = [n for n, k in roles.items() if k == {"S"}]
        reduce_ = [n for n, k in roles.items() if "R" in k]
        if spatial and reduce_:
            raise ScheduleError(f"fuse: loop {spatial[0]!r} is spatial and loop {reduce_[0]!r} "
                                f"a reduction loop of block {r.block.name!r}; a fused loop "
                                "must not mix them (the reduction would lose its order)")
    total = math.prod(n.extent for n in nodes)
    if total > MAX_EXTENT:
        raise ScheduleError(f"fuse: loops {loops} have {total} iterations in all, more than "
                            f"{MAX_EXTENT} (2**31 - 1), the largest loop extent (indices are "
                            "int32); fuse fewer loops")
    fused = Var(Namer(func)("_".join(loops) + "_fused"))
    mapping, stride = {}, total
    for i, node in enumerate(nodes):
        stride //= node.extent
        e = FloorDiv(fused, const(stride)) if stride > 1 else fused
        if i > 0:
            e = FloorMod(e, const(node.extent))
        mapping[node.var.name] = simplify(e)
    body = _rebind(nodes[-1].body, mapping)
    return replace_loop(func, loops[0], For(fused, total, body)), fused.name


def reorder(func, loops: list) -> object:
    """Permute loops of one perfectly nested chain into the given order."""
    if len(set(loops)) != len(loops):
        raise ScheduleError(f"reorder: loops {loops} contain a duplicate")
    if len(loops) < 2:
        return func
    found = {n: find_loop(func, n, "reorder") for n in loops}
    ordered = sorted(loops, key=lambda n: len(found[n][1]))
    top, bottom = ordered[0], ordered[-1]
    top_node = found[top][0]
    chain = [top_node]
    while chain[-1].var.name != bottom:
        body = chain[-1].body
        if not isinstance(body, For):
            missing = [n for n in ordered if n not in {c.var.name for c in chain}]
            raise ScheduleError(f"reorder: loops {loops} are not one perfectly nested chain: "
                                f"loop {chain[-1].var.name!r} has more than one child, so "
                                f"{missing[0]!r} cannot move past it")
        chain.append(body)
    positions = [i for i, c in enumerate(chain) if c.var.name in found]
    if len(positions) != len(loops):
        raise ScheduleError(f"reorder: loops {loops} are not on one chain of nested loops")
    by_name = {c.var.name: c for c in chain}
    new_chain = list(chain)
    for pos, name in zip(positions, loops):
        new_chain[pos] = by_name[name]
    inner = chain[-1].body
    for c in reversed(new_chain):
        inner = c.with_(body=inner)
    return replace_loop(func, top, inner)


def _check_no_reduction(func, loop: str, prim: str, why: str):
    node, _ = find_loop(func, loop, prim)
    for r in realizes_in(node.body):
        if "R" in loop_role(loop, r):
            raise ScheduleError(f"{prim}: loop {loop!r} is a reduction loop of block "
                                f"{r.block.name!r}; {why}")
    return node


def set_kind(func, loop: str, kind: str, thread: str | None = None) -> object:
    node, _ = find_loop(func, loop, kind)
    _check_unbound(loop, kind, node.kind, node.thread)
    return replace_loop(func, loop, node.with_(kind=kind, thread=thread))


def _check_unbound(loop: str, kind: str, now: str, thread) -> None:
    if now == "thread" and kind != "thread":
        raise ScheduleError(f"{kind}: loop {loop!r} is bound to {thread}; a bound loop "
                            "keeps its binding")


def check_kind(func, loop: str, kind: str, now: tuple) -> None:
    """Raise unless ``loop`` may become ``kind`` ("parallel", "vectorized" or "unrolled");
    ``now``: its (kind, thread) as scheduled so far. Nothing here reads a loop's kind or
    annotations but ``now``: the schedule checks against its function before pending
    annotation and kind changes are applied, and applies the change with them."""
    if kind == "parallel":
        node = _check_no_reduction(func, loop, "parallel", "running its iterations at once "
                                   "would race on the accumulator")
        for r in realizes_in(node.body):
            if "S" not in loop_role(loop, r) and r.block.body.buffer in func.params:
                raise ScheduleError(f"parallel: loop {loop!r} does not index the output of "
                                    f"block {r.block.name!r}: its iterations would write the "
                                    "same elements")
    elif kind == "vectorized":
        _check_no_reduction(func, loop, "vectorize",
                            "its iterations carry a dependence through the accumulator")
    else:
        find_loop(func, loop, kind)
    _check_unbound(loop, kind, *now)


def parallel(func, loop: str) -> object:
    return _with_kind(func, loop, "parallel", "parallel")


def vectorize(func, loop: str) -> object:
    return _with_kind(func, loop, "vectorized", "vectorize")


def unroll(func, loop: str) -> object:
    return _with_kind(func, loop, "unrolled", "unrolled")


def _with_kind(func, loop: str, kind: str, prim: str) -> object:
    """``func`` with ``loop`` made ``kind``, checked by ``check_kind``."""
    node, _ = find_loop(func, loop, prim)
    check_kind(func, loop, kind, (node.kind, node.thread))
    return replace_loop(func, loop, node.with_(kind=kind, thread=None))


# A block annotated so (``Schedule.annotate(block, CROSS_THREAD_REDUCTION, 1)``) may have
# a reduction loop bound to threadIdx: the threads then reduce together, and the bound
# loop carries the annotation (value: the block's name) through lowering so that the
# code generator emits a cross-thread reduction (warp shuffles or a shared-memory
# tree) instead of every thread updating the accumulator at once.
CROSS_THREAD_REDUCTION = "cross_thread_reduction"
# CUDA's launch limits on every device since compute capability 2.0 (a target may allow
# fewer: VerifyGPUCode checks its own numbers)
CUDA_MAX_THREADS_PER_BLOCK = 1024
CUDA_MAX_BLOCK_DIM = {"threadIdx.x": 1024, "threadIdx.y": 1024, "threadIdx.z": 64}


def launch_extents(kernel: For) -> dict:
    """thread axis -> [(extent, loop name)] of the loops bound to it in one launch (the
    loop nest under ``kernel``, one outermost loop of a function)."""
    from ..ir.functor import walk_stmt
    out: dict = {}
    for node, _ in walk_stmt(kernel):
        if isinstance(node, For) and node.kind == "thread":
            out.setdefault(node.thread, []).append((node.extent, node.var.name))
    return out


def threads_per_block(extents: dict) -> int:
    return math.prod(max(e for e, _ in v) for tag, v in extents.items()
                     if tag.startswith("threadIdx"))


def _check_reduction_on_threads(func, loop: str, node: For, thread: str) -> For:
    blocks = [r.block for r in realizes_in(node.body) if "R" in loop_role(loop, r)]
    if not blocks:
        return node
    if not thread.startswith("threadIdx"):
        raise ScheduleError(f"bind: loop {loop!r} is a reduction loop of block "
                            f"{blocks[0].name!r}; only threadIdx may run a (cross-thread) "
                            f"reduction, not {thread}")
    for b in blocks:
        if not dict(b.annotations).get(CROSS_THREAD_REDUCTION):
            raise ScheduleError(
                f"bind: loop {loop!r} is a reduction loop of block {b.name!r}; bound to "
                f"{thread} its threads would update {b.body.buffer.name} at once (a race). "
                f"Use rfactor first (rfactor({loop!r}) makes it a spatial loop of the rfactor "
                f"block: each thread its own partial result, reduced afterwards), or mark "
                f"the block for a cross-thread reduction with "
                f"annotate(block, {CROSS_THREAD_REDUCTION!r}, 1)")
    names = ",".join(sorted(b.name for b in blocks))
    return node.with_(annotations=tuple(kv for kv in node.annotations
                                        if kv[0] != CROSS_THREAD_REDUCTION)
                      + ((CROSS_THREAD_REDUCTION, names),))


def _check_launch(func, loop: str, path: tuple, node: For, thread: str) -> None:
    """The launch around ``loop`` once bound: one extent per thread axis, CUDA's limits."""
    kernel = (loops_of(path) or [node])[0]
    bound = replace_loop(func, loop, node.with_(kind="thread", thread=thread))
    extents = launch_extents(find_loop(bound, kernel.var.name, "bind")[0])
    where = f"the launch at loop {kernel.var.name!r}"
    others = [(e, n) for e, n in extents.get(thread, []) if e != node.extent]
    if others:
        e, n = others[0]
        raise ScheduleError(f"bind: loop {loop!r} of extent {node.extent} cannot be bound to "
                            f"{thread}: loop {n!r} of extent {e} in {where} is bound to it "
                            f"already, and a launch has one {thread} extent; split them to "
                            "equal extents")
    limit = CUDA_MAX_BLOCK_DIM.get(thread)
    if limit is not None and node.extent > limit:
        raise ScheduleError(f"bind: loop {loop!r} has extent {node.extent}; {thread} is at "
                            f"most {limit} on CUDA devices; split it first")
    threads = threads_per_block(extents)
    if thread.startswith("threadIdx") and threads > CUDA_MAX_THREADS_PER_BLOCK:
        raise ScheduleError(f"bind: loop {loop!r} to {thread} would make {where} use "
                            f"{threads} threads per block, more than "
                            f"{CUDA_MAX_THREADS_PER_BLOCK} (CUDA's limit); split it and bind "
                            "a smaller part")


def bind(func, loop: str, thread: str) -> object:
    if thread not in THREAD_TAGS:
        raise ScheduleError(f"bind: unknown thread axis {thread!r}; use one of "
                            f"{', '.join(THREAD_TAGS)}")
    node, path = find_loop(func, loop, "bind")
    for outer in loops_of(path):
        if outer.kind == "thread" and outer.thread == thread and thread.startswith("blockIdx"):
            raise ScheduleError(f"bind: loop {loop!r} is inside loop {outer.var.name!r}, "
                                f"already bound to {thread}")
    marked = _check_reduction_on_threads(func, loop, node, thread)
    _check_launch(func, loop, path, node, thread)
    if marked is not node:
        func = replace_loop(func, loop, marked)
    return set_kind(func, loop, "thread", thread)
