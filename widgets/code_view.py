"""The loop nest as highlighted HTML: the selected loop and block stand out. On a cuda
target a second tab shows the CUDA C the backend generates for the current schedule
(or, before anything is bound or when a binding cannot be built, the engine's message)."""
from __future__ import annotations

import html

import ipywidgets as w

TABS = ("loop nest", "CUDA C")


class CodeView:
    """Shows ``state.code_html()``, and on a cuda target ``state.cuda_source()`` in a
    second tab; refreshes when the schedule or selection changes (the CUDA C only while
    its tab is shown, or when asked through ``cuda_text``)."""

    def __init__(self, state):
        self.state = state
        box = dict(overflow="auto", max_height="480px", border="1px solid #ddd",
                   padding="2px 6px")
        self.html = w.HTML(layout=w.Layout(**box))
        self.html.add_class("se-code-view")
        self.cuda = w.HTML(layout=w.Layout(**box))
        self.cuda.add_class("se-cuda-source")
        self._cuda_for = None
        if state.is_gpu:
            self.tabs = w.Tab(children=[self.html, self.cuda])
            for n, title in enumerate(TABS):
                self.tabs.set_title(n, title)
            self.tabs.add_class("se-code-tabs")
            self.tabs.observe(lambda _c: self._refresh_cuda(), names="selected_index")
        else:
            self.tabs = None
        state.observe(self._on_state_changed)
        self.refresh()

    @property
    def widget(self) -> w.Widget:
        return self.tabs if self.tabs is not None else self.html

    def show_cuda(self) -> None:
        """Bring the CUDA C tab to the front (as clicking it does)."""
        if self.tabs is not None:
            self.tabs.selected_index = 1
            self._refresh_cuda()

    @property
    def cuda_text(self) -> str:
        """The CUDA C shown (refreshed first), or the message shown instead."""
        self._refresh_cuda(force=True)
        source, err = self.state.cuda_source()
        return source if source is not None else err

    def refresh(self) -> None:
        self.html.value = self.state.code_html()
        self._refresh_cuda()

    def _refresh_cuda(self, force: bool = False) -> None:
        st = self.state
        if self.tabs is None or not (force or self.tabs.selected_index == 1):
            return
        if self._cuda_for is st.func:
            return
        self._cuda_for = st.func
        source, err = st.cuda_source()
        if source is not None:
            self.cuda.value = (f'<pre class="se-cuda-code" style="font-size:12px;margin:0">'
                               f"{html.escape(source)}</pre>")
        else:
            self.cuda.value = (f'<div class="se-cuda-error" style="color:#b71c1c">'
                               f"\u26a0 no CUDA C for this schedule yet: "
                               f"{html.escape(err)}</div>")

    def _on_state_changed(self, what: str) -> None:
        if what in ("schedule", "selection"):
            self.refresh()
