"""Shapes that divide by nothing convenient, tuned, against numpy and PyTorch (issue 17).

gemm 997x661x211 (three primes) and a 3x3 conv with a 13x13 output (256 -> 256
channels, padding 1) are each tuned for ``--trials`` trials (seed 0, evolutionary
search + XGBoost seeded with the expert schedule) into ``--db``, then the expert and
the tuned kernels are timed with numpy and PyTorch in interleaved rounds (medians,
``explorer bench``'s machinery). Target: tuned >= 80% of the libraries, the tails in
masked vector code (the LLVM backend's guard versioning + masked loads and stores;
the IR of the tuned kernel is inspected and its tail form printed)::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        python3 benchmarks/prime_shapes.py --trials 64 --db /tmp/prime_db

A case with ``--trials`` records in ``--db`` is not tuned again. PyTorch is optional:
without it the torch column says so.
"""
from __future__ import annotations

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from explorer import Schedule, Trace, build, ops  # noqa: E402
from explorer.cli import bench  # noqa: E402
from explorer.database import Database  # noqa: E402
from tune_cases import add_arguments, parse_target, tune_missing, write_json  # noqa: E402

CASES = {"gemm-997x661x211": lambda: ops.gemm(997, 661, 211),
         "conv-13x13": lambda: ops.conv2d(N=1, C=256, H=13, W=13, K=256, R=3, S=3, padding=1)}
GOAL = 0.8


def tail_form(wl, db: Database, target) -> str:
    """How the best tuned kernel handles its tails, read from its LLVM IR."""
    top = db.best(wl, target)
    if not top:
        return "no record"
    kernel = build(Trace.from_json(top[0].trace).apply_to(Schedule(wl)), target)
    text = kernel.llvm_ir
    masked = len(re.findall(r'call [^\n]*@"llvm\.masked\.(?:load|store)\.', text))
    parts = [f"{masked} masked loads/stores" if masked else "no masked access",
             "versioned (unguarded interior tiles)" if "_unguarded" in text else "no versioning"]
    scalar = [n for n, why in kernel.compiled.vectorized_loops.items() if why != "vector"]
    parts.append(f"vectorized loops run as scalar loops: {scalar}" if scalar else
                 f"{len(kernel.compiled.vectorized_loops)} vectorized loops, all vector code")
    return ", ".join(parts)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    add_arguments(p, trials=64, timing="rounds", timing_default=9)
    args = p.parse_args()
    threads, target = parse_target(p, args, "rounds")
    print(f"CPU: {target.describe()}; load average at start {os.getloadavg()}", flush=True)
    cases = [bench.BenchCase.of(name, CASES[name]()) for name in args.cases]
    tuning = tune_missing([(c.name, c.workload()) for c in cases], target, args.trials,
                          args.db, args.seed)
    db = Database(args.db)
    b = bench.Bench(target, threads, args.rounds, db=db)
    try:
        report = b.header()
        report["baselines"] = b.baseline_info()
        report["cases"] = []
        for case in cases:
            wl = case.workload()
            rows = [c for c in b.contenders(wl) if c.impl != "naive"]   # naive: seconds a run
            live = [c for c in rows if c.measure is not None]
            b.log(f"bench: {case.name}, {args.rounds} interleaved rounds")
            for r in range(args.rounds):
                for c in live[r % len(live):] + live[:r % len(live)]:
                    c.step()
            out = [c.row(wl.flops) for c in rows]
            bench._add_ratios(out)
            report["cases"].append({"case": case.name, "key": wl.key, "flops": wl.flops,
                                    "rows": out, "tails": tail_form(wl, db, target)})
        report["machine"]["loadavg_end"] = list(os.getloadavg())
        report["notes"] = b.notes
    finally:
        b.close()
    report["tuning"] = tuning
    print(bench.format_table(report))
    print(f"load average at end {tuple(report['machine']['loadavg_end'])}")
    for case in report["cases"]:
        tuned = next((r for r in case["rows"] if r["impl"] == "tuned"), None)
        ratios = {lib: tuned and tuned.get(f"ratio_{lib}") for lib in ("numpy", "torch")}
        verdict = ", ".join(f"{r:.2f}x {lib} ({'met' if r >= GOAL else 'MISSED'} "
                            f">= {GOAL:.0%})" for lib, r in ratios.items() if r)
        print(f"{case['case']}: tuned {verdict or 'not measured'}; tails: {case['tails']}")
    write_json(args.json, report)


if __name__ == "__main__":
    main()
