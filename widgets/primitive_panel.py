"""Controls for each schedule primitive, each row with its own error label.

Rows act on the selected loop or block of the view-model. When a step is
refused, the engine's ScheduleError message appears next to the control that
asked for it, and the schedule stays as it was.
"""
from __future__ import annotations

import html

import ipywidgets as w

from explorer.ir.stmt import THREAD_TAGS

SCOPES = ("global", "shared", "local")
# primitive -> the row whose error label shows its errors
ROW_OF = {"parallel": "loop kind", "vectorize": "loop kind", "unroll": "loop kind",
          "cache_read": "cache", "cache_write": "cache", "compute_at": "compute_at",
          "reverse_compute_at": "compute_at", "compute_inline": "inline",
          "reverse_compute_inline": "inline"}


def parse_names(text: str) -> list:
    return [t for t in text.replace(",", " ").split() if t]


def parse_ints(text: str, prim: str) -> list:
    """``"8, 16"`` -> [8, 16]; ``None`` may stand for the factor split infers."""
    out = []
    for t in parse_names(text):
        if t == "None":
            out.append(None)
        elif t.lstrip("-").isdigit():
            out.append(int(t))
        else:
            raise ValueError(f"{prim}: {t!r} is not a whole number; write factors like 8, 16")
    return out


def _button(label: str, action, width: str = "auto") -> w.Button:
    b = w.Button(description=label, layout=w.Layout(width=width))
    b.add_class(f"se-btn-{label.replace('_', '-')}")
    b.on_click(lambda _b: action())
    return b


