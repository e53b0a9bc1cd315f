"""What each of session 8's memory-bound changes is worth alone, in one process.

    python3 benchmarks/memory_bound_parts.py --rounds 11

Pairs of kernels that differ in one thing, timed interleaved (each round times every
kernel ``--calls`` times in a rotated order; the median of the per-round medians), in
CPU time of the calling thread (``time.thread_time``: time the thread was not running
is not counted, which a loaded machine needs), one thread, next to our copy kernel of
the same array (``memory_bound.copy_schedule``):

- transpose M x 1024: B's columns in vectors of the target's lanes under a loop of as
  many of B's rows, that loop unrolled (the LLVM backend's register tile transpose:
  row loads and shuffles) or not (a gather per vector);
- softmax M x 1024 (the default space's first sample, seed 0): float32 exp inline
  (``vecmath.exp_f32``) or through libmvec (the host's vector library, used before);
- layer norm M x 1024: the space's row reductions with 1 or up to 4 vector
  accumulators (``MemoryBoundTiling(max_accumulators=...)``, first sample, seed 0).

Measured 2026-12-02 on a 2-core Zen 5 (znver5, AVX-512, 16 lanes), load average 8.7-9.2
(other agents' jobs), two runs of the default command:

- register tile 2.4-3.8x the gather at 1024x1024 (38-46% of copy), 2.4-3.2x at
  4096x1024 (38-44% of copy);
- inline exp 0.72-0.93x libmvec on this softmax sample (libmvec 1.08-1.38x faster at
  1024 rows, 1.02-1.08x at 4096: the sample unrolls each row's exp pass 64 times, 1500
  instructions of straight-line exp a row); on the tuned softmax of
  ``memory_bound.py``'s database (the exp pass a loop) inline was 1.13-1.36x (same
  method, three runs): the tuner picks the unroll; a target that is not the host (no
  libmvec) gains most;
- 4 accumulators 1.31-1.66x one on layer norm at 1024 rows, 0.90-1.04x at 4096 (there
  memory-bound: 59-67% of copy).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from explorer import Schedule, Target, build, ops  # noqa: E402
from explorer.backends.llvm import clear_cache  # noqa: E402
from explorer.backends.llvm import exprgen  # noqa: E402
from explorer.space import DesignSpace  # noqa: E402
from explorer.space.defaults import default_rules  # noqa: E402
from explorer.space.rules import MemoryBoundTiling  # noqa: E402
from memory_bound import copy_schedule, copy_workload  # noqa: E402


def transpose_tiled(wl, lanes: int, unroll: bool) -> Schedule:
    """B's column loop in vectors of ``lanes`` under a loop of ``lanes`` of B's rows."""
    sch = Schedule(wl)
    b = sch.get_block(wl.func.params[-1].name)
    r, c = sch.get_loops(b)
    co, cv = sch.split(c, [None, lanes])
    ro, ru = sch.split(r, [None, lanes])
    sch.reorder(ro, co, ru, cv)
    if unroll:
        sch.unroll(ru)
    sch.vectorize(cv)
    sch.parallel(ro)
    return sch


def checked(wl, sch, target, args):
    kernel = build(sch, target)
    kernel(*args)
    wl.check(args)
    return kernel, args


def interleaved(kernels: dict, rounds: int, calls: int) -> dict:
    """{name: median seconds} over ``rounds`` rotated rounds of ``calls`` calls."""
    res = {k: [] for k in kernels}
    names = list(kernels)
    for r in range(rounds):
        for key in names[r % len(names):] + names[:r % len(names)]:
            k, a = kernels[key]
            ts = []
            for _ in range(calls):
                t0 = time.thread_time()
                k(*a)
                ts.append(time.thread_time() - t0)
            res[key].append(np.median(ts))
    return {k: float(np.median(v)) for k, v in res.items()}


def with_copy(kernels: dict, M: int, target) -> dict:
    cwl = copy_workload(M, 1024)
    kernels["copy"] = checked(cwl, copy_schedule(cwl, target), target, cwl.make_args(seed=0))
    return kernels


def transpose_pair(M: int, target) -> dict:
    wl = ops.transpose(M, 1024)
    args = wl.make_args(seed=0)
    lanes = target.vector_lanes
    return with_copy({"gather": checked(wl, transpose_tiled(wl, lanes, False), target, args),
                      "register": checked(wl, transpose_tiled(wl, lanes, True), target, args)},
                     M, target)


def softmax_pair(M: int, target) -> dict:
    wl = ops.softmax(M, 1024)
    args = wl.make_args(seed=0)
    sch = DesignSpace(wl, target).sample(1, seed=0)[0]
    inline = exprgen.inline_exp
    out = {}
    try:
        for name, fn in (("inline exp", inline), ("libmvec", lambda op, x: False)):
            clear_cache()
            exprgen.inline_exp = fn
            out[name] = checked(wl, sch, target, args)
    finally:
        exprgen.inline_exp = inline
        clear_cache()
    return with_copy(out, M, target)


def layer_norm_pair(M: int, target) -> dict:
    wl = ops.layer_norm(M, 1024)
    args = wl.make_args(seed=0)
    out = {}
    for acc in (1, 4):
        rules = [MemoryBoundTiling(max_accumulators=acc) if isinstance(r, MemoryBoundTiling)
                 else r for r in default_rules(target)]
        space = DesignSpace(wl, target, rules=rules)
        out[f"{acc} accumulator(s)"] = checked(wl, space.sample(1, seed=0)[0], target, args)
    return with_copy(out, M, target)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=11)
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--rows", type=int, nargs="+", default=[1024, 4096])
    args = p.parse_args()
    if min(args.rounds, args.calls, *args.rows) < 1:
        p.error("--rounds, --calls and --rows must be at least 1")
    target = Target("llvm -num-cores=1")
    print(f"{target.describe()}; load {os.getloadavg()[0]:.1f}")
    for label, pair in (("transpose", transpose_pair), ("softmax", softmax_pair),
                        ("layer_norm", layer_norm_pair)):
        for M in args.rows:
            m = interleaved(pair(M, target), args.rounds, args.calls)
            first, second = [k for k in m if k != "copy"]
            print(f"{label} {M}x1024: " + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in m.items())
                  + f"; {second} x{m[first] / m[second]:.2f} vs {first}; "
                  f"{100 * m['copy'] / m[first]:.0f}% / {100 * m['copy'] / m[second]:.0f}% of copy")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
