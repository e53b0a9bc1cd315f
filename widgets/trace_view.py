"""The trace as replayable Python, with a button that copies it to the clipboard."""
from __future__ import annotations

import json

import ipywidgets as w
from IPython.display import Javascript, display


class TraceView:
    """A read-only text area with ``state.trace_python()`` and a Copy button.

    Copy sends the text to the browser's clipboard (a one-line script in a
    hidden output); ``copied`` keeps what was last copied.
    """

    def __init__(self, state):
        self.state = state
        self.text = w.Textarea(layout=w.Layout(width="100%", height="160px"))
        self.text.add_class("se-trace")
        self.copy_button = w.Button(description="Copy", icon="copy",
                                    tooltip="copy the trace as Python",
                                    layout=w.Layout(width="90px"))
        self.copy_button.add_class("se-copy")
        self.copy_button.on_click(self._on_copy_clicked)
        self._js = w.Output(layout=w.Layout(display="none"))
        self.copied: str | None = None
        self.box = w.VBox([w.HBox([w.HTML("<b>trace</b> (replayable Python; <code>sch</code> is "
                                          "a Schedule of the same workload)"),
                                   self.copy_button]), self.text, self._js])
        state.observe(self._on_state_changed)
        self.refresh()

    @property
    def widget(self) -> w.Widget:
        return self.box

    def refresh(self) -> None:
        self.text.value = self.state.trace_python()

    def _on_copy_clicked(self, _button) -> None:
        self.copied = self.state.trace_python()
        self._js.clear_output()
        with self._js:
            display(Javascript(f"navigator.clipboard.writeText({json.dumps(self.copied)});"))

    def _on_state_changed(self, what: str) -> None:
        if what == "schedule":
            self.refresh()