class PrimitivePanel:
    """Rows of controls: split, tile, reorder, fuse, loop kind, bind, cache, compute_at,
    inline. Attributes name every control so tests and notebooks can drive them."""

    def __init__(self, state):
        self.state = state
        lay = w.Layout(width="150px")
        self.split_factor = w.Dropdown(description="inner", layout=w.Layout(width="170px"))
        self.split_factor.add_class("se-split-factor")
        self.tile_loops = w.Text(description="loops", layout=lay)
        self.tile_factors = w.Text(description="factors", placeholder="8, 16", layout=lay)
        self.reorder_loops = w.Text(description="order", layout=w.Layout(width="300px"))
        self.fuse_loops = w.Text(description="loops", layout=w.Layout(width="220px"))
        self.bind_axis = w.Dropdown(options=THREAD_TAGS, description="axis",
                                    layout=w.Layout(width="210px"))
        self.bind_axis.add_class("se-bind-axis")
        fit = {"description_width": "initial"}
        self.cache_buffer = w.Dropdown(description="read", layout=lay, style=fit)
        self.cache_scope = w.Dropdown(options=SCOPES, value="global", description="scope",
                                      layout=lay, style=fit)
        self.at_loop = w.Dropdown(description="loop", layout=w.Layout(width="200px"))
        self.buttons: dict = {}
        self.errors: dict = {}
        self.rows: dict = {}
        self._build_rows()
        self.box = w.VBox(list(self.rows.values()))
        self.box.add_class("se-primitives")
        state.observe(self._on_state_changed)
        self.refresh()

    @property
    def widget(self) -> w.Widget:
        return self.box

    def _row(self, name: str, controls: list, actions: dict, visible: bool = True) -> None:
        for label, fn in actions.items():
            self.buttons[label] = _button(label, fn)
        err = w.HTML(layout=w.Layout(flex="1 1 240px"))
        err.add_class("se-error")
        err.add_class(f"se-error-{name.replace(' ', '-')}")
        self.errors[name] = err
        title = w.HTML(f"<b>{name}</b>", layout=w.Layout(width="95px"))
        row = w.HBox([title, *controls, *(self.buttons[k] for k in actions), err],
                     layout=w.Layout(display="flex" if visible else "none",
                                     align_items="center"))
        self.rows[name] = row

    def _build_rows(self) -> None:
        st = self.state
        self._row("split", [self.split_factor], {"split": self._on_split_clicked})
        self._row("tile", [self.tile_loops, self.tile_factors], {"tile": self._on_tile_clicked})
        self._row("reorder", [self.reorder_loops], {"reorder": self._on_reorder_clicked})
        self._row("fuse", [self.fuse_loops], {"fuse": self._on_fuse_clicked})
        self._row("loop kind", [], {"parallel": lambda: st.parallel(),
                                    "vectorize": lambda: st.vectorize(),
                                    "unroll": lambda: st.unroll()})
        self._row("bind", [self.bind_axis], {"bind": lambda: st.bind(None, self.bind_axis.value)},
                  visible=st.target.is_gpu)
        self._row("cache", [self.cache_buffer, self.cache_scope], {
            "cache_read": lambda: st.cache_read(None, self.cache_buffer.value,
                                                self.cache_scope.value),
            "cache_write": lambda: st.cache_write(None, 0, self.cache_scope.value)})
        self._row("compute_at", [self.at_loop], {
            "compute_at": lambda: st.compute_at(None, self.at_loop.value),
            "reverse_compute_at": lambda: st.reverse_compute_at(None, self.at_loop.value)})
        self._row("inline", [], {"compute_inline": lambda: st.compute_inline(),
                                 "reverse_compute_inline": lambda: st.reverse_compute_inline()})

    # ------------------------------------------------------------ actions
    def _on_split_clicked(self) -> None:
        if self.split_factor.value is None:
            self.state.report_error("split", "split: select a loop with more than one iteration")
            return
        self.state.split(None, [None, self.split_factor.value])

    def _parsed(self, prim: str, fn) -> None:
        try:
            fn()
        except ValueError as e:
            self.state.report_error(prim, str(e))

    def _on_tile_clicked(self) -> None:
        self._parsed("tile", lambda: self.state.tile(
            parse_names(self.tile_loops.value), parse_ints(self.tile_factors.value, "tile")))

    def _on_reorder_clicked(self) -> None:
        self.state.reorder(parse_names(self.reorder_loops.value))

    def _on_fuse_clicked(self) -> None:
        self.state.fuse(parse_names(self.fuse_loops.value))

    # ------------------------------------------------------------ refreshing
    def refresh(self) -> None:
        st = self.state
        choices = st.split_choices()
        tile_like = max((c for c in choices if c <= 16), default=None)
        _set_options(self.split_factor, choices, tile_like)
        block = st.block()
        loops = list(block.loops) if block else []
        spatial = [lp.name for lp in st.loops() if lp.name in loops and lp.roles == "S"]
        self.tile_loops.value = ", ".join(spatial[:2])
        self.reorder_loops.value = ", ".join(loops)
        self.fuse_loops.value = ", ".join(loops[:2])
        reads = [(f"{name} (#{i})", i) for i, name in enumerate(block.reads)] if block else []
        _set_options(self.cache_buffer, reads)
        others = [lp.name for lp in st.loops() if lp.name not in loops]
        _set_options(self.at_loop, others or loops)

    def show_error(self) -> None:
        err = self.state.error
        for label in self.errors.values():
            label.value = ""
        if err is not None:
            row = ROW_OF.get(err.primitive, err.primitive)
            label = self.errors.get(row) or self.errors["split"]
            text = html.escape(err.message, quote=False)
            label.value = f'<span style="color:#b71c1c">\u26a0 {text}</span>'

    def _on_state_changed(self, what: str) -> None:
        if what in ("schedule", "selection"):
            self.refresh()
        if what in ("schedule", "error"):
            self.show_error()


def _set_options(dropdown: w.Dropdown, options: list, prefer=None) -> None:
    """Replace the options, keeping the old value if still offered, else ``prefer``,
    else the first option (ipywidgets would leave None)."""
    if list(dropdown.options) == list(options):
        return
    old = dropdown.value
    dropdown.options = options
    values = [o[1] if isinstance(o, tuple) else o for o in options]
    for v in (old, prefer, values[0] if values else None):
        if v is not None and v in values:
            dropdown.value = v
            return
