"""The inlined float32 vector exp (``backends/llvm/vecmath.exp_f32``): within 2 ulp of
the exact exp over the whole float range (subnormal results, overflow to inf, NaN and
infinities kept), on the host and an AVX2 target, with no call left in the kernel."""
import numpy as np
import pytest

from explorer import Schedule, build, te
from explorer.workload import Workload
from host_targets import host_and_avx2

TARGETS = host_and_avx2()
IDS = [f"{t.vector_lanes}lanes" for t in TARGETS]
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-8, -1e-8, 1.0, -1.0, 88.72, 88.73, 89.0,
           1e3, -87.3, -100.0, -103.9, -104.0, -150.0, -1e30]


def exp_kernel(n: int, target, op=te.exp):
    A = te.placeholder((n,), "float32", "A")
    B = te.compute((n,), lambda i: op(A[i]), "B")
    wl = Workload.from_te([A, B], lambda a: (np.exp(a),), name=f"exp_{n}")
    sch = Schedule(wl)
    (i,) = sch.get_loops(sch.get_block("B"))
    _, v = sch.split(i, [None, target.vector_lanes])
    sch.vectorize(v)
    return build(sch, target)


def ulps(got, x):
    exact = np.exp(x.astype(np.float64))
    with np.errstate(over="ignore"):
        want = exact.astype(np.float32)
    finite = np.isfinite(want) & (want != 0)
    err = np.abs(got[finite].astype(np.float64) - exact[finite])
    return err / np.spacing(want[finite]).astype(np.float64), want, finite


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_exp_is_inline_and_within_two_ulp(target):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-110, 95, 1 << 16), rng.uniform(-1, 1, 1 << 12),
                        SPECIAL]).astype(np.float32)
    x = np.concatenate([x, np.zeros(-len(x) % target.vector_lanes, np.float32)])
    kernel = exp_kernel(len(x), target)
    assert "expf" not in kernel.llvm_ir and "llvm.exp" not in kernel.llvm_ir
    y = np.empty_like(x)
    kernel(x, y)
    err, want, finite = ulps(y, x)
    assert err.max() <= 2.0, (err.max(), x[finite][err.argmax()])
    rest = ~finite
    assert np.array_equal(np.isnan(y[rest]), np.isnan(want[rest]))
    same = rest & ~np.isnan(want)
    assert np.array_equal(y[same], want[same])      # inf and the zeros below -103.97


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_sigmoid_uses_it_too(target):
    n = 4 * target.vector_lanes
    x = np.linspace(-30, 30, n).astype(np.float32)
    kernel = exp_kernel(n, target, op=te.sigmoid)
    y = np.empty_like(x)
    kernel(x, y)
    np.testing.assert_allclose(y, 1 / (1 + np.exp(-x.astype(np.float64))), rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("lanes_mult", [1, 2, 3])
def test_scaling_by_two_to_the_n_matches_the_target(target, lanes_mult):
    """With AVX-512 the result is scaled by 2**n in one vscalefps per register (16-lane
    pieces through the x86 intrinsic, other widths through llvm.ldexp); without it, by
    integer exponent arithmetic (an AVX2 target has no vector ldexp: LLVM would call
    libm per lane). Vectors of 1, 2 and 3 registers (3: 2 + 1 pieces), still within
    2 ulp."""
    from explorer.backends.llvm.vecmath import has_scalef
    n = 16 * lanes_mult if target.vector_lanes >= 16 else 8 * lanes_mult
    A = te.placeholder((7 * n,), "float32", "A")
    B = te.compute((7 * n,), lambda i: te.exp(A[i]), "B")
    wl = Workload.from_te([A, B], lambda a: (np.exp(a),), name=f"exp_{n}")
    sch = Schedule(wl)
    (i,) = sch.get_loops(sch.get_block("B"))
    _, v = sch.split(i, [None, n])
    sch.vectorize(v)
    kernel = build(sch, target)
    text = kernel.llvm_ir
    if has_scalef(target):
        assert "scalef" in text or "llvm.ldexp" in text
    else:
        assert "scalef" not in text and "ldexp" not in text
    x = np.random.default_rng(1).uniform(-105, 90, 7 * n).astype(np.float32)
    y = np.empty_like(x)
    kernel(x, y)
    err, _, _ = ulps(y, x)
    assert err.max() <= 2.0
