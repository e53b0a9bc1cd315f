"""Tune several operators of one model under one trial budget.

``gradient`` allocation follows Ansor / MetaSchedule's ``GradientBased``: a
warm-up gives every task one round (a batch) first, in order, then the next
round goes to the task whose weighted latency is expected to fall fastest — the
gradient estimate combines the recent slope of its best-latency curve with the
optimistic bound ``-latency / trials`` — with 5% random picks. ``round-robin``
visits the tasks in turn.

Every task is promised a floor, ``min_share`` of an even share of the budget
(default half): the gradient weighs a task by its share of the network's time,
so a light task (BERT's attention batch matmuls) would otherwise stop at its
warm-up round, yet its own speed against the libraries is reported too. The
gradient picks freely while the budget left exceeds what the floors still lack;
from then on the rounds go to the tasks below their floor, the furthest first.

So no task is left untuned silently: a budget below one batch per task is
refused up front (``min_trials``), a task whose first ``max_failed_rounds``
rounds produced no correct candidate gets no more of the budget, and
``untuned()`` names every task without a correct candidate and says why.
"""
from __future__ import annotations

import json
import math
import random
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .errors import ExplorerError
from .measure.load import warn_if_busy
from .suites import suite_names, suite_text


@dataclass(frozen=True)
class Task:
    name: str
    workload: object
    weight: float = 1.0


def load_suite(name_or_path) -> list:
    """Tasks of a suite shipped with the package (``suite_names()``: resnet18,
    bert_base, mobilenet_v2, mlp, memory_bound; the files are in ``data/``) or of a
    JSON file. A task's ``weight`` is how often it occurs in the network (default 1).
    A task is a library op (``"op"`` and ``"params"``) or a user's workload
    (``"workload"``: its ``Workload.to_json()``, checked against its unscheduled
    program when it was checked by a numpy function)."""
    name = str(name_or_path)
    if name in suite_names():
        text, where = suite_text(name), name
    elif Path(name).suffix and Path(name).is_file():
        text, where = Path(name).read_text(), name
    else:
        raise ExplorerError(f"unknown suite {name!r}; known: {', '.join(suite_names())} "
                            "(or give a path to a suite JSON file)")
    try:
        return [_task(t) for t in json.loads(text)["tasks"]]
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
        raise ExplorerError(f"suite {where} is malformed ({e}); see the suites in "
                            "data/*.json for the format") from None


def _task(t: dict) -> Task:
    from . import ops
    from .workload import Workload
    if "workload" in t:
        wl = Workload.from_json(t["workload"])
        wl = wl if wl.checked_by != "numpy" else wl.with_reference(None)
        return Task(t.get("name", wl.name), wl, float(t.get("weight", 1)))
    return Task(t.get("name", t["op"]), ops.get(t["op"], **t["params"]), float(t.get("weight", 1)))


def min_trials(n_tasks: int, batch_size: int) -> int:
    """The smallest budget a TaskScheduler accepts: one batch per task (the warm-up)."""
    return n_tasks * batch_size


