"""Multi-level tiling: the rule that gives a reduction with data reuse its tile structure.

For ``C[i, j] += A[i, k] * B[k, j]`` and the CPU structure ``"SSRSRS"`` every
spatial loop is split in four by ``sample_perfect_tile`` and every reduction
loop in two, then reordered as ``i0 j0 | i1 j1 | k0 | i2 j2 | k1 | i3 j3``::

    before: for i, j, k: C[i, j] += A[i, k] * B[k, j]
    after:  for i0, j0, i1, j1, k0, i2, j2, k1, i3, j3: (same block)

A write cache (``reuse_write``) accumulates a tile in a buffer of its own and
copies it back at the end of tile level 1 or 2 (``"may"``: also a sketch
without it). On CPU a read cache ``"may"`` at level 1 packs the panel of B a
tile reads into a contiguous buffer (not in MetaSchedule's CPU defaults: with a
row stride of 4 KB the unpacked panel thrashes the L1 sets and a 1024^3 gemm
runs at half speed). On GPU (``"SSSRRSRS"``) the first three spatial levels are fused
and bound to ``blockIdx.x``, ``vthread.x``, ``threadIdx.x``, the inputs are read
through shared memory at level 4 (``reuse_read``) with a cooperative fetch whose
vector length is sampled, and the output accumulates in local memory at level 3.
A draw of a GPU design space fills in these tiles' decisions within the target's limits
(``GPUTilingLimits.sample``: threads per block from a warp to the maximum, virtual
threads, shared memory, registers), so that most draws pass ``VerifyGPUCode``; the trace
keeps the same sampling instructions. On the CPU most draws (``register_tiles.FIT_SHARE``)
are conditioned on a register tile (the innermost spatial level) whose accumulators fit
the target's vector registers, the vectorized factor a multiple of its lanes
(``explorer.space.register_tiles``); the rest are uniform, so every tiling stays reachable.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import SpaceError
from ...schedule.tree import find_block, iter_dims
from ...ir.functor import expr_vars
from ..analysis import (COOPERATIVE_FETCH, THREAD_EXTENT_HIGH, THREAD_EXTENT_LOW,
                        TILING_STRUCTURE, consumers, linear_coeff, needs_multi_level_tiling)
from ..rule import ScheduleRule

_DTYPE_BYTES = {"float32": 4, "float64": 8, "int32": 4, "bool": 1}
MAX_VECTOR_BYTES = 16  # widest GPU load (float4)


@dataclass(frozen=True)
class ReuseConfig:
    """How a tile reuses data through a cache: ``req`` "no", "may" (a sketch with and one
    without) or "must"; ``levels`` (1-based tile levels whose last loop holds the cache);
    storage ``scope``. For read caches, ``operands`` says which inputs: "all" (as
    MetaSchedule) or "vector" (only the input that feeds the vectorized output dimension
    contiguously and is reused across rows: B of ``C[i, j] += A[i, k] * B[k, j]``).
    ``streamed_levels``: more levels, offered only for an input larger than the target's L2
    (streamed from memory; see ``MultiLevelTiling.add_read_reuse``)."""
    req: str = "no"
    levels: tuple = ()
    scope: str = "global"
    operands: str = "all"
    streamed_levels: tuple = ()


@dataclass
class _State:
    sch: object
    block: object
    tiles: list = field(default_factory=list)

    def copy(self) -> "_State":
        return _State(self.sch.copy(), self.block, [list(t) for t in self.tiles])


class MultiLevelTiling(ScheduleRule):
    """Tile a block's loop nest by ``structure`` (S: spatial level, R: reduction level)."""

    def __init__(self, structure: str = "SSRSRS", tile_binds=(), max_innermost_factor: int = 64,
                 vector_load_lens=(), reuse_read: ReuseConfig = ReuseConfig(),
                 reuse_write: ReuseConfig = ReuseConfig(), thread_warp_size: int | None = None,
                 max_threads_per_block: int | None = None, vector_channel: bool = False):
        if not structure or set(structure) - {"S", "R"}:
            raise SpaceError(f"MultiLevelTiling: structure {structure!r} must be a string of "
                             "'S' and 'R', e.g. 'SSRSRS'")
        self.structure = structure
        self.tile_binds = tuple(tile_binds)
        self.max_innermost_factor = max_innermost_factor
        self.vector_load_lens = tuple(vector_load_lens)
        self.reuse_read = reuse_read
        self.reuse_write = reuse_write
        self.thread_warp_size = thread_warp_size
        self.max_threads_per_block = max_threads_per_block
        self.vector_channel = vector_channel

    def initialize(self, target) -> None:
        super().initialize(target)
        if self.tile_binds and target is not None and target.is_gpu:
            self.thread_warp_size = self.thread_warp_size or target.warp_size
            self.max_threads_per_block = (self.max_threads_per_block
                                          or target.max_threads_per_block)

    def apply(self, sch, block) -> list:
        if not needs_multi_level_tiling(sch.func, sch.get(block)):
            return [sch]
        sch.annotate(block, TILING_STRUCTURE, self.structure)
        base = self.tile_loop_nest(_State(sch, block))
        channel = self.add_vector_channel(base.copy()) if self.vector_channel else []
        states = [base]
        states = [s for st in states for s in self.add_write_reuse(st)]
        states = [s for st in states for s in self.add_read_reuse(st)]
        return [s.sch for s in states + channel]

    # ------------------------------------------------------------ tiling
    def tile_loop_nest(self, st: _State) -> _State:
        sch, block = st.sch, st.block
        loops = sch.get_loops(block)
        ivs = find_block(sch.func, sch.get(block))[0].block.iter_vars
        s_idx = [i for i, c in enumerate(self.structure) if c == "S"]
        r_idx = [i for i, c in enumerate(self.structure) if c == "R"]
        tiles: list = [[] for _ in self.structure]
        spatial_product = 1
        for loop, iv in zip(loops, ivs):
            idx = s_idx if iv.kind == "S" else r_idx
            if iv.kind == "S":
                spatial_product *= iv.extent
            if len(idx) == 1:
                tiles[idx[0]].append(loop)
                continue
            padded = self.padded_extent(iv.extent) if iv.kind == "S" else iv.extent
            if padded != iv.extent:       # tiles of a padded extent; a guard skips the rest
                loop = sch.split(loop, [padded])[0]
            factors = sch.sample_perfect_tile(loop, n=len(idx),
                                              max_innermost_factor=self.max_innermost_factor)
            for slot, part in zip(idx, sch.split(loop, factors)):
                tiles[slot].append(part)
        sch.reorder(*[lp for t in tiles for lp in t])
        for i, tag in enumerate(self.tile_binds[:len(tiles)]):
            fused = sch.fuse(*tiles[i])
            sch.bind(fused, tag)
            tiles[i] = [fused]
        if self.thread_warp_size:
            low = self.thread_warp_size if spatial_product > 2 * self.thread_warp_size else 1
            sch.annotate(block, THREAD_EXTENT_LOW, low)
            sch.annotate(block, THREAD_EXTENT_HIGH, self.max_threads_per_block)
        st.tiles = tiles
        return st

    def padded_extent(self, extent: int) -> int:
        """The extent a CPU spatial loop is tiled over: ``extent`` itself, or, when it has
        no divisor from half a vector's lanes up to ``max_innermost_factor`` (a prime
        such as 661 or 997: its perfect tiles are 1 or everything), ``extent`` rounded up
        to a multiple of the lanes. The tiles then cover the padded range, and the guard
        of the split (``i < extent``) skips the rest: interior tiles run unguarded vector
        code, the last one masked (see the LLVM backend's guard versioning)."""
        lanes = getattr(self.target, "vector_lanes", 0) if self.target is not None else 0
        if self.tile_binds or lanes < 2 or self.target.is_gpu:
            return extent
        return padded_extent(extent, lanes, self.max_innermost_factor)

    # ------------------------------------------------------------ write reuse
    def add_write_reuse(self, st: _State) -> list:
        cfg = self.reuse_write
        if cfg.req == "no":
            return [st]
        out = []
        if cfg.req == "may":
            cons = consumers(st.sch.func, st.sch.get(st.block))
            if len(cons) == 1 and is_write_cache(st.sch.func, cons[0], st.sch.get(st.block)):
                consumer = st.sch.get_consumers(st.block)[0]
                for level in cfg.levels:
                    new = st.copy()
                    new.sch.reverse_compute_at(consumer, new.tiles[level - 1][-1])
                    out.append(new)
                return out + [st]
            out.append(st.copy())
        cache = st.sch.cache_write(st.block, 0, cfg.scope)
        for level in cfg.levels:
            new = st.copy()
            new.sch.reverse_compute_at(cache, new.tiles[level - 1][-1])
            out.append(new)
        return out

    # ------------------------------------------------------------ vector channel
    def add_vector_channel(self, st: _State) -> list:
        """The sketch that vectorizes the output channel instead of the last output
        dimension (the NCHW[x]c kernels of convolution libraries), when that dimension is
        too narrow to fill the vector registers (``Q % lanes != 0``: 14 or 7 columns for
        16 lanes) and an input is indexed by one spatial variable alone (the weight
        ``W[k, c, r, s]``). The ``k`` loop goes innermost in the register tile; the write
        cache (level 2) and the weight's packed copy (level 1) are stored with ``k``
        last, so the vector loads and stores are contiguous::

            O_local[k, p, q] += I[c, p + r, q + s] * W[k, c, r, s]      (q vectorized)
            O_local[p, q, k] += I[c, p + r, q + s] * W_global[c, r, s, k]  (k vectorized)
        """
        sch, block = st.sch, st.block
        func, name = sch.func, sch.get(block)
        found = vector_channel_plan(func, name, self.target)
        cons = consumers(func, name)
        if found is None or (cons and not (len(cons) == 1
                                           and is_write_cache(func, cons[0], name))):
            return []
        v_pos, out_dim, operand, op_dim = found
        level3 = len(self.structure) - 1 - self.structure[::-1].index("S")
        inner = st.tiles[level3]
        moved = inner[v_pos]
        sch.reorder(*[lp for lp in inner if lp is not moved], moved)
        st.tiles[level3] = [lp for lp in inner if lp is not moved] + [moved]
        ndim = len(find_block(func, name)[0].block.body.indices)
        level2 = st.tiles[self.structure.index("S", 1)][-1]
        if cons:    # an epilogue (bias, relu) takes the write cache's place, on the tile
            sch.reverse_compute_at(sch.get_consumers(block)[0], level2)
        else:
            sch.reverse_compute_at(sch.cache_write(block, 0, "local"), level2)
        sch.transform_layout(block, ("write", 0), _last(ndim, out_dim))
        index = [b.name for b in find_block(sch.func, name)[0].block.reads()].index(
            operand.name)                   # the copy takes the operand's place in reads()
        w = sch.cache_read(block, index, "global")
        sch.compute_at(w, st.tiles[0][-1])
        order = _last(operand.ndim, op_dim)
        sch.transform_layout(block, ("read", index), order)
        copy = sch.get_loops(w)[-operand.ndim:]     # walk the copy in its new order:
        sch.reorder(*[copy[d] for d in order])      # contiguous stores, gathered loads
        return [st]

    # ------------------------------------------------------------ read reuse
    def add_read_reuse(self, st: _State) -> list:
        cfg = self.reuse_read
        if cfg.req == "no":
            return [st]
        names = read_candidates(st.sch.func, st.sch.get(st.block), cfg.operands)
        if not names:
            return [st]
        out = [st.copy()] if cfg.req == "may" else []
        levels = cfg.levels
        if cfg.streamed_levels and self._streamed(
                st.sch.func, names, find_block(st.sch.func, st.sch.get(st.block))[0].block):
            levels = levels + tuple(lv for lv in cfg.streamed_levels if lv not in levels)
        for level in levels:
            new = st.copy()
            sch = new.sch
            for name in names:
                reads = [b.name for b in find_block(sch.func, sch.get(new.block))[0].block.reads()]
                cache = sch.cache_read(new.block, reads.index(name), cfg.scope)
                sch.compute_at(cache, new.tiles[level - 1][-1])
                if self.tile_binds:   # GPU: the threads of a block fetch it together
                    ndim = len(find_block(sch.func, sch.get(cache))[0].block.iter_vars)
                    loops = sch.get_loops(cache)
                    sch.fuse(*loops[len(loops) - ndim:])
                    self._annotate_cooperative_fetch(sch, cache)
            out.append(new)
        return out

    def _streamed(self, func, names, block) -> bool:
        """Is every input of ``names`` larger than the target's L2 while the block's other
        inputs fit it? Such an input streams from memory past cache-resident rows (BERT's
        128-row GEMMs: A 0.4-1.5 MB), and a copy per reduction block (the read cache at the
        ``k0`` loop, tile level 3 of ``"SSRSRS"``) packs each block as the tile needs it,
        the copy overlapping the multiply-adds of the block before, where a copy per task
        (level 1) with 64-step reduction blocks is a phase of its own (BERT-base's FFN
        GEMMs, one core: 1.06-1.12x). The expert now packs per task again, wider panels
        with short unrolled reduction blocks (``explorer.space.expert._streamed_panel``,
        1.00-1.04x this copy); the search keeps both. Where the other input streams too (gemm
        1024^3: A is 4 MB), the copy per task is spread over many rows and the expert keeps
        it; offering the block copy there only took the search's draws (alone / seeded
        0.93 -> 0.89 on one Xeon). Inputs within the L2 keep the sketches as they were."""
        limit = getattr(self.target, "l2_bytes", 0) if self.target is not None else 0
        if not limit:
            return False
        bufs = {b.name: b for b in func.params}

        def size(n):
            return np.prod(bufs[n].shape) * np.dtype(bufs[n].dtype).itemsize
        others = {r.name for r in block.reads()} - set(names)
        return (all(n in bufs and size(n) > limit for n in names)
                and all(size(n) <= limit for n in others if n in bufs))

    def _annotate_cooperative_fetch(self, sch, cache) -> None:
        dtype = find_block(sch.func, sch.get(cache))[0].block.body.buffer.dtype
        lens = [n for n in self.vector_load_lens
                if n * _DTYPE_BYTES.get(dtype, 4) <= MAX_VECTOR_BYTES]
        if not lens:
            return
        v = sch.sample_categorical(lens, [1.0 / len(lens)] * len(lens))
        sch.annotate(cache, COOPERATIVE_FETCH, v)


