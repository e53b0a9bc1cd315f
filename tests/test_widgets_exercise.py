"""Exercise checks and lesson steps: a right and a wrong student schedule, judged by
real measurements against numpy; the verdict logic pinned on constructed results."""
from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

from explorer import Schedule, Target, WorkloadError, ops  # noqa: E402
from explorer.measure import MeasureResult, interactive_config  # noqa: E402
from explorer.measure.interactive import InteractiveResult  # noqa: E402
from test_widgets_explorer import FaultyMeasurer  # noqa: E402
from widgets.exercise import Exercise, Verdict, hints_for, verdict_of  # noqa: E402
from widgets.steps import Steps, numpy_best_gflops, percent, plot_steps  # noqa: E402

CFG = interactive_config(repeats=2, min_repeat_secs=0.005, run_timeout=5.0)
HOST = Target("llvm")


@pytest.fixture(scope="module")
def measurer():
    with FaultyMeasurer("llvm", CFG) as m:
        yield m


@pytest.fixture
def gemm():
    return ops.gemm(64, 64, 32)


def good_schedule(wl, lanes: int):
    """What lesson 02 teaches, on a small gemm: tile, reorder, vectorize, register tile."""
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    jo, ji = sch.split(j, [None, lanes])
    io, ii = sch.split(i, [None, 4])
    sch.reorder(jo, io, k, ii, ji)
    sch.vectorize(ji)
    sch.unroll(ii)
    sch.parallel(jo)
    cl = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(cl, io)
    return sch


def _result(ours_secs, numpy_secs, flops=1e9, kind=None):
    if kind:
        return InteractiveResult(MeasureResult.failed(None, kind, "C differs at [0, 1]"), "llvm")
    mine = MeasureResult(None, tuple(ours_secs), max_abs_error=1e-6, flops=int(flops))
    theirs = MeasureResult(None, tuple(numpy_secs), max_abs_error=1e-6, flops=int(flops))
    return InteractiveResult(mine, "llvm", numpy=theirs)


def test_verdict_judges_median_against_numpys_best_run():
    # ours: median 0.02 s = 50 GFLOP/s; numpy: best 0.01 s = 100 GFLOP/s (its median 0.5 s)
    r = _result([0.01, 0.02, 0.03], [0.01, 0.5, 0.9])
    assert numpy_best_gflops(r) == pytest.approx(100.0)
    passed = verdict_of(r, goal=0.5)
    assert passed.passed and passed.fraction == pytest.approx(0.5)
    assert "50% of numpy" in passed.message and passed.hints == ()
    short = verdict_of(r, goal=0.8, hints=("vectorize it",))
    assert not short.passed and "the goal is 80%: 1.6x faster to go" in short.message
    assert short.hints == ("vectorize it",) and "hint: vectorize it" in str(short)
    assert "NOT YET" in short._repr_html_() and "62%" in short._repr_html_()  # of the goal
    assert (percent(0.953), percent(0.0024), percent(14.44)) == ("95%", "0.24%", "1444%")


def test_verdict_of_a_wrong_output_says_so():
    v = verdict_of(_result(None, None, kind="wrong"), goal=0.5)
    assert not v.passed and v.fraction is None
    assert v.message.startswith("its output differs from numpy's: C differs")


def test_hints_name_what_the_schedule_lacks(gemm):
    naive = hints_for(Schedule(gemm), HOST)
    text = " ".join(naive)
    assert f"{HOST.vector_lanes} float32 lanes" in text
    assert "innermost loop 'k' is a reduction" in text and "cache_write" in text
    assert ("parallel" in text) == (HOST.num_cores > 1)
    assert hints_for(good_schedule(gemm, HOST.vector_lanes), HOST) == ()


def test_right_student_schedule_is_measured_checked_and_judged(gemm, measurer):
    ex = Exercise(gemm, goal=0.5, measurer=measurer)
    v = ex.check(good_schedule(gemm, HOST.vector_lanes))
    assert isinstance(v, Verdict) and v.fraction is not None and v.gflops > 0
    assert v.passed == (v.fraction >= 0.5)          # the judgement follows the numbers
    assert v.hints == () or not v.passed            # hints only for a shortfall
    assert "correct;" in v.message and "of numpy" in v.message


def test_wrong_student_schedules(gemm, measurer):
    ex = Exercise(gemm, goal=1e9, measurer=measurer, hint="think of lesson 02")
    slow = ex.check(Schedule(gemm))                 # correct, nowhere near the goal
    assert not slow.passed and slow.fraction is not None and "faster to go" in slow.message
    assert slow.hints[-1] == "think of lesson 02" and len(slow.hints) >= 3
    measurer.next_fault = "wrong"                   # a kernel whose output is wrong
    wrong = ex.check(good_schedule(gemm, HOST.vector_lanes))
    assert not wrong.passed and "differs from numpy" in wrong.message
    with pytest.raises(WorkloadError, match="schedule is of another operator"):
        ex.check(Schedule(ops.gemm(32, 32, 32)))
    with pytest.raises(WorkloadError, match="takes the Schedule you built"):
        ex.check(gemm)
    with pytest.raises(WorkloadError, match="explorer.ops operator"):
        Exercise(gemm.with_reference(None))


def test_steps_measure_each_schedule_against_numpy(gemm, measurer, capsys):
    steps = Steps(gemm, pictures=False)
    steps._measurer = measurer
    sch = Schedule(gemm)
    steps.show("naive", sch, why="the baseline")
    fast = good_schedule(gemm, HOST.vector_lanes)
    steps.show("tiled", fast)
    out = capsys.readouterr().out
    assert "step 0 naive:" in out and "why: the baseline" in out and "step 1 tiled:" in out
    assert "x the previous step" in out and "for k in range(32)" in out
    assert [r.name for r in steps.records] == ["naive", "tiled"]
    assert all(r.result.ok and r.result.max_abs_error < 1e-3 for r in steps.records)
    assert steps.numpy_gflops == pytest.approx(numpy_best_gflops(steps.records[0].result))
    fig = matplotlib.figure.Figure()
    heights = plot_steps(fig.subplots(), steps.records, steps.numpy_gflops)
    assert list(heights) == pytest.approx([r.gflops for r in steps.records])
