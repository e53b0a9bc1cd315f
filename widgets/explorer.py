"""ScheduleExplorer: apply schedule primitives by hand, see the loop nest change, run it.

    ex = ScheduleExplorer(ops.gemm(128, 128, 128), target="llvm")
    ex                                   # the widget (in a notebook)
    ex.split("i", [None, 8])             # the same steps from code...
    ex.panel.buttons["vectorize"].click()  # ...or through the controls
    ex.run().summary()

On a ``cuda`` target the code view has a CUDA C tab, the pictures show which block
and thread compute each output element, each kernel's shared memory and registers
against the target's limits and the footprint against the GPU's memory levels, and
Run runs the generated CUDA C: on the GPU through pycuda, or where there is none on
the host emulator (checked against numpy; "emulated: correctness only, no GPU time").

Thin wiring only: state and logic live in :class:`widgets.explorer_state.ExplorerState`,
pictures in :mod:`widgets.plots`; Run measures through the engine's
``explorer.measure.InteractiveMeasurer`` (a worker process: a kernel that
crashes or hangs shows as an error here, and the next Run works).
"""
from __future__ import annotations

import asyncio
import functools
import html

import ipywidgets as w
from explorer import Workload

from . import plots
from .live_figure import LiveFigure
from .explorer_state import ExplorerState
from .code_view import CodeView
from .loop_tree import LoopTreeView
from .primitive_panel import PrimitivePanel
from .trace_view import TraceView

WORKER_LOST = ("crash", "timeout", "build_crash", "build_timeout")
STEPS = ("split", "tile", "reorder", "fuse", "parallel", "vectorize", "unroll", "bind",
         "cache_read", "cache_write", "compute_at", "reverse_compute_at", "compute_inline",
         "reverse_compute_inline", "decompose_reduction")


