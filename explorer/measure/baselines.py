"""Library baselines (numpy, PyTorch) for the same workloads, timed like our kernels.

Job handlers for a worker process of their own (``WorkerPool(handlers=
"explorer.measure.baselines")``): each library runs in its own process so that
its BLAS/OpenMP threads, which spin after each call, never run beside a kernel
being timed. The output of every baseline is checked against the workload's
reference too. Implementations:

- numpy: ``matmul`` (gemm, batch_matmul, dense layers) and conv2d as im2col +
  one sgemm (padding and the im2col copy are part of the time);
- torch: ``torch.matmul``/``bmm`` with ``out=``, ``torch.nn.functional.conv2d``,
  ``linear`` + ``relu``; ``torch.set_num_threads(threads)``;
- on request (``reference_fallback``, the notebook's Run button), numpy times an
  operator with no dedicated implementation by its own numpy reference.
"""
from __future__ import annotations

import importlib.util
import os

import numpy as np

from ..errors import MeasureError
from . import library_ops
from .check import ReferenceCache
from .config import RunConfig
from .timing import time_repeats, timed

IMPLS = ("numpy", "torch")
ENV_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
            "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
_refs = ReferenceCache()
_prepared: dict = {}


# ------------------------------------------------------------------ numpy

def _conv_windows(xp, p, P, Q):
    """(N, C, P, Q, R, S) view of the padded NCHW input under each output position."""
    R, S = p["R"], p["S"]
    (sh, sw), (dh, dw) = (_pair(p["stride"]), _pair(p["dilation"]))
    span = (dh * (R - 1) + 1, dw * (S - 1) + 1)
    win = np.lib.stride_tricks.sliding_window_view(xp, span, axis=(2, 3))
    return win[:, :, ::sh, ::sw, ::dh, ::dw][:, :, :P, :Q]


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _numpy_conv(p, X, W, out):
    N, C, K, R, S = p["N"], p["C"], p["K"], p["R"], p["S"]
    nhwc = p["layout"] == "NHWC"
    x = X.transpose(0, 3, 1, 2) if nhwc else X
    ph, pw = _pair(p["padding"])
    H, Wd = x.shape[2], x.shape[3]
    xp = np.zeros((N, C, H + 2 * ph, Wd + 2 * pw), dtype=X.dtype)
    P, Q = (out.shape[1], out.shape[2]) if nhwc else (out.shape[2], out.shape[3])
    if nhwc:
        cols = np.empty((N, P, Q, R, S, C), dtype=X.dtype)
        wm = W.reshape(R * S * C, K)
    else:
        cols = np.empty((N, C, R, S, P, Q), dtype=X.dtype)
        wm = W.reshape(K, C * R * S)

    def run():
        xp[:, :, ph:ph + H, pw:pw + Wd] = x
        win = _conv_windows(xp, p, P, Q)
        if nhwc:
            np.copyto(cols, win.transpose(0, 2, 3, 4, 5, 1))
            np.matmul(cols.reshape(N * P * Q, R * S * C), wm, out=out.reshape(N * P * Q, K))
        else:
            np.copyto(cols, win.transpose(0, 1, 4, 5, 2, 3))
            np.matmul(wm, cols.reshape(N, C * R * S, P * Q), out=out.reshape(N, K, P * Q))
    return run


def numpy_impl(op: str, p: dict, args: list):
    """A zero-argument callable computing workload ``op`` with numpy into ``args``' outputs."""
    if op == "gemm":
        A, B, C = args
        a, b = (A.T if p["transpose_a"] else A), (B.T if p["transpose_b"] else B)
        return lambda: np.matmul(a, b, out=C)
    if op == "batch_matmul":
        X, Y, C = args
        return lambda: np.matmul(X, Y, out=C)
    if op == "conv2d":
        return _numpy_conv(p, *args)
    if op == "dense_bias_relu":
        X, W, b, out = args

        def run():
            np.matmul(X, W.T, out=out)
            np.add(out, b, out=out)
            np.maximum(out, 0, out=out)
        return run
    return library_ops.numpy_impl(op, p, args, _numpy_conv)


# ------------------------------------------------------------------ torch

