"""Plot functions under Agg: they draw the right number of tiles, nodes, bars,
lines and points for given inputs."""
from __future__ import annotations

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from explorer import Schedule, Target, ops  # noqa: E402
from explorer.ir.footprint import footprints  # noqa: E402
from explorer.measure import Roofline  # noqa: E402
from widgets import plots  # noqa: E402
from widgets import tuning_plots as tp  # noqa: E402


def _ax():
    return Figure().subplots()


def _tiled(wl, fi=8, fj=16):
    sch = Schedule(wl)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.tile([i, j], [fi, fj])
    return sch


def _patch_counts(ax) -> list:
    return [len(c.get_paths()) for c in ax.collections if isinstance(c, PolyCollection)]


def test_tiling_of_a_naive_gemm_is_one_level_of_points():
    ax = _ax()
    t = plots.plot_tiling(ax, ops.gemm(16, 12, 4))
    assert t.shape == (16, 12) and len(t.levels) == 1
    assert t.levels[0].count == 192 and _patch_counts(ax) == [192]


def test_tiling_draws_outer_tiles_and_the_inner_tiles_of_the_first_one():
    ax = _ax()
    t = plots.plot_tiling(ax, _tiled(ops.gemm(64, 64, 8)))
    assert [lvl.loops for lvl in t.levels] == [("i_0", "j_0"), ("i_1", "j_1")]
    assert [lvl.count for lvl in t.levels] == [32, 4096]
    assert _patch_counts(ax) == [32, 128]          # 8 x 4 tiles; 8 x 16 points in tile 0
    assert t.levels[0].rects[:2] == ((0, 0, 8, 16), (0, 16, 8, 16))
    assert "32 tiles of 8x16" in [h.get_label() for h in ax.get_legend().legend_handles][0]


def test_tiling_with_a_non_dividing_split_keeps_the_tail_tile_small():
    sch = Schedule(ops.gemm(10, 4, 2))
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, 4])
    t = plots.plot_tiling(_ax(), sch)
    assert t.levels[0].count == 3
    assert [r[2] for r in t.levels[0].rects] == [4, 4, 2]


def test_gpu_tiling_colours_blocks_and_threads():
    sch = _tiled(ops.gemm(32, 32, 4), 8, 8)
    i0, j0, i1, j1, _ = sch.get_loops(sch.get_block("C"))
    sch.bind(sch.fuse(i0, j0), "blockIdx.x")
    sch.bind(sch.fuse(i1, j1), "threadIdx.x")
    ax = _ax()
    t = plots.plot_tiling(ax, sch)
    assert [lvl.name for lvl in t.levels] == ["block", "thread"]
    assert [lvl.count for lvl in t.levels] == [16, 1024]
    assert _patch_counts(ax) == [16, 64]
    faces = ax.collections[0].get_facecolors()
    assert len({tuple(f) for f in faces}) == 16      # each block its own colour


def test_tiling_of_conv2d_uses_the_last_two_output_dims():
    t = plots.plot_tiling(_ax(), ops.conv2d(1, 2, 6, 5, 3, 3, 3, padding=1))
    assert t.block == "conv" and t.shape == (6, 5) and t.dims == ("v_p", "v_q")


def test_loop_tree_draws_one_box_per_loop_and_block_and_joins_them():
    ax = _ax()
    wl = ops.conv2d(1, 2, 6, 5, 3, 3, 3, padding=1)
    n = plots.plot_loop_tree(ax, wl)
    assert n == 4 + 7 + 2 and len(ax.texts) == n    # pad: 4 loops, conv: 7, 2 blocks
    segments = ax.collections[0].get_segments()
    assert len(segments) == n - 2                    # every node but the two roots
    texts = [t.get_text() for t in ax.texts]
    assert "rx  [3]  serial" in texts and "block conv" in texts


def test_loop_tree_names_kinds():
    sch = _tiled(ops.gemm(16, 32, 4), 4, 16)
    loops = sch.get_loops(sch.get_block("C"))
    sch.parallel(loops[0])
    sch.vectorize(loops[3])
    ax = _ax()
    plots.plot_loop_tree(ax, sch)
    texts = [t.get_text() for t in ax.texts]
    assert "i_0  [4]  parallel" in texts and "j_1  [16]  vectorized" in texts


def test_memory_footprint_bars_per_loop_and_cache_lines():
    ax = _ax()
    sch = _tiled(ops.gemm(64, 64, 64))
    fps = plots.plot_memory_footprint(ax, sch, Target("llvm"))
    assert [fp.loop for fp in fps] == ["i_0", "j_0", "i_1", "j_1", "k"]
    assert len(ax.patches) == 5 * 3                  # five loops, three buffers stacked
    assert len(ax.lines) == 3                        # L1, L2, L3
    at_i1 = fps[2].bytes
    assert at_i1 == {"C": 8 * 16 * 4, "A": 8 * 64 * 4, "B": 64 * 16 * 4}
    assert fps[0].total == 3 * 64 * 64 * 4


def test_footprint_of_a_conv_counts_the_halo():
    fps = footprints(ops.conv2d(1, 2, 6, 6, 3, 3, 3, padding=1).func, "conv")
    by_loop = {fp.loop: fp.bytes for fp in fps}
    assert by_loop["p"]["pad"] == 2 * 8 * 8 * 4      # all rows of the padded input
    assert by_loop["q"]["pad"] == 2 * 3 * 8 * 4      # one output row: 3 input rows


