"""The loop nest as highlighted HTML: the selected loop and block stand out."""
from __future__ import annotations

import ipywidgets as w


class CodeView:
    """Shows ``state.code_html()``; refreshes when the schedule or selection changes."""

    def __init__(self, state):
        self.state = state
        self.html = w.HTML(layout=w.Layout(overflow="auto", max_height="480px",
                                           border="1px solid #ddd", padding="2px 6px"))
        self.html.add_class("se-code-view")
        state.observe(self._on_state_changed)
        self.refresh()

    @property
    def widget(self) -> w.Widget:
        return self.html

    def refresh(self) -> None:
        self.html.value = self.state.code_html()

    def _on_state_changed(self, what: str) -> None:
        if what in ("schedule", "selection"):
            self.refresh()
