"""Lesson 02's final matmul schedule against numpy, timed fairly.

The schedule is the lesson's own: the code cells of
``notebooks/02_loop_transformations.ipynb`` tagged ``setup`` and ``schedule`` are run
here in order (full size, not the tests' short mode), with the lesson's ``steps``
object replaced by one that only keeps the schedule each step shows. The final
schedule, the tuner's expert schedule of the same gemm and numpy then each run in a
process of their own, in interleaved rounds (``explorer bench``'s machinery: every
output checked against numpy first, numpy without the OPENBLAS_CORETYPE /
OPENBLAS_L2_SIZE overrides), and the table reports medians with min and max.

Run:  python3 benchmarks/lesson02.py [--rounds 7] [--threads 1,2] [--json FILE]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer import Target  # noqa: E402
from explorer.cli.bench import (SETTLE_SECS, Bench, BenchCase, Contender,  # noqa: E402
                                format_table)
from explorer.measure.baselines import baseline_request  # noqa: E402
from explorer.space.expert import expert_schedule  # noqa: E402

NOTEBOOK = ROOT / "notebooks" / "02_loop_transformations.ipynb"


class _Keep:
    """Stands in for the lesson's ``Steps``: keeps each shown schedule, measures nothing."""

    def __init__(self):
        self.shown = []

    def show(self, name, sch, *args, **kwargs):
        self.shown.append((name, sch.copy()))


def lesson_schedule(notebook: Path = NOTEBOOK):
    """(workload, final schedule, step names) as the lesson builds them at full size."""
    import nbformat
    nb = nbformat.read(notebook, as_version=4)
    ns: dict = {}
    old = os.environ.pop("EXPLORER_SHORT", None)
    try:
        for cell in nb.cells:
            tags = cell.metadata.get("tags", [])
            if cell.cell_type != "code" or not {"setup", "schedule"} & set(tags):
                continue
            with contextlib.redirect_stdout(io.StringIO()):     # the lesson's own prints
                exec(compile(cell.source, f"{notebook.name}:{cell.get('id', '?')}", "exec"), ns)
            if "setup" in tags:
                ns["steps"] = _Keep()
    finally:
        if old is not None:
            os.environ["EXPLORER_SHORT"] = old
    shown = ns["steps"].shown
    if not shown:
        raise SystemExit(f"{notebook} has no cells tagged 'schedule' that show a step")
    return ns["wl"], shown[-1][1], [name for name, _ in shown]


class LessonBench(Bench):
    """explorer bench's interleaved rounds over: the lesson's schedule, the expert one,
    numpy."""

    def __init__(self, lesson_sch, **kw):
        super().__init__(torch=False, **kw)
        self.lesson_sch = lesson_sch

    def contenders(self, wl) -> list:
        pool = self.pools["numpy"]
        return [self._ours("lesson 02", wl, self.lesson_sch, ""),
                self._ours("expert", wl, expert_schedule(wl, self.target), ""),
                Contender("numpy", lambda: baseline_request(pool, "numpy", wl, self.cfg,
                                                            self.threads), settle=SETTLE_SECS)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", default=None,
                   help="comma-separated thread counts (default: this machine's cores)")
    p.add_argument("--json", default=None, help="write the reports here")
    args = p.parse_args(argv)
    host = Target("llvm")
    threads = [int(t) for t in args.threads.split(",")] if args.threads else [host.num_cores]
    wl, sch, names = lesson_schedule()
    print(f"\nlesson 02: {wl.key}, steps {', '.join(names)}")
    print(f"CPU: {host.describe()}; load average at start {os.getloadavg()[0]:.2f}")
    reports = []
    for n in threads:
        bench = LessonBench(sch, target="llvm", threads=n, rounds=args.rounds)
        try:
            report = bench.header()
            report["baselines"] = bench.baseline_info()
            report["cases"] = [bench.run_case(BenchCase.of("gemm-" + "x".join(str(v) for k, v in wl.params if k in "MNK"), wl))]
            report["notes"] = bench.notes
        finally:
            bench.close()
        report["machine"]["loadavg_end"] = list(os.getloadavg())
        print(format_table(report))
        rows = {r["impl"]: r for r in report["cases"][0]["rows"]}
        ours, theirs = rows["lesson 02"], rows["numpy"]
        if ours["ratio_numpy"] is not None:
            best = theirs["min_secs"] / ours["min_secs"]
            print(f"=> lesson 02 final schedule on {n} thread(s): {100 * ours['ratio_numpy']:.0f}%"
                  f" of numpy by medians of {args.rounds} interleaved rounds, {100 * best:.0f}% "
                  "by best runs")
        load = report["machine"]["loadavg_end"][0]
        if load > 0.5 * host.num_cores:
            print(f"   the machine was busy (load average {load:.1f} on {host.num_cores} cores): "
                  "OpenBLAS's threads lose the cores for whole runs; compare best runs too")
        print()
        reports.append(report)
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
