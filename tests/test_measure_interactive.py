"""InteractiveMeasurer: one schedule at a time in a kept-alive worker, with the tuner's
runner, check and timing; a crash or a hang fails one measurement, not the next one.
Every measured kernel is checked against its reference by the worker (max_abs_error)."""
from __future__ import annotations

import os

import pytest

from explorer import MeasureError, Schedule, Trace, Workload, ops, te
from explorer.measure import InteractiveMeasurer, Roofline, interactive_config, measure_roofline
from explorer.measure import interactive as interactive_mod

CFG = interactive_config(repeats=2, min_repeat_secs=0.002, run_timeout=2.0)


@pytest.fixture(scope="module")
def m():
    with InteractiveMeasurer("llvm", CFG) as meas:
        yield meas


def tiled(wl, fj=8):
    sch = Schedule(wl)
    i, j, k = sch.get_loops(sch.get_block("C"))
    jo, ji = sch.split(j, [None, fj])
    sch.reorder(i, jo, k, ji)
    sch.vectorize(ji)
    return sch


def test_one_schedule_is_checked_and_timed_with_naive_and_numpy_next_to_it(m):
    wl = ops.gemm(32, 32, 16)
    r = m.measure(tiled(wl))
    assert r.ok and r.backend == "llvm" and r.error_kind is None
    assert r.max_abs_error < 1e-4                       # checked in the worker
    assert r.gflops == pytest.approx(wl.flops / r.seconds / 1e9)
    assert r.result.number >= 1 and len(r.result.run_secs) == 2
    assert r.naive.ok and r.numpy.ok and r.numpy.max_abs_error < 1e-4
    assert r.speedup_naive == pytest.approx(r.naive_seconds / r.seconds)
    assert r.speedup_numpy == pytest.approx(r.numpy_seconds / r.seconds)
    line = r.summary()
    assert line.endswith("[llvm]") and "x vs naive" in line and "correct (max abs error" in line
    again = m.measure(tiled(wl, 16))
    assert again.naive is r.naive and again.numpy is r.numpy    # measured once per workload


def test_the_naive_schedule_is_its_own_baseline(m):
    wl = ops.gemm(16, 16, 16)
    r = m.measure(Schedule(wl))
    assert r.ok and r.naive is r.result and r.speedup_naive == 1.0


def test_a_crashing_kernel_fails_one_measurement_and_the_next_one_works(m):
    wl = ops.gemm(16, 16, 8)
    generation = m.pool[0].generation
    bad = m.measure(tiled(wl), fault="crash")
    assert not bad.ok and bad.error_kind == "crash" and bad.seconds is None
    assert "SIGSEGV" in bad.error and bad.summary().startswith("failed (crash): ")
    assert bad.naive is None                              # no comparison for a failure
    good = m.measure(tiled(wl))
    assert good.ok and good.max_abs_error < 1e-4
    assert m.pool[0].generation == generation + 1         # a fresh worker


def test_a_hanging_kernel_times_out_and_the_next_one_works(m):
    wl = ops.gemm(16, 16, 8)
    bad = m.measure(tiled(wl), fault="hang")
    assert bad.error_kind == "timeout" and "run_timeout" in bad.error
    assert m.measure(tiled(wl)).ok


def test_wrong_output_is_a_failure_not_a_time(m):
    r = m.measure(tiled(ops.gemm(16, 16, 8)), fault="wrong")
    assert r.error_kind == "wrong" and r.seconds is None and "C" in r.error


def test_a_target_that_cannot_build_falls_back_to_the_interpreter():
    wl = ops.gemm(8, 16, 4)
    with InteractiveMeasurer("cuda", CFG, numpy=False) as meas:
        r = meas.measure(tiled(wl))
    assert r.ok and r.backend == "interp" and r.max_abs_error < 1e-4
    assert "cuda could not build" in r.note and "interpreter" in r.note
    assert r.naive.ok and r.numpy is None
    with InteractiveMeasurer("cuda", CFG, fallback=None, numpy=False) as meas:
        r = meas.measure(tiled(wl))
    assert r.error_kind == "build" and "no loop is bound to blockIdx/threadIdx" in r.error


def test_a_user_operator_is_checked_against_its_unscheduled_program(m):
    A = te.placeholder((16, 16), "float32", "A")
    B = te.compute((16, 16), lambda i, j: A[i, j] * 2.0 + A[j, i], "B")
    func = te.create_func([A, B])
    sch = Schedule(func)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.split(j, [None, 4])
    r = m.measure(sch)
    assert r.ok and r.checked_by == "program" and r.max_abs_error == 0.0
    assert r.numpy is None and "unscheduled program" in r.summary()
    wl = Workload.from_func(func, reference=lambda a: a * 2.0 + a.T)   # same key, new check
    again = m.measure(Trace.from_json(sch.trace.as_json()).apply_to(Schedule(wl)))
    assert again.ok and again.checked_by == "numpy" and again.max_abs_error < 1e-6


