"""``explorer bench --target cuda``: our CUDA kernels against the GPU libraries.

With a GPU (pycuda and a driver): per case, the expert schedule's kernel (a schedule
sampled from the GPU design space, seed 0, where there is no expert one) and, with
``--db``, the database's best GPU measurement (the "tuned" row; emulated records
never count), each built, compiled with nvcc, checked against numpy and timed with
CUDA events in measurement workers; against cuBLAS/cuDNN through PyTorch and
cuBLAS through CuPy where installed (``explorer.measure.gpu_baselines``; fp32,
TF32 off). Rounds are interleaved as in the CPU bench.

Without a GPU the command refuses, saying what is missing (pycuda, the driver).
With ``--emulate`` it runs the same kernels once each on the host emulator of
their CUDA C and checks them against numpy: emulation measures no speed, so the
rows say whether each kernel is correct and give no time.
"""
from __future__ import annotations

import os
import time

from ..errors import BuildError
from ..measure import MeasureInput, Measurer, RunConfig
from ..measure.pool import WorkerDied, WorkerTimeout
from ..measure.gpu_baselines import (GPU_IMPLS, available, gpu_baseline_pool,
                                     gpu_baseline_request)
from ..schedule import Schedule, Trace
from .bench import Bench, Contender, _versions, expert_schedule_for

EMULATED_NOTE = "emulated: equals numpy; no time (emulation measures no speed)"
EMULATE_HINT = ("explorer bench --target cuda --emulate checks the kernels' correctness on the "
                "host emulator without a GPU (it measures no speed)")


def refuse_without_gpu(target) -> None:
    """BuildError saying what is missing when kernels cannot be timed on a GPU here."""
    from ..backends import check_buildable
    try:
        check_buildable(target)
    except BuildError as e:
        raise BuildError(f"{e}; {EMULATE_HINT}") from None


class EmulatedContender(Contender):
    """A row run once on the host emulator: correct or not, never a time."""

    def row(self, flops: int) -> dict:
        out = super().row(flops)
        out.update(median_secs=None, min_secs=None, max_secs=None, samples=[], gflops=None)
        if not out["error"]:
            out["note"] = "; ".join(filter(None, [EMULATED_NOTE, self.note]))
        return out


class CudaBench(Bench):
    """Our kernels (and, on a GPU, the libraries) per case; ``run(cases)`` gives the
    report that ``bench.format_table`` prints. The CPU bench's rounds and rows
    (``run_case``, ``close``) with GPU contenders."""

    def __init__(self, target, rounds: int = 5, quick: bool = False, emulate: bool = False,
                 db=None, libraries=GPU_IMPLS, log=None):
        # not Bench.__init__: no CPU threads, scaling or numpy/torch CPU pools here
        self.target, self.rounds, self.quick = target, rounds, quick
        self.emulate, self.db = emulate, db
        self.cfg = RunConfig(repeats=1, number=1, min_repeat_secs=0.02 if quick else 0.1,
                             warmup=1, cutoff_factor=None, run_timeout=120.0,
                             build_timeout=300.0)
        self.log = log or (lambda msg: None)
        self.notes: list = []
        if emulate:
            self.notes.append("emulation measures no speed: each kernel ran once on the host "
                              "emulator of its CUDA C and was checked against numpy")
        self.measurer = Measurer(target, self.cfg, emulate=emulate)
        self.pools: dict = {}
        for impl in () if emulate else libraries:
            missing = available(impl)
            if missing:
                self.notes.append(missing)
            else:
                self.pools[impl] = gpu_baseline_pool(impl)

    def _ours(self, impl: str, sch, note: str) -> Contender:
        inp = MeasureInput.from_schedule(sch, self.target, emulate=self.emulate)
        build = self.measurer.builder.build([inp])[0]
        run = lambda: self.measurer.runner.run_one(inp, build)   # noqa: E731
        if self.emulate:
            return EmulatedContender(impl, run, note, once=True)
        return Contender(impl, run, note)

    def _tuned(self, wl) -> Contender:
        top = self.db.best(wl, self.target)
        if not top:
            return Contender("tuned", None, f"no GPU measurement of this case on "
                             f"{self.target} in {self.db.path} (emulated records do not count):"
                             " tune it on a GPU with explorer tune --target cuda --db first")
        sch = Trace.from_json(top[0].trace).apply_to(Schedule(wl))
        return self._ours("tuned", sch, f"best of {len(self.db.records(wl, self.target, False))}"
                          " GPU records")

    def _sampled(self, wl) -> Contender:
        """A schedule of the GPU design space (seed 0): there are no expert CUDA schedules."""
        from ..errors import ExplorerError
        from ..space import DesignSpace
        try:
            got = DesignSpace(wl, self.target).sample(1, seed=0)
        except ExplorerError as e:
            got, why = [], str(e)
        else:
            why = "the design space gave no valid schedule"
        if not got:
            return Contender("sampled", None, f"no GPU schedule of {wl.key}: {why}")
        return self._ours("sampled", got[0], "one schedule of the GPU design space (seed 0)")

    def contenders(self, wl) -> list:
        expert, note = expert_schedule_for(wl, self.target)
        rows = [self._sampled(wl) if note else self._ours("expert", expert, "")]
        if self.db is not None:
            rows.append(self._tuned(wl))
        for impl, pool in self.pools.items():
            rows.append(Contender(impl, lambda p=pool, i=impl: gpu_baseline_request(
                p, i, wl, self.cfg)))
        return rows

    def run(self, cases: list) -> dict:
        report = {"version": 1, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                  "target": str(self.target), "threads": None, "rounds": self.rounds,
                  "min_repeat_secs": self.cfg.min_repeat_secs, "quick": self.quick,
                  "emulated": self.emulate,
                  "machine": {"cores": os.cpu_count(), "loadavg_start": list(os.getloadavg())},
                  "versions": _versions(), "expert": "explorer.space.expert",
                  "baselines": self._baseline_info()}
        report["cases"] = [self.run_case(c) for c in cases]
        report.update(scaling=None, build_time=None, notes=self.notes)
        return report

    def _baseline_info(self) -> dict:
        out = {}
        for impl, pool in self.pools.items():
            try:
                msg = pool[0].call("gpu_info", {"impl": impl}, lambda ph, m: 120.0)
            except (WorkerDied, WorkerTimeout) as e:   # reported; the bench goes on
                pool.restart(0)
                msg = {"error": f"the {impl} worker failed: {e}"}
            out[impl] = msg.get("result", {"error": msg.get("error")})
        return out
