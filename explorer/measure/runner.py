"""The runner: checks and times candidates, one at a time, in the pool's workers.

Candidates run one after another (timing two at once on a 2-core machine would
measure the contention), each in the worker that built it, or rebuilt in a
worker from its trace when there is no live artifact. The job reports its
stages (built, running, first run checked) and each stage has a deadline:
``build_timeout`` until running; until the first run ends, the cutoff kill time
when a cutoff applies, else ``run_timeout``; then what is left of ``run_timeout``.
A worker that crashes or overruns, or whose CUDA context a kernel's fault or hang
lost (``replace_worker`` in its answer), is replaced and the candidate gets a failed
``MeasureResult``; the caller carries on.

Cutoff: the runner remembers the best median per (workload, target) it has
measured; with ``config.cutoff_factor`` set, a later candidate whose first run
exceeds ``cutoff_factor`` x that best (and ``min_cutoff_secs``) is reported as
``cutoff`` right after that run instead of being timed. Early stop, where the
automatic cutoff applies: a candidate whose two warm looks both exceed
``config.early_stop_factor`` x that best gets the faster as its one sample, marked
``estimate``; estimates never change the best.
"""
from __future__ import annotations

import time
from dataclasses import replace

from .config import RunConfig
from .pool import WorkerDied, WorkerPool, WorkerTimeout
from .result import BuildResult, MeasureInput, MeasureResult


def workload_target_key(inp: MeasureInput) -> tuple:
    return (inp.workload_key, inp.target)


class LocalRunner:
    """Runs ``MeasureInput``s on ``pool``'s workers with ``config``."""

    def __init__(self, pool: WorkerPool, config: RunConfig | None = None):
        self.pool = pool
        self.config = config or RunConfig()
        self.best_secs: dict = {}

    def cutoff_for(self, inp: MeasureInput) -> float | None:
        """The cutoff this runner would apply to ``inp`` now (None: none; none for a cuda
        target, whose runs ``runtime.measure_cuda`` times without one, nor for an
        emulated run, whose host seconds say nothing of speed)."""
        cfg = self.config
        if inp.target.startswith("cuda"):
            return None
        best = self.best_secs.get(workload_target_key(inp))
        if cfg.cutoff_factor is None or best is None:
            return None
        return max(cfg.cutoff_factor * best, cfg.min_cutoff_secs)

    def early_stop_for(self, inp: MeasureInput) -> float | None:
        """Seconds of a warm call over which ``inp`` is stopped early (None: timed in
        full): ``early_stop_factor`` x the best so far, where the cutoff applies."""
        factor = self.config.early_stop_factor
        if factor is None or self.cutoff_for(inp) is None:
            return None
        return factor * self.best_secs[workload_target_key(inp)]

    def remember_best(self, inp: MeasureInput, secs: float) -> None:
        """Take ``secs`` as a measured median of ``inp``'s workload and target (a
        resumed run's records), for the cutoff and the early stop."""
        key = workload_target_key(inp)
        self.best_secs[key] = min(self.best_secs.get(key, float("inf")), secs)

    def run(self, inputs: list, builds: list | None = None,
            cutoff_secs: float | None = None, config: RunConfig | None = None) -> list:
        """One ``MeasureResult`` per input, in order. ``builds`` are the builder's
        results for the same inputs (failed builds are not run); ``cutoff_secs``
        overrides the automatic cutoff for all of them, ``config`` this runner's."""
        builds = list(builds) if builds is not None else [None] * len(inputs)
        return [self.run_one(inp, b, cutoff_secs, config) for inp, b in zip(inputs, builds)]

    def run_one(self, inp: MeasureInput, build: BuildResult | None = None,
                cutoff_secs: float | None = None,
                config: RunConfig | None = None) -> MeasureResult:
        if build is not None and not build.ok:
            return MeasureResult.failed(inp, build.error_kind, build.error)
        cutoff = cutoff_secs if cutoff_secs is not None else self.cutoff_for(inp)
        stop = self.early_stop_for(inp) if cutoff_secs is None else None
        w, artifact = self._place(build)
        start = time.monotonic()
        result = self._call(w, inp, artifact, cutoff, stop, config or self.config)
        changes = {"wall_secs": time.monotonic() - start}
        if build is not None and result.build_secs is None:
            changes.update(build_secs=build.build_secs, compile_secs=build.compile_secs)
        result = replace(result, **changes)
        if result.ok and not result.emulated and not result.estimate:
            self.remember_best(inp, result.median_secs)
        return result

    def _place(self, build: BuildResult | None) -> tuple:
        if build is not None and build.worker is not None and build.worker < len(self.pool):
            w = self.pool[build.worker]
            if w.generation == build.generation:
                return w, build.artifact
        return self.pool[0], None

    def _call(self, w, inp: MeasureInput, artifact, cutoff, stop, cfg) -> MeasureResult:
        payload = {"input": inp.as_json(), "artifact": artifact, "config": cfg.as_json(),
                   "cutoff_secs": cutoff, "early_stop_secs": stop}
        kill = min(cfg.run_timeout, max(cfg.kill_factor * cutoff, cfg.min_kill_secs)) \
            if cutoff is not None else cfg.run_timeout
        marks: dict = {}

        def timeout(phase, msg):
            marks[phase] = time.monotonic()
            if phase in (None, "built"):
                return cfg.build_timeout
            if phase == "running":
                return kill
            return max(0.1, cfg.run_timeout - (marks[phase] - marks["running"]))
        try:
            msg = w.call("run", payload, timeout)
        except WorkerTimeout as e:
            w.restart()
            return _timeout_result(inp, e.phase, artifact, cutoff, kill, cfg)
        except WorkerDied as e:
            w.restart()
            if e.at_start:
                return MeasureResult.failed(inp, "internal", str(e))
            kind = "build_crash" if e.phase is None and artifact is None else "crash"
            stage = "building" if kind == "build_crash" else "running the kernel"
            return MeasureResult.failed(inp, kind, f"the worker crashed while {stage}: {e}")
        if isinstance(msg.get("result"), dict) and msg["result"].get("replace_worker"):
            w.restart()   # a CUDA fault or hang: this process's context is lost
        return result_from_message(inp, msg)