def test_numpy_is_measured_without_the_openblas_overrides(monkeypatch):
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Prescott")
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "1024")
    seen = []
    real = interactive_mod.baseline_pool

    def spy(impl, threads):
        pool = real(impl, threads)
        seen.append(pool.env)
        return pool
    monkeypatch.setattr(interactive_mod, "baseline_pool", spy)
    with InteractiveMeasurer("llvm", CFG) as meas:
        r = meas.numpy(ops.get("softmax", 4, 32))       # no numpy kernel: its reference
    assert r.ok and r.max_abs_error < 1e-5
    assert seen and "OPENBLAS_CORETYPE" not in seen[0] and "OPENBLAS_L2_SIZE" not in seen[0]
    assert os.environ["OPENBLAS_CORETYPE"] == "Prescott"      # only that process


def test_roofline_is_measured_once_for_this_host(m):
    roof = m.roofline()
    assert isinstance(roof, Roofline) and m.roofline() is roof
    assert roof.peak_gflops > 1 and roof.bandwidth_gbs > 0.5
    assert roof.ridge == pytest.approx(roof.peak_gflops / roof.bandwidth_gbs)
    assert f"{m.target.vector_lanes} fp32 lanes" in roof.source
    # the cache levels' copies: named in the source, each level larger than the one before
    # (the host's own sizes: half of the cores' L2 caches, half of the L3), each measured
    names = [name for name, _, _ in roof.cache_roofs]
    assert names and set(names) <= {"L2", "L3"}
    sizes = [size for _, size, _ in roof.cache_roofs]
    assert sizes == sorted(set(sizes)) and all(g > 0.5 for _, _, g in roof.cache_roofs)
    assert all(f"{name} " in roof.source for name in names)
    with pytest.raises(MeasureError, match="llvm"):
        measure_roofline("interp")


def test_the_roof_over_a_workload_is_its_peak_or_its_bytes_at_the_bandwidth():
    from explorer import ops
    from explorer.measure import intensity
    from explorer.measure.roofline import compulsory_bytes
    roof = Roofline(200.0, 20.0, "given")       # ridge at 10 flop/byte
    small, big = ops.gemm(16, 16, 16), ops.gemm(512, 512, 512)
    assert compulsory_bytes(small) == 3 * 16 * 16 * 4      # A, B read, C written, fp32
    assert intensity(small) == pytest.approx(2 * 16 ** 3 / (3 * 16 * 16 * 4))
    assert roof.attainable_gflops(small) == pytest.approx(20.0 * intensity(small))
    assert intensity(big) > roof.ridge and roof.attainable_gflops(big) == 200.0
    copy = ops.get("row_sum", M=1024, N=1024)              # memory-bound: under the ridge
    assert roof.attainable_gflops(copy) < 200.0


def test_libraries_run_with_their_own_openmp_wait_not_our_runtimes(monkeypatch):
    # our runtime makes idle threads spin briefly then sleep (GOMP_ENV); PyTorch and
    # numpy keep their own policy, unless the user set one for everything
    from explorer.backends.llvm import runtime
    from explorer.measure.baselines import baseline_pool
    if not runtime.gomp_available():
        pytest.skip("no libgomp: the runtime sets no OpenMP environment")
    for name, value in runtime.GOMP_ENV.items():
        assert os.environ.get(name) == value or name not in runtime.OWN_ENV
    monkeypatch.setattr(runtime, "OWN_ENV", {"GOMP_SPINCOUNT": "30000"})
    monkeypatch.setenv("GOMP_SPINCOUNT", "30000")
    monkeypatch.setenv("OMP_WAIT_POLICY", "active")        # the user's own choice
    pool = baseline_pool("numpy", 1)
    try:
        info = pool[0].call("info", {"impl": "numpy", "threads": 1}, lambda ph, m: 60.0)
    finally:
        pool.close()
    env = info["result"]["env"]
    assert env["GOMP_SPINCOUNT"] is None and env["OMP_WAIT_POLICY"] == "active"


@pytest.mark.parametrize("streaming", [False, True])
def test_the_roofline_copy_kernel_copies_what_it_times(streaming):
    """The JIT copy behind the memory and cache roofs (ordinary or streaming stores, the
    host's vector width) copies every element it times (it checks, and raises if not),
    on one thread and on two, warm and cold."""
    from explorer.measure.roofline import copy_loop_ir, jit_copy_gbs
    from explorer.target import Target
    target = Target("llvm")
    assert ("!nontemporal" in copy_loop_ir(target.vector_lanes, streaming)) == streaming
    for threads in (1, 2):
        assert jit_copy_gbs(target, 3 << 20, threads, streaming, 8 << 20) > 0.1
