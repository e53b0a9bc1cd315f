"""Benchmark of the LLVM backend on a hand-built, register-blocked fp32 gemm.

The lowered loop nest is the expert shape of ../shared/LLVM-NOTES.md, built
directly as a lowered PrimFunc (what the schedule will produce):

    Bp[jo, k, c] = B[k, jo*NR + c]                         (B packed in panels; parallel jo)
    for io in range(M // MR) (parallel):
      for jo in range(N // NR):
        Cl = local [MR, NR]
        Cl[ii, jj*16 + v] = 0                               (ii, jj unrolled, v vectorized)
        for k in range(K):
          Cl[ii, jj*16 + v] += A[io*MR + ii, k] * Bp[jo, k, jj*16 + v]
        C[io*MR + ii, jo*NR + jj*16 + v] = Cl[ii, jj*16 + v]

Run:  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python3 benchmarks/llvm_gemm.py
Options: --size N, --threads 1,2, --repeats R, --runtime gomp|pool, --compile (gemm-512
compile-time median), --numpy-only / --ours-only (for timing in separate processes).
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


def _median_time(fn, repeats: int, min_seconds: float = 0.05) -> tuple:
    fn()
    times = []
    for _ in range(repeats):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            dt = time.perf_counter() - t0
            if dt >= min_seconds:
                break
        times.append(dt / n)
    return statistics.median(times), min(times), max(times)


def run_ours(n: int, threads: int, repeats: int, runtime: str | None, mr: int) -> dict:
    from explorer.backends.llvm import build_llvm
    from explorer.backends.target import Target
    f = gemm_lowered(n, n, n, MR=mr, KB=min(256, n), MI=min(8, n // mr))
    m = n
    k = build_llvm(f, f, Target(f"llvm -num-cores={threads}"), runtime)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.zeros((m, n), np.float32)
    k(a, b, c)
    err = float(np.abs(c - a @ b).max())
    med, lo, hi = _median_time(lambda: k(a, b, c), repeats)
    return {"who": "ours", "threads": threads, "gflops": 2 * m * n * n / med / 1e9,
            "spread": [2 * m * n * n / hi / 1e9, 2 * m * n * n / lo / 1e9], "max_err": err,
            "compile_ms": k.compile_seconds * 1e3}


def run_numpy(n: int, threads: int, repeats: int) -> dict:
    a = np.random.rand(n, n).astype(np.float32)
    b = np.random.rand(n, n).astype(np.float32)
    med, lo, hi = _median_time(lambda: a @ b, repeats)
    return {"who": "numpy", "threads": threads, "gflops": 2 * n ** 3 / med / 1e9,
            "spread": [2 * n ** 3 / hi / 1e9, 2 * n ** 3 / lo / 1e9]}


def compile_times(n: int = 512, repeats: int = 9) -> list:
    from explorer.backends.llvm import Compiled, runtime
    from explorer.backends.target import Target
    t = Target("llvm")
    out = []
    for r in range(repeats):
        f = gemm_lowered(n, n, n).with_(name=f"gemm{r}")  # distinct: no cache hit
        out.append(Compiled(f, t, runtime.default_runtime()).compile_seconds * 1e3)
    return out


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
    p.add_argument("--child", default=None)
    args = p.parse_args()
    if args.child:
        th = int(args.threads)
        res = (run_ours(args.size, th, args.repeats, args.runtime, args.mr)
               if args.child == "ours" else run_numpy(args.size, th, args.repeats))
        print(json.dumps(res))
        return
    if args.compile:
        ms = compile_times()
        print(f"gemm-512 compile ms: median {statistics.median(ms):.1f} "
              f"(min {min(ms):.1f}, max {max(ms):.1f})")
        return
    results: dict = {}
    for _ in range(args.rounds):  # interleave ours and numpy, each in its own process
        for th in (int(t) for t in args.threads.split(",")):
            for who in ("numpy", "ours"):
                results.setdefault((who, th), []).append(_child(args, who, th)["gflops"])
    print(f"gemm {args.size}^3 fp32, GFLOP/s medians over {args.rounds} rounds "
          f"(each a median of {args.repeats} repeats)")
    for th in (int(t) for t in args.threads.split(",")):
        ours, ref = (statistics.median(results[(w, th)]) for w in ("ours", "numpy"))
        print(f"  {th} thread(s): ours {ours:7.1f}  numpy {ref:7.1f}  ratio {ours / ref:5.2f}   "
              f"(ours {sorted(round(x) for x in results[('ours', th)])}, "
              f"numpy {sorted(round(x) for x in results[('numpy', th)])})")
    ths = [int(t) for t in args.threads.split(",")]
    if 1 in ths and 2 in ths:
        s = statistics.median(results[("ours", 2)]) / statistics.median(results[("ours", 1)])
        print(f"  ours 2 threads / 1 thread: {s:.2f}x")


if __name__ == "__main__":
    main()
