"""The operator library: naive functions run on the interpreter match the numpy
references, references match independent loops, FLOP counts, keys and errors."""
import itertools

import numpy as np
import pytest

from explorer import ops
from explorer.backends import build
from explorer.errors import ExplorerError, MeasureError
from explorer.ir.functor import walk_stmt
from explorer.ir.stmt import BlockRealize, For

SMALL = {name: spec.small for name, spec in ops.registry.items()}

CASES = [
    ("gemm", {}),
    ("gemm", {"transpose_a": True}),
    ("gemm", {"transpose_b": True}),
    ("gemm", {"transpose_a": True, "transpose_b": True}),
    ("gemm", {"dtype": "float64"}),
    ("gemm", {"dtype": "int32", "transpose_b": True}),
    ("gemm", {"M": 1, "N": 7, "K": 1}),
    ("batch_matmul", {}),
    ("batch_matmul", {"dtype": "int32"}),
    ("conv2d", {}),
    ("conv2d", {"stride": 2, "padding": 1}),
    ("conv2d", {"dilation": 2, "padding": 2}),
    ("conv2d", {"stride": (1, 2), "padding": (1, 0), "dilation": (2, 1)}),
    ("conv2d", {"R": 1, "S": 1, "stride": 2}),
    ("conv2d", {"N": 2, "dtype": "float64", "padding": 1}),
    ("conv2d", {"dtype": "int32", "padding": 1}),
    ("conv2d", {"layout": "NHWC"}),
    ("conv2d", {"layout": "NHWC", "stride": 2, "padding": 1}),
    ("conv2d", {"layout": "NHWC", "dilation": 2, "padding": 1, "R": 2}),
    ("depthwise_conv2d", {}),
    ("depthwise_conv2d", {"stride": 2, "padding": 1}),
    ("depthwise_conv2d", {"dilation": 2, "padding": 2, "dtype": "int32"}),
    ("dense_bias_relu", {}),
    ("dense_bias_relu", {"dtype": "float64"}),
    ("dense_bias_relu", {"dtype": "int32"}),
    ("conv2d_bias_relu", {}),
    ("conv2d_bias_relu", {"stride": 2, "padding": 1, "dtype": "float64"}),
    ("conv2d_bias_relu", {"dtype": "int32", "padding": 1}),
    ("gemm_bias_gelu", {}),
    ("gemm_bias_gelu", {"dtype": "float64"}),
    ("layer_norm", {}),
    ("layer_norm", {"dtype": "float64"}),
    ("softmax", {}),
    ("softmax", {"dtype": "float64"}),
    ("row_sum", {}),
    ("row_sum", {"dtype": "int32"}),
    ("elementwise", {}),
    ("elementwise", {"dtype": "float64"}),
    ("elementwise", {"dtype": "int32"}),
    ("transpose", {}),
    ("transpose", {"dtype": "int32"}),
]


def _small(name, **kw):
    return ops.get(name, **{**SMALL[name], **kw})


def _blocks(func):
    return [n.block for n, _ in walk_stmt(func.body) if isinstance(n, BlockRealize)]


def _loop_names(func):
    return [n.var.name for n, _ in walk_stmt(func.body) if isinstance(n, For)]


@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_naive_function_matches_reference(name, kw):
    wl = _small(name, **kw)
    args = wl.make_args(seed=3)
    build(wl.func, "interp")(*args)
    rtol, atol = wl.default_tolerance()
    assert wl.check(args) <= atol
    n_in = len(wl.inputs)
    for out, ref in zip(args[n_in:], wl.reference(*args[:n_in])):
        assert out.dtype == np.dtype(wl.dtype) and ref.dtype == np.dtype(wl.dtype)
        assert np.any(ref != 0)


def test_every_registered_op_is_covered():
    assert {n for n, _ in CASES} == set(ops.registry)


# ------------------------------------------------------------------ references

