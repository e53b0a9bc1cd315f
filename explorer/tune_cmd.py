"""Tune an operator (or a suite of them) on the CPU or GPU and keep the best schedules.

    explorer tune --op gemm --shape 1024,1024,1024 --trials 64 --seed 0 --db tuning_db
    explorer tune --suite resnet18 --trials 512 --db tuning_db --json result.json

Every measured candidate is appended to the database directory (``--db``), so
an interrupted run resumes where it stopped when started again with the same
arguments; ``explorer show --db DIR`` prints the best schedule per workload.
"""
from __future__ import annotations

import json
import sys
import time

from .errors import ExplorerError
from .events import (CandidateMeasured, NewBest, Retiming, RoundStarted, TuningFinished,
                     TuningStarted)


def add_arguments(p) -> None:
    what = p.add_mutually_exclusive_group()
    what.add_argument("--op", default=None, help="operator name (default gemm); see "
                      "explorer.ops.registry")
    what.add_argument("--suite", default=None, help="a suite in data/suites (resnet18, "
                      "bert_base, mlp) or a suite JSON file")
    p.add_argument("--shape", default=None, help="comma-separated shape parameters in the "
                   "operator's order, e.g. 1024,1024,1024 for gemm M,N,K (default 1024^3 gemm)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="other operator parameters, e.g. --param stride=2 --param padding=1")
    p.add_argument("--target", default="llvm", help="llvm (default), cuda, or a target string")
    p.add_argument("--trials", type=int, default=64, help="measured candidates in all "
                   "(default 64; the database's records for the workload count)")
    p.add_argument("--strategy", default="evolutionary",
                   choices=["evolutionary", "replay", "annealing"])
    p.add_argument("--cost-model", default="xgb", choices=["xgb", "random"])
    p.add_argument("--batch-size", type=int, default=32, help="candidates per round")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--retime", type=int, default=4, metavar="N",
                   help="at the end, time the N fastest candidates again in interleaved "
                        "rounds and pick the best from all their runs (default 4; 0: off)")
    p.add_argument("--db", default="tuning_db", help="database directory (default tuning_db)")
    p.add_argument("--json", default=None, metavar="FILE", help="write the result as JSON")
    p.add_argument("--no-numpy", action="store_true", help="skip timing numpy for comparison")
    p.add_argument("--quiet", action="store_true", help="no progress output")


def _parse_value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def workload_from_args(args):
    from . import ops
    from .cli import UsageError
    name = args.op or "gemm"
    if name not in ops.registry:
        raise UsageError(f"unknown operator {name!r}; known: {', '.join(ops.registry)}")
    shape = []
    if args.shape is not None:
        try:
            shape = [int(x) for x in args.shape.split(",") if x.strip()]
        except ValueError:
            raise UsageError(f"--shape {args.shape!r} must be comma-separated integers, "
                             "e.g. 1024,1024,1024") from None
    elif name == "gemm":
        shape = [1024, 1024, 1024]
    kw = {}
    for item in args.param:
        if "=" not in item:
            raise UsageError(f"--param {item!r} must look like NAME=VALUE")
        k, v = item.split("=", 1)
        kw[k] = _parse_value(v)
    try:
        return ops.get(name, *shape, **kw)
    except ExplorerError as e:
        raise UsageError(str(e)) from None


