"""The operator library: functions that return standard tensor operators as Workloads.

Each operator function (``gemm``, ``conv2d``, ...) builds the naive PrimFunc with
:mod:`explorer.te` and wraps it in an :class:`explorer.workload.Workload` that
also knows its FLOP count, a canonical key for the tuning database, random
arguments and its numpy reference (kept here, found by the operator's name, so a
worker process calls it without receiving code) to check any schedule against::

    wl = ops.gemm(64, 64, 64)
    args = wl.make_args(seed=0)
    build(wl, "interp")(*args)
    wl.check(args)              # max abs error, or MeasureError

``registry`` and :func:`get` look operators up by name (for the CLI and
workload suites); :func:`resnet18_conv` gives the AutoTVM ResNet-18 layers, as
listed in the resnet18 suite.
"""
from __future__ import annotations

import inspect
import operator
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from . import te
from .errors import ExplorerError
from .suites import suite_tasks
from .workload import Workload, normalized_tolerance, reduction_tolerance

_ALL_DTYPES = ("float32", "float64", "int32")
_FLOAT_DTYPES = ("float32", "float64")


# ------------------------------------------------------------------ validation

def _fail(op: str, msg: str):
    raise ExplorerError(f"{op}: {msg}")


def _size(op: str, name: str, value) -> int:
    if isinstance(value, bool) or isinstance(value, float):
        _fail(op, f"{name}={value!r} must be a positive int")
    try:
        v = operator.index(value)
    except TypeError:
        _fail(op, f"{name}={value!r} must be a positive int")
    if v <= 0:
        _fail(op, f"{name}={v} must be a positive int (sizes start at 1)")
    return int(v)


def _pair(op: str, name: str, value, minimum: int) -> tuple:
    """An int or an (h, w) pair of ints, each at least ``minimum``."""
    vals = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    ok = len(vals) == 2 and all(not isinstance(v, bool) and isinstance(v, (int, np.integer))
                                and v >= minimum for v in vals)
    if not ok:
        _fail(op, f"{name}={value!r} must be an int >= {minimum} or a pair (h, w) of them")
    return int(vals[0]), int(vals[1])


def _compact(pair: tuple):
    return pair[0] if pair[0] == pair[1] else pair


def _dtype(op: str, dtype, allowed=_ALL_DTYPES) -> str:
    if dtype not in allowed:
        _fail(op, f"dtype {dtype!r} is not supported: use one of {', '.join(allowed)}")
    return dtype


