"""Buffer accesses of one store: regions touched per loop level, stride and reuse.

Index expressions of a lowered program are affine in the loop variables, up to
a few ``//``, ``%``, ``min`` or ``max`` terms left by fuse or guards. Each index
is parsed once (:func:`explorer.ir.region.parse_affine`); the box a set of loops
touches comes from :func:`explorer.ir.region.level_extents`, the same function
the footprint pictures use (:mod:`explorer.ir.footprint`). Definitions follow
MetaSchedule's per-store features (group 2); where they differ it is said.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.expr import BinaryOp, BufferLoad, IntImm, Select, Var
from ..ir.functor import expr_children
from ..ir.region import Affine, level_extents, parse_affine  # noqa: F401 (Affine: re-exported)

DTYPE_BYTES = {"float32": 4, "float64": 8, "int32": 4, "bool": 1}
READ, WRITE, READ_WRITE = 0, 1, 2
LOOP_MULTIPLE_READ, SERIAL_MULTIPLE_RW, NO_REUSE = 0, 1, 2


@dataclass
class BufferAccess:
    """What one store does to one buffer, and the features derived from it."""
    buffer: object
    access: int
    indices: list = field(default_factory=list)     # list of tuples of Affine
    numel: list = field(default_factory=list)       # per loop level (0 = outermost)
    line_numel: list = field(default_factory=list)  # cache lines touched, per loop level
    runs: list = field(default_factory=list)        # contiguous run in elements, per level
    access_shape: tuple = ()
    min_stride: int = 0
    innermost_stride: int = 0
    prod_non_strided: int = 1
    reuse_type: int = NO_REUSE
    reuse_dis_iter: float = 0.0
    reuse_dis_bytes: float = 0.0
    reuse_ct: int = 0
    bytes: float = 0.0
    unique_bytes: float = 0.0
    lines: float = 0.0
    unique_lines: float = 0.0
    guarded: bool = False      # read only under a Select (a padded input inlined)
    _vars: frozenset | None = None
    _flat: dict = field(default_factory=dict, compare=False, repr=False)  # flat_strides'

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES.get(self.buffer.dtype, 4)

    @property
    def region_vars(self) -> frozenset:
        if self._vars is None:
            self._vars = frozenset().union(*(a.vars for idx in self.indices for a in idx))
        return self._vars

    def row(self) -> list:
        ct = self.reuse_ct if self.reuse_ct > 0 else 0.5
        return [float(self.access == READ), float(self.access == WRITE),
                float(self.access == READ_WRITE), self.bytes, self.unique_bytes, self.lines,
                self.unique_lines, float(self.reuse_type == LOOP_MULTIPLE_READ),
                float(self.reuse_type == SERIAL_MULTIPLE_RW), float(self.reuse_type == NO_REUSE),
                self.reuse_dis_iter, self.reuse_dis_bytes, self.reuse_ct, self.bytes / ct,
                self.unique_bytes / ct, self.lines / ct, self.unique_lines / ct,
                self.innermost_stride]


def nodes(exprs) -> list:
    """Every node of ``exprs`` in pre-order (an explicit stack: this runs per candidate)."""
    out: list = []
    stack = list(reversed(exprs))
    while stack:
        e = stack.pop()
        out.append(e)
        if isinstance(e, BinaryOp):
            stack += (e.b, e.a)
        elif not isinstance(e, (Var, IntImm)):
            stack.extend(reversed(expr_children(e)))
    return out


def gather(store, parse, value_nodes: list) -> list:
    """The buffers a store touches: the written one first, then loads in order
    (``value_nodes``: the nodes of the stored value). A read is ``guarded`` when
    every load of it sits in a branch of a ``Select``: the backend then loads
    through a guarded address, which LLVM's loop vectorizer turns into a gather."""
    under = {id(n) for sel in value_nodes if isinstance(sel, Select)
             for n in nodes([sel.true_value, sel.false_value]) if isinstance(n, BufferLoad)}
    out: dict = {}
    w = BufferAccess(store.buffer, WRITE)
    w.indices.append(tuple(parse(i) for i in store.indices))
    out[store.buffer.name] = w
    for node in value_nodes:
        if not isinstance(node, BufferLoad):
            continue
        acc = out.get(node.buffer.name)
        if acc is None:
            acc = out[node.buffer.name] = BufferAccess(node.buffer, READ)
            acc.guarded = id(node) in under
        elif acc.access == WRITE:
            acc.access = READ_WRITE
        else:
            acc.guarded = acc.guarded and id(node) in under
        acc.indices.append(tuple(parse(i) for i in node.indices))
    return list(out.values())


# ------------------------------------------------------------------ regions

def set_region(acc: BufferAccess, loops, cache_line: int) -> None:
    """numel[i]: elements touched while loops[i:] run (outer loops at 0), as MetaSchedule;
    line_numel[i]: the cache lines they span (rows of the box, each a contiguous run)."""
    n, shape = len(loops), acc.buffer.shape
    if n == 0:
        acc.numel, acc.line_numel, acc.runs = [], [], []
        acc.access_shape = tuple(1 for _ in shape)
        return
    exts = level_extents(acc.indices, loops, shape)
    acc.numel = [_prod(e) for e in exts]
    acc.access_shape = tuple(exts[0])
    runs = [_run(e, shape) for e in exts]
    nbytes = acc.dtype_bytes
    acc.line_numel = [_lines(r, nbytes, cache_line) for r in runs]
    acc.runs = [run for run, _ in runs]


