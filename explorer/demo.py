"""The demo job: schedule a matmul by hand, run it, print the loop nest and the check.

    python -m explorer.demo [--size 256] [--target llvm]
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from . import ops
from .backends import build
from .errors import ExplorerError
from .schedule import Schedule


def tiled_gemm(wl, tile_i: int = 8, tile_j: int = 16):
    """A readable tiled schedule: i and j tiled, k in the middle, j-inner vectorized,
    the outer tile loop parallel, the accumulator in a local cache."""
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    io, ii = sch.split(i, [None, tile_i])
    jo, ji = sch.split(j, [None, tile_j])
    sch.reorder(io, jo, k, ii, ji)
    cache = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(cache, jo)
    sch.decompose_reduction(c, k)
    sch.vectorize(ji)
    sch.parallel(io)
    return sch


def _time(fn, repeats: int = 5) -> float:
    fn()
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return float(np.median(out))


def add_arguments(p) -> None:
    p.add_argument("--size", type=int, default=256, help="M = N = K (default 256)")
    p.add_argument("--target", default="llvm", help="llvm (default) or interp")


def main(args=None) -> int:
    if args is None or isinstance(args, list):
        p = argparse.ArgumentParser(prog="explorer demo", description=__doc__.splitlines()[0])
        add_arguments(p)
        args = p.parse_args(args)
    a = args
    try:
        wl = ops.get("gemm", a.size, a.size, a.size)
        sch = tiled_gemm(wl)
        print(sch.script())
        print("\n# trace\n" + "\n".join(sch.trace.as_python()))
        kernel = build(sch, a.target)
        args = wl.make_args(0)
        secs = _time(lambda: kernel(*args), repeats=1 if a.target == "interp" else 5)
        err = wl.check(args)
        ref = _time(lambda: wl.reference(*args[:2]))
    except ExplorerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"\n{wl.key} on {a.target}: {secs * 1e3:.3f} ms, {wl.flops / secs / 1e9:.2f} GFLOP/s; "
          f"numpy {wl.flops / ref / 1e9:.2f} GFLOP/s; result check passed (max abs error "
          f"{err:.2e})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
