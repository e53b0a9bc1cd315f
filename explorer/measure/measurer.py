"""The measurer: a worker pool with a builder and a runner over it, for one target.

    with Measurer("llvm") as m:
        results = m.measure([MeasureInput.from_schedule(sch, m.target) for sch in candidates])
        best = min((r for r in results if r.ok), key=lambda r: r.median_secs)

Builds of a batch run in parallel on all workers; runs follow one at a time. A
Measurer is used from one thread at a time (a tuner's loop); make one per thread
otherwise.
Workers run with one BLAS thread (the numpy reference must not leave OpenBLAS
threads spinning beside the kernel being timed) and OpenMP sized to the
target's cores; kernels take their thread count from the target.
"""
from __future__ import annotations

import math
import os

from ..target import as_target
from .builder import LocalBuilder
from .config import RunConfig
from .pool import PoolOwner, WorkerPool
from .result import MeasureInput
from .runner import LocalRunner


def measure_env(threads: int) -> dict:
    """Environment of measurement workers (see the module docstring)."""
    return {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "OMP_NUM_THREADS": str(max(1, threads))}


class Measurer(PoolOwner):
    """Builder + runner over one pool of ``workers`` processes (default: the target's
    cores; for a cuda target the host's). ``emulate`` (cuda only): candidates run on
    the host emulator of their CUDA C, checked against numpy, with no GPU time."""

    def __init__(self, target="llvm", config: RunConfig | None = None,
                 workers: int | None = None, emulate: bool = False):
        self.target = as_target(target)
        if emulate and self.target.kind != "cuda":
            from ..errors import MeasureError
            raise MeasureError(f"emulate=True emulates CUDA C on the host; target "
                               f"{self.target} is not a cuda target")
        self.emulate = emulate
        self.config = config or RunConfig()
        cores = os.cpu_count() or 1
        threads = self.target.num_cores or cores
        self.pool = WorkerPool(workers or max(1, min(threads, cores)),
                               env=measure_env(threads))
        self.builder = LocalBuilder(self.pool, self.config.build_timeout)
        self.runner = LocalRunner(self.pool, self.config)

    def input(self, sch, fault: str | None = None) -> MeasureInput:
        """The ``MeasureInput`` of schedule ``sch`` for this measurer's target (a user's
        workload checked on the inputs of this measurer's ``config.seed``)."""
        return MeasureInput.from_schedule(sch, self.target, fault=fault,
                                          check_seed=self.config.seed, emulate=self.emulate)

    def measure(self, inputs: list, cutoff_secs: float | None = None) -> list:
        """Build all ``inputs`` in parallel, then run them one by one: a
        ``MeasureResult`` per input, in order; failures are values."""
        inputs = list(inputs)
        return self.runner.run(inputs, self.builder.build(inputs), cutoff_secs)

    def remeasure(self, inputs: list, rounds: int) -> list:
        """Build ``inputs`` once, then run them ``rounds`` times, interleaved (round r
        runs each input once, each run checked against numpy again): per input, the
        list of its ``rounds`` results. No cutoff: these are known good candidates."""
        inputs = list(inputs)
        builds = self.builder.build(inputs)
        out: list = [[] for _ in inputs]
        for _ in range(rounds):
            for i, res in enumerate(self.runner.run(inputs, builds, cutoff_secs=math.inf)):
                out[i].append(res)
        return out

    def measure_schedules(self, schedules: list, cutoff_secs: float | None = None) -> list:
        return self.measure([self.input(s) for s in schedules], cutoff_secs)

    @property
    def best_secs(self) -> dict:
        """Best median seconds so far per (``MeasureInput.workload_key``, target)."""
        return self.runner.best_secs


def measure(schedules: list, target="llvm", config: RunConfig | None = None,
            emulate: bool = False) -> list:
    """Measure schedules once with a throw-away ``Measurer`` (notebooks, scripts)."""
    with Measurer(target, config, emulate=emulate) as m:
        return m.measure_schedules(schedules)