def torch_impl(op: str, p: dict, args: list):
    """A zero-argument callable computing workload ``op`` with PyTorch; None if unsupported."""
    import torch
    return torch_tensor_impl(op, p, [torch.from_numpy(a) for a in args])


def torch_tensor_impl(op: str, p: dict, t: list):
    """``torch_impl`` on tensors already where they compute (the CPU, or a GPU)."""
    import torch
    import torch.nn.functional as F
    if op == "gemm":
        A, B, C = t
        a, b = (A.T if p["transpose_a"] else A), (B.T if p["transpose_b"] else B)
        return lambda: torch.matmul(a, b, out=C)
    if op == "batch_matmul":
        X, Y, C = t
        return lambda: torch.bmm(X, Y, out=C)
    if op == "conv2d" and p["layout"] == "NCHW":
        X, W, out = t
        kw = dict(stride=_pair(p["stride"]), padding=_pair(p["padding"]),
                  dilation=_pair(p["dilation"]))
        return lambda: out.copy_(F.conv2d(X, W, **kw))
    if op == "dense_bias_relu":
        X, W, b, out = t
        return lambda: out.copy_(F.relu(F.linear(X, W, b)))
    return library_ops.torch_impl(op, p, t)


# ------------------------------------------------------------------ jobs

def reference_impl(wl, args: list):
    """A zero-argument callable computing ``wl`` with its own numpy reference (the
    function its results are checked against) into ``args``' outputs."""
    n_in = len(wl.inputs)
    inputs, outputs = args[:n_in], args[n_in:]

    def run():
        for out, value in zip(outputs, wl.reference(*inputs)):
            np.copyto(out, value)
    return run


def _prepare(impl: str, op: str, params: dict, dtype: str, seed: int,
             reference_fallback: bool = False):
    from .. import ops
    key = (impl, op, tuple(sorted((k, str(v)) for k, v in params.items())), dtype, seed,
           reference_fallback)
    if key not in _prepared:
        wl = ops.get(op, dtype=dtype, **params)
        ref = _refs.get(wl, seed)
        args = ref.fresh_args()
        make = numpy_impl if impl == "numpy" else torch_impl
        call = make(op, dict(wl.params), args)
        if call is None and impl == "numpy" and reference_fallback:
            call = reference_impl(wl, args)
        _prepared.clear()  # one case at a time: keep memory flat
        _prepared[key] = (wl, ref, args, call)
    return _prepared[key]


def set_threads(impl: str, threads: int) -> None:
    if impl == "torch":
        import torch
        torch.set_num_threads(threads)


def baseline_job(payload: dict, emit) -> dict:
    """Check and time one library on one workload: the runner's result fields."""
    impl, cfg = payload["impl"], RunConfig.from_json(payload["config"])
    set_threads(impl, int(payload["threads"]))
    wl, ref, args, call = _prepare(impl, payload["op"], payload["params"], payload["dtype"],
                                   cfg.seed, bool(payload.get("reference_fallback")))
    if call is None:
        return {"error": f"no {impl} implementation of {payload['op']} with these parameters",
                "error_kind": "run", "flops": wl.flops}
    emit("running")
    try:
        first = timed(call)
        err = ref.compare(args, cfg.rtol, cfg.atol) if cfg.check else None
    except Exception as e:  # a wrong baseline is reported, not fatal
        return {"error": f"{impl}: {e}", "error_kind": "wrong", "flops": wl.flops}
    samples, number = time_repeats(call, first, cfg, cfg.repeats_budget)
    return {"run_secs": samples, "number": number, "first_run_secs": first,
            "max_abs_error": err, "flops": wl.flops}


def _blas_info() -> dict:
    try:
        import threadpoolctl
        return {"source": "threadpoolctl", "pools": threadpoolctl.threadpool_info()}
    except ImportError:
        pass
    try:
        cfg = np.show_config(mode="dicts")
        return {"source": "numpy.show_config", "blas": cfg["Build Dependencies"]["blas"]}
    except Exception as e:  # older numpy: show_config has no dict mode
        return {"source": "none", "error": repr(e)}


