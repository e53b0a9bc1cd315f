"""Exercises: run a student's schedule, check it against numpy, measure it, and say
how far it is from the goal, with hints when it falls short.

    ex = Exercise(ops.conv2d(1, 32, 30, 30, 64, 3, 3), goal=0.5)   # 50% of numpy
    sch = ex.schedule()            # a fresh Schedule of the exercise's operator
    ...                            # the student's steps
    ex.check(sch)                  # a Verdict: shown as a box in a notebook, or print it

The measurement is the project's own (``explorer.measure.InteractiveMeasurer``: a
worker process, the output checked against the numpy reference before the time
counts; numpy timed in a process of its own without the OpenBLAS overrides). The
verdict is plain data (``passed``, ``fraction``, ``hints``...) so a test or a
grader reads it without a notebook; ``verdict_of`` and ``hints_for`` are pure.
"""
from __future__ import annotations

import html
from dataclasses import dataclass

from explorer import Schedule, WorkloadError
from explorer.ir.loop_tree import block_infos, loop_infos
from explorer.measure import InteractiveMeasurer, interactive_config
from explorer.target import as_target

from .steps import numpy_best_gflops, percent


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: measured speed as a fraction of numpy's against the
    goal (``fraction`` None when the schedule failed to build, run or be correct)."""
    passed: bool
    goal: float
    fraction: float | None
    gflops: float | None
    numpy_gflops: float | None
    message: str
    hints: tuple = ()

    def __str__(self) -> str:
        lines = [("PASSED: " if self.passed else "NOT YET: ") + self.message]
        lines += [f"hint: {h}" for h in self.hints]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        color = "#2e7d32" if self.passed else "#c62828"
        width = min(100.0, 100.0 * (self.fraction or 0.0) / self.goal) if self.goal else 100.0
        bar = (f"<div style='background:#eee;width:320px;height:10px;margin:4px 0'>"
               f"<div style='background:{color};width:{width:.0f}%;height:10px'></div></div>")
        hints = "".join(f"<li>{html.escape(h)}</li>" for h in self.hints)
        return (f"<div class='se-verdict' style='border-left:4px solid {color};padding:4px 8px'>"
                f"<b style='color:{color}'>{'PASSED' if self.passed else 'NOT YET'}</b>: "
                f"{html.escape(self.message)}{bar}"
                f"{'<ul>' + hints + '</ul>' if hints else ''}</div>")


def verdict_of(result, goal: float, hints: tuple = ()) -> Verdict:
    """The verdict for an ``InteractiveResult`` against ``goal`` (a fraction of numpy's
    speed): passed when it is correct and its median run is at least that fast against
    numpy's best run."""
    if not result.ok:
        what = ("its output differs from numpy's" if result.error_kind == "wrong"
                else f"it failed ({result.error_kind})")
        return Verdict(False, goal, None, None, None, f"{what}: {result.error}", tuple(hints))
    np_gflops = numpy_best_gflops(result)
    frac = result.gflops / np_gflops if np_gflops else None
    if frac is None:
        return Verdict(False, goal, None, result.gflops, None,
                       f"correct, {result.gflops:.3g} GFLOP/s, but numpy could not be timed "
                       "for comparison", tuple(hints))
    speed = (f"correct; {result.gflops:.3g} GFLOP/s against numpy's {np_gflops:.3g} (its "
             f"best run): "
             f"{percent(frac)} of numpy")
    if frac >= goal:
        return Verdict(True, goal, frac, result.gflops, np_gflops,
                       f"{speed}, the goal is {100 * goal:.0f}%")
    return Verdict(False, goal, frac, result.gflops, np_gflops,
                   f"{speed}; the goal is {100 * goal:.0f}%: {goal / frac:.1f}x faster to go",
                   tuple(hints))


