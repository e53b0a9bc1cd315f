"""Which block and which thread compute each element of an output: read from the lowered program.

    tm = thread_map(lower(sch.func))          # or thread_map(build(sch, "cuda"))
    tm.block_id[i, j], tm.thread_id[i, j]     # linear blockIdx / threadIdx of C[i, j]
    tm.thread_box(block=0, thread=5)          # the box of elements thread 5 of block 0 writes

The answer comes from the same lowered function the code generator emits and the
interpreter checks, under the execution model of ``explorer.backends.barriers``:
every ``BufferStore`` to the buffer inside its launch is evaluated (numpy, over the
values of the loops it depends on) with its ``blockIdx``/``threadIdx`` loops as the
thread's coordinates, ``vthread`` loops as loops of one thread, a loop nested in a loop
of the same tag as the same thread (``if idx < extent``), and the ``if`` conditions
around the store as masks. Ids are linear as in CUDA: block ``x + gx * (y + gy * z)``,
thread ``x + bx * (y + by * z)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import BuildError
from ...ir.eval import evaluate
from ...ir.functor import expr_vars
from ...ir.stmt import Allocate, BufferStore, For, IfThenElse, PrimFunc, SeqStmt
from ..barriers import BLOCK_TAGS, THREAD_TAGS, is_thread_loop, launches

MAX_POINTS = 1 << 23            # loop points evaluated per store (memory: a few arrays of it)


@dataclass(frozen=True)
class ThreadMap:
    """Who writes each element of ``buffer`` in launch ``launch`` (arrays of the buffer's
    shape; -1 where no thread of that launch writes the element)."""
    buffer: str
    shape: tuple
    launch: int                 # index of the launch (kernel) among the function's launches
    grid: tuple                 # (x, y, z) blocks
    block: tuple                # (x, y, z) threads per block
    block_id: np.ndarray        # linear blockIdx of the (last listed) writer
    thread_id: np.ndarray       # linear threadIdx within its block
    vthread_id: np.ndarray      # the writer's vthread iteration (0 without vthreads)
    writers: np.ndarray         # distinct (block, thread) pairs writing the element

    @property
    def num_blocks(self) -> int:
        return math.prod(self.grid)

    @property
    def threads_per_block(self) -> int:
        return math.prod(self.block)

    @property
    def unwritten(self) -> int:
        """Elements no thread of the launch writes."""
        return int(np.count_nonzero(self.block_id < 0))

    @property
    def shared(self) -> int:
        """Elements written by more than one thread (a cross-thread reduction's partial
        results, or a race the interpreter's check names)."""
        return int(np.count_nonzero(self.writers > 1))

    def block_coords(self, block_id: int) -> tuple:
        """(blockIdx.x, .y, .z) of a linear block id."""
        return _coords(block_id, self.grid)

    def thread_coords(self, thread_id: int) -> tuple:
        """(threadIdx.x, .y, .z) of a linear thread id."""
        return _coords(thread_id, self.block)

    def elements(self, block: int, thread: int | None = None) -> np.ndarray:
        """Indices (one row per element) that ``block`` (and ``thread`` of it) writes."""
        mask = self.block_id == block
        if thread is not None:
            mask &= self.thread_id == thread
        return np.argwhere(mask)

    def thread_box(self, block: int, thread: int | None = None) -> tuple | None:
        """(lower corner, upper corner exclusive) of what ``block`` (``thread``) writes."""
        idx = self.elements(block, thread)
        if not len(idx):
            return None
        return tuple(int(v) for v in idx.min(0)), tuple(int(v) + 1 for v in idx.max(0))


def _coords(linear: int, dims: tuple) -> tuple:
    x, y, _ = dims
    return linear % x, linear // x % y, linear // (x * y)


def thread_map(obj, buffer: str | None = None, max_points: int = MAX_POINTS) -> ThreadMap:
    """The :class:`ThreadMap` of ``buffer`` (default: the function's output, the last
    parameter stored to) in the last launch that writes it. ``obj``: a lowered PrimFunc
    (``explorer.lower.lower``) or a kernel built for cuda (its ``.lowered``)."""
    func = getattr(obj, "lowered", obj)
    if not isinstance(func, PrimFunc):
        raise TypeError(f"thread_map takes a lowered PrimFunc or a CUDA kernel, not "
                        f"{type(obj).__name__}")
    found = launches(func)
    if not found:
        raise BuildError(f"{func.name}: no loop is bound to blockIdx/threadIdx, so no GPU "
                         "thread computes anything; bind loops first (sch.bind(i, "
                         "'blockIdx.x'); sch.bind(j, 'threadIdx.x'))")
    stores = [_stores(la.root) for la in found]
    if buffer is None:
        params = {b.name for b in func.params}
        written = [s.buffer.name for ss in stores for s, _, _ in ss if s.buffer.name in params]
        if not written:
            raise BuildError(f"{func.name}: no launch stores to a parameter")
        buffer = written[-1]
    which = [n for n, ss in enumerate(stores) if any(s.buffer.name == buffer for s, _, _ in ss)]
    if not which:
        names = sorted({s.buffer.name for ss in stores for s, _, _ in ss})
        raise BuildError(f"{func.name}: no launch writes buffer {buffer!r}; launches write "
                         f"{', '.join(names)}")
    n = which[-1]
    launch = found[n]
    grid, block = launch.grid, launch.block
    mine = [(s, path, conds) for s, path, conds in stores[n] if s.buffer.name == buffer]
    shape = tuple(int(d) for d in mine[0][0].buffer.shape)
    size = math.prod(shape)
    bid = np.full(size, -1, dtype=np.int64)
    tid = np.full(size, -1, dtype=np.int64)
    vid = np.zeros(size, dtype=np.int64)
    pairs = []
    for store, path, conds in mine:
        flat, b, t, v = _evaluate(store, path, conds, grid, block, shape, max_points, buffer)
        bid[flat], tid[flat], vid[flat] = b, t, v
        pairs.append(np.stack([flat, b * max(1, math.prod(block)) + t], 1))
    uniq = np.unique(np.concatenate(pairs), axis=0)
    writers = np.bincount(uniq[:, 0], minlength=size)
    return ThreadMap(buffer, shape, n, grid, block, bid.reshape(shape), tid.reshape(shape),
                     vid.reshape(shape), writers.reshape(shape))


def _stores(root: For) -> list:
    """(store, enclosing loops outermost first, [(condition, holds)]) under ``root``."""
    out: list = []

    def visit(s, path, conds):
        if isinstance(s, BufferStore):
            out.append((s, path, conds))
        elif isinstance(s, For):
            visit(s.body, path + (s,), conds)
        elif isinstance(s, Allocate):
            visit(s.body, path, conds)
        elif isinstance(s, SeqStmt):
            for k in s.stmts:
                visit(k, path, conds)
        elif isinstance(s, IfThenElse):
            visit(s.then_case, path, conds + ((s.cond, True),))
            if s.else_case is not None:
                visit(s.else_case, path, conds + ((s.cond, False),))
    visit(root, (), ())
    return out


def _evaluate(store, path, conds, grid, block, shape, max_points, buffer):
    """(flat element, block id, thread id, vthread id) arrays of one store's writes."""
    used = set().union(*(expr_vars(i) for i in store.indices), *(expr_vars(c) for c, _ in conds))
    first_of: dict = {}         # tag -> the outermost loop of that tag (the thread's index)
    alias: dict = {}            # inner same-tag loop var -> (outer var, its extent)
    grid_loops = []
    for lp in path:
        tag = lp.thread if is_thread_loop(lp) else None
        if tag in first_of and not tag.startswith("vthread"):
            alias[lp.var.name] = (first_of[tag].var.name, lp.extent)
            continue
        if tag is not None:
            first_of[tag] = lp
        if tag is not None or lp.var.name in used:
            grid_loops.append(lp)
    npoints = math.prod(lp.extent for lp in grid_loops)
    if npoints > max_points:
        raise BuildError(f"thread map of {buffer}: a store runs over {npoints} loop points; "
                         f"the map stops at {max_points} (use a smaller shape to draw it)")
    axes = np.meshgrid(*[np.arange(lp.extent, dtype=np.int64) for lp in grid_loops],
                       indexing="ij") if grid_loops else []
    env = {lp.var.name: a.ravel() for lp, a in zip(grid_loops, axes)}
    count = npoints
    mask = np.ones(count, dtype=bool)
    for inner, (outer, extent) in alias.items():
        env[inner] = env[outer]
        mask &= env[outer] < extent
    for cond, holds in conds:
        try:
            c = np.broadcast_to(evaluate(cond, env), (count,)).astype(bool)
        except (TypeError, KeyError):
            raise BuildError(f"thread map of {buffer}: a store under the condition {cond} "
                             "depends on data or on a variable outside its loops; the map "
                             "cannot say who writes it") from None
        mask &= c if holds else ~c
    idx = [np.broadcast_to(evaluate(i, env), (count,))[mask] for i in store.indices]
    inside = np.ones(len(idx[0]) if idx else int(mask.sum()), dtype=bool)
    for i, d in zip(idx, shape):
        inside &= (i >= 0) & (i < d)
    flat = np.ravel_multi_index(tuple(i[inside] for i in idx), shape) if idx else \
        np.zeros(int(inside.sum()), dtype=np.int64)

    def tag_value(tag):
        lp = first_of.get(tag)
        if lp is None:
            return np.zeros(len(flat), dtype=np.int64)
        return np.broadcast_to(env[lp.var.name], (count,))[mask][inside]

    def linear(tags, dims):
        x, y, z = (tag_value(t) for t in tags)
        return x + dims[0] * (y + dims[1] * z)

    vtags = sorted(t for t in first_of if t.startswith("vthread"))
    vid = np.zeros(len(flat), dtype=np.int64)
    for t in vtags:
        vid = vid * first_of[t].extent + tag_value(t)
    return flat, linear(BLOCK_TAGS, grid), linear(THREAD_TAGS, block), vid
