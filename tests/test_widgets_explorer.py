"""ScheduleExplorer driven like a person would: set values, press buttons, read
what the widgets show; every schedule that runs is checked against numpy."""
from __future__ import annotations

import json

import matplotlib
import pytest

matplotlib.use("Agg")

from explorer import Schedule, Trace, build, ops  # noqa: E402
from explorer.measure import InteractiveMeasurer, interactive_config  # noqa: E402
from widgets import ScheduleExplorer  # noqa: E402
from widgets.explorer_state import divisors  # noqa: E402
from widgets.loop_tree import tree_rows  # noqa: E402

CFG = interactive_config(repeats=2, min_repeat_secs=0.005, run_timeout=2.0)


class FaultyMeasurer(InteractiveMeasurer):
    """Injects ``next_fault`` (explorer.measure.faults) into the next measurement only."""
    next_fault = None

    def measure(self, sch, fault=None, compare=True):
        fault, self.next_fault = self.next_fault, None
        return super().measure(sch, fault=fault, compare=compare)


@pytest.fixture(scope="module")
def measurer():
    with FaultyMeasurer("llvm", CFG) as m:
        yield m


@pytest.fixture
def gemm():
    return ops.gemm(32, 48, 16)


@pytest.fixture
def ex(gemm, measurer):
    return ScheduleExplorer(gemm, measurer=measurer)


def _replayed(ex, wl) -> Schedule:
    """The explorer's trace, as printed Python, run on a fresh schedule."""
    sch = Schedule(wl)
    exec(ex.trace.text.value, {"sch": sch})
    return sch


def _checked(sch, wl, target="interp") -> float:
    args = wl.make_args(seed=1)
    build(sch, target)(*args)
    return wl.check(args)


def test_opens_on_the_naive_nest_with_first_loop_selected(ex):
    assert ex.state.selected_block == "C" and ex.state.selected_loop == "i"
    html = ex.code.html.value
    assert 'class="se-hl" data-tag="i"' in html and 'data-tag="C"' in html
    assert [v for _, v in ex.tree.select.options] == ["loop:i", "loop:j", "loop:k", "block:C"]
    assert ex.tree.select.value == "loop:i"
    assert list(ex.panel.split_factor.options) == divisors(32)[1:-1]
    assert ex.panel.reorder_loops.value == "i, j, k"
    assert ex.panel.rows["bind"].layout.display == "none"     # a CPU target: no bind row
    assert ex.undo_button.disabled and ex.redo_button.disabled
    assert "press Run" in ex.result.value
    host = ex.state.target                          # the hardware, as the target describes it
    assert host.describe() in ex.header.value
    assert f"{host.vector_lanes} fp32 lanes" in host.describe()


def test_split_with_the_factor_chooser_changes_nest_tree_and_trace(ex, gemm):
    ex.panel.split_factor.value = 8
    ex.panel.buttons["split"].click()
    text = ex.script()
    assert "for i_0 in range(4):" in text and "for i_1 in range(8):" in text
    assert "spatial(32, i_1 + i_0 * 8)" in text
    assert ex.state.selected_loop == "i_0" and ex.tree.select.value == "loop:i_0"
    assert "i_0 (4, spatial)" in [label.strip("\u00a0") for label, _ in ex.tree.select.options]
    assert ex.trace.text.value.splitlines()[-1] == "l4, l5 = sch.split(loop=l1, factors=[None, 8])"
    assert _replayed(ex, gemm).func == ex.schedule.func
    assert not ex.undo_button.disabled


def test_selecting_in_the_tree_highlights_that_loop(ex):
    ex.tree.select.value = "loop:k"
    assert ex.state.selected_loop == "k"
    assert 'class="se-hl" data-tag="k"' in ex.code.html.value
    assert 'class="se-hl" data-tag="i"' not in ex.code.html.value
    assert list(ex.panel.split_factor.options) == divisors(16)[1:-1]
    ex.tree.select.value = "block:C"
    assert ex.state.selected_block == "C"


def test_tile_vectorize_parallel_then_run_matches_numpy(ex, gemm):
    ex.panel.tile_loops.value = "i, j"
    ex.panel.tile_factors.value = "8, 16"
    ex.panel.buttons["tile"].click()
    assert ex.error is None
    ex.tree.select.value = "loop:j_1"
    ex.panel.buttons["vectorize"].click()
    ex.tree.select.value = "loop:i_0"
    ex.panel.buttons["parallel"].click()
    text = ex.script()
    assert "for i_0 in parallel(4):" in text and "for j_1 in vectorized(16):" in text
    ex.run_button.click()
    r = ex.last_run
    assert r.ok and r.error is None and r.max_abs_error < 1e-3 and r.backend == "llvm"
    assert r.seconds > 0 and r.gflops == pytest.approx(gemm.flops / r.seconds / 1e9)
    assert r.naive_seconds > 0 and r.numpy_seconds > 0
    assert r.speedup_naive == pytest.approx(r.naive_seconds / r.seconds)
    assert "GFLOP/s" in ex.result.value and "matches numpy" in ex.result.value
    assert _checked(_replayed(ex, gemm), gemm) < 1e-3


