"""The values that cross the measurement boundary: what to measure and what came of it.

All three are frozen plain data (JSON-able): a ``MeasureInput`` names a library
workload by operator name and parameters, or carries a user's workload as its
JSON (the function itself) with the file of its expected outputs, and carries
the schedule as trace JSON, so a worker process rebuilds the candidate from
data alone (no pickled code). A
failure is a value (``error`` and ``error_kind`` set, ``run_secs`` None), never
an exception into the search loop.
"""
from __future__ import annotations

import json
import statistics
from collections import OrderedDict
from dataclasses import dataclass, field, fields

from ..errors import MeasureError

_decoded: OrderedDict = OrderedDict()   # user workloads rebuilt in this process, by JSON text

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

    ``params`` is ``Workload.params`` (pairs of name and value). A workload not
    in the library comes as ``workload_json`` (``Workload.to_json()``) with
    ``expected``, the file of its inputs and expected outputs computed in the
    parent (see ``explorer.measure.expected``); ``trace`` is
    ``Trace.as_json()``; ``target`` a target string such as
    ``"llvm -mcpu=znver4 -num-cores=2"``; ``seed`` seeds the schedule, which
    re-samples sampling instructions the trace left without a decision.
    ``fault`` injects a failure (see ``explorer.measure.faults``; tests only).
    ``emulate`` (a ``cuda`` target only) runs the generated CUDA C on the host
    emulator instead of a GPU: a correctness check whose time is no GPU time.
    """
    op: str
    params: tuple
    dtype: str
    trace: dict = field(hash=False)
    target: str = "llvm"
    seed: int = 0
    fault: str | None = None
    workload_json: dict | None = field(default=None, hash=False)
    expected: str | None = None
    emulate: bool = False

    def __post_init__(self):
        object.__setattr__(self, "params", tuple((str(k), _freeze(v)) for k, v in self.params))
        if self.emulate and not self.target.startswith("cuda"):
            raise MeasureError(f"emulate=True runs CUDA C on the host emulator; the target "
                               f"{self.target!r} is not a cuda target")

    def __hash__(self):
        return hash((self.workload_key, json.dumps(self.trace, sort_keys=True),
                     self.target, self.seed, self.fault, self.expected, self.emulate))

    @property
    def workload_key(self):
        """What identifies the workload: its key for a user's, (op, params, dtype) else."""
        if self.workload_json is not None:
            return self.workload_json.get("key")
        return (self.op, self.params, self.dtype)

    @classmethod
    def from_schedule(cls, sch, target="llvm", fault: str | None = None,
                      check_seed: int = 0, emulate: bool = False) -> "MeasureInput":
        """The input that measures schedule ``sch``: of a Workload, or of a PrimFunc
        (checked against its unscheduled program)."""
        from ..workload import as_workload
        wl = as_workload(sch, "MeasureInput.from_schedule")
        return cls.from_workload(wl, sch.trace.as_json(), target, seed=sch.seed, fault=fault,
                                 check_seed=check_seed, emulate=emulate)

    @classmethod
    def from_workload(cls, wl, trace, target="llvm", seed: int = 0,
                      fault: str | None = None, check_seed: int = 0,
                      emulate: bool = False) -> "MeasureInput":
        """The input for workload ``wl`` scheduled by ``trace`` (a Trace or its JSON).
        A user's workload travels as its JSON, with its expected outputs for the
        inputs of ``make_args(check_seed)`` computed here, once."""
        from ..target import as_target
        trace = trace.as_json() if hasattr(trace, "as_json") else trace
        target = str(as_target(target))
        if wl.library:
            return cls(wl.name, wl.params, wl.dtype, trace, target, seed, fault,
                       emulate=emulate)
        from .expected import expected_file
        data = wl._cache.get("json") or wl._cache.setdefault("json", wl.to_json())
        return cls(wl.name, (), wl.dtype, trace, target, seed, fault, data,
                   expected_file(wl, check_seed), emulate)

    def workload(self):
        """Rebuild the Workload: ``ops.get(op, dtype=..., **params)`` for a library op,
        ``Workload.from_json`` (kept for the next input) for a user's."""
        if self.workload_json is None:
            from .. import ops
            return ops.get(self.op, dtype=self.dtype, **dict(self.params))
        text = json.dumps(self.workload_json, sort_keys=True)
        wl = _decoded.get(text)
        if wl is None:
            from ..workload import Workload
            wl = _decoded[text] = Workload.from_json(self.workload_json)
            while len(_decoded) > 8:
                _decoded.popitem(last=False)
        _decoded.move_to_end(text)
        return wl

    def schedule(self):
        """Rebuild the schedule: replay the trace on a fresh ``Schedule(workload, seed)``."""
        from ..schedule import Schedule, Trace
        return Trace.from_json(self.trace).apply_to(Schedule(self.workload(), seed=self.seed))

    def as_json(self) -> dict:
        out = {"op": self.op, "params": {k: _thaw(v) for k, v in self.params},
               "dtype": self.dtype, "trace": self.trace, "target": self.target,
               "seed": self.seed, "fault": self.fault}
        if self.workload_json is not None:
            out.update(workload=self.workload_json, expected=self.expected)
        if self.emulate:
            out["emulate"] = True
        return out

    @classmethod
    def from_json(cls, data: dict) -> "MeasureInput":
        try:
            wl, expected = data.get("workload"), data.get("expected")
            if not isinstance(wl, (dict, type(None))) or not isinstance(expected, (str, type(None))):
                raise TypeError("workload must be an object and expected a path")
            if not isinstance(data.get("emulate", False), bool):
                raise TypeError("emulate must be true or false")
            return cls(data["op"], tuple(data["params"].items()), data["dtype"], data["trace"],
                       data.get("target", "llvm"), int(data.get("seed", 0)), data.get("fault"),
                       wl, expected, data.get("emulate", False))
        except (KeyError, AttributeError, TypeError, ValueError) as e:
            raise MeasureError(f"a measure input needs op, params (an object), dtype and trace "
                               f"(and, for a workload not in the library, its JSON and expected "
                               f"outputs); this one is malformed ({e!r})") from None


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

    ``emulated``: the candidate ran on the host emulator of the CUDA C (its input's
    ``emulate``), so ``run_secs`` holds the host seconds of that one checked run, a
    marker that it ran and was correct, never a GPU time. ``resources``: for a cuda
    kernel compiled with nvcc (or NVRTC), what ptxas reported per kernel name
    (``registers``, ``spill_stores``, ``spill_loads``, ``shared_bytes``,
    ``local_bytes``); None where unknown.

    ``estimate``: the candidate was stopped early (``RunConfig.early_stop_factor``):
    two warm looks at it were both far slower than the best so far, and ``run_secs``
    holds the faster look's seconds per call, one measurement with no repeats, not
    a median.
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
    emulated: bool = False
    resources: dict | None = None
    estimate: bool = False

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