def _timeout_result(inp, phase, artifact, cutoff, kill, cfg) -> MeasureResult:
    if phase is None and artifact is None:
        return MeasureResult.failed(inp, "build_timeout", f"the build did not finish within "
                                    f"{cfg.build_timeout:g} s (build_timeout); worker restarted")
    if phase == "running" and cutoff is not None and kill < cfg.run_timeout:
        return MeasureResult.failed(inp, "cutoff", f"the first run did not finish within "
                                    f"{kill:.3g} s ({cfg.kill_factor:g} x the cutoff "
                                    f"{cutoff:.3g} s); worker restarted", first_run_secs=None)
    if phase in (None, "built"):
        return MeasureResult.failed(inp, "timeout", "preparing the reference inputs and outputs "
                                    f"took more than {cfg.build_timeout:g} s; worker restarted")
    return MeasureResult.failed(inp, "timeout", f"the kernel did not finish within "
                                f"{cfg.run_timeout:g} s (run_timeout); worker restarted")


def result_from_message(inp: MeasureInput | None, msg: dict) -> MeasureResult:
    """The MeasureResult of a worker's ``done`` message for a run or baseline job."""
    if "error" in msg:
        return MeasureResult.failed(inp, msg.get("error_kind", "internal"), msg["error"])
    r = dict(msg["result"])
    keep = ("first_run_secs", "build_secs", "compile_secs", "max_abs_error", "flops", "number",
            "emulated", "resources", "estimate")
    kw = {k: r[k] for k in keep if r.get(k) is not None}
    if "error" in r:
        return MeasureResult.failed(inp, r["error_kind"], r["error"], **kw)
    return MeasureResult(inp, tuple(r["run_secs"]), **kw)

