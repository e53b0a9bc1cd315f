"""Division by a lane-invariant divisor in vector code (``backends/llvm/reciprocal.py``):
one scalar reciprocal and vector products, equal to numpy within the workloads'
tolerances (softmax at odd sizes, on the host and an AVX2 target), and divisions whose
divisor changes with the lane left as vector divisions."""
import numpy as np
import pytest

from explorer import Schedule, build, ops, te
from explorer.backends.llvm import reciprocal
from explorer.ir.expr import Div, FloatImm, Mul, Var
from explorer.space import DesignSpace
from explorer.workload import Workload
from host_targets import host_and_avx2

TARGETS = host_and_avx2()
IDS = [f"{t.vector_lanes}lanes" for t in TARGETS]


def _vector_fdivs(ir_text: str) -> int:
    return sum(1 for line in ir_text.splitlines() if " fdiv <" in line)


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("M,N", [(997, 661), (64, 1024), (5, 37)])
def test_softmax_divides_once_a_row_and_equals_numpy(target, M, N):
    wl = ops.softmax(M, N)
    for sch in DesignSpace(wl, target).sample(3, seed=1):
        kernel = build(sch, target)
        assert _vector_fdivs(kernel.llvm_ir) == 0
        args = wl.make_args(seed=0)
        kernel(*args)
        wl.check(args)      # the workload's own tolerance


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_a_divisor_that_changes_with_the_lane_stays_a_vector_division(target):
    M, N = 37, 3 * target.vector_lanes + 5
    A = te.placeholder((M, N), "float32", "A")
    B = te.placeholder((M, N), "float32", "B")
    d = te.placeholder((M,), "float32", "d")
    C = te.compute((M, N), lambda i, j: A[i, j] / B[i, j] + A[i, j] / d[i], "C")
    wl = Workload.from_te([A, B, d, C], lambda a, b, dd: (a / b + a / dd[:, None],),
                          name="div_lanes")
    sch = Schedule(wl)
    i, j = sch.get_loops(sch.get_block("C"))
    _, v = sch.split(j, [None, target.vector_lanes])
    sch.vectorize(v)
    kernel = build(sch, target)
    assert _vector_fdivs(kernel.llvm_ir) >= 1      # A / B per lane
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, N)).astype(np.float32)
    b = rng.uniform(0.5, 2.0, (M, N)).astype(np.float32)
    dd = rng.uniform(0.5, 2.0, M).astype(np.float32)
    out = np.empty_like(a)
    kernel(a, b, dd, out)
    np.testing.assert_allclose(out, a / b + a / dd[:, None], rtol=2e-6, atol=1e-7)


def test_rewrite_replaces_only_lane_invariant_float_divisions():
    i, j = Var("i"), Var("j")
    x, y = Var("x", "float32"), Var("y", "float32")
    e = Div(Mul(x, FloatImm(2.0)), y)
    assert reciprocal.rewrite(e, "j") == Mul(Mul(x, FloatImm(2.0)), Div(FloatImm(1.0), y))
    lane_dep = Div(x, Var("j", "float32"))
    assert reciprocal.rewrite(lane_dep, "j") is lane_dep
    const = Div(x, FloatImm(3.0))
    assert reciprocal.rewrite(const, "j") is const
    ints = Div(i, j)
    assert reciprocal.rewrite(ints, "k") is ints