def _flag(op: str, name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        _fail(op, f"{name}={value!r} must be True or False")
    return bool(value)


def _layout(op: str, layout) -> str:
    if not isinstance(layout, str) or layout.upper() not in ("NCHW", "NHWC"):
        _fail(op, f"unknown layout {layout!r}: use 'NCHW' or 'NHWC'")
    return layout.upper()


def _out_size(op: str, dim: str, n: int, k: int, stride: int, pad: int, dil: int) -> int:
    span = dil * (k - 1) + 1
    if n + 2 * pad < span:
        _fail(op, f"the kernel spans {span} along {dim} (size {k}, dilation {dil}) but the "
                  f"padded input is only {n + 2 * pad}: use a smaller kernel or dilation, or "
                  f"more padding")
    return (n + 2 * pad - span) // stride + 1


# ------------------------------------------------------------------ building

def _format(v) -> str:
    if isinstance(v, tuple):
        return "(" + ",".join(str(x) for x in v) + ")"
    return str(v)


def _workload(name: str, params: tuple, tensors: list, flops: int, dtype: str) -> Workload:
    """The library Workload: checked by ``_IMPLS[name]``'s numpy reference."""
    func = te.create_func(tensors, name=name)
    key = f"{name}({','.join(f'{k}={_format(v)}' for k, v in params)},dtype={dtype})"
    kw = dict(params, dtype=dtype)
    return Workload(name, params, func, int(flops),
                    tuple(t.name for t in tensors if t.op is None),
                    tuple(t.name for t in tensors if t.op is not None), dtype, key,
                    checked_by="library", reference_fn=_library_reference(name, kw, dtype),
                    tolerance=_IMPLS[name].tolerance(kw, dtype))


def _library_reference(name: str, kw: dict, dtype: str) -> Callable:
    """numpy on the inputs widened to float64 (int64 for integers); the Workload casts back."""
    wide = np.float64 if dtype in _FLOAT_DTYPES else np.int64

    def reference(*arrays):
        return _IMPLS[name].reference(kw, *(a.astype(wide) for a in arrays))
    reference.__name__ = f"{name}_reference"
    return reference


def _affine(out, stride: int, red, dil: int):
    """``out * stride + red * dil`` without multiplications by 1."""
    a = out if stride == 1 else out * stride
    return a + (red if dil == 1 else red * dil)


def _shift(v, off: int):
    return v if off == 0 else v - off


def _inside(v, lo: int, n: int):
    return (v >= lo) & (v < lo + n)


def _pad_nchw(X, ph: int, pw: int):
    N, C, H, W = X.shape
    if ph == 0 and pw == 0:
        return X
    return te.compute((N, C, H + 2 * ph, W + 2 * pw), lambda n, c, h, w: te.if_then_else(
        _inside(h, ph, H) & _inside(w, pw, W), X[n, c, _shift(h, ph), _shift(w, pw)], 0), "pad")


def _pad_nhwc(X, ph: int, pw: int):
    N, H, W, C = X.shape
    if ph == 0 and pw == 0:
        return X
    return te.compute((N, H + 2 * ph, W + 2 * pw, C), lambda n, h, w, c: te.if_then_else(
        _inside(h, ph, H) & _inside(w, pw, W), X[n, _shift(h, ph), _shift(w, pw), c], 0), "pad")


# ------------------------------------------------------------------ operators

def gemm(M=512, N=512, K=512, transpose_a=False, transpose_b=False,
         dtype="float32") -> Workload:
    """C = A @ B with A (M, K) and B (K, N); transposed operands are stored as (K, M) and (N, K)."""
    op = "gemm"
    M, N, K = (_size(op, n, v) for n, v in (("M", M), ("N", N), ("K", K)))
    ta, tb = _flag(op, "transpose_a", transpose_a), _flag(op, "transpose_b", transpose_b)
    dtype = _dtype(op, dtype)
    A = te.placeholder((K, M) if ta else (M, K), dtype, "A")
    B = te.placeholder((N, K) if tb else (K, N), dtype, "B")
    k = te.reduce_axis(K, "k")
    C = te.compute((M, N), lambda i, j: te.sum(
        (A[k, i] if ta else A[i, k]) * (B[j, k] if tb else B[k, j]), axis=k), "C")
    params = (("M", M), ("N", N), ("K", K), ("transpose_a", ta), ("transpose_b", tb))
    return _workload(op, params, [A, B, C], 2 * M * N * K, dtype)


def batch_matmul(B=16, M=128, N=128, K=64, dtype="float32") -> Workload:
    """C[b] = X[b] @ Y[b] with X (B, M, K), Y (B, K, N), C (B, M, N)."""
    op = "batch_matmul"
    B, M, N, K = (_size(op, n, v) for n, v in (("B", B), ("M", M), ("N", N), ("K", K)))
    dtype = _dtype(op, dtype)
    X = te.placeholder((B, M, K), dtype, "X")
    Y = te.placeholder((B, K, N), dtype, "Y")
    k = te.reduce_axis(K, "k")
    C = te.compute((B, M, N), lambda b, i, j: te.sum(X[b, i, k] * Y[b, k, j], axis=k), "C")
    return _workload(op, (("B", B), ("M", M), ("N", N), ("K", K)), [X, Y, C],
                     2 * B * M * N * K, dtype)


def _conv_shape(op: str, N, C, H, W, K, R, S, stride, padding, dilation) -> tuple:
    """Checked sizes of a convolution: (N, C, H, W, K, R, S), (sh, sw), (ph, pw), (dh, dw), P, Q."""
    sizes = tuple(_size(op, n, v) for n, v in zip("NCHWKRS", (N, C, H, W, K, R, S)))
    H, R, W, S = sizes[2], sizes[5], sizes[3], sizes[6]
    (sh, sw), (ph, pw) = _pair(op, "stride", stride, 1), _pair(op, "padding", padding, 0)
    dh, dw = _pair(op, "dilation", dilation, 1)
    P, Q = _out_size(op, "H", H, R, sh, ph, dh), _out_size(op, "W", W, S, sw, pw, dw)
    return sizes, (sh, sw), (ph, pw), (dh, dw), P, Q


def _conv_params(sizes: tuple, stride: tuple, padding: tuple, dilation: tuple) -> tuple:
    return (*zip("NCHWKRS", sizes), ("stride", _compact(stride)),
            ("padding", _compact(padding)), ("dilation", _compact(dilation)))


def _conv_nchw_te(X, Wt, K: int, P: int, Q: int, stride: tuple, padding: tuple,
                  dilation: tuple):
    """The NCHW convolution of placeholders X (N,C,H,W) and Wt (K,C,R,S): block "conv"."""
    (sh, sw), (dh, dw) = stride, dilation
    N, C = X.shape[0], X.shape[1]
    rc = te.reduce_axis(C, "rc")
    ry, rx = te.reduce_axis(Wt.shape[2], "ry"), te.reduce_axis(Wt.shape[3], "rx")
    Xp = _pad_nchw(X, *padding)
    return te.compute((N, K, P, Q), lambda n, k, p, q: te.sum(
        Xp[n, rc, _affine(p, sh, ry, dh), _affine(q, sw, rx, dw)] * Wt[k, rc, ry, rx],
        axis=[rc, ry, rx]), "conv")


def conv2d(N=1, C=64, H=56, W=56, K=64, R=3, S=3, stride=1, padding=0, dilation=1,
           layout="NCHW", dtype="float32") -> Workload:
    """2-d convolution: NCHW input X (N,C,H,W), weight W (K,C,R,S), output conv (N,K,P,Q);
    NHWC: X (N,H,W,C), W (R,S,C,K), conv (N,P,Q,K). Padding is a separate "pad" block.

    stride, padding and dilation are an int or an (h, w) pair.
    """
    op = "conv2d"
    sizes, (sh, sw), (ph, pw), (dh, dw), P, Q = _conv_shape(
        op, N, C, H, W, K, R, S, stride, padding, dilation)
    N, C, H, W, K, R, S = sizes
    layout, dtype = _layout(op, layout), _dtype(op, dtype)
    if layout == "NCHW":
        X = te.placeholder((N, C, H, W), dtype, "X")
        Wt = te.placeholder((K, C, R, S), dtype, "W")
        out = _conv_nchw_te(X, Wt, K, P, Q, (sh, sw), (ph, pw), (dh, dw))
    else:
        rc, ry, rx = te.reduce_axis(C, "rc"), te.reduce_axis(R, "ry"), te.reduce_axis(S, "rx")
        X = te.placeholder((N, H, W, C), dtype, "X")
        Wt = te.placeholder((R, S, C, K), dtype, "W")
        Xp = _pad_nhwc(X, ph, pw)
        out = te.compute((N, P, Q, K), lambda n, p, q, k: te.sum(
            Xp[n, _affine(p, sh, ry, dh), _affine(q, sw, rx, dw), rc] * Wt[ry, rx, rc, k],
            axis=[ry, rx, rc]), "conv")
    params = _conv_params(sizes, (sh, sw), (ph, pw), (dh, dw)) + (("layout", layout),)
    return _workload(op, params, [X, Wt, out], 2 * N * K * P * Q * C * R * S, dtype)


def conv2d_bias_relu(N=1, C=64, H=56, W=56, K=64, R=3, S=3, stride=1, padding=0, dilation=1,
                     dtype="float32") -> Workload:
    """relu(conv2d(X, W) + bias[k]) in NCHW as blocks "pad" (when padded), "conv",
    "bias_add" and "relu": X (N,C,H,W), W (K,C,R,S), bias (K,), output (N,K,P,Q).
    The epilogue is two elementwise blocks for the design space to inline or to
    compute at the conv's tiles. FLOPs: the conv's + 2NKPQ (bias, relu)."""
    op = "conv2d_bias_relu"
    sizes, stride, padding, dilation, P, Q = _conv_shape(
        op, N, C, H, W, K, R, S, stride, padding, dilation)
    N, C, H, W, K, R, S = sizes
    dtype = _dtype(op, dtype)
    X = te.placeholder((N, C, H, W), dtype, "X")
    Wt = te.placeholder((K, C, R, S), dtype, "W")
    bias = te.placeholder((K,), dtype, "bias")
    conv = _conv_nchw_te(X, Wt, K, P, Q, stride, padding, dilation)
    biased = te.compute(conv.shape, lambda n, k, p, q: conv[n, k, p, q] + bias[k], "bias_add")
    relu = te.compute(conv.shape, lambda n, k, p, q: te.max(biased[n, k, p, q], 0), "relu")
    return _workload(op, _conv_params(sizes, stride, padding, dilation), [X, Wt, bias, relu],
                     2 * N * K * P * Q * (C * R * S + 1), dtype)


def depthwise_conv2d(N=1, C=32, H=56, W=56, R=3, S=3, stride=1, padding=0, dilation=1,
                     dtype="float32") -> Workload:
    """Depthwise NCHW convolution (multiplier 1): X (N,C,H,W), W (C,R,S), output (N,C,P,Q)."""
    op = "depthwise_conv2d"
    N, C, H, W, R, S = (_size(op, n, v) for n, v in zip("NCHWRS", (N, C, H, W, R, S)))
    (sh, sw), (ph, pw) = _pair(op, "stride", stride, 1), _pair(op, "padding", padding, 0)
    dh, dw = _pair(op, "dilation", dilation, 1)
    dtype = _dtype(op, dtype)
    P, Q = _out_size(op, "H", H, R, sh, ph, dh), _out_size(op, "W", W, S, sw, pw, dw)
    X = te.placeholder((N, C, H, W), dtype, "X")
    Wt = te.placeholder((C, R, S), dtype, "W")
    Xp = _pad_nchw(X, ph, pw)
    ry, rx = te.reduce_axis(R, "ry"), te.reduce_axis(S, "rx")
    out = te.compute((N, C, P, Q), lambda n, c, p, q: te.sum(
        Xp[n, c, _affine(p, sh, ry, dh), _affine(q, sw, rx, dw)] * Wt[c, ry, rx],
        axis=[ry, rx]), "depthwise")
    params = (("N", N), ("C", C), ("H", H), ("W", W), ("R", R), ("S", S),
              ("stride", _compact((sh, sw))), ("padding", _compact((ph, pw))),
              ("dilation", _compact((dh, dw))))
    return _workload(op, params, [X, Wt, out], 2 * N * C * P * Q * R * S, dtype)


def dense_bias_relu(M=512, N=512, K=512, dtype="float32") -> Workload:
    """relu(X @ W^T + bias) as three blocks "dense", "bias_add", "relu";
    X (M, K), W (N, K), bias (N,). FLOPs: 2MNK + MN (bias) + MN (relu)."""
    op = "dense_bias_relu"
    M, N, K = (_size(op, n, v) for n, v in (("M", M), ("N", N), ("K", K)))
    dtype = _dtype(op, dtype)
    X = te.placeholder((M, K), dtype, "X")
    Wt = te.placeholder((N, K), dtype, "W")
    bias = te.placeholder((N,), dtype, "bias")
    k = te.reduce_axis(K, "k")
    dense = te.compute((M, N), lambda i, j: te.sum(X[i, k] * Wt[j, k], axis=k), "dense")
    biased = te.compute((M, N), lambda i, j: dense[i, j] + bias[j], "bias_add")
    relu = te.compute((M, N), lambda i, j: te.max(biased[i, j], 0), "relu")
    return _workload(op, (("M", M), ("N", N), ("K", K)), [X, Wt, bias, relu],
                     2 * M * N * K + 2 * M * N, dtype)


GELU_C = 0.7978845608028654      # sqrt(2 / pi)
GELU_A = 0.044715


def gemm_bias_gelu(M=512, N=512, K=512, dtype="float32") -> Workload:
    """gelu(A @ B + bias) as blocks "gemm", "bias_add", "gelu": A (M, K), B (K, N),
    bias (N,). GELU is the tanh form (BERT's and GPT-2's; PyTorch's
    ``gelu(approximate="tanh")``): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    FLOPs (as ``workload.count_flops`` counts them): 2MNK + MN (bias) + 9MN (GELU: 8
    arithmetic operations and the tanh)."""
    op = "gemm_bias_gelu"
    M, N, K = (_size(op, n, v) for n, v in (("M", M), ("N", N), ("K", K)))
    dtype = _dtype(op, dtype, _FLOAT_DTYPES)
    A = te.placeholder((M, K), dtype, "A")
    B = te.placeholder((K, N), dtype, "B")
    bias = te.placeholder((N,), dtype, "bias")
    k = te.reduce_axis(K, "k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), "gemm")
    biased = te.compute((M, N), lambda i, j: C[i, j] + bias[j], "bias_add")

    def gelu(i, j):
        x = biased[i, j]
        return x * 0.5 * (te.tanh((x + x * x * x * GELU_A) * GELU_C) + 1.0)
    out = te.compute((M, N), gelu, "gelu")
    return _workload(op, (("M", M), ("N", N), ("K", K)), [A, B, bias, out],
                     2 * M * N * K + 10 * M * N, dtype)


LAYER_NORM_EPS = 1e-5


def layer_norm(M=1024, N=1024, dtype="float32") -> Workload:
    """Layer normalization of each row of X (M, N) with gain gamma (N,) and shift beta
    (N,), eps 1e-5 (PyTorch's default), in four blocks: "x_sum" and "sq_sum" (the
    centered sum of squares: two passes, as numerically safe as numpy's var),
    "rstd" = 1 / sqrt(var + eps) per row, "norm" = (x - mean) * rstd * gamma + beta.
    FLOPs (as ``workload.count_flops`` counts them): 12MN + 4M (per element 1 in the
    sum, 6 in the centered square, 5 in the normalization; 4 per row for rstd)."""
    op = "layer_norm"
    M, N = _size(op, "M", M), _size(op, "N", N)
    dtype = _dtype(op, dtype, _FLOAT_DTYPES)
    X = te.placeholder((M, N), dtype, "X")
    gamma = te.placeholder((N,), dtype, "gamma")
    beta = te.placeholder((N,), dtype, "beta")
    inv = 1.0 / N
    k1, k2 = te.reduce_axis(N, "k"), te.reduce_axis(N, "k")
    x_sum = te.compute((M,), lambda i: te.sum(X[i, k1], axis=k1), "x_sum")

    def centered(i, k):
        d = X[i, k] - x_sum[i] * inv
        return d * d
    sq_sum = te.compute((M,), lambda i: te.sum(centered(i, k2), axis=k2), "sq_sum")
    rstd = te.compute((M,), lambda i: 1.0 / te.sqrt(sq_sum[i] * inv + LAYER_NORM_EPS), "rstd")
    norm = te.compute((M, N), lambda i, j: (X[i, j] - x_sum[i] * inv) * rstd[i] * gamma[j]
                      + beta[j], "norm")
    return _workload(op, (("M", M), ("N", N)), [X, gamma, beta, norm], 12 * M * N + 4 * M,
                     dtype)


def softmax(M=1024, N=1024, dtype="float32") -> Workload:
    """Row softmax of X (M, N) in four blocks "row_max", "exp", "row_sum", "norm".

    FLOPs: 5MN (max, subtract, exp, add, divide per element).
    """
    op = "softmax"
    M, N = _size(op, "M", M), _size(op, "N", N)
    dtype = _dtype(op, dtype, _FLOAT_DTYPES)
    X = te.placeholder((M, N), dtype, "X")
    k1, k2 = te.reduce_axis(N, "k"), te.reduce_axis(N, "k")
    row_max = te.compute((M,), lambda i: te.max(X[i, k1], axis=k1), "row_max")
    e = te.compute((M, N), lambda i, j: te.exp(X[i, j] - row_max[i]), "exp")
    row_sum = te.compute((M,), lambda i: te.sum(e[i, k2], axis=k2), "row_sum")
    norm = te.compute((M, N), lambda i, j: e[i, j] / row_sum[i], "norm")
    return _workload(op, (("M", M), ("N", N)), [X, norm], 5 * M * N, dtype)


def row_sum(M=1024, N=1024, dtype="float32") -> Workload:
    """B[i] = sum_k A[i, k]: a row reduction (M*N FLOPs)."""
    op = "row_sum"
    M, N = _size(op, "M", M), _size(op, "N", N)
    dtype = _dtype(op, dtype)
    A = te.placeholder((M, N), dtype, "A")
    k = te.reduce_axis(N, "k")
    B = te.compute((M,), lambda i: te.sum(A[i, k], axis=k), "B")
    return _workload(op, (("M", M), ("N", N)), [A, B], M * N, dtype)


def elementwise(M=1024, N=1024, dtype="float32") -> Workload:
    """C = max(A * 2 + B, 0) in one block (3 FLOPs per element)."""
    op = "elementwise"
    M, N = _size(op, "M", M), _size(op, "N", N)
    dtype = _dtype(op, dtype)
    A = te.placeholder((M, N), dtype, "A")
    B = te.placeholder((M, N), dtype, "B")
    C = te.compute((M, N), lambda i, j: te.max(A[i, j] * 2 + B[i, j], 0), "C")
    return _workload(op, (("M", M), ("N", N)), [A, B, C], 3 * M * N, dtype)


def transpose(M=1024, N=1024, dtype="float32") -> Workload:
    """B = A^T with A (M, N); counts one FLOP per output element."""
    op = "transpose"
    M, N = _size(op, "M", M), _size(op, "N", N)
    dtype = _dtype(op, dtype)
    A = te.placeholder((M, N), dtype, "A")
    B = te.compute((N, M), lambda i, j: A[j, i], "B")
    return _workload(op, (("M", M), ("N", N)), [A, B], M * N, dtype)


# ------------------------------------------------------------------ references

def _conv_nchw(x, w, stride, padding, dilation, depthwise=False):
    """Direct convolution as R*S shifted-window products (w is (K,C,R,S) or (C,R,S))."""
    (sh, sw), (ph, pw), (dh, dw) = (_pair("ref", n, v, 0) for n, v in
                                    (("stride", stride), ("padding", padding),
                                     ("dilation", dilation)))
    R, S = w.shape[-2:]
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    P = (xp.shape[2] - dh * (R - 1) - 1) // sh + 1
    Q = (xp.shape[3] - dw * (S - 1) - 1) // sw + 1
    out = np.zeros((x.shape[0], w.shape[0], P, Q), dtype=x.dtype)
    for r in range(R):
        for s in range(S):
            win = xp[:, :, r * dh: r * dh + sh * (P - 1) + 1: sh,
                     s * dw: s * dw + sw * (Q - 1) + 1: sw]
            if depthwise:
                out += win * w[None, :, r, s, None, None]
            else:
                out += np.einsum("ncpq,kc->nkpq", win, w[:, :, r, s])
    return out


def _conv_ref(p, X, W):
    if p["layout"] == "NHWC":
        out = _conv_nchw(X.transpose(0, 3, 1, 2), W.transpose(3, 2, 0, 1),
                         p["stride"], p["padding"], p["dilation"])
        return (out.transpose(0, 2, 3, 1),)
    return (_conv_nchw(X, W, p["stride"], p["padding"], p["dilation"]),)


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(GELU_C * (x + GELU_A * x ** 3)))


def _layer_norm_ref(p, X, gamma, beta):
    mean = X.mean(axis=1, keepdims=True)
    var = ((X - mean) ** 2).mean(axis=1, keepdims=True)
    return ((X - mean) / np.sqrt(var + LAYER_NORM_EPS) * gamma + beta,)


def _softmax_ref(p, X):
    e = np.exp(X - X.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True),)


