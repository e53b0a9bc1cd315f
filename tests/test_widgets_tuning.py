"""TuningDashboard and CostModelView fed synthetic event sequences (the tuner's
events, explorer.events), and SpaceSampler over a small hand-written space."""
from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

from explorer import Schedule, build, ops  # noqa: E402
from explorer.events import (CandidateMeasured, EventBus, ModelUpdated, NewBest,  # noqa: E402
                             Retimed, Retiming, RoundStarted, TuningFinished, TuningStarted)
from widgets import CostModelView, ScheduleExplorer, SpaceSampler, TuningDashboard  # noqa: E402
from widgets.sampler_state import knobs_of  # noqa: E402

WL = ops.gemm(32, 32, 16)


def bus_log(bus) -> list:
    """Every event ``bus`` carried (a subscriber added by the test)."""
    return bus.log


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def gemm_space(wl=WL):
    """A tiny design space: perfect tiles of i and j, vectorize, parallel."""
    def sample(n, seed):
        out = []
        for s in range(n):
            sch = Schedule(wl, seed=seed * 1000 + s)
            i, j, k = sch.get_loops(sch.get_block("C"))
            io, ii = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=8))
            jo, ji = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
            sch.reorder(io, jo, k, ii, ji)
            sch.vectorize(ji)
            unroll = sch.sample_categorical([0, 16, 64], [0.3, 0.3, 0.4])
            sch.annotate(io, "unroll_explicit", unroll)
            out.append(sch)
        return out
    return sample


def synthetic_run(bus, clock, rounds=3, per_round=4, fail_every=5, step=1.0, finish=True):
    """Emit what a tuner would: rounds of measured candidates, model updates, bests."""
    bus.log = []
    bus.subscribe(bus.log.append)
    schedules = gemm_space()(rounds * per_round, 7)
    total = rounds * per_round
    bus.emit(TuningStarted(WL.key, "llvm", total, "evolutionary", 7))
    best, trial = None, 0
    for r in range(rounds):
        bus.emit(RoundStarted(WL.key, r, per_round))
        for _ in range(per_round):
            clock.t += step
            sch = schedules[trial]
            failed = trial % fail_every == fail_every - 1
            gflops = None if failed else 1.0 + trial * 0.5 + (trial % 3)
            secs = None if failed else WL.flops / gflops / 1e9
            bus.emit(CandidateMeasured(WL.key, r, trial, sch.trace.as_json(), secs, gflops,
                                       "wrong result" if failed else None,
                                       None if r == 0 else 0.1 * trial + 0.05))
            if gflops is not None and (best is None or gflops > best):
                best = gflops
                bus.emit(NewBest(WL.key, trial, secs, gflops, sch.trace.as_json()))
            trial += 1
        bus.emit(ModelUpdated(WL.key, r, (r + 1) * per_round, None if r == 0 else 0.5 + 0.1 * r,
                              None if r == 0 else 0.3 * r,
                              (("loop extent product (C)", 3.0 + r), ("bytes of B per iter", 5.0),
                               ("vector lanes", 1.0))))
    if finish:
        bus.emit(TuningFinished(WL.key, total, total, total // fail_every, WL.flops / best / 1e9,
                                best, clock.t))
    return schedules


def test_dashboard_folds_events_into_curve_scatter_accuracy_progress_and_table(capsys):
    bus, clock = EventBus(), Clock()
    dash = TuningDashboard(bus, workload=WL, top_k=5, interval=0.5, clock=clock)
    synthetic_run(bus, clock, step=0.1)
    st = dash.state
    assert dash.events == len(bus_log(bus))
    assert st.done == 12 and st.failed == 2 and st.finished is not None
    assert "12/12 trials" in dash.progress_text.value and "done" in dash.progress_text.value
    assert dash.progress.value == dash.progress.max == 12
    df = st.top_k(5)
    assert list(df.index) == [1, 2, 3, 4, 5]
    assert list(df["GFLOP/s"]) == sorted(df["GFLOP/s"], reverse=True)
    assert df["GFLOP/s"].iloc[0] == max(g for g in st.gflops() if g is not None)
    assert "<table" in dash.table.value and "se-topk-table" in dash.table.value
    assert [label for label, _ in dash.pick.options][0].startswith("#1 (trial")
    axes = dash.figure.axes
    assert len(axes[0].lines) == 1                                        # best-so-far
    assert len(axes[1].collections[0].get_offsets()) == 6     # rounds 1-2 less 2 failures
    assert list(axes[2].lines[0].get_xdata()) == [1, 2]                   # rank accuracy
    assert capsys.readouterr().out == ""                                  # never prints


