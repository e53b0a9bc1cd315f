"""Engine events: how widgets, logs and progress bars observe tuning without the
engine knowing about them.

A tuner owns an ``EventBus``; observers ``subscribe`` a callable that receives
event values. Events are small frozen dataclasses of plain data (numbers,
strings, trace JSON), so they can be logged, sent across processes or drawn.
An observer that raises is unsubscribed with a warning: a broken plot never
stops a tuning run.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class TuningStarted:
    workload: str
    target: str
    trials: int
    strategy: str
    seed: int


@dataclass(frozen=True)
class WarmStart:
    """Which pre-trained cost model the tuner starts from (``source``: its folder), or
    ``source`` None and why it starts cold (none for the target's family, or one
    refused: another family or feature version)."""
    workload: str
    family: str
    source: str | None
    message: str


@dataclass(frozen=True)
class RoundStarted:
    workload: str
    round: int
    candidates: int


@dataclass(frozen=True)
class CandidateMeasured:
    workload: str
    round: int
    trial: int                 # index over the whole run, from 0
    trace: dict                # Trace.as_json()
    seconds: float | None      # median run time; None when it failed
    gflops: float | None
    error: str | None          # why it failed (build, run, wrong result, timeout)
    predicted: float | None    # the cost model's score before measuring, if any
    error_kind: str | None = None   # build, crash, wrong, timeout, cutoff... (None: ok)


@dataclass(frozen=True)
class ModelUpdated:
    workload: str
    round: int
    samples: int               # training rows the model has seen
    rank_accuracy: float | None    # pairwise rank accuracy on the batch, before measuring it
    top_k_recall: float | None
    feature_importance: tuple = field(default=())  # ((feature name, gain), ...)


@dataclass(frozen=True)
class NewBest:
    workload: str
    trial: int
    seconds: float
    gflops: float
    trace: dict


@dataclass(frozen=True)
class Retiming:
    """The rounds are done; the fastest candidates are being timed again (a few
    seconds); a Retimed and a NewBest (the best with its seconds over all its runs,
    the same candidate or another) follow."""
    workload: str
    candidates: int
    rounds: int


@dataclass(frozen=True)
class Retimed:
    """The re-timing's outcome: per trial, the median over all its runs now (seconds
    and GFLOP/s; None with the error when a re-run failed: no longer correct)."""
    workload: str
    trials: tuple
    seconds: tuple
    gflops: tuple
    errors: tuple


@dataclass(frozen=True)
class TuningFinished:
    workload: str
    trials: int
    measured: int
    failed: int
    best_seconds: float | None
    best_gflops: float | None
    tuning_seconds: float


class EventBus:
    """Fan-out of events to subscribers, in subscription order."""

    def __init__(self):
        self._subs: list = []

    def subscribe(self, fn: Callable) -> Callable:
        """Register ``fn(event)``; returns a function that unsubscribes it."""
        self._subs.append(fn)
        return lambda: self._subs.remove(fn) if fn in self._subs else None

    def emit(self, event) -> None:
        for fn in list(self._subs):
            try:
                fn(event)
            except Exception as e:  # an observer must not break the engine
                warnings.warn(f"event observer {fn!r} failed on {type(event).__name__}: {e!r}; "
                              "it was unsubscribed")
                self._subs.remove(fn)