@dataclass(frozen=True)
class _Impl:
    reference: Callable
    tolerance: Callable


def _sum_tol(length_of):
    return lambda p, dtype: reduction_tolerance(length_of(p), dtype)


_IMPLS = {
    "gemm": _Impl(lambda p, A, B: ((A.T if p["transpose_a"] else A)
                                   @ (B.T if p["transpose_b"] else B),),
                  _sum_tol(lambda p: p["K"])),
    "batch_matmul": _Impl(lambda p, X, Y: (np.matmul(X, Y),), _sum_tol(lambda p: p["K"])),
    "conv2d": _Impl(_conv_ref, _sum_tol(lambda p: p["C"] * p["R"] * p["S"])),
    "depthwise_conv2d": _Impl(lambda p, X, W: (_conv_nchw(X, W, p["stride"], p["padding"],
                                                          p["dilation"], depthwise=True),),
                              _sum_tol(lambda p: p["R"] * p["S"])),
    "dense_bias_relu": _Impl(lambda p, X, W, b: (np.maximum(X @ W.T + b, 0),),
                             _sum_tol(lambda p: p["K"])),
    "conv2d_bias_relu": _Impl(
        lambda p, X, W, b: (np.maximum(_conv_nchw(X, W, p["stride"], p["padding"],
                                                  p["dilation"]) + b[:, None, None], 0),),
        _sum_tol(lambda p: p["C"] * p["R"] * p["S"])),
    "gemm_bias_gelu": _Impl(lambda p, A, B, b: (_gelu(A @ B + b),), _sum_tol(lambda p: p["K"])),
    "layer_norm": _Impl(_layer_norm_ref, _sum_tol(lambda p: p["N"])),
    "softmax": _Impl(_softmax_ref, lambda p, dtype: normalized_tolerance(dtype)),
    "row_sum": _Impl(lambda p, A: (A.sum(axis=1),), _sum_tol(lambda p: p["N"])),
    "elementwise": _Impl(lambda p, A, B: (np.maximum(A * 2 + B, 0),), _sum_tol(lambda p: 1)),
    "transpose": _Impl(lambda p, A: (A.T,), _sum_tol(lambda p: 1)),
}


