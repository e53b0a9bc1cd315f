"""Reductions whose loops are split past their end: rfactor, compute_at and
decompose_reduction keep every guard, so each schedule equals numpy on the
interpreter and on LLVM (issue 13, items 1 and 2)."""
import numpy as np
import pytest

from explorer import Schedule, build, lower, ops


def _check(sch, wl):
    """Run on both backends with the outputs NaN-filled, compare with numpy."""
    for target in ("interp", "llvm"):
        args = wl.make_args(seed=1)
        for buf, a in zip(wl.func.params, args):
            if buf.name in wl.outputs:
                a.fill(np.nan)
        build(sch, target)(*args)
        wl.check(args)


def _row_sum_split(factors):
    wl = ops.get("row_sum", 4, 1001)
    sch = Schedule(wl)
    b = sch.get_block("B")
    _, k = sch.get_loops(b)
    return wl, sch, b, sch.split(k, factors)


def test_rfactor_of_a_split_that_overshoots_by_a_whole_partial_sum():
    # 12 x 100 covers 1001 with partial sum 11 wholly past the end: it must be 0
    wl, sch, _, (ko, _) = _row_sum_split([12, 100])
    sch.rfactor(ko, 0)
    _check(sch, wl)


def test_rfactor_of_the_inner_loop_of_a_reduction_shorter_than_the_factor():
    wl = ops.get("gemm", 6, 7, 5)
    sch = Schedule(wl)
    c = sch.get_block("C")
    _, _, k = sch.get_loops(c)
    _, ki = sch.split(k, [None, 8])            # k = 5: lanes 5..7 never hold a term
    sch.rfactor(ki, 2)
    _check(sch, wl)


def test_rfactor_keeps_the_guard_as_a_condition_on_its_own_variables():
    wl, sch, _, (_, ki) = _row_sum_split([None, 16])
    rf = sch.rfactor(ki, 0)
    assert "reduce_where(" in sch.script()
    sch.compute_at(rf, sch.get_loops(sch.get_block("B"))[0])
    text = lower(sch).script()
    assert "< 1001" in text, text               # the guard survives compute_at
    _check(sch, wl)


def test_compute_at_of_an_rfactor_block_with_a_large_factor_stays_in_bounds():
    wl, sch, _, (_, ki) = _row_sum_split([None, 1000])
    rf = sch.rfactor(ki, 0)
    sch.compute_at(rf, sch.get_loops(sch.get_block("B"))[0])
    _check(sch, wl)


@pytest.mark.parametrize("axis", [0, 1])
def test_rfactor_then_decompose_reduction(axis):
    wl, sch, b, (ko, ki) = _row_sum_split([None, 64])
    rf = sch.rfactor(ko, axis)
    loops = sch.get_loops(rf)
    sch.decompose_reduction(rf, loops[-1])
    assert "< 1001" in lower(sch).script()
    _check(sch, wl)


def test_rfactor_of_a_max_reduction_past_the_end():
    wl = ops.get("softmax", 3, 13)
    sch = Schedule(wl)
    m = sch.get_block("row_max")
    _, k = sch.get_loops(m)
    ko, _ = sch.split(k, [3, 5])               # 15 > 13: partial 2 holds 3 terms
    sch.rfactor(ko, 0)
    _check(sch, wl)


def test_rfactor_twice_carries_the_condition():
    wl, sch, _, (ko, ki) = _row_sum_split([None, 24])
    rf = sch.rfactor(ko, 0)
    loops = sch.get_loops(rf)
    a, _ = sch.split(loops[-1], [5, None])     # 5 x 5 over 24: another overshoot
    sch.rfactor(a, 0)
    _check(sch, wl)
