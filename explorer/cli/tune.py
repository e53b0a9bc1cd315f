"""Tune an operator (or a suite of them) on the CPU or GPU and keep the best schedules.

    explorer tune --op gemm --shape 1024,1024,1024 --trials 64 --seed 0 --db tuning_db
    explorer tune --suite resnet18 --trials-per-task 64 --db tuning_db --json result.json
    explorer tune --op gemm --trials 256 --runner dask://10.0.0.5:8786
    explorer tune --op gemm --shape 64,64,64 --target cuda --emulate --trials 8

Every measured candidate is appended to the database directory (``--db``), so
an interrupted run resumes where it stopped when started again with the same
arguments (the records held count toward ``--trials``, a suite's toward its whole
budget; a run that finds them all there says so and measures nothing new); ``explorer show --db DIR`` prints the
best schedule per workload.

A suite (``--suite``) is tuned by the task scheduler under one budget: every task
gets one round first, then the rounds go where the network's weighted time falls
fastest. The run ends with a table (``explorer.cli.suite_bench``): per task the
tuned time against numpy and PyTorch (when installed), timed in the same minutes,
and the network total weighted by how often each layer occurs. A task left without
a correct candidate is named, with the reason, and the exit status is 1.

``--target cuda`` measures on the GPU through pycuda and refuses up front where
pycuda or the driver is missing; ``--emulate`` runs the same path without a GPU
(CUDA C compiled with nvcc where present and checked against the device's
limits, run on the host emulator, checked against numpy): it finds which
candidates are correct, records them marked ``emulated``, and measures no speed.
"""
from __future__ import annotations

import json
import sys
import time

from ..errors import ExplorerError, UsageError
from ..events import (CandidateMeasured, NewBest, Retiming, RoundStarted, TuningFinished,
                      TuningStarted, WarmStart)
from ..suites import suite_names
from .common import check_fits, check_writable_dir, check_writable_file, one_line
from .workload_text import workload_from_text


def add_arguments(p) -> None:
    what = p.add_mutually_exclusive_group()
    what.add_argument("--op", default=None, help="operator name (default gemm); see "
                      "explorer.ops.registry")
    what.add_argument("--suite", default=None, help="a suite shipped with explorer "
                      f"({', '.join(suite_names())}) or a suite JSON file; see "
                      "--trials-per-task")
    p.add_argument("--shape", default=None, help="comma-separated shape parameters in the "
                   "operator's order, e.g. 1024,1024,1024 for gemm M,N,K (default 1024^3 gemm)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="other operator parameters, e.g. --param stride=2 --param padding=1")
    p.add_argument("--target", default="llvm", help="llvm (default), cuda, or a target string")
    p.add_argument("--emulate", action="store_true", help="cuda only: run the generated CUDA "
                   "C on the host emulator (no GPU needed): checks correctness, measures no "
                   "speed; records are marked emulated")
    p.add_argument("--runner", default="local", help="where candidates are measured: local "
                   "(worker processes here, the default) or dask://HOST:PORT (Dask workers "
                   "started with explorer worker; needs the dask extra)")
    p.add_argument("--trials", type=int, default=None, help="measured candidates in all "
                   "(default 64; the database's records for the workload count); with --suite "
                   "the total budget over all tasks, at least one round per task (rounds of "
                   "--batch-size, at most 16 or a quarter of the trials per task)")
    p.add_argument("--trials-per-task", type=int, default=None, metavar="T",
                   help="--suite only: a budget of T x (number of tasks) trials, the same as "
                   f"--trials T*tasks (give one of the two; default {SUITE_TRIALS_PER_TASK}); "
                   "the scheduler gives each task one round first, then gives more rounds to "
                   "the tasks whose weighted time falls fastest, so a task may get more or "
                   "fewer than T, but at least --min-share of T")
    p.add_argument("--min-share", type=float, default=None, metavar="F",
                   help="--suite only: the fraction of an even share of the budget that every "
                   "task is promised, however little it weighs in the network (default 0.5; "
                   "0: the gradient alone decides; 1: an even split)")
    p.add_argument("--strategy", default="evolutionary",
                   choices=["evolutionary", "replay", "annealing"])
    p.add_argument("--cost-model", default="xgb", choices=["xgb", "random"])
    p.add_argument("--batch-size", type=int, default=32, help="candidates per round")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-expert-seed", action="store_true", help="do not seed the search with "
                   "the expert schedule (explorer.space.expert): the search alone")
    p.add_argument("--no-pretrained", action="store_true", help="start the cost model cold, "
                   "not from the pre-trained model shipped for the target's family "
                   "(explorer.cost_model.pretrained)")
    p.add_argument("--table-rounds", type=int, default=5, metavar="N", help="--suite only: "
                   "interleaved rounds of the closing table against the libraries (default 5)")
    p.add_argument("--retime", type=int, default=4, metavar="N",
                   help="at the end, time the N fastest candidates again in interleaved "
                        "rounds and pick the best from all their runs (default 4; 0: off)")
    p.add_argument("--db", default="tuning_db", help="database directory (default tuning_db)")
    p.add_argument("--json", default=None, metavar="FILE", help="write the result as JSON")
    p.add_argument("--no-numpy", action="store_true", help="skip timing numpy for comparison "
                   "(with --suite: no closing table against the libraries)")
    p.add_argument("--quiet", action="store_true", help="no progress output")


