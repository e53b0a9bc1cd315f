"""Numbers behind the schedule pictures: how loops tile a 2-D output, and how
many bytes a block touches under each of its loops.

Both only read the IR: the tiling evaluates the blocks' loop bindings on a
grid of loop values (numpy), the footprint bounds each access with the
engine's interval arithmetic. The footprint is a box bound per buffer (what
a cache must hold if the loop's data is to stay resident), the number a
roofline or cache picture needs, not an exact count of distinct elements.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.ir.arith import NonAffine, int_bounds
from explorer.ir.expr import (Add, FloorDiv, FloorMod, IntImm, Max, Min, Mul, Sub, Var)
from explorer.ir.functor import expr_vars, substitute, walk_stmt
from explorer.ir.stmt import BlockRealize, For

from ._nest import func_of

_NP = {Add: np.add, Sub: np.subtract, Mul: np.multiply, FloorDiv: np.floor_divide,
       FloorMod: np.mod, Min: np.minimum, Max: np.maximum}
GPU_GROUPS = (("blockIdx", "block"), ("vthread", "vthread"), ("threadIdx", "thread"))


def eval_index(e, env: dict):
    """Evaluate an integer index expression on numpy arrays of loop values."""
    if isinstance(e, Var):
        return env.get(e.name, 0)
    if isinstance(e, IntImm):
        return e.value
    fn = _NP.get(type(e))
    if fn is None:
        raise ValueError(f"cannot evaluate {type(e).__name__} in an index")
    return fn(eval_index(e.a, env), eval_index(e.b, env))


def find_realize(func, block: str | None = None, ndim: int = 2):
    """(realize, loops) of ``block``, or of the last block writing an output of >= ndim dims."""
    found = [(n, [p for p in path if isinstance(p, For)]) for n, path in walk_stmt(func.body)
             if isinstance(n, BlockRealize)]
    if block is not None:
        for r, loops in found:
            if r.block.name == block:
                return r, loops
        raise ValueError(f"no block {block!r}; blocks are {[r.block.name for r, _ in found]}")
    outs = {p.name for p in func.params}
    pick = [x for x in found if x[0].block.body.buffer.name in outs
            and len(x[0].block.body.buffer.shape) >= ndim]
    return (pick or found)[-1]


# ------------------------------------------------------------------ tiling

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
    block: str
    dims: tuple          # output dimension names (iteration variables)
    shape: tuple         # (rows, cols)
    levels: tuple


def tiling(obj, block: str | None = None, dims: tuple = (-2, -1),
           max_points: int = 1 << 22) -> Tiling:
    """How the loops around ``block`` cut two dimensions of its output into tiles."""
    realize, loops = find_realize(func_of(obj), block)
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
    rows = np.broadcast_to(eval_index(bind[iv_names[0]], env), (npoints,))
    cols = np.broadcast_to(eval_index(bind[iv_names[1]], env), (npoints,))
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


# ------------------------------------------------------------------ footprint

@dataclass(frozen=True)
class Footprint:
    """Bytes per buffer that one whole run of ``loop`` (all its iterations) touches."""
    loop: str
    extent: int
    bytes: dict

    @property
    def total(self) -> int:
        return sum(self.bytes.values())


def footprints(obj, block: str | None = None) -> list:
    """One Footprint per loop around ``block``, outermost first."""
    realize, loops = find_realize(func_of(obj), block, ndim=0)
    b = realize.block
    bind = {iv.var.name: val for iv, val in zip(b.iter_vars, realize.iter_values)}
    accesses = [(b.body.buffer, b.body.indices)]
    accesses += [(ld.buffer, ld.indices) for ld in _loads(b.body.value)]
    out = []
    for d, lp in enumerate(loops):
        ranges = {x.var.name: (0, x.extent - 1 if k >= d else 0) for k, x in enumerate(loops)}
        boxes: dict = {}
        for buf, idx in accesses:
            box = [_bounds(substitute(i, bind), ranges, n) for i, n in zip(idx, buf.shape)]
            old = boxes.get(buf.name, (buf, box))[1]
            boxes[buf.name] = (buf, [(min(a[0], o[0]), max(a[1], o[1])) for a, o in zip(box, old)])
        out.append(Footprint(lp.var.name, lp.extent, {
            name: int(np.prod([hi - lo + 1 for lo, hi in box])) * np.dtype(buf.dtype).itemsize
            for name, (buf, box) in boxes.items()}))
    return out


def _loads(e) -> list:
    from explorer.ir.functor import collect_loads
    return collect_loads(e)


def _bounds(e, ranges: dict, dim: int) -> tuple:
    try:
        lo, hi = int_bounds(e, ranges)
    except NonAffine:
        lo, hi = 0, dim - 1
    return max(lo, 0), min(hi, dim - 1)
