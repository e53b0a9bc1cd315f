"""Tune each case, then time the tuned kernels against numpy and PyTorch in one window.

Issue 5's targets: ResNet-18 C2, C6, C9, C12 tuned >= 0.7x PyTorch's CPU conv2d
at 256 trials each, gemm 1024^3 >= 100% of numpy at 256 trials::

    python3 benchmarks/tuned_vs_libraries.py --cases conv-C2 conv-C6 conv-C9 conv-C12 \\
        --trials 256 --db tuned_db --json tuned.json
    python3 benchmarks/tuned_vs_libraries.py --cases gemm-1024 --trials 256 --db tuned_db

Each case is tuned with ``explorer.tune.Tuner`` (evolutionary search + XGBoost,
seeded with the expert schedule, seed 0) into ``--db``; a case that already has
``--trials`` records there is not tuned again. Then ``explorer bench --db`` times
the expert and the tuned kernels with numpy and PyTorch, interleaved, medians of
``--repeats`` rounds: the ratios are taken within one run (the machine is shared).
Unset ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` first if the environment sets
them (they pick a slower OpenBLAS kernel here).
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from explorer.cli import bench  # noqa: E402
from explorer.database import Database  # noqa: E402
from tune_cases import add_arguments, parse_target, tune_missing, write_json  # noqa: E402
from explorer.errors import ExplorerError  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", default=["conv-C2", "conv-C6", "conv-C9", "conv-C12"])
    add_arguments(p, trials=256, timing="repeats", timing_default=7)
    args = p.parse_args()
    threads, target = parse_target(p, args, "repeats")
    try:
        cases = bench.resolve_cases(args.cases)
    except ExplorerError as e:
        p.error(str(e))
    tuning = tune_missing([(c.name, c.workload()) for c in cases], target, args.trials,
                          args.db, args.seed)
    b = bench.Bench(target, threads, args.repeats, db=Database(args.db))
    try:
        report = b.run(cases)
    finally:
        b.close()
    report["tuning"] = tuning
    print(bench.format_table(report))
    write_json(args.json, report)


if __name__ == "__main__":
    main()