MAX_TRIALS = 1_000_000
MAX_SEED = 2 ** 32 - 1
DEFAULT_TRIALS = 64
SUITE_TRIALS_PER_TASK = 32
SUITE_MAX_BATCH = 16


def check_numbers(args) -> None:
    """Raise UsageError for a count or seed out of range."""
    for opt, v, lo, hi in (("--trials", args.trials, 1, MAX_TRIALS),
                           ("--trials-per-task", getattr(args, "trials_per_task", None), 1,
                            MAX_TRIALS),
                           ("--batch-size", args.batch_size, 1, 4096),
                           ("--retime", args.retime, 0, 1000),
                           ("--table-rounds", getattr(args, "table_rounds", 5), 1, 1000),
                           ("--seed", args.seed, 0, MAX_SEED)):
        if v is not None and not lo <= v <= hi:
            raise UsageError(f"{opt} {v} is out of range: give a whole number from {lo} to {hi}")
    share = getattr(args, "min_share", None)
    if share is not None and not 0 <= share <= 1:   # NaN fails this too
        raise UsageError(f"--min-share {share} is out of range: give a fraction from 0 to 1")


def runner_from_args(text: str) -> str | None:
    """The Dask scheduler address of ``--runner`` (None: local): UsageError for a bad
    one, MeasureError (status 1, how to install it) when Dask is missing."""
    from ..measure.runner_choice import parse_runner
    try:
        address = parse_runner(text)
    except ExplorerError as e:
        raise UsageError(f"--runner: {e}") from None
    if address is not None:
        from ..measure.dask_runner import import_distributed
        import_distributed()
    return address


def target_from_args(text: str, remote: bool = False, emulate: bool = False):
    """The parsed ``--target``: UsageError for a bad string or a CPU LLVM does not know,
    BuildError (status 1) for a backend missing here (unless ``remote``: workers
    elsewhere build it, or ``emulate``: the host emulator runs the CUDA C)."""
    from ..backends import check_buildable
    from ..target import as_target, check_cpu
    try:
        target = as_target(text)
    except ExplorerError as e:
        raise UsageError(f"--target: {e}") from None
    if emulate:
        if target.kind != "cuda":
            raise UsageError(f"--emulate runs CUDA C on the host emulator: give --target cuda "
                             f"(or 'cuda -arch=sm_80'), not {text!r}")
        if remote:
            raise UsageError("--emulate runs on this machine: leave --runner as local")
        return target
    if remote:
        return target
    try:    # before check_buildable, which also checks the CPU but as a BuildError
        check_cpu(target)
    except ExplorerError as e:
        raise UsageError(f"--target {text!r}: {e}") from None
    check_buildable(target)
    return target


def workload_from_args(args):
    """The workload of ``--op``, ``--shape`` and ``--param``; UsageError for a bad one."""
    name = "gemm" if args.op is None else args.op
    shape = "1024,1024,1024" if args.shape is None and name == "gemm" else args.shape
    return workload_from_text(name, shape, args.param)