def info_job(payload: dict, emit) -> dict:
    """What this process computes with: versions, BLAS kernel and threads, environment."""
    impl = payload["impl"]
    out = {"impl": impl, "pid": os.getpid(), "numpy": np.__version__,
           "env": {k: os.environ.get(k) for k in ENV_VARS}}
    if impl == "numpy":
        np.matmul(np.ones((64, 64), np.float32), np.ones((64, 64), np.float32))  # load BLAS
        out["blas"] = _blas_info()
    else:
        import torch
        set_threads(impl, int(payload["threads"]))
        out.update(torch=torch.__version__, threads=torch.get_num_threads(),
                   parallel_info=torch.__config__.parallel_info())
    return out


# ------------------------------------------------------------------ caller side

UNSET_FOR_NUMPY = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def baseline_pool(impl: str, threads: int):
    """A one-worker pool for library ``impl`` using ``threads`` threads. For numpy the
    OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE overrides are removed (in that process only):
    they select slower kernels than OpenBLAS picks for this CPU by itself."""
    from .pool import WorkerPool
    if impl not in IMPLS:
        raise MeasureError(f"unknown baseline {impl!r}: use one of {', '.join(IMPLS)}")
    env = {"OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads,
           "MKL_NUM_THREADS": threads}
    if impl == "torch":
        env["OPENBLAS_NUM_THREADS"] = 1  # numpy's BLAS only computes the reference there
    # the libraries run with their own OpenMP wait, not the one our runtime chose
    from ..backends.llvm.runtime import OWN_ENV
    return WorkerPool(1, "explorer.measure.baselines", env,
                      tuple(OWN_ENV) + (UNSET_FOR_NUMPY if impl == "numpy" else ()))


def baseline_request(pool, impl: str, wl, cfg: RunConfig, threads: int, *,
                     reference_fallback: bool = False):
    """Check and time ``impl`` on ``wl`` once in ``pool``: a MeasureResult (failures too).
    With ``reference_fallback``, numpy times the operator's own numpy reference where it
    has no dedicated implementation (softmax, reductions...)."""
    payload = {"impl": impl, "op": wl.name, "params": {k: v for k, v in wl.params},
               "dtype": wl.dtype, "config": cfg.as_json(), "threads": threads,
               "reference_fallback": reference_fallback}
    return library_call(pool, "baseline", impl, payload, cfg)


def library_call(pool, job: str, impl: str, payload: dict, cfg: RunConfig):
    """Run library job ``job`` on the pool's one worker: its MeasureResult, or a failed one
    (the worker restarted) when it timed out or died."""
    from .pool import WorkerDied, WorkerTimeout
    from .result import MeasureResult
    from .runner import result_from_message
    w = pool[0]
    try:
        msg = w.call(job, payload,
                     lambda ph, m: cfg.build_timeout if ph is None else cfg.run_timeout)
    except (WorkerTimeout, WorkerDied) as e:
        w.restart()
        kind = "timeout" if isinstance(e, WorkerTimeout) else "crash"
        return MeasureResult.failed(None, kind, f"the {impl} worker failed: {e or kind}")
    return result_from_message(None, msg)


def measure_baseline(impl: str, wl, threads: int | None = None,
                     config: RunConfig | None = None) -> float:
    """Median seconds of library ``impl`` ("numpy" or "torch") on workload ``wl``,
    measured in a process of its own; raises MeasureError when it cannot."""
    from ..target import Target
    if impl == "torch" and importlib.util.find_spec("torch") is None:
        raise MeasureError("PyTorch is not installed: pip install torch==2.13.0 (CPU build)")
    threads = threads or Target("llvm").num_cores or os.cpu_count() or 1
    cfg = config or RunConfig(repeats=5, number=1, min_repeat_secs=0.05, cutoff_factor=None,
                              run_timeout=60.0, build_timeout=120.0)
    with baseline_pool(impl, threads) as pool:
        r = baseline_request(pool, impl, wl, cfg, threads)
    if not r.ok:
        raise MeasureError(f"{impl} baseline of {wl.key} failed ({r.error_kind}): {r.error}")
    return r.median_secs


HANDLERS = {"baseline": baseline_job, "info": info_job, "ping": lambda p, e: {"pid": os.getpid()}}

__all__ = ["numpy_impl", "torch_impl", "torch_tensor_impl", "reference_impl", "baseline_job", "info_job", "HANDLERS", "baseline_pool",
           "baseline_request", "measure_baseline"]