def _conv_loops(x, w, stride, pad, dil):
    """NCHW convolution by explicit loops, the textbook definition."""
    N, C, H, W = x.shape
    K, _, R, S = w.shape
    P = (H + 2 * pad - dil * (R - 1) - 1) // stride + 1
    Q = (W + 2 * pad - dil * (S - 1) - 1) // stride + 1
    out = np.zeros((N, K, P, Q))
    for n, k, p, q, c, r, s in itertools.product(range(N), range(K), range(P), range(Q),
                                                 range(C), range(R), range(S)):
        h, v = p * stride + r * dil - pad, q * stride + s * dil - pad
        if 0 <= h < H and 0 <= v < W:
            out[n, k, p, q] += x[n, c, h, v] * w[k, c, r, s]
    return out


@pytest.mark.parametrize("stride,pad,dil", [(1, 0, 1), (2, 1, 1), (1, 2, 2), (2, 0, 2)])
def test_conv2d_reference_matches_loops(stride, pad, dil):
    wl = ops.conv2d(2, 3, 6, 5, 2, 3, 2, stride=stride, padding=pad, dilation=dil,
                    dtype="float64")
    x, w, _ = wl.make_args(seed=1)
    np.testing.assert_allclose(wl.reference(x, w)[0], _conv_loops(x, w, stride, pad, dil),
                               rtol=1e-12, atol=1e-12)
    nhwc = ops.conv2d(2, 3, 6, 5, 2, 3, 2, stride=stride, padding=pad, dilation=dil,
                      layout="NHWC", dtype="float64")
    got = nhwc.reference(x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0))[0]
    np.testing.assert_allclose(got.transpose(0, 3, 1, 2), _conv_loops(x, w, stride, pad, dil),
                               rtol=1e-12, atol=1e-12)


def test_depthwise_reference_matches_loops():
    wl = ops.depthwise_conv2d(1, 3, 6, 7, 3, 2, stride=2, padding=1, dilation=1,
                              dtype="float64")
    x, w, _ = wl.make_args(seed=2)
    want = np.concatenate([_conv_loops(x[:, c:c + 1], w[None, c:c + 1], 2, 1, 1)
                           for c in range(3)], axis=1)
    np.testing.assert_allclose(wl.reference(x, w)[0], want, rtol=1e-12, atol=1e-12)


def test_other_references_match_numpy():
    a, b, _ = ops.gemm(3, 4, 5, transpose_a=True, transpose_b=True, dtype="float64").make_args()
    got = ops.gemm(3, 4, 5, transpose_a=True, transpose_b=True, dtype="float64").reference(a, b)
    np.testing.assert_allclose(got[0], a.T @ b.T)
    x, w, bias, _ = ops.dense_bias_relu(3, 4, 5, dtype="float64").make_args()
    got = ops.dense_bias_relu(3, 4, 5, dtype="float64").reference(x, w, bias)[0]
    np.testing.assert_allclose(got, np.maximum(x @ w.T + bias, 0))
    x, _ = ops.softmax(3, 6, dtype="float64").make_args()
    got = ops.softmax(3, 6, dtype="float64").reference(x)[0]
    np.testing.assert_allclose(got, np.exp(x) / np.exp(x).sum(1, keepdims=True))
    np.testing.assert_allclose(got.sum(1), 1.0)


# ------------------------------------------------------------------ flops, keys, structure