def test_roofline_places_each_kernel():
    wl = ops.gemm(64, 64, 64)
    pts = [plots.roofline_point(wl, 1e-4, "tiled"), plots.roofline_point(wl, 1e-3, "naive")]
    ax = _ax()
    ridge = plots.plot_roofline(ax, pts, Roofline(200.0, 20.0, "given"))
    assert ridge == pytest.approx(10.0)
    assert len(ax.lines) == 2
    offsets = ax.collections[0].get_offsets()
    assert len(offsets) == 2
    assert offsets[0][0] == pytest.approx(2 * 64 ** 3 / (3 * 64 * 64 * 4))
    assert offsets[0][1] == pytest.approx(2 * 64 ** 3 / 1e-4 / 1e9)
    assert [t.get_text() for t in ax.texts] == ["tiled", "naive"]


def test_roofline_draws_the_roof_it_is_given_and_names_its_source():
    ax = _ax()
    plots.plot_roofline(ax, [], Roofline(431.0, 27.5, "measured: FMA on 8 lanes"))
    assert max(ax.lines[1].get_ydata()) == 431.0
    assert max(ax.lines[0].get_ydata()) == 431.0 and ax.lines[0].get_xdata()[1] == 431.0 / 27.5
    assert ax.get_xlabel().endswith("\nroof measured: FMA on 8 lanes")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["memory 27.5 GB/s",
                                                                   "compute 431 GFLOP/s"]


def test_best_so_far_is_a_running_max_skipping_failures():
    ax = _ax()
    curve = tp.plot_best_so_far(ax, [1.0, None, 3.0, 2.0, 5.0])
    assert list(curve) == [1.0, 1.0, 3.0, 3.0, 5.0] and len(ax.lines) == 1


def test_predicted_vs_measured_counts_points_with_both_values():
    ax = _ax()
    n = tp.plot_predicted_vs_measured(ax, [0.1, None, 0.3, 0.4], [1.0, 2.0, None, 4.0],
                                      [0, 0, 1, 1])
    assert n == 2 and len(ax.collections[0].get_offsets()) == 2
    assert list(ax.collections[0].get_array()) == [0, 1]


def test_rank_accuracy_and_accuracy_vs_samples_lines():
    ax = _ax()
    assert tp.plot_rank_accuracy(ax, [0, 1, 2], [None, 0.6, 0.8], [0.2, 0.4, 0.5]) == 2
    assert len(ax.lines) == 3                        # accuracy, recall, chance
    ax = _ax()
    assert tp.plot_accuracy_vs_samples(ax, [16, 32, 48], [0.55, 0.7, 0.8]) == 3
    assert list(ax.lines[0].get_xdata()) == [16, 32, 48]


def test_feature_importance_bars_sorted_and_capped():
    ax = _ax()
    imp = [(f"feature {n}", float(n)) for n in range(20)]
    names = tp.plot_feature_importance(ax, imp, top=5)
    assert names == ["feature 19", "feature 18", "feature 17", "feature 16", "feature 15"]
    assert len(ax.patches) == 5
    top_label = max(ax.texts, key=lambda t: t.get_position()[1])
    assert top_label.get_text().strip() == "feature 19"      # the most important on top


def test_feature_importance_without_a_model_says_so():
    ax = _ax()
    assert tp.plot_feature_importance(ax, ()) == []
    assert "no feature importance yet" in ax.texts[0].get_text() and not ax.patches


def test_histogram_and_decision_scatter():
    ax = _ax()
    counts = tp.plot_histogram(ax, [1.0, 2.0, None, 2.5, 9.0], bins=4)
    assert counts.sum() == 4 and len(ax.patches) == 4
    ax = _ax()
    n = tp.plot_decision_scatter(ax, [4, 8, None, 16], [1.0, 2.0, 3.0, None], "tile C.j[1]",
                                 highlight=1)
    assert n == 2 and len(ax.collections) == 2
    assert np.allclose(ax.collections[1].get_offsets(), [[8, 2.0]])


def test_tiling_zoom_frames_the_first_tile_of_a_level():
    ax = _ax()
    plots.plot_tiling(ax, _tiled(ops.gemm(64, 64, 8)), zoom=0, legend="none")
    assert ax.get_xlim() == (-0.5, 16.5) and ax.get_ylim() == (8.5, -0.5)
    assert ax.get_legend() is None


def test_roofline_draws_each_cache_level_it_was_given_under_the_peak():
    ax = _ax()
    roof = Roofline(400.0, 40.0, "m", (("L2", 1 << 20, 320.0), ("L3", 16 << 20, 160.0)))
    plots.plot_roofline(ax, [plots.roofline_point(ops.gemm(64, 64, 64), 1e-4)], roof)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "memory 40 GB/s", "compute 400 GFLOP/s", "L2 320 GB/s (data up to 1 MiB)",
        "L3 160 GB/s (data up to 16 MiB)"]
    for line, gbs in zip(ax.lines[2:], (320.0, 160.0)):   # each slope meets the peak
        (x0, x1), (y0, y1) = line.get_xdata(), line.get_ydata()
        assert y0 == pytest.approx(gbs * x0) and (x1, y1) == (pytest.approx(400.0 / gbs), 400.0)
