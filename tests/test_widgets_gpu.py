"""ScheduleExplorer on a cuda target, driven like a person would: bind loops through the
panel, read the CUDA C tab, the thread picture, the resources line, press Run. Every
schedule is checked against numpy (race-checked interpreter, and the emulated Run)."""
from __future__ import annotations

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from explorer import Schedule, Target, build, ops  # noqa: E402
from explorer.measure import InteractiveMeasurer, interactive_config  # noqa: E402
from widgets import ScheduleExplorer  # noqa: E402
from widgets.plots import memory_levels  # noqa: E402

CFG = interactive_config(repeats=1, min_repeat_secs=0.001, run_timeout=60.0)


@pytest.fixture(scope="module")
def measurer():
    with InteractiveMeasurer("cuda", CFG, numpy=False) as m:
        yield m


def _checked(sch, wl) -> float:
    args = wl.make_args(seed=2)
    build(sch, "interp")(*args)          # threads serialized, races checked
    return wl.check(args)


def _bind(ex, loop: str, axis: str) -> None:
    ex.select(loop=loop)
    ex.panel.bind_axis.value = axis
    ex.panel.buttons["bind"].click()
    assert ex.error is None, ex.error


def _block_thread_tiles(ex) -> None:
    """16x16 blocks of 4x4 threads, each thread a 4x4 tile: all through the panel."""
    ex.select(loop="i")
    ex.panel.tile_loops.value = "i, j"
    ex.panel.tile_factors.value = "16, 16"
    ex.panel.buttons["tile"].click()
    ex.select(loop="i_1")
    ex.panel.split_factor.value = 4
    ex.panel.buttons["split"].click()
    ex.select(loop="j_1")
    ex.panel.split_factor.value = 4
    ex.panel.buttons["split"].click()
    ex.panel.reorder_loops.value = "i_0, j_0, i_1_0, j_1_0, i_1_1, j_1_1, k"
    ex.panel.buttons["reorder"].click()
    assert ex.error is None, ex.error
    for loop, axis in (("i_0", "blockIdx.y"), ("j_0", "blockIdx.x"),
                       ("i_1_0", "threadIdx.y"), ("j_1_0", "threadIdx.x")):
        _bind(ex, loop, axis)


