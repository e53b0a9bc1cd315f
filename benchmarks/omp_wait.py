"""How our kernels' OpenMP threads wait between parallel regions, against PyTorch and numpy.

The LLVM backend's runtime chooses how idle team threads wait unless the user did
(``explorer/backends/llvm/runtime.py``, ``GOMP_ENV``): ``OMP_WAIT_POLICY=passive``
with ``GOMP_SPINCOUNT=30000``, a short spin, then sleep. Until session 8 it was passive
with no spin: every parallel region woke the team. PyTorch and numpy run with libgomp's
/ OpenBLAS's own policy (the baseline workers do not inherit ours). This benchmark
times the expert schedule of each case in two worker pools of its own, one with the
runtime as it is and one with ``GOMP_SPINCOUNT=--spin`` (300000 is libgomp's own
default), interleaved with PyTorch and numpy. Every call is one sample
(``RunConfig(number=1, min_repeat_secs=0)``); min, 10th percentile and median are
printed, because on a shared machine the median mostly measures the load::

    python3 benchmarks/omp_wait.py --cases C3 C5 C11 C12 C4 C7 attn_scores attn_context

Cases are task names of the shipped suites (``resnet18``, ``bert_base``, ...).
PyTorch is optional: without it its rows say it is absent.

Measured 2026-12-02 (znver5, AVX-512, 2 threads), when the runtime did not spin:
at load 8-9 (min of 280 calls, ours over PyTorch's) passive / GOMP_SPINCOUNT=300000:
C3 1.16x / 2.25x, C11 0.80x / 1.55x, C12 0.52x / 1.03x, attn_scores 1.13x / 2.14x. Quiet
(load 0.4-0.7), medians per call, passive / 30000 spins: C3 0.230 / 0.130 ms, C11
0.128 / 0.081, C6 0.728 / 0.651, attn_scores 0.145 / 0.075; 300000 spins were no faster
than 30000, so the runtime takes the shorter spin (less waste when a core is taken).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from explorer import ops  # noqa: E402
from explorer.measure.baselines import baseline_pool, baseline_request  # noqa: E402
from explorer.measure.config import RunConfig  # noqa: E402
from explorer.measure.measurer import Measurer  # noqa: E402
from explorer.measure.result import MeasureInput  # noqa: E402
from explorer.space.expert import expert_schedule  # noqa: E402
from explorer.suites import suite_names, suite_tasks  # noqa: E402
from explorer.target import Target  # noqa: E402

SPIN = "300000"      # libgomp's default spin count when OMP_WAIT_POLICY is unset


def resolve(names: list) -> list:
    """(name, workload) per suite task name; an unknown name says which exist."""
    tasks = {t["name"]: t for s in suite_names() for t in suite_tasks(s) if "name" in t}
    out = []
    for n in names:
        if n not in tasks:
            raise SystemExit(f"unknown case {n!r}: use task names of the shipped suites, "
                             f"e.g. {', '.join(sorted(tasks)[:12])}")
        out.append((n, ops.get(tasks[n]["op"], **tasks[n]["params"])))
    return out


def measurer(target, cfg, spin: str | None) -> Measurer:
    """A measurer whose worker processes start with ``GOMP_SPINCOUNT=spin`` (None: as is)."""
    old = os.environ.get("GOMP_SPINCOUNT")
    if spin is not None:
        os.environ["GOMP_SPINCOUNT"] = spin
    else:
        os.environ.pop("GOMP_SPINCOUNT", None)
    try:
        return Measurer(target, cfg)
    finally:
        os.environ.pop("GOMP_SPINCOUNT", None)
        if old is not None:
            os.environ["GOMP_SPINCOUNT"] = old


def stats(samples: list) -> dict:
    s = sorted(samples)
    return {"min": s[0], "p10": s[len(s) // 10], "median": statistics.median(s), "n": len(s)}


def run_case(wl, target, threads: int, cfg, ours: dict, pools: dict, rounds: int) -> dict:
    sch = expert_schedule(wl, target)
    inp = MeasureInput.from_schedule(sch, target)
    builds = {k: m.builder.build([inp])[0] for k, m in ours.items()}
    samples: dict = {k: [] for k in list(ours) + list(pools)}
    errors: dict = {}
    names = list(samples)
    for r in range(rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:
            if k in errors:
                continue
            res = (ours[k].runner.run_one(inp, builds[k]) if k in ours
                   else baseline_request(pools[k], k, wl, cfg, threads))
            if res.ok:
                samples[k] += list(res.run_secs)
            else:
                errors[k] = res.error
    rows = {k: stats(v) for k, v in samples.items() if v}
    rows.update({k: {"error": e} for k, e in errors.items()})
    return rows


def format_case(name: str, wl, rows: dict) -> str:
    lines = [f"{name} ({wl.key}), load {os.getloadavg()[0]:.1f}"]
    lib = next((rows[k] for k in ("torch", "numpy") if "min" in rows.get(k, {})), None)
    for k, r in rows.items():
        if "error" in r:
            lines.append(f"  {k:30s} failed: {r['error']}")
            continue
        vs = f"  vs {'torch' if lib is rows.get('torch') else 'numpy'} (min) " \
             f"{lib['min'] / r['min']:.2f}x" if lib else ""
        lines.append(f"  {k:30s} min {r['min'] * 1e3:8.3f}  p10 {r['p10'] * 1e3:8.3f}  "
                     f"median {r['median'] * 1e3:8.3f} ms  {wl.flops / r['min'] / 1e9:6.1f} "
                     f"GFLOP/s (min){vs}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", default=["C3", "C11", "C12", "attn_scores"])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=40, help="timed calls per round")
    p.add_argument("--spin", default=SPIN, help="GOMP_SPINCOUNT of the second pool")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    if args.rounds < 1 or args.calls < 1 or (args.threads is not None and args.threads < 1):
        p.error("--rounds, --calls and --threads must be at least 1")
    if not args.spin.isdigit():
        p.error(f"--spin must be a count of spins (an integer), not {args.spin!r}")
    cases = resolve(args.cases)
    threads = args.threads or len(os.sched_getaffinity(0))
    target = Target(f"llvm -num-cores={threads}")
    cfg = RunConfig(repeats=args.calls, number=1, min_repeat_secs=0.0, warmup=3,
                    cutoff_factor=None, run_timeout=120.0, build_timeout=120.0)
    ours = {"expert (runtime as is)": measurer(target, cfg, None),
            f"expert GOMP_SPINCOUNT={args.spin}": measurer(target, cfg, args.spin)}
    pools = {"numpy": baseline_pool("numpy", threads)}
    if importlib.util.find_spec("torch") is not None:
        pools["torch"] = baseline_pool("torch", threads)
    else:
        print("PyTorch is not installed (pip install torch==2.13.0): no torch rows")
    report = {"target": str(target), "threads": threads, "spin": args.spin, "cases": {}}
    try:
        for name, wl in cases:
            rows = run_case(wl, target, threads, cfg, ours, pools, args.rounds)
            report["cases"][name] = {"key": wl.key, "rows": rows}
            print(format_case(name, wl, rows), flush=True)
    finally:
        for m in ours.values():
            m.close()
        for pool in pools.values():
            pool.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
