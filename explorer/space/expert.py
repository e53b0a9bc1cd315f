"""Expert schedules: hand-chosen points of the default CPU design space.

An expert schedule here is not a separate hand-written program: it is a sketch
of ``DesignSpace(workload, "llvm")`` (multi-level tiling SSRSRS with the write
cache at level 2) with decisions picked by rules of thumb for the target's
vector width and register count, so a tuner can seed its population with it
and never ends worse than it::

    sch = expert_schedule(ops.gemm(1024, 1024, 1024))
    trace = expert_trace(ops.gemm(1024, 1024, 1024))   # the same, as a trace

The shape for a contraction ``C[.., i, j] += A[.., i, k] * B[.., k, j]`` (tuned by
measurement on AVX-512 and AVX2 hosts):

- a register tile of ``MR`` rows x ``NR`` columns within the accumulator budget
  (``_Budget``: 16 vector accumulators of AVX-512's 32 registers, e.g. 4 rows x 4
  vectors of 16 floats for gemm 1024; 12 of AVX2's 16), held in the ``local`` write
  cache at tile level 2, which lowering sizes to the tile, so LLVM keeps it in
  registers for the whole reduction;
- the panel of B that a column tile reads packed into contiguous memory once per
  task (the space's read cache at level 1): unpacked, the 4 KB row stride of B
  maps a panel onto a few L1 sets and the kernel runs at a third of the speed (a
  batch_matmul whose B fits the L1 whole reads it in place, ``_unpacked_in_l1``);
- per reduction step: load the ``NR`` columns of B, broadcast one A value per row,
  fused multiply-add (the inner ``j`` vectorized, the ``MR`` rows unrolled);
- the column tiles in parallel (one packed panel per task, reused by all its
  row blocks), the init of the accumulators split from the update.

For conv2d (NCHW) whose output rows do not fill the vectors (a column count that is
not a multiple of the lanes: every ResNet-18 layer) the expert takes the space's
channel-vectorized sketch: 2 vectors of output channels x a few columns, the
weight slice of a task packed channel-last, the padding read inline through its
select (``_conv_channel``). Otherwise the register tile is ``k3`` output channels x ``p3`` rows x
``q3`` columns of the output (vectorized over columns), tasks over output rows
with the channel chunks inside (the input rows stay in cache across channels),
the padding computed once at the root. ``dense_bias_relu`` reads its weight as
``W[j, k]``: no contiguous panel to pack, the columns are gathered, and the
bias and relu run on the register tile (the consumer fused at tile level 2).
"""
from __future__ import annotations

import numpy as np

from ..target import as_target
from ..errors import ScheduleError, SpaceError
from ..ir.expr import Select
from ..ir.stmt import PrimFunc
from ..schedule.tree import find_block
from . import analysis as A
from .design_space import DesignSpace
from .register_tiles import PANEL_SHARE, max_accumulators
from .replay import producers_of
from .rules.multi_level_tiling import padded_extent

SUPPORTED = ("gemm", "batch_matmul", "dense_bias_relu", "conv2d", "conv2d_bias_relu",
             "gemm_bias_gelu", "depthwise_conv2d")
ROOT, INLINE = -1, -2     # decisions of sample_compute_location
PADDING = "_padding"      # a plan's key: where its padding stage goes (ROOT by default)
OPERAND_REGISTERS = 4     # vector registers a micro-kernel leaves for B's loads and A's broadcast
UNROLL_STEP = 64          # unroll the micro-kernel (a whole reduction block: _streamed_panel)


