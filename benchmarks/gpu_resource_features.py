"""How far the estimated gpu_resources features are from ptxas's (the figures the
cost model trains on): registers per thread and occupancy of sampled CUDA candidates.

    python benchmarks/gpu_resource_features.py --arch sm_80 --samples 8 --seed 0
    python benchmarks/gpu_resource_features.py --ops gemm,conv2d --shapes tuning

For each operator, ``--samples`` schedules drawn from the design space (``--seed``)
are compiled with nvcc (ptxas ``-v``), and the features' estimate (``extract(sch,
target)``: local array words + ``REGISTER_OVERHEAD``) is set beside ptxas's report
(``extract(sch, target, resources=...)``): ratio of registers, occupancy both ways,
spills. The tuner trains on ptxas's figures and scores unmeasured candidates from the
estimate (``explorer.features.gpu_resources`` says why), so this ratio is the shift
between what the model learned and what it is shown. Needs nvcc; no GPU.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from explorer import Target, ops
from explorer.backends.cuda.codegen import generate
from explorer.backends.cuda.nvcc import compile_cubin, find_nvcc
from explorer.errors import ExplorerError
from explorer.features import extract, feature_groups
from explorer.features.gpu_resources import NAMES
from explorer.lower import lower
from explorer.space import DesignSpace

SHAPES = {"small": {"gemm": (64, 64, 64), "conv2d": dict(N=1, C=16, H=14, W=14, K=32, R=3,
                                                         S=3, padding=1)},
          "tuning": {"gemm": (512, 512, 512), "conv2d": dict(N=1, C=64, H=56, W=56, K=64,
                                                             R=3, S=3, padding=1)}}


def _values(rows) -> dict:
    group = rows[0, feature_groups()["gpu_resources"]].astype(np.float64)
    return dict(zip(NAMES, np.exp2(group) - 1.0))


def measure(wl, target, samples: int, seed: int) -> list:
    """[(estimated registers, ptxas registers, estimated occupancy, ptxas occupancy,
    ptxas spill bytes)] of the first kernel of each sampled candidate."""
    out = []
    for sch in DesignSpace(wl, target).sample(samples, seed=seed):
        func = lower(sch)
        module = generate(func, target)
        try:
            compiled = compile_cubin(module.source, target.arch)
        except ExplorerError as e:
            print(f"  compile failed: {str(e).splitlines()[0]}", file=sys.stderr)
            continue
        est = _values(extract(func, target))
        got = _values(extract(func, target, resources=compiled.resources))
        out.append((est["gpu_registers"], got["gpu_registers"], est["gpu_occupancy"],
                    got["gpu_occupancy"], got["gpu_spill_store_bytes"]
                    + got["gpu_spill_load_bytes"]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_80")
    ap.add_argument("--ops", default="gemm,conv2d")
    ap.add_argument("--shapes", choices=sorted(SHAPES), default="small")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if find_nvcc() is None:
        print("nvcc not found: ptxas's figures are needed; install the CUDA toolkit")
        return 2
    target = Target(f"cuda -arch={args.arch}")
    for name in args.ops.split(","):
        shape = SHAPES[args.shapes][name]
        wl = ops.get(name, **shape) if isinstance(shape, dict) else ops.get(name, *shape)
        t0 = time.perf_counter()
        rows = measure(wl, target, args.samples, args.seed)
        if not rows:
            print(f"{name}: nothing compiled")
            continue
        ratio = [p / e for e, p, *_ in rows]
        occ = [(eo, po) for _, _, eo, po, _ in rows]
        print(f"{name} {shape} on {args.arch}: {len(rows)} candidates, "
              f"{time.perf_counter() - t0:.0f} s")
        for e, p, eo, po, sp in rows:
            print(f"  registers estimate {e:5.0f}  ptxas {p:5.0f}   occupancy estimate "
                  f"{eo:.3f}  ptxas {po:.3f}   spills {sp:.0f} B")
        print(f"  ptxas / estimate registers: median {statistics.median(ratio):.2f}, "
              f"min {min(ratio):.2f}, max {max(ratio):.2f}; occupancy equal on "
              f"{sum(abs(a - b) < 1e-6 for a, b in occ)} of {len(occ)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
