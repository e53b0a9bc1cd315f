"""numpy and PyTorch versions of the operators ``baselines`` has no dedicated code for:
the fused epilogues (conv2d + bias + relu, gemm + bias + GELU) and the memory-bound
set (softmax, layer norm, row sum, elementwise, transpose).

Each function returns a zero-argument callable that computes the workload into its
output arrays in the workload's own dtype (float32 stays float32, unlike the
float64 references the results are checked against), or None. numpy runs the
plain sequence of calls with ``out=`` buffers allocated once; PyTorch runs its
usual functions (``F.conv2d`` with bias then ``relu``, ``addmm`` then
``gelu(approximate="tanh")``, ``F.layer_norm``, ``softmax``), unfused.
"""
from __future__ import annotations

import numpy as np

from ..ops import GELU_A, GELU_C, LAYER_NORM_EPS


def _gelu_into(x, tmp) -> None:
    """x <- 0.5 x (1 + tanh(c (x + a x^3))) in place, ``tmp`` a scratch array like x."""
    np.multiply(x, x, out=tmp)
    np.multiply(tmp, x, out=tmp)
    np.multiply(tmp, GELU_A, out=tmp)
    np.add(tmp, x, out=tmp)
    np.multiply(tmp, GELU_C, out=tmp)
    np.tanh(tmp, out=tmp)
    np.add(tmp, 1, out=tmp)
    np.multiply(tmp, 0.5, out=tmp)
    np.multiply(x, tmp, out=x)


def numpy_impl(op: str, p: dict, args: list, conv=None):
    """``conv(p, X, W, out)``: the baselines' im2col convolution (for conv2d_bias_relu)."""
    if op == "conv2d_bias_relu":
        X, W, b, out = args
        run_conv = conv(dict(p, layout="NCHW"), X, W, out)

        def run():
            run_conv()
            np.add(out, b[None, :, None, None], out=out)
            np.maximum(out, 0, out=out)
        return run
    if op == "gemm_bias_gelu":
        A, B, b, out = args
        tmp = np.empty_like(out)

        def run():
            np.matmul(A, B, out=out)
            np.add(out, b, out=out)
            _gelu_into(out, tmp)
        return run
    if op == "softmax":
        X, out = args
        m = np.empty((X.shape[0], 1), X.dtype)
        s = np.empty_like(m)

        def run():
            np.max(X, axis=1, keepdims=True, out=m)
            np.subtract(X, m, out=out)
            np.exp(out, out=out)
            np.sum(out, axis=1, keepdims=True, out=s)
            np.divide(out, s, out=out)
        return run
    if op == "layer_norm":
        X, g, b, out = args
        mean = np.empty((X.shape[0], 1), X.dtype)
        var = np.empty_like(mean)
        tmp = np.empty_like(out)

        def run():
            np.mean(X, axis=1, keepdims=True, out=mean)
            np.subtract(X, mean, out=out)
            np.multiply(out, out, out=tmp)
            np.mean(tmp, axis=1, keepdims=True, out=var)
            np.add(var, LAYER_NORM_EPS, out=var)
            np.sqrt(var, out=var)
            np.divide(out, var, out=out)
            np.multiply(out, g, out=out)
            np.add(out, b, out=out)
        return run
    if op == "row_sum":
        A, out = args
        return lambda: np.sum(A, axis=1, out=out)
    if op == "elementwise":
        A, B, out = args

        def run():
            np.multiply(A, 2, out=out)
            np.add(out, B, out=out)
            np.maximum(out, 0, out=out)
        return run
    if op == "transpose":
        A, out = args
        return lambda: np.copyto(out, A.T)
    return None


def torch_impl(op: str, p: dict, t: list):
    """``t``: the arguments as torch tensors (sharing the arrays' memory)."""
    import torch
    import torch.nn.functional as F
    if op == "conv2d_bias_relu":
        X, W, b, out = t
        pair = (lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v, v))
        kw = dict(stride=pair(p["stride"]), padding=pair(p["padding"]),
                  dilation=pair(p["dilation"]))
        return lambda: out.copy_(F.relu(F.conv2d(X, W, b, **kw)))
    if op == "depthwise_conv2d":      # W is [C, R, S]: one 3x3 filter per channel
        X, W, out = t
        pair = (lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v, v))
        kw = dict(stride=pair(p["stride"]), padding=pair(p["padding"]),
                  dilation=pair(p["dilation"]), groups=W.shape[0])
        Wg = W.reshape(W.shape[0], 1, *W.shape[1:])
        return lambda: out.copy_(F.conv2d(X, Wg, **kw))
    if op == "gemm_bias_gelu":
        A, B, b, out = t
        return lambda: out.copy_(F.gelu(torch.addmm(b, A, B), approximate="tanh"))
    if op == "softmax":
        X, out = t
        return lambda: out.copy_(torch.softmax(X, dim=1))
    if op == "layer_norm":
        X, g, b, out = t
        return lambda: out.copy_(F.layer_norm(X, (X.shape[1],), g, b, LAYER_NORM_EPS))
    if op == "row_sum":
        A, out = t
        return lambda: torch.sum(A, dim=1, out=out)
    if op == "elementwise":
        A, B, out = t
        return lambda: torch.clamp_min(torch.add(B, A, alpha=2), 0, out=out)
    if op == "transpose":
        A, out = t
        return lambda: out.copy_(A.T)
    return None
