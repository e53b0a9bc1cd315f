"""Selects versioned like guards: a padded convolution that reads its padding inline
(``select(1 <= y and y < H + 1 and ..., X[...], 0)``) runs its interior tiles with the
select's value and no mask, its border tiles with it. Every kernel here is compared with
numpy, on the host and, where the host can run it, an AVX2 CPU (8 lanes)."""
from __future__ import annotations

import numpy as np
import pytest

from explorer import Schedule, build, ops, te
from explorer.backends.llvm import versioning
from explorer.ir.expr import LE, LT, And, Buffer, FloatImm, IntImm, Select, Var
from explorer.ir.functor import expr_vars, iter_nodes, walk_expr
from explorer.ir.stmt import Allocate, BufferStore, For, IfThenElse, PrimFunc
from explorer.lower import lower
from explorer.space import DesignSpace
from explorer.space.expert import expert_schedule
from explorer.workload import Workload
from host_targets import host_and_avx2

TARGETS = host_and_avx2()
IDS = [f"{t.vector_lanes}lanes" for t in TARGETS]


def _selects(stmt) -> list:
    return [x for n in iter_nodes(stmt) if isinstance(n, BufferStore)
            for e in (n.value, *n.indices) for x in walk_expr(e) if isinstance(x, Select)]


def _checked(sch, wl, target, seed=0):
    kernel = build(sch, target)
    args = wl.make_args(seed=seed)
    kernel(*args)
    wl.check(args)
    return kernel


def _stencil(n: int = 37, tile: int = 8):
    """B[x] = A[x - 1] + A[x] + A[x + 1] over x < n, A read as 0 outside [0, n): the
    padding inline, x split into tiles of ``tile`` (not dividing n) vectorized."""
    A, B = Buffer("A", (n,)), Buffer("B", (n,))
    xo, xi = Var("xo"), Var("xi")
    x = xo * tile + xi
    terms = []
    for r in (-1, 0, 1):
        cond = And(LE(IntImm(0), x + r), LT(x + r, IntImm(n)))
        terms.append(Select(cond, A[x + r], FloatImm(0.0)))
    store = BufferStore(B, terms[0] + terms[1] + terms[2], (x,))
    loop = For(xo, -(-n // tile), For(xi, tile, IfThenElse(LT(x, IntImm(n)), store),
                                      "vectorized"))
    return A, B, loop


def test_the_fast_copy_reads_the_selects_value():
    _, _, loop = _stencil()
    per_kind = versioning.bounds_by_kind(loop)
    assert set(per_kind) == {"guard", "select"}
    assert len(per_kind["select"]) == 6         # 0 <= x + r and x + r < n, r = -1, 0, 1
    plan = versioning.plan(loop, ("select",))
    assert plan is not None and not _selects(plan.fast)
    assert isinstance(plan.fast.body, IfThenElse)    # the split's guard kept: not asked
    both = versioning.plan(loop)
    assert not _selects(both.fast) and not isinstance(both.fast.body, IfThenElse)
    only_guard = versioning.plan(loop, ("guard",)).fast
    assert not isinstance(only_guard.body, IfThenElse) and len(_selects(only_guard)) == 3


def test_a_select_on_loaded_data_stays_in_both_copies():
    A, B, loop = _stencil()
    data = LT(FloatImm(0.0), A[Var("xo") * 8 + Var("xi")])
    store = loop.body.body.then_case
    guarded = store.with_(value=Select(data, store.value, FloatImm(0.0)))
    loop = loop.with_(body=loop.body.with_(body=loop.body.body.with_(then_case=guarded)))
    plan = versioning.plan(loop, ("select",))
    kept = _selects(plan.fast)
    assert len(kept) == 1 and kept[0].cond == data


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_a_hand_built_stencil_equals_numpy_on_every_tile(target):
    A, B, loop = _stencil()
    func = PrimFunc("stencil", (A, B), loop, (), (("lowered", True),))
    a = np.random.default_rng(0).uniform(-1, 1, 37).astype("float32")
    b = np.full(37, 7.0, "float32")
    kernel = build(func, target)
    kernel(a, b)
    padded = np.concatenate([[0], a, [0]]).astype("float32")
    np.testing.assert_allclose(b, padded[:-2] + padded[1:-1] + padded[2:], rtol=1e-6)
    assert "_unguarded" in kernel.llvm_ir


