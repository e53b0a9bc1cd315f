"""Benchmark of the LLVM backend on a register-blocked fp32 gemm against numpy.

``--variant lowered`` (default) builds the expert loop nest of
../shared/LLVM-NOTES.md directly as a lowered PrimFunc (what a schedule produces):

    Bp[jo, k, c] = B[k, jo*NR + c]                       (B packed in panels; parallel jo)
    for io in range(M // (MR*MI)) (parallel):
      for ko in range(K // KB):
        for jo in range(N // NR):
          for im in range(MI):                           (MI tiles share one Bp panel in L1)
            Cl = local [MR, NR]
            Cl[ii, jj*16 + v] = 0 if ko == 0 else C[...]  (ii, jj unrolled, v vectorized)
            for k in range(KB):
              Cl[ii, jj*16 + v] += A[row, ko*KB + k] * Bp[jo, ko*KB + k, jj*16 + v]
            C[row, jo*NR + jj*16 + v] = Cl[ii, jj*16 + v]

``--variant schedule`` builds a similar kernel through the schedule API (B cached
per column panel, no k-blocking), from ops.gemm.

Run:  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 benchmarks/llvm_gemm.py
Options: --size N, --threads 1,2, --rounds R, --repeats R, --runtime gomp|pool,
--compile (compile time of gemm-512 candidates). Each measurement runs in its own
process (OpenBLAS and OpenMP threads spin after a call), ours and numpy interleaved.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from explorer.ir.expr import EQ, Add, Buffer, FloatImm, IntImm, Mul, Var  # noqa: E402
from explorer.ir.stmt import (Allocate, BufferStore, For, IfThenElse, PrimFunc,  # noqa: E402
                              seq)
from explorer.measure.config import RunConfig  # noqa: E402
from explorer.measure.timing import time_call  # noqa: E402


def _c(v):
    return IntImm(v)


def gemm_lowered(M: int, N: int, K: int, MR: int = 8, NR: int = 32, VL: int = 16,
                 KB: int | None = 256, MI: int = 8, pack: bool = True) -> PrimFunc:
    """The register-blocked gemm as a lowered PrimFunc (M % MR == N % NR == K % KB == 0).

    With a k-block ``KB`` < K the loop order is io (parallel), ko, jo, ii_o (MI
    micro-tiles of MR rows that share one KB x NR panel of packed B in L1); the
    accumulators start from C after the first k-block.
    """
    KB = KB or K
    assert M % (MR * MI) == 0 and N % NR == 0 and NR % VL == 0 and K % KB == 0
    A, B, C = Buffer("A", (M, K)), Buffer("B", (K, N)), Buffer("C", (M, N))
    io, jo, ko, k, ii, jj, v = (Var(n) for n in ("io", "jo", "ko", "k", "ii", "jj", "v"))
    im = Var("im")
    tile_row = Add(Mul(io, _c(MI)), im) if MI > 1 else io
    col = Add(Mul(jj, _c(VL)), v)
    row = Add(Mul(tile_row, _c(MR)), ii)
    ccol = Add(Mul(jo, _c(NR)), col)
    kk = Add(Mul(ko, _c(KB)), k) if KB < K else k
    Cl = Buffer("Cl", (MR, NR), scope="local")
    stmts = []
    if pack:
        Bp = Buffer("Bp", (N // NR, K, NR))
        pjo, pk, pc = Var("pjo"), Var("pk"), Var("pc")
        packst = BufferStore(Bp, B[pk, Add(Mul(pjo, _c(NR)), pc)], (pjo, pk, pc))
        stmts.append(For(pjo, N // NR, For(pk, K, For(pc, NR, packst, "vectorized")), "parallel"))
        bload = Bp[jo, kk, col]
    else:
        bload = B[kk, ccol]

    def tile(body):
        return For(ii, MR, For(jj, NR // VL, For(v, VL, body, "vectorized"), "unrolled"),
                   "unrolled")
    init = tile(BufferStore(Cl, FloatImm(0.0), (ii, col)))
    if KB < K:
        init = IfThenElse(EQ(ko, _c(0)), init, tile(BufferStore(Cl, C[row, ccol], (ii, col))))
    upd = tile(BufferStore(Cl, Add(Cl[ii, col], Mul(A[row, kk], bload)), (ii, col)))
    out = tile(BufferStore(C, Cl[ii, col], (row, ccol)))
    body = Allocate(Cl, seq([init, For(k, KB, upd), out]))
    if MI > 1:
        body = For(im, MI, body)
    body = For(jo, N // NR, body)
    if KB < K:
        body = For(ko, K // KB, body)
    stmts.append(For(io, M // (MR * MI), body, "parallel"))
    main = seq(stmts)
    if pack:
        main = Allocate(Bp, main)
    return PrimFunc("gemm", (A, B, C), main, (), (("lowered", True),))


def _median_time(fn, repeats: int, min_seconds: float = 0.05, threads: int = 1) -> tuple:
    """(median, min, max) seconds per call of ``fn`` over ``repeats`` repeats of at least
    ``min_seconds``, timed as the tuner times candidates (its team bound to the cores)."""
    times = time_call(fn, RunConfig(repeats=repeats, min_repeat_secs=min_seconds),
                      threads=threads)
    return statistics.median(times), min(times), max(times)


def schedule_gemm(n: int, mr: int = 8):
    """The gemm through the schedule API: rows split in two parallel halves, B cached
    per 32-column panel, an mr x 32 accumulator tile in registers."""
    from explorer import Schedule, ops
    sch = Schedule(ops.gemm(n, n, n))
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    ip, i2, ii = sch.split(i, [2, None, mr])
    jo, ji = sch.split(j, [None, 32])
    jj, v = sch.split(ji, [None, 16])
    sch.reorder(ip, jo, i2, k, ii, jj, v)
    sch.reverse_compute_at(sch.cache_write(c, 0, "local"), i2)
    sch.compute_at(sch.cache_read(c, 1, "global"), jo)
    sch.decompose_reduction(c, k)
    for loop, how in ((v, "vectorize"), (ii, "unroll"), (jj, "unroll"), (ip, "parallel")):
        getattr(sch, how)(loop)
    b_loops = sch.get_loops(sch.get_block("B_global"))
    sch.vectorize(sch.split(b_loops[-1], [None, 16])[1])
    c_loops = sch.get_loops(sch.get_block("C_local"))
    col, lane = sch.split(c_loops[-1], [None, 16])
    sch.vectorize(lane)
    sch.unroll(col)
    sch.unroll(c_loops[-2])
    return sch


def run_ours(n: int, threads: int, repeats: int, runtime: str | None, mr: int,
             variant: str = "lowered") -> dict:
    from explorer.backends.llvm import build_llvm
    from explorer.target import Target
    from explorer.lower import lower
    if variant == "schedule":
        sch = schedule_gemm(n, mr)
        f, lowered = sch.func, lower(sch)
    else:
        f = lowered = gemm_lowered(n, n, n, MR=mr, KB=min(256, n), MI=min(8, n // mr))
    m = n
    k = build_llvm(f, lowered, Target(f"llvm -num-cores={threads}"), runtime)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.zeros((m, n), np.float32)
    k(a, b, c)
    err = float(np.abs(c - a @ b).max())
    med, lo, hi = _median_time(lambda: k(a, b, c), repeats, threads=threads)
    return {"who": "ours", "threads": threads, "gflops": 2 * m * n * n / med / 1e9,
            "spread": [2 * m * n * n / hi / 1e9, 2 * m * n * n / lo / 1e9], "max_err": err,
            "compile_ms": k.compile_seconds * 1e3}


def run_numpy(n: int, threads: int, repeats: int) -> dict:
    a = np.random.rand(n, n).astype(np.float32)
    b = np.random.rand(n, n).astype(np.float32)
    med, lo, hi = _median_time(lambda: a @ b, repeats)
    return {"who": "numpy", "threads": threads, "gflops": 2 * n ** 3 / med / 1e9,
            "spread": [2 * n ** 3 / hi / 1e9, 2 * n ** 3 / lo / 1e9]}


def compile_times(n: int = 512, repeats: int = 9) -> tuple:
    """(wall ms, CPU ms) of IR generation + O3 + JIT for fresh gemm-n candidates."""
    from explorer.backends.llvm import Compiled, runtime
    from explorer.target import Target
    t = Target("llvm")
    runtime.prepare(runtime.default_runtime())
    wall, cpu = [], []
    for r in range(repeats):
        f = gemm_lowered(n, n, n).with_(name=f"gemm{r}")  # distinct: no cache hit
        c0 = time.process_time()
        wall.append(Compiled(f, t, runtime.default_runtime()).compile_seconds * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return wall, cpu


def _child(args, who: str, threads: int) -> dict:
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    env["OMP_NUM_THREADS"] = str(threads)
    cmd = [sys.executable, __file__, "--child", who, "--threads", str(threads), "--size",
           str(args.size), "--repeats", str(args.repeats), "--mr", str(args.mr)]
    if args.runtime:
        cmd += ["--runtime", args.runtime]
    cmd += ["--variant", args.variant]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--runtime", default=None)
    p.add_argument("--mr", type=int, default=8)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--variant", choices=("lowered", "schedule"), default="lowered")
    p.add_argument("--child", default=None)
    args = p.parse_args()
    if args.child:
        th = int(args.threads)
        res = (run_ours(args.size, th, args.repeats, args.runtime, args.mr, args.variant)
               if args.child == "ours" else run_numpy(args.size, th, args.repeats))
        print(json.dumps(res))
        return
    if args.compile:
        wall, cpu = compile_times()
        print(f"gemm-512 compile ms (IR generation + O3 + JIT): median "
              f"{statistics.median(wall):.1f} wall (min {min(wall):.1f}, max {max(wall):.1f}), "
              f"{statistics.median(cpu):.1f} CPU")
        return
    ths = [int(t) for t in args.threads.split(",")]
    rounds = []
    for _ in range(args.rounds):  # interleave ours and numpy, each in its own process
        rounds.append({(who, th): _child(args, who, th)["gflops"]
                       for th in ths for who in ("numpy", "ours")})
    print(f"gemm {args.size}^3 fp32, GFLOP/s; {args.rounds} rounds, each a median of "
          f"{args.repeats} repeats; ratios are taken within a round (same load window)")
    for th in ths:
        ours = [r[("ours", th)] for r in rounds]
        ref = [r[("numpy", th)] for r in rounds]
        ratio = [o / n for o, n in zip(ours, ref)]
        print(f"  {th} thread(s): ours {statistics.median(ours):6.1f} (best {max(ours):6.1f})  "
              f"numpy {statistics.median(ref):6.1f} (best {max(ref):6.1f})  "
              f"ratio median {statistics.median(ratio):.2f} "
              f"[{', '.join(f'{x:.2f}' for x in sorted(ratio))}]")
    if 1 in ths and 2 in ths:
        scale = [r[("ours", 2)] / r[("ours", 1)] for r in rounds]
        print(f"  ours 2 threads / 1 thread: median {statistics.median(scale):.2f}x "
              f"[{', '.join(f'{x:.2f}' for x in sorted(scale))}]")


if __name__ == "__main__":
    main()
