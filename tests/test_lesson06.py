"""Lesson 06 (GPU schedules), executed in short mode once per session (tests/test_notebooks.py
runs it for errors and pictures): what each step must show, and the exercise check's
verdicts on a right and two wrong student schedules, each checked against numpy by the
emulator and the race-checking interpreter."""
import re

import pytest

from explorer import Schedule, ops
from explorer.backends.cuda.nvcc import find_nvcc
from test_cuda_runtime import fake  # noqa: F401  (the stand-in pycuda.driver fixture)
from test_cuda_tune import _cxx, _fake_gemm_driver  # noqa: F401  (_cxx: skip without a C++ compiler)
from test_notebooks import executed, outputs, text_of
from widgets.exercise import GPU_CHECKS, GpuExercise
from widgets.gpu_steps import gpu_check, gpu_here, source_part

NAME = "06_gpu_schedules.ipynb"


@pytest.fixture(scope="module")
def lesson():
    nb, _ = executed(NAME)
    return nb


def test_lesson_runs_clean_and_every_step_is_checked_against_numpy(lesson):
    assert not [o for o in outputs(lesson) if o.output_type == "error"]
    text = text_of(lesson)
    # the five steps: each emulated run equals numpy and each race check is clean
    assert text.count("equals numpy, max abs error") == 5, text
    assert text.count("race check (interpreter, thread by thread): no race") == 5
    # the source is shown: bindings, vthread, register tile, shared tiles, shuffles
    for piece in ("const int i_0 = blockIdx.y;", "// vthread.x", "float C_local[2][2];",
                  "__shared__ __align__(16) float A_shared", "__shfl_xor_sync"):
        assert piece in text, piece
    # resources against the limits, saying where the limits come from
    assert re.search(r"registers/thread \(limit \d+ for 64 threads\)", text)
    assert "limits from" in text and ("sm_90 preset" in text or "the GPU here" in text)


def test_the_race_check_catches_each_removed_barrier(lesson):
    text = text_of(lesson)
    removed = re.findall(r"removed, the race check says: data race in gemm .* on shared "
                         r"buffer [AB]_shared, element \[\d+, \d+\]: thread \(.*\) (?:writes|"
                         r"reads) it and thread \(.*\) (?:writes|reads) it", text)
    assert len(removed) == 2, text
    assert "no race found" not in text


def test_gpu_timing_is_done_or_skipped_with_a_reason(lesson):
    text = text_of(lesson)
    arch, why = gpu_here()
    if arch is None:
        assert f"GPU timing: skipped, {why}" in text
        assert text.count(f"not timed on a GPU: {why}") >= 5      # five steps (and the answer)
    else:
        assert text.count("GFLOP/s (median of") == 5


def test_the_lesson_ends_with_an_exercise_and_its_verdicts(lesson):
    text = text_of(lesson)
    assert "NOT YET: it does not build for cuda" in text and "hint: bind the outer" in text
    assert "PASSED: builds," in text and "the race check passes (2 __syncthreads())" in text


def _student(wl, bind_fetch=True, shared=True):
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    io, ii = sch.split(i, [None, 8])
    jo, ji = sch.split(j, [None, 8])
    ko, ki = sch.split(k, [None, 8])
    sch.reorder(io, jo, ii, ji, ko, ki)
    sch.bind(io, "blockIdx.y"); sch.bind(jo, "blockIdx.x")
    sch.bind(ii, "threadIdx.y"); sch.bind(ji, "threadIdx.x")
    if shared:
        for operand in (0, 1):
            s = sch.cache_read(c, operand, "shared")
            sch.compute_at(s, ko)
            if bind_fetch:
                ty, tx = sch.split(sch.fuse(*sch.get_loops(s)[-2:]), [8, None])
                sch.bind(ty, "threadIdx.y"); sch.bind(tx, "threadIdx.x")
    return sch


@pytest.fixture(scope="module")
def exercise():
    return GpuExercise(ops.gemm(16, 16, 16))


