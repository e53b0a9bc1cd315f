"""Guard versioning: a tile whose guards all hold runs a copy of its code without them.

A split that does not divide its loop (``split(j, [None, 64])`` on 661 columns)
guards the statements beneath with ``j_0 * 64 + j_1 < 661``. Inside a vectorized
loop such a guard becomes a lane mask (masked loads and stores, ``codegen``), and
would stay one on every tile, though only the last tile of the row needs it: a
masked store to a register tile keeps it in memory, and each masked access costs.

So the body of one loop per nest (the outermost serial or parallel loop whose
variable a guard beneath depends on, and where every such guard can hold for the
whole body: ``plan`` and ``feasible``) is emitted twice::

    for j_0 in range(11):
        if <every guard below holds for every iteration of the loops below>:
            body, those guards dropped              # interior tiles: plain vector code
        else:
            body                                    # the tail tile: lane masks

The check is exact and cheap: each guard conjunct ``a < b`` (or ``a <= b``) whose
difference ``a - b`` is affine in loop variables (``const + sum(c * v)``, plus
lane-invariant terms such as ``fused // 11`` of variables bound outside) holds for
every inner iteration when its maximum over the inner loops' ranges does; that
maximum is the outer part plus ``max(0, c * (extent - 1))`` per inner variable.
Conjuncts of other forms stay in both copies.

Two kinds of condition are versioned, each at its own loop (``KINDS``): the guards of
``if`` statements, and the conditions of ``select`` expressions. A padded convolution
that reads its padding inline (``select(1 <= y and y < 57 and ..., X[...], 0)``) masks
every input load of every tile though only the border tiles need it; its interior tiles
get a copy where the select is its value. The two are independent: a split's guard
may be checkable for a whole row of tiles where a padding condition is checkable only
per tile, so the copy for one kind is made at the outermost loop where all of that
kind's conditions can hold, and the other kind may be versioned further in, inside
both copies. ResNet-18 C2's expert tile (7 columns x 32 channels) ran 704 instructions
for its 126 FMAs a reduction step with every load masked; its unmasked copy runs 262.
Where some conditions of a select can never all hold for a loop's body and no loop
further in can take them apart, the others are dropped alone (``to_drop``).

Measured (2-core Intel Xeon, icelake-server, the ResNet-18 experts, 2 threads, 7
interleaved rounds in one process), time with guards alone over time with selects too:
C1 1.27x, C2 1.22x, C4 1.09x, C6 1.14x, C7 1.07x, C9 1.01x, C10 1.12x, C12 1.09x (of
which dropping a part of the conditions: C10 1.13x, C12 1.10x); the eight kernels
compiled in 2.6 s instead of 2.0.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir.arith import linear_terms
from ...ir.expr import LE, LT, And, Expr, Select
from ...ir.functor import (expr_vars, iter_nodes, transform_expr, transform_stmt,
                           walk_expr, walk_stmt)
from ...ir.stmt import BufferStore, For, IfThenElse, Stmt
from .analysis import has_unsafe


@dataclass(frozen=True)
class Bound:
    """One guard conjunct as ``const + sum(c * outer var) + sum(c * atom) + inner_max``
    ``< 0`` (``strict``) or ``<= 0``: ``inner_max`` is the largest value the inner loop
    variables' terms take."""
    const: int
    outer: tuple        # ((variable name, coefficient), ...)
    atoms: tuple        # ((coefficient, expression of outer variables), ...)
    strict: bool


@dataclass(frozen=True)
class Plan:
    bounds: tuple       # Bound per distinct conjunct the fast copy drops
    fast: Stmt          # the loop body without those conjuncts


def conjuncts(e: Expr) -> list:
    if isinstance(e, And):
        return conjuncts(e.a) + conjuncts(e.b)
    return [e]


def _join(parts: list):
    out = None
    for p in parts:
        out = p if out is None else And(out, p)
    return out


def inner_extents(body: Stmt) -> dict:
    """Loop variable -> extent for every loop inside ``body`` (the largest, should two
    loops share a name: the bounds stay upper bounds)."""
    out: dict = {}
    for n in iter_nodes(body):
        if isinstance(n, For):
            out[n.var.name] = max(n.extent, out.get(n.var.name, 0))
    return out


def bound_of(c: Expr, inner: dict):
    """The conjunct ``c`` as a ``Bound`` over the ``inner`` loop ranges, or None when its
    form is not checkable (not an int32 ``<``/``<=``, a load, or a non-affine term that
    depends on an inner loop)."""
    if not isinstance(c, (LT, LE)) or c.a.dtype != "int32" or has_unsafe(c):
        return None
    coefs: dict = {}
    atoms: list = []
    const = linear_terms(c.a, 1, coefs, atoms) + linear_terms(c.b, -1, coefs, atoms)
    for _, atom in atoms:
        if expr_vars(atom) & inner.keys():
            return None
    for name, coef in coefs.items():
        if name in inner:
            const += max(0, coef * (inner[name] - 1))
    outer = tuple(sorted((n, k) for n, k in coefs.items() if k and n not in inner))
    return Bound(const, outer, tuple(atoms), isinstance(c, LT))


def _guard_conds(body: Stmt) -> list:
    """The conditions of the ``if`` statements in ``body``."""
    return [n.cond for n in iter_nodes(body) if isinstance(n, IfThenElse)]


def _select_conds(body: Stmt) -> list:
    """The conditions of the ``select`` expressions stored in ``body`` (values and
    indices)."""
    out = []
    for n in iter_nodes(body):
        if isinstance(n, BufferStore):
            for e in (n.value, *n.indices):
                out += [x.cond for x in walk_expr(e) if isinstance(x, Select)]
    return out