class ScheduleExplorer:
    """Explore schedules of one operator: loop nest, controls, undo/redo, trace, Run.

    ``obj``: an op name (``"gemm"``), ``(name, *shape)``, a Workload, a PrimFunc or a
    Schedule to start from. Loops and blocks are named as in the printed nest; the
    step methods (``split``, ``tile``, ...) mirror Schedule's and return whether the
    step was legal (if not, ``error`` says why and the schedule is unchanged).
    ``measurer``: an ``explorer.measure.InteractiveMeasurer`` to share (default: one
    of its own, started at the first Run; ``close()`` ends it).
    """

    def __init__(self, obj, target="llvm", repeats: int = 5, pictures: bool = False,
                 measurer=None, compile_checks: bool = True):
        self.state = st = ExplorerState(obj, target, repeats, measurer, compile_checks)
        self.code, self.tree = CodeView(st), LoopTreeView(st)
        self.panel, self.trace = PrimitivePanel(st), TraceView(st)
        self.undo_button = self._button("undo", "undo", lambda: st.undo())
        self.redo_button = self._button("redo", "repeat", lambda: st.redo())
        self.run_button = self._button("Run", "play", self.run)
        self.run_button.button_style = "success"
        self.result = w.HTML(layout=w.Layout(flex="1 1 auto"))
        self.result.add_class("se-result")
        self.gpu_status = w.HTML()
        self.gpu_status.add_class("se-gpu-status")
        self.figure = LiveFigure(self._draw_pictures, 2, 2, figsize=(11, 9),
                                 margins=dict(left=0.07, right=0.97, bottom=0.07, top=0.96,
                                              wspace=0.3, hspace=0.5))
        self.pictures_toggle = w.ToggleButton(value=pictures, description="pictures",
                                              icon="image")
        self.pictures_toggle.observe(self._on_pictures_changed, names="value")
        self.pictures_box = w.VBox([])
        self._pictures_pending = False
        self.widget = self._layout()
        st.observe(self._on_state_changed)
        self._refresh_bar()
        self.gpu_status.value = gpu_status_html(st, usage=False)
        if pictures:
            self._on_pictures_changed({"new": True})

    def _button(self, label: str, icon: str, fn) -> w.Button:
        b = w.Button(description=label, icon=icon, layout=w.Layout(width="90px"))
        b.add_class(f"se-{label.lower()}")
        b.on_click(lambda _b: fn())
        return b

    def _layout(self) -> w.Widget:
        st = self.state
        title = str(st.workload) if st.workload is not None else st.func.name
        self.header = head = w.HTML(
            f"<b>ScheduleExplorer</b>: {html.escape(title)} on <code>{html.escape(str(st.target))}"
            f"</code><br><small>{html.escape(st.target.describe())}</small>")
        bar = w.HBox([self.undo_button, self.redo_button, self.run_button, self.result,
                      self.pictures_toggle], layout=w.Layout(align_items="center"))
        top = w.HBox([self.tree.widget, self.code.widget],
                     layout=w.Layout(align_items="flex-start"))
        self.code.widget.layout.flex = "1 1 auto"
        box = w.VBox([head, top, self.panel.widget, bar, self.gpu_status, self.trace.widget,
                      self.pictures_box])
        box.add_class("se-explorer")
        return box

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # ------------------------------------------------------------ code API
    @property
    def schedule(self):
        return self.state.schedule

    @property
    def error(self) -> str | None:
        return self.state.error.message if self.state.error else None

    @property
    def last_run(self):
        return self.state.last_run

    def script(self) -> str:
        """The current loop nest as text."""
        return self.state.code_text()

    def trace_python(self) -> str:
        return self.state.trace_python()

    def select(self, loop: str | None = None, block: str | None = None) -> None:
        """Select a loop (and its block) or a block, as clicking it in the tree does."""
        if block is not None:
            self.state.select_block(block)
        if loop is not None:
            self.state.select_loop(loop)

    def undo(self) -> bool:
        return self.state.undo()

    def redo(self) -> bool:
        return self.state.redo()

    def load(self, sch) -> None:
        """Load a Schedule (from the sampler, the dashboard or your own code)."""
        self.state.load(sch)

    def load_trace(self, trace) -> None:
        """Replay a trace (JSON, dict or Trace) on the naive function and load it."""
        self.state.load_trace(trace)

    def run(self):
        """Build, check and time the current schedule in the measurement worker; returns
        an ``explorer.measure.InteractiveResult`` (failures too: ``error_kind``, ``error``)."""
        self.run_button.disabled, self.run_button.description = True, "Running"
        try:
            return self.state.run()
        finally:
            self.run_button.disabled, self.run_button.description = False, "Run"

    def roofline(self):
        """This host's measured roofline (``explorer.measure.Roofline``), measured once."""
        return self.state.roofline()

    def close(self) -> None:
        """End the measurement worker (a later Run starts a new one)."""
        self.state.close()

    # ------------------------------------------------------------ views
    def _refresh_bar(self) -> None:
        st = self.state
        self.undo_button.disabled = not st.can_undo
        self.redo_button.disabled = not st.can_redo
        self.result.value = result_html(st.last_run, st.run_is_current)

    def _on_state_changed(self, what: str) -> None:
        if what in ("schedule", "run"):
            self._refresh_bar()
        if what == "schedule" and self.state.is_gpu and not self.pictures_toggle.value:
            self.gpu_status.value = gpu_status_html(self.state, usage=False)
        if self.pictures_toggle.value and what in ("schedule", "selection", "run"):
            self._request_pictures()

    def _request_pictures(self) -> None:
        """Redraw the pictures after the step has returned: the loop nest shows at once
        and the pictures (a few hundred ms of matplotlib) follow. In a kernel the redraw
        runs on its event loop once the button handler or cell is done, so a burst of
        steps draws once; outside a kernel it draws right away."""
        self.figure.dirty = True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            self.figure.render()
        elif not self._pictures_pending:
            self._pictures_pending = True
            loop.call_later(0.02, self._draw_pending_pictures)

    def _draw_pending_pictures(self) -> None:
        self._pictures_pending = False
        if self.pictures_toggle.value and self.figure.dirty:
            self.figure.render()

    def _on_pictures_changed(self, change) -> None:
        if change["new"]:
            self.figure.render()
            self.pictures_box.children = [self.figure.image]
        else:
            self.pictures_box.children = []

    def _draw_pictures(self, axes) -> None:
        st = self.state
        sch = st.schedule
        if st.is_gpu:
            self._draw_gpu_pictures(axes)
            return
        _guarded(axes[0], lambda ax: plots.plot_tiling(ax, sch, st.selected_block,
                                                       legend="below"))
        _guarded(axes[1], lambda ax: plots.plot_loop_tree(ax, sch))
        _guarded(axes[2], lambda ax: plots.plot_memory_footprint(ax, sch, st.target,
                                                                 st.selected_block))
        _guarded(axes[3], self._draw_roofline)

    def _draw_gpu_pictures(self, axes) -> None:
        """Who computes what, resources against the limits, the footprint against the
        GPU's levels, the loop tree; the status line says what is over a limit."""
        st = self.state
        self.gpu_status.value = gpu_status_html(st)
        _guarded(axes[0], lambda ax: _view(ax, st.thread_map(), plots.plot_thread_map))
        _guarded(axes[1], lambda ax: _view(ax, st.gpu_usage(), plots.plot_gpu_usage))
        _guarded(axes[2], lambda ax: plots.plot_memory_footprint(ax, st.schedule, st.target,
                                                                 st.selected_block))
        _guarded(axes[3], lambda ax: plots.plot_loop_tree(ax, st.schedule))

    def _draw_roofline(self, ax) -> None:
        """The roofline once a run has placed a kernel on it (the roof is measured at the
        first drawing after a Run, in the measurement worker)."""
        r, st = self.state.last_run, self.state
        if r is None or not r.ok:
            ax.axis("off")
            ax.text(0.5, 0.5, "roofline: press Run to place this schedule\non the "
                    "measured roofline of this host", ha="center", va="center", fontsize=9)
            return
        wl = st.workload if st.workload is not None else Workload.from_func(st.schedule.original)
        pts = [plots.roofline_point(wl, r.seconds, "current")]
        if r.naive_seconds:
            pts.append(plots.roofline_point(wl, r.naive_seconds, "naive"))
        plots.plot_roofline(ax, pts, self.roofline())


