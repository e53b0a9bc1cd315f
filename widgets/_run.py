"""Run glue for the Run button: build, check against numpy, time in-process.

A stand-in until ``explorer.measure`` exists (it will run candidates in worker
processes with timeouts); kept small on purpose. Times are medians of a few
repeats after a warm-up; the naive schedule and the numpy reference are timed
the same way so the speed-ups compare like with like.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from explorer import Schedule, build
from explorer.backends.target import Target, as_target

INTERP_SECONDS_PER_FLOP = 2.5e-7   # measured: ~0.4 us per multiply-add in the interpreter


@dataclass(frozen=True)
class RunResult:
    """What the Run button shows. ``error`` is set when building, running or the
    correctness check failed; then ``seconds`` may be None."""
    seconds: float | None
    gflops: float | None
    naive_seconds: float | None
    numpy_seconds: float | None
    max_error: float | None
    backend: str
    note: str = ""
    error: str | None = None

    @property
    def correct(self) -> bool:
        return self.error is None and self.max_error is not None

    @property
    def speedup_naive(self) -> float | None:
        return _ratio(self.naive_seconds, self.seconds)

    @property
    def speedup_numpy(self) -> float | None:
        return _ratio(self.numpy_seconds, self.seconds)

    def summary(self) -> str:
        if self.seconds is None:
            return f"failed: {self.error}"
        parts = [f"{self.seconds * 1e3:.3f} ms"]
        if self.gflops is not None:
            parts.append(f"{self.gflops:.2f} GFLOP/s")
        if self.speedup_naive is not None:
            parts.append(f"{self.speedup_naive:.2f}x vs naive")
        if self.speedup_numpy is not None:
            parts.append(f"{self.speedup_numpy:.2f}x vs numpy")
        if self.error is not None:
            parts.append(f"WRONG: {self.error}")
        elif self.max_error is not None:
            parts.append(f"correct (max abs error {self.max_error:.2g})")
        else:
            parts.append("not checked (no numpy reference)")
        return " | ".join(parts) + f" [{self.backend}]"


def _ratio(a, b):
    return a / b if a is not None and b else None


def median_seconds(fn, repeats: int = 5, warmup: bool = True, min_sample: float = 2e-3,
                   max_number: int = 200) -> float:
    """Median seconds of one call of ``fn`` over ``repeats`` samples; a sample runs
    ``fn`` enough times to last ``min_sample`` seconds (short kernels)."""
    if warmup:
        fn()
    t0 = time.perf_counter()
    fn()
    once = time.perf_counter() - t0
    number = max(1, min(max_number, int(min_sample / max(once, 1e-9))))
    samples = [once] if number == 1 else []
    while len(samples) < repeats:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number)
    return statistics.median(samples)


class Runner:
    """Builds, checks and times schedules of one workload on one target.

    A target whose backend cannot build a schedule (the llvm backend is young,
    no GPU here) falls back to the interpreter, with a note saying so.
    """

    def __init__(self, workload, target="llvm", repeats: int = 5,
                 max_interp_seconds: float = 20.0):
        self.workload = workload
        self.target = as_target(target) if not isinstance(target, Target) else target
        self.repeats = repeats
        self.max_interp_seconds = max_interp_seconds
        self._naive: dict = {}
        self._numpy: float | None = None

    def build(self, sch) -> tuple:
        """(kernel, backend name, note)."""
        if self.target.kind != "interp":
            try:
                return build(sch, self.target), self.target.kind, ""
            except Exception as e:  # a young backend may fail in many ways; show why
                note = (f"{self.target.kind} could not build this schedule "
                        f"({type(e).__name__}: {e}); ran it in the interpreter instead")
        else:
            note = ""
        try:
            self._check_interp_size()
        except RuntimeError as e:
            raise RuntimeError(f"{note}; but {e}" if note else str(e)) from None
        return build(sch, "interp"), "interp", note

    def _check_interp_size(self):
        flops = getattr(self.workload, "flops", 0)
        guess = flops * INTERP_SECONDS_PER_FLOP
        if guess > self.max_interp_seconds:
            raise RuntimeError(f"the interpreter would need about {guess:.0f} s for "
                               f"{self.workload}; use a smaller shape or an llvm target")

    def run(self, sch) -> RunResult:
        try:
            kernel, backend, note = self.build(sch)
        except Exception as e:
            return RunResult(None, None, None, None, None, "none", error=_msg(e))
        return self._measure(kernel, backend, note)

    def _measure(self, kernel, backend: str, note: str) -> RunResult:
        wl = self.workload
        args = wl.make_args(seed=0) if wl is not None else _zeros(kernel)
        repeats = self.repeats if backend != "interp" else 1
        try:
            kernel(*args)
            max_error, error = (wl.check(args), None) if wl is not None else (None, None)
        except Exception as e:
            max_error, error = None, _msg(e)
        try:
            secs = median_seconds(lambda: kernel(*args), repeats, warmup=backend != "interp")
        except Exception as e:
            return RunResult(None, None, None, None, None, backend, note, error or _msg(e))
        gflops = wl.flops / secs / 1e9 if wl is not None else None
        if wl is not None and kernel.func == wl.func and error is None:
            self._naive.setdefault(backend, secs)    # this is the naive schedule: time it once
        return RunResult(secs, gflops, self.naive_seconds(backend), self.numpy_seconds(),
                         max_error, backend, note, error)

    def naive_seconds(self, backend: str) -> float | None:
        """Median time of the unscheduled function on ``backend`` (cached)."""
        if self.workload is None:
            return None
        if backend not in self._naive:
            try:
                kernel = build(Schedule(self.workload), backend)
                args = self.workload.make_args(seed=0)
                reps = self.repeats if backend != "interp" else 1
                self._naive[backend] = median_seconds(lambda: kernel(*args), reps,
                                                      warmup=backend != "interp")
            except Exception:
                self._naive[backend] = None
        return self._naive[backend]

    def numpy_seconds(self) -> float | None:
        """Median time of numpy on the workload (cached): the engine's numpy baseline
        (one matmul, im2col + matmul for conv2d) where it has one, else the numpy
        reference the results are checked against."""
        if self.workload is None:
            return None
        if self._numpy is None:
            self._numpy = median_seconds(numpy_call(self.workload), self.repeats)
        return self._numpy


def numpy_call(wl):
    """A zero-argument callable computing ``wl`` with numpy."""
    args = wl.make_args(seed=0)
    try:
        from explorer.measure.baselines import numpy_impl
        call = numpy_impl(wl.name, dict(wl.params), args)
    except ImportError:
        call = None
    if call is not None:
        return call
    inputs = args[:len(wl.inputs)]
    return lambda: wl.reference(*inputs)


def _zeros(kernel) -> list:
    import numpy as np
    return [np.zeros(p.shape, dtype=p.dtype) for p in kernel.params]


def _msg(e: Exception) -> str:
    return f"{type(e).__name__}: {e}"
