"""What the decisions of a GPU tiling imply for the limits ``VerifyGPUCode`` checks, read
from the trace alone, so that mutators propose only children that respect them.

A multi-level tiled block on the GPU ("SSSRRSRS") has its tile levels fused and bound to
``blockIdx.x``, ``vthread.x``, ``threadIdx.x`` and its inputs cached in shared memory at a
reduction level. Given the factors of its ``sample_perfect_tile`` decisions:

    threads per block   = product of the factors bound to threadIdx
                          (within the target's ``max_threads_per_block`` and the thread range
                          the tiling annotated: MetaSchedule's minimum of one warp)
    virtual threads     = product of the factors bound to vthread (at most ``max_vthread``)
    shared bytes        = per shared cache, the box of the buffer the block touches while
                          the loops inside the cache's location and the thread axes run,
                          widened as a cooperative fetch copies it (below)
    registers per thread = the local caches' tiles (per virtual thread) times the virtual
                          threads, plus ``REGISTER_OVERHEAD``: within the target's
                          registers per thread and its registers per SM over the threads

These are a few multiplications and interval bounds per candidate, no replay and no
postprocessor. The model follows what the instructions of the trace did (get_loops,
split, reorder, fuse, bind, cache_read/write, compute_at, the cooperative-fetch
annotation), so it applies to any tiling rule built from them; a block whose tiling it
cannot follow is not checked (as before). ``VerifyGPUCode`` stays the judge: it reads
the lowered program. The model's registers are what lowering allocates; its shared bytes
are the bound on the schedule tree (``verify_gpu.footprints``), at least the lowered
size: what the model accepts the verifier accepts (``tests/test_space_gpu.py``).

The same model samples: ``GPUTilingLimits.sample`` draws a tiling's decisions as its
sampling instructions would and draws again until they are within the limits (the
instructions' distribution conditioned on the limits), which ``DesignSpace`` does for
every draw on a GPU target (``sample_within_limits``).

A cooperative fetch copies the ``E`` elements of a tile as ``ceil(E / (threads * v))``
rounds of ``threads * v`` under a predicate. The region of that copy is bounded without
the predicate, so when the rounds overshoot ``E`` the outermost dimension of the buffer
counts the excess (e.g. 768 bytes for a 256-byte gemm tile with 64 threads); lowering
clamps it where that dimension is the whole buffer's (a conv's batch of 1), the model
only where it can tell the first index is 0.
"""
from __future__ import annotations

import inspect
import math
import random
import weakref

from ...errors import ExplorerError
from ...ir.arith import NonAffine, int_bounds
from ...ir.functor import expr_vars
from ...schedule.rv import ExprRV
from ...schedule.sampling import perfect_tilings, sample_categorical
from ...schedule.tree import find_block
from .. import analysis as A
from ..postprocs.verify_gpu import (_BYTES, VerifyGPUCode,   # its sizes of dtypes, as it counts
                                    register_estimate, register_limit)

_VERIFY = inspect.signature(VerifyGPUCode).parameters
MAX_VTHREAD = _VERIFY["max_vthread"].default            # VerifyGPUCode's defaults
MAX_VECTOR_BYTES = _VERIFY["max_vector_bytes"].default
# thread axes whose iterations share a buffer of the scope (as VerifyGPUCode)
_SHARED_BY = {"shared": ("threadIdx", "vthread"), "local": ("vthread",)}
DRAWS = 256         # draws per tiled block when sampling within the limits


class _Part:
    """One factor of an iteration variable of a tiled block: level ``pos`` of the
    ``sample_perfect_tile`` at ``inst``, or (``inst`` None) a whole loop of ``extent``."""
    __slots__ = ("var", "inst", "pos", "extent", "tag")

    def __init__(self, var: str, inst, pos: int, extent: int):
        self.var, self.inst, self.pos, self.extent = var, inst, pos, extent
        self.tag = None   # the thread axis its (fused) loop is bound to

    def factor(self, decisions: dict) -> int:
        return self.extent if self.inst is None else decisions[self.inst][self.pos]


