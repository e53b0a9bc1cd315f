"""Interactive measurement: one schedule, now, the way the tuner measures it.

    with InteractiveMeasurer("llvm") as m:
        r = m.measure(sch)
        print(r.summary())          # 1.234 ms | 27.18 GFLOP/s | 8.10x vs naive | ...
        r.seconds, r.gflops         # or r.error_kind, r.error when it failed

A notebook's Run button measures one schedule at a time and expects an answer
in about a second. ``InteractiveMeasurer`` keeps one worker process alive
between calls (its imports and compile caches stay warm) and measures through
the tuner's own ``LocalRunner``: replay the trace, build, check the first run
against the reference, time repeats with the same ``RunConfig`` protocol. A
kernel that crashes or hangs takes only the worker down: the result is a
failed value (``error_kind`` "crash" or "timeout") and the next call gets a
fresh worker.

Next to the schedule's time it shows, measured once per workload: the
unscheduled program on the same target and in the same worker, and, for an
``explorer.ops`` operator, numpy in a process of its own without the
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE overrides (``explorer.measure.baselines``,
as ``explorer tune`` does), so the speed-ups compare like with like. A target
that cannot build a schedule here (a GPU target on a machine without one) falls
back to the interpreter, with a note saying so. A ``cuda`` target where no GPU can
run (no pycuda or no driver) runs the generated CUDA C on the host emulator instead:
checked against the reference, its time is no GPU time (``emulated``, :data:`EMULATED`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..target import as_target
from ..errors import MeasureError
from .baselines import baseline_pool, baseline_request
from .config import RunConfig
from .measurer import measure_env
from .pool import PoolOwner, WorkerDied, WorkerPool, WorkerTimeout
from .result import MeasureInput, MeasureResult
from .roofline import Roofline, roofline_of_result
from .runner import LocalRunner

HANDLERS = "explorer.measure.jobs,explorer.measure.roofline"
EMPTY_TRACE = {"version": 1, "insts": [], "decisions": []}   # the unscheduled program
EMULATED = "emulated: correctness only, no GPU time"


def interactive_config(repeats: int = 5, **changes) -> RunConfig:
    """The tuner's ``RunConfig`` with ``repeats`` timed repeats and no cutoff (a person
    asked for this schedule's time, however slow)."""
    return RunConfig(repeats=repeats, cutoff_factor=None, **changes)


@dataclass(frozen=True)
class InteractiveResult:
    """One interactive measurement: the schedule's ``MeasureResult``, where it ran
    (``backend``: a target kind), and the naive program's and numpy's results on
    the same workload for comparison (None when not measured)."""
    result: MeasureResult
    backend: str
    naive: MeasureResult | None = None
    numpy: MeasureResult | None = None
    note: str = ""
    checked_by: str = "library"

    @property
    def ok(self) -> bool:
        """Built, checked correct and timed."""
        return self.result.ok

    @property
    def emulated(self) -> bool:
        """Ran on the host emulator of the CUDA C: checked, but its time is no GPU time."""
        return bool(getattr(self.result, "emulated", False))

    @property
    def seconds(self) -> float | None:
        return self.result.median_secs

    @property
    def gflops(self) -> float | None:
        return self.result.gflops

    @property
    def error(self) -> str | None:
        return self.result.error

    @property
    def error_kind(self) -> str | None:
        """One of ``ERROR_KINDS`` when the measurement failed."""
        return self.result.error_kind

    @property
    def max_abs_error(self) -> float | None:
        return self.result.max_abs_error

    @property
    def naive_seconds(self) -> float | None:
        return _secs(self.naive)

    @property
    def numpy_seconds(self) -> float | None:
        return _secs(self.numpy)

    @property
    def speedup_naive(self) -> float | None:
        return _ratio(self.naive_seconds, self.seconds)

    @property
    def speedup_numpy(self) -> float | None:
        return _ratio(self.numpy_seconds, self.seconds)

    @property
    def reference_name(self) -> str:
        """What the output was checked against, in words."""
        return "the unscheduled program" if self.checked_by == "program" else "numpy"

    def speed_parts(self) -> list:
        """The time of a successful run, its GFLOP/s and speed-ups, each as text
        (``"1.234 ms"``, ``"27.18 GFLOP/s"``, ``"8.10x vs naive"``...): one wording for
        :meth:`summary` and the notebook's Run bar."""
        if self.emulated:
            return [EMULATED]
        parts = [f"{self.seconds * 1e3:.3f} ms"]
        if self.gflops is not None:
            parts.append(f"{self.gflops:.2f} GFLOP/s")
        if self.speedup_naive is not None:
            parts.append(f"{self.speedup_naive:.2f}x vs naive")
        if self.speedup_numpy is not None:
            parts.append(f"{self.speedup_numpy:.2f}x vs numpy")
        return parts

    def summary(self) -> str:
        """One line: time, GFLOP/s, speed-ups and the check, or what failed."""
        if not self.ok:
            return f"failed ({self.error_kind}): {self.error} [{self.backend}]"
        parts = self.speed_parts()
        if self.checked_by == "program":
            parts.append(f"correct vs the unscheduled program (max abs error "
                         f"{self.max_abs_error:.2g})")
        else:
            parts.append(f"correct (max abs error {self.max_abs_error:.2g})")
        return " | ".join(parts) + f" [{self.backend}]"


def _secs(r: MeasureResult | None) -> float | None:
    return r.median_secs if r is not None and r.ok else None


def _ratio(a, b):
    return a / b if a is not None and b else None