def test_flops():
    assert ops.gemm(512, 512, 512).flops == 2 * 512 ** 3
    assert ops.gemm(3, 5, 7, transpose_a=True).flops == 2 * 3 * 5 * 7
    assert ops.batch_matmul(16, 128, 128, 64).flops == 2 * 16 * 128 * 128 * 64
    assert ops.resnet18_conv("C2").flops == 2 * 64 * 56 * 56 * 64 * 3 * 3
    # stride 2, padding 1, kernel 3 on 7x6: output 4x3
    assert ops.conv2d(1, 3, 7, 6, 4, 3, 3, stride=2, padding=1).flops == 2 * 4 * 4 * 3 * 3 * 9
    assert ops.depthwise_conv2d(1, 3, 7, 6, 3, 3).flops == 2 * 3 * 5 * 4 * 9
    assert ops.dense_bias_relu(4, 5, 6).flops == 2 * 4 * 5 * 6 + 2 * 4 * 5
    assert ops.softmax(4, 5).flops == 5 * 20
    assert ops.row_sum(4, 5).flops == 20
    assert ops.elementwise(4, 5).flops == 60
    assert ops.transpose(4, 5).flops == 20
    assert all(isinstance(ops.get(n, **s).flops, int) for n, s in SMALL.items())


def test_keys_and_params():
    wl = ops.gemm(512, 512, 512)
    assert wl.key == "gemm(M=512,N=512,K=512,transpose_a=False,transpose_b=False,dtype=float32)"
    assert wl.params[:3] == (("M", 512), ("N", 512), ("K", 512))
    c = ops.conv2d(1, 3, 8, 8, 4, 3, 3, stride=(2, 2), padding=(1, 0), layout="nhwc")
    assert c.key == ("conv2d(N=1,C=3,H=8,W=8,K=4,R=3,S=3,stride=2,padding=(1,0),dilation=1,"
                     "layout=NHWC,dtype=float32)")
    keys = {ops.get(n, **s, **kw).key for n, s in SMALL.items()
            for kw in ({}, {"dtype": "float64"})}
    assert len(keys) == 2 * len(SMALL)
    assert ops.gemm(4, 4, 4) == ops.gemm(4, 4, 4)
    assert len({ops.gemm(4, 4, 4), ops.gemm(4, 4, 4)}) == 1
    assert ops.gemm(4, 4, 4) != ops.gemm(4, 4, 4, transpose_b=True)


def test_gemm_structure():
    wl = ops.gemm(8, 12, 10, transpose_a=True)
    assert (wl.inputs, wl.outputs) == (("A", "B"), ("C",))
    assert [(p.name, p.shape) for p in wl.func.params] == [("A", (10, 8)), ("B", (10, 12)),
                                                          ("C", (8, 12))]
    assert _loop_names(wl.func) == ["i", "j", "k"]
    (block,) = _blocks(wl.func)
    assert block.name == "C" and [iv.kind for iv in block.iter_vars] == ["S", "S", "R"]


def test_block_chains():
    assert [b.name for b in _blocks(ops.dense_bias_relu(4, 5, 6).func)] == [
        "dense", "bias_add", "relu"]
    assert [b.name for b in _blocks(ops.softmax(4, 5).func)] == [
        "row_max", "exp", "row_sum", "norm"]
    assert [b.name for b in _blocks(ops.conv2d(1, 2, 5, 5, 2, 3, 3).func)] == ["conv"]
    assert [b.name for b in _blocks(ops.conv2d(1, 2, 5, 5, 2, 3, 3, padding=1).func)] == [
        "pad", "conv"]
    assert [b.name for b in _blocks(ops.depthwise_conv2d(1, 2, 5, 5, 3, 3, padding=1).func)] \
        == ["pad", "depthwise"]
    dense = ops.dense_bias_relu(4, 5, 6)
    assert (dense.inputs, dense.outputs) == (("X", "W", "bias"), ("relu",))
    assert [p.name for p in dense.func.params] == ["X", "W", "bias", "relu"]


def test_resnet18_layers():
    shapes = {name: ops.resnet18_conv(name) for name in ops.RESNET18_CONVS}
    assert len(shapes) == 12
    c1 = dict(shapes["C1"].params)
    assert (c1["C"], c1["H"], c1["K"], c1["R"], c1["stride"], c1["padding"]) == (
        3, 224, 64, 7, 2, 3)
    assert shapes["C1"].func.params[-1].shape == (1, 64, 112, 112)
    assert shapes["C12"].func.params[-1].shape == (1, 512, 7, 7)
    assert shapes["C5"].func.params[-1].shape == (1, 128, 28, 28)
    assert dict(shapes["C3"].params)["padding"] == 0
    assert ops.resnet18_conv("c4", layout="NHWC").func.params[-1].shape == (1, 28, 28, 128)