def test_run_button_shows_a_crash_or_a_hang_and_the_next_run_works(ex, gemm, measurer):
    ex.tile(["i", "j"], [8, 16])
    generation = measurer.pool[0].generation
    measurer.next_fault = "crash"                   # the kernel segfaults in the worker
    ex.run_button.click()
    r = ex.last_run
    assert not r.ok and r.error_kind == "crash" and "SIGSEGV" in r.error
    assert "run failed (crash)" in ex.result.value and "<details>" in ex.result.value
    assert "this notebook is unaffected" in ex.result.value
    assert ex.run_button.description == "Run" and not ex.run_button.disabled
    ex.run_button.click()                           # a fresh worker: the next Run works
    assert ex.last_run.ok and ex.last_run.max_abs_error < 1e-3
    assert "matches numpy" in ex.result.value
    assert measurer.pool[0].generation == generation + 1
    measurer.next_fault = "hang"                    # stopped after run_timeout
    ex.run_button.click()
    assert ex.last_run.error_kind == "timeout" and "run failed (timeout)" in ex.result.value
    ex.run_button.click()
    assert ex.last_run.ok and "GFLOP/s" in ex.result.value


def test_a_wrong_kernel_is_shown_as_wrong_not_timed(ex, measurer):
    measurer.next_fault = "wrong"
    r = ex.run()
    assert r.error_kind == "wrong" and r.seconds is None
    assert "run failed (wrong)" in ex.result.value and "GFLOP/s" not in ex.result.value


def test_illegal_step_shows_the_message_next_to_its_control_and_keeps_the_schedule(ex):
    ex.panel.split_factor.value = 4
    ex.panel.buttons["split"].click()
    before_func, before_trace = ex.schedule.func, ex.trace.text.value
    ex.tree.select.value = "loop:k"
    ex.panel.buttons["vectorize"].click()
    msg = ("vectorize: loop 'k' is a reduction loop of block 'C'; its iterations carry a "
           "dependence through the accumulator")
    assert ex.error == msg
    assert "reduction loop" in ex.panel.errors["loop kind"].value
    assert ex.panel.errors["split"].value == ""
    assert ex.schedule.func is before_func and ex.trace.text.value == before_trace
    assert len(ex.state._undo) == 1
    ex.panel.buttons["unroll"].click()              # a legal step clears the message
    assert ex.error is None and ex.panel.errors["loop kind"].value == ""


def test_illegal_reorder_and_bad_factor_text_are_reported_per_row(ex):
    ex.panel.reorder_loops.value = "k, i, nope"
    ex.panel.buttons["reorder"].click()
    assert "nope" in ex.panel.errors["reorder"].value
    ex.panel.tile_factors.value = "8, x"
    ex.panel.buttons["tile"].click()
    assert "'x' is not a whole number" in ex.panel.errors["tile"].value
    assert ex.panel.errors["reorder"].value == ""
    assert ex.schedule.trace.insts == []


def test_undo_redo_walk_the_history_of_values(ex):
    ex.panel.buttons["split"].click()
    after_split = ex.schedule.func
    ex.tree.select.value = "loop:j"
    ex.panel.buttons["split"].click()
    after_two = ex.script()
    ex.undo_button.click()
    assert ex.schedule.func is after_split
    ex.undo_button.click()
    assert ex.script() == ex.schedule.original.script() and ex.undo_button.disabled
    assert ex.trace.text.value == ""
    ex.redo_button.click()
    ex.redo_button.click()
    assert ex.script() == after_two and ex.redo_button.disabled
    ex.undo_button.click()
    ex.tree.select.value = "loop:k"
    ex.panel.buttons["unroll"].click()              # a new step drops the redo stack
    assert ex.redo_button.disabled and "unroll(16)" in ex.script()


def test_reorder_and_fuse_from_the_text_fields(ex, gemm):
    ex.panel.reorder_loops.value = "j, i, k"
    ex.panel.buttons["reorder"].click()
    assert ex.script().index("for j in") < ex.script().index("for i in")
    ex.panel.fuse_loops.value = "j, i"
    ex.panel.buttons["fuse"].click()
    assert "for j_i_fused in range(1536):" in ex.script()
    assert ex.state.selected_loop == "j_i_fused"
    assert _checked(_replayed(ex, gemm), gemm) < 1e-3


def test_cache_write_and_reverse_compute_at_through_the_panel(ex, gemm):
    ex.panel.tile_loops.value, ex.panel.tile_factors.value = "i, j", "8, 8"
    ex.panel.buttons["tile"].click()
    ex.tree.select.value = "block:C"
    ex.panel.cache_scope.value = "local"
    ex.panel.buttons["cache_write"].click()
    assert ex.error is None and ex.state.selected_block == "C_local"
    ex.panel.at_loop.value = "j_0"
    ex.panel.buttons["reverse_compute_at"].click()
    assert ex.error is None
    text = ex.script()
    assert 'scope="local"' in text and "v0 = spatial(32, i_0 * 8 + ax0_1)" in text
    assert _checked(ex.schedule, gemm) < 1e-3
    assert _replayed(ex, gemm).func == ex.schedule.func


