"""CostModelView: the cost model's accuracy as samples grow and its feature
importance, from the tuner's ModelUpdated events (names as the engine gives them)."""
from __future__ import annotations

import html
import time

import ipywidgets as w

from explorer.events import ModelUpdated, TuningFinished

from . import tuning_plots as tp
from .live_figure import LiveFigure
from .tuning_state import ModelState


class CostModelView:
    """Two live plots (accuracy vs training samples, top features by gain) and a line
    of text; updates in place, throttled like the dashboard."""

    def __init__(self, bus=None, top: int = 12, interval: float = 0.5, clock=time.monotonic):
        self.state = ModelState()
        self.top = top
        self.figure = LiveFigure(self._draw, 1, 2, figsize=(12, 3.6), interval=interval,
                                 clock=clock, margins=dict(left=0.07, right=0.98, bottom=0.15,
                                                           top=0.88, wspace=0.55))
        self.text = w.HTML("waiting for the cost model's first update")
        self.text.add_class("se-model-text")
        self.widget = w.VBox([w.HTML("<b>Cost model</b>"), self.text, self.figure.image])
        self.widget.add_class("se-cost-model")
        self._unsubscribe = bus.subscribe(self.on_event) if bus is not None else None

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def attach(self, bus):
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._unsubscribe = bus.subscribe(self.on_event)
        return self._unsubscribe

    def on_event(self, event) -> None:
        self.state.handle(event)
        if isinstance(event, TuningFinished):
            self.refresh()
        elif isinstance(event, ModelUpdated) and self.figure.request():
            self._refresh_text()

    def refresh(self) -> None:
        self._refresh_text()
        self.figure.render()

    def _refresh_text(self) -> None:
        ups = self.state.updates
        if not ups:
            return
        u = ups[-1]
        acc = "n/a" if u.rank_accuracy is None else f"{u.rank_accuracy:.2f}"
        rec = "n/a" if u.top_k_recall is None else f"{u.top_k_recall:.2f}"
        self.text.value = html.escape(f"round {u.round}: {u.samples} training samples, "
                                      f"rank accuracy {acc}, top-k recall {rec}")

    def _draw(self, axes) -> None:
        ups = self.state.updates
        tp.plot_accuracy_vs_samples(axes[0], [u.samples for u in ups],
                                    [u.rank_accuracy for u in ups],
                                    [u.top_k_recall for u in ups])
        tp.plot_feature_importance(axes[1], self.state.importance(), self.top)
