"""View-models of the tuning views: they fold the engine's events
(:mod:`explorer.events`) into plain lists and answer the questions the
pictures ask. No ipywidgets, no drawing.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

from explorer.events import (CandidateMeasured, ModelUpdated, NewBest, Retimed, Retiming,
                             RoundStarted, TuningFinished, TuningStarted)


@dataclass(frozen=True)
class Row:
    """One measured candidate."""
    round: int
    trial: int
    seconds: float | None
    gflops: float | None
    error: str | None
    predicted: float | None
    trace: dict
    retimed: bool = False


class DashboardState:
    """Everything a tuning dashboard shows, folded from events."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.reset()

    def reset(self) -> None:
        self.started: TuningStarted | None = None
        self.finished: TuningFinished | None = None
        self.rows: list = []
        self.models: list = []           # ModelUpdated events
        self.best: NewBest | None = None
        self.retiming: Retiming | None = None
        self.round = 0
        self.round_candidates = 0
        self._t0: float | None = None

    def handle(self, event) -> None:
        if isinstance(event, TuningStarted):
            self.reset()
            self.started, self._t0 = event, self.clock()
        elif isinstance(event, RoundStarted):
            self.round, self.round_candidates = event.round, event.candidates
        elif isinstance(event, CandidateMeasured):
            self.rows.append(Row(event.round, event.trial, event.seconds, event.gflops,
                                 event.error, event.predicted, event.trace))
        elif isinstance(event, ModelUpdated):
            self.models.append(event)
        elif isinstance(event, NewBest):
            self.best = event
        elif isinstance(event, Retiming):
            self.retiming = event
        elif isinstance(event, Retimed):
            again = {t: (s, g, e) for t, s, g, e in zip(event.trials, event.seconds,
                                                        event.gflops, event.errors)}
            self.rows = [r if r.trial not in again else
                         replace(r, seconds=again[r.trial][0], gflops=again[r.trial][1],
                                 error=again[r.trial][2], retimed=True)
                         for r in self.rows]
        elif isinstance(event, TuningFinished):
            self.finished = event

    # ------------------------------------------------------------ questions
    @property
    def trials(self) -> int:
        return self.started.trials if self.started else 0

    @property
    def done(self) -> int:
        return len(self.rows)

    @property
    def failed(self) -> int:
        return sum(r.error is not None or r.gflops is None for r in self.rows)

    def elapsed(self) -> float:
        if self._t0 is None:
            return 0.0
        if self.finished is not None:
            return self.finished.tuning_seconds
        return self.clock() - self._t0

    def eta_seconds(self) -> float | None:
        """Time left, from the average time per trial so far; None before the first."""
        if self.finished is not None:
            return 0.0
        if not self.done or not self.trials:
            return None
        return self.elapsed() / self.done * max(0, self.trials - self.done)

    def progress_text(self) -> str:
        if self.started is None:
            return "waiting for a tuner (attach me to its EventBus)"
        eta = self.eta_seconds()
        left = "done" if self.finished else ("estimating..." if eta is None
                                             else f"about {_fmt_time(eta)} left")
        if self.retiming is not None and self.finished is None:
            left = f"timing the {self.retiming.candidates} fastest again"
        best = f", best {self.best.gflops:.2f} GFLOP/s" if self.best else ""
        return (f"{self.done}/{self.trials} trials (round {self.round}, {self.failed} failed)"
                f"{best}; {_fmt_time(self.elapsed())} elapsed, {left}")

    def gflops(self) -> list:
        return [r.gflops if r.error is None else None for r in self.rows]

    def top_k(self, k: int = 10):
        """A pandas DataFrame of the k fastest correct candidates, best first."""
        import pandas as pd
        ok = sorted((r for r in self.rows if r.error is None and r.gflops is not None),
                    key=lambda r: -r.gflops)[:k]
        return pd.DataFrame({
            "trial": [r.trial for r in ok], "round": [r.round for r in ok],
            "GFLOP/s": [round(r.gflops, 3) for r in ok],
            "ms": [round(r.seconds * 1e3, 4) if r.seconds else None for r in ok],
            "predicted": [None if r.predicted is None else round(r.predicted, 4) for r in ok],
            "re-timed": [r.retimed for r in ok],
        }, index=pd.RangeIndex(1, len(ok) + 1, name="rank"))

    def trace_of(self, trial: int) -> dict:
        return next(r.trace for r in self.rows if r.trial == trial)


class ModelState:
    """The cost model's history, folded from ModelUpdated events."""

    def __init__(self):
        self.updates: list = []

    def handle(self, event) -> None:
        if isinstance(event, TuningStarted):
            self.updates = []
        elif isinstance(event, ModelUpdated):
            self.updates.append(event)

    def importance(self) -> tuple:
        """The latest non-empty feature importance, ((name, gain), ...)."""
        for u in reversed(self.updates):
            if u.feature_importance:
                return tuple(u.feature_importance)
        return ()


def _fmt_time(s: float) -> str:
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{s // 60:.0f} min {s % 60:.0f} s"
    return f"{s // 3600:.0f} h {s % 3600 // 60:.0f} min"
