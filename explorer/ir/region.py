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

from dataclasses import dataclass
from typing import NamedTuple

from .arith import NonAffine, from_lin, int_bounds, lin_diff, linear_terms, simplify, sym_bounds
from .expr import Expr, IntImm, Max, Min, Sub, const
from .functor import expr_vars


def _union(bounds: list, pick_min: bool) -> Expr:
    out = bounds[0]
    for b in bounds[1:]:
        terms, d = lin_diff(out, b)        # simplify(out - b), a constant when no terms
        if not terms:
            out = (out if d <= 0 else b) if pick_min else (out if d >= 0 else b)
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
        terms, width = lin_diff(hi, lo)    # simplify(hi - lo + 1) is constant iff no terms
        if not terms:
            n = width + 1
        else:
            try:
                n = int_bounds(from_lin(terms, width), all_ranges)[1] + 1
            except NonAffine:
                return None
        if n >= dim and isinstance(lo, IntImm) and lo.value == 0:
            n = dim
        out.append((lo, max(1, n)))
    return out


def full_region(shape: tuple) -> list:
    return [(const(0), dim) for dim in shape]


# ------------------------------------------------------------------ boxes per loop level
# The constant-extent view of a region, for analyses that count what a loop
# nest touches (features, footprint pictures): each index is parsed once into
# ``const + sum(coef * var) + sum(coef * atom)``; the box that loops[i:] sweep
# (the loops above at 0) is interval arithmetic on the coefficients, atoms
# (``//``, ``%``, ``min``... left by fuse or guards) bounded by ``int_bounds``.

@dataclass(frozen=True)
class Affine:
    """An index as ``const + sum(coefs[v] * v) + sum(c * atom for c, atom in atoms)``."""
    const: int
    coefs: dict                 # var name -> coefficient
    atoms: tuple                # (coefficient, expr) for the non-affine rest
    vars: frozenset             # every variable the index uses


class LoopRange(NamedTuple):
    """A loop as the box analyses see it: its variable's name and extent (from 0)."""
    var: str
    extent: int


def parse_affine(e: Expr) -> Affine:
    """``e`` split into its affine part and the atoms that are not."""
    coefs: dict = {}
    atoms: list = []
    const_ = linear_terms(e, 1, coefs, atoms)
    names = set(k for k, v in coefs.items() if v)
    for _, a in atoms:
        names |= expr_vars(a)
    return Affine(const_, {k: v for k, v in coefs.items() if v}, tuple(atoms), frozenset(names))


def _atom_level_bounds(atom: Expr, loops, level: int) -> tuple:
    ranges = {v: (0, 0) for v in expr_vars(atom)}
    for j, lp in enumerate(loops):
        if j >= level and lp.var in ranges:
            ranges[lp.var] = (0, lp.extent - 1)
    return int_bounds(atom, ranges)


def _atom_ranges(atom: Expr, loops, size: int) -> list:
    """``_atom_level_bounds`` at every level (an atom that cannot be bounded spans the
    dimension), computed again only below a loop the atom uses: between two of them the
    loops that vary, as far as the atom can tell, are the same."""
    names = expr_vars(atom)
    out, bounds = [], None
    for i in range(len(loops)):
        if bounds is None or loops[i - 1].var in names:
            try:
                bounds = _atom_level_bounds(atom, loops, i)
            except NonAffine:
                bounds = (0, size - 1)
        out.append(bounds)
    return out


def index_ranges(a: Affine, loops, size: int) -> list:
    """``[lo, hi]`` of one index for each loop level ``i``: loops[i:] sweep their
    ranges, the loops above sit at 0. ``loops`` have ``.var`` (a name) and
    ``.extent``; an atom that cannot be bounded spans the dimension (``size``)."""
    n = len(loops)
    lo = hi = a.const
    coefs = a.coefs
    out = [None] * n
    for i in range(n - 1, -1, -1):
        lp = loops[i]
        c = coefs.get(lp.var)
        if c:
            span = c * (lp.extent - 1)
            if span < 0:
                lo += span
            else:
                hi += span
        out[i] = [lo, hi]
    for coef, atom in a.atoms:
        for i, (blo, bhi) in enumerate(_atom_ranges(atom, loops, size)):
            blo, bhi = coef * blo, coef * bhi
            r = out[i]
            if blo <= bhi:
                r[0] += blo
                r[1] += bhi
            else:
                r[0] += bhi
                r[1] += blo
    return out


def level_extents(indices: list, loops, shape: tuple) -> list:
    """``exts[i][d]``: the extent along dimension ``d`` of the box that accesses at
    ``indices`` (tuples of ``Affine``, one per access) touch while loops[i:] run,
    between 1 and the dimension's size. One list per loop level, outermost first."""
    n = len(loops)
    exts = [[1] * len(shape) for _ in range(n)]
    if not indices:
        return exts
    for d, size in enumerate(shape):
        per_index = [index_ranges(idx[d], loops, size) for idx in indices]
        first, rest = per_index[0], per_index[1:]
        for i in range(n):
            lo, hi = first[i]
            for other in rest:
                olo, ohi = other[i]
                if olo < lo:
                    lo = olo
                if ohi > hi:
                    hi = ohi
            w = hi - lo + 1
            if w > size:
                w = size
            exts[i][d] = w if w > 1 else 1
    return exts


def first_hole(sites: list):
    """Where the points written at ``sites`` (index tuples in loop variables, each with
    the ``{var: (lo, hi)}`` of the loops that vary, as ``union_region`` takes them) leave
    holes in their bounding box: ``(site, dim, points, box)`` for the first dimension
    whose points are fewer than its box, or None. A dimension is judged only when its
    index is affine in varying loops that no other dimension uses (a fused index is
    taken as dense). ``j_1 * 8`` with ``j_1`` in [0, 2) writes 2 points of a box of 9:
    a consumer covering the box there would read 7 elements nobody wrote."""
    for n, (idx, ranged) in enumerate(sites):
        forms = [parse_affine(e) for e in idx]
        for d, a in enumerate(forms):
            if a.atoms:
                continue
            varying = {v: c for v, c in a.coefs.items()
                       if v in ranged and ranged[v][1] > ranged[v][0]}
            if any(v in other.vars for v in varying
                   for k, other in enumerate(forms) if k != d):
                continue
            span, points, dense = 0, 1, True
            for c, steps in sorted((abs(c), ranged[v][1] - ranged[v][0])
                                   for v, c in varying.items()):
                dense = dense and c <= span + 1
                span += c * steps
                points *= steps + 1
            if not dense:
                return n, d, points, span + 1
    return None