class _Cache:
    """A cache of a tiled block: its scope, the buffer it caches and the block's accesses
    of it, the parts of the loop it sits under, its handle, and its cooperative fetch's
    vector length: ``("sampled", sample_categorical index)``, ``("fixed", length)``, or
    None when it is not fetched cooperatively."""
    __slots__ = ("scope", "buf", "accesses", "at", "rv", "fetch")

    def __init__(self, scope, buf, accesses, at, rv):
        self.scope, self.buf, self.accesses, self.at, self.rv = scope, buf, accesses, at, rv
        self.fetch = None


class _Block:
    def __init__(self, name: str, block):
        self.name = name
        self.block = block              # the Block of the original function
        self.loops: dict = {}           # LoopRV -> [parts], for the loops of its nest
        self.order: list = []           # the parts' lists of the reordered nest
        self.low = self.high = None     # thread range annotated by the tiling
        self.caches: list = []          # [_Cache]
        self.ok = True                  # False once an instruction was not followed


class GPUTilingLimits:
    """The limits of ``target`` as functions of a trace's tile decisions.

        limits = GPUTilingLimits(trace, func, target)
        limits.violation(trace.decisions)   # None, or what breaks which limit
        limits.violation({**trace.decisions, i: [1, 2, 64, 1, 1]})
        limits.memory_bytes(trace.decisions)   # {block name: shared bytes}

    ``max_vthread`` and ``max_vector_bytes`` default to VerifyGPUCode's.
    """

    def __init__(self, trace, func, target, max_vthread: int = MAX_VTHREAD,
                 max_vector_bytes: int = MAX_VECTOR_BYTES):
        self.target = target
        self.max_vthread = max_vthread
        self.max_vector_bytes = max_vector_bytes
        self.blocks: list = []
        self.fetch_bytes: dict = {}     # sample_categorical index -> bytes per element fetched
        self.tile_extent: dict = {}     # sample_perfect_tile index -> extent of the loop tiled
        self._follow(trace, func)
        self.blocks = [b for b in self.blocks if b.ok and b.order]
        for b in self.blocks:       # cooperative fetches are annotated after compute_at
            for c in b.caches:
                c.fetch = self._fetch_of.get(c.rv)
        self._trace = trace

    @property
    def tile_insts(self) -> set:
        """Indices of the sample_perfect_tile instructions the checks depend on."""
        return {p.inst for b in self.blocks for ps in b.order for p in ps if p.inst is not None}

    # ------------------------------------------------------------ reading the trace
    def _follow(self, trace, func) -> None:
        rv_block: dict = {}       # BlockRV -> block name
        tiled: dict = {}          # block name -> _Block
        loop_of: dict = {}        # LoopRV -> _Block
        factor_of: dict = {}      # ExprRV -> (instruction index, position)
        caches: dict = {}         # cache BlockRV -> (_Block, scope, buffer, accesses)
        made_by: dict = {}        # handle -> index of the instruction that made it
        fetch_of: dict = {}       # cache BlockRV -> its vector length (see _Cache)
        self._fetch_of = fetch_of
        for idx, ins in enumerate(trace.insts):
            k, inp, out = ins.kind, ins.inputs, ins.outputs
            for o in out:
                made_by[o] = idx
            if k == "get_block":
                rv_block[out[0]] = inp[0]
            elif k == "annotate" and inp[1] == A.TILING_STRUCTURE and inp[0] in rv_block:
                name = rv_block[inp[0]]
                try:
                    block = find_block(func, name)[0].block
                except ExplorerError:
                    continue
                tiled[name] = _Block(name, block)
                self.blocks.append(tiled[name])
            elif k == "annotate" and inp[1] in (A.THREAD_EXTENT_LOW, A.THREAD_EXTENT_HIGH):
                b = tiled.get(rv_block.get(inp[0]))
                if b is not None and isinstance(inp[2], int):
                    if inp[1] == A.THREAD_EXTENT_LOW:
                        b.low = inp[2]
                    else:
                        b.high = inp[2]
            elif k == "annotate" and inp[1] == A.COOPERATIVE_FETCH and inp[0] in caches:
                j = made_by.get(inp[2]) if isinstance(inp[2], ExprRV) else None
                if j is not None and trace.insts[j].kind == "sample_categorical":
                    self.fetch_bytes[j] = _BYTES.get(caches[inp[0]][2].dtype, 4)
                    fetch_of[inp[0]] = ("sampled", j)
                elif isinstance(inp[2], int):
                    fetch_of[inp[0]] = ("fixed", inp[2])
            elif k == "get_loops" and rv_block.get(inp[0]) in tiled:
                b = tiled[rv_block[inp[0]]]
                if b.loops or b.order:          # a later get_loops (after the tiling)
                    continue
                ivs = b.block.iter_vars
                if len(out) != len(ivs):
                    b.ok = False
                    continue
                for lp, iv in zip(out, ivs):
                    b.loops[lp] = [_Part(iv.var.name, None, 0, iv.extent)]
                    loop_of[lp] = b
            elif k == "sample_perfect_tile":
                for pos, v in enumerate(out):
                    factor_of[v] = (idx, pos)
                parts = loop_of[inp[0]].loops[inp[0]] if inp[0] in loop_of else ()
                if len(parts) == 1 and parts[0].inst is None:
                    self.tile_extent[idx] = parts[0].extent
            elif k == "split" and inp[0] in loop_of:
                b = loop_of[inp[0]]
                parts = b.loops[inp[0]]
                facs = [factor_of.get(f) if not isinstance(f, int) else None for f in inp[1]]
                if len(parts) != 1 or any(f is None for f in facs):
                    b.ok = False
                    continue
                for lp, (i, pos) in zip(out, facs):
                    b.loops[lp] = [_Part(parts[0].var, i, pos, 0)]
                    loop_of[lp] = b
            elif k == "reorder" and inp and all(lp in loop_of for lp in inp):
                b = loop_of[inp[0]]
                if any(loop_of[lp] is not b for lp in inp):
                    continue
                b.order = [b.loops[lp] for lp in inp]
            elif k == "fuse" and inp and inp[0] in loop_of:
                b = loop_of[inp[0]]
                if not all(loop_of.get(lp) is b for lp in inp):
                    b.ok = False
                    continue
                fused = [p for lp in inp for p in b.loops[lp]]
                b.loops[out[0]] = fused
                loop_of[out[0]] = b
                # the fused loops are consecutive in the nest: they become one entry
                ids = [id(b.loops[lp]) for lp in inp]
                at = [n for n, ps in enumerate(b.order) if id(ps) in ids]
                if at and at == list(range(at[0], at[0] + len(inp))):
                    b.order[at[0]:at[-1] + 1] = [fused]
                elif b.order:
                    b.ok = False
            elif k == "bind" and inp[0] in loop_of:
                for p in loop_of[inp[0]].loops[inp[0]]:
                    p.tag = inp[1]
            elif k in ("cache_read", "cache_write") and rv_block.get(inp[0]) in tiled:
                b = tiled[rv_block[inp[0]]]
                blk = b.block
                if k == "cache_read":
                    reads = blk.reads()
                    if not 0 <= inp[1] < len(reads):
                        continue
                    buf = reads[inp[1]]
                    accesses = blk.read_indices(buf)
                else:
                    buf, accesses = blk.body.buffer, [blk.body.indices]
                caches[out[0]] = (b, inp[2], buf, accesses)
            elif k in ("compute_at", "reverse_compute_at") and inp[0] in caches:
                b, scope, buf, accesses = caches[inp[0]]
                if scope in _SHARED_BY and loop_of.get(inp[1]) is b:
                    b.caches.append(_Cache(scope, buf, accesses, b.loops[inp[1]], inp[0]))

    # ------------------------------------------------------------ the checks
    def violation(self, decisions: dict) -> str | None:
        """None when the tilings with ``decisions`` (index -> decision) respect the
        limits, else the first broken one, in words."""
        for b in self.blocks:
            try:
                why = self._block_violation(b, decisions)
            except (KeyError, IndexError, TypeError):
                continue        # a factor without a decision: nothing to judge it by
            if why:
                return why
        return None

    def _block_violation(self, b: _Block, decisions: dict) -> str | None:
        t = self.target
        threads = _prod(b, decisions, "threadIdx")
        vthreads = _prod(b, decisions, "vthread")
        high = min(t.max_threads_per_block, b.high or t.max_threads_per_block)
        if threads > high:
            return f"block {b.name!r} would run {threads} threads per block, more than {high}"
        if b.low is not None and threads < b.low:
            return (f"block {b.name!r} would run {threads} threads per block, fewer than "
                    f"the {b.low} its tiling asks for")
        if vthreads > self.max_vthread:
            return (f"block {b.name!r} would use {vthreads} virtual threads, more than "
                    f"{self.max_vthread}")
        nbytes = sum(self._cache_bytes(b, c, decisions, threads) for c in b.caches
                     if c.scope == "shared")
        if nbytes > t.max_shared_memory_per_block:
            return (f"block {b.name!r} would need {nbytes} bytes of shared memory, more than "
                    f"{t.max_shared_memory_per_block}")
        words = self.local_words(b, decisions)
        regs, limit = register_estimate(words), register_limit(t, threads)
        if regs > limit or words * 4 > t.max_local_memory_per_block:
            return (f"block {b.name!r} would need about {regs} registers per thread, more "
                    f"than the {limit} a block of {threads} threads may use")
        return None

    @staticmethod
    def local_words(b: _Block, decisions: dict) -> int:
        """4-byte words of local arrays per thread: each local cache's tile (the box under
        its location, per virtual thread, as ``explorer.lower`` allocates it) times the
        virtual threads."""
        vthreads = _prod(b, decisions, "vthread")
        return sum(vthreads * -(-_cache_bytes(b, c, decisions, 0, 0, widen=()) // 4)
                   for c in b.caches if c.scope == "local")

    def memory_bytes(self, decisions: dict, scope: str = "shared") -> dict:
        """{tiled block name: bytes of its caches in ``scope``} with ``decisions``."""
        return {b.name: sum(self._cache_bytes(b, c, decisions, _prod(b, decisions, "threadIdx"))
                            for c in b.caches if c.scope == scope) for b in self.blocks}

    def _fetch_length(self, cache: _Cache, decisions: dict) -> int:
        """The vector length of a cooperative fetch (0: not fetched cooperatively)."""
        if cache.fetch is None:
            return 0
        how, x = cache.fetch
        return self._trace.insts[x].inputs[0][decisions[x]] if how == "sampled" else x

    def _cache_bytes(self, b: _Block, cache: _Cache, decisions: dict, threads: int) -> int:
        """Bytes of ``cache``'s buffer, sized as VerifyGPUCode sizes it: the box the block
        touches under the cache's loop, and, for a cooperative fetch, the box the fetch's
        loops span (the copy of ``E`` elements runs as ``ceil(E / (threads * v))``
        rounds of ``threads * v``, and the outermost dimension of the box counts the
        rounds' excess, as the region of the fetch is bounded without its predicate)."""
        return _cache_bytes(b, cache, decisions, threads, self._fetch_length(cache, decisions))

    def sample(self, rng: random.Random, draws: int = DRAWS) -> dict:
        """Decisions {instruction index: decision} for the ``sample_perfect_tile`` of each
        GPU tiling and its cooperative fetches' ``sample_categorical``, drawn as those
        instructions draw them (every perfect tiling equally likely, the categories by
        their probabilities) and drawn again together, up to ``draws`` times per tiled
        block, until the block is within the limits: the sampling instructions'
        distribution conditioned on the limits. A block with no draw within them in
        ``draws`` gets no decisions (the instructions then sample them as before)."""
        out: dict = {}
        insts = self._trace.insts
        for b in self.blocks:
            tiles = sorted({p.inst for ps in b.order for p in ps if p.inst is not None}
                           - set(out))
            fetches = sorted({c.fetch[1] for c in b.caches
                              if c.fetch is not None and c.fetch[0] == "sampled"} - set(out))
            if any(i not in self.tile_extent for i in tiles):
                continue        # a factor of a loop this model did not follow
            options = [(i, perfect_tilings(self.tile_extent[i], *insts[i].inputs[1:3]))
                       for i in tiles]
            for _ in range(draws):
                d = dict(out)
                for i, opts in options:
                    d[i] = list(opts[rng.randrange(len(opts))])
                for j in fetches:
                    d[j] = sample_categorical(*insts[j].inputs[:2], rng)
                try:
                    ok = self._block_violation(b, d) is None
                except (KeyError, IndexError, TypeError):
                    break       # a factor without a decision: nothing to judge it by
                if ok:
                    out = d
                    break
        return out

    def vector_ok(self, categorical: int, length: int) -> bool:
        """Whether a cooperative fetch (sample_categorical ``categorical``) of ``length``
        elements per thread fits a GPU vector."""
        nbytes = self.fetch_bytes.get(categorical)
        return nbytes is None or length * nbytes <= self.max_vector_bytes


def _prod(b: _Block, decisions: dict, prefix: str) -> int:
    """Product of the factors bound to ``prefix`` axes (one extent per axis)."""
    per_axis: dict = {}
    for ps in b.order:
        for p in ps:
            if p.tag is not None and p.tag.startswith(prefix):
                per_axis[p.tag] = per_axis.get(p.tag, 1) * p.factor(decisions)
    return math.prod(per_axis.values())


def _cache_bytes(b: _Block, cache: _Cache, decisions: dict, threads: int, vec: int,
                 widen=None) -> int:
    """See ``GPUTilingLimits._cache_bytes``; ``widen``: the thread axes whose iterations
    share the buffer (by default those of its scope)."""
    widen = _SHARED_BY[cache.scope] if widen is None else widen
    buf = cache.buf
    depth = max((n for n, ps in enumerate(b.order) if any(p in ps for p in cache.at)),
                default=None)
    if depth is None:
        return 0
    spans: dict = {}
    for n, ps in enumerate(b.order):
        for p in ps:
            if n > depth or (p.tag is not None and p.tag.split(".")[0] in widen):
                spans[p.var] = spans.get(p.var, 1) * p.factor(decisions)
    ranges = {iv.var.name: (0, spans.get(iv.var.name, 1) - 1) for iv in b.block.iter_vars}
    box = []
    for d, dim in enumerate(buf.shape):
        try:
            bounds = [int_bounds(idx[d], ranges) for idx in cache.accesses]
        except NonAffine:
            return 0        # not analysable here: VerifyGPUCode decides
        n = max(hi for _, hi in bounds) - min(lo for lo, _ in bounds) + 1
        box.append(max(1, min(n, dim)))
    size = math.prod(box)
    if vec and threads and box:
        v = vec if size % vec == 0 else 1     # RewriteCooperativeFetch's fallback
        copied = -(-size // (threads * v)) * threads * v
        inner = size // box[0]
        first = (copied - 1) // inner + 1
        if first >= buf.shape[0] and _starts_at_zero(b, cache, depth, decisions):
            first = buf.shape[0]
        size = first * inner
    return size * _BYTES.get(buf.dtype, 4)


def _starts_at_zero(b: _Block, cache: _Cache, depth: int, decisions: dict) -> bool:
    """Whether the first index of the cached box is 0 whatever the loops above the cache:
    no loop outside it moves that index (VerifyGPUCode then clamps the box to the
    buffer). A fused loop drops the parts of factor 1 but its first; a serial loop stays
    in the index whatever its extent."""
    used = set()
    for idx in cache.accesses:
        used |= expr_vars(idx[0])
    for ps in b.order[:depth + 1]:
        for k, p in enumerate(ps):
            if p.var not in used or (p.tag is not None
                                     and p.tag.split(".")[0] in _SHARED_BY[cache.scope]):
                continue
            if len(ps) == 1 or k == 0 or p.factor(decisions) > 1:
                return False
    return True


_SKETCH_LIMITS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def sample_within_limits(sketch, func, target, seed: int, draws: int = DRAWS) -> dict:
    """Decisions for the GPU tilings of ``sketch`` (a Schedule whose trace holds the
    sampling instructions) within ``target``'s limits, from ``seed`` (see
    ``GPUTilingLimits.sample``): what ``DesignSpace`` fills in before it replays a sketch
    on a GPU target. The same seed gives the same decisions; the random stream is one of
    its own (``seed`` may also seed the schedule that replays them). The model of a
    sketch is built once."""
    cached = _SKETCH_LIMITS.get(sketch)
    if cached is None or cached[0] is not func or cached[1] != target:
        cached = (func, target, GPUTilingLimits(sketch.trace, func, target))
        _SKETCH_LIMITS[sketch] = cached
    return cached[2].sample(random.Random(f"gpu tiles {seed}"), draws)
