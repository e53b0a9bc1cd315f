"""SpaceSampler: sample schedules from a design space, measure or predict them,
see the distribution and performance against each decision, and load one
into a ScheduleExplorer.

    sp = SpaceSampler(ops.gemm(128, 128, 128), explorer=ex)
    sp.sample(16, seed=0); sp.measure()
    sp.load(sp.best().index)             # into the explorer
"""
from __future__ import annotations

import html

import ipywidgets as w
from explorer.target import as_target

from . import tuning_plots as tp
from .live_figure import LiveFigure
from .sampler_state import SamplerState


class SpaceSampler:
    """Widget over :class:`SamplerState`: sample / measure / predict buttons, a
    histogram and a decision scatter, a sample chooser and "load into explorer".

    Samples are measured by the engine's ``InteractiveMeasurer``: ``measurer`` if
    given, else the attached explorer's when it measures for the same target, else
    one of the sampler's own."""

    def __init__(self, workload, target="llvm", space=None, explorer=None, predictor=None,
                 repeats: int = 3, measurer=None):
        if measurer is None and explorer is not None \
                and str(explorer.state.target) == str(as_target(target)):
            measurer = lambda: explorer.state.measurer   # noqa: E731 (one worker, both views)
        self.state = SamplerState(workload, target, space, predictor, repeats, measurer)
        self.explorer = explorer
        self.count = w.BoundedIntText(value=16, min=1, max=10000, description="samples",
                                      layout=w.Layout(width="170px"))
        self.seed = w.IntText(value=0, description="seed", layout=w.Layout(width="140px"))
        self.sample_button = self._button("sample", self._on_sample_clicked)
        self.measure_button = self._button("measure", self._on_measure_clicked)
        self.predict_button = self._button("predict", self._on_predict_clicked)
        self.predict_button.disabled = predictor is None
        self.progress = w.IntProgress(value=0, min=0, max=1, layout=w.Layout(width="160px"))
        self.status = w.HTML()
        self.status.add_class("se-sampler-status")
        self.knob = w.Dropdown(description="decision", layout=w.Layout(width="300px"))
        self.knob.observe(self._on_knob_changed, names="value")
        self.choice = w.Dropdown(description="sample", layout=w.Layout(width="300px"))
        self.choice.observe(self._on_knob_changed, names="value")
        self.load_button = self._button("load into explorer", lambda: self.load(self.choice.value))
        self.figure = LiveFigure(self._draw, 1, 2, figsize=(10, 3.4), interval=0.3,
                                 margins=dict(left=0.07, right=0.98, bottom=0.19, top=0.9,
                                              wspace=0.3))
        self.widget = w.VBox([
            w.HBox([self.count, self.seed, self.sample_button, self.measure_button,
                    self.predict_button, self.progress]),
            self.status, w.HBox([self.knob, self.choice, self.load_button]), self.figure.image])
        self.widget.add_class("se-sampler")

    def _button(self, label: str, fn) -> w.Button:
        b = w.Button(description=label, layout=w.Layout(width="auto"))
        b.add_class(f"se-btn-{label.replace(' ', '-')}")
        b.on_click(lambda _b: fn())
        return b

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # ------------------------------------------------------------ code API
    @property
    def samples(self) -> list:
        return self.state.samples

    def sample(self, n: int | None = None, seed: int | None = None) -> list:
        n = self.count.value if n is None else n
        seed = self.seed.value if seed is None else seed
        try:
            self.state.sample(n, seed)
        except Exception as e:  # no space yet, or a rule failed: say so in the widget
            self.status.value = f'<span style="color:#b71c1c">{html.escape(str(e))}</span>'
            return []
        self.status.value = f"{len(self.samples)} samples (seed {seed})"
        self._refresh()
        return self.samples

    def measure(self) -> list:
        self.progress.max, self.progress.value = max(1, len(self.samples)), 0
        self.state.measure(on_each=self._on_measured)
        ok = sum(s.gflops is not None for s in self.samples)
        self.status.value = f"measured {len(self.samples)} samples, {ok} correct"
        self._refresh()
        return self.samples

    def predict(self) -> list:
        self.state.predict()
        self.status.value = f"predicted {len(self.samples)} samples"
        self._refresh()
        return self.samples

    def close(self) -> None:
        """End the measurement worker the sampler started (a shared one is left alone)."""
        self.state.close()

    def best(self):
        ranked = self.state.ranked()
        return ranked[0] if ranked else None

    def load(self, index: int | None):
        """Load sample ``index`` into the explorer (if one is attached); returns its Schedule."""
        if index is None or not self.samples:
            return None
        sch = self.samples[index].schedule
        if self.explorer is not None:
            self.explorer.load(sch)
            self.status.value = f"loaded sample #{index} into the explorer"
        return sch

    # ------------------------------------------------------------ views
    def _on_sample_clicked(self):
        self.sample()

    def _on_measure_clicked(self):
        self.measure()

    def _on_predict_clicked(self):
        self.predict()

    def _on_measured(self, i: int) -> None:
        self.progress.value = i + 1
        self.figure.request()

    def _on_knob_changed(self, _change) -> None:
        self.figure.render()      # a person's choice: draw now (measuring is throttled)

    def _refresh(self) -> None:
        names = self.state.knob_names()
        if list(self.knob.options) != names:
            self.knob.options = names
            self.knob.value = names[0] if names else None
        self.choice.options = [(_choice_label(s), s.index) for s in self.state.ranked()]
        self.choice.value = self.choice.options[0][1] if self.choice.options else None
        self.figure.render()

    def _draw(self, axes) -> None:
        measured = any(s.result is not None for s in self.samples)
        values = self.state.values(predicted=not measured)
        label = "GFLOP/s" if measured else "predicted score"
        tp.plot_histogram(axes[0], values, xlabel=label)
        knob = self.knob.value
        if knob is not None:
            xs = [s.knobs.get(knob) for s in self.samples]
            tp.plot_decision_scatter(axes[1], xs, values, knob, label, highlight=self.choice.value)
        else:
            axes[1].axis("off")


def _choice_label(s) -> str:
    if s.result is not None:
        if s.gflops is not None:
            return f"#{s.index}: {s.gflops:.2f} GFLOP/s"
        return f"#{s.index}: failed"
    if s.predicted is not None:
        return f"#{s.index}: score {s.predicted:.3g}"
    return f"#{s.index}"