class TaskScheduler:
    """Splits ``trials`` (the total budget) over ``tasks`` (each a Task, whose workload
    is a Workload, PrimFunc or Schedule); one Tuner per task. ``trials`` must be at
    least ``min_trials(len(tasks), batch_size)``."""

    def __init__(self, tasks: list, target="llvm", trials: int = 256, mode: str = "gradient",
                 batch_size: int = 16, seed: int = 0, database=None, window: int = 3,
                 eps: float = 0.05, max_failed_rounds: int = 2, min_share: float = 0.5,
                 **tuner_kw):
        if mode not in ("gradient", "round-robin"):
            raise ExplorerError(f"unknown task scheduling mode {mode!r}; use 'gradient' or "
                                "'round-robin'")
        if not tasks:
            raise ExplorerError("TaskScheduler needs at least one task")
        least = min_trials(len(tasks), batch_size)
        if not isinstance(trials, int) or trials < least:
            raise ExplorerError(
                f"a budget of {trials!r} trials cannot give each of the {len(tasks)} tasks one "
                f"batch of {batch_size}: give at least {least} trials in all (or a smaller "
                "batch size)")
        if (not isinstance(min_share, (int, float)) or isinstance(min_share, bool)
                or not 0 <= min_share <= 1):
            raise ExplorerError(f"min_share {min_share!r} is out of range: give a fraction "
                                "from 0 (no floor) to 1 (an even split)")
        self.max_failed_rounds = max_failed_rounds
        # trials every task is promised (see the module's docstring)
        self.floor = int(min_share * trials / len(tasks))
        from .database import Database
        from .measure.runner_choice import open_measurer
        from .tune import Tuner
        self.tasks = tasks
        self.mode = mode
        self.window = window
        self.eps = eps
        self.rng = random.Random(seed)
        db = database if database is None or isinstance(database, Database) \
            else Database(database)
        runner = tuner_kw.pop("runner", None)
        self.measurer = open_measurer(runner, target, tuner_kw.pop("config", None))
        per_task = max(1, trials // len(tasks))
        self.budget = trials
        # one model for all tasks: records of one operator help rank another
        if tuner_kw.get("cost_model", "xgb") == "xgb":
            from .cost_model import XGBCostModel
            tuner_kw["cost_model"] = XGBCostModel(seed=seed)
        self.tuners = [Tuner(t.workload, target, trials=trials, database=db, seed=seed + i,
                             batch_size=batch_size, measurer=self.measurer, runner=runner,
                             **tuner_kw)
                       for i, t in enumerate(tasks)]
        self.per_task_hint = per_task
        self.phase_seconds: dict = {}   # the run's wall seconds by phase (after ``run``)
        self.used = 0
        self.given = [0] * len(tasks)          # rounds the scheduler gave each task
        self.ran_dry: set = set()   # tasks whose space proposed fewer candidates than asked
        self.errors = [Counter() for _ in tasks]   # first line of each failure, per task
        for tuner, errs in zip(self.tuners, self.errors):
            tuner.events.subscribe(lambda ev, errs=errs: self._count_error(ev, errs))

    @staticmethod
    def _count_error(ev, errs: Counter) -> None:
        from .events import CandidateMeasured
        if isinstance(ev, CandidateMeasured) and ev.error and ev.error_kind != "cutoff":
            errs[ev.error.strip().splitlines()[0][:200]] += 1

    def _failing(self, i: int) -> bool:
        """No correct candidate after ``max_failed_rounds`` rounds: no more budget for it."""
        return (self.tuners[i].state.best is None
                and self.given[i] >= self.max_failed_rounds)

    def untuned(self) -> dict:
        """Task name -> why it has no correct candidate, for every such task (after ``run``)."""
        out = {}
        for task, tuner, errs in zip(self.tasks, self.tuners, self.errors):
            st = tuner.state
            if st.best is not None:
                continue
            if st.trial == 0:
                why = ("got no trials: " + ("its design space proposed no candidate"
                                            if st.exhausted else "the budget ran out first"))
            elif errs:
                err, n = errs.most_common(1)[0]
                why = f"all {st.trial} trials failed ({n} with: {err})"
            else:
                why = f"none of its {st.trial} trials ran correctly"
            out[task.name] = why
        return out

    def _latency(self, i: int) -> float:
        b = self.tuners[i].state.best
        return b.seconds if b is not None else float("inf")

    def _gradient(self, i: int) -> float:
        t = self.tuners[i]
        h = t.history
        if not h or h[-1] <= 0:
            return -float("inf")
        lat = [t.workload.flops / g / 1e9 if g else float("inf") for g in h]
        n = len(lat)
        back = (lat[-1] - lat[max(0, n - 1 - self.window * t.batch_size)]) / max(
            1, min(n - 1, self.window * t.batch_size))
        forward = -lat[-1] / n
        return self.tasks[i].weight * min(back, forward)

    def _pick(self, alive: list) -> int:
        fresh = [i for i in alive if not self.given[i]]
        if fresh:   # the warm-up: one round for every task first
            return fresh[0]
        lack = self._below_floor(alive)   # a free pick now must leave enough for the floors
        free = self.budget - self.used - max(self.tuners[i].batch_size for i in alive)
        if lack and sum(lack.values()) > free:
            return max(lack, key=lambda i: (lack[i], -i))   # the floors take the rest
        if self.mode == "round-robin" or self.rng.random() < self.eps:
            return alive[self.used % len(alive)] if self.mode == "round-robin" \
                else self.rng.choice(alive)
        return min(alive, key=self._gradient)

    def _below_floor(self, alive: list) -> dict:
        """Task -> the trials it lacks to its floor, in whole rounds (a task whose space ran
        dry is owed nothing)."""
        lack = {}
        for i in alive:
            t = self.tuners[i]
            if i not in self.ran_dry and t.state.trial < self.floor:
                lack[i] = math.ceil((self.floor - t.state.trial) / t.batch_size) * t.batch_size
        return lack

    def run(self) -> list:
        """Tune until the budget is used; returns one TuneResult per task. Each task's
        ``phase_seconds`` counts its own turns only (its ``other``: its rounds' records
        and events); ``self.phase_seconds`` sums the phases over the tasks, and its
        ``other`` is the rest of the run's wall time."""
        start = time.perf_counter()
        own = [0.0] * len(self.tuners)      # wall seconds of each task's own turns
        warn_if_busy(self.tuners[0].target, self.tuners[0].runner)
        for i, t in enumerate(self.tuners):
            with _timed(own, i):
                t.begin(learn=False)
        with _timed(own, None):
            self._learn_resumed()
        # the records a database already held count toward the budget, as a Tuner's do: a
        # run started again with the same budget resumes, it does not tune it all again
        self.used = sum(t.state.trial for t in self.tuners)
        try:
            while self.used < self.budget:
                alive = [i for i, t in enumerate(self.tuners)
                         if t.active and not self._failing(i)]
                if not alive:
                    break
                i = self._pick(alive)
                self.given[i] += 1
                tuner = self.tuners[i]
                asked = min(tuner.batch_size, tuner.trials - tuner.state.trial,
                            self.budget - self.used)
                with _timed(own, i):
                    got = tuner.step(limit=self.budget - self.used)
                if got < asked:
                    self.ran_dry.add(i)
                self.used += got
            for i, t in enumerate(self.tuners):
                with _timed(own, i):
                    t.retime()
        finally:
            self.measurer.close()
        results = [t.finish() for t in self.tuners]
        for res, secs in zip(results, own):
            phases = res.phase_seconds
            phases["other"] = round(max(0.0, secs - sum(v for k, v in phases.items()
                                                        if k != "other")), 3)
        self.phase_seconds = _summed([r.phase_seconds for r in results],
                                     time.perf_counter() - start)
        return results

    def _learn_resumed(self) -> None:
        """Every task's records read back from the database, taught to the cost model in
        one update (one training of a model the tasks share, not one per task), then the
        warm start of a model still untrained (``Tuner.learn_resumed``)."""
        by_model: dict = {}
        for t in self.tuners:
            by_model.setdefault(id(t.cost_model), []).append(t)
        for tuners in by_model.values():
            feats, costs, groups = [], [], []
            for t in tuners:
                f, c = t.resumed
                feats += f
                costs += c
                groups += [t.workload.key] * len(c)
            tuners[0].learn_resumed(feats, costs, groups)
            for t in tuners[1:]:
                t.learn_resumed([], [], [])


@contextmanager
def _timed(seconds: list, i):
    """Add the block's wall seconds to ``seconds[i]`` (nothing when ``i`` is None)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        if i is not None:
            seconds[i] += time.perf_counter() - start


def _summed(phases: list, wall: float) -> dict:
    """The tasks' phase seconds added up; ``other``: the wall time none of them took."""
    out: dict = {}
    for p in phases:
        for k, v in p.items():
            out[k] = out.get(k, 0.0) + v
    out["other"] = wall - sum(v for k, v in out.items() if k != "other")
    return {k: round(v, 3) for k, v in out.items()}