def _run(ext: list, shape: tuple) -> tuple:
    """(elements of the contiguous runs of a box region, number of runs)."""
    run, d = 1, len(shape) - 1
    while d >= 0:
        run *= ext[d]
        d -= 1
        if ext[d + 1] != shape[d + 1]:
            break
    return run, _prod(ext[:d + 1])


def _lines(run_rows: tuple, nbytes: int, cache_line: int) -> int:
    """Cache lines of a box region from ``_run``'s (run, rows)."""
    run, rows = run_rows
    return rows * -(-run * nbytes // cache_line)


# ------------------------------------------------------------------ stride

def _var_stride(acc: BufferAccess, var: str, strides: list) -> int:
    best = 0
    for idx in acc.indices:
        for d in range(len(idx) - 1, -1, -1):
            a = idx[d]
            if var in a.vars:
                coef = abs(a.coefs.get(var, 1)) or 1
                s = coef * strides[d]
                best = s if best == 0 else min(best, s)
                break
    return best


def set_stride(acc: BufferAccess, loops) -> None:
    shape = acc.buffer.shape
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    n = len(loops)
    i, stride = n - 1, 0
    while i >= 0:
        stride = _var_stride(acc, loops[i].var, strides)
        if stride:
            break
        i -= 1
    acc.min_stride = stride
    acc.innermost_stride = stride if i == n - 1 else 0
    prod = 1
    for j in range(n - 1, i, -1):
        prod *= loops[j].extent
    acc.prod_non_strided = prod


def flat_strides(acc: BufferAccess, var: str) -> list:
    """Per access of ``acc``: the step of its flat (row-major) index when ``var`` grows
    by one; None when ``var`` sits in a non-affine term. Kept on ``acc`` (the features
    ask again for each loop level): do not change the list."""
    key = (var, len(acc.indices))
    out = acc._flat.get(key)
    if out is None:
        out = acc._flat[key] = _flat_strides(acc, var)
    return out


def _flat_strides(acc: BufferAccess, var: str) -> list:
    shape = acc.buffer.shape
    out = []
    for idx in acc.indices:
        step, scale = 0, 1
        for d in range(len(shape) - 1, -1, -1):
            a = idx[d]
            if var in a.vars and var not in a.coefs:
                step = None
                break
            step += a.coefs.get(var, 0) * scale
            scale *= shape[d]
        out.append(step)
    return out


def contiguous_bytes(acc: BufferAccess) -> int:
    """Bytes of the longest contiguous run in the touched region (trailing full dims)."""
    run = 1
    for d in range(len(acc.buffer.shape) - 1, -1, -1):
        run *= acc.access_shape[d]
        if acc.access_shape[d] != acc.buffer.shape[d]:
            break
    return run * acc.dtype_bytes


# ------------------------------------------------------------------ reuse

def set_reuse(acc: BufferAccess, loops, touched: dict, top_bytes: int) -> None:
    """Reuse of ``acc`` as MetaSchedule: the innermost loop the indices do not use
    (loop multiple read), else the innermost loop under which an earlier store
    touched the buffer too (serial multiple read/write). ``touched[uid][name]`` lists
    the elements each store touched under loop ``uid`` so far."""
    rvars = acc.region_vars
    n = len(loops)
    for i in range(n - 1, -1, -1):
        lp = loops[i]
        if lp.var not in rvars:
            acc.reuse_type = LOOP_MULTIPLE_READ
            acc.reuse_ct = lp.extent
            acc.reuse_dis_iter = float(_prod(l.extent for l in loops[i + 1:]))
            if i == n - 1:
                acc.reuse_dis_bytes = float(top_bytes)
            else:
                acc.reuse_dis_bytes = float(_touched_bytes(touched[loops[i + 1].uid]))
            return
        seen = touched[lp.uid][acc.buffer.name][1]
        if len(seen) >= 2:
            acc.reuse_type = SERIAL_MULTIPLE_RW
            acc.reuse_ct = len(seen) - 1
            acc.reuse_dis_iter = min(seen) / lp.extent
            acc.reuse_dis_bytes = _touched_bytes(touched[lp.uid]) / lp.extent
            return


def _touched_bytes(per_buffer: dict) -> int:
    return sum(nbytes * sum(numels) for nbytes, numels in per_buffer.values())


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


def set_counts(acc: BufferAccess, loops, cache_line: int) -> None:
    nb = acc.dtype_bytes
    prod = _prod(lp.extent for lp in loops)
    acc.bytes = float(nb * prod)
    if not loops:
        acc.unique_bytes = acc.lines = acc.unique_lines = 1.0
        return
    acc.unique_bytes = float(acc.numel[0] * nb)
    frac = min(1.0, acc.min_stride * nb / cache_line)
    acc.lines = max(1.0, prod / acc.prod_non_strided * frac)
    acc.unique_lines = max(1.0, acc.unique_bytes / min(cache_line, contiguous_bytes(acc)))