def hints_for(sch, target) -> tuple:
    """What the schedule of the main (reduction) block still lacks, as advice: a
    vectorized inner loop of the target's width, a parallel outer loop, a spatial loop
    innermost, a register tile (``cache_write`` to "local")."""
    target = as_target(target)
    func = sch.func
    loops = {lp.name: lp for lp in loop_infos(func)}
    infos = block_infos(func)
    main = next((b for b in infos if b.is_reduction), infos[-1])
    mine = [loops[n] for n in main.loops]
    lanes = target.vector_lanes
    out = []
    vec = [lp for lp in loops.values() if lp.kind == "vectorized" and main.name in lp.blocks]
    if not vec:
        out.append(f"vectorize an innermost spatial loop: split it by a multiple of this "
                   f"machine's {lanes} float32 lanes and vectorize the inner part")
    elif all(lp.extent % lanes for lp in vec):
        out.append(f"make the vectorized loop a multiple of {lanes} (the vector lanes here); "
                   f"it has {vec[0].extent}")
    if (target.num_cores or 1) > 1 and not any(lp.kind == "parallel" for lp in loops.values()):
        out.append(f"run an outer spatial loop in parallel over the {target.num_cores} cores")
    if mine and mine[-1].roles == "R":
        out.append(f"the innermost loop '{mine[-1].name}' is a reduction: reorder so a "
                   "spatial loop (contiguous in the output) is innermost")
    if main.is_reduction and not any(b.writes != main.writes and main.writes in b.reads
                                     for b in infos):
        out.append("keep a tile of the output in registers: cache_write(block, 0, 'local') "
                   "and reverse_compute_at it under the loop that walks the tiles")
    return tuple(out)


def require_schedule_of(sch, workload) -> None:
    """WorkloadError unless ``sch`` is a Schedule of ``workload``'s operator."""
    if not isinstance(sch, Schedule):
        raise WorkloadError(f"check takes the Schedule you built (start from "
                            f"exercise.schedule()), not {type(sch).__name__}")
    if sch.original != workload.func:
        raise WorkloadError(f"this schedule is of another operator ({sch.original.name}); "
                            f"the exercise is {workload.key}: start from exercise.schedule()")


class Exercise:
    """A goal on one operator: reach ``goal`` x numpy's speed on ``target`` (this host
    by default). ``hint``: a sentence of your own shown when the check fails.
    ``repeats``: timed repeats per check. ``measurer``: an
    ``explorer.measure.InteractiveMeasurer`` to share (default: one of its own, started
    at the first check; ``close()`` ends it)."""

    def __init__(self, workload, goal: float = 0.5, target="llvm", hint: str = "",
                 repeats: int = 5, measurer=None):
        if not getattr(workload, "library", False):
            raise WorkloadError(f"Exercise needs an explorer.ops operator (numpy times it "
                                f"for the goal), not {workload!r}")
        if not 0 < goal:
            raise WorkloadError(f"Exercise goal is a fraction of numpy's speed (0.5 = half "
                                f"as fast), got {goal!r}")
        self.workload, self.goal = workload, float(goal)
        self.target = as_target(target)
        self.hint = hint
        self.config = interactive_config(repeats)
        self._measurer: InteractiveMeasurer | None = measurer
        self._owns_measurer = measurer is None

    def schedule(self) -> Schedule:
        """A fresh, unscheduled Schedule of the exercise's operator: start here."""
        return Schedule(self.workload)

    def check(self, sch) -> Verdict:
        """Run ``sch``, check it against numpy, measure it and judge it against the goal."""
        require_schedule_of(sch, self.workload)
        if self._measurer is None:
            self._measurer = InteractiveMeasurer(self.target, self.config)
        result = self._measurer.measure(sch)
        hints = hints_for(sch, self.target) if result.ok else ()
        verdict = verdict_of(result, self.goal, hints)
        if not verdict.passed and self.hint:
            return Verdict(**{**verdict.__dict__, "hints": verdict.hints + (self.hint,)})
        return verdict

    def close(self) -> None:
        if self._measurer is not None and self._owns_measurer:
            self._measurer.close()
            self._measurer = None


GPU_CHECKS = ("builds for cuda", "uses shared memory", "fits the device's limits",
              "emulated run equals numpy", "race check passes")


