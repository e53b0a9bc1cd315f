"""Memory-bound tiling: CPU design spaces for operators that move more bytes than they
compute on (elementwise, transpose, row reductions, softmax, layer norm).

Multi-level tiling gives nothing to such blocks (no input is reused across a tile of
the output), and the default space left them with one schedule: the outer loop
parallel and the inner loop as it came (a transpose walking its input by columns).
What decides their speed is how they walk memory:

- elementwise (every access contiguous along the last loop): parallel outer loops, the
  last loop split into vectors of the target's lanes, a sampled number of them unrolled;
- transpose (the read and the write are contiguous along different loops): both loops
  tiled (sampled tile sizes) so that a tile's input and output lines stay in cache, the
  inner loop vectorized along the contiguous dimension of the write (the reads gather) or
  of the read (the writes scatter; these two only where no register square fits),
  or the input tile first copied into a local buffer
  (contiguous vector loads) and gathered from there, or (``register``) the write's
  vector loop under an unrolled loop of as many rows, a square of one register per
  row that the LLVM backend loads with contiguous vectors and transposes with
  shuffles, or (``stage register``) both: the tile copied first with long contiguous
  row reads that the hardware prefetchers follow, its squares transposed in
  registers from the copy in L1; parallel outer tiles. The unstaged register form
  samples streaming stores on its parallel loop (``backends/llvm/streaming.py``:
  whole output lines written without reading them first, the squares moved to the
  output's line starts) and tiles of 128-512 of the output's rows by runs of 32-64 of
  its columns (``min_stream_run``); with streaming on offer it
  replaces the staged register form and the gather and scatter sketches (session-10
  Intel Xeon, one thread, one process, 256 x 128 tiles: 4096 x 1024 39-46% -> 68-76%
  of copy, 1024 x 1024 49-52% -> 58-59% with numpy's output 16-48 bytes past a line,
  65% -> 69-80% with it on one; session 11, the row edges stored into their own
  lines and a row's tail and the next row's head streamed as one line: 78-79% of copy
  at both sizes, two threads). Where they make a task per core, the streamed sketch
  (``register runs``) runs the tiles along the output's rows in parallel instead of
  those down its columns: each thread then reads whole input rows (a page each, 32 or
  64 of them side by side) rather than half of every row; session 12, one process,
  two threads: 1024 x 1024 103-110% of copy against 75-88%, 4096 x 1024 86% against
  82%; tuned, 124% and 85%;
- row reduction (the innermost reduction loop contiguous): the reduction split into
  a sampled 2, 4 or 8 vectors of lanes (as many as fit four times in the row; one
  only where two do not) and ``rfactor``-ed on them, so each row
  accumulates in independent vector registers (an add does not wait for the one
  before), then the vectors are summed into one (a second ``rfactor``) and its lanes
  once at the end; parallel rows; the pass that reads the row samples a prefetch of
  0-2 rows ahead like the chains below (row sum 1024 x 1024, two threads: 1.12x
  PyTorch against 0.98);
- a chain ending in a row-wise block (softmax, layer norm): every producer computed at
  the consumer's row loop (``compute_at``), so one row's passes run one after the other
  on the same thread while the row is in cache, and the intermediates shrink to a row;
  each pass that reads the input samples a software prefetch of the rows ahead (0, 1
  or 2, none the likeliest) from its vector loop (``backends/llvm/prefetch.py``): the
  later passes compute while memory would idle, and the one that prefetches keeps it
  busy with the next row (softmax 1024 x 1024 from 73-77% to 86-94% of a copy in one
  process, exp pass fetching 1-2 rows ahead; from the first pass, or from two, it was
  slower).

Vector widths come from the target (``Target.vector_lanes``, scaled by the element
size), never a constant. A split that does not divide leaves a guarded tail.

The rule applies only where it is decisive: every block of the function is one of the
kinds above (no block that multi-level tiling would take) and the function's arrays do
not fit in the L1 cache (``min_bytes``, default the target's ``l1_bytes``); smaller
functions keep the default space unchanged.

Measured (``benchmarks/memory_bound.py``, tuned 32 trials, one thread, machines loaded
by other jobs): on a 2-core Zen 5 (session 8, load 8-13) elementwise 75-110% of a copy
of the same array, row sum 81-144%, layer norm 41-102%, softmax 24-54%, transpose
18-43%; on a 2-core Intel Xeon with AVX-512 (session 9, load 5-10, with the exp,
reciprocal, prefetch, accumulator and staged register changes; two windows, load 2-8)
elementwise 82-101%, row sum 85-101%, layer norm 81-97%, softmax 72-88% (37-55%
before), transpose 51-69% (50-63% before); 1.3-3.1x PyTorch except row sum, where
PyTorch too runs at copy speed (0.88-1.36x). Session 10 (same host, load 1-2, one
thread, 32 trials): transposes 59-62% (1024 x 1024) and 64-70% (4096 x 1024) of copy
with streaming stores, 2.0-3.1x PyTorch. See the benchmark's docstring for
before/after and what each change was worth.
"""
from __future__ import annotations

