"""A lesson's steps on one operator: after each transformation, the loop nest, the
pictures and the measured speed against numpy, in one place.

    steps = Steps(ops.gemm(512, 512, 512))     # this host's "llvm" target
    sch = Schedule(steps.workload)
    steps.show("naive", sch, why="three loops, k innermost")
    ...                                         # a transformation
    steps.show("vectorize", sch, why="...")     # nest, pictures, GFLOP/s vs numpy
    steps.plot_progress(ax)                     # every step so far against numpy

Measurements are the project's (``explorer.measure.InteractiveMeasurer``: a worker
process, the output checked against numpy before the time counts; numpy timed once
in a process of its own without the OpenBLAS overrides). A step's time is its median
repeat; numpy's is its best repeat (see :func:`numpy_best_gflops`). ``StepRecord``
values are plain data; :func:`plot_steps` draws any list of them on an ``ax``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from explorer.measure import InteractiveMeasurer, interactive_config
from explorer.target import as_target

from . import plots


@dataclass(frozen=True)
class StepRecord:
    """One step: its name, the schedule as it stood, and its measurement."""
    name: str
    schedule: object
    result: object          # explorer.measure.InteractiveResult

    @property
    def gflops(self) -> float | None:
        return self.result.gflops if self.result.ok else None

    @property
    def numpy_gflops(self) -> float | None:
        return numpy_best_gflops(self.result) if self.result.ok else None


def percent(fraction: float) -> str:
    """``0.953`` -> ``"95%"``, ``0.0024`` -> ``"0.24%"``: small fractions keep two digits."""
    x = 100 * fraction
    return f"{x:.0f}%" if x >= 10 else f"{x:.2g}%"


def numpy_best_gflops(result) -> float | None:
    """numpy's GFLOP/s at its fastest repeat in ``result`` (an InteractiveResult), None
    when numpy was not measured. The best rather than the median: on a machine shared
    with other work, OpenBLAS's threads can lose the cores for whole repeats, and a goal
    against a collapsed numpy would be no goal."""
    r = getattr(result, "numpy", None)
    if r is None or not r.ok or not r.min_secs or not r.flops:
        return None
    return r.flops / r.min_secs / 1e9


def plot_steps(ax, records, numpy_gflops: float | None = None):
    """Bars: GFLOP/s of each step (failed steps empty), with numpy's as a line and each
    bar labelled with its fraction of numpy. Returns the heights drawn."""
    names = [r.name for r in records]
    heights = np.array([r.gflops or 0.0 for r in records], dtype=float)
    x = np.arange(len(records))
    ax.bar(x, heights, color=[plots.LEVEL_COLORS[n % len(plots.LEVEL_COLORS)] for n in x])
    if numpy_gflops:
        ax.axhline(numpy_gflops, color="black", ls="--", lw=1.2,
                   label=f"numpy {numpy_gflops:.1f} GFLOP/s")
        for n, h in zip(x, heights):
            ax.text(n, h, percent(h / numpy_gflops), ha="center", va="bottom", fontsize=8)
        ax.legend(fontsize=8, loc="lower right", framealpha=0.9)
    top = max([numpy_gflops or 0.0, *heights.tolist()]) or 1.0
    ax.set_ylim(0, 1.15 * top)
    ax.set_xticks(x, names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("GFLOP/s (measured)")
    ax.set_title("each step against numpy")
    return heights


def busy_note(target) -> str:
    """A warning when other work keeps this machine's cores busy (its load average
    against its cores), else "": numpy's threads, and ours, then slow down unevenly."""
    cores = as_target(target).num_cores or os.cpu_count() or 1
    load = os.getloadavg()[0]
    if load <= 0.5 * cores:
        return ""
    return (f"note: this machine is busy (load average {load:.1f} on {cores} cores): "
            "measurements are noisy, and numpy's BLAS threads suffer most; rerun a cell "
            "to measure again")


class Steps:
    """Measure and show the successive schedules of one workload on ``target``.

    ``repeats``: timed repeats per measurement. ``pictures``: draw the tiling and the
    memory footprint with each step. ``close()`` ends the measurement worker."""

    def __init__(self, workload, target="llvm", repeats: int = 5, pictures: bool = True):
        self.workload = workload
        self.target = as_target(target)
        self.pictures = pictures
        self.config = interactive_config(repeats)
        self.records: list = []
        self._measurer: InteractiveMeasurer | None = None

    @property
    def measurer(self) -> InteractiveMeasurer:
        if self._measurer is None:
            self._measurer = InteractiveMeasurer(self.target, self.config)
        return self._measurer

    @property
    def numpy_gflops(self) -> float | None:
        """numpy's GFLOP/s on the workload, once a step has been measured."""
        return next((r.numpy_gflops for r in self.records if r.numpy_gflops), None)

    def measure(self, name: str, sch) -> StepRecord:
        """Measure ``sch`` (checked against numpy) and keep it as step ``name``."""
        rec = StepRecord(name, sch.copy(), self.measurer.measure(sch))
        self.records.append(rec)
        return rec

    def line(self, rec: StepRecord) -> str:
        """``"step 3 reorder: 12.1 GFLOP/s, 4% of numpy (2.3x the previous step)"``."""
        n = self.records.index(rec)
        if not rec.result.ok:
            return f"step {n} {rec.name}: failed ({rec.result.error_kind}): {rec.result.error}"
        text = f"step {n} {rec.name}: {rec.gflops:.1f} GFLOP/s"
        if rec.numpy_gflops:
            text += (f", {percent(rec.gflops / rec.numpy_gflops)} of numpy "
                     f"({rec.numpy_gflops:.1f} GFLOP/s, its best run)")
        prev = next((p for p in reversed(self.records[:n]) if p.gflops), None)
        if prev is not None:
            text += f"; {rec.gflops / prev.gflops:.2f}x the previous step"
        return text

    def show(self, name: str, sch, why: str = "", nest: bool = True, block: str = "C"):
        """Measure ``sch`` as step ``name``, print its loop nest, its speed against numpy
        and ``why``, and draw its tiling, memory footprint and the steps so far (the
        record is ``records[-1]``)."""
        rec = self.measure(name, sch)
        if nest:
            print(sch.script())
            print()
        print(self.line(rec))
        print(f"  correct: max abs error {rec.result.max_abs_error:.2g} against numpy"
              if rec.result.ok else "")
        if why:
            print(f"  why: {why}")
        if self.pictures:
            self.draw(sch, block)

    def draw(self, sch, block: str = "C"):
        """Tiling of ``block``'s output, its footprint per loop against this host's
        caches, and every step so far against numpy (one row of three pictures)."""
        import matplotlib.pyplot as plt
        fig, axs = plt.subplots(1, 3, figsize=(16, 4.2),
                                gridspec_kw={"width_ratios": [1.1, 1.2, 1.0]})
        plots.plot_tiling(axs[0], sch, block, legend="below")
        plots.plot_memory_footprint(axs[1], sch, self.target, block)
        plot_steps(axs[2], self.records, self.numpy_gflops)
        fig.tight_layout()
        plt.show()
        return fig

    def plot_progress(self, ax):
        """Every step so far against numpy on ``ax`` (see :func:`plot_steps`)."""
        return plot_steps(ax, self.records, self.numpy_gflops)

    def close(self) -> None:
        if self._measurer is not None:
            self._measurer.close()
            self._measurer = None
