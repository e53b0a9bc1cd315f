"""Tiling: how the loops around a block cut two dimensions of its output into tiles.

The block's bindings are evaluated on the grid of its loop values (numpy, one
array per loop), and the loops are grouped into levels: GPU loops by thread
kind (blockIdx, vthread, threadIdx), the rest outermost first, a new level
starting where a loop cuts a dimension the level already cuts. Each level is a
list of rectangles in output coordinates: every tile at the top level, and at
a deeper level the tiles inside the first tile of the level above (so a picture
stays readable at any size).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .eval import evaluate
from .expr import Var
from .functor import expr_vars
from .loop_tree import find_realize
from .stmt import PrimFunc

GPU_GROUPS = (("blockIdx", "block"), ("vthread", "vthread"), ("threadIdx", "thread"))


@dataclass(frozen=True)
class TileLevel:
    """One level of the tiling: its loops and the tiles it cuts (rectangles
    ``(row, col, height, width)`` in output coordinates)."""
    name: str
    loops: tuple
    count: int           # tiles at this level over the whole 2-D space
    rects: tuple         # all tiles (level 0) or those inside the first parent tile
    labels: tuple = ()   # per rect: the block or thread id it belongs to (GPU levels)


@dataclass(frozen=True)
class Tiling:
    """The tiling of ``block``'s output along ``dims``: its levels, outermost first."""
    block: str
    dims: tuple          # output dimension names (iteration variables)
    shape: tuple         # (rows, cols)
    levels: tuple


def tiling(func: PrimFunc, block: str | None = None, dims: tuple = (-2, -1),
           max_points: int = 1 << 22) -> Tiling:
    """How the loops around ``block`` cut two dimensions of its output into tiles."""
    realize, loops = find_realize(func, block, ndim=2)
    b = realize.block
    idx = b.body.indices
    iv_names = [idx[d].name if isinstance(idx[d], Var) else None for d in dims]
    if None in iv_names:
        raise ValueError(f"block {b.name!r}: output indices {idx} are not plain iteration vars")
    bind = {iv.var.name: val for iv, val in zip(b.iter_vars, realize.iter_values)}
    used = set().union(*(expr_vars(bind[n]) for n in iv_names))
    rel = [lp for lp in loops if lp.var.name in used]
    npoints = int(np.prod([lp.extent for lp in rel])) if rel else 1
    if npoints > max_points:
        raise ValueError(f"the output has {npoints} points; tiling pictures stop at {max_points}")
    grids = np.meshgrid(*[np.arange(lp.extent) for lp in rel], indexing="ij") if rel else []
    env = {lp.var.name: g.ravel() for lp, g in zip(rel, grids)}
    rows = np.broadcast_to(evaluate(bind[iv_names[0]], env, 0), (npoints,))
    cols = np.broadcast_to(evaluate(bind[iv_names[1]], env, 0), (npoints,))
    ext = {iv.var.name: iv.extent for iv in b.iter_vars}
    shape = (ext[iv_names[0]], ext[iv_names[1]])
    keep = (rows < shape[0]) & (cols < shape[1])
    env = {k: v[keep] for k, v in env.items()}
    rows, cols = rows[keep], cols[keep]
    levels, parent, seen = [], np.ones(len(rows), dtype=bool), set()
    for name, group in _groups(rel, bind, iv_names):
        seen |= {lp.var.name for lp in group}
        above = [lp for lp in rel if lp.var.name in seen]
        key = _mixed_radix([env[lp.var.name] for lp in above], [lp.extent for lp in above])
        level = _level(name, group, key, rows, cols, parent)
        levels.append(level)
        first = key[parent][0] if parent.any() else -1
        parent = key == first
    return Tiling(b.name, tuple(iv_names), shape, tuple(levels))


def _groups(rel: list, bind: dict, iv_names: list) -> list:
    """Loops grouped into levels: GPU loops by thread kind; the rest outermost first,
    a new level starting when a loop cuts a dimension the level already cuts."""
    out, cur, dims_cur = [], [], set()
    gpu = {tag: [lp for lp in rel if lp.kind == "thread" and lp.thread.startswith(tag)]
           for tag, _ in GPU_GROUPS}
    for tag, label in GPU_GROUPS:
        if gpu[tag]:
            out.append((label, tuple(gpu[tag])))
    for lp in rel:
        if lp.kind == "thread":
            continue
        dims = {n for n in iv_names if lp.var.name in expr_vars(bind[n])}
        if cur and dims & dims_cur:
            out.append((", ".join(x.var.name for x in cur), tuple(cur)))
            cur, dims_cur = [], set()
        cur.append(lp)
        dims_cur |= dims
    if cur:
        out.append((", ".join(x.var.name for x in cur), tuple(cur)))
    return out


def _mixed_radix(values: list, extents: list):
    key = np.zeros(len(values[0]) if values else 0, dtype=np.int64)
    for v, e in zip(values, extents):
        key = key * e + v
    return key


def _level(name: str, group: tuple, key, rows, cols, inside) -> TileLevel:
    """Tiles of one level: keys are mixed-radix loop values, so they index arrays."""
    size = int(key.max()) + 1 if len(key) else 0
    count = int(np.count_nonzero(np.bincount(key, minlength=size)))
    sel_key, r, c = key[inside], rows[inside], cols[inside]
    big = np.iinfo(np.int64).max
    r0, c0 = np.full(size, big), np.full(size, big)
    r1, c1 = np.full(size, -1), np.full(size, -1)
    np.minimum.at(r0, sel_key, r)
    np.minimum.at(c0, sel_key, c)
    np.maximum.at(r1, sel_key, r)
    np.maximum.at(c1, sel_key, c)
    used = np.flatnonzero(r1 >= 0)
    rects = tuple((int(r0[u]), int(c0[u]), int(r1[u] - r0[u] + 1), int(c1[u] - c0[u] + 1))
                  for u in used)
    return TileLevel(name, tuple(lp.var.name for lp in group), count, rects,
                     tuple(int(u) for u in used))
