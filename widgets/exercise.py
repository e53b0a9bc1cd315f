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
        if not isinstance(sch, Schedule):
            raise WorkloadError(f"check takes the Schedule you built (start from "
                                f"exercise.schedule()), not {type(sch).__name__}")
        if sch.original != self.workload.func:
            raise WorkloadError(f"this schedule is of another operator "
                                f"({sch.original.name}); the exercise is "
                                f"{self.workload.key}: start from exercise.schedule()")
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
