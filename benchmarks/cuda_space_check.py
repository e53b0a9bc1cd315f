"""The CUDA backend's check over the design spaces (issue 15, "Show"):

    python benchmarks/cuda_space_check.py --samples 100
    python benchmarks/cuda_space_check.py --samples 5 --ops gemm,softmax --seed 1 --jobs 2

For every operator of the library (``explorer.ops.registry``, at the shapes of
``tests/test_cuda_codegen.py``): sample ``--samples`` schedules from its cuda design
space and, for each, generate the CUDA C, compile it with nvcc for ``sm_80`` and
``sm_90`` (``explorer.backends.cuda.nvcc``; its cache makes a rerun cheap), run the same
source through the host emulator and compare with numpy, and run the interpreter with
its race check and compare with numpy. Prints one row per operator (how many passed
each step) and the first failures in full; exits 1 if any failed. ``--jobs`` compiles
that many sources at once (nvcc and g++ are separate processes).
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
import traceback
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from explorer import build, ops
from explorer.space import DesignSpace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_cuda_codegen import SHAPES  # noqa: E402 - the tests' shapes, one list of them

STEPS = ("codegen", "sm_80", "sm_90", "emulated", "interp")
_EMULATOR = threading.Lock()    # one emulated build and run at a time in this process


def check_one(sch, wl) -> dict:
    """step -> None (passed) or the error text, for one schedule."""
    from explorer.backends.cuda.nvcc import compile_cubin
    out = dict.fromkeys(STEPS, "not run")
    try:
        kernel = build(sch, "cuda")
        out["codegen"] = None
    except Exception:       # noqa: BLE001 - every failure is a row of the report
        out["codegen"] = traceback.format_exc(limit=3)
        return out
    for arch in ("sm_80", "sm_90"):
        out[arch] = _attempt(lambda: compile_cubin(kernel.source, arch))
    with _EMULATOR:
        out["emulated"] = _attempt(lambda: _run(build(sch, "cuda", emulate=True), wl))
    out["interp"] = _attempt(lambda: _run(build(sch, "interp"), wl))
    if any(out[s] for s in STEPS):
        out["source"] = kernel.source
    return out


def _run(kernel, wl) -> None:
    args = wl.make_args(0)
    kernel(*args)
    wl.check(args)


def _attempt(fn):
    try:
        fn()
        return None
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def check_op(name: str, samples: int, seed: int, jobs: int) -> tuple:
    wl = ops.get(name, **SHAPES[name])
    space = DesignSpace(wl, "cuda", max_tries=max(2000, 64 * samples))
    schedules = space.sample(samples, seed=seed)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda s: check_one(s, wl), schedules))
    return wl, results


def _reasons(failures: list) -> Counter:
    """step: first line of the error -> how many samples failed so."""
    out = Counter()
    for _, _, r in failures:
        for s in STEPS:
            if r[s]:
                out[f"{s}: {r[s].strip().splitlines()[-1][:160]}"] += 1
                break
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ops", default=",".join(SHAPES))
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--show", type=int, default=3, help="failures printed in full")
    args = p.parse_args(argv)
    names = [n for n in args.ops.split(",") if n]
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        p.error(f"unknown operator(s) {', '.join(unknown)}: choose from {', '.join(SHAPES)}")
    header = f"{'operator':18}{'samples':>8}" + "".join(f"{s:>10}" for s in STEPS) + \
        f"{'seconds':>9}"
    print(header)
    failures = []
    total = dict.fromkeys(STEPS, 0)
    count = 0
    for name in names:
        t0 = time.time()
        wl, results = check_op(name, args.samples, args.seed, args.jobs)
        passed = {s: sum(r[s] is None for r in results) for s in STEPS}
        for s in STEPS:
            total[s] += passed[s]
        count += len(results)
        print(f"{name:18}{len(results):>8}" + "".join(f"{passed[s]:>10}" for s in STEPS)
              + f"{time.time() - t0:>9.0f}", flush=True)
        mine = [(name, i, r) for i, r in enumerate(results) if any(r[s] for s in STEPS)]
        for reason, n in _reasons(mine).most_common(3):
            print(f"    {n} x {reason}", flush=True)
        failures += mine
    print(f"{'all':18}{count:>8}" + "".join(f"{total[s]:>10}" for s in STEPS))
    for name, i, r in failures[:args.show]:
        print(f"\n--- {name} sample {i} (seed {args.seed})")
        for s in STEPS:
            if r[s]:
                print(f"{s}: {r[s][:2000]}")
        print(r.get("source", ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