class InteractiveMeasurer(PoolOwner):
    """Measures one schedule at a time in one kept-alive worker process.

    ``target``: where kernels run. ``config``: the timing protocol (default
    :func:`interactive_config`). ``fallback``: the target used when ``target``
    cannot build a schedule here (None: report the build error). ``numpy``:
    measure numpy's time on library operators for comparison. ``emulate``: run a
    ``cuda`` target's kernels on the host emulator (None: when no GPU can run them
    here). Use from one thread; ``close()`` (or ``with``) ends the worker.
    """

    def __init__(self, target="llvm", config: RunConfig | None = None,
                 fallback: str | None = "interp", numpy: bool = True,
                 emulate: bool | None = None):
        self.target = as_target(target)
        self.emulate = self.target.kind == "cuda" and (
            _no_gpu(self.target) if emulate is None else bool(emulate))
        self.config = config or interactive_config()
        self.fallback = as_target(fallback) if fallback else None
        self.compare_numpy = numpy
        self.threads = max(1, self.target.num_cores or os.cpu_count() or 1)
        self.pool = WorkerPool(1, HANDLERS, env=measure_env(self.threads))
        self.runner = LocalRunner(self.pool, self.config)
        self._workloads: dict = {}
        self._naive: dict = {}
        self._numpy: dict = {}
        self._roofline: Roofline | None = None

    # ------------------------------------------------------------ measuring
    def measure(self, sch, fault: str | None = None, compare: bool = True
                ) -> InteractiveResult:
        """Build, check and time ``sch`` (a Schedule, Workload or PrimFunc) now. With
        ``compare``, also the naive program and numpy (measured once per workload).
        ``fault`` injects a failure (``explorer.measure.faults``; tests)."""
        wl = self._workload(sch)
        trace = sch.trace if hasattr(sch, "trace") else EMPTY_TRACE
        seed = getattr(sch, "seed", 0)
        target, note = self.target, ""
        result = self._run(wl, trace, target, seed, fault)
        if result.error_kind == "build" and self.fallback is not None \
                and self.fallback.kind != target.kind:
            note = (f"{target.kind} could not build this schedule ({result.error}); ran it "
                    f"in the {_backend_name(self.fallback)} instead")
            target = self.fallback
            result = self._run(wl, trace, target, seed, fault)
        if result.ok and getattr(result, "emulated", False):   # no time to compare
            return InteractiveResult(result, target.kind, note=note, checked_by=wl.checked_by)
        if _is_naive(sch, wl) and result.ok:
            self._naive[(wl.key, str(target))] = result
        out = InteractiveResult(result, target.kind, note=note, checked_by=wl.checked_by)
        if not (compare and result.ok):
            return out
        return InteractiveResult(result, target.kind, self.naive(wl, target), self.numpy(wl),
                                 note, wl.checked_by)

    def naive(self, wl, target=None) -> MeasureResult:
        """The unscheduled program of ``wl`` on ``target`` (default this measurer's),
        measured once and kept."""
        target = as_target(target) if target is not None else self.target
        key = (wl.key, str(target))
        if key not in self._naive:
            self._naive[key] = self._run(self._workload(wl), EMPTY_TRACE, target, 0, None)
        return self._naive[key]

    def numpy(self, wl) -> MeasureResult | None:
        """numpy on ``wl`` (a library operator; None otherwise, or when disabled): its
        dedicated implementation, else its numpy reference, in a process of its own
        without the OPENBLAS overrides; measured once and kept."""
        if not self.compare_numpy or not wl.library:
            return None
        if wl.key not in self._numpy:
            with baseline_pool("numpy", self.threads) as pool:
                self._numpy[wl.key] = baseline_request(pool, "numpy", wl, self.config,
                                                       self.threads, reference_fallback=True)
        return self._numpy[wl.key]

    def roofline(self) -> Roofline:
        """The host's peak GFLOP/s and memory bandwidth, measured once in the worker
        (``explorer.measure.roofline``); MeasureError when that fails."""
        if self._roofline is None:
            host = self.target if self.target.kind == "llvm" else as_target("llvm")
            w = self.pool[0]
            try:
                msg = w.call("roofline", {"target": str(host)},
                             lambda ph, m: self.config.build_timeout)
            except (WorkerTimeout, WorkerDied) as e:
                w.restart()
                raise MeasureError(f"measuring the roofline failed: {e or 'the worker timed out'}"
                                   "; its worker was restarted") from None
            self._roofline = roofline_of_result(msg)
        return self._roofline

    def _workload(self, obj):
        """The Workload of ``obj``, one object per key (its expected outputs are
        computed once, in this process, for a user's workload)."""
        from ..workload import as_workload
        wl = as_workload(obj, "InteractiveMeasurer.measure")
        kept = self._workloads.get(wl.key)
        if kept is None or (kept.checked_by, kept.reference_fn, kept.tolerance) != \
                (wl.checked_by, wl.reference_fn, wl.tolerance):    # checked another way now
            kept = self._workloads[wl.key] = wl
        return kept

    def _run(self, wl, trace, target, seed: int, fault) -> MeasureResult:
        emulate = {"emulate": True} if self.emulate and target.kind == "cuda" else {}
        inp = MeasureInput.from_workload(wl, trace, target, seed=seed, fault=fault,
                                         check_seed=self.config.seed, **emulate)
        return self.runner.run_one(inp)

def _backend_name(target) -> str:
    return "interpreter" if target.kind == "interp" else target.kind


def _no_gpu(target) -> bool:
    """No GPU can run ``target``'s kernels here (pycuda or the driver missing)."""
    from ..backends import check_buildable
    from ..errors import BuildError
    try:
        check_buildable(target)
    except BuildError:
        return True
    return False


def _is_naive(sch, wl) -> bool:
    return getattr(sch, "func", None) == wl.func
