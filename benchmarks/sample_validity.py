"""Sample validity: the share of random draws from a design space that pass postprocessing.

    python benchmarks/sample_validity.py --target cuda --draws 200 --seed 0
    python benchmarks/sample_validity.py --target cuda --ops gemm,conv2d --draws 100
    python benchmarks/sample_validity.py --target cuda --shapes ci --json out.json

Per operator of the library (``explorer.ops.registry``; ``--ops`` picks some, by default
gemm, conv2d, batch_matmul and dense_bias_relu; ``--shapes`` as in
``mutation_validity.py``): ``--draws`` draws as ``DesignSpace.sample_candidates`` makes
them ("after": on a GPU target the tilings' decisions are drawn within the target's
limits, ``GPUTilingLimits.sample``) and as they were made before that ("before": the
sketch replayed with every decision left to its sampling instruction). A draw is valid
when it passes every postprocessor (``VerifyGPUCode`` on ``cuda``). Failures are counted
by reason (numbers replaced by ``N``). The same ``--seed`` gives the same draws.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import random
import sys
import time
from collections import Counter

from explorer import Target
from explorer.errors import ExplorerError
from explorer.schedule import Schedule
from explorer.space import DesignSpace
from explorer.space.replay import replay, without_decisions

_HERE = pathlib.Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("mutation_validity", _HERE / "mutation_validity.py")
mv = sys.modules.setdefault("mutation_validity", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(mv)

DEFAULT_OPS = ("gemm", "conv2d", "batch_matmul", "dense_bias_relu")


def draws_before(space: DesignSpace, n: int, seed: int) -> list:
    """``n`` draws as ``DesignSpace`` made them before sampling within the GPU's limits
    (the same random stream: sketch, then the schedule's seed): ``(schedule, None)`` or
    ``(None, reason)``."""
    rng = random.Random(seed)
    sketches = space.sketches
    out = []
    for _ in range(n):
        sketch = sketches[rng.randrange(len(sketches))]
        sch = Schedule(space.workload, seed=rng.randrange(2 ** 31))
        try:
            replay(without_decisions(sketch.trace), sch)
        except ExplorerError as e:
            out.append((None, f"replaying the sketch failed: {e}"))
            continue
        reason = space.postprocess(sch)
        out.append((None, reason) if reason else (sch, None))
    return out


def measure(wl, target, n: int, seed: int) -> dict:
    """{"before": {...}, "after": {...}} with valid, draws, share, seconds and reasons."""
    space = DesignSpace(wl, target)
    out = {}
    for mode, draw in (("before", lambda: draws_before(space, n, seed)),
                       ("after", lambda: space.sample_candidates(n, seed=seed))):
        t = time.perf_counter()
        got = draw()
        reasons = Counter(mv.reason_kind(r) for s, r in got if s is None)
        valid = sum(s is not None for s, _ in got)
        out[mode] = {"valid": valid, "draws": n, "share": valid / n,
                     "seconds": round(time.perf_counter() - t, 2),
                     "reasons": dict(reasons.most_common())}
    return out


def report(results: dict, target) -> str:
    lines = [f"sample validity on {target} (valid draws of N, postprocessors passed)",
             f"{'operator':<20}{'before':>14}{'after':>14}{'s before':>10}{'s after':>10}"]
    for name, r in results.items():
        b, a = r["before"], r["after"]
        lines.append(f"{name:<20}{b['valid']:>6}/{b['draws']:<4}{b['share']:>4.0%}"
                     f"{a['valid']:>6}/{a['draws']:<4}{a['share']:>4.0%}"
                     f"{b['seconds']:>10.1f}{a['seconds']:>10.1f}")
        for mode in ("before", "after"):
            for why, c in list(r[mode]["reasons"].items())[:2]:
                lines.append(f"    {mode}: {c} x {why}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default="cuda")
    p.add_argument("--draws", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ops", default=",".join(DEFAULT_OPS), help="comma-separated, or 'all'")
    p.add_argument("--shapes", choices=("tuning", "small", "ci"), default="tuning")
    p.add_argument("--json", help="write the results here")
    a = p.parse_args(argv)
    target = Target(a.target)
    names = None if a.ops == "all" else a.ops.split(",")
    results = {}
    for name, wl in mv.workloads(a.shapes, names).items():
        results[name] = measure(wl, target, a.draws, a.seed)
        print(report({name: results[name]}, target).split("\n", 2)[2], flush=True)
    print(report(results, target))
    print("CPU:", Target("llvm").describe())
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps({"target": str(target), "draws": a.draws,
                                                    "seed": a.seed, "shapes": a.shapes,
                                                    "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