# ------------------------------------------------------------------ registry

@dataclass(frozen=True)
class OpSpec:
    """A registered operator: ``fn(**params)`` builds it; ``param_names`` are the
    shape parameters a CLI ``--shape`` fills in order; ``small`` fits the interpreter."""
    name: str
    fn: Callable
    param_names: tuple
    defaults: dict = field(hash=False)
    small: dict = field(hash=False)
    description: str = ""

    @property
    def example_shape(self) -> str:
        """The default shape values as text, ``"512,512,512"``: the example in messages."""
        return ",".join(str(self.defaults[n]) for n in self.param_names)


def _spec(fn, param_names: tuple, small: dict, description: str) -> OpSpec:
    defaults = {n: p.default for n, p in inspect.signature(fn).parameters.items()}
    return OpSpec(fn.__name__, fn, param_names, defaults, small, description)


registry = {s.name: s for s in (
    _spec(gemm, ("M", "N", "K"), {"M": 8, "N": 12, "K": 10}, "matrix multiply C = A @ B"),
    _spec(batch_matmul, ("B", "M", "N", "K"), {"B": 2, "M": 6, "N": 8, "K": 5},
          "batched matrix multiply C[b] = X[b] @ Y[b]"),
    _spec(conv2d, ("N", "C", "H", "W", "K", "R", "S"),
          {"N": 1, "C": 3, "H": 7, "W": 6, "K": 4, "R": 3, "S": 3},
          "2-d convolution (NCHW or NHWC, stride, padding, dilation)"),
    _spec(depthwise_conv2d, ("N", "C", "H", "W", "R", "S"),
          {"N": 1, "C": 3, "H": 7, "W": 6, "R": 3, "S": 3}, "depthwise 2-d convolution (NCHW)"),
    _spec(dense_bias_relu, ("M", "N", "K"), {"M": 6, "N": 8, "K": 10},
          "dense layer + bias + relu, a chain of three blocks"),
    _spec(conv2d_bias_relu, ("N", "C", "H", "W", "K", "R", "S"),
          {"N": 1, "C": 3, "H": 7, "W": 6, "K": 4, "R": 3, "S": 3},
          "NCHW conv2d + per-channel bias + relu (fused epilogue)"),
    _spec(gemm_bias_gelu, ("M", "N", "K"), {"M": 6, "N": 8, "K": 10},
          "gemm + bias + GELU (tanh form), a chain of three blocks"),
    _spec(layer_norm, ("M", "N"), {"M": 5, "N": 12}, "row layer norm (eps 1e-5) in four blocks"),
    _spec(softmax, ("M", "N"), {"M": 5, "N": 12}, "row softmax in four blocks"),
    _spec(row_sum, ("M", "N"), {"M": 6, "N": 13}, "row reduction B[i] = sum_k A[i, k]"),
    _spec(elementwise, ("M", "N"), {"M": 6, "N": 10}, "C = max(A * 2 + B, 0)"),
    _spec(transpose, ("M", "N"), {"M": 6, "N": 9}, "B = A^T"),
)}


