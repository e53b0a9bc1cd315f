"""The explorer's view-model on its own (no ipywidgets): history, selection,
handles, errors, and runs through the engine's InteractiveMeasurer."""
from __future__ import annotations

import pytest

from explorer import Schedule, build, ops
from explorer.measure import InteractiveMeasurer, interactive_config
from widgets import ExplorerState


@pytest.fixture
def st():
    return ExplorerState(ops.gemm(24, 36, 8), target="llvm", repeats=1)


def test_names_become_handles_once_and_the_trace_stays_short(st):
    assert st.split("i", [None, 4]) and st.split("j", [None, 6])
    assert st.reorder("i_0", "j_0", "i_1", "j_1", "k")
    kinds = [ins.kind for ins in st.schedule.trace.insts]
    assert kinds == ["get_block", "get_loops", "split", "split", "reorder"]


def test_handles_are_fetched_again_for_a_block_the_schedule_changed(st):
    st.cache_write("C", 0, "global")
    st.split("j", [None, 4])
    assert st.error is None
    kinds = [ins.kind for ins in st.schedule.trace.insts]
    assert kinds == ["get_block", "cache_write", "get_loops", "split"]
    args = ops.gemm(24, 36, 8).make_args(seed=2)
    build(st.schedule, "interp")(*args)
    assert ops.gemm(24, 36, 8).check(args) < 1e-3


def test_undo_restores_the_selection_of_that_moment(st):
    st.select_loop("j")
    st.split(None, [None, 6])
    assert st.selected_loop == "j_0"
    st.undo()
    assert st.selected_loop == "j" and st.selected_block == "C"
    st.redo()
    assert st.selected_loop == "j_0"


def test_failed_step_notifies_error_and_keeps_everything(st):
    seen = []
    st.observe(seen.append)
    before = (st.schedule, st.selected_loop, len(st._undo))
    assert st.split("k", [2, 3]) is False
    assert st.error.message == ("split: loop 'k': factors [2, 3] multiply to 6, less than the "
                                "extent 8; use None for one factor")
    assert (st.schedule, st.selected_loop, len(st._undo)) == before
    assert seen == ["error"]


def test_an_engine_bug_is_reported_not_raised(st, monkeypatch):
    def boom(self, *a, **k):
        raise TypeError("oops")
    monkeypatch.setattr(Schedule, "unroll", boom)
    assert st.unroll("k") is False
    assert st.error.message == "internal error (TypeError): oops"
    assert st.schedule.trace.insts == []


def test_missing_selection_is_a_plain_message(st):
    st.select_loop(None)
    assert st.selected_loop is None
    assert st.vectorize() is False and st.error.message == "vectorize: select a loop first"


def test_split_choices_are_divisors_and_fall_back_for_primes():
    st = ExplorerState(ops.gemm(13, 12, 2))
    assert st.split_choices("i") == [1, 13]
    assert st.split_choices("j") == [2, 3, 4, 6]


def test_op_name_tuple_and_primfunc_start_points():
    assert ExplorerState(("gemm", 8, 8, 8)).workload.key == ops.gemm(8, 8, 8).key
    wl = ops.gemm(8, 8, 4)
    st = ExplorerState(wl.func, target="interp", repeats=1)
    assert st.workload is None
    st.split("j", [None, 4])
    try:
        r = st.run()                  # a bare PrimFunc: checked against its unscheduled program
    finally:
        st.close()
    assert r.ok and r.backend == "interp" and r.checked_by == "program"
    assert r.max_abs_error < 1e-5 and "unscheduled program" in r.summary()
    args = wl.make_args(seed=4)               # ...and this test checks it against gemm's
    build(st.schedule, "interp")(*args)
    assert wl.check(args) < 1e-4
    with pytest.raises(TypeError):
        ExplorerState(42)


def test_runs_go_through_a_shared_measurer_and_the_naive_schedule_is_its_own_baseline():
    wl = ops.gemm(16, 16, 16)
    with InteractiveMeasurer("llvm", interactive_config(repeats=1)) as m:
        st = ExplorerState(wl, measurer=m)
        assert st.measurer is m and str(st.target) == str(m.target)
        seen = []
        st.observe(seen.append)
        r = st.run()
        assert r.ok and r.speedup_naive == 1.0 and r.max_abs_error < 1e-4
        assert st.last_run is r and st.run_is_current and seen == ["run"]
        st.split("i", [None, 4])
        assert not st.run_is_current
        st.close()                            # a shared measurer is not the state's to end
        assert not m.pool.closed


def test_a_state_starts_its_measurer_at_the_first_run_only():
    st = ExplorerState(ops.gemm(8, 8, 8), repeats=1)
    st.split("i", [None, 4])
    assert st._measurer is None               # building the view starts no process
