"""The codegen group: what the CPU backend and LLVM make of a store's innermost
loops, and a cycle estimate built from it.

The LLVM backend emits unrolled loops as copies and an innermost vectorized loop
as vector statements (``explorer.backends.llvm``); LLVM's O3 (contraction, no
reassociation) then fully unrolls serial loops whose unrolled body stays under
its threshold, hoists loads the remaining innermost loop does not move, keeps
an accumulator tile in registers across that loop when the stores stay put
along it and the tile fits the register file, and vectorizes that loop itself
(256-bit vectors) when the store moves along it, with gathers for strided
loads and for guarded ones (an inlined padding's input, which the backend loads
through a selected address). Which of these happen decides most of a gemm or conv2d candidate's speed
and is spread thin over the first 182 values. The rules below were checked
against LLVM's optimized IR of 800 sampled gemm and conv2d candidates: the
predicted vector width agrees with the compiler's on 94-97% of them.

Per store (values raw; ``extract`` takes log2(x + 1)):

- ``simd_mode``: 0 scalar, 1 LLVM's loop vectorizer on the innermost loop it
  keeps, 2 the backend's own vector code; ``simd_width``: lanes per instruction;
- ``acc_regs``: registers the body's store tile needs; ``acc_in_regs``: 1 when
  the tile stays in registers across that loop, 0.5 when it would but spills,
  0 when the store moves along the loop; ``acc_chain``: updates of one
  accumulator per body (a dependence chain, latency-bound when the loop carries
  it, else overlapped as far as the out-of-order window reaches);
- per iteration of that loop: arithmetic, load and store instructions (loads
  whose lines thrash one L1 set count up to ``CONFLICT_COST`` times) and the
  cycles they take (ports: 2 FMA, 2 loads, 1 store; FMA latency 4, 5 more
  through a store);
- ``inner_iters``: how often that loop body runs in all; ``cg_cycles``: the
  estimate for the store over the cores in use (the cost model's prior);
  ``cg_total``: that or the target group's memory estimate, whichever is larger;
  ``cg_flops_per_cycle``; ``l1_set_pressure``: the most lines of one access
  falling into one L1 set during a run of that loop (power-of-two row strides).
"""
from __future__ import annotations

import numpy as np

from . import access as acc_mod

FMA_PORTS, LOAD_PORTS, STORE_PORTS = 2.0, 2.0, 1.0
FMA_LATENCY, STORE_FORWARD = 4.0, 5.0
LOOP_OVERHEAD = 1.0     # cycles per iteration of the innermost loop
MAX_VECTOR_LANES = 64   # the backend emits longer vectorized loops as a loop over chunks
FULL_UNROLL = 300       # LLVM's O3 full-unroll threshold, in instructions
STMT_BASE = 1           # instructions of a statement besides its float ops and accesses
LOOP_VF = 8             # LLVM's loop vectorizer prefers 256-bit vectors
STRIDED_BODY = 64       # a store strided along the loop is vectorized (scattered) only
                        # with a body of at most this many element operations
L1_SETS, L1_WAYS = 64, 12   # lines 4 KB apart share an L1 set (32-48 KB, 8-12 ways)
CONFLICT_COST = 4.0     # cost of a line that does not fit its set (an L2 hit), in loads
ROB_UOPS = 256          # out-of-order window
UOPS_PER_COPY = 3
MAX_ENUMERATED = 1 << 15
OPERAND_REGS = 4        # registers a register tile leaves for its operands

NAMES = ("simd_mode", "simd_width", "acc_regs", "acc_in_regs", "acc_chain", "iter_arith",
         "iter_loads", "iter_stores", "iter_cycles", "inner_iters", "cg_cycles", "cg_total",
         "cg_flops_per_cycle", "l1_set_pressure")


def vector_instructions(lanes: int, hw: int) -> int:
    """Instructions for one statement over ``lanes`` lanes: full registers, then
    powers of two for the rest (the backend's ``vector_pieces``)."""
    full, rest = divmod(lanes, hw)
    return full + bin(rest).count("1")


