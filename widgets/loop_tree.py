"""The loop tree as a selectable list: loops indented by depth with extent and
kind, blocks as leaves. Picking a row selects that loop or block."""
from __future__ import annotations

import ipywidgets as w

_INDENT = "\u00a0\u00a0\u00a0"
_KIND_MARK = {"serial": "", "parallel": " \u2016", "vectorized": " \u2261", "unrolled": " \u21bb",
              "thread": " \u29bf"}


def tree_rows(state) -> list:
    """(label, value) rows: ``"loop:NAME"`` or ``"block:NAME"`` values, in tree order."""
    rows, loops = [], state.loops()
    inner = {lp.name: {b for x in loops if x.parent == lp.name for b in x.blocks}
             for lp in loops}
    for lp in loops:
        rows.append((_INDENT * lp.depth + lp.label + _KIND_MARK[lp.kind], f"loop:{lp.name}"))
        for b in lp.blocks:
            if b not in inner[lp.name]:
                rows.append((_INDENT * (lp.depth + 1) + f"\u25b8 block {b}", f"block:{b}"))
    for b in state.blocks():
        if not b.loops:
            rows.append((f"\u25b8 block {b.name}", f"block:{b.name}"))
    return rows


class LoopTreeView:
    """A ``Select`` over the loop tree, kept in step with the state's selection."""

    def __init__(self, state):
        self.state = state
        self.select = w.Select(rows=12, layout=w.Layout(width="260px"))
        self.select.add_class("se-loop-tree")
        self._syncing = False
        self.select.observe(self._on_value_changed, names="value")
        state.observe(self._on_state_changed)
        self.refresh()

    @property
    def widget(self) -> w.Widget:
        return self.select

    def refresh(self) -> None:
        self._syncing = True
        try:
            rows = tree_rows(self.state)
            if list(self.select.options) != rows:
                self.select.options = rows
            self.select.value = self._current()
        finally:
            self._syncing = False

    def _current(self) -> str | None:
        st = self.state
        if st.selected_loop is not None:
            return f"loop:{st.selected_loop}"
        return f"block:{st.selected_block}" if st.selected_block else None

    def _on_value_changed(self, change) -> None:
        if self._syncing or change["new"] is None:
            return
        kind, name = change["new"].split(":", 1)
        if kind == "loop":
            self.state.select_loop(name)
        else:
            self.state.select_block(name)

    def _on_state_changed(self, what: str) -> None:
        if what in ("schedule", "selection"):
            self.refresh()
