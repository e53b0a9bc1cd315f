"""How fast the measurer gets through a tuning batch: 64 gemm candidates by default.

    python benchmarks/measure_throughput.py [--size 512] [--count 64] [--target llvm]

Builds every candidate (in parallel on all workers), then runs, checks and
times them one by one with the tuning defaults (``RunConfig()``, cutoff on),
and prints the time of each stage, candidates per minute, and how many were
cut off or failed. The candidates are tilings of gemm (row block x column
block, vectorized columns, parallel or not), a mix of good and poor ones as a
tuner's batch would be.
"""
from __future__ import annotations

import argparse
import collections
import itertools
import statistics
import time

from explorer import Schedule, ops
from explorer.measure import Measurer, RunConfig


def tiling(wl, rows: int, cols: int, parallel: bool) -> Schedule:
    sch = Schedule(wl)
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, rows])
    jo, ji = sch.split(j, [None, cols])
    sch.reorder(io, jo, k, ii, ji)
    sch.vectorize(ji)
    if parallel:
        sch.parallel(io)
    return sch


def candidates(wl, count: int) -> list:
    grid = itertools.product((1, 2, 4, 8), (16, 32, 64, 128), (True, False))
    out = [tiling(wl, r, c, p) for r, c, p in grid]
    return list(itertools.islice(itertools.cycle(out), count))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--count", type=int, default=64)
    ap.add_argument("--target", default="llvm")
    args = ap.parse_args()
    wl = ops.gemm(args.size, args.size, args.size)
    t0 = time.perf_counter()
    with Measurer(args.target, RunConfig()) as m:
        inputs = [m.input(s) for s in candidates(wl, args.count)]
        t1 = time.perf_counter()
        builds = m.builder.build(inputs)
        t2 = time.perf_counter()
        results = m.runner.run(inputs, builds)
        t3 = time.perf_counter()
    kinds = collections.Counter(r.error_kind or "ok" for r in results)
    ok = [r for r in results if r.ok]
    best = max(ok, key=lambda r: r.gflops) if ok else None
    print(f"{args.count} candidates of {wl.key} on {m.target}")
    print(f"  schedules + inputs {t1 - t0:6.2f} s")
    print(f"  build (parallel)   {t2 - t1:6.2f} s  median build "
          f"{statistics.median(b.build_secs for b in builds if b.ok) * 1e3:.0f} ms")
    print(f"  run + check + time {t3 - t2:6.2f} s  median per candidate "
          f"{statistics.median(r.wall_secs for r in results) * 1e3:.0f} ms")
    print(f"  total              {t3 - t0:6.2f} s  = {args.count / (t3 - t0) * 60:.0f} "
          "candidates per minute")
    print(f"  outcomes: {dict(kinds)}")
    if best:
        print(f"  best {best.gflops:.1f} GFLOP/s ({best.median_secs * 1e3:.3f} ms)")


if __name__ == "__main__":
    main()
