"""The demo job: schedule a matmul by hand, run it, print the loop nest and the check.

    explorer demo [--size 256] [--target llvm]
"""
from __future__ import annotations

import numpy as np

from .. import ops
from ..backends import build
from ..errors import ExplorerError, UsageError
from ..measure.config import RunConfig
from ..measure.timing import fast_call, time_call
from ..schedule import Schedule
from .common import check_fits


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


def _time(call, repeats: int = 5, threads: int = 1) -> float:
    """Median seconds of ``call`` in this process, timed as the tuner times candidates."""
    return float(np.median(time_call(call, RunConfig(repeats=repeats), threads=threads)))


def add_arguments(p) -> None:
    p.add_argument("--size", type=int, default=256, help="M = N = K (default 256)")
    p.add_argument("--target", default="llvm", help="llvm (default) or interp")


def _checked(a) -> tuple:
    """(workload, target) of the arguments; UsageError naming what to fix."""
    from ..target import as_target, check_cpu
    if a.size < 1:
        raise UsageError(f"--size {a.size} must be at least 1, e.g. --size 256")
    try:
        target = as_target(a.target)
        check_cpu(target)
        wl = ops.get("gemm", a.size, a.size, a.size)
    except ExplorerError as e:
        raise UsageError(str(e)) from None
    check_fits(wl, "use a smaller --size")
    return wl, target


def _numpy_secs(wl) -> float:
    """numpy's time in a process of its own, without the OPENBLAS_CORETYPE/L2_SIZE
    overrides (as every baseline the CLI prints); in this process if that fails."""
    from ..measure.baselines import measure_baseline
    try:
        return measure_baseline("numpy", wl)
    except ExplorerError:
        args = wl.make_args(0)
        return _time(lambda: wl.reference(*args[:2]))


def main(args) -> int:
    """``explorer demo`` with parsed ``args``; errors raise ExplorerError (the CLI prints
    them on one line)."""
    wl, target = _checked(args)
    sch = tiled_gemm(wl)
    print(sch.script())
    print("\n# trace\n" + "\n".join(sch.trace.as_python()))
    kernel = build(sch, target)
    kargs = wl.make_args(0)
    secs = _time(fast_call(kernel, kargs), repeats=1 if target.kind == "interp" else 5,
                 threads=getattr(target, "num_cores", None) or 1)
    err = wl.check(kargs)
    ref = _numpy_secs(wl)
    print(f"\n{wl.key} on {args.target}: {secs * 1e3:.3f} ms, {wl.flops / secs / 1e9:.2f} "
          f"GFLOP/s; numpy {wl.flops / ref / 1e9:.2f} GFLOP/s; result check passed (max abs "
          f"error {err:.2e})")
    return 0
