"""Small analyses of the lowered nest that the code generator needs.

- ``lane_coeff``: how an integer expression depends on the lane variable of a
  vectorized loop (invariant, linear with a constant coefficient, or neither);
- ``vectorize_blocker``: why a vectorized loop body cannot become vector code
  (None when it can);
- ``has_unsafe``: whether evaluating an expression eagerly could fault;
- ``free_names``: the variables and buffers a loop body uses, to outline it.
"""
from __future__ import annotations

from ...ir.arith import linear_coeff, linear_terms

import functools

from ...ir.expr import Add, BufferLoad, Div, Expr, FloorDiv, FloorMod, IntImm, Mul, Sub, Var
from ...ir.arith import simplify
from ...ir.functor import collect_loads, walk_expr, walk_stmt
from ...ir.stmt import Allocate, BufferStore, For, IfThenElse, Stmt


def uses_var(e: Expr, name: str) -> bool:
    return any(isinstance(x, Var) and x.name == name for x in walk_expr(e))


def lane_coeff(e: Expr, lane: str):
    """c such that ``e == base + c * lane`` with ``base`` lane-invariant; None if not affine."""
    return linear_coeff(e, lane)


def flat_index(shape: tuple, indices: tuple) -> Expr:
    """Row-major flat index as an expression (used for analysis, not emitted)."""
    out: Expr = IntImm(0)
    for dim, idx in zip(shape, indices):
        out = Add(Mul(out, IntImm(dim)), idx)
    return out


def affine_form(shape: tuple, indices: tuple) -> tuple:
    """The row-major flat index of ``indices`` as (constant, ((variable, coefficient),
    ...) sorted by name, ((coefficient, expression), ...) for the non-affine rest)."""
    coefs: dict = {}
    atoms: list = []
    const, stride = 0, 1
    for dim, idx in reversed(list(zip(shape, indices))):
        const += linear_terms(idx, stride, coefs, atoms)
        stride *= dim
    return (const, tuple(sorted((k, v) for k, v in coefs.items() if v)), tuple(atoms))


def flat_coeff(shape: tuple, indices: tuple, lane: str):
    """Lane coefficient of the flat index of an access, or None."""
    total, stride = 0, 1
    for d in range(len(shape) - 1, -1, -1):
        c = lane_coeff(indices[d], lane)
        if c is None:
            return None
        total += c * stride
        stride *= shape[d]
    return total


def has_load(e: Expr) -> bool:
    return any(isinstance(x, BufferLoad) for x in walk_expr(e))


def has_unsafe(e: Expr) -> bool:
    """True when evaluating ``e`` eagerly may fault: it loads memory or divides integers."""
    for x in walk_expr(e):
        if isinstance(x, BufferLoad):
            return True
        if isinstance(x, (Div, FloorDiv, FloorMod)) and x.dtype == "int32" \
                and not (isinstance(x.b, IntImm) and x.b.value != 0):
            return True
    return False


def _stmt_exprs(s: Stmt) -> list:
    if isinstance(s, BufferStore):
        return [s.value, *s.indices]
    if isinstance(s, IfThenElse):
        return [s.cond]
    return []


def lane_stride(shape: tuple, indices: tuple, lane: str):
    """Lane coefficient of the flat index of an access (``flat_coeff``), also
    where a fused loop is split back into two dimensions: ``[.., a + f // k, b + f % k]``
    with the last of the two of extent ``k`` is ``(a * k + b) + f`` in the flat index
    (the write-back of a register tile of whole rows, its loops fused by the vectorizer:
    contiguous, not a scatter). None when the index is neither."""
    c = flat_coeff(shape, indices, lane)
    if c is not None:
        return c
    total, stride, d = 0, 1, len(shape) - 1
    while d >= 0:
        c = linear_coeff(indices[d], lane)
        if c is not None:
            total += c * stride
            stride *= shape[d]
            d -= 1
            continue
        mod, div = _split_lane_term(indices[d], lane, FloorMod), (
            _split_lane_term(indices[d - 1], lane, FloorDiv) if d > 0 else None)
        if mod is None or div is None or mod[0] != div[0] or mod[1] != shape[d]:
            return None
        c = linear_coeff(mod[0], lane)
        if c is None:
            return None
        total += c * stride       # (x // k) * k * stride + (x % k) * stride = x * stride
        stride *= shape[d] * shape[d - 1]
        d -= 2
    return total


