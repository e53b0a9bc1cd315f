"""The postprocessor: completes a sampled schedule or rejects it with a reason.

Rules leave intentions as annotations (parallel here, cooperative fetch there);
postprocessors run after every sample and turn them into loop kinds and
bindings (recorded in the trace like any primitive), split reduction init from
update, and check what only a finished schedule can show (GPU limits).
"""
from __future__ import annotations

from abc import ABC, abstractmethod


class Postproc(ABC):
    """Base class of postprocessors. ``apply`` rewrites the schedule in place, or raises
    ``PostprocError`` (or lets a ``ScheduleError`` through) to reject it."""

    target = None

    def initialize(self, target) -> None:
        """Called by the design space with its ``Target`` before any ``apply``."""
        self.target = target

    @abstractmethod
    def apply(self, sch) -> None:
        """Finish ``sch`` in place, or raise PostprocError with the reason it is invalid."""

    def precheck(self, sch) -> None:
        """Optional early rejection, run on the replayed sketch before any postprocessor:
        raise PostprocError only for what ``apply`` would reject anyway (it saves the
        work of the postprocessors in between)."""

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if k != "target")
        return f"{type(self).__name__}({fields})"
