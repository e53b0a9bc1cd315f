"""Tune each (name, workload) into a database unless it already holds enough records.

Shared by the benchmarks that tune a few cases and then time them against the
libraries (``tuned_vs_libraries.py``, ``prime_shapes.py``, ``memory_bound.py``):
a case with ``trials`` records in ``db`` (or as many as its design space has) is
not tuned again, so a long benchmark can be resumed or re-timed alone.
"""
from __future__ import annotations

import json
import os
import time

from explorer.database import Database
from explorer.space import DesignSpace
from explorer.tune import Tuner


def tune_missing(cases, target, trials: int, db: str, seed: int = 0) -> dict:
    """``cases``: (name, Workload) pairs. Returns name -> {trials, failed, best_gflops,
    seconds} for the cases tuned now; prints one line per case."""
    tuning = {}
    for name, wl in cases:
        done = len(Database(db).records(wl, target)) if os.path.isdir(db) else 0
        if done >= min(trials, DesignSpace(wl, target).size()):   # a small space runs out
            print(f"{name}: {done} records in {db}, not tuned again", flush=True)
            continue
        t0 = time.perf_counter()
        res = Tuner(wl, target, trials=trials, database=db, seed=seed).run()
        tuning[name] = {"trials": res.trials, "failed": res.failed,
                        "best_gflops": res.best_gflops, "seconds": time.perf_counter() - t0}
        print(f"{name}: tuned {res.trials} trials in {tuning[name]['seconds']:.0f} s, best "
              f"{res.best_gflops:.1f} GFLOP/s, {res.failed} failed", flush=True)
    return tuning


def add_arguments(p, trials: int, timing: str, timing_default: int) -> None:
    """The options these benchmarks share: --trials, --seed, --threads, ``--<timing>``
    (interleaved timing rounds: --rounds or --repeats), --db, --json."""
    p.add_argument("--trials", type=int, default=trials)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument(f"--{timing}", type=int, default=timing_default)
    p.add_argument("--db", required=True)
    p.add_argument("--json", default=None)


def parse_target(p, args, timing: str):
    """Check the shared options (``p.error`` says what to fix); (threads, llvm Target)."""
    from explorer.target import Target
    if args.trials < 1 or getattr(args, timing) < 1 or (args.threads is not None
                                                         and args.threads < 1):
        p.error(f"--trials, --{timing} and --threads must be at least 1")
    threads = args.threads or len(os.sched_getaffinity(0))
    return threads, Target(f"llvm -num-cores={threads}")


def write_json(path, report: dict) -> None:
    """Write a benchmark's report to ``path`` (when given) and say so."""
    if path:
        with open(path, "w") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {path}")
