"""The early stop (a candidate far slower than the best gets one warm call, marked as an
estimate), the re-timing on the kernels built before, and how the tuner records,
counts and resumes estimates. Every kernel run here is checked against numpy."""
import time

import pytest

from explorer import Schedule, ops
from explorer.database import Database
from explorer.errors import MeasureError
from explorer.measure import LocalRunner, MeasureInput, Measurer, RunConfig
from explorer.measure.runner import workload_target_key
from explorer.measure.timing import time_candidate
from explorer.tune import Tuner

CFG = RunConfig(repeats=3, number=1, min_repeat_secs=0.002, run_timeout=5.0,
                build_timeout=30.0, cutoff_factor=1e6, min_cutoff_secs=0.0,
                early_stop_factor=2.0)


def tiled_gemm(wl):
    sch = Schedule(wl)
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 8])
    sch.reorder(io, jo, k, ii, ji)
    return sch


def _sleeper(secs, calls):
    def call():
        calls.append(1)
        time.sleep(secs)
    return call


def test_time_candidate_stops_on_a_slow_warm_call_and_times_the_others_in_full():
    cfg = RunConfig(repeats=3, number=1, min_repeat_secs=0.004, warmup=1)
    calls: list = []
    got = time_candidate(_sleeper(0.002, calls), 0.002, cfg, 10.0, stop_above=0.001)
    assert got.estimate and got.number == 1 and len(got.samples) == 1
    assert got.samples[0] >= 0.002 and len(calls) == 2     # the warm call and one more
    calls.clear()
    got = time_candidate(_sleeper(0.002, calls), 0.002, cfg, 10.0, stop_above=0.01)
    assert not got.estimate and len(got.samples) == 3 and len(calls) == 1 + 3 * got.number
    calls.clear()
    got = time_candidate(_sleeper(0.002, calls), 0.002, cfg.with_(repeats=0), 10.0,
                         stop_above=0.001)   # no repeats asked: the checked first run
    assert not got.estimate and got.samples == [0.002] and not calls
    slow_once = [0.01, 0.002]    # the warm call slowed by another process: timed in full
    calls.clear()

    def call():
        calls.append(1)
        time.sleep(slow_once.pop(0) if slow_once else 0.002)
    got = time_candidate(call, 0.002, cfg, 10.0, stop_above=0.005)
    assert not got.estimate and len(got.samples) == 3 and got.samples[1] < 0.005


def test_early_stop_factor_is_checked():
    with pytest.raises(MeasureError, match="early_stop_factor=1.0 must be > 1"):
        RunConfig(early_stop_factor=1.0)
    assert RunConfig.thorough().early_stop_factor is None


@pytest.fixture(scope="module")
def measurer():
    with Measurer("llvm", CFG, workers=2) as m:
        yield m


def test_a_candidate_twice_as_slow_as_the_best_is_an_estimate_that_leaves_the_best(measurer):
    wl = ops.gemm(16, 16, 8)
    runner = LocalRunner(measurer.pool, CFG)
    good = MeasureInput.from_schedule(tiled_gemm(wl), "llvm")
    assert runner.early_stop_for(good) is None          # no best yet: timed in full
    first = runner.run_one(good)
    assert first.ok and not first.estimate and len(first.run_secs) == 3
    best = runner.best_secs[workload_target_key(good)]
    assert runner.early_stop_for(good) == pytest.approx(2 * best)
    slow = MeasureInput.from_schedule(tiled_gemm(wl), "llvm", fault="slow:0.01")
    r = runner.run_one(slow)
    assert r.ok and r.estimate and len(r.run_secs) == 1 and r.number == 1, r
    assert r.run_secs[0] >= 0.01 and r.max_abs_error is not None and r.max_abs_error < 1e-4
    assert runner.best_secs[workload_target_key(good)] == best   # an estimate sets no best
    timed = runner.run_one(slow, cutoff_secs=1.0)   # an explicit cutoff times in full
    assert timed.ok and not timed.estimate and len(timed.run_secs) == 3
    assert LocalRunner(measurer.pool, CFG.with_(cutoff_factor=None)).early_stop_for(good) \
        is None                                     # no cutoff, no early stop
    assert MeasureInput.from_json(r.input.as_json()) == slow
    assert type(r).from_json(r.as_json()).estimate


def test_remeasure_runs_the_kernels_measure_built(measurer):
    wl = ops.gemm(16, 16, 8)
    inputs = [measurer.input(tiled_gemm(wl)), measurer.input(Schedule(wl))]
    first = measurer.measure(inputs)
    assert all(r.ok for r in first)
    built = []
    build = measurer.builder.build
    measurer.builder.build = lambda inps, *a, **k: built.extend(inps) or build(inps, *a, **k)
    try:
        again = [measurer.input(tiled_gemm(wl)), measurer.input(Schedule(wl))]
        rounds = measurer.remeasure(again, 2)
        new = measurer.input(tiled_gemm(ops.gemm(16, 16, 16)))
        rounds_new = measurer.remeasure([new], 1)
    finally:
        measurer.builder.build = build
    assert built == [new]                            # the two measured are not built again
    for runs in rounds + rounds_new:
        assert all(r.ok and not r.estimate and r.max_abs_error < 1e-4 for r in runs)
    # re-timing repeats last retime_min_repeat_secs (0.02 s), the search's 0.002 s
    assert CFG.retime_min_repeat_secs == 10 * CFG.min_repeat_secs
    for r, runs in zip(first, rounds):
        assert max(x.number for x in runs) > 2 * r.number    # 10x, less a busy calibration


def test_the_tuner_marks_counts_and_resumes_estimates(tmp_path):
    wl = ops.get("gemm", 64, 64, 64)
    db = tmp_path / "db"
    cfg = RunConfig(early_stop_factor=1.01)   # nearly every candidate slower than the best
    # the expert first: the model's first picks alone are so alike that on a loaded
    # machine none was 1% slower than the best before it (no estimate in 2 runs of 3)
    res = Tuner(wl, "llvm", trials=8, batch_size=8, database=db, seed=0, config=cfg,
                seed_expert=True).run()
    recs = Database(db).records(wl, res.target)
    est = [r for r in recs if r.meta.get("estimate")]
    assert est and res.estimated == len(est)
    assert all(r.ok and len(r.run_secs) == 1 for r in est)
    assert all(len(r.run_secs) > 1 for r in recs if r.ok and not r.meta.get("estimate"))
    best = Database(db).best(wl, res.target)[0]     # timed in full, or re-timed
    assert best.trace == res.trace and len(best.run_secs + best.retime_secs) > 1
    # a resumed run starts its cutoff and early stop from the best timed in full
    t = Tuner(wl, "llvm", trials=9, batch_size=1, database=db, seed=0, config=cfg,
              seed_expert=False)
    t.begin()
    try:
        timed = min(r.seconds for r in Database(db).records(wl, res.target)
                    if r.ok and (r.retime_secs or not r.meta.get("estimate")))
        assert list(t.measurer.best_secs.values()) == [pytest.approx(timed)]
        assert t.state.trial == 8
    finally:
        t.close()
        t.finish()