def _split_lane_term(e, lane: str, kind):
    """``(x, k)`` when ``e`` is a sum whose one lane-dependent term is ``kind(x, k)``
    (FloorDiv or FloorMod by a constant ``k > 0``) and the other terms are free of the
    lane, else None."""
    terms, stack = [], [e]
    while stack:
        t = stack.pop()
        if isinstance(t, Add):
            stack += [t.a, t.b]
        elif isinstance(t, Sub) and linear_coeff(t.b, lane) == 0:
            stack += [t.a, t.b]     # the subtracted part is free of the lane either way
        else:
            terms.append(t)
    hit = [t for t in terms if linear_coeff(t, lane) != 0]
    if len(hit) != 1 or not isinstance(hit[0], kind):
        return None
    t = hit[0]
    if not isinstance(t.b, IntImm) or t.b.value <= 0:
        return None
    return t.a, t.b.value


@functools.lru_cache(maxsize=1024)
def vectorize_blocker(loop: For):
    """The reason the body of vectorized ``loop`` must run as a scalar loop, or None.

    Vector code runs each statement for all lanes before the next statement; that
    equals the sequential loop when no lane reads or overwrites an element of a
    buffer that another lane of the body writes (checked pairwise on the accesses
    of every written buffer, see ``_lanes_conflict``), and each lane writes its own
    element (a lane-invariant store would be a reduction across lanes). Guards
    that depend on the lane become lane masks.
    """
    lane = loop.var.name
    accesses: dict = {}
    stored: set = set()
    for node, _ in walk_stmt(loop.body):
        if isinstance(node, For):
            return f"nested loop {node.var.name}"
        if isinstance(node, Allocate):
            return f"allocation of {node.buffer.name}"
        if isinstance(node, BufferStore):
            if lane_stride(node.buffer.shape, node.indices, lane) == 0:
                return f"store to {node.buffer.name} is invariant in the lane (a reduction)"
            stored.add(node.buffer.name)
            accesses.setdefault(node.buffer.name, set()).add(
                (node.buffer.shape, node.indices, True))
        for e in _stmt_exprs(node):
            for ld in collect_loads(e):
                accesses.setdefault(ld.buffer.name, set()).add((ld.buffer.shape, ld.indices,
                                                                False))
    for name in sorted(stored):
        sites = sorted(accesses[name], key=repr)
        for n, a in enumerate(sites):
            for b in sites[n + 1:]:
                if (a[2] or b[2]) and _lanes_conflict(a[:2], b[:2], lane, loop.extent):
                    return f"lanes could depend on each other through {name}"
    return None


def _lanes_conflict(a: tuple, b: tuple, lane: str, lanes: int) -> bool:
    """Could lane u touch at access ``b`` an element that lane v != u touches at ``a``?

    With both flat indices ``x + c*lane`` and ``x - d + c*lane`` (same coefficient,
    constant distance d), lanes meet only when d is a multiple of c below ``lanes*c``.
    Anything else is assumed to conflict.
    """
    ca, cb = lane_stride(*a, lane), lane_stride(*b, lane)
    if ca is None or ca != cb or ca == 0:
        return True
    d = simplify(Sub(flat_index(*a), flat_index(*b)))
    if not isinstance(d, IntImm):
        return True
    d = d.value
    return d != 0 and d % ca == 0 and abs(d // ca) < lanes


def free_names(s: Stmt) -> tuple:
    """(variable names, buffer names) used inside ``s``, loop variables bound in it excluded."""
    vars_, bufs, bound = set(), set(), set()
    for node, _ in walk_stmt(s):
        if isinstance(node, For):
            bound.add(node.var.name)
        elif isinstance(node, Allocate):
            bufs.add(node.buffer.name)
        elif isinstance(node, BufferStore):
            bufs.add(node.buffer.name)
        for e in _stmt_exprs(node):
            for x in walk_expr(e):
                if isinstance(x, Var):
                    vars_.add(x.name)
                elif isinstance(x, BufferLoad):
                    bufs.add(x.buffer.name)
    return vars_ - bound, bufs