def padded_extent(extent: int, lanes: int, max_innermost: int) -> int:
    """``extent``, or the next multiple of ``lanes`` when no divisor of ``extent`` lies in
    ``[lanes // 2, max_innermost]`` and ``extent`` is larger than ``max_innermost``."""
    if extent <= max_innermost or extent % lanes == 0:
        return extent
    if any(extent % d == 0 for d in range(max(2, lanes // 2), max_innermost + 1)):
        return extent
    return -(-extent // lanes) * lanes


def _last(ndim: int, dim: int) -> list:
    """The permutation that moves dimension ``dim`` last."""
    return [d for d in range(ndim) if d != dim] + [dim]


def vector_channel_plan(func, block: str, target):
    """(position of the channel among the spatial variables, its output dimension, the
    operand indexed by it alone, the operand's dimension) when ``block`` gains from
    vectorizing a channel (see ``MultiLevelTiling.add_vector_channel``), else None."""
    lanes = getattr(target, "vector_lanes", 1) if target is not None else 1
    if lanes <= 1 or (target is not None and target.is_gpu):
        return None
    b = find_block(func, block)[0].block
    spatial = [iv for iv in b.iter_vars if iv.kind == "S"]
    if len(spatial) < 2 or (spatial[-1].extent % lanes == 0
                            and not strided_window(b, spatial[-1].var.name)):
        return None
    out_dims = iter_dims(b, b.body.indices)
    if out_dims is None or any(d is None for d, iv in zip(out_dims, b.iter_vars)
                               if iv.kind == "S"):
        return None
    s_names = [iv.var.name for iv in spatial]
    for buf in b.reads():
        idxs = b.read_indices(buf)
        if len(idxs) != 1:
            continue
        used = [expr_vars(e) & set(s_names) for e in idxs[0]]
        hit = [(d, u) for d, u in enumerate(used) if u]
        if len(hit) != 1 or len(hit[0][1]) != 1:
            continue
        d, (var,) = hit[0]
        if getattr(idxs[0][d], "name", None) != var or var == s_names[-1]:
            continue
        if any(var in expr_vars(e) for other in b.reads() if other != buf
               for idx in b.read_indices(other) for e in idx):
            continue    # a depthwise channel: the input would be gathered
        pos = s_names.index(var)
        if spatial[pos].extent < lanes:
            continue
        n = [iv.var.name for iv in b.iter_vars].index(var)
        return pos, out_dims[n], buf, d
    return None


def strided_window(b, var: str) -> bool:
    """Does an input of block ``b`` read ``var`` at a stride > 1 in its last dimension (the
    window of a strided conv, ``I[c, 2p + r, 2q + s]``)? Vectors along ``var`` read it
    strided: gathered, ResNet-18 C1 (112 columns, stride 2) ran at 6-8 GFLOP/s on one
    AVX-512 core, 80-157 with the output channel vectorized. (Strides up to 4 are now
    contiguous loads and a shuffle, ``backends.llvm.strided``: a depthwise conv, which has
    no channel sketch, gains 1.5-1.7x from it; the channel sketch stays on offer here.)"""
    return any((linear_coeff(idx[-1], var) or 0) > 1
               for buf in b.reads() for idx in b.read_indices(buf))


def read_candidates(func, block: str, operands: str) -> list:
    """Names of the inputs of ``block`` a read cache takes (see ``ReuseConfig.operands``)."""
    b = find_block(func, block)[0].block
    names = [buf.name for buf in b.reads()]
    if operands == "all":
        return names
    spatial = [iv.var.name for iv in b.iter_vars if iv.kind == "S" and iv.extent > 1]
    if len(spatial) < 2:
        return []
    inner, row = spatial[-1], spatial[-2]
    out = []
    for buf in b.reads():
        idxs = b.read_indices(buf)
        last = [linear_coeff(idx[-1], inner) for idx in idxs]
        uses_row = any(row in expr_vars(e) for idx in idxs for e in idx)
        if all(c == 1 for c in last) and not uses_row:
            out.append(buf.name)
    return out


def is_write_cache(func, consumer: str, producer: str) -> bool:
    """The consumer is elementwise in the producer's output (MetaSchedule's
    ``IsWriteCache``): spatial, writes at its own iteration variables, and reads every
    buffer at distinct iteration variables in the order of its output dimensions."""
    r, _ = find_block(func, consumer)
    b = r.block
    if b.is_reduction or b.init is not None:
        return False
    out_dims = iter_dims(b, b.body.indices)
    if out_dims is None or None in out_dims:
        return False
    pos = {iv.var.name: out_dims[n] for n, iv in enumerate(b.iter_vars)}
    prod_buf = find_block(func, producer)[0].block.body.buffer
    for buf in b.reads():
        for idx in b.read_indices(buf):
            mapped = []
            for e in idx:
                name = getattr(e, "name", None)
                if name in pos:
                    mapped.append(pos[name])
                elif not hasattr(e, "value"):
                    return False
            if mapped != sorted(set(mapped)):
                return False
            if buf == prod_buf and len(mapped) != len(out_dims):
                return False
    return True
