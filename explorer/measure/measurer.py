"""The measurer: a worker pool with a builder and a runner over it, for one target.

    with Measurer("llvm") as m:
        results = m.measure([MeasureInput.from_schedule(sch, m.target) for sch in candidates])
        best = min((r for r in results if r.ok), key=lambda r: r.median_secs)

Builds of a batch run in parallel on all workers; runs follow one at a time. While a
tuner's search runs, the workers it leaves idle build what it is likely to propose
(``prebuild``; ``measure`` takes those builds). The
kernels built stay in their workers (up to ``jobs.MAX_ARTIFACTS`` a worker), and
``remeasure`` runs a candidate measured before on its kernel instead of building
it again (a tuner's final re-timing of its fastest few). A
Measurer is used from one thread at a time (a tuner's loop); make one per thread
otherwise.
Workers run with one BLAS thread (the numpy reference must not leave OpenBLAS
threads spinning beside the kernel being timed) and OpenMP sized to the
target's cores; kernels take their thread count from the target.
"""
from __future__ import annotations

import json
import math
import os
from collections import OrderedDict

from ..target import as_target
from .builder import LocalBuilder
from .config import RunConfig
from .jobs import MAX_ARTIFACTS
from .pool import PoolOwner, WorkerPool
from .prebuild import Prebuilder, spare_workers
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
        self._built: OrderedDict = OrderedDict()   # build_key -> BuildResult
        self.prebuilder = Prebuilder(self.builder, build_key,
                                     spare_workers(len(self.pool), cores))

    def input(self, sch, fault: str | None = None) -> MeasureInput:
        """The ``MeasureInput`` of schedule ``sch`` for this measurer's target (a user's
        workload checked on the inputs of this measurer's ``config.seed``)."""
        return MeasureInput.from_schedule(sch, self.target, fault=fault,
                                          check_seed=self.config.seed, emulate=self.emulate)

    def measure(self, inputs: list, cutoff_secs: float | None = None) -> list:
        """Build all ``inputs`` in parallel, then run them one by one: a
        ``MeasureResult`` per input, in order; failures are values."""
        inputs = list(inputs)
        self.prebuilder.drain()
        builds = [self.prebuilder.take(inp) for inp in inputs]
        todo = [i for i, b in enumerate(builds) if b is None]
        for i, b in zip(todo, self.builder.build([inputs[i] for i in todo])):
            builds[i] = b
        self._keep(inputs, builds)
        return self.runner.run(inputs, builds, cutoff_secs)

    def prebuild(self, inputs: list) -> None:
        """Build ``inputs`` (best first) on the workers the search leaves idle, while it
        runs; ``measure`` takes the results (``prebuild.Prebuilder``)."""
        self.prebuilder.want(inputs)

    def _keep(self, inputs: list, builds: list) -> None:
        """Remember where the good builds' kernels live (as many as the workers keep)."""
        for inp, b in zip(inputs, builds):
            if b.ok:
                self._built[build_key(inp)] = b
                self._built.move_to_end(build_key(inp))
        while len(self._built) > MAX_KEPT * len(self.pool):
            self._built.popitem(last=False)

    def remeasure(self, inputs: list, rounds: int) -> list:
        """Run ``inputs`` ``rounds`` times, interleaved (round r runs each input once,
        each run checked against numpy again): per input, the list of its ``rounds``
        results. Each is built once, unless ``measure`` built it before (its kernel
        is still in its worker, or the worker rebuilds it). No cutoff: these are known
        good candidates; repeats of ``config.retime_min_repeat_secs``."""
        inputs = list(inputs)
        self.prebuilder.drain()
        builds = [self._built.get(build_key(inp)) for inp in inputs]
        todo = [i for i, b in enumerate(builds) if b is None]
        for i, b in zip(todo, self.builder.build([inputs[i] for i in todo])):
            builds[i] = b
        out: list = [[] for _ in inputs]
        retime = self.config.for_retime()
        for _ in range(rounds):
            for i, res in enumerate(self.runner.run(inputs, builds, math.inf, retime)):
                out[i].append(res)
        return out

    def measure_schedules(self, schedules: list, cutoff_secs: float | None = None) -> list:
        return self.measure([self.input(s) for s in schedules], cutoff_secs)

    @property
    def best_secs(self) -> dict:
        """Best median seconds so far per (``MeasureInput.workload_key``, target)."""
        return self.runner.best_secs


# Builds remembered per worker: as many kernels as a worker keeps (one evicted there
# since is rebuilt by the worker when it is run).
MAX_KEPT = MAX_ARTIFACTS


def build_key(inp: MeasureInput) -> tuple:
    """What makes two inputs the same kernel: workload, target and trace (the trace's
    decisions fix every sampled value, so its seed does not count), fault, emulation."""
    return (inp.workload_key, inp.target, json.dumps(inp.trace, sort_keys=True), inp.fault,
            inp.expected, inp.emulate)


def measure(schedules: list, target="llvm", config: RunConfig | None = None,
            emulate: bool = False) -> list:
    """Measure schedules once with a throw-away ``Measurer`` (notebooks, scripts)."""
    with Measurer(target, config, emulate=emulate) as m:
        return m.measure_schedules(schedules)