def gpu_hints_for(sch, check, shared: bool = True) -> tuple:
    """What a GPU schedule still lacks, from ``check`` (a ``widgets.gpu_steps.GpuCheck``
    of it): loops bound to blocks and threads, a shared-memory fetch under the reduction's
    outer loop, that fetch bound to the threads, a barrier it cannot do without."""
    func = sch.func
    loops = loop_infos(func)
    tags = {lp.thread for lp in loops if lp.kind == "thread"}
    out = []
    if not any(t.startswith("blockIdx") for t in tags) or not any(
            t.startswith("threadIdx") for t in tags):
        out.append("bind the outer spatial loops to blockIdx.x/y and the next ones to "
                   "threadIdx.x/y: sch.bind(io, 'blockIdx.y'); sch.bind(ii, 'threadIdx.y')")
    infos = block_infos(func)
    fetches = [b for b in infos if b.writes.endswith("_shared")]
    if shared and check.kernel is not None and check.shared_bytes == 0:
        out.append("read A and B through shared memory: s = sch.cache_read(block, 0, "
                   "'shared'); sch.compute_at(s, k_outer) with the reduction split as "
                   "k_outer, k_inner and k_outer outside the thread tile's inner loops")
    by_name = {lp.name: lp for lp in loops}
    compute = next((b for b in infos if b.is_reduction), None)
    for b in fetches:
        own = [by_name[n] for n in b.loops if compute is None or n not in compute.loops]
        if own and not any(lp.kind == "thread" for lp in own):
            out.append(f"every thread runs all of {b.name}'s copy loops, so threads write the "
                       "same elements: fuse its loops, split the fused loop by the block's "
                       "thread counts and bind the pieces to threadIdx (a cooperative fetch)")
    if check.race_error and "data race" in check.race_error and not out:
        out.append("two threads touch one element between barriers: each output element "
                   "needs one owner thread (a reduction loop bound to threads needs "
                   "sch.annotate(block, 'cross_thread_reduction', 1))")
    if check.usage is not None and not check.fits:
        out.append("a kernel is over the device's limits (see the resources): fewer threads "
                   "per block, smaller shared tiles or a smaller register tile per thread")
    return tuple(out)


class GpuExercise:
    """A GPU goal on one operator: bind it to blocks and threads so that it (with
    ``shared``) reads through shared memory, fits the limits of ``target`` (default: the
    GPU here or the sm_90 preset), its emulated CUDA source equals numpy and the
    interpreter's race check passes. Timed on the GPU where one is here."""

    def __init__(self, workload, target=None, shared: bool = True, hint: str = ""):
        from .gpu_steps import lesson_target
        if not getattr(workload, "library", False):
            raise WorkloadError(f"GpuExercise needs an explorer.ops operator (its numpy "
                                f"reference checks the student's run), not {workload!r}")
        self.workload, self.shared, self.hint = workload, shared, hint
        if target is None:
            self.target, self.device_note = lesson_target()
        else:
            self.target, self.device_note = as_target(target), "set by hand"
        if self.target.kind != "cuda":
            raise WorkloadError(f"GpuExercise runs on a cuda target, not {self.target}")

    def schedule(self) -> Schedule:
        """A fresh, unscheduled Schedule of the exercise's operator: start here."""
        return Schedule(self.workload)

    def check(self, sch, measure: bool = True) -> Verdict:
        """Build ``sch`` for cuda, run its source on the emulator and the race-checking
        interpreter against numpy, check its resources, and say what is wrong with hints.
        ``fraction``: the share of the checks (``GPU_CHECKS``) it passes."""
        from .gpu_steps import gpu_check
        require_schedule_of(sch, self.workload)
        c = gpu_check(sch, self.workload, self.target, "exercise", measure=measure)
        failures = []
        if c.kernel is None:
            failures.append(f"it does not build for cuda: {c.build_error}")
        else:
            if self.shared and c.shared_bytes == 0:
                failures.append("it does not use shared memory")
            if c.usage is not None and not c.fits:
                over = [k.problem or f"{k.kernel} is over the limits" for k in c.usage.kernels
                        if not k.fits]
                failures.append("; ".join(over))
            if c.emulated_error:
                failures.append(f"its emulated run differs from numpy: {c.emulated_error}")
            if c.race_error:
                failures.append(f"the race check fails: {c.race_error}")
        passed = len(GPU_CHECKS) - (len(GPU_CHECKS) if c.kernel is None else len(failures))
        frac = max(0, passed) / len(GPU_CHECKS)
        gflops = self.workload.flops / c.gpu_seconds / 1e9 if c.gpu_seconds else None
        if not failures:
            timed = (f"; on the GPU {gflops:.3g} GFLOP/s" if gflops
                     else f"; {c.gpu_note}" if c.gpu_note else "")
            skipped = "".join(f"; skipped {s}" for s in c.skipped)
            return Verdict(True, 1.0, 1.0, gflops, None,
                           f"builds, {c.shared_bytes} B of shared memory per block, fits "
                           f"{self.target.arch}'s limits, the emulated run equals numpy and "
                           f"the race check passes ({c.barriers} __syncthreads()){timed}"
                           f"{skipped}")
        hints = gpu_hints_for(sch, c, self.shared) + ((self.hint,) if self.hint else ())
        return Verdict(False, 1.0, frac, gflops, None, " | ".join(failures), hints)
