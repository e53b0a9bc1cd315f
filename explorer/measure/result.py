"""The values that cross the measurement boundary: what to measure and what came of it.

All three are frozen plain data (JSON-able): a ``MeasureInput`` names a workload
by operator name and parameters and carries the schedule as trace JSON, so a
worker process rebuilds the candidate from data alone (no pickled code). A
failure is a value (``error`` and ``error_kind`` set, ``run_secs`` None), never
an exception into the search loop.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field, fields

from ..errors import MeasureError

# Why a candidate failed, in the order the stages run.
ERROR_KINDS = (
    "build",          # trace replay, lowering or code generation raised
    "build_timeout",  # the build did not finish within build_timeout
    "build_crash",    # the worker process died while building
    "run",            # the kernel raised (bad arguments, backend error)
    "crash",          # the worker process died while running the kernel (segfault...)
    "timeout",        # the kernel did not finish within run_timeout
    "wrong",          # the output differs from the numpy reference
    "cutoff",         # the first run was far slower than the best so far: not timed further
    "internal",       # the measurement machinery itself failed (worker did not start...)
)


def _freeze(v):
    return tuple(_freeze(x) for x in v) if isinstance(v, (list, tuple)) else v


def _thaw(v):
    return [_thaw(x) for x in v] if isinstance(v, tuple) else v


@dataclass(frozen=True)
class MeasureInput:
    """One candidate: workload (operator name, parameters, dtype), trace and target.

    ``params`` is ``Workload.params`` (pairs of name and value); ``trace`` is
    ``Trace.as_json()``; ``target`` a target string such as
    ``"llvm -mcpu=znver4 -num-cores=2"``; ``seed`` seeds the schedule, which
    re-samples sampling instructions the trace left without a decision.
    ``fault`` injects a failure (see ``explorer.measure.faults``; tests only).
    """
    op: str
    params: tuple
    dtype: str
    trace: dict = field(hash=False)
    target: str = "llvm"
    seed: int = 0
    fault: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "params", tuple((str(k), _freeze(v)) for k, v in self.params))

    def __hash__(self):
        return hash((self.op, self.params, self.dtype, json.dumps(self.trace, sort_keys=True),
                     self.target, self.seed, self.fault))

    @classmethod
    def from_schedule(cls, sch, target="llvm", fault: str | None = None) -> "MeasureInput":
        """The input that measures schedule ``sch`` (made from an ``explorer.ops`` Workload)."""
        wl = getattr(sch, "workload", None)
        if wl is None or not hasattr(wl, "params"):
            raise MeasureError("MeasureInput.from_schedule needs a Schedule made from an "
                               "explorer.ops Workload (Schedule(ops.gemm(...))), so that a worker "
                               "process can rebuild it from the operator name and parameters")
        return cls.from_workload(wl, sch.trace.as_json(), target, seed=sch.seed, fault=fault)

    @classmethod
    def from_workload(cls, wl, trace, target="llvm", seed: int = 0,
                      fault: str | None = None) -> "MeasureInput":
        """The input for workload ``wl`` scheduled by ``trace`` (a Trace or its JSON)."""
        from ..backends.target import as_target
        trace = trace.as_json() if hasattr(trace, "as_json") else trace
        return cls(wl.name, wl.params, wl.dtype, trace, str(as_target(target)), seed, fault)

    def workload(self):
        """Rebuild the Workload (``ops.get(op, dtype=..., **params)``)."""
        from .. import ops
        return ops.get(self.op, dtype=self.dtype, **dict(self.params))

    def schedule(self):
        """Rebuild the schedule: replay the trace on a fresh ``Schedule(workload, seed)``."""
        from ..schedule import Schedule, Trace
        return Trace.from_json(self.trace).apply_to(Schedule(self.workload(), seed=self.seed))

    def as_json(self) -> dict:
        return {"op": self.op, "params": {k: _thaw(v) for k, v in self.params},
                "dtype": self.dtype, "trace": self.trace, "target": self.target,
                "seed": self.seed, "fault": self.fault}

    @classmethod
    def from_json(cls, data: dict) -> "MeasureInput":
        try:
            return cls(data["op"], tuple(data["params"].items()), data["dtype"], data["trace"],
                       data.get("target", "llvm"), int(data.get("seed", 0)), data.get("fault"))
        except (KeyError, AttributeError, TypeError, ValueError) as e:
            raise MeasureError(f"a measure input needs op, params (an object), dtype and trace; "
                               f"this one is malformed ({e!r})") from None


@dataclass(frozen=True)
class BuildResult:
    """What building one input gave: where the kernel lives, or why there is none.

    The kernel stays inside the worker process that built it (``worker``,
    ``generation`` of that process, ``artifact`` id); the runner runs it there,
    or rebuilds it when that process was replaced since.
    """
    input: MeasureInput
    worker: int | None = None
    generation: int | None = None
    artifact: int | None = None
    build_secs: float | None = None      # replay + lower + compile, in the worker
    compile_secs: float | None = None    # the backend's own compile time (kernel.compile_seconds)
    error: str | None = None
    error_kind: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["input"] = self.input.as_json()
        return out


@dataclass(frozen=True)
class MeasureResult:
    """The measurement of one candidate.

    ``run_secs`` holds one mean time per repeat (seconds per kernel call), or
    None when the candidate failed; then ``error`` says why and ``error_kind``
    is one of ``ERROR_KINDS``. ``first_run_secs`` is the checked first run
    (a cut-off candidate has it as a lower bound on its time). ``number`` is
    the count of calls per repeat; ``wall_secs`` the caller's wall time for
    this candidate, build included.
    """
    input: MeasureInput | None
    run_secs: tuple | None
    error: str | None = None
    error_kind: str | None = None
    first_run_secs: float | None = None
    build_secs: float | None = None
    compile_secs: float | None = None
    max_abs_error: float | None = None
    number: int = 0
    flops: int = 0
    wall_secs: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.run_secs)

    @property
    def median_secs(self) -> float | None:
        return statistics.median(self.run_secs) if self.run_secs else None

    @property
    def min_secs(self) -> float | None:
        return min(self.run_secs) if self.run_secs else None

    @property
    def max_secs(self) -> float | None:
        return max(self.run_secs) if self.run_secs else None

    @property
    def iqr_secs(self) -> float | None:
        """Interquartile range of the repeats (0 with fewer than 2)."""
        if not self.run_secs:
            return None
        if len(self.run_secs) < 2:
            return 0.0
        q = statistics.quantiles(self.run_secs, n=4, method="inclusive")
        return q[2] - q[0]

    @property
    def gflops(self) -> float | None:
        med = self.median_secs
        return self.flops / med / 1e9 if med and self.flops else None

    def as_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["input"] = self.input.as_json() if self.input else None
        out["run_secs"] = list(self.run_secs) if self.run_secs else None
        for name in ("median_secs", "min_secs", "max_secs", "iqr_secs", "gflops"):
            out[name] = getattr(self, name)
        return out

    @classmethod
    def from_json(cls, data: dict) -> "MeasureResult":
        kw = {f.name: data.get(f.name) for f in fields(cls) if f.name in data}
        kw["input"] = MeasureInput.from_json(data["input"]) if data.get("input") else None
        kw["run_secs"] = tuple(data["run_secs"]) if data.get("run_secs") else None
        return cls(**kw)

    @classmethod
    def failed(cls, inp, kind: str, error: str, **kw) -> "MeasureResult":
        """A failed result (``run_secs`` None) of ``kind`` with message ``error``."""
        return cls(inp, None, error=error, error_kind=kind, **kw)
