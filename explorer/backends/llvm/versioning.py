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
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir.arith import linear_terms
from ...ir.expr import LE, LT, And, Expr
from ...ir.functor import expr_vars, iter_nodes, transform_stmt
from ...ir.stmt import For, IfThenElse, Stmt
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


def _guards(body: Stmt):
    return [n for n in iter_nodes(body) if isinstance(n, IfThenElse)]


def depends_on(loop: For) -> bool:
    """Does a checkable guard in ``loop``'s body depend on the loop's variable?"""
    inner = inner_extents(loop.body)
    name = loop.var.name
    for g in _guards(loop.body):
        for c in conjuncts(g.cond):
            if name in expr_vars(c) and bound_of(c, inner) is not None:
                return True
    return False


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


def plan(loop: For):
    """The ``Plan`` of versioning ``loop``'s body, or None: ``loop`` must be a serial or
    parallel loop of more than one iteration whose variable a checkable guard beneath
    depends on. (The code generator takes the outermost such loop whose bounds are
    ``feasible``, and versions nothing inside it.)"""
    if loop.kind not in ("serial", "parallel") or loop.extent <= 1 or not depends_on(loop):
        return None
    inner = inner_extents(loop.body)
    bounds: dict = {}
    for g in _guards(loop.body):
        for c in conjuncts(g.cond):
            b = bound_of(c, inner)
            if b is not None:
                bounds.setdefault(c, b)
    if not bounds:
        return None
    dropped = set(bounds)

    def drop(s):
        if not isinstance(s, IfThenElse):
            return None
        keep = [c for c in conjuncts(s.cond) if c not in dropped]
        if len(keep) == len(conjuncts(s.cond)):
            return None
        if not keep:
            return s.then_case
        return s.with_(cond=_join(keep))
    fast = transform_stmt(loop.body, drop)
    return Plan(tuple(bounds.values()), fast)


__all__ = ["Bound", "Plan", "plan", "feasible", "bound_of", "conjuncts"]