def test_resnet18_layers_are_the_resnet18_suite():
    from explorer.task_scheduler import load_suite
    suite = {t.name: t.workload for t in load_suite("resnet18")}
    assert suite == {name: ops.resnet18_conv(name) for name in ops.RESNET18_CONVS}


# ------------------------------------------------------------------ registry and get

def test_registry_and_get():
    for name, spec in ops.registry.items():
        assert spec.name == name and set(spec.param_names) <= set(spec.defaults)
        assert set(spec.small) <= set(spec.defaults) and spec.description
    wl = ops.get("conv2d", 1, 3, 7, 7, 4, 3, 3, padding=1, layout="NHWC")
    assert wl == ops.conv2d(1, 3, 7, 7, 4, 3, 3, padding=1, layout="NHWC")
    assert ops.get("gemm") == ops.gemm()
    assert ops.get("gemm", 8, 9, 10, dtype="int32").params[:3] == (("M", 8), ("N", 9), ("K", 10))
    assert ops.get("gemm", np.int64(8), 9, 10).params[0] == ("M", 8)


@pytest.mark.parametrize("make,fragment", [
    (lambda: ops.get("gem", 8, 8, 8), "unknown operator 'gem': known operators are batch_matmul"),
    (lambda: ops.get("gemm", 8, 8), "gemm takes 3 shape values (M, N, K) but got 2"),
    (lambda: ops.get("gemm", 8, 8, 8, M=4), "M given both in the shape and by keyword"),
    (lambda: ops.get("gemm", 8, 8, 8, stride=2), "gemm has no parameter stride"),
    (lambda: ops.get("gemm", 8, 0, 8), "gemm: N=0 must be a positive int"),
    (lambda: ops.gemm(8, -1, 8), "gemm: N=-1 must be a positive int"),
    (lambda: ops.gemm(8.0, 8, 8), "gemm: M=8.0 must be a positive int"),
    (lambda: ops.gemm("8", 8, 8), "gemm: M='8' must be a positive int"),
    (lambda: ops.gemm(8, 8, 8, transpose_a=1), "transpose_a=1 must be True or False"),
    (lambda: ops.gemm(8, 8, 8, dtype="float16"),
     "dtype 'float16' is not supported: use one of float32, float64, int32"),
    (lambda: ops.softmax(4, 4, dtype="int32"), "softmax: dtype 'int32' is not supported"),
    (lambda: ops.conv2d(1, 3, 7, 7, 4, 3, 3, layout="NCWH"),
     "unknown layout 'NCWH': use 'NCHW' or 'NHWC'"),
    (lambda: ops.conv2d(1, 3, 7, 7, 4, 3, 3, stride=0), "stride=0 must be an int >= 1"),
    (lambda: ops.conv2d(1, 3, 7, 7, 4, 3, 3, padding=-1), "padding=-1 must be an int >= 0"),
    (lambda: ops.conv2d(1, 3, 7, 7, 4, 3, 3, padding=(1, 2, 3)), "or a pair (h, w)"),
    (lambda: ops.conv2d(1, 3, 4, 4, 4, 3, 3, dilation=2),
     "the kernel spans 5 along H (size 3, dilation 2) but the padded input is only 4"),
    (lambda: ops.depthwise_conv2d(1, 3, 7, 7, 9, 3), "kernel spans 9 along H"),
    (lambda: ops.resnet18_conv("C13"), "unknown ResNet-18 layer 'C13': use one of C1, C2"),
])
def test_bad_inputs_raise_explorer_error(make, fragment):
    with pytest.raises(ExplorerError) as info:
        make()
    assert fragment in str(info.value)