def suite_budget(args, n_tasks: int) -> tuple:
    """(total trials, batch size) of a suite run from --trials or --trials-per-task and
    --batch-size; UsageError, saying the minimum, when the budget cannot give every
    task one round."""
    from ..task_scheduler import min_trials
    per_task = args.trials_per_task
    if per_task is not None and args.trials is not None:
        raise UsageError("give --trials (the total budget) or --trials-per-task (T per task: "
                         "T x tasks in all), not both")
    batch = min(args.batch_size, SUITE_MAX_BATCH)
    if per_task is None and args.trials is None:
        per_task = SUITE_TRIALS_PER_TASK
    if per_task is not None:
        return per_task * n_tasks, suite_round(args.batch_size, per_task)
    least = min_trials(n_tasks, batch)
    if args.trials < least:
        raise UsageError(f"--trials {args.trials} cannot give each of the {n_tasks} tasks of "
                         f"--suite {args.suite} one round of {batch}: give at least --trials "
                         f"{least} (or --trials-per-task {batch}, or a smaller --batch-size)")
    return args.trials, suite_round(args.batch_size, args.trials // n_tasks)


def suite_round(batch_size: int, per_task: int) -> int:
    """Candidates per round of a suite run: ``batch_size`` (--batch-size) at most, and at
    most a quarter of the trials per task (so that the scheduler has rounds to give
    where they help most), but not below ``SUITE_MAX_BATCH`` (16) where the budget
    allows. A round's search (a population of 128 evolved for 3 generations: a few
    seconds of Python) costs the same for 16 candidates as for 32, so small rounds of a
    large budget spend most of the run searching: ResNet-18 at 256 per task measured
    (with rounds of 16) 3x the search seconds per trial of C6 tuned alone (rounds of 32)."""
    return min(batch_size, per_task, max(SUITE_MAX_BATCH, per_task // 4))


def suite_from_args(args) -> list:
    """The tasks of ``--suite``; UsageError for an unknown or malformed suite."""
    from ..task_scheduler import load_suite
    if args.shape is not None or args.param:
        raise UsageError("--shape and --param apply to --op, not to --suite (a suite names "
                         "its own shapes)")
    try:
        tasks = load_suite(args.suite)
    except ExplorerError as e:
        raise UsageError(one_line(e)) from None
    except (OSError, ValueError, RecursionError) as e:
        raise UsageError(f"--suite {args.suite!r} cannot be read ({type(e).__name__}: "
                         f"{one_line(e)[:200]}); give a suite name or a suite JSON file") from None
    if not tasks:
        raise UsageError(f"--suite {args.suite!r} has no tasks; add some or give another suite")
    return tasks


class Progress:
    """One status line per workload on a terminal (rewritten in place), else a line a round."""

    def __init__(self, stream=None, quiet: bool = False, suite_trials: int | None = None):
        self.stream = sys.stderr if stream is None else stream
        self.quiet = quiet
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.total = 0
        self.done = 0
        self.best = None
        self.start = time.perf_counter()
        self.failed = 0
        # a suite: one bar over all its tasks (each tuner counts its own trials)
        self.suite_trials = suite_trials
        self.task_done: dict = {}
        self.task_best: dict = {}
        self.workload = None

    def __call__(self, ev) -> None:
        if self.quiet:
            return
        if isinstance(ev, TuningStarted):
            if self.suite_trials is None:
                self.total, self.done, self.best, self.failed = ev.trials, 0, None, 0
                self.start = time.perf_counter()
            else:
                self.total = self.suite_trials
            self._line(f"tuning {ev.workload} on {ev.target} ({ev.strategy}, seed {ev.seed})",
                       final=True)
        elif isinstance(ev, WarmStart):
            self._line(ev.message, final=True)
        elif isinstance(ev, CandidateMeasured):
            self.workload = ev.workload
            self.task_done[ev.workload] = ev.trial + 1
            self.done = (ev.trial + 1 if self.suite_trials is None
                         else sum(self.task_done.values()))
            self.failed += ev.error is not None and not ev.error.startswith("cutoff")
            if self.tty:
                self._line(self._status())
        elif isinstance(ev, NewBest):
            self.workload = ev.workload
            self.task_best[ev.workload] = ev.gflops
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
        if self.suite_trials is not None:   # the suite's trials, then the last task's
            task = self.task_best.get(self.workload)
            best = (f"last task {self.task_done.get(self.workload, 0)} trials, best "
                    + (f"{task:.1f} GFLOP/s" if task else "-"))
        else:
            best = "best " + (f"{self.best:.1f} GFLOP/s" if self.best else "-")
        return (f"[{bar}] {self.done}/{self.total} trials, {best}, {self.failed} failed, "
                f"{el:.0f}s elapsed, ~{eta:.0f}s left")

    def _line(self, text: str, final: bool = False) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


class BudgetNote:
    """Says in one line on stderr, before any re-timing, that the database already held
    the whole trial budget of every tuner (the database's records count toward
    ``--trials``), so this run measures nothing new, and how to go on."""

    def __init__(self, tuners: list, db, trials: int, suite: str | None = None,
                 stream=None):
        self.tuners, self.db, self.trials, self.suite = tuners, db, trials, suite
        self.stream = sys.stderr if stream is None else stream
        self.said = False

    def __call__(self, ev) -> None:
        # the first of these comes after every tuner has read the database
        if self.said or not isinstance(ev, (RoundStarted, Retiming, TuningFinished)):
            return
        self.said = True
        states = [t.state for t in self.tuners]
        held = sum(s.trial for s in states)    # a suite's budget is the tasks' together
        if any(s.measured for s in states) or held < self.trials:
            return
        if self.suite is None and states[0].best is None:
            return   # the closing line says why no candidate ran correctly
        more = held + self.trials
        raise_ = "--trials" if self.suite is None else "--trials or --trials-per-task"
        print(f"explorer tune: {self._held(states)}, the whole --trials {self.trials} "
              f"budget: no new trials are run; to tune further, raise {raise_} (the records "
              f"held count toward it, e.g. --trials {more}) or give another --db",
              file=self.stream)

    def _held(self, states: list) -> str:
        if self.suite is None:
            t = self.tuners[0]
            return (f"{self.db.path} already holds {states[0].trial} trials of "
                    f"{t.workload.key} on {t.target}")
        lo, hi = min(s.trial for s in states), max(s.trial for s in states)
        n = len(states)
        return (f"{self.db.path} already holds {lo if lo == hi else f'{lo} to {hi}'} trials "
                f"of each task of suite {self.suite} ({n} task{'s' if n > 1 else ''})")


def _numpy_gflops(wl):
    from ..measure.baselines import measure_baseline
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
    """Check everything the run needs (numbers, target, workload, memory, where it
    writes), then tune; nothing is created when a check fails."""
    from ..database import Database
    check_numbers(args)
    remote = runner_from_args(args.runner) is not None
    emulate = getattr(args, "emulate", False)
    target = target_from_args(args.target, remote, emulate)
    if emulate and args.suite:
        raise UsageError("--emulate tunes one operator (--op); a suite is tuned on a GPU")
    if args.suite:
        work = suite_from_args(args)
        args.trials, args.suite_batch = suite_budget(args, len(work))
    else:
        if getattr(args, "trials_per_task", None) is not None:
            raise UsageError("--trials-per-task applies to --suite; for --op give --trials")
        if getattr(args, "min_share", None) is not None:
            raise UsageError("--min-share applies to --suite, where tasks share one budget")
        work = workload_from_args(args)
        args.trials = DEFAULT_TRIALS if args.trials is None else args.trials
    for wl in ([t.workload for t in work] if args.suite else [work]):
        check_fits(wl)
    check_writable_dir(args.db, "--db")
    if args.json:
        check_writable_file(args.json, "--json")
    db = Database(args.db)
    progress = Progress(quiet=args.quiet, suite_trials=args.trials if args.suite else None)
    if args.suite:
        return _tune_suite(args, work, target, db, progress)
    return _tune_one(args, work, target, db, progress)


def _tune_one(args, wl, target, db, progress) -> int:
    from ..tune import Tuner
    tuner = Tuner(wl, target, trials=args.trials, strategy=args.strategy,
                  cost_model=args.cost_model, database=db, seed=args.seed,
                  batch_size=args.batch_size, retime_top=args.retime, runner=args.runner,
                  emulate=getattr(args, "emulate", False),
                  seed_expert=not getattr(args, "no_expert_seed", False),
                  pretrained=not getattr(args, "no_pretrained", False))
    tuner.events.subscribe(BudgetNote([tuner], db, args.trials))
    tuner.events.subscribe(progress)
    res = tuner.run()
    if res.emulated:
        if args.json:
            _write_json(args.json, res.as_json())
        return _emulated_summary(res, db, wl, target)
    npg = None if args.no_numpy else _numpy_gflops(wl)
    out = _result_json(res, wl, npg)
    _print_summary([out])
    if args.json:
        _write_json(args.json, out)
    if res.best_seconds is None:
        print(f"explorer tune: {_why_none(db, wl, target)}", file=sys.stderr)
        return 1
    return 0


def _emulated_summary(res, db, wl, target) -> int:
    """What an emulated run found: how many candidates ran correctly, no speed."""
    ok = len(db.best(wl, str(target), k=len(db), emulated=True))
    print(f"{wl.key}: {ok} of {res.trials} candidates ran correctly on the host emulator of "
          f"the CUDA C ({res.failed} failed); emulation measures no speed, so no time is "
          f"given. The first correct kernel's CUDA C: explorer show --db {db.path} --source")
    if res.trace is None:
        print(f"explorer tune: {_why_none(db, wl, target)}", file=sys.stderr)
        return 1
    return 0


def _why_none(db, wl, target) -> str:
    """One line: why no candidate of ``wl`` ran correctly, from the database's errors."""
    from collections import Counter
    errors = Counter((r.error or r.retime_error or "no run time").strip().splitlines()[0][:200]
                     for r in db.records(wl, str(target)) if not r.ok)
    if not errors:
        return f"no candidate of {wl.key} was measured; run again with more --trials"
    err, n = errors.most_common(1)[0]
    return (f"no candidate of {wl.key} ran correctly ({sum(errors.values())} failed; {n} "
            f"with: {err}); see explorer show --db {db.path}")


def _write_json(path: str, data) -> None:
    with open(path, "w") as f:
        json.dump(data, f, indent=1)


def _tune_suite(args, tasks, target, db, progress) -> int:
    from ..task_scheduler import TaskScheduler
    start = time.perf_counter()
    ts = TaskScheduler(tasks, target, trials=args.trials, seed=args.seed, database=db,
                       batch_size=args.suite_batch, strategy=args.strategy,
                       cost_model=args.cost_model, retime_top=args.retime,
                       runner=args.runner, seed_expert=not args.no_expert_seed,
                       pretrained=not getattr(args, "no_pretrained", False),
                       **({} if args.min_share is None else {"min_share": args.min_share}))
    note = BudgetNote(ts.tuners, db, args.trials, suite=args.suite)
    for t in ts.tuners:
        t.events.subscribe(note)
        t.events.subscribe(progress)
    results = ts.run()
    outs = []
    for task, res in zip(tasks, results):
        out = _result_json(res, task.workload, None)
        out["task"], out["weight"] = task.name, task.weight
        outs.append(out)
    _print_suite_trials(outs)
    table = None
    if target.kind != "llvm" and not args.no_numpy:
        print(f"no table against the libraries on {target.kind}: time the database with "
              f"explorer bench --target {target.kind} --db {db.path}")
    elif not args.no_numpy:
        from .suite_bench import print_suite_table
        table_start = time.perf_counter()
        try:
            table = print_suite_table(tasks, target, db, rounds=args.table_rounds,
                                      log=(lambda m: None) if args.quiet else None)
        except BaseException:    # the tuning is kept: say where, and how to time it
            print(f"explorer tune: the closing table did not finish; every task's tuning "
                  f"is saved in {db.path}: time it with explorer bench --suite "
                  f"{args.suite} --db {db.path}", file=sys.stderr, flush=True)
            raise
        ts.phase_seconds["table"] = round(time.perf_counter() - table_start, 3)
    wall = time.perf_counter() - start
    times = _suite_times(ts, results, wall)
    print(_time_line(times, args.suite_batch))
    for out, entry in zip(outs, (table or {}).get("tasks", [])):
        secs = entry["rows"]["numpy"]["median_secs"]
        out["numpy_gflops"] = entry["flops"] / secs / 1e9 if secs else None
    if args.json:
        _write_json(args.json, {"suite": args.suite, "trials": args.trials,
                                "batch_size": args.suite_batch, **times,
                                "tasks": outs, "table": table})
    for i, (task, tuner) in enumerate(zip(tasks, ts.tuners)):
        if (tuner.state.exhausted or i in ts.ran_dry) and tuner.state.best is not None:
            print(f"note: task {task.name}: its design space proposed fewer new candidates "
                  f"than a round asked ({tuner.state.trial} trials in all); the rest of the "
                  "budget went to the other tasks")
    untuned = ts.untuned()
    for name, why in untuned.items():
        print(f"explorer tune: task {name} of --suite {args.suite} was not tuned: {why}",
              file=sys.stderr)
    if untuned:
        print(f"explorer tune: {len(untuned)} of {len(tasks)} tasks have no tuned schedule; "
              "see explorer show --db " + str(db.path), file=sys.stderr)
        return 1
    return 0


def _suite_times(ts, results: list, wall: float) -> dict:
    """Where the suite run's ``wall`` seconds went: ``phase_seconds`` summed over its
    tasks (setup: resuming from the database and the warm start; search; measure;
    train; retime), ``table`` (the closing table against the libraries) and ``other``
    (the rest: the tuners' construction, records, events), adding up to ``seconds``;
    and the seconds per trial this run measured, the table left out."""
    phases = {k: v for k, v in ts.phase_seconds.items() if k != "other"}
    phases["other"] = round(wall - sum(phases.values()), 3)
    measured = sum(r.measured for r in results)
    tuning = wall - phases.get("table", 0.0)
    return {"seconds": round(wall, 3), "phase_seconds": phases, "measured": measured,
            "seconds_per_trial": round(tuning / measured, 3) if measured else None}


def _time_line(times: dict, batch: int) -> str:
    """One line: the run's seconds, per trial, and by phase, largest first."""
    phases = sorted(times["phase_seconds"].items(), key=lambda kv: -kv[1])
    per = times["seconds_per_trial"]
    return (f"time: {times['seconds']:.0f} s, {times['measured']} trials measured in rounds "
            f"of {batch}" + (f" ({per:.2f} s per trial)" if per else "") + "; "
            + ", ".join(f"{k} {v:.0f} s" for k, v in phases))


def _print_suite_trials(outs: list) -> None:
    """Per task: trials recorded (the database's included), failed, best before the table."""
    print(f"{'task':24s} {'trials':>6s} {'failed':>6s} {'best ms':>9s} {'GFLOP/s':>8s}  "
          "workload")
    for o in outs:
        bs, bg = o["best_seconds"], o["best_gflops"]
        print(f"{o['task'][:24]:24s} {o['trials']:6d} {o['failed']:6d} "
              f"{bs * 1e3 if bs else float('nan'):9.3f} {bg or float('nan'):8.1f}  "
              f"{o['workload']['key']}")


def _print_summary(outs: list) -> None:
    print(f"{'workload':60s} {'trials':>6s} {'failed':>6s} {'best ms':>9s} {'GFLOP/s':>8s} "
          f"{'numpy':>7s} {'ratio':>6s}")
    for o in outs:
        bs, bg, ng = o["best_seconds"], o["best_gflops"], o["numpy_gflops"]
        print(f"{o['workload']['key'][:60]:60s} {o['trials']:6d} {o['failed']:6d} "
              f"{bs * 1e3 if bs else float('nan'):9.3f} {bg or float('nan'):8.1f} "
              f"{ng or float('nan'):7.1f} {bg / ng if bg and ng else float('nan'):6.2f}")