def test_dashboard_takes_retimed_seconds_so_table_rank_1_is_the_best(capsys):
    bus, clock = EventBus(), Clock()
    dash = TuningDashboard(bus, workload=WL, top_k=5, interval=0.5, clock=clock)
    synthetic_run(bus, clock, step=0.1, finish=False)
    st = dash.state
    lucky = int(st.top_k(5)["trial"].iloc[0])
    second = int(st.top_k(5)["trial"].iloc[1])
    bus.emit(Retiming(WL.key, 2, 3))
    assert "timing the 2 fastest again" in st.progress_text()
    # the lucky one re-timed 10x slower; the second holds up; a third turned out wrong
    secs = {r.trial: r.seconds for r in st.rows}
    third = int(st.top_k(5)["trial"].iloc[2])
    bus.emit(Retimed(WL.key, (lucky, second, third), (secs[lucky] * 10, secs[second], None),
                     (WL.flops / secs[lucky] / 10 / 1e9, WL.flops / secs[second] / 1e9, None),
                     (None, None, "re-timing: wrong: max abs error 2.0")))
    bus.emit(NewBest(WL.key, second, secs[second], WL.flops / secs[second] / 1e9,
                     st.trace_of(second)))
    bus.emit(TuningFinished(WL.key, 12, 12, 2, secs[second], WL.flops / secs[second] / 1e9,
                            clock.t))
    df = st.top_k(5)
    assert int(df["trial"].iloc[0]) == second == st.best.trial
    assert third not in list(df["trial"]) and st.failed == 3
    everything = st.top_k(12)
    assert bool(df["re-timed"].iloc[0]) and lucky in list(everything["trial"])
    row = everything[everything["trial"] == lucky].iloc[0]
    assert row["re-timed"] and row["ms"] == pytest.approx(secs[lucky] * 10 * 1e3, abs=1e-4)
    assert sorted(everything.loc[everything["re-timed"], "trial"]) == sorted([lucky, second])
    assert "re-timed" in dash.table.value and "done" in dash.progress_text.value
    assert dash.table.value.count("\u2713") == 1 and "False" not in dash.table.value
    assert capsys.readouterr().out == ""


def test_dashboard_eta_and_throttled_redraws():
    bus, clock = EventBus(), Clock()
    dash = TuningDashboard(bus, workload=WL, interval=5.0, clock=clock)
    bus.emit(TuningStarted(WL.key, "llvm", 100, "random", 0))
    trace = Schedule(WL).trace.as_json()
    renders = []
    for t in range(40):
        clock.t += 0.5                                    # 2 trials a second
        bus.emit(CandidateMeasured(WL.key, 0, t, trace, 1e-3, 1.0 + t, None, None))
        renders.append(dash.figure.renders)
    assert dash.state.eta_seconds() == pytest.approx(20.0 / 40 * 60)
    assert "about 30 s left" in dash.state.progress_text()
    assert renders[-1] <= 1 + 20.0 / 5.0                  # at most one redraw per 5 s
    assert dash.figure.dirty or renders[-1] == renders[-2] + 1
    image = dash.figure.image
    bus.emit(TuningFinished(WL.key, 100, 40, 0, 1e-3, 40.0, clock.t))
    assert dash.figure.image is image and not dash.figure.dirty       # same image, updated


def test_dashboard_apply_loads_a_trace_into_the_explorer_and_it_runs_correctly():
    bus, clock = EventBus(), Clock()
    ex = ScheduleExplorer(WL, target="llvm", repeats=1)
    dash = TuningDashboard(bus, explorer=ex, clock=clock)
    schedules = synthetic_run(bus, clock)
    dash.pick.value = 1
    dash.apply_button.click()
    best_trial = int(dash.state.top_k()["trial"].iloc[0])
    assert ex.schedule.func == schedules[best_trial].func
    assert "applied rank 1" in dash.apply_status.value
    r = ex.run()
    ex.close()
    assert r.ok and r.max_abs_error < 1e-3
    dash.detach()
    bus.emit(TuningStarted(WL.key, "llvm", 1, "random", 0))
    assert dash.state.started.trials == 12                 # detached: no longer listening