def _step(a, var):
    """The flat step of access ``a`` along ``var``: 0 (invariant), the smallest
    nonzero step when all its indices agree, None for a gather or non-affine use."""
    steps = acc_mod.flat_strides(a, var)
    if any(s is None for s in steps):
        return None
    nz = {abs(s) for s in steps if s}
    return 0 if not nz else (min(nz) if len(nz) == 1 else None)


def set_pressure(a, loops, level: int, cache_line: int) -> int:
    """Most distinct cache lines of access ``a`` falling into one L1 set while
    ``loops[level:]`` run (the others at 0): power-of-two row strides put a tile's
    rows into a few sets, which then thrash however small the tile is."""
    coefs, exts = [], []
    for lp in loops[level:]:
        steps = [s for s in acc_mod.flat_strides(a, lp.var) if s]
        if steps and lp.extent > 1:
            coefs.append(abs(steps[0]) * a.dtype_bytes)
            exts.append(lp.extent)
    total = 1
    for e in exts:
        total *= e
    if total > MAX_ENUMERATED:   # keep the strided dims, drop the contiguous ones
        keep = sorted(range(len(exts)), key=lambda i: -coefs[i])
        sel, total = [], 1
        for i in keep:
            if total * exts[i] <= MAX_ENUMERATED:
                sel.append(i)
                total *= exts[i]
        coefs, exts = [coefs[i] for i in sel], [exts[i] for i in sel]
    lines = np.zeros(1, dtype=np.int64)
    for c, e in sorted(zip(coefs, exts), reverse=True):
        lines = (lines[:, None] + c * np.arange(e, dtype=np.int64)[None, :]).ravel()
    lines //= cache_line
    seen = np.zeros(int(lines.max()) + 1, dtype=bool)   # distinct lines, without sorting
    seen[lines] = True
    return int(np.bincount(np.flatnonzero(seen) % L1_SETS, minlength=1).max())


def codegen_split(loops, lanes: int, stmt_cost: float = 1.0) -> tuple:
    """(k, body, copies): ``loops[k]`` is the loop LLVM leaves innermost (-1: none),
    ``body`` the element operations of the straight-line code inside it and
    ``copies`` its statements (a vector statement counts once per register it fills).
    Unrolled loops and an innermost vectorized loop are straight-line code; LLVM's
    full unroll takes a serial loop while the copies, at ``stmt_cost`` instructions
    each, stay within its threshold (``FULL_UNROLL`` instructions)."""
    n = len(loops)
    k, body, copies = n - 1, 1, 1
    while k >= 0:
        lp = loops[k]
        if k == n - 1 and lp.kind == "vectorized":
            copies *= vector_instructions(min(lp.extent, MAX_VECTOR_LANES), lanes)
        elif lp.kind == "unrolled" or (lp.kind == "serial" and
                                       lp.extent * copies * stmt_cost <= FULL_UNROLL):
            copies *= lp.extent
        else:
            break
        body *= lp.extent
        k -= 1
    return k, body, copies