def expert_trace(workload, target="llvm"):
    """The expert schedule of ``workload`` as a trace of the default space of ``target``
    (decisions included). Supported: gemm, batch_matmul, dense_bias_relu, conv2d NCHW,
    the fused conv2d_bias_relu and gemm_bias_gelu (``expert_epilogue``: the plain op's plan,
    the epilogue on the register tile) and depthwise_conv2d (``expert_depthwise``)."""
    target = as_target(target)
    name = getattr(workload, "name", None)
    if name not in SUPPORTED or isinstance(workload, PrimFunc):
        raise SpaceError(f"no expert schedule for {getattr(workload, 'key', workload)!r}: "
                         f"expert schedules exist for {', '.join(SUPPORTED)}; use "
                         "DesignSpace(...).sample or a tuner for other operators")
    if target.is_gpu:
        raise SpaceError("expert schedules are written for the llvm (CPU) target; for cuda "
                         "sample DesignSpace(workload, 'cuda') or tune")
    if name == "conv2d" and dict(workload.params)["layout"] != "NCHW":
        raise SpaceError("the conv2d expert schedule is written for the NCHW layout")
    if name in ("conv2d_bias_relu", "gemm_bias_gelu"):   # the epilogue on the register tile
        from .expert_epilogue import epilogue_trace
        return epilogue_trace(workload, target)
    if name == "depthwise_conv2d":     # rows x columns of one channel, see the module
        from .expert_depthwise import depthwise_trace
        return depthwise_trace(workload, target)
    space = DesignSpace(workload, target)
    if name == "conv2d":
        try:   # the output channel vectorized, when the space offers it
            trace = sketch_with_write_cache(space, 2, packed=True, channel=True)
            return _with_decisions(trace, space,
                                   _conv_channel(dict(workload.params), _Budget.of(target)))
        except SpaceError:
            pass
    return plan_trace(workload, target, _tile_plan(workload, target), space)


def plan_trace(workload, target, plan: dict, space=None):
    """The trace of the expert's sketch of a contraction (gemm, batch_matmul,
    dense_bias_relu, conv2d over columns) with the tile factors of ``plan`` (iteration
    variable name -> factors, e.g. ``{"i": [1, 16, 1, 8], "j": [16, 1, 1, 48],
    "k": [12, 64]}``): how a benchmark compares another plan with the expert's."""
    target = as_target(target)
    space = space or DesignSpace(workload, target)
    plan = dict(plan)
    level = plan.pop("_cache_level", 2)
    packed = plan.pop("_packed", True)
    pack_level = plan.pop("_pack_level", 1)
    try:
        trace = sketch_with_write_cache(space, level, packed, pack_level=pack_level)
    except SpaceError:
        trace = sketch_with_write_cache(space, level, False)   # nothing to pack
    return _with_decisions(trace, space, plan)


def expert_schedule(workload, target="llvm"):
    """The expert schedule of ``workload`` (see ``expert_trace``), postprocessed."""
    trace = expert_trace(workload, target)
    space = DesignSpace(workload, target)
    sch = space.apply(trace)
    if sch is None:
        raise SpaceError(f"the expert trace of {workload.key} is not valid in its space: "
                         f"{space.last_error}")
    return sch


# ------------------------------------------------------------------ decisions