def test_a_right_schedule_passes_every_check(exercise):
    sch = _student(exercise.workload)
    v = exercise.check(sch)
    assert v.passed and v.fraction == 1.0, v
    c = gpu_check(sch, exercise.workload, exercise.target)
    assert c.ok and c.barriers == 2 and c.shared_bytes == 2 * 8 * 8 * 4
    assert c.emulated_max_abs_error is not None and c.emulated_max_abs_error < 1e-4


def test_a_fetch_every_thread_runs_whole_is_a_race_with_the_cooperative_hint(exercise):
    v = exercise.check(_student(exercise.workload, bind_fetch=False))
    assert not v.passed
    assert "the race check fails: data race" in v.message and "_shared" in v.message
    assert any("cooperative fetch" in h for h in v.hints), v.hints
    assert v.fraction == (len(GPU_CHECKS) - 1) / len(GPU_CHECKS)


def test_no_shared_memory_fails_with_the_cache_read_hint(exercise):
    v = exercise.check(_student(exercise.workload, shared=False))
    assert not v.passed and "does not use shared memory" in v.message
    assert any("cache_read" in h for h in v.hints)


def test_the_exercise_refuses_another_operator_and_a_cpu_target():
    ex = GpuExercise(ops.gemm(16, 16, 16))
    with pytest.raises(Exception, match="another operator"):
        ex.check(Schedule(ops.gemm(8, 8, 8)))
    with pytest.raises(Exception, match="cuda target"):
        GpuExercise(ops.gemm(16, 16, 16), target="llvm")


def test_source_part_starts_at_the_marker_and_says_what_it_left_out():
    src = "// head\n// launch 0\n__global__ k0\n a\n b\n// launch 1\n c\n"
    assert source_part(src).startswith("// launch 0\n__global__ k0")
    assert source_part(src, "launch 1") == "// launch 1\n c"
    assert source_part(src, lines=2).endswith("... (4 more lines)")


def test_the_elements_picture_shows_a_vthread_stride():
    """Thread t of a 2-vthread x 8-thread column split owns columns t and t + 8 (counted by
    hand: 8 rows of threads, one element per row per vthread)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from explorer import build
    from explorer.backends.cuda.thread_map import thread_map
    from widgets.gpu_steps import plot_thread_elements
    wl = ops.gemm(16, 32, 8)
    sch = Schedule(wl)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 8])
    j0, jv, j2 = sch.split(j, [None, 2, 8])
    sch.reorder(i0, j0, jv, i1, j2, k)
    sch.bind(i0, "blockIdx.y"); sch.bind(j0, "blockIdx.x")
    sch.bind(jv, "vthread.x"); sch.bind(i1, "threadIdx.y"); sch.bind(j2, "threadIdx.x")
    tm = thread_map(build(sch, "cuda"))
    assert [tuple(e) for e in tm.elements(0, 3)] == [(0, 3), (0, 11)]
    fig, ax = plt.subplots()
    assert plot_thread_elements(ax, tm, 0, threads=(0, 1)) == {0: 2, 1: 2}
    plt.close(fig)
    assert gpu_check(sch, wl, "cuda").ok


@pytest.mark.skipif(find_nvcc() is None, reason="no nvcc: the GPU path compiles a cubin first")
def test_with_a_gpu_the_target_is_the_device_and_steps_are_timed_after_a_check(fake):
    """Against test_cuda_runtime's stand-in pycuda.driver (a Fake GPU, sm_90, 1 ms per
    launch by its event clock), the gemm computed by numpy as the kernel would."""
    from explorer import build
    from widgets.gpu_steps import lesson_target, time_on_gpu
    wl = ops.gemm(16, 16, 16)
    sch = _student(wl)
    drv = _fake_gemm_driver(fake, build(sch, "cuda").module)
    target, note = lesson_target()
    assert target.arch == "sm_90" and note == "the GPU here: Fake GPU, sm_90"
    secs, why = time_on_gpu(build(sch, target), wl, target)
    assert secs == pytest.approx(1e-3) and why == ""
    drv.kernels[build(sch, target).module.launches[0].name] = lambda *a: None   # writes nothing
    secs, why = time_on_gpu(build(sch, target), wl, target)
    assert secs is None and why.startswith("failed on the GPU (wrong)")
