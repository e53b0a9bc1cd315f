"""The target group: what MetaSchedule's 164 values leave implicit about this
CPU backend and the target's caches, cores and vector width.

- cache traffic: bytes each cache level fetches, from the lines a store touches
  per loop level and the target's L1/L2/L3 sizes;
- vector and parallel use relative to the target's lanes and cores;
- the loop the code generator actually emits innermost, and the straight-line
  body inside it (unrolled loops, an innermost vector loop): whether the vector
  code is real, whether the accesses are dense enough for vector loads or for
  LLVM's own vectorizers, whether the store accumulates in place (a register
  tile), how big the body is;
- roofline-style estimates in cycles built from the above.

``target_features`` also returns the codegen group's values
(:mod:`explorer.features.codegen`), which need the same accesses and machine.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import access as acc_mod
from .codegen import codegen_features

CACHE_LINE_BYTES = 64


@dataclass(frozen=True)
class Machine:
    """What the target-relative group needs to know about the device."""
    is_gpu: bool = False
    cores: int = 1
    lanes: int = 8
    registers: int = 16       # vector registers (Target.vector_registers)
    caches: tuple = (32 * 1024, 1024 * 1024, 32 * 1024 * 1024)
    cache_line: int = CACHE_LINE_BYTES


def cache_traffic(accesses, loops, m: Machine) -> list:
    """Bytes each cache level fetches, estimated: the lines touched under the
    outermost loop whose lines fit in the cache, times the trips of the loops around it."""
    n, line = len(loops), m.cache_line
    foot = [line * sum(a.line_numel[i] for a in accesses) for i in range(n)]
    foot.append(line * len(accesses))
    outer = [1] * (n + 1)
    for i, lp in enumerate(loops):
        outer[i + 1] = outer[i] * lp.extent
    out = []
    for size in m.caches:
        i = next((i for i in range(n + 1) if foot[i] <= size), n)
        out.append(foot[i] * outer[i])
    return out


LLVM_FULL_UNROLL = 32  # statement copies up to which LLVM's O3 fully unrolls a small serial loop


def _in_body(loop, innermost: bool, body: int) -> bool:
    """Does ``loop`` become straight-line code: unrolled by the schedule, the innermost
    vector loop, or a serial loop small enough for LLVM to unroll fully?"""
    if loop.kind == "unrolled" or (innermost and loop.kind == "vectorized"):
        return True
    return loop.kind == "serial" and loop.extent * body <= LLVM_FULL_UNROLL


def inner_loop_features(accesses, loops, guarded: bool) -> list:
    """The loop the code generator emits innermost ("inner"): the innermost loop
    outside the straight-line "body" (the trailing unrolled loops, an innermost
    vectorized loop, small serial loops LLVM unrolls). In order: its extent;
    whether the innermost loop is vectorized with the store moving along it
    (real vector code: otherwise the backend falls back to a scalar loop) and the
    fraction of accesses contiguous or invariant along the lanes (the others
    gather); the fraction of accesses dense along the inner loop (invariant, or
    stepping by no more than the contiguous run the body touches: what vector
    loads and LLVM's vectorizers need); whether the store stays put along it (an
    accumulation); the statement copies in the body; the elements the body
    stores and loads (a register tile and what feeds it); whether an ``if``
    guards the store."""
    n = len(loops)
    k, body = n - 1, 1
    while k >= 0 and _in_body(loops[k], k == n - 1, body):
        body *= loops[k].extent
        k -= 1
    tile = [a.numel[k + 1] if k + 1 < n else 1 for a in accesses]
    loads = sum(t for a, t in zip(accesses, tile) if a.access != acc_mod.WRITE)
    vec = bool(n) and loops[-1].kind == "vectorized" and \
        acc_mod.flat_strides(accesses[0], loops[-1].var)[0] not in (0, None)
    lanes = _dense_fraction(accesses, loops[-1].var, None) if vec else 0.0
    if k < 0:
        return [0, float(vec), lanes, 1.0, 0, body, tile[0], loads, float(guarded)]
    lp = loops[k]
    store_step = acc_mod.flat_strides(accesses[0], lp.var)[0]
    return [lp.extent, float(vec), lanes, _dense_fraction(accesses, lp.var, k + 1),
            float(store_step == 0), body, tile[0], loads, float(guarded)]


def _dense_fraction(accesses, var: str, level: int | None) -> float:
    """Fraction of the accesses that step along ``var`` by at most the contiguous run
    they touch inside loop ``level`` (None, or no loop there: a run of one element)."""
    dense = []
    for a in accesses:
        run = a.runs[level] if level is not None and level < len(a.runs) else 1
        dense += [st is not None and abs(st) <= run for st in acc_mod.flat_strides(a, var)]
    return sum(dense) / len(dense)


def estimates(row_inner: list, vec_len: int, flops: float, traffic: list, m: Machine,
              used_cores: float) -> list:
    """A roofline-style guess in cycles: flops over the SIMD lanes and cores in use
    (vector code, or LLVM's loop vectorizer on dense inner loops), and cache
    traffic over per-level bandwidths (64, 32, 16 bytes per cycle per core)."""
    inner_len, vec_code, _, dense, store_inv = row_inner[:5]
    if vec_code:
        simd = min(vec_len, m.lanes)
    elif dense == 1.0 and not store_inv and inner_len >= 4:
        simd = min(inner_len, m.lanes)
    else:
        simd = 1
    compute = flops / simd / used_cores
    memory = (traffic[0] / 64 + traffic[1] / 32 + traffic[2] / 16) / used_cores
    return [compute, memory, max(compute, memory)]


def target_features(accesses, loops, m: Machine, flops: float, guarded: bool,
                    counts=None) -> list:
    """The 18 values of the group and the codegen group's, raw, for one store
    (``flops``: its total; ``counts``: the operations of the stored value by kind)."""
    vec = [lp for lp in loops if lp.kind == "vectorized"]
    par = math.prod(lp.extent for lp in loops if lp.kind == "parallel")
    balance = par / (-(-par // m.cores) * m.cores)
    traffic = cache_traffic(accesses, loops, m)
    inner = inner_loop_features(accesses, loops, guarded)
    est = estimates(inner, vec[-1].extent if vec else 1, flops, traffic, m,
                    max(1.0, balance * m.cores))
    cg = codegen_features(accesses, loops, m, flops, max(1.0, balance * m.cores), est[1],
                          guarded, counts)
    return (traffic + [vec[-1].extent / m.lanes if vec else 0.0, balance, par / m.cores]
            + inner + est + cg)
