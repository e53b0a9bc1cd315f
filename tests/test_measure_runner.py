"""Builder and runner in worker processes: results, failures as values, crash, hang,
cutoff, and a pool that keeps working afterwards. Every kernel is checked against numpy."""
import os
import time

import pytest

from explorer import Schedule, ops
from explorer.measure.runner import workload_target_key
from explorer.measure import (LocalBuilder, LocalRunner, MeasureInput, Measurer, RunConfig,
                              WorkerPool)


def _target() -> str:
    try:
        from explorer.backends import build
        wl = ops.gemm(4, 4, 4)
        args = wl.make_args()
        build(wl, "llvm")(*args)
        wl.check(args)
        return "llvm"
    except Exception:
        return "interp"


TARGET = _target()
CFG = RunConfig(repeats=3, number=1, min_repeat_secs=0.002, run_timeout=2.0,
                build_timeout=30.0, cutoff_factor=None)


def tiled_gemm(wl, fi=4, fj=8, parallel=False):
    sch = Schedule(wl)
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, fi])
    jo, ji = sch.split(j, [None, fj])
    sch.reorder(io, jo, k, ii, ji)
    if TARGET == "llvm":
        sch.vectorize(ji)
    if parallel:
        sch.parallel(io)
    return sch


@pytest.fixture(scope="module")
def measurer():
    with Measurer(TARGET, CFG, workers=2) as m:
        yield m


@pytest.fixture
def wl():
    return ops.gemm(16, 16, 8)


def alive(m):
    """The pool still measures a good candidate correctly."""
    r = m.measure([m.input(tiled_gemm(ops.gemm(16, 16, 8)))])[0]
    assert r.ok, r.error
    return r


def test_good_candidates_get_checked_medians(measurer, wl):
    inputs = [measurer.input(Schedule(wl)), measurer.input(tiled_gemm(wl)),
              measurer.input(tiled_gemm(wl, parallel=True))]
    results = measurer.measure(inputs)
    for inp, r in zip(inputs, results):
        assert r.ok, r.error
        assert r.input == inp and r.error is None and r.error_kind is None
        assert len(r.run_secs) == CFG.repeats and r.number >= 1
        assert r.min_secs <= r.median_secs <= r.max_secs
        assert r.max_abs_error is not None and r.max_abs_error < 1e-4
        assert r.first_run_secs > 0 and r.build_secs > 0 and r.flops == wl.flops
        assert r.gflops == pytest.approx(wl.flops / r.median_secs / 1e9)


def test_builder_builds_in_parallel_on_all_workers(measurer, wl):
    inputs = [measurer.input(tiled_gemm(wl, fi, 8)) for fi in (1, 2, 4, 8)]
    builds = measurer.builder.build(inputs)
    assert all(b.ok for b in builds), [b.error for b in builds]
    assert {b.worker for b in builds} == {0, 1}
    results = measurer.runner.run(inputs, builds)
    assert all(r.ok for r in results), [r.error for r in results]
    assert [r.build_secs for r in results] == [b.build_secs for b in builds]


def test_wrong_result_fails_with_where_and_how_much(measurer, wl):
    r = measurer.measure([measurer.input(tiled_gemm(wl), fault="wrong")])[0]
    assert not r.ok and r.run_secs is None
    assert r.error_kind == "wrong"
    assert "output C is wrong: max abs error 1 at index (8, 0)" in r.error


def test_crashing_kernel_gives_a_failed_result_and_the_pool_survives(measurer, wl):
    gen = [w.generation for w in measurer.pool.workers]
    r = measurer.measure([measurer.input(tiled_gemm(wl), fault="crash")])[0]
    assert r.error_kind == "crash" and r.run_secs is None
    assert "SIGSEGV" in r.error and "string_at" in r.error
    assert sum(w.generation for w in measurer.pool.workers) == sum(gen) + 1
    alive(measurer)


def test_hanging_kernel_times_out_and_the_pool_survives(measurer, wl):
    t0 = time.monotonic()
    r = measurer.measure([measurer.input(tiled_gemm(wl), fault="hang")])[0]
    assert r.error_kind == "timeout" and "run_timeout" in r.error
    assert CFG.run_timeout <= time.monotonic() - t0 < CFG.run_timeout + 10
    alive(measurer)


