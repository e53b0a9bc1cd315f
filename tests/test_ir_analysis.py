"""IR analyses the pictures read (explorer.ir.loop_tree, footprint, tiling), and the box
regions they share with the cost model's features (explorer.ir.region.level_extents)."""
from __future__ import annotations

import pytest

from explorer import Schedule, ops
from explorer.features import access
from explorer.features.nest import collect
from explorer.ir.expr import Var
from explorer.ir.footprint import footprints
from explorer.ir.loop_tree import block_infos, find_realize, loop_infos
from explorer.ir.region import LoopRange, level_extents, parse_affine
from explorer.ir.tiling import tiling
from explorer.lower import lower


def tiled_gemm(m=64, n=64, k=32, fi=8, fj=16):
    sch = Schedule(ops.gemm(m, n, k))
    i, j, kk = sch.get_loops(sch.get_block("C"))
    sch.tile([i, j], [fi, fj])
    return sch


def test_loop_tree_names_extents_kinds_parents_and_roles():
    sch = tiled_gemm()
    loops = sch.get_loops(sch.get_block("C"))
    sch.parallel(loops[0])
    infos = loop_infos(sch.func)
    assert [(x.name, x.extent, x.depth, x.parent) for x in infos] == [
        ("i_0", 8, 0, None), ("j_0", 4, 1, "i_0"), ("i_1", 8, 2, "j_0"), ("j_1", 16, 3, "i_1"),
        ("k", 32, 4, "j_1")]
    assert infos[0].label == "i_0 (8, parallel, spatial)" and infos[4].label == "k (32, reduce)"
    assert all(x.blocks == ("C",) for x in infos)


def test_block_infos_and_find_realize_on_conv2d():
    func = ops.conv2d(1, 2, 6, 6, 3, 3, 3, padding=1).func
    pad, conv = block_infos(func)
    assert (pad.name, conv.name) == ("pad", "conv")
    assert conv.reads == ("pad", "W") and conv.is_reduction and conv.write_shape == (1, 3, 6, 6)
    assert find_realize(func)[0].block.name == "conv"          # the output's block
    with pytest.raises(ValueError, match=r"no block 'x'; blocks are \['pad', 'conv'\]"):
        find_realize(func, "x")


def test_footprint_is_the_features_box_of_the_same_accesses():
    sch = tiled_gemm()
    fps = footprints(sch.func)
    assert [fp.loop for fp in fps] == ["i_0", "j_0", "i_1", "j_1", "k"]
    assert fps[2].bytes == {"C": 8 * 16 * 4, "A": 8 * 32 * 4, "B": 32 * 16 * 4}
    # the cost model sees the same boxes in the lowered program (the update store)
    site = collect(lower(sch))[0][-1]
    assert [lp.var for lp in site.loops] == [fp.loop for fp in fps]
    accs = access.gather(site.store, parse_affine, access.nodes([site.store.value]))
    for acc in accs:
        access.set_region(acc, site.loops, 64)
        assert [n * 4 for n in acc.numel] == [fp.bytes[acc.buffer.name] for fp in fps]


def test_level_extents_sweep_inner_loops_and_clip_to_the_buffer():
    i, j = Var("i"), Var("j")
    loops = [LoopRange("i", 4), LoopRange("j", 8)]
    idx = [(parse_affine(i * 8 + j),)]
    assert level_extents(idx, loops, (32,)) == [[32], [8]]       # i and j sweep; j alone
    assert level_extents(idx, loops, (20,)) == [[20], [8]]       # never past the buffer
    two = [(parse_affine(i * 8 + j),), (parse_affine(i * 8 + j + 2),)]
    assert level_extents(two, loops, (64,)) == [[34], [10]]      # the union of both accesses


def test_tiling_levels_of_a_tiled_gemm():
    t = tiling(tiled_gemm().func)
    assert t.block == "C" and t.shape == (64, 64)
    assert [(lvl.loops, lvl.count) for lvl in t.levels] == [(("i_0", "j_0"), 32),
                                                            (("i_1", "j_1"), 4096)]
    assert t.levels[0].rects[0] == (0, 0, 8, 16)