def test_cache_read_compute_at_and_inline_on_conv2d():
    wl = ops.conv2d(1, 3, 6, 6, 4, 3, 3, padding=1)
    ex = ScheduleExplorer(wl, target="interp", repeats=1)
    ex.select(block="conv")
    assert [label for label, _ in ex.panel.cache_buffer.options] == ["pad (#0)", "W (#1)"]
    ex.panel.cache_buffer.value = 1
    ex.panel.buttons["cache_read"].click()
    assert ex.state.selected_block == "W_global"
    ex.panel.at_loop.value = "k"
    ex.panel.buttons["compute_at"].click()
    assert ex.error is None
    ex.select(block="pad")
    ex.panel.buttons["compute_inline"].click()
    assert ex.error is None and 'block("pad")' not in ex.script()
    ex.select(block="conv")
    ex.panel.buttons["compute_inline"].click()       # conv is a reduction: refused
    assert "compute_inline" in ex.panel.errors["inline"].value
    r = ex.run()
    ex.close()
    assert r.ok and r.backend == "interp" and r.max_abs_error < 1e-3


def test_gpu_target_offers_bind_and_runs_in_the_interpreter_with_a_note(gemm):
    measurer = InteractiveMeasurer("cuda", interactive_config(repeats=1), emulate=False)
    ex = ScheduleExplorer(gemm, target="cuda", repeats=1, measurer=measurer)
    assert ex.panel.rows["bind"].layout.display != "none"
    ex.tile(["i", "j"], [8, 16])
    ex.select(loop="i_0")
    ex.fuse("i_0", "j_0")
    ex.panel.bind_axis.value = "blockIdx.x"
    ex.panel.buttons["bind"].click()
    ex.select(loop="i_1")
    ex.fuse("i_1", "j_1")
    ex.panel.bind_axis.value = "threadIdx.x"
    ex.panel.buttons["bind"].click()
    assert ex.error is None
    assert 'thread_binding(128, "threadIdx.x")' in ex.script()
    r = ex.run()
    ex.close()
    assert r.ok and r.backend == "interp" and "interpreter" in r.note
    assert r.max_abs_error < 1e-3 and "interpreter" in ex.result.value
    measurer.close()


def test_code_api_mirrors_the_schedule_and_copy_button(ex, gemm):
    assert ex.split("i", [None, 4]) and ex.vectorize("j") is True
    assert ex.parallel("k") is False and "parallel" in ex.error
    ex.trace.copy_button.click()
    assert ex.trace.copied == ex.trace_python() == ex.trace.text.value
    assert "sch.vectorize(loop=l2)" in ex.trace.copied


def test_load_trace_and_schedule_from_elsewhere(ex, gemm):
    sch = Schedule(gemm)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(j, [None, 16])
    ex.load_trace(json.dumps(sch.trace.as_json()))
    assert ex.schedule.func == sch.func and ex.state.can_undo
    ex.load(Schedule(gemm))
    assert ex.script() == gemm.func.script()
    ex.undo()
    assert ex.schedule.func == sch.func
    assert Trace.from_json(ex.state.trace_json()).apply_to(Schedule(gemm)).func == sch.func


def test_pictures_draw_into_one_image(ex):
    ex.pictures_toggle.value = True
    assert ex.pictures_box.children == (ex.figure.image,)
    first = ex.figure.renders
    ex.split("i", [None, 8])
    assert ex.figure.renders == first + 1
    assert ex.figure.png()[:4] == b"\x89PNG"
    ex.pictures_toggle.value = False
    ex.split("j", [None, 8])
    assert ex.figure.renders == first + 1


def test_pictures_place_a_run_on_the_measured_roofline_of_this_host(ex, gemm):
    ex.pictures_toggle.value = True
    roof_ax = ex.figure.axes[3]
    assert "press Run" in roof_ax.texts[0].get_text()     # no run yet: nothing measured
    ex.tile(["i", "j"], [8, 16])
    r = ex.run()
    assert r.ok
    roof, roof_ax = ex.roofline(), ex.figure.axes[3]
    assert max(roof_ax.lines[1].get_ydata()) == roof.peak_gflops
    offsets = roof_ax.collections[0].get_offsets()
    assert offsets[0][1] == pytest.approx(r.gflops) and len(offsets) == 2   # current, naive
    assert f"{ex.state.target.vector_lanes} fp32 lanes" in roof.source


def test_tree_rows_show_kinds_and_nesting(ex):
    ex.tile(["i", "j"], [8, 16])
    ex.vectorize("j_1")
    rows = tree_rows(ex.state)
    assert [v for _, v in rows] == ["loop:i_0", "loop:j_0", "loop:i_1", "loop:j_1", "loop:k",
                                    "block:C"]
    label = dict((v, lbl) for lbl, v in rows)["loop:j_1"]
    assert label.startswith("\u00a0" * 9) and "vectorized" in label