def get(name: str, *shape, **kw) -> Workload:
    """Build the registered operator ``name``; ``shape`` values fill its
    ``param_names`` in order (give all of them, or none for the defaults), ``kw``
    sets any parameter by name: ``get("conv2d", 1, 64, 56, 56, 64, 3, 3, padding=1)``."""
    spec = registry.get(name)
    if spec is None:
        raise ExplorerError(f"unknown operator {name!r}: known operators are "
                            f"{', '.join(sorted(registry))}")
    names = spec.param_names
    if shape and len(shape) != len(names):
        raise ExplorerError(f"{name} takes {len(names)} shape values ({', '.join(names)}) but "
                            f"got {len(shape)}: give all of them, e.g. --shape "
                            f"{spec.example_shape}")
    unknown = sorted(set(kw) - set(spec.defaults))
    if unknown:
        raise ExplorerError(f"{name} has no parameter {', '.join(unknown)}: its parameters are "
                            f"{', '.join(spec.defaults)}")
    twice = sorted(set(kw) & set(names[:len(shape)]))
    if twice:
        raise ExplorerError(f"{name}: {', '.join(twice)} given both in the shape and by "
                            "keyword: give each once")
    return spec.fn(**dict(zip(names, shape)), **kw)


def _resnet18_convs() -> dict:
    """Layer name -> conv2d parameters, read from the resnet18 suite: one list of the
    layers for ``explorer tune --suite resnet18``, ``explorer bench`` and this module."""
    return {t["name"]: t["params"] for t in suite_tasks("resnet18")}


# The 12 conv2d layers of ResNet-18 used by AutoTVM (batch 1, padding kernel // 2).
RESNET18_CONVS = _resnet18_convs()


def resnet18_conv(name: str, layout="NCHW", dtype="float32") -> Workload:
    """The ResNet-18 layer ``"C1"``..``"C12"`` (batch 1, padding kernel // 2) as a conv2d."""
    key = name.upper() if isinstance(name, str) else name
    if key not in RESNET18_CONVS:
        raise ExplorerError(f"unknown ResNet-18 layer {name!r}: use one of "
                            f"{', '.join(RESNET18_CONVS)}")
    return conv2d(**RESNET18_CONVS[key], layout=layout, dtype=dtype)
