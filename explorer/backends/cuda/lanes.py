"""Proofs the CUDA generator needs before it emits a ``float2``/``float4`` access.

A vectorized loop ``for v in vectorized(L)`` becomes chunks of ``w`` lanes
(``v = c*w + l``, ``l`` in ``[0, w)``). One access of the chunk is a vector access
when its row-major flat index is ``base + l`` with ``base`` free of ``l`` (contiguous)
and ``base`` a multiple of ``w`` (aligned, the buffer itself starting 16-byte aligned).
Index expressions hold ``//`` and ``%`` by constants (splits and fuses), so plain
linear algebra is not enough: :func:`modular` gives what is known of an expression
modulo a constant (TVM's ``ModularSet``), and :func:`lane_split` pushes the lane out of
``(x + l) // d`` and ``(x + l) % d`` when the chunk cannot cross a multiple of ``d``.
"""
from __future__ import annotations

from math import gcd

from ...ir.expr import (LE, LT, Add, And, Expr, FloorDiv, FloorMod, IntImm, Mul, Sub, Var,
                        const)
from ...ir.functor import expr_vars


def modular(e: Expr, known: dict | None = None) -> tuple:
    """(m, r): every value of integer expression ``e`` is ``m*k + r`` for some integer k
    (m == 0: the constant r). ``known`` maps variable names to such pairs (default (1, 0))."""
    known = known or {}
    if isinstance(e, IntImm):
        return 0, e.value
    if isinstance(e, Var):
        return known.get(e.name, (1, 0))
    if isinstance(e, (Add, Sub)):
        (ma, ra), (mb, rb) = modular(e.a, known), modular(e.b, known)
        return _norm(gcd(ma, mb), ra + rb if isinstance(e, Add) else ra - rb)
    if isinstance(e, Mul):
        (ma, ra), (mb, rb) = modular(e.a, known), modular(e.b, known)
        if ma == 0:
            return _norm(abs(ra) * mb, ra * rb)
        if mb == 0:
            return _norm(abs(rb) * ma, ra * rb)
        return _norm(gcd(gcd(ma * mb, ma * rb), mb * ra), ra * rb)
    if isinstance(e, (FloorDiv, FloorMod)) and isinstance(e.b, IntImm) and e.b.value > 0:
        d = e.b.value
        m, r = modular(e.a, known)
        if isinstance(e, FloorDiv):
            if m == 0:
                return 0, r // d
            return (m // d, r // d) if m % d == 0 else (1, 0)
        if m == 0:
            return 0, r % d
        g = gcd(m, d)
        return _norm(g, r % g)
    return 1, 0


def _norm(m: int, r: int) -> tuple:
    return (0, r) if m == 0 else (m, r % m)


def multiple_of(e: Expr, w: int, known: dict | None = None) -> bool:
    """Is every value of ``e`` a multiple of ``w``?"""
    m, r = modular(e, known)
    return r % w == 0 and (m % w == 0)


def lane_split(e: Expr, lane: str, w: int, known: dict | None = None):
    """(base, c) with ``e == base + c*lane`` for every ``lane`` in ``[0, w)`` and ``base``
    free of ``lane``; None when that cannot be shown."""
    if lane not in expr_vars(e):
        return e, 0
    if isinstance(e, Var):
        return const(0), 1
    if isinstance(e, (Add, Sub)):
        a, b = lane_split(e.a, lane, w, known), lane_split(e.b, lane, w, known)
        if a is None or b is None:
            return None
        if isinstance(e, Add):
            return Add(a[0], b[0]), a[1] + b[1]
        return Sub(a[0], b[0]), a[1] - b[1]
    if isinstance(e, Mul) and isinstance(e.b, IntImm):
        a = lane_split(e.a, lane, w, known)
        return None if a is None else (Mul(a[0], e.b), a[1] * e.b.value)
    if isinstance(e, Mul) and isinstance(e.a, IntImm):
        b = lane_split(e.b, lane, w, known)
        return None if b is None else (Mul(e.a, b[0]), b[1] * e.a.value)
    if isinstance(e, (FloorDiv, FloorMod)) and isinstance(e.b, IntImm) and e.b.value > 0:
        inner = lane_split(e.a, lane, w, known)
        if inner is None or inner[1] < 0:
            return None
        base, c = inner
        d = e.b.value
        m, r = modular(base, known)
        g = gcd(m, d)       # base % d is r % g plus a multiple of g (exactly r % d if m == 0)
        if (r % d if m == 0 else r % g + d - g) + c * (w - 1) >= d:
            return None     # the chunk may cross a multiple of d
        if isinstance(e, FloorDiv):
            return FloorDiv(base, e.b), 0
        return FloorMod(base, e.b), c
    return None


def flat_split(shape: tuple, indices: tuple, lane: str, w: int, known: dict | None = None):
    """``lane_split`` of the row-major flat index of an access, or None."""
    base: Expr = const(0)
    coeff, stride = 0, 1
    for dim, idx in reversed(list(zip(shape, indices))):
        got = lane_split(idx, lane, w, known)
        if got is None:
            return None
        base = Add(base, Mul(got[0], const(stride)))
        coeff += got[1] * stride
        stride *= int(dim)
    return base, coeff


def uniform_cond(cond: Expr, lane: str, w: int, known: dict | None = None) -> bool:
    """Does ``cond`` take one value for all ``lane`` in ``[0, w)``? (``a < b`` with
    ``a - b == base + lane`` and ``base`` a multiple of ``w`` does: no multiple-of-``w``
    aligned chunk straddles 0.)"""
    if lane not in expr_vars(cond):
        return True
    if isinstance(cond, And):
        return uniform_cond(cond.a, lane, w, known) and uniform_cond(cond.b, lane, w, known)
    if isinstance(cond, (LT, LE)) and cond.a.dtype == "int32":
        diff = Sub(cond.a, cond.b) if isinstance(cond, LT) else \
            Sub(Sub(cond.a, cond.b), const(1))          # a <= b  <=>  a - b - 1 < 0
        got = lane_split(diff, lane, w, known)
        if got is None:
            return False
        base, c = got
        return c == 0 or (c == 1 and multiple_of(base, w, known))
    return False
