"""Depthwise convolution on the LLVM backend: stride-2 input rows read as contiguous
vectors and a deinterleaving shuffle (``backends.llvm.strided``), the write-back of
a tile of whole rows as contiguous stores (``analysis.lane_stride``), and the expert
schedule (``explorer.space.expert_depthwise``). Every kernel is checked against the
numpy reference, on the host and, where the host runs it, an AVX2 (8-lane) target."""
from __future__ import annotations

import re

import pytest

from explorer import build, ops
from explorer.backends.llvm.analysis import lane_stride
from explorer.backends.llvm.strided import deinterleave_plan
from explorer.ir.expr import FloorDiv, FloorMod, IntImm, Var
from explorer.space import DesignSpace
from explorer.space.expert import INLINE, PADDING, ROOT, _with_decisions, \
    sketch_with_write_cache, expert_schedule, expert_trace
from host_targets import host_and_avx2

TARGETS = host_and_avx2()
IDS = [f"{t.vector_lanes}lanes" for t in TARGETS]


def tiled(wl, target, p3: int, q3: int, pad: int, c3: int = 1):
    """The depthwise sketch with a register tile of ``c3`` channels x ``p3`` rows x ``q3``
    columns (vectorized), the padding at the root (``ROOT``: the conv reads a padded copy,
    unmasked) or inline (``INLINE``: masked loads at the border)."""
    p = dict(wl.params)
    C, (P, Q) = p["C"], wl.func.params[-1].shape[2:]
    plan = {"n": [p["N"], 1, 1, 1], "c": [C // c3, 1, 1, c3], "p": [P // p3, 1, 1, p3],
            "q": [Q // q3, 1, 1, q3], "ry": [1, p["R"]], "rx": [1, p["S"]], PADDING: pad}
    space = DesignSpace(wl, target)
    sch = space.apply(_with_decisions(sketch_with_write_cache(space, 2, False), space, plan))
    assert sch is not None, space.last_error
    return sch


def run_checked(sch, wl, target):
    kernel = build(sch, target)
    args = wl.make_args(seed=4)
    kernel(*args)
    wl.check(args)
    return kernel.llvm_ir


@pytest.mark.parametrize("n,stride", [(16, 2), (8, 2), (5, 2), (2, 2), (16, 3), (8, 4),
                                      (7, 3), (4, 4)])
def test_deinterleave_plan_covers_exactly_the_strided_range(n, stride):
    plan = deinterleave_plan(n, stride)
    lanes = {}
    for start, picks in plan:
        for k, i in picks.items():
            assert 0 <= k < n
            lanes[i] = start + k
    assert lanes == {i: stride * i for i in range(n)}
    # nothing before the first lane's element or past the last lane's is loaded
    assert min(s for s, _ in plan) == 0
    assert max(s + n - 1 for s, _ in plan) == stride * (n - 1)


def test_deinterleave_plan_refuses_a_stride_it_cannot_cover():
    with pytest.raises(Exception, match="stride 5 must lie in"):
        deinterleave_plan(4, 5)


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("pad", [ROOT, INLINE], ids=["root_pad", "inline_pad"])
@pytest.mark.parametrize("C,H,stride,p3", [(5, 13, 2, 1), (3, 13, 1, 13), (6, 14, 2, 7),
                                           (4, 12, 3, 2), (3, 16, 4, 1)])
def test_strided_rows_are_shuffled_not_gathered(target, pad, C, H, stride, p3):
    """Odd sizes (13 columns, 5 channels), strides 1-4, the row a whole vector or a
    masked one; with the padding inline the strided loads are masked."""
    wl = ops.depthwise_conv2d(1, C, H, H, 3, 3, stride=stride, padding=1)
    Q = wl.func.params[-1].shape[3]
    ir_text = run_checked(tiled(wl, target, p3, Q, pad), wl, target)
    assert "llvm.masked.gather" not in ir_text and "llvm.masked.scatter" not in ir_text
    if stride > 1:
        assert re.search(r"shufflevector <\d+ x float>", ir_text)
    if stride > 1 and pad == INLINE:
        assert "llvm.masked.load" in ir_text


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_stride_past_the_shuffled_limit_still_gathers(target):
    wl = ops.depthwise_conv2d(1, 2, 24, 24, 3, 3, stride=5, padding=1)
    Q = wl.func.params[-1].shape[3]
    ir_text = run_checked(tiled(wl, target, 1, Q, ROOT), wl, target)
    assert "llvm.masked.gather" in ir_text


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_fused_tile_of_whole_rows_is_written_back_contiguously(target):
    """A tile of 7 rows x 7 columns: the vectorizer fuses it into one loop of 49 lanes
    indexed ``[f // 7, f % 7]``, contiguous in the output and the padded input."""
    wl = ops.depthwise_conv2d(1, 3, 7, 7, 3, 3, stride=1, padding=1)
    sch = tiled(wl, target, 7, 7, ROOT)
    from explorer.lower import lower
    assert "// 7" in lower(sch).script()
    ir_text = run_checked(sch, wl, target)
    assert "llvm.masked.scatter" not in ir_text and "llvm.masked.gather" not in ir_text


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("C,H,stride", [(6, 7, 1), (17, 7, 1)])
def test_fused_tile_of_whole_rows_runs_as_vector_code(target, C, H, stride, monkeypatch):
    """The expert's rows at tile level 3 (inside the window loops): the vectorizer fuses
    rows x columns into one loop indexed ``[f // q3, f % q3]`` that reads and writes the
    accumulators; the lane-conflict check reads the split too (``analysis.lane_stride``),
    so it runs as vector code, not as a scalar loop."""
    import explorer.space.expert_depthwise as expert_depthwise
    from explorer.lower import lower
    monkeypatch.setattr(expert_depthwise, "MAX_FUSED", 0)
    wl = ops.depthwise_conv2d(1, C, H, H, 3, 3, stride=stride, padding=1)
    sch = expert_schedule(wl, target)
    assert "_fused in vectorized" in lower(sch).script().replace("_fused_init", "")
    loops = build(sch, target).compiled.vectorized_loops
    assert any("_3_fused" in name for name in loops)
    assert set(loops.values()) == {"vector"}, loops
    run_checked(sch, wl, target)


def test_lanes_conflict_through_a_fused_row_split():
    """Accesses ``[f // 7, f % 7]``: the same element in every lane is no conflict; one
    element or one row apart is (lanes would read what another lane writes)."""
    from explorer.backends.llvm.analysis import _lanes_conflict
    f = Var("f")
    row, col = FloorDiv(f, IntImm(7)), FloorMod(f, IntImm(7))
    same = ((4, 7), (row, col))
    assert not _lanes_conflict(same, same, "f", 49)
    assert _lanes_conflict(same, ((4, 7), (row, col + IntImm(1))), "f", 49)
    assert _lanes_conflict(same, ((4, 7), (row + IntImm(1), col)), "f", 49)
    # the split does not match the row length: unknown, so assumed to conflict
    assert _lanes_conflict(same, ((4, 8), (row, col)), "f", 49)


def test_lane_stride_of_a_fused_row_split():
    f, a = Var("f"), Var("a")
    assert lane_stride((4, 7), (FloorDiv(f, IntImm(7)), FloorMod(f, IntImm(7))), "f") == 1
    assert lane_stride((3, 4, 7), (a, a + FloorDiv(f, IntImm(7)),
                                   FloorMod(f, IntImm(7)) - IntImm(1)), "f") == 1
    # the row length differs from the divisor: not contiguous
    assert lane_stride((4, 8), (FloorDiv(f, IntImm(7)), FloorMod(f, IntImm(7))), "f") is None
    # two different lane expressions
    assert lane_stride((4, 7), (FloorDiv(f, IntImm(7)), FloorMod(f + a, IntImm(7))),
                       "f") is None
    assert lane_stride((4, 7), (FloorDiv(f * IntImm(2), IntImm(7)),
                                FloorMod(f * IntImm(2), IntImm(7))), "f") == 2


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("C,H,stride", [(5, 13, 1), (5, 13, 2), (17, 7, 1), (17, 14, 2),
                                        (3, 28, 2)])
def test_depthwise_expert_is_correct_and_gather_free(target, C, H, stride):
    wl = ops.depthwise_conv2d(1, C, H, H, 3, 3, stride=stride, padding=1)
    trace = expert_trace(wl, target)
    assert DesignSpace(wl, target).sketch_of(trace) is not None
    ir_text = run_checked(expert_schedule(wl, target), wl, target)
    assert "llvm.masked.gather" not in ir_text and "llvm.masked.scatter" not in ir_text


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_depthwise_expert_tile_fits_the_accumulators(target):
    """MobileNet-V2 D4 (28 output columns): rows of 28 columns x as many rows as half the
    accumulator budget allows, the padding inline (no pad block left)."""
    from explorer.lower import lower
    wl = ops.depthwise_conv2d(1, 144, 56, 56, 3, 3, stride=2, padding=1)
    low = lower(expert_schedule(wl, target)).script()
    lanes = target.vector_lanes
    assert "pad = alloc" not in low
    local = re.search(r'depthwise_local = alloc\(\[1, (\d+), (\d+), (\d+)\]', low)
    c3, rows, q3 = map(int, local.groups())
    vectors = -(-q3 // lanes)
    assert q3 == 28 and c3 * rows * vectors <= 16


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("C,H,stride", [(6, 7, 1), (5, 14, 2), (3, 28, 1), (2, 112, 2)])
def test_depthwise_expert_loops_all_run_as_vector_code(target, C, H, stride):
    """No vectorized loop of the expert falls back to a scalar loop (a rows x columns tile
    of at most 64 elements fused into one loop would: its rows stay at tile level 2)."""
    from explorer.backends.llvm.analysis import vectorize_blocker
    from explorer.ir.functor import walk_stmt
    from explorer.ir.stmt import For
    from explorer.lower import lower
    wl = ops.depthwise_conv2d(1, C, H, H, 3, 3, stride=stride, padding=1)
    low = lower(expert_schedule(wl, target))
    loops = [n for n, _ in walk_stmt(low.body) if isinstance(n, For) and n.kind == "vectorized"]
    assert loops
    assert [vectorize_blocker(lp) for lp in loops] == [None] * len(loops)