def codegen_features(accesses, loops, m, flops: float, used_cores: float,
                     memory_cycles: float, guarded: bool = False, counts=None) -> list:
    """The group's values (raw) for one store (``flops``: its total, ``counts``: the
    operations of its stored value by kind, in ``names.ARITH`` order)."""
    n = len(loops)
    if n == 0:
        return [0.0] * len(NAMES)
    hw = m.lanes
    counts = counts or [0] * 16
    fops = sum(counts[:7])
    k, body, copies = codegen_split(loops, hw, STMT_BASE + fops + len(accesses))
    store = accesses[0]
    level = k + 1
    distinct = [a.numel[level] if level < n else 1 for a in accesses]
    inner = loops[k] if k >= 0 else None
    last = loops[-1]
    regs = m.registers
    reads = [(a, d) for a, d in zip(accesses[1:], distinct[1:])
             if a.buffer.name != store.buffer.name]

    # vector code: the backend's (an innermost vectorized loop whose store moves), else
    # LLVM's loop vectorizer on the innermost loop (the store moves along it; a strided
    # store only with a small body)
    mode, lane_var, width = 0, None, 1.0
    if last.kind == "vectorized" and last.extent > 1 and _step(store, last.var) not in (0, None):
        lanes = min(last.extent, MAX_VECTOR_LANES)
        mode, lane_var = 2, last.var
        width = lanes / vector_instructions(lanes, hw)
    elif inner is not None and inner.extent >= 4:
        st = _step(store, inner.var)
        if st not in (0, None) and (st == 1 or body <= STRIDED_BODY) and \
                all(_step(a, inner.var) is not None for a, _ in reads):
            mode, lane_var = 1, inner.var
            width = float(min(LOOP_VF, hw, 1 << (inner.extent.bit_length() - 1)))

    def gathered(a):
        """Is ``a`` loaded lane by lane: a strided read in vector code, or a guarded
        one (a loop-vectorized load through a selected address)?"""
        if lane_var is None:
            return False
        st = _step(a, lane_var)
        return st not in (0, 1) or (mode == 1 and a.guarded and st != 0)

    def per_instr(a):
        """Elements one instruction of ``a`` covers: ``width`` for a contiguous vector
        load, 1 for a broadcast or a gather (a load slot per element)."""
        if lane_var is None or gathered(a):
            return 1.0
        return width if _step(a, lane_var) == 1 else 1.0

    # lines per L1 set of what each access touches during one run of the inner loop
    pressure = {}
    for a in accesses:
        p = set_pressure(a, loops, k, m.cache_line) if k >= 0 else 0
        pressure[a.buffer.name] = max(p, pressure.get(a.buffer.name, 0))

    def miss(a):
        """Cost factor of an access: the share of its reused lines that do not fit the
        ways of their L1 set comes from L2 instead."""
        p = pressure[a.buffer.name]
        return 1.0 + (CONFLICT_COST - 1.0) * max(0.0, 1.0 - L1_WAYS / p) if p else 1.0

    store_moves = inner is None or _step(store, inner.var) != 0
    acc = distinct[0] / (width if mode == 2 else 1.0)
    chain = body / max(1, distinct[0])

    # per iteration of the emitted inner loop (mode 1: per iteration of the scalar loop)
    arith = body / width
    loads = hoisted = 0.0
    for a, d in reads:
        if inner is not None and _step(a, inner.var) == 0:
            hoisted += d / per_instr(a) * miss(a)
        else:
            loads += d / per_instr(a) * miss(a)
    promoted = 0.0 if store_moves else (1.0 if acc <= regs - OPERAND_REGS else 0.5)
    live = acc if promoted else 0.0
    if hoisted + live > regs:   # too many to keep in registers: reloaded every iteration
        loads += hoisted / (width if mode == 1 else 1.0)
    tile = distinct[0] / per_instr(store) * miss(store)
    reads_store = store.access == acc_mod.READ_WRITE
    if promoted == 1.0:
        st_loads = st_stores = 0.0
    elif promoted == 0.5:   # spills: part of the tile goes through memory
        spill = (acc - (regs - OPERAND_REGS)) / acc
        st_loads, st_stores = tile * spill * reads_store, tile * spill
    else:
        st_loads, st_stores = tile * reads_store, tile
    loads += st_loads
    # dependence chains: an accumulator updated ``chain`` times per body; carried by
    # the inner loop when the store stays put, else iterations overlap as far as the
    # out-of-order window (about ROB_UOPS micro-ops) reaches
    step_latency = FMA_LATENCY + (STORE_FORWARD if promoted < 1.0 and not store_moves else 0.0)
    if store_moves:
        overlap = max(1.0, min(inner.extent if inner is not None else 1,
                               ROB_UOPS / max(1.0, UOPS_PER_COPY * copies)))
    else:
        overlap = 1.0
    latency = chain * step_latency / overlap
    overhead = LOOP_OVERHEAD
    if mode == 1:   # one vector iteration covers ``width`` iterations of the loop
        overhead, latency = overhead / width, latency / width
    cycles = max(arith / FMA_PORTS, loads / LOAD_PORTS, st_stores / STORE_PORTS, latency) \
        + overhead
    iters = 1
    for lp in loops[:k + 1]:
        iters *= lp.extent
    if guarded:   # an init under `if k == 0`: runs once per element it writes (unswitched)
        iters = max(1, store.numel[0] // max(1, distinct[0]))
    total = cycles * iters / used_cores
    return [float(mode), width, acc, promoted, chain, arith, loads, st_stores, cycles,
            float(iters), total, max(total, memory_cycles), flops / max(1.0, total),
            float(max(pressure.values()))]