# ------------------------------------------------------------------ make_args and check

def test_make_args_is_deterministic_by_seed():
    wl = _small("dense_bias_relu")
    a, b, c = wl.make_args(seed=7), wl.make_args(seed=7), wl.make_args(seed=8)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])
    assert [x.shape for x in a] == [p.shape for p in wl.func.params]
    assert all(x.dtype == np.float32 for x in a) and not a[-1].any()
    assert all(-1 <= x.min() and x.max() < 1 for x in a[:-1])
    ints = ops.gemm(16, 16, 16, dtype="int32").make_args(seed=np.random.default_rng(0))
    assert ints[0].dtype == np.int32 and -4 <= ints[0].min() and ints[0].max() <= 4
    assert len(np.unique(ints[0])) > 3


def _solved(wl, seed=0):
    args = wl.make_args(seed)
    n_in = len(wl.inputs)
    for out, ref in zip(args[n_in:], wl.reference(*args[:n_in])):
        out[...] = ref
    return args


def test_check_reports_wrong_element():
    wl = ops.gemm(5, 6, 7)
    args = _solved(wl)
    assert wl.check(args) == 0.0
    args[2][2, 3] += 0.5
    with pytest.raises(MeasureError) as info:
        wl.check(args)
    msg = str(info.value)
    assert "gemm(M=5,N=6,K=7" in msg and "output C is wrong" in msg
    assert "max abs error 0.5 at index (2, 3)" in msg and "1 of 30 elements" in msg
    assert wl.check(args, atol=0.6) == pytest.approx(0.5)


def test_check_catches_nan_unwritten_and_small_errors():
    wl = _small("softmax")
    args = _solved(wl)
    args[1][0, 0] = np.nan
    with pytest.raises(MeasureError, match="output norm is wrong.*got nan"):
        wl.check(args)
    with pytest.raises(MeasureError, match="output norm is wrong"):
        wl.check(wl.make_args())
    # softmax outputs are ~1/N: an absolute error of 1e-4 is a real bug there
    args = _solved(wl)
    args[1][1, 1] += 1e-4
    with pytest.raises(MeasureError):
        wl.check(args)
    ints = ops.row_sum(3, 4, dtype="int32")
    args = _solved(ints)
    args[1][0] += 1
    with pytest.raises(MeasureError, match="max abs error 1 at index \\(0,\\)"):
        ints.check(args)


def test_check_and_reference_reject_bad_arguments():
    wl = ops.gemm(4, 5, 6)
    args = wl.make_args()
    with pytest.raises(MeasureError, match="check takes all 3 arguments \\(A, B, C\\)"):
        wl.check(args[:2])
    with pytest.raises(MeasureError, match="reference takes the 2 inputs \\(A, B\\)"):
        wl.reference(*args)
    with pytest.raises(MeasureError, match="argument B has shape \\(5, 6\\), expected \\(6, 5\\)"):
        wl.check([args[0], args[1].T.copy(), args[2]])
    with pytest.raises(MeasureError, match="argument C has dtype float64, expected float32"):
        wl.check([args[0], args[1], args[2].astype(np.float64)])


def test_default_tolerances_grow_with_reduction_length():
    r8, a8 = ops.gemm(4, 4, 8).default_tolerance()
    r800, a800 = ops.gemm(4, 4, 800).default_tolerance()
    assert r8 == r800 == 1e-5 and a800 == pytest.approx(a8 * 10)
    assert ops.conv2d(1, 4, 5, 5, 2, 3, 3).default_tolerance()[1] == pytest.approx(1e-4 * 6)
    assert ops.gemm(4, 4, 8, dtype="int32").default_tolerance() == (0.0, 0.0)
    assert ops.gemm(4, 4, 8, dtype="float64").default_tolerance()[1] < 1e-10
