"""Regions: which part of a buffer a set of accesses touches under a loop.

An access site is an index tuple in terms of loop variables together with the
loops that vary beneath the chosen location (``ranged``: name -> (lo, hi)).
Per dimension the union of the sites' symbolic bounds gives ``lo`` (an
expression of the loops above the location) and a constant extent; when the
extent is not provably constant, a constant upper bound over every loop's
range is used (the region may then be larger than needed, never smaller).
A region is not clamped to the buffer: at the edges it may reach past it (the
loops that cover a region guard those points, as the producers' own guards
did), so per iteration it says what is really produced there.
"""
from __future__ import annotations

from .arith import NonAffine, int_bounds, simplify, sym_bounds
from .expr import Expr, IntImm, Max, Min, Sub, const


def _union(bounds: list, pick_min: bool) -> Expr:
    out = bounds[0]
    for b in bounds[1:]:
        d = simplify(Sub(out, b))
        if isinstance(d, IntImm):
            out = (out if d.value <= 0 else b) if pick_min else (out if d.value >= 0 else b)
        else:
            out = simplify((Min if pick_min else Max)(out, b))
    return out


def union_region(sites: list, shape: tuple, all_ranges: dict):
    """``sites``: list of (indices, ranged). Returns [(lo, extent)] per dim, or None
    when an index is not analysable."""
    out = []
    for d, dim in enumerate(shape):
        los, his = [], []
        for idx, ranged in sites:
            try:
                lo, hi = sym_bounds(idx[d], ranged)
            except NonAffine:
                return None
            los.append(lo)
            his.append(hi)
        lo, hi = _union(los, True), _union(his, False)
        ext = simplify(hi - lo + 1)
        if isinstance(ext, IntImm):
            n = ext.value
        else:
            try:
                n = int_bounds(simplify(hi - lo), all_ranges)[1] + 1
            except NonAffine:
                return None
        if n >= dim and isinstance(lo, IntImm) and lo.value == 0:
            n = dim
        out.append((lo, max(1, n)))
    return out


def full_region(shape: tuple) -> list:
    return [(const(0), dim) for dim in shape]