KINDS = {"guard": _guard_conds, "select": _select_conds}


def bounds_by_kind(loop: For) -> dict:
    """Kind (``KINDS``) -> {conjunct: ``Bound``} of the checkable conjuncts of that kind's
    conditions in ``loop``'s body, for each kind one of whose checkable conjuncts
    depends on ``loop``'s variable; empty unless ``loop`` is a serial or parallel loop
    of more than one iteration. Selects are versioned only at a loop with loops inside
    (a loop over single elements keeps its selects: lazy, with no branch)."""
    if loop.kind not in ("serial", "parallel") or loop.extent <= 1:
        return {}
    inner = inner_extents(loop.body)
    name = loop.var.name
    out = {}
    for kind, conds in KINDS.items():
        if kind == "select" and not inner:
            continue    # one element a copy: the branch would cost what the select does
        bounds: dict = {}
        depends = False
        for cond in conds(loop.body):
            for c in conjuncts(cond):
                b = bounds.get(c) or bound_of(c, inner)
                if b is not None:
                    bounds.setdefault(c, b)
                    depends = depends or name in expr_vars(c)
        if depends:
            out[kind] = bounds
    return out


def feasible(b: Bound, ranges: dict) -> bool:
    """Can ``b`` hold for some values of the outer loop variables (``ranges``: name ->
    (first, last))? Not when the inner loops alone reach past the bound (the loop
    above a whole row of tiles): versioning there would never take the fast copy."""
    if b.atoms:
        return True
    low = b.const
    for name, coef in b.outer:
        r = ranges.get(name)
        if r is None:
            return True
        low += min(coef * r[0], coef * r[1])
    return low < 0 if b.strict else low <= 0


def without(body: Stmt, dropped) -> Stmt:
    """``body`` with the conjuncts ``dropped`` taken out of its guards and its selects'
    conditions (a guard left with none is its then-branch, a select its value)."""
    def drop_expr(e):
        if not isinstance(e, Select):
            return None
        parts = conjuncts(e.cond)
        keep = [c for c in parts if c not in dropped]
        if len(keep) == len(parts):
            return None
        return e.true_value if not keep else Select(_join(keep), e.true_value, e.false_value)

    def drop(s):
        if isinstance(s, BufferStore):
            value = transform_expr(s.value, drop_expr)
            indices = tuple(transform_expr(i, drop_expr) for i in s.indices)
            if value is s.value and all(a is b for a, b in zip(indices, s.indices)):
                return None
            return s.with_(value=value, indices=indices)
        if not isinstance(s, IfThenElse):
            return None
        keep = [c for c in conjuncts(s.cond) if c not in dropped]
        if len(keep) == len(conjuncts(s.cond)):
            return None
        if not keep:
            return s.then_case
        return s.with_(cond=_join(keep))
    return transform_stmt(body, drop)


def versionable_below(body: Stmt) -> frozenset:
    """Names of the loops of more than one iteration in ``body`` that are, or hold, a
    loop the code generator may version (serial or parallel): the variables that a
    versioning further in may see as fixed. (A loop of one iteration has one value
    either way.)"""
    out: set = set()
    for n, path in walk_stmt(body):
        if isinstance(n, For) and n.kind in ("serial", "parallel") and n.extent > 1:
            out.add(n.var.name)
            out.update(a.var.name for a in path if isinstance(a, For) and a.extent > 1)
    return frozenset(out)


def to_drop(per_kind: dict, done, ranges: dict, below: frozenset) -> tuple:
    """(kinds, conjunct -> ``Bound``): what the fast copy of a loop's body drops. Per kind
    of ``per_kind`` (the loop's ``bounds_by_kind``) not in ``done`` (versioned further
    out): all its conjuncts where each can hold for the whole body (``feasible``). For
    selects, also the ones that can where the others never will, at this loop or any
    further in (those depend only on loops that no versioning can take apart: unrolled,
    vectorized or of one iteration; ``below`` is ``versionable_below`` of the body). A
    7 x 7 conv whose register tile spans the row has such column conditions: the fast
    copy drops the row conditions, and the column ones, constant in each unrolled
    column, fold away."""
    out: dict = {}
    kinds = []
    for kind, bounds in per_kind.items():
        if kind in done:
            continue
        ok = {c: b for c, b in bounds.items() if feasible(b, ranges)}
        if len(ok) < len(bounds) and not (kind == "select" and ok and not any(
                expr_vars(c) & below for c in bounds if c not in ok)):
            continue
        out.update(ok)
        kinds.append(kind)
    return tuple(kinds), out


def plan(loop: For, kinds=tuple(KINDS)):
    """The ``Plan`` of versioning ``loop``'s body on all the checkable conditions of
    ``kinds``, or None: ``loop`` must be a serial or parallel loop of more than one
    iteration whose variable a checkable condition of one of ``kinds`` beneath depends
    on. (The code generator drops, per kind, what ``to_drop`` chooses at the outermost
    loop where it can, and versions nothing of that kind inside it.)"""
    per_kind = bounds_by_kind(loop)
    bounds: dict = {}
    for kind in kinds:
        bounds.update(per_kind.get(kind, {}))
    return plan_of(loop, bounds) if bounds else None


def plan_of(loop: For, drop: dict) -> Plan:
    """The ``Plan`` that drops the conjuncts of ``drop`` (conjunct -> ``Bound``)."""
    return Plan(tuple(drop.values()), without(loop.body, set(drop)))


__all__ = ["Bound", "Plan", "KINDS", "bounds_by_kind", "plan", "feasible", "bound_of",
           "conjuncts", "plan_of", "to_drop", "versionable_below", "without"]
