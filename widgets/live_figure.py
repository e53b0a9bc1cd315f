"""A figure that lives in one ``ipywidgets.Image`` and is redrawn in place.

Live views (dashboard, cost model, sampler, explorer pictures) never print
and never display new outputs: each redraw replaces the PNG bytes of the one
image. Redraws are throttled: ``request()`` draws at most once per
``interval`` seconds and remembers a skipped one; ``flush()`` draws it.
The figure is a bare ``matplotlib.figure.Figure`` (Agg), so nothing leaks
into the notebook's own figure handling; fixed margins (no constrained
layout) keep a redraw cheap.
"""
from __future__ import annotations

import io
import time

import ipywidgets as w
from matplotlib.figure import Figure


class LiveFigure:
    """``draw(axes)`` renders into the figure's axes; the result shows in ``image``."""

    def __init__(self, draw, nrows: int = 1, ncols: int = 1, figsize=(9, 3.2),
                 interval: float = 0.5, clock=time.monotonic, dpi: int = 80,
                 margins: dict | None = None):
        self._draw = draw
        self.fig = Figure(figsize=figsize, dpi=dpi)
        self.margins = margins or dict(left=0.08, right=0.97, bottom=0.17, top=0.88,
                                       wspace=0.35, hspace=0.4)
        self._shape = (nrows, ncols)
        self.axes = self._fresh_axes()
        self.image = w.Image(format="png", layout=w.Layout(max_width="100%"))
        self.image.add_class("se-live-figure")
        self.interval = interval
        self.clock = clock
        self.renders = 0
        self.dirty = False
        self.last_seconds = 0.0
        self._last = -float("inf")

    def _fresh_axes(self) -> list:
        self.fig.clear()
        self.fig.subplots_adjust(**self.margins)
        axs = self.fig.subplots(*self._shape, squeeze=False)
        return [ax for row in axs for ax in row]

    def request(self) -> bool:
        """Redraw now unless the last redraw was less than ``interval`` ago (or less
        than twice its own drawing time: drawing never takes most of the time).
        Returns whether it drew."""
        if self.clock() - self._last >= max(self.interval, 2 * self.last_seconds):
            self.render()
            return True
        self.dirty = True
        return False

    def flush(self) -> None:
        """Draw a redraw that ``request`` held back."""
        if self.dirty:
            self.render()

    def render(self) -> None:
        start = time.perf_counter()
        self.axes = self._fresh_axes()
        self._draw(self.axes)
        buf = io.BytesIO()
        self.fig.savefig(buf, format="png")
        self.image.value = buf.getvalue()
        self.renders += 1
        self.dirty = False
        self.last_seconds = time.perf_counter() - start
        self._last = self.clock()

    def png(self) -> bytes:
        return self.image.value
