"""TuningDashboard: watch a tuner in the same kernel through its events.

    dash = TuningDashboard(tuner.events, explorer=ex)   # or dash.attach(bus) later
    dash                                                 # show it, then run the tuner

Best-so-far curve, predicted vs measured (coloured by round), the model's rank
accuracy per round, progress with an estimate of time left, and the top-k
candidates with "apply" to load one into a ScheduleExplorer. It updates in
place (one image, one table) at most every ``interval`` seconds and never
prints, so a long run does not flood the output area.
"""
from __future__ import annotations

import html
import time

import ipywidgets as w

from explorer import Schedule, Trace
from explorer.events import TuningFinished

from . import tuning_plots as tp
from .live_figure import LiveFigure
from .tuning_state import DashboardState


_TABLE_STYLE = ("<style>.se-topk-table{border-collapse:collapse;font-size:12px}"
                ".se-topk-table th,.se-topk-table td{padding:2px 10px;text-align:right}"
                ".se-topk-table thead{border-bottom:1px solid #999}</style>")


class TuningDashboard:
    """Live views over :class:`DashboardState`, fed by an ``EventBus``."""

    def __init__(self, bus=None, explorer=None, workload=None, top_k: int = 10,
                 interval: float = 0.5, clock=time.monotonic):
        self.state = DashboardState(clock)
        self.explorer, self.workload, self.k = explorer, workload, top_k
        self.events = 0
        self.header = w.HTML("<b>Tuning dashboard</b>")
        self.progress = w.IntProgress(value=0, min=0, max=1, layout=w.Layout(width="240px"))
        self.progress_text = w.HTML(self.state.progress_text())
        self.progress_text.add_class("se-progress")
        self.figure = LiveFigure(self._draw, 1, 3, figsize=(13, 3.3), interval=interval,
                                 clock=clock, margins=dict(left=0.06, right=0.98, bottom=0.17,
                                                           top=0.84, wspace=0.3))
        self.table = w.HTML()
        self.table.add_class("se-topk")
        self.pick = w.Dropdown(description="rank", layout=w.Layout(width="210px"))
        self.apply_button = w.Button(description="apply", icon="check")
        self.apply_button.add_class("se-apply")
        self.apply_button.on_click(lambda _b: self.apply(self.pick.value))
        self.apply_status = w.HTML()
        self.widget = w.VBox([self.header, w.HBox([self.progress, self.progress_text]),
                              self.figure.image, self.table,
                              w.HBox([self.pick, self.apply_button, self.apply_status])])
        self.widget.add_class("se-dashboard")
        self._unsubscribe = None
        if bus is not None:
            self.attach(bus)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # ------------------------------------------------------------ events
    def attach(self, bus):
        """Subscribe to ``bus`` (an explorer.events.EventBus); returns the unsubscriber."""
        self.detach()
        self._unsubscribe = bus.subscribe(self.on_event)
        return self._unsubscribe

    def detach(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def on_event(self, event) -> None:
        self.state.handle(event)
        self.events += 1
        if isinstance(event, TuningFinished):
            self.refresh()
        elif self.figure.request():
            self._refresh_text()

    def refresh(self) -> None:
        """Redraw everything now."""
        self._refresh_text()
        self.figure.render()

    def _refresh_text(self) -> None:
        st = self.state
        s = st.started
        if s is not None:
            self.header.value = (f"<b>Tuning</b> {html.escape(s.workload)} on "
                                 f"<code>{html.escape(s.target)}</code> "
                                 f"({html.escape(s.strategy)}, seed {s.seed})")
        self.progress.max, self.progress.value = max(1, st.trials), min(st.done, st.trials or 1)
        self.progress_text.value = html.escape(st.progress_text())
        df = st.top_k(self.k)
        self.table.value = _TABLE_STYLE + df.reset_index().to_html(
            classes="se-topk-table", border=0, na_rep="", index=False,
            formatters={"re-timed": lambda v: "\u2713" if v else ""})
        options = [(f"#{rank} (trial {t})", rank) for rank, t in zip(df.index, df["trial"])]
        if list(self.pick.options) != options:
            old = self.pick.value
            self.pick.options = options
            ranks = [r for _, r in options]
            self.pick.value = old if old in ranks else (ranks[0] if ranks else None)

    def _draw(self, axes) -> None:
        st = self.state
        tp.plot_best_so_far(axes[0], st.gflops(), [r.trial for r in st.rows])
        tp.plot_predicted_vs_measured(axes[1], [r.predicted for r in st.rows], st.gflops(),
                                      [r.round for r in st.rows])
        tp.plot_rank_accuracy(axes[2], [m.round for m in st.models],
                              [m.rank_accuracy for m in st.models],
                              [m.top_k_recall for m in st.models])

    # ------------------------------------------------------------ apply
    def apply(self, rank: int | None = 1):
        """Load the rank-th best candidate's trace into the explorer; returns the Schedule."""
        df = self.state.top_k(self.k)
        if rank is None or rank not in df.index:
            self.apply_status.value = "no candidate of that rank yet"
            return None
        trace = self.state.trace_of(int(df.loc[rank, "trial"]))
        if self.explorer is not None:
            self.explorer.load_trace(trace)
            sch = self.explorer.schedule
        elif self.workload is not None:
            sch = Trace.from_json(trace).apply_to(Schedule(self.workload))
        else:
            raise ValueError("apply needs explorer= or workload= to replay the trace on")
        self.apply_status.value = f"applied rank {rank} (trial {df.loc[rank, 'trial']})"
        return sch