import numpy as np

from ...backends.llvm.prefetch import PREFETCH   # the annotations the backend reads
from ...backends.llvm.streaming import STREAMING
from ...ir.functor import collect_loads, expr_vars
from ...schedule.tree import block_names, find_block
from .. import analysis as A
from ..rule import ScheduleRule

_ELEMENTWISE, _TRANSPOSE, _ROW_REDUCE = "elementwise", "transpose", "row_reduce"


class MemoryBoundTiling(ScheduleRule):
    """See the module docstring. ``max_tile``: the largest sampled tile of a transpose
    (elements per dimension); ``max_unroll``: the most vectors unrolled in an elementwise
    row; ``stage_transpose``: also offer the transpose that copies its input tile into a
    local buffer first; ``min_bytes``: apply only to functions whose parameters take
    more bytes (None: the target's L1 size); ``register_transpose``: also offer the
    transpose whose innermost square of lanes x lanes elements the LLVM backend
    transposes in registers (``backends/llvm/tile_transpose.py``); ``max_accumulators``:
    the most vector accumulators of a row reduction; ``prefetch_rows``: the most rows
    ahead that a pass of a row-wise chain samples to prefetch (0: no prefetch);
    ``streaming_stores``: register transposes sample streaming stores (the parallel
    loop annotated ``streaming_store``, ``backends/llvm/streaming.py``) or not;
    ``min_stream_tile``, ``max_stream_tile``: the range of the sampled tile sides of
    the unstaged register transpose (whose streaming stores favour long runs of each
    input row); ``min_stream_run``, ``max_stream_run``: the range of its tiles' other
    side, the run of each output row that a tile writes (as many input rows are read
    side by side, each a stream for the prefetchers to follow: on the session-12 Intel
    Xeon, 4096 x 1024, runs of 32 ran at 82-86% of copy, 64 at 78-83%, 128 at 74%,
    256 and 512 at 72-84%)."""

    def __init__(self, max_tile: int = 128, max_unroll: int = 8, stage_transpose: bool = True,
                 min_bytes: int | None = None, register_transpose: bool = True,
                 max_accumulators: int = 8, prefetch_rows: int = 2,
                 streaming_stores: bool = True, min_stream_tile: int = 128,
                 max_stream_tile: int = 512, min_stream_run: int = 32,
                 max_stream_run: int = 64):
        self.max_tile = max_tile
        self.min_stream_tile = min_stream_tile
        self.min_stream_run = min_stream_run
        self.max_stream_run = max_stream_run
        self.max_stream_tile = max_stream_tile
        self.streaming_stores = streaming_stores
        self.prefetch_rows = prefetch_rows
        self.max_unroll = max_unroll
        self.stage_transpose = stage_transpose
        self.register_transpose = register_transpose
        self.max_accumulators = max_accumulators
        self.min_bytes = min_bytes

    # ------------------------------------------------------------ when
    def decisive(self, func) -> bool:
        """Does the rule apply to ``func``: do its parameters take more than ``min_bytes``
        (default: the target's L1 size) and is every block one this rule handles (blocks
        the rule already scheduled count as handled)?"""
        limit = self.min_bytes
        if limit is None:
            limit = getattr(self.target, "l1_bytes", 0) or 32 * 1024
        if sum(_nbytes(p) for p in func.params) <= limit:
            return False
        return all(_MARK in A.block_annotations(func, n) or classify(func, n) is not None
                   for n in block_names(func))

    # ------------------------------------------------------------ how
    def apply(self, sch, block) -> list:
        if self.target is not None and self.target.is_gpu:
            return [sch]
        func, name = sch.func, sch.get(block)
        if _MARK in A.block_annotations(func, name) or not self.decisive(func):
            return [sch]
        row = self._row_loop_of_consumers(sch, name)
        kind = classify(func, name)
        if kind == _ROW_REDUCE:
            return [self._row_reduce(sch, block, row)]
        if kind == _TRANSPOSE and row is None:
            return self._transpose(sch, block)
        if kind in (_ELEMENTWISE, _TRANSPOSE):
            return [self._elementwise(sch, block, row)]
        return [sch]

    def _lanes(self, func, name: str) -> int:
        r, _ = find_block(func, name)
        bits = getattr(self.target, "vector_bits", 0) or 128
        return max(1, bits // (8 * np.dtype(r.block.body.buffer.dtype).itemsize))

    @staticmethod
    def _row_loop_of_consumers(sch, name: str):
        """The parallel loop every consumer of ``name`` sits under (the row loop a
        consumer's schedule made), as a LoopRV; None when there is none."""
        func = sch.func
        cons = A.consumers(func, name)
        if not cons:
            return None
        common = None
        for c in cons:
            _, loops = A.realize_of(func, c)
            if not loops or loops[0].kind != "parallel":
                return None
            if common is None:
                common = loops[0].var.name
            elif common != loops[0].var.name:
                return None
        block = sch.get_block(cons[0])
        return sch.get_loops(block)[0]

    def _parallel_outer(self, sch, loops: list):
        """Fuse ``loops`` (outermost, spatial) and make them parallel; the fused loop
        (None when there is none)."""
        if not loops:
            return None
        fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
        sch.parallel(fused)
        return fused

    def _vector_split(self, sch, loop, lanes: int) -> tuple:
        """``loop`` -> (outer, vector) with the vector ``lanes`` long (the loop itself when
        shorter); outer is None when the whole loop is one vector."""
        extent = A.loop_node(sch, loop).extent
        if extent <= lanes:
            return None, loop
        outer, vec = sch.split(loop, [None, lanes])
        return outer, vec

    def _elementwise(self, sch, block, row) -> object:
        name = sch.get(block)
        lanes = self._lanes(sch.func, name)
        prefetch = self._prefetch_site(sch.func, name)
        if row is not None:
            sch.compute_at(block, row)
        loops = sch.get_loops(block)
        inner = loops[-1]
        outer, vec = self._vector_split(sch, inner, lanes)
        if outer is not None and A.loop_node(sch, outer).extent > 1:
            o, u = sch.split(outer, sch.sample_perfect_tile(
                outer, n=2, max_innermost_factor=self.max_unroll))
            sch.unroll(u)
            outer = o
        sch.vectorize(vec)
        if prefetch:
            self._sample_prefetch(sch, vec)
        if row is None:
            par = loops[:-1] or ([outer] if outer is not None else [])
            self._parallel_outer(sch, par)
        sch.annotate(block, _MARK, 1)
        return sch

    def _prefetch_site(self, func, name: str) -> bool:
        """Does block ``name`` sample a software prefetch: a pass of a row-wise chain
        (the function has more than one block) or a row reduction alone, that reads a
        parameter of two or more dimensions? (A row sum alone, 1024 x 1024 at two
        threads, each thread's half as large as its L2: 35.8 -> 34.0-34.4 us fetching
        one or two rows ahead; no change at one thread, from L3.)"""
        if not self.prefetch_rows or (len(block_names(func)) < 2
                                      and classify(func, name) != _ROW_REDUCE):
            return False
        params = {p.name for p in func.params}
        r, _ = find_block(func, name)
        return any(buf.name in params and len(buf.shape) >= 2 for buf, _ in _reads(r.block))

    def _sample_prefetch(self, sch, vec) -> None:
        """Annotate vector loop ``vec`` with a sampled number of rows to prefetch ahead
        (0: none, the likeliest: one pass of a row should fetch, not every pass)."""
        choices = [0] + list(range(1, self.prefetch_rows + 1))
        probs = [0.5] + [0.5 / self.prefetch_rows] * self.prefetch_rows
        sch.annotate(vec, PREFETCH, sch.sample_categorical(choices, probs))

    def _row_reduce(self, sch, block, row) -> object:
        name = sch.get(block)
        lanes = self._lanes(sch.func, name)
        prefetch = self._prefetch_site(sch.func, name)
        loops = sch.get_loops(block)
        k = loops[-1]
        n_spatial = len(loops) - 1
        extent = A.loop_node(sch, k).extent
        rf = rf2 = None
        if extent > lanes:
            # one accumulator only where two do not fit: a single chain of dependent
            # adds waits out the add's latency (4 cycles) for every vector
            fits = [a for a in _powers_of_two(self.max_accumulators) if lanes * a * 4 <= extent]
            widths = [lanes * a for a in (fits[1:] or fits)] or [lanes]
            width = widths[0] if len(widths) == 1 else sch.sample_categorical(
                widths, [1.0 / len(widths)] * len(widths))
            _, kv = sch.split(k, [None, width])
            r, _ = find_block(sch.func, name)
            rf = sch.rfactor(kv, r.block.body.buffer.ndim)
            if len(widths) > 1 or widths[0] > lanes:
                # the block now sums the accumulators: vectors first, lanes last
                _, kl = sch.split(sch.get_loops(block)[-1], [None, lanes])
                rf2 = sch.rfactor(kl, r.block.body.buffer.ndim)
        if row is not None:
            sch.compute_at(block, row)
            anchor = row
        else:
            spatial = sch.get_loops(block)[:n_spatial]
            if spatial:
                self._parallel_outer(sch, spatial)
            anchor = sch.get_loops(block)[0] if spatial else None
        for b, accumulators in ((rf2, False), (rf, rf2 is not None)):   # consumer first
            if b is None:
                continue
            if anchor is not None:
                sch.compute_at(b, anchor)
            lane = self._vector_lanes(sch, b, lanes, accumulators)
            if prefetch and b is rf:        # the pass that reads the row
                self._sample_prefetch(sch, lane)
        sch.annotate(block, _MARK, 1)
        return sch

    @staticmethod
    def _vector_lanes(sch, rf, lanes: int, accumulators: bool):
        """The rfactor block's lane loop innermost and vectorized; with ``accumulators``,
        the lane loop (a sampled multiple of ``lanes``) is split into unrolled vectors of
        ``lanes`` (independent accumulators, so consecutive adds do not wait for each
        other; split whatever the sample, so that every decision replays the same
        steps)."""
        rl = sch.get_loops(rf)
        # compute_at puts spatial loops first: ..., lane (S), k outer (R)
        lane, ko = rl[-2], rl[-1]
        if accumulators:
            acc, lane = sch.split(lane, [None, lanes])
            sch.reorder(ko, acc, lane)
            sch.unroll(acc)
        else:
            sch.reorder(ko, lane)
        sch.vectorize(lane)
        sch.annotate(rf, _MARK, 1)
        return lane

    def _transpose(self, sch, block) -> list:
        func, name = sch.func, sch.get(block)
        _, loops = A.realize_of(func, name)
        read_loop = _read_contiguous_loop(func, name)
        names = [lp.var.name for lp in loops]
        if read_loop not in names[:-1]:
            return [self._elementwise(sch, block, None)]
        lanes = self._lanes(func, name)
        variants = ["write", "read"] + (["stage"] if self.stage_transpose else [])
        if self.register_transpose and min(loops[-1].extent,
                                           loops[names.index(read_loop)].extent) >= lanes:
            # the squares in registers replace the gathers (write) and the scatters
            # (read), 2.4-3.8x slower than them; with streaming stores the unstaged
            # squares replace the staged ones too (4096 x 1024: 1.80 ms against 2.63;
            # the search measured the register sketch once in 32 trials among three)
            variants = [self._streamed_sketch(loops[-1].extent, lanes)] + (
                (["stage"] if self.streaming_stores else ["stage register", "stage"])
                if self.stage_transpose else [])
        return [self._transpose_variant(sch.copy(), name, names.index(read_loop), variant,
                                        lanes) for variant in variants]

    def _streamed_sketch(self, columns: int, lanes: int) -> str:
        """``register runs`` (the output's row runs parallel) where its ``columns`` make at
        least a task per core in runs of ``max_stream_run``, else ``register`` (its row
        tiles parallel). One of the two, not both: the search draws sketches alike and
        mutates only the staged one's tiles, so a third sketch went unmeasured (1024 x
        1024, 32 trials: the runs sketch never drawn; in one process it ran 1.3x the
        staged sketch the search kept)."""
        cores = max(1, getattr(self.target, "num_cores", 1) or 1)
        runs = columns // lanes // max(1, self.max_stream_run // lanes)
        return "register runs" if runs >= cores else "register"

    def _stream_tile(self, s, loop, lanes: int, least: int, most: int):
        """A sampled tile of ``loop`` (a loop over squares or vectors of ``lanes``): a
        divisor of its extent making tiles of ``least`` to ``most`` elements (the
        divisors up to the maximum where none is that large)."""
        extent = A.loop_node(s, loop).extent
        lo, hi = max(1, least // lanes), max(1, most // lanes)
        divs = [d for d in range(1, min(extent, hi) + 1) if extent % d == 0]
        pick = [d for d in divs if d >= lo] or divs
        return pick[0] if len(pick) == 1 else s.sample_categorical(
            pick, [1.0 / len(pick)] * len(pick))

    def _transpose_variant(self, s, name: str, read_at: int, variant: str, lanes: int):
        """One tiled transpose: the loop along the write's (or, ``read``, the read's) last
        dimension split into vectors, the other loop into tiles; ``register`` also splits
        off a square of ``lanes`` rows, unrolled right outside the vector loop (the
        backend transposes it in registers); ``stage`` copies the input tile first;
        ``stage register`` does both: the tile's rows copied with long contiguous
        reads (which the hardware prefetchers follow), the squares transposed in
        registers from the copy, in L1."""
        b = s.get_block(name)
        ls = s.get_loops(b)
        w_lp, r_lp = ls[-1], ls[read_at]
        others = [lp for i, lp in enumerate(ls[:-1]) if i != read_at]
        vec_lp, tile_lp = (r_lp, w_lp) if variant == "read" else (w_lp, r_lp)
        vo, vv = self._vector_split(s, vec_lp, lanes)
        square = None
        streamed = variant in ("register", "register runs")
        if streamed or variant == "stage register":
            tile_lp, square = s.split(tile_lp, [None, lanes])
        if streamed:
            # the unstaged register form (the streaming one) samples tiles of
            # min_stream_tile to max_stream_tile elements a side: with streaming
            # stores, 128-512 a side ran at 82-98% of copy, 64 x 64 at 62-65%
            t_outer, t_inner = s.split(tile_lp, [None, self._stream_tile(
                s, tile_lp, lanes, self.min_stream_tile, self.max_stream_tile)])
        else:
            t_outer, t_inner = s.split(tile_lp, s.sample_perfect_tile(
                tile_lp, n=2, max_innermost_factor=max(1, self.max_tile // (lanes if square
                                                                            else 1))))
        inner = [square, vv] if square is not None else [vv]
        if vo is not None:
            v_outer, v_mid = s.split(vo, [None, self._stream_tile(
                s, vo, lanes, self.min_stream_run, self.max_stream_run)]) \
                if streamed else s.split(vo, s.sample_perfect_tile(
                    vo, n=2, max_innermost_factor=max(1, self.max_tile // lanes)))
            outer = [v_outer, t_outer] if variant == "register runs" else [t_outer, v_outer]
            s.reorder(*others, *outer, t_inner, v_mid, *inner)
            tile_top = v_outer
        else:
            outer = [t_outer]
            s.reorder(*others, t_outer, t_inner, *inner)
            tile_top = t_outer
        s.vectorize(vv)
        if square is not None:
            s.unroll(square)
        par = self._parallel_outer(s, others + outer[:1])
        if square is not None and par is not None and self.streaming_stores:
            # streaming stores (whole lines, no read for ownership), or ordinary ones
            s.annotate(par, STREAMING, s.sample_categorical([0, 1], [0.25, 0.75]))
        if variant in ("stage", "stage register"):
            c = s.cache_read(b, _read_index(s.func, name), "local")
            s.compute_at(c, tile_top)
            s.vectorize(s.get_loops(c)[-1])
            s.annotate(c, _MARK, 1)
        s.annotate(b, _MARK, 1)
        return s


_MARK = "explorer.memory_bound"


def _powers_of_two(n: int) -> list:
    out, a = [], 1
    while a <= n:
        out.append(a)
        a *= 2
    return out


def _nbytes(buf) -> int:
    n = np.dtype(buf.dtype).itemsize
    for d in buf.shape:
        n *= d
    return n


def classify(func, name: str):
    """The kind of block ``name`` for this rule ("elementwise", "transpose",
    "row_reduce"), or None when the rule does not handle it."""
    r, loops = A.realize_of(func, name)
    b = r.block
    if not loops or not A.is_trivial_binding(func, name) or not A.is_single_nest(func, name):
        return None
    if A.needs_multi_level_tiling(func, name):
        return None
    if any(lp.kind != "serial" or lp.annotations for lp in loops):
        return None
    write_last = _last_var(b.body.indices)
    if b.is_reduction:
        kinds = [A.loop_iter_type(func, lp.var.name) for lp in loops]
        if kinds.count("R") != 1 or kinds[-1] != "R":
            return None
        k = b.iter_vars[-1].var.name
        if not any(_last_var(idx) == k for _, idx in _reads(b)):
            return None
        return _ROW_REDUCE
    if write_last is None or write_last != b.iter_vars[-1].var.name:
        return None
    if any(_strided(idx, write_last) for _, idx in _reads(b)):
        return _TRANSPOSE
    return _ELEMENTWISE


def _strided(indices, var: str) -> bool:
    """Does an access move with ``var`` but not along its last dimension (a transposed
    read)? One that does not use ``var`` (a row's statistic) is the same in every lane."""
    used = set()
    for e in indices:
        used |= expr_vars(e)
    return var in used and _last_var(indices) != var


def _reads(b) -> list:
    return [(ld.buffer, ld.indices) for ld in collect_loads(b.body.value)]


def _last_var(indices):
    """The one iteration variable the last index uses, or None."""
    if not indices:
        return None
    names = expr_vars(indices[-1])
    return next(iter(names)) if len(names) == 1 else None


def _read_contiguous_loop(func, name: str):
    """The loop bound to the last index of the first read that is not contiguous along
    the write's last dimension."""
    r, _ = find_block(func, name)
    b = r.block
    bind = {iv.var.name: v.name for iv, v in zip(b.iter_vars, r.iter_values)}
    write_last = _last_var(b.body.indices)
    for _, idx in _reads(b):
        if _strided(idx, write_last):
            return bind.get(_last_var(idx))
    return None


def _read_index(func, name: str) -> int:
    r, _ = find_block(func, name)
    b = r.block
    write_last = _last_var(b.body.indices)
    bufs = b.reads()
    for i, buf in enumerate(bufs):
        if any(_strided(idx, write_last) for idx in b.read_indices(buf)):
            return i
    return 0
