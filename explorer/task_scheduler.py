"""Tune several operators of one model under one trial budget.

``gradient`` allocation follows Ansor / MetaSchedule: after one warm-up round
per task, the next round goes to the task whose weighted latency is expected
to fall fastest — the gradient estimate combines the recent slope of its
best-latency curve with the optimistic bound ``-latency / trials`` — with 5%
random picks. ``round-robin`` visits the tasks in turn.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from .errors import ExplorerError
from .suites import suite_names, suite_text


@dataclass(frozen=True)
class Task:
    name: str
    workload: object
    weight: float = 1.0


def load_suite(name_or_path) -> list:
    """Tasks of a suite shipped with the package (``suite_names()``: resnet18,
    bert_base, mobilenet_v2, mlp; the files are in ``data/``) or of a JSON file.
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


class TaskScheduler:
    """Splits ``trials`` over ``tasks`` (each a Task, whose workload is a Workload,
    PrimFunc or Schedule); one Tuner per task."""

    def __init__(self, tasks: list, target="llvm", trials: int = 256, mode: str = "gradient",
                 batch_size: int = 16, seed: int = 0, database=None, window: int = 3,
                 eps: float = 0.05, **tuner_kw):
        if mode not in ("gradient", "round-robin"):
            raise ExplorerError(f"unknown task scheduling mode {mode!r}; use 'gradient' or "
                                "'round-robin'")
        if not tasks:
            raise ExplorerError("TaskScheduler needs at least one task")
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
        self.used = 0

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
        fresh = [i for i in alive if not self.tuners[i].history]
        if fresh:
            return fresh[0]
        if self.mode == "round-robin" or self.rng.random() < self.eps:
            return alive[self.used % len(alive)] if self.mode == "round-robin" \
                else self.rng.choice(alive)
        return min(alive, key=self._gradient)

    def run(self) -> list:
        """Tune until the budget is used; returns one TuneResult per task."""
        for t in self.tuners:
            t.begin()
        try:
            while self.used < self.budget:
                alive = [i for i, t in enumerate(self.tuners) if t.active]
                if not alive:
                    break
                i = self._pick(alive)
                self.used += self.tuners[i].step(limit=self.budget - self.used)
            for t in self.tuners:
                t.retime()
        finally:
            self.measurer.close()
        return [t.finish() for t in self.tuners]