def test_cuda_source_thread_picture_resources_and_an_emulated_run(measurer):
    wl = ops.gemm(32, 48, 8)
    ex = ScheduleExplorer(wl, target="cuda", pictures=True, measurer=measurer)
    assert ex.code.tabs is not None and ex.code.tabs.get_title(1) == "CUDA C"
    assert "no loop is bound to blockIdx/threadIdx" in ex.code.cuda_text
    assert "\u26a0" in ex.gpu_status.value and "Traceback" not in ex.gpu_status.value
    _block_thread_tiles(ex)
    assert _checked(ex.schedule, wl) < 1e-3
    ex.code.show_cuda()
    shown = ex.code.cuda.value
    assert "__global__" in shown and "blockIdx.y" in shown and "threadIdx.x" in shown
    assert "dim3(3, 2, 1), dim3(4, 4, 1)" in shown
    tm, err = ex.state.thread_map()
    assert err is None
    rows, cols = np.indices((32, 48))
    assert (tm.block_id == cols // 16 + 3 * (rows // 16)).all()
    assert (tm.thread_id == (cols % 16) // 4 + 4 * ((rows % 16) // 4)).all()
    thread_ax, usage_ax, foot_ax, tree_ax = ex.figure.axes[:4]
    assert "6 blocks x 16 threads" in thread_ax.get_title()
    assert "GPU resources per kernel" in usage_ax.get_title()
    foot_labels = " ".join(t.get_text() for t in foot_ax.texts)
    assert "shared/block" in foot_labels and "registers/thread" in foot_labels
    assert "L1" not in foot_labels
    status = ex.gpu_status.value
    assert "gemm_kernel0" in status and "grid (3, 2, 1), block (4, 4, 1)" in status
    r = ex.run()
    assert r.ok and r.max_abs_error < 1e-3, r.error
    if r.emulated:                       # no GPU here: the CUDA C ran on the host
        assert "emulated: correctness only, no GPU time" in ex.result.value
        assert r.backend == "cuda" and r.seconds is not None and r.naive is None
    else:
        assert r.backend == "cuda" and "ms" in ex.result.value


@pytest.mark.parametrize("steps, message", [
    ([("tile", ["i", "j"], [8, 16]), ("bind", "i_1", "threadIdx.x"),
      ("bind", "j_1", "threadIdx.x")], "a launch has one threadIdx.x extent"),
    ([("bind", "j", "threadIdx.x")], "threadIdx.x is at most 1024"),
    ([("bind", "k", "threadIdx.y")], "is a reduction loop of block 'C'"),
])
def test_illegal_bindings_show_the_message_in_the_bind_row(steps, message):
    wl = ops.gemm(32, 2048, 16)
    ex = ScheduleExplorer(wl, target="cuda", compile_checks=False)
    before = None
    for step in steps:
        before = ex.script()
        if step[0] == "tile":
            assert ex.tile(step[1], step[2])
        else:
            _, loop, axis = step
            ex.select(loop=loop)
            ex.panel.bind_axis.value = axis
            ex.panel.buttons["bind"].click()
    shown = ex.panel.errors["bind"].value
    assert message in shown and "Traceback" not in shown
    assert ex.script() == before                          # the schedule stayed as it was


def test_over_the_limit_is_said_in_the_status_line():
    wl = ops.gemm(16, 16, 16)
    tight = Target("cuda", max_shared_memory_per_block=512, max_shared_memory_per_sm=1536,
                   max_registers_per_thread=40)
    ex = ScheduleExplorer(wl, target=tight, compile_checks=False)
    ex.split("i", [None, 8])
    ex.split("j", [None, 8])
    ex.reorder("i_0", "j_0", "i_1", "j_1")
    for loop, axis in (("i_0", "blockIdx.y"), ("j_0", "blockIdx.x"),
                       ("i_1", "threadIdx.y"), ("j_1", "threadIdx.x")):
        _bind(ex, loop, axis)
    ex.pictures_toggle.value = True            # pictures (and the resources line) on
    assert "\u26a0" not in ex.gpu_status.value and "gemm_kernel0" in ex.gpu_status.value
    ex.pictures_toggle.value = False
    ex.select(block="C")
    ex.cache_read("C", 0, "shared")            # A's 8x16 rows of a block: 512 bytes
    ex.compute_at("A_shared", "j_0")
    ex.cache_read("C", 1, "shared")            # and B's 16x8 columns: 1 KiB in all
    ex.compute_at("B_shared", "j_0")
    assert ex.error is None, ex.error
    for buf in ("A_shared", "B_shared"):
        loops = [lp.name for lp in ex.state.loops() if buf in lp.blocks]
        ex.fuse(*loops[-2:])
        fused = ex.state.selected_loop
        ex.split(fused, [None, 8, 8])
        inner = [lp.name for lp in ex.state.loops() if buf in lp.blocks][-2:]
        _bind(ex, inner[0], "threadIdx.y")
        _bind(ex, inner[1], "threadIdx.x")
    assert _checked(ex.schedule, wl) < 1e-3
    usage, err = ex.state.gpu_usage()        # the code generator refuses it, and says why
    assert usage is None and "needs 1024 bytes of shared memory (A_shared, B_shared), " \
        "more than the 512" in err
    ex.pictures_toggle.value = True
    status = ex.gpu_status.value
    assert "\u26a0" in status and "more than the 512" in status and "Traceback" not in status
    assert "more than the 512" in ex.code.cuda_text
    assert "more than the 512" in ex.figure.axes[0].texts[0].get_text()


def test_registers_over_the_limit_are_said_with_the_estimate():
    wl = ops.gemm(16, 16, 8)
    sch = Schedule(wl)
    C = sch.get_block("C")
    i, j, k = sch.get_loops(C)
    i0, i1, i2 = sch.split(i, [None, 2, 4])
    j0, j1, j2 = sch.split(j, [None, 4, 4])
    sch.reorder(i0, j0, i1, j1, i2, j2, k)
    for loop, axis in ((i0, "blockIdx.y"), (j0, "blockIdx.x"), (i1, "threadIdx.y"),
                       (j1, "threadIdx.x")):
        sch.bind(loop, axis)
    sch.reverse_compute_at(sch.cache_write(C, 0, "local"), j1)    # 4x4 floats a thread
    assert _checked(sch, wl) < 1e-3
    tight = Target("cuda", max_registers_per_thread=24)
    ex = ScheduleExplorer(wl, target=tight, compile_checks=False)
    ex.load(sch)
    assert "gemm_kernel0" in ex.gpu_status.value and "turn on the pictures" in \
        ex.gpu_status.value                   # launches only until the pictures are on
    ex.pictures_toggle.value = True
    status = ex.gpu_status.value
    assert "\u26a0" in status and "about 32 registers per thread, over the 24" in status
    assert "estimates" in status
    labels = [t.get_text() for t in ex.figure.axes[1].get_yticklabels()]
    assert any("registers/thread (estimate)" in x for x in labels)


def test_cpu_target_keeps_one_code_view_and_its_caches():
    ex = ScheduleExplorer(ops.gemm(16, 16, 8), target="llvm", pictures=True)
    assert ex.code.tabs is None and ex.code.widget is ex.code.html
    assert ex.gpu_status.value == ""
    assert [lv[0] for lv in memory_levels("llvm")] == ["L1", "L2", "L3"]
    labels = " ".join(t.get_text() for t in ex.figure.axes[2].texts)
    assert "L1" in labels and "shared/block" not in labels
    ex.close()


@pytest.mark.parametrize("op, shape", [("conv2d", dict(N=1, C=8, H=10, W=10, K=32, R=3, S=3,
                                                        padding=1)),
                                       ("row_sum", dict(M=4, N=300))])
def test_thread_picture_of_sampled_schedules_of_4d_and_1d_outputs(op, shape):
    from matplotlib.figure import Figure

    from explorer.backends.cuda.thread_map import thread_map
    from explorer.space import DesignSpace
    from widgets.plots import plot_thread_map
    wl = ops.get(op, **shape)
    (sch,) = DesignSpace(wl, "cuda", max_tries=2000).sample(1, seed=5)
    assert _checked(sch, wl) < 1e-3
    tm = thread_map(build(sch, "cuda"))
    ax = Figure().subplots()
    drawn = plot_thread_map(ax, tm)
    def plane(a):                        # what the picture shows: the last two dims
        return a.reshape((-1,) + a.shape[-2:])[0] if a.ndim > 2 else a.reshape(1, -1) \
            if a.ndim == 1 else a
    blocks, threads = plane(tm.block_id), plane(tm.thread_id)
    assert drawn["blocks"] == len(np.unique(blocks))
    assert drawn["threads"] == sorted(np.unique(threads[blocks == 0]).tolist())
    assert f"{tm.num_blocks} blocks x {tm.threads_per_block} threads" in ax.get_title()
