"""The inlined float32 vector tanh (``backends/llvm/vecmath.tanh_f32``): within 2 ulp of
the exact tanh (numpy's float64) over a dense sweep of [-10, 10], relative accuracy
kept down to subnormal inputs, -0.0 kept, +-inf to +-1, NaN kept; on the host and an
AVX2 target, with no call left in the kernel; and the GELU epilogue built on it."""
import re

import numpy as np
import pytest

from explorer import Schedule, build, te
from explorer.workload import Workload
from host_targets import host_and_avx2

TARGETS = host_and_avx2()
IDS = [f"{t.vector_lanes}lanes" for t in TARGETS]
SPECIAL = [0.0, -0.0, 1e-40, -1e-40, 1e-30, 2.0 ** -12, 1e-3, -1e-3, 0.5, 0.6249999,
           0.625, -0.625, 0.6250001, 1.0, 4.0, 9.0, 9.01, 9.011, 9.012, 9.1, -9.1, 9.5,
           9.6, 44.0, 45.0, 89.0, 1e30,
           -1e30, 3.4e38, np.inf, -np.inf, np.nan]


def sweep(step: int) -> np.ndarray:
    """Every ``step``-th float32 from 1e-6 to 10, both signs (bit patterns, so the
    sweep is as dense in ulps near 0 as near 10), and the special values."""
    lo, hi = np.float32(1e-6).view(np.int32), np.float32(10.0).view(np.int32)
    pos = np.arange(lo, hi, step, dtype=np.int32).view(np.float32)
    return np.concatenate([pos, -pos, np.float32(SPECIAL)])


def tanh_kernel(n: int, lanes: int, target, fn=te.tanh, ref=np.tanh):
    A = te.placeholder((n,), "float32", "A")
    B = te.compute((n,), lambda i: fn(A[i]), "B")
    wl = Workload.from_te([A, B], lambda a: (ref(a),), name=f"tanh_{n}")
    sch = Schedule(wl)
    (i,) = sch.get_loops(sch.get_block("B"))
    _, v = sch.split(i, [None, lanes])
    sch.vectorize(v)
    return build(sch, target)


def run(x: np.ndarray, lanes: int, target, **kw) -> np.ndarray:
    x = np.concatenate([x, np.zeros(-len(x) % lanes, np.float32)]).astype(np.float32)
    kernel = tanh_kernel(len(x), lanes, target, **kw)
    assert not re.search(r"declare[^\n]*tanh", kernel.llvm_ir)     # no libm/libmvec call
    y = np.empty_like(x)
    kernel(x, y)
    return x, y


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_tanh_is_inline_and_within_two_ulp(target):
    x, y = run(sweep(401), target.vector_lanes, target)
    exact = np.tanh(x.astype(np.float64))
    want = exact.astype(np.float32)
    nonzero = np.isfinite(x) & (x != 0)
    err = np.abs(y[nonzero] - exact[nonzero]) / np.spacing(np.abs(want[nonzero]))
    assert err.max() <= 2.0, (err.max(), x[nonzero][err.argmax()])
    # the sign of every result is the input's (odd function), -0.0 included
    assert np.array_equal(np.signbit(y[~np.isnan(x)]), np.signbit(x[~np.isnan(x)]))
    rest = ~nonzero
    assert np.array_equal(np.isnan(y[rest]), np.isnan(x[rest]))
    same = rest & ~np.isnan(x)
    assert np.array_equal(y[same], want[same])                  # +-0 and +-inf to +-1


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_tiny_inputs_keep_relative_accuracy(target):
    # below 2**-12, tanh(x) = x to float32 precision: a polynomial must give x exactly
    # (an absolute-error method would flush these towards 0)
    rng = np.random.default_rng(7)
    x = np.float32(2.0) ** rng.uniform(-149, -12, 4096).astype(np.float32)
    x = np.concatenate([x, -x]).astype(np.float32)
    x, y = run(x, target.vector_lanes, target)
    want = np.tanh(x.astype(np.float64)).astype(np.float32)
    assert np.array_equal(y, want)


def test_narrow_vectors_too():
    # a 4-lane vector on any target (SSE width): the same code, whatever the register
    target = TARGETS[0]
    x = np.linspace(-12, 12, 4 * 97, dtype=np.float32)
    x, y = run(x, 4, target)
    np.testing.assert_allclose(y, np.tanh(x.astype(np.float64)), rtol=3e-7, atol=0)


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_gelu_on_it(target):
    c, a = np.sqrt(2 / np.pi), 0.044715

    def gelu(x):
        return x * 0.5 * (te.tanh((x + x * x * x * a) * c) + 1.0)

    def ref(x):
        x = x.astype(np.float64)
        return 0.5 * x * (1 + np.tanh(c * (x + a * x ** 3)))

    x = np.linspace(-8, 8, 64 * target.vector_lanes, dtype=np.float32)
    x, y = run(x, target.vector_lanes, target, fn=gelu, ref=ref)
    np.testing.assert_allclose(y, ref(x), rtol=2e-6, atol=1e-7)