def test_build_failures_are_values(measurer, wl):
    bad_trace = Schedule(wl).trace.as_json()
    bad_trace["insts"].append(["get_block", ["nope"], {}, ["b9"]])
    inputs = [measurer.input(tiled_gemm(wl), fault="build-error"),
              measurer.input(tiled_gemm(wl), fault="build-crash"),
              MeasureInput.from_workload(wl, bad_trace, TARGET),
              measurer.input(tiled_gemm(wl))]
    results = measurer.measure(inputs)
    assert [r.error_kind for r in results] == ["build", "build_crash", "build", None]
    assert "injected build error" in results[0].error
    assert "SIGSEGV" in results[1].error
    assert "rebuilding the schedule from its trace failed" in results[2].error
    assert "nope" in results[2].error
    assert results[3].ok


def test_runner_rebuilds_when_the_building_worker_was_replaced(measurer, wl):
    inp = measurer.input(tiled_gemm(wl, 2, 4))
    build = measurer.builder.build([inp])[0]
    measurer.pool.restart(build.worker)
    r = measurer.runner.run_one(inp, build)
    assert r.ok, r.error
    assert r.max_abs_error is not None


def test_hung_build_times_out(measurer, wl):
    builder = LocalBuilder(measurer.pool, timeout=1.0)
    t0 = time.monotonic()
    b = builder.build([measurer.input(Schedule(wl), fault="build-hang")])[0]
    assert b.error_kind == "build_timeout" and "build_timeout" in b.error
    assert time.monotonic() - t0 < 15
    alive(measurer)


def test_cutoff_stops_candidates_far_slower_than_the_best(measurer, wl):
    cfg = CFG.with_(cutoff_factor=4.0, min_cutoff_secs=0.01, kill_factor=5.0,
                    min_kill_secs=0.3, run_timeout=5.0)
    runner = LocalRunner(measurer.pool, cfg)
    good = MeasureInput.from_schedule(tiled_gemm(wl), TARGET)
    assert runner.cutoff_for(good) is None
    assert runner.run_one(good).ok
    best = runner.best_secs[workload_target_key(good)]
    assert runner.cutoff_for(good) == pytest.approx(max(4 * best, 0.01))
    slow = MeasureInput.from_schedule(tiled_gemm(wl), TARGET, fault="slow:0.2")
    r = runner.run_one(slow)
    assert r.error_kind == "cutoff" and r.run_secs is None, r
    assert r.first_run_secs >= 0.2 and r.max_abs_error is not None
    t0 = time.monotonic()
    hung = runner.run_one(MeasureInput.from_schedule(tiled_gemm(wl), TARGET, fault="hang"))
    assert hung.error_kind == "cutoff" and "did not finish within" in hung.error
    assert time.monotonic() - t0 < 4.0
    r = runner.run_one(slow, cutoff_secs=1.0)  # an explicit cutoff overrides
    assert r.ok and r.median_secs >= 0.2


def test_run_time_errors_and_worker_environment(measurer, wl):
    r = measurer.measure([measurer.input(tiled_gemm(wl), fault="raise")])[0]
    assert r.error_kind == "run" and "injected run-time error" in r.error
    assert measurer.pool.env["OPENBLAS_NUM_THREADS"] == "1"
    assert measurer.pool.env["OMP_NUM_THREADS"] == str(measurer.target.num_cores or
                                                       os.cpu_count())


def test_cache_flush_and_thorough_settings_still_check_and_time(measurer, wl):
    cfg = RunConfig.thorough(repeats=2, min_repeat_secs=0.005, flush_cache=True)
    runner = LocalRunner(measurer.pool, cfg)
    r = runner.run_one(measurer.input(tiled_gemm(wl)))
    assert r.ok, r.error
    assert len(r.run_secs) == 2 and r.number >= 3 and r.max_abs_error < 1e-4


def test_single_run_config_keeps_the_checked_first_run():
    with WorkerPool(1) as pool:
        r = LocalRunner(pool, CFG.with_(repeats=0)).run_one(
            MeasureInput.from_schedule(Schedule(ops.gemm(8, 8, 8)), TARGET))
    assert r.ok and r.run_secs == (r.first_run_secs,) and r.max_abs_error is not None


def test_a_worker_that_cannot_start_gives_internal_errors_not_exceptions():
    with WorkerPool(1, handlers="explorer.no_such_module") as pool:
        inp = MeasureInput.from_schedule(Schedule(ops.gemm(8, 8, 8)), TARGET)
        r = LocalRunner(pool, CFG).run_one(inp)
        b = LocalBuilder(pool).build([inp])[0]
    assert r.error_kind == "internal" and "No module named 'explorer.no_such_module'" in r.error
    assert b.error_kind == "internal" and "did not start" in b.error
