"""Lesson steps on the GPU: build a schedule for ``cuda``, show the CUDA C, check the
exact source on this CPU (the host emulator) and thread by thread (the interpreter's
race check), set ptxas's resources against the device's limits, draw who computes
what, and time it on a GPU where one is here (pycuda), saying why not otherwise.

    gpu = GpuSteps(ops.gemm(64, 64, 64))       # Target("cuda"): this GPU, or a preset
    print(gpu.device_note)                     # which device or preset the limits are
    gpu.show("bind", sch, why="...")           # source, checks, resources, pictures
    check = gpu_check(sch, wl, target)         # the same checks as plain data

Nothing here is a model of the GPU: the emulator compiles the source ``build(sch,
"cuda")`` emits (``explorer.backends.cuda``), the race check is the interpreter's
(``explorer.backends.interp``), the picture reads the lowered program
(``explorer.backends.cuda.thread_map``), resources come from ptxas
(``explorer.space.gpu_usage``, an estimate said to be one where nvcc is missing).
Emulated runs are never timings.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import numpy as np

from explorer import Schedule, build
from explorer.errors import ExplorerError, RaceError
from explorer.target import Target, as_target
from explorer.target.cuda import DEFAULT_ARCH, PRESETS

from . import plots


@dataclass
class GpuCheck:
    """What the checks of one GPU schedule found; ``ok`` when it builds, its emulated
    run equals numpy, the interpreter finds no race and every kernel fits the limits."""
    name: str
    kernel: object = None                  # the CudaKernel, None when the build failed
    build_error: str | None = None
    emulated_error: str | None = None      # None: the emulated run equals numpy
    emulated_max_abs_error: float | None = None
    race_error: str | None = None          # the interpreter's RaceError (or other failure)
    usage: object = None                   # explorer.space.gpu_usage.GpuUsage
    barriers: int = 0                      # __syncthreads() in the source
    gpu_seconds: float | None = None       # median on the GPU, when one is here
    gpu_note: str = ""                     # why it was not timed
    skipped: tuple = ()                    # checks that could not run here, with why

    @property
    def shared_bytes(self) -> int:
        """Shared memory per block of the kernel that uses most."""
        if self.kernel is None:
            return 0
        return max((la.static_shared_bytes + la.dynamic_shared_bytes
                    for la in self.kernel.module.launches), default=0)

    @property
    def fits(self) -> bool:
        return self.usage is not None and all(k.fits for k in self.usage.kernels)

    @property
    def ok(self) -> bool:
        return (self.kernel is not None and self.emulated_error is None
                and self.race_error is None and self.fits)


def gpu_here() -> tuple:
    """``(arch, name)`` of the GPU this process can run on through pycuda, or
    ``(None, why not)``: pycuda missing, no driver, no device."""
    try:
        from explorer.backends.cuda import runtime
        runtime.driver()
        return runtime.device_arch(), runtime.device_name()
    except ExplorerError as e:
        return None, str(e)
    except Exception as e:          # pycuda's own errors (no device, driver too old)
        return None, f"no usable GPU ({type(e).__name__}: {e})"


def lesson_target() -> tuple:
    """The cuda Target a lesson uses and a sentence saying where its limits come from:
    the GPU here when pycuda finds one whose architecture has a preset, otherwise the
    ``sm_90`` preset (H100 / H200)."""
    arch, name = gpu_here()
    if arch in PRESETS:
        return Target(f"cuda -arch={arch}"), f"the GPU here: {name}"
    why = name if arch is None else f"{name} has no preset ({', '.join(sorted(PRESETS))})"
    return (Target(f"cuda -arch={DEFAULT_ARCH}"),
            f"the {DEFAULT_ARCH} preset ({PRESETS[DEFAULT_ARCH][0]}), not a device measured "
            f"here: {why}")


def gpu_check(sch, workload, target="cuda", name: str = "", seed: int = 0,
              measure: bool = False, repeat: int = 5) -> GpuCheck:
    """Build ``sch`` for ``target``, run the source on the host emulator and the
    interpreter (race check), both against ``workload``'s numpy reference, and read its
    resources; with ``measure``, time it on the GPU when one is here."""
    from explorer.space.gpu_usage import gpu_usage
    target = as_target(target)
    out = GpuCheck(name)
    try:
        out.kernel = build(sch, target)
    except ExplorerError as e:
        out.build_error = str(e)
        return out
    out.barriers = out.kernel.source.count("__syncthreads();")
    try:
        out.usage = gpu_usage(out.kernel, target)
    except ExplorerError as e:
        out.skipped += (f"resources: {e}",)
    try:
        args = workload.make_args(seed)
        build(sch, target, emulate=True)(*args)
        out.emulated_max_abs_error = workload.check(args)
    except RaceError as e:          # the emulator's own barrier check (divergent barrier)
        out.emulated_error = str(e)
    except ExplorerError as e:
        if "C++20 compiler" in str(e):
            out.skipped += (f"emulation: {e}",)
        else:
            out.emulated_error = str(e)
    try:
        args = workload.make_args(seed)
        build(sch, "interp")(*args)
        workload.check(args)
    except ExplorerError as e:
        out.race_error = str(e)
    if measure and out.ok:
        out.gpu_seconds, out.gpu_note = time_on_gpu(out.kernel, workload, target, repeat)
    elif measure:
        out.gpu_note = "not timed: it failed a check above"
    return out


def time_on_gpu(kernel, workload, target, repeat: int = 5) -> tuple:
    """``(median seconds, "")`` of ``kernel`` on the GPU here, checked against numpy
    before and after timing; ``(None, why not)`` without a GPU or when it fails."""
    arch, why = gpu_here()
    if arch is None:
        return None, f"not timed on a GPU: {why}"
    from explorer.backends.cuda.nvcc import compile_cubin
    from explorer.backends.cuda.runtime import measure_cuda
    try:
        compiled = compile_cubin(kernel.source, target.arch or arch)
    except ExplorerError as e:
        return None, f"not timed: {e}"
    args = workload.make_args(0)
    res = measure_cuda(kernel.module, compiled, args,
                       lambda module, arrays: workload.check(arrays), repeat=repeat,
                       target=target)
    if "error" in res:
        return None, f"failed on the GPU ({res['error_kind']}): {res['error']}"
    return float(np.median(res["run_secs"])), ""


def usage_lines(usage) -> list:
    """One line per kernel: registers and shared memory against the limits."""
    out = []
    for k in usage.kernels:
        spills = "" if k.spill_bytes is None else f", {k.spill_bytes} bytes spilled"
        out.append(f"  {k.kernel}: grid {k.grid} x block {k.block}; {k.registers} registers"
                   f"/thread (limit {k.register_limit} for {k.threads} threads){spills}; "
                   f"shared {k.shared_bytes} B of {k.shared_limit >> 10} KiB per block "
                   f"[{k.source}]" + ("" if k.fits else "  OVER THE LIMIT")
                   + (f"\n    {k.problem}" if k.problem else ""))
    if usage.note:
        out.append(f"  ({usage.note})")
    return out


def source_part(source: str, start: str | None = None, lines: int | None = None) -> str:
    """The source from the first line containing ``start`` (default: the first kernel),
    ``lines`` lines of it (default: all)."""
    text = source.splitlines()
    first = next((n for n, ln in enumerate(text) if start and start in ln), None)
    if first is None:
        first = next((n for n, ln in enumerate(text) if "__global__" in ln), 0)
        first = max(0, first - 1) if text[first - 1].startswith("// launch") else first
    part = text[first:first + lines if lines else None]
    more = len(text) - first - len(part)
    return "\n".join(part) + (f"\n    ... ({more} more lines)" if more > 0 else "")


def plot_thread_elements(ax, tmap, block: int = 0, threads=(0, 1)):
    """The elements ``threads`` of ``block`` write, inside the box the block writes (each
    cell marked with its thread, the others grey): where a thread's elements lie, strided
    by vthreads or contiguous in a register tile. ``tmap``: a ``ThreadMap``. Returns
    ``{thread: number of elements}``."""
    box = tmap.thread_box(block)
    out = {}
    if box is None:
        ax.axis("off")
        return out
    lo, hi = box
    bid, tid = tmap.block_id, tmap.thread_id
    while bid.ndim > 2:
        bid, tid, lo, hi = bid[0], tid[0], lo[1:], hi[1:]
    if bid.ndim == 1:
        bid, tid, lo, hi = bid[None, :], tid[None, :], (0,) + lo, (1,) + hi
    sub_b = bid[lo[0]:hi[0], lo[1]:hi[1]]
    sub_t = tid[lo[0]:hi[0], lo[1]:hi[1]]
    img = np.where(sub_b == block, 0.0, np.nan)
    colors = ["#c62828", "#1565c0", "#2e7d32", "#ef6c00"]
    ax.imshow(np.where(np.isnan(img), 1.0, 0.85), cmap="gray", vmin=0, vmax=1,
              extent=(lo[1], hi[1], hi[0], lo[0]), interpolation="nearest", aspect="auto")
    for n, t in enumerate(threads):
        rr, cc = np.nonzero((sub_b == block) & (sub_t == t))
        out[t] = len(rr)
        for r, c in zip(rr, cc):
            ax.add_patch(plt.Rectangle((lo[1] + c, lo[0] + r), 1, 1,
                                       color=colors[n % len(colors)], alpha=0.8))
            if (hi[1] - lo[1]) <= 64:
                ax.text(lo[1] + c + 0.5, lo[0] + r + 0.5, str(t), ha="center", va="center",
                        fontsize=7, color="white")
        ax.plot([], [], "s", color=colors[n % len(colors)],
                label=f"thread {tmap.thread_coords(t)[:2]}: {len(rr)} elements")
    ax.set_xlim(lo[1], hi[1])
    ax.set_ylim(hi[0], lo[0])
    ax.set_xlabel(f"{tmap.buffer} column")
    ax.set_ylabel(f"{tmap.buffer} row")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=1)
    ax.set_title(f"block {tmap.block_coords(block)}: the elements of threads "
                 f"{', '.join(map(str, threads))}", fontsize=9)
    return out


@dataclass
class GpuSteps:
    """Steps of a GPU lesson on one workload: ``show`` builds, checks, draws and (with a
    GPU here) times each schedule; ``records`` keeps the GpuCheck of each step."""
    workload: object
    target: object = None
    repeat: int = 5
    records: list = field(default_factory=list)

    def __post_init__(self):
        if self.target is None:
            self.target, self.device_note = lesson_target()
        else:
            self.target = as_target(self.target)
            self.device_note = f"{self.target}, set by hand"

    def schedule(self) -> Schedule:
        """A fresh Schedule of the workload."""
        return Schedule(self.workload)

    def show(self, name: str, sch, why: str = "", start: str | None = None,
             lines: int | None = None, block: int = 0, workload=None, draw: bool = True):
        """Step ``name``: the CUDA source (from ``start``, ``lines`` of it), the emulated
        run and the race check against numpy, resources against the limits, the thread
        picture of block ``block`` and the resource bars, the GPU time or why there is
        none, and ``why``."""
        wl = workload or self.workload
        rec = gpu_check(sch, wl, self.target, name, measure=True, repeat=self.repeat)
        self.records.append(rec)
        print(self.report(rec, start, lines))
        if why:
            print(f"why: {why}")
        if draw and rec.kernel is not None:
            self.draw(rec, block)
        return rec

    def report(self, rec: GpuCheck, start=None, lines=None) -> str:
        """The text ``show`` prints for ``rec``."""
        if rec.kernel is None:
            return f"step {rec.name!r} does not build: {rec.build_error}"
        k = rec.kernel
        out = [source_part(k.source, start, lines), ""]
        if rec.emulated_error:
            out.append(f"emulated run: WRONG: {rec.emulated_error}")
        elif rec.emulated_max_abs_error is not None:
            out.append("emulated run (this source compiled for the CPU, every thread of each "
                       f"block run): equals numpy, max abs error {rec.emulated_max_abs_error:.2g}")
        out.append("race check (interpreter, thread by thread): "
                   + (rec.race_error or f"no race; {rec.barriers} __syncthreads() in the "
                      "source"))
        if rec.usage is not None:
            out.append(f"resources on {self.target.arch} ({self.device_note.split(':')[0]}):")
            out += usage_lines(rec.usage)
        out += [f"skipped: {s}" for s in rec.skipped]
        if rec.gpu_seconds:
            out.append(f"on the GPU: {1e6 * rec.gpu_seconds:.1f} us = "
                       f"{self._gflops(rec):.1f} GFLOP/s (median of "
                       f"{self.repeat}, checked against numpy)")
        else:
            out.append(rec.gpu_note)
        return "\n".join(out)

    def _gflops(self, rec: GpuCheck) -> float:
        return self.workload.flops / rec.gpu_seconds / 1e9

    def draw(self, rec: GpuCheck, block: int = 0):
        """Who computes each output element (block ``block``'s threads outlined), and
        shared memory and registers against the limits."""
        from explorer.backends.cuda.thread_map import thread_map
        tmap = thread_map(rec.kernel)
        fig, axs = plt.subplots(1, 3, figsize=(17, 5),
                                gridspec_kw={"width_ratios": [3, 2.2, 2.4]})
        plots.plot_thread_map(axs[0], tmap, block)
        rows, cols = (tmap.shape[-2:] if len(tmap.shape) > 1 else (1, tmap.shape[0]))
        if max(rows, cols) > 4 * min(rows, cols):      # a long thin output: fill the panel
            axs[0].set_aspect("auto")
        plot_thread_elements(axs[1], tmap, block)
        if rec.usage is not None:
            plots.plot_gpu_usage(axs[2], rec.usage)
        else:
            axs[2].axis("off")
        fig.tight_layout()
        plt.show()

    def plot_progress(self, ax):
        """GPU time of each step (only the steps timed on a GPU)."""
        timed = [r for r in self.records if r.gpu_seconds]
        ax.bar(range(len(timed)), [self._gflops(r) for r in timed], color="#4878a8")
        ax.set_xticks(range(len(timed)), [r.name for r in timed], fontsize=8)
        ax.set_ylabel("GFLOP/s on the GPU")
        ax.set_title(f"{self.workload}: each step, timed on {self.device_note}", fontsize=9)
        return timed