def test_dashboard_apply_without_explorer_replays_on_the_workload():
    bus, clock = EventBus(), Clock()
    dash = TuningDashboard(bus, workload=WL, clock=clock)
    schedules = synthetic_run(bus, clock, rounds=1, per_round=3)
    sch = dash.apply(2)
    trial = int(dash.state.top_k()["trial"].loc[2])
    assert sch.func == schedules[trial].func
    args = WL.make_args(seed=3)
    build(sch, "interp")(*args)
    assert WL.check(args) < 1e-3


def test_cost_model_view_accuracy_as_samples_grow_and_named_importance():
    bus, clock = EventBus(), Clock()
    view = CostModelView(bus, top=2, clock=clock)
    synthetic_run(bus, clock)
    assert [u.samples for u in view.state.updates] == [4, 8, 12]
    acc_ax, imp_ax = view.figure.axes
    assert list(acc_ax.lines[0].get_xdata()) == [8, 12]     # round 0 had no accuracy yet
    labels = [t.get_text().strip() for t in imp_ax.texts]
    assert sorted(labels) == ["bytes of B per iter", "loop extent product (C)"]
    assert "rank accuracy 0.70" in view.text.value and "12 training samples" in view.text.value


def test_sampler_samples_measures_plots_and_loads_into_the_explorer():
    ex = ScheduleExplorer(WL, target="llvm", repeats=1)
    sp = SpaceSampler(WL, space=gemm_space(), explorer=ex, repeats=1)
    sp.count.value, sp.seed.value = 6, 3
    sp.sample_button.click()
    assert len(sp.samples) == 6
    assert sp.knob.options == ("tile C.i[0]", "tile C.i[1]", "tile C.j[0]", "tile C.j[1]",
                               "unroll_explicit")
    sp.measure_button.click()
    assert all(s.result is not None and s.result.ok for s in sp.samples)
    assert all(s.result.max_abs_error < 1e-3 for s in sp.samples)
    assert sp.state.measurer is ex.state.measurer            # one worker for both views
    assert sp.progress.value == 6 and "6 correct" in sp.status.value
    hist_ax = sp.figure.axes[0]
    assert sum(p.get_height() for p in hist_ax.patches) == 6
    renders = sp.figure.renders
    sp.knob.value = "tile C.j[1]"                   # redrawn at once with the new decision
    scatter_ax = sp.figure.axes[1]
    assert sp.figure.renders == renders + 1 and scatter_ax.get_xlabel() == "tile C.j[1]"
    assert len(scatter_ax.collections[0].get_offsets()) == 6
    best = sp.best()
    assert sp.choice.value == best.index
    sp.load_button.click()
    assert ex.schedule.func == best.schedule.func
    r = ex.run()
    ex.close()
    assert r.ok and r.max_abs_error < 1e-3


def test_sampler_with_a_predictor_and_knob_names():
    sp = SpaceSampler(WL, space=gemm_space(), predictor=lambda scheds: range(len(scheds)))
    sp.sample(4, seed=0)
    sp.predict_button.click()
    assert [s.predicted for s in sp.samples] == [0.0, 1.0, 2.0, 3.0]
    assert sp.best().index == 3
    knobs = knobs_of(sp.samples[0].schedule)
    assert knobs["tile C.i[0]"] * knobs["tile C.i[1]"] == 32
    assert knobs["unroll_explicit"] in (0, 16, 64)


def test_sampler_without_a_space_says_so():
    sp = SpaceSampler(WL, space=None)
    sp.state.space = None
    assert sp.sample(3) == []
    assert "no design space" in sp.status.value


def test_sampler_uses_the_engine_design_space_by_default():
    wl = ops.gemm(32, 32, 16)
    sp = SpaceSampler(wl, repeats=1)
    assert type(sp.state.space).__name__ == "DesignSpace"
    sp.sample(3, seed=0)
    sp.measure()
    sp.close()
    assert len(sp.samples) == 3 and all(s.result.ok for s in sp.samples)
    assert all(s.result.max_abs_error < 1e-3 for s in sp.samples)
    assert any(k.startswith("tile C.i[") for k in sp.state.knob_names())