class Progress:
    """One status line per workload on a terminal (rewritten in place), else a line a round."""

    def __init__(self, stream=sys.stderr, quiet: bool = False):
        self.stream = stream
        self.quiet = quiet
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.total = 0
        self.done = 0
        self.best = None
        self.start = time.perf_counter()
        self.failed = 0

    def __call__(self, ev) -> None:
        if self.quiet:
            return
        if isinstance(ev, TuningStarted):
            self.total, self.done, self.best, self.failed = ev.trials, 0, None, 0
            self.start = time.perf_counter()
            self._line(f"tuning {ev.workload} on {ev.target} ({ev.strategy}, seed {ev.seed})",
                       final=True)
        elif isinstance(ev, CandidateMeasured):
            self.done = ev.trial + 1
            self.failed += ev.error is not None and not ev.error.startswith("cutoff")
            if self.tty:
                self._line(self._status())
        elif isinstance(ev, NewBest):
            self.best = ev.gflops
        elif isinstance(ev, RoundStarted) and not self.tty and ev.round > 0:
            self._line(self._status(), final=True)
        elif isinstance(ev, Retiming):
            self._line(self._status(), final=True)
            self._line(f"timing the {ev.candidates} fastest again ({ev.rounds} interleaved "
                       "rounds) to pick the best", final=True)
        elif isinstance(ev, TuningFinished):
            self._line(self._status(), final=True)

    def _status(self) -> str:
        width = 24
        frac = min(1.0, self.done / max(1, self.total))
        bar = "#" * int(frac * width) + "." * (width - int(frac * width))
        el = time.perf_counter() - self.start
        eta = el / frac - el if frac > 0 else 0.0
        best = f"{self.best:.1f} GFLOP/s" if self.best else "-"
        return (f"[{bar}] {self.done}/{self.total} trials, best {best}, {self.failed} failed, "
                f"{el:.0f}s elapsed, ~{eta:.0f}s left")

    def _line(self, text: str, final: bool = False) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def _numpy_gflops(wl):
    try:
        from .measure.baselines import measure_baseline
    except ImportError:
        return None
    try:
        secs = measure_baseline("numpy", wl)
    except ExplorerError:
        return None
    return wl.flops / secs / 1e9 if secs else None


def _result_json(res, wl, numpy_gflops) -> dict:
    out = res.as_json()
    out["numpy_gflops"] = numpy_gflops
    out["flops"] = wl.flops
    return out


def main(args) -> int:
    from .cli import UsageError
    from .database import Database
    if args.trials < 1:
        raise UsageError("--trials must be at least 1")
    if args.batch_size < 1:
        raise UsageError("--batch-size must be at least 1")
    if args.retime < 0:
        raise UsageError("--retime must be 0 (off) or more candidates")
    from .backends import check_buildable
    check_buildable(args.target)   # before the database exists: a refused run leaves none
    wl = None if args.suite else workload_from_args(args)
    db = Database(args.db)
    progress = Progress(quiet=args.quiet)
    if args.suite:
        return _tune_suite(args, db, progress)
    from .tune import Tuner
    tuner = Tuner(wl, args.target, trials=args.trials, strategy=args.strategy,
                  cost_model=args.cost_model, database=db, seed=args.seed,
                  batch_size=args.batch_size, retime_top=args.retime)
    tuner.events.subscribe(progress)
    res = tuner.run()
    npg = None if args.no_numpy else _numpy_gflops(wl)
    out = _result_json(res, wl, npg)
    _print_summary([out])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if res.best_seconds is not None else 1


def _tune_suite(args, db, progress) -> int:
    from .cli import UsageError
    from .task_scheduler import TaskScheduler, load_suite
    try:
        tasks = load_suite(args.suite)
    except ExplorerError as e:
        raise UsageError(str(e)) from None
    ts = TaskScheduler(tasks, args.target, trials=args.trials, seed=args.seed, database=db,
                       batch_size=min(args.batch_size, 16), strategy=args.strategy,
                       cost_model=args.cost_model, retime_top=args.retime)
    for t in ts.tuners:
        t.events.subscribe(progress)
    results = ts.run()
    outs = []
    for task, res in zip(tasks, results):
        out = _result_json(res, task.workload,
                           None if args.no_numpy else _numpy_gflops(task.workload))
        out["task"], out["weight"] = task.name, task.weight
        outs.append(out)
    _print_summary(outs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"suite": args.suite, "trials": args.trials, "tasks": outs}, f, indent=1)
    return 0


def _print_summary(outs: list) -> None:
    print(f"{'workload':60s} {'trials':>6s} {'failed':>6s} {'best ms':>9s} {'GFLOP/s':>8s} "
          f"{'numpy':>7s} {'ratio':>6s}")
    for o in outs:
        bs, bg, ng = o["best_seconds"], o["best_gflops"], o["numpy_gflops"]
        print(f"{o['workload']['key'][:60]:60s} {o['trials']:6d} {o['failed']:6d} "
              f"{bs * 1e3 if bs else float('nan'):9.3f} {bg or float('nan'):8.1f} "
              f"{ng or float('nan'):7.1f} {bg / ng if bg and ng else float('nan'):6.2f}")