def _forward(name: str):
    method = getattr(ExplorerState, name)

    @functools.wraps(method)
    def step(self, *args, **kwargs):
        return getattr(self.state, name)(*args, **kwargs)
    return step


for _name in STEPS:
    setattr(ScheduleExplorer, _name, _forward(_name))


def _view(ax, got, draw) -> None:
    """Draw a GPU view, or the engine's message when there is none."""
    value, err = got
    if value is None:
        raise _NoView(err)
    draw(ax, value)


class _NoView(Exception):
    pass


def gpu_status_html(state, usage: bool = True) -> str:
    """One line on a cuda target: each kernel's launch, shared memory and registers
    against the limits (where the figures come from), or what is over a limit, or why
    there is no kernel yet. ``usage=False``: only the kernels' launches (no compile),
    the resources being shown with the pictures."""
    if not state.is_gpu:
        return ""
    if not usage:
        kernel, err = state.cuda_kernel()
        if kernel is None:
            return (f'<span class="se-gpu-problem" style="color:#b71c1c">\u26a0 '
                    f"{html.escape(err)}</span>")
        launches = "; ".join(f"<code>{html.escape(la.name)}</code>: grid {tuple(la.grid)}, "
                             f"block {tuple(la.block)}" for la in kernel.launches)
        return (f"{launches} <small style=\"color:#8d6e63\">(shared memory and registers "
                "against the limits: turn on the pictures)</small>")
    usage, err = state.gpu_usage()
    if usage is None:
        return (f'<span class="se-gpu-problem" style="color:#b71c1c">\u26a0 '
                f"{html.escape(err)}</span>")
    parts = []
    for k in usage.kernels:
        problem = k.problem or _over_limit(k)
        if problem:
            parts.append(f'<span class="se-gpu-problem" style="color:#b71c1c">\u26a0 '
                         f"{html.escape(problem)}</span>")
        else:
            est = " (estimate)" if k.source != "ptxas" else ""
            parts.append(f"<code>{html.escape(k.kernel)}</code>: grid {k.grid}, block "
                         f"{k.block}, {k.shared_bytes} B shared of {k.shared_limit}, "
                         f"{k.registers} registers{est} of {k.register_limit}")
    if usage.note:
        parts.append(f'<small style="color:#8d6e63">{html.escape(usage.note)}</small>')
    return "<br>".join(parts)


def _over_limit(k) -> str | None:
    if k.shared_bytes > k.shared_limit:
        return (f"kernel {k.kernel!r} needs {k.shared_bytes} bytes of shared memory per "
                f"block, over the limit of {k.shared_limit}: use smaller shared tiles")
    if k.registers > k.register_limit:
        how = "ptxas reports" if k.source == "ptxas" else "it needs about"
        return (f"kernel {k.kernel!r}: {how} {k.registers} registers per thread, over the "
                f"{k.register_limit} a block of {k.threads} threads may use: use smaller "
                "register tiles or fewer threads")
    return None


def _guarded(ax, draw) -> None:
    try:
        draw(ax)
    except Exception as e:  # one picture that cannot be drawn must not hide the others
        ax.clear()
        ax.axis("off")
        text = str(e) if isinstance(e, _NoView) else f"cannot draw: {e}"
        ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=9)


def result_html(r, current: bool = True) -> str:
    """The Run result as HTML: time, GFLOP/s, speed-ups and the check on one line, or
    the kind of failure and its first line (the whole message folded below it)."""
    if r is None:
        return '<span class="se-result-none">press Run to build, check and time it</span>'
    if not r.ok:
        first, _, rest = (r.error or "").partition("\n")
        text = (f'<span class="se-result-error" style="color:#b71c1c">\u2717 run failed '
                f"({html.escape(r.error_kind or 'error')}): {html.escape(first)}</span>")
        if r.error_kind in WORKER_LOST:
            text += ('<br><small style="color:#8d6e63">it ran in a measurement worker, which '
                     "was replaced: this notebook is unaffected and the next Run works</small>")
        if rest.strip():
            text += (f"<details><summary>details</summary><pre style=\"font-size:11px\">"
                     f"{html.escape(rest)}</pre></details>")
    else:
        text = " &middot; ".join(_ok_parts(r))
    if r.note:
        text += f'<br><small style="color:#8d6e63">{html.escape(r.note)}</small>'
    if not current:
        text = f'<span style="opacity:0.5" title="the schedule changed since">{text}</span>'
    return f'<span class="se-result-value">{text}</span>'


def _ok_parts(r) -> list:
    secs, *speeds = r.speed_parts()
    parts = [f"<b>{secs}</b>", *speeds]
    parts.append(f'<span style="color:#2e7d32">\u2713 matches {html.escape(r.reference_name)} '
                 f"(max err {r.max_abs_error:.1e})</span>")
    parts.append(f"<i>{html.escape(r.backend)}</i>")
    return parts