class _Budget:
    """What a register tile may use on ``target``: fp32 lanes per vector, and vector
    accumulators (at most 16 of AVX-512's 32 registers, as measured; 12 of AVX2's 16).
    ``tile_acc``: the accumulators of a contraction's register tile (gemm, batch_matmul),
    three quarters of the registers (24 of 32, 12 of 16), the rest for the B vectors and
    the broadcast A value of a reduction step (see ``_contraction``)."""

    def __init__(self, lanes: int, accumulators: int, tile_acc: int | None = None):
        self.lanes, self.acc = lanes, accumulators
        self.tile_acc = max(accumulators, tile_acc or 0)

    @staticmethod
    def of(target) -> "_Budget":
        regs = target.vector_registers
        return _Budget(target.vector_lanes, min(16, regs - OPERAND_REGISTERS),
                       max_accumulators(regs))

    def pad(self, extent: int) -> int:
        return padded_extent(extent, self.lanes, 64)

    def vectors(self, columns: int) -> int:
        return -(-columns // self.lanes)


def _tile_plan(wl, target) -> dict:
    """Iteration variable name -> tile factors (4 levels spatial, 2 reduction)."""
    budget = _Budget.of(target)
    p = dict(wl.params)
    spatial = ("N", "K") if wl.name == "conv2d" else ("B", "M", "N")
    for key in spatial:     # tiled over a padded extent (MultiLevelTiling.padded_extent)
        if key in p:
            p[key] = budget.pad(p[key])
    if wl.name == "conv2d":
        return _conv_nchw(p, budget)
    # dense reads W[j, k]: its columns are gathered, wide vectors gather badly (measured,
    # dense_bias_relu 512, 1 thread: 4 x 64 10 GFLOP/s, 8 x 32 44)
    plan = _contraction(p["M"], p["N"], p["K"], budget,
                        gathered=wl.name == "dense_bias_relu")
    if wl.name == "batch_matmul":
        plan["b"] = [p["B"], 1, 1, 1]     # one batch per task
        _unpacked_in_l1(plan, np.dtype(wl.dtype).itemsize * p["K"] * p["N"], target)
    elif wl.name == "gemm" and not (p.get("transpose_a") or p.get("transpose_b")):
        _streamed_panel(plan, np.dtype(wl.dtype).itemsize, p["K"] * p["N"], target)
    return plan


def _unpacked_in_l1(plan: dict, b_bytes: int, target) -> None:
    """B read in place, not packed per task (the sketch without the read cache), where one
    batch's B (``K x N``, contiguous) fits the L1: its rows do not collide in the L1 sets
    and the copy is all cost. BERT-base's attention (B 32 KB a batch), two cores of the
    Intel Xeon, same runs, against the packed expert: 128x128x64 (scores) 1.00-1.03x,
    128x64x128 (context) 1.08x (1.02 -> 1.10-1.11x PyTorch); the length of the unrolled
    reduction block (8, 16 or 64 steps) within the spread. Measured on batch_matmul
    only: a gemm keeps its pack."""
    if b_bytes <= target.l1_bytes:
        plan["_packed"] = False


def _streamed_panel(plan: dict, itemsize: int, b_size: int, target) -> None:
    """Where the share of B one core reads (its column tiles) is larger than its L2 (B
    streams from memory): each task packs a panel of as many register-tile columns as
    ``PANEL_SHARE`` of the L2 holds (its rows then copy runs of several lines, not one
    tile's 3 or 4), keeping at least a task per core, and the reduction runs in blocks
    of ``UNROLL_STEP / MR`` steps, which the micro-kernel unrolls whole (8 for 8 rows).
    BERT-base, the Intel Xeon (L2 2 MB), same runs, against the pack per 64-row
    reduction block (``ReuseConfig.streamed_levels``, session 11's expert): 128x3072x768
    (ffn_up: panels of 4 x 48 columns) 1.03-1.04x on one and two cores (0.98 -> 1.01x
    PyTorch at two); 128x768x3072 (ffn_down: a 48-column panel is 0.6 MB) 1.00x on one,
    1.02x on two (the pack per block with two tiles per task: 0.87-0.89 -> 0.95-0.97x
    PyTorch, per task with 8 steps 0.96-0.97x). The unrolled steps are what counts: the
    same panels with 64-step blocks (a loop around the unrolled tile) 0.94x; one 48-column
    tile per task for ffn_up 0.92x, 8 tiles (1.2 MB) 0.91x. gemm 1024 and BERT's 768^2
    GEMMs on two cores (B's half within the L2) keep their plans, as does a gemm whose A
    streams too (gemm 1024^3 on one core: A 4 MB; the plan measured there).

    A is bounded by the L2s of the cores together, not one core's: on an Intel Xeon with a
    1.25 MB L2 (icelake-server, two cores) ffn_down's A (1.5 MB) is beyond one L2 and the
    plan without (a loop of 64 reduction steps per block) ran at 0.86x PyTorch, these
    8-step blocks at 1.03x in one run (1.19x), 0.95 -> 0.97x in a calmer one (1.03x; 2
    threads, a machine shared with other timings). The BLIS order (a 64-row block of B
    packed per task of 2 or 4 x 48 columns, A's 8-row tile in the L1 across them) ran
    0.97-1.04x the plan without, under these panels. gemm 1024^3 (A 4 MB) keeps its plan."""
    i, j, k = plan["i"], plan["j"], plan["k"]
    share = itemsize * b_size / max(1, min(target.num_cores, j[0]))
    depth = k[0] * k[1]
    a_bytes = itemsize * int(np.prod(i)) * depth
    if share <= target.l2_bytes or a_bytes > max(1, target.num_cores) * target.l2_bytes:
        return
    step = _pick(depth, (), limit=max(1, UNROLL_STEP // i[3]))
    plan["k"] = [depth // step, step]
    tile = itemsize * depth * j[3]
    width = max(f for f in range(1, j[0] + 1) if j[0] % f == 0 and (
        f == 1 or (f * tile <= PANEL_SHARE * target.l2_bytes
                   and j[0] // f >= target.num_cores)))
    plan["j"] = [j[0] // width, j[1] * width, j[2], j[3]]


ROWS = (8, 6, 7, 5, 4, 3, 2)     # register tile rows, in order of preference


def _contraction(m: int, n: int, k: int, budget: _Budget, gathered: bool = False) -> dict:
    """Column tiles of ``NR`` (up to 4 vectors) in parallel, ``MR`` rows per register
    tile, the reduction in blocks of 64. The tile is the one with the most accumulators
    (``MR x NR / lanes``) within ``budget.tile_acc`` among the widths and rows that
    divide the extents, the first in order of preference among equals: per reduction
    step it loads ``NR / lanes`` vectors of B and broadcasts ``MR`` values of A for
    ``MR x NR / lanes`` fused multiply-adds, so more accumulators load less per
    multiply-add. BERT-base's GEMMs (M = 128, N = 768 or 3072) then take 8 rows x 3
    vectors (24 zmm) where the first width and rows that fit gave 4 x 4 (16); one core
    of the Intel Xeon (AVX-512, loaded), in one run, against PyTorch: 128x768x768
    0.88-0.89 -> 0.96-0.97x, 128x768x3072 0.84 -> 0.89x; the AVX2 target (12
    accumulators) 4 rows x 3 vectors instead of 2 x 4: 0.56 -> 0.63x. gemm 1024 keeps
    4 x 4 (no 24-accumulator tile divides it). Gathered columns (``dense_bias_relu``)
    keep the first fit within ``budget.acc``."""
    lanes = budget.lanes
    if gathered:
        nr = _pick(n, tuple(int(w * lanes) for w in (2, 1, 0.5)
                            if w * lanes >= 1 and w <= budget.acc // 2))
        vectors = budget.vectors(nr)
        mr = _pick(m, tuple(r for r in ROWS if r * vectors <= budget.acc), limit=1)
        return {"i": [1, m // mr, 1, mr], "j": [n // nr, 1, 1, nr], "k": _reduction(k)}
    acc, best = budget.tile_acc, None
    for w in (4, 2, 3, 1, 0.5, 1.5):
        nr = int(w * lanes)
        if nr < 1 or w > acc // 2 or nr > n or n % nr:
            continue
        vectors = budget.vectors(nr)
        mr = next((r for r in ROWS if r * vectors <= acc and r <= m and m % r == 0), None)
        if mr is not None and (best is None or mr * vectors > best[0]):
            best = (mr * vectors, mr, nr)
    if best is None:      # no width divides n: the largest divisor up to 64 columns
        nr = _pick(n, ())
        vectors = budget.vectors(nr)
        mr = _pick(m, tuple(r for r in ROWS if r * vectors <= acc), limit=1)
    else:
        _, mr, nr = best
    return {"i": [1, m // mr, 1, mr], "j": [n // nr, 1, 1, nr], "k": _reduction(k)}


def _conv_nchw(p: dict, budget: _Budget) -> dict:
    """Register tile: ``k3`` output channels x ``p3`` rows x ``q3`` columns (the
    accumulator budget); tasks over output rows, the channel chunks inside, so one task
    reuses its input rows from cache across all output channels."""
    from ..ops import _out_size
    st, pad, dil = (_pair(p[k]) for k in ("stride", "padding", "dilation"))
    P = _out_size("conv2d", "H", p["H"], p["R"], st[0], pad[0], dil[0])
    Q = _out_size("conv2d", "W", p["W"], p["S"], st[1], pad[1], dil[1])
    P, Q = budget.pad(P), budget.pad(Q)
    q3 = _pick(Q, tuple(range(min(Q, 2 * budget.lanes), 0, -1)))
    vectors = budget.vectors(q3)
    k3 = _pick(p["K"], tuple(c for c in (8, 4, 2) if c * vectors <= budget.acc), limit=1)
    p3 = _pick(P, tuple(r for r in (4, 2, 1) if k3 * r * vectors <= budget.acc), limit=1)
    return {"n": [p["N"], 1, 1, 1], "k": [1, p["K"] // k3, 1, k3], "p": [P // p3, 1, 1, p3],
            "q": [1, Q // q3, 1, q3], "rc": [p["C"], 1], "ry": [1, p["R"]], "rx": [1, p["S"]]}


def _conv_channel(p: dict, budget: _Budget) -> dict:
    """The channel-vectorized conv (``MultiLevelTiling.add_vector_channel``): a register
    tile of ``k3`` = 2 vectors of output channels x ``q3`` <= 7 columns (14
    accumulators; per reduction step 2 vector loads of the packed weight and ``q3``
    broadcasts of the input), tasks over chunks of ``k3`` channels (each packs its
    weight slice once), all rows of a task inside it. Measured on one core (GFLOP/s,
    PyTorch 2.13 in brackets): C2 104 (99), C6 160 (111), C9 151 (120), C12 77 (66).
    The padding stage is inlined (``PADDING: INLINE``): the conv reads the input through
    its select, no padded copy is written and the call has one parallel region, not two
    (2 threads, loaded Zen 5, min of interleaved runs: C2 -5%, C4 -4%, C6 -9%, C7 -3%,
    C9 -3%, C12 -1%; C4 -18% where the runtime's threads sleep between regions)."""
    from ..ops import _out_size
    st, pad, dil = (_pair(p[k]) for k in ("stride", "padding", "dilation"))
    P = _out_size("conv2d", "H", p["H"], p["R"], st[0], pad[0], dil[0])
    Q = _out_size("conv2d", "W", p["W"], p["S"], st[1], pad[1], dil[1])
    P, Q = budget.pad(P), budget.pad(Q)
    lanes = budget.lanes
    best = None      # 2 vectors unless 1 fills twice the accumulators (13 columns: 1 x 13)
    for k3 in (2 * lanes, lanes, max(1, lanes // 2)):
        if k3 > p["K"] or p["K"] % k3:
            continue
        vectors = budget.vectors(k3)
        q3 = _pick(Q, tuple(range(min(Q, max(1, (budget.acc - 2) // vectors)), 0, -1)))
        if best is None or vectors * q3 >= 2 * best[0]:
            best = (vectors * q3, k3, q3)
    if best is None:
        best = (0, _pick(p["K"], (), limit=lanes), 1)
    _, k3, q3 = best
    return {"n": [p["N"], 1, 1, 1], "k": [p["K"] // k3, 1, 1, k3], "p": [1, P, 1, 1],
            "q": [1, Q // q3, 1, q3], "rc": [p["C"], 1], "ry": [1, p["R"]], "rx": [1, p["S"]],
            PADDING: INLINE}


def _reduction(ext: int) -> list:
    inner = _pick(ext, ())
    return [ext // inner, inner]


def _pick(extent: int, prefs, limit: int = 64) -> int:
    """The first of ``prefs`` that divides ``extent``, else its largest divisor <= limit."""
    for f in prefs:
        if f <= extent and extent % f == 0:
            return f
    return max(d for d in range(1, min(extent, limit) + 1) if extent % d == 0)


def _pair(v):
    return v if isinstance(v, tuple) else (v, v)


# ------------------------------------------------------------------ the sketch

def sketch_with_write_cache(space, level: int, packed: bool = False, channel: bool = False,
                            pack_level: int = 1):
    """The trace of the multi-level-tiling sketch of ``space`` whose write cache (or fused
    consumer) sits at tile level ``level`` (0: the sketch without one), with or without
    the packed copy of an input (multi-level tiling's read cache), vectorized over the
    output channel (``channel``, see ``MultiLevelTiling.add_vector_channel``) or not;
    the packed copy at tile level ``pack_level`` (1: per task, 3: per reduction block)."""
    for sk in space.sketches:
        tr = sk.trace
        if any(i.kind == "cache_read" for i in tr.insts) != packed:
            continue
        if packed and not channel and _read_cache_level(tr) != pack_level:
            continue
        if any(i.kind == "transform_layout" for i in tr.insts) != channel:
            continue
        if _write_cache_level(tr) == level:
            return tr
    raise SpaceError(f"{space} has no sketch with a write cache at tile level {level}"
                     f"{' and a packed input' if packed else ''}")


def _write_cache_level(trace) -> int:
    defined = producers_of(trace)
    for ins in trace.insts:
        if ins.kind == "reverse_compute_at":
            src = trace.insts[defined[ins.inputs[1]]]
            if src.kind == "split":
                return src.outputs.index(ins.inputs[1]) + 1
    return 0


def _read_cache_level(trace) -> int:
    """The tile level (1-based, in the tiling structure) whose last loop holds the trace's
    read cache; 0 without one."""
    defined = producers_of(trace)
    structure = next((i.inputs[2] for i in trace.insts if i.kind == "annotate"
                      and i.inputs[1] == A.TILING_STRUCTURE), None)
    for ins in trace.insts:
        if ins.kind != "compute_at" or structure is None:
            continue
        src = trace.insts[defined[ins.inputs[1]]]
        if src.kind != "split":
            continue
        n = len(src.outputs)
        kinds = "S" if n == structure.count("S") else "R"
        slots = [i for i, c in enumerate(structure) if c == kinds]
        if n == len(slots):
            return slots[src.outputs.index(ins.inputs[1])] + 1
    return 0


def _with_decisions(trace, space, plan: dict):
    defined = producers_of(trace)
    func = space.func
    out = trace
    for idx in trace.sampling_indices():
        ins = trace.insts[idx]
        if ins.kind == "sample_perfect_tile":
            out = out.with_decision(idx, _tile_decision(trace, defined, func, ins, plan))
        elif ins.kind == "sample_categorical" and _is_unroll(trace, ins):
            out = out.with_decision(idx, list(ins.inputs[0]).index(UNROLL_STEP))
        elif ins.kind == "sample_compute_location":
            inline = plan.get(PADDING) == INLINE and _is_padding(trace, defined, func, ins)
            out = out.with_decision(idx, INLINE if inline else ROOT)
    return out


def _is_padding(trace, defined, func, ins) -> bool:
    """Is the block of a ``sample_compute_location`` a padding stage (a select of the
    input or zero)?"""
    src = trace.insts[defined[ins.inputs[0]]]
    if src.kind != "get_block":
        return False
    try:
        block = find_block(func, src.inputs[0])[0].block
    except ScheduleError:      # a block a primitive made (a cache stage)
        return False
    return isinstance(block.body.value, Select)


def _tile_decision(trace, defined, func, ins, plan: dict) -> list:
    loop = ins.inputs[0]
    src = trace.insts[defined[loop]]
    if src.kind == "split":     # a padded loop (MultiLevelTiling.padded_extent)
        loop = src.inputs[0]
        src = trace.insts[defined[loop]]
    block = src.inputs[0]
    block_name = trace.insts[defined[block]].inputs[0]
    iv = find_block(func, block_name)[0].block.iter_vars[src.outputs.index(loop)]
    name = iv.var.name[2:] if iv.var.name.startswith("v_") else iv.var.name
    factors = plan.get(name)
    if factors is None or len(factors) != ins.inputs[1]:
        raise SpaceError(f"expert plan has no {ins.inputs[1]}-level tiling for {name!r}")
    return list(factors)


def _is_unroll(trace, ins) -> bool:
    rv = ins.outputs[0]
    return any(i.kind == "annotate" and i.inputs[1] in (A.UNROLL_EXPLICIT, A.UNROLL_IMPLICIT)
               and i.inputs[2] is rv for i in trace.insts)