def _blur(h: int, w: int) -> Workload:
    """B[y, x] = the sum of A's 3 x 3 window around (y, x), A read as 0 outside: the
    padding inline (``if_then_else``), as a convolution's expert reads it."""
    A = te.placeholder((h, w), "float32", "A")
    ry, rx = te.reduce_axis(3, "ry"), te.reduce_axis(3, "rx")

    def body(y, x):
        yy, xx = y + ry - 1, x + rx - 1
        inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        return te.sum(te.if_then_else(inside, A[yy, xx], 0.0), axis=[ry, rx])
    B = te.compute((h, w), body, "B")

    def ref(a):
        p = np.pad(a, 1)
        return sum(p[dy:dy + h, dx:dx + w] for dy in range(3) for dx in range(3))
    return Workload.from_te([A, B], ref)


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("w", [64, 45])
def test_an_inline_padded_stencil_runs_its_interior_tiles_unmasked(w, target):
    """Rows x column tiles of a vector each: the tiles off the border run a copy where
    every select is its value; a row that the tiles do not divide adds a split's guard."""
    wl = _blur(20, w)
    sch = Schedule(wl)
    block = sch.get_block("B")
    y, x, ry, rx = sch.get_loops(block)
    xo, xi = sch.split(x, [None, target.vector_lanes])
    sch.reorder(y, xo, ry, rx, xi)
    sch.vectorize(xi)
    low = lower(sch)
    assert _selects(low.body)
    kernel = _checked(sch, wl, target)
    assert "_unguarded" in kernel.llvm_ir


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_a_row_spanning_tile_drops_the_row_conditions_and_keeps_the_column_ones(target):
    """Each row one tile of 7 unrolled columns: the column conditions fail somewhere in
    every tile and no loop further in can take them apart, so the rows off the border
    get a copy without the row conditions (the column ones are constants per unrolled
    column); equal to numpy."""
    wl = _blur(12, 7)
    sch = Schedule(wl)
    block = sch.get_block("B")
    y, x, ry, rx = sch.get_loops(block)
    sch.reorder(y, ry, rx, x)
    sch.unroll(rx)
    sch.unroll(x)
    low = lower(sch)
    rows = next(n for n in iter_nodes(low.body) if isinstance(n, For) and n.var.name == "y")
    per_kind = versioning.bounds_by_kind(rows)
    below = versioning.versionable_below(rows.body)
    ranges = {"y": (0, 11)}
    kinds, drop = versioning.to_drop(per_kind, frozenset(), ranges, below)
    assert kinds == ("select",) and drop
    assert all("x" not in expr_vars(c) and "y" in expr_vars(c) for c in drop)
    assert len(drop) < len(per_kind["select"])          # the column conditions stay
    kernel = _checked(sch, wl, target)
    assert "_unguarded" in kernel.llvm_ir


def test_conditions_a_loop_further_in_can_check_are_left_to_it():
    """At a loop above a loop of tiles, the tiles' column conditions can fail for the
    loop's whole body but hold per tile further in: nothing is dropped there."""
    wl = _blur(12, 64)
    sch = Schedule(wl)
    block = sch.get_block("B")
    y, x, ry, rx = sch.get_loops(block)
    xo, xi = sch.split(x, [None, 8])
    sch.reorder(y, xo, ry, rx, xi)
    low = lower(sch)
    rows = next(n for n in iter_nodes(low.body) if isinstance(n, For) and n.var.name == "y")
    below = versioning.versionable_below(rows.body)
    assert "x_0" in below           # the loop of tiles, versionable further in
    kinds, drop = versioning.to_drop(versioning.bounds_by_kind(rows), frozenset(),
                                     {"y": (0, 11)}, below)
    assert not drop


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("layer", ["C2", "C7", "C12"])
def test_the_experts_padded_convs_equal_numpy(layer, target):
    """Where the expert reads the padding inline (the output-channel sketch), the
    interior copy comes from the selects alone; elsewhere it pads in a stage. Both
    equal numpy."""
    wl = ops.resnet18_conv(layer)
    sch = expert_schedule(wl, target)
    low = lower(sch)
    kernel = _checked(sch, wl, target)
    staged = any(isinstance(n, Allocate) and n.buffer.name == "pad"
                 for n in iter_nodes(low.body))
    if not staged:
        assert _selects(low.body)
        assert "_unguarded" in kernel.llvm_ir


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("shape", [(1, 8, 13, 13, 16, 3, 3, 1, 1), (1, 4, 17, 11, 24, 3, 3, 2, 1),
                                   (1, 3, 23, 23, 8, 7, 7, 2, 3)])
def test_sampled_padded_convs_equal_numpy(shape, target):
    """Property: padded convolutions (odd sizes, strides 1 and 2, 3x3 and 7x7) under
    schedules drawn from the design space, guards from non-dividing splits and padding
    conditions both versioned, equal numpy."""
    n, c, h, w, k, r, s, stride, pad = shape
    wl = ops.conv2d(n, c, h, w, k, r, s, stride=stride, padding=pad)
    scheds = DesignSpace(wl, target).sample(4, seed=sum(shape))
    assert scheds
    for seed, sch in enumerate(scheds):
        _checked(sch, wl, target, seed=seed)


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_an_upper_triangle_select_takes_the_fast_copy_above_the_diagonal(target):
    """A select that is no padding (keep A[i, j] where i <= j): tiles wholly above the
    diagonal run with its value, the others with the mask; equal to numpy's triu."""
    n = 45
    A = te.placeholder((n, n), "float32", "A")
    U = te.compute((n, n), lambda i, j: te.if_then_else(i <= j, A[i, j], 0.0), "U")
    wl = Workload.from_te([A, U], lambda a: np.triu(a))
    sch = Schedule(wl)
    block = sch.get_block("U")
    i, j = sch.get_loops(block)
    jo, ji = sch.split(j, [None, target.vector_lanes])
    sch.vectorize(ji)
    kernel = _checked(sch, wl, target)
    assert "_unguarded" in kernel.llvm_ir
