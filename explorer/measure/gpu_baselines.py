"""GPU library baselines (cuBLAS and cuDNN through PyTorch, cuBLAS through CuPy), timed
like our CUDA kernels: on the device, with CUDA events, after a checked first run.

Job handlers for a worker process of their own (``gpu_baseline_pool(impl)``); each
library keeps its CUDA context in that process. fp32 with TF32 off (PyTorch's
``allow_tf32`` flags cleared; CuPy uses TF32 only when ``CUPY_TF32=1``, which the
pool removes), so the libraries compute what our kernels compute. Implementations:

- torch: ``torch.matmul`` (gemm, with the transposes as views), ``torch.bmm``,
  ``torch.nn.functional.conv2d`` (NCHW), each into a preallocated output;
- cupy: ``cupy.matmul`` for gemm and batch_matmul.

The output of every baseline is copied back and checked against the workload's
numpy reference before a time counts.
"""
from __future__ import annotations

import importlib.util
import os

import numpy as np

from ..errors import MeasureError
from .check import ReferenceCache
from .config import RunConfig

GPU_IMPLS = ("torch", "cupy")
_refs = ReferenceCache()


def available(impl: str) -> str | None:
    """None when ``impl`` can run here, else what is missing (no GPU is looked for)."""
    if impl not in GPU_IMPLS:
        return f"unknown GPU baseline {impl!r}: use one of {', '.join(GPU_IMPLS)}"
    if importlib.util.find_spec(impl) is None:
        return f"{impl} is not installed: no {impl} rows"
    return None


class _Torch:
    def __init__(self):
        import torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.torch = torch

    def to_device(self, a):
        return self.torch.from_numpy(np.ascontiguousarray(a)).cuda()

    def to_host(self, t):
        return t.cpu().numpy()

    def impl(self, op: str, p: dict, t: list):
        from .baselines import torch_tensor_impl
        return torch_tensor_impl(op, p, t)

    def event(self):
        return self.torch.cuda.Event(enable_timing=True)

    def elapsed_ms(self, start, end) -> float:
        end.synchronize()
        return start.elapsed_time(end)


class _Cupy:
    def __init__(self):
        import cupy
        self.cupy = cupy

    def to_device(self, a):
        return self.cupy.asarray(np.ascontiguousarray(a))

    def to_host(self, t):
        return self.cupy.asnumpy(t)

    def impl(self, op: str, p: dict, t: list):
        cp = self.cupy
        if op == "gemm":
            A, B, C = t
            a, b = (A.T if p["transpose_a"] else A), (B.T if p["transpose_b"] else B)
            return lambda: cp.matmul(a, b, out=C)
        if op == "batch_matmul":
            X, Y, C = t
            return lambda: cp.matmul(X, Y, out=C)
        return None

    def event(self):
        return self.cupy.cuda.Event()

    def elapsed_ms(self, start, end) -> float:
        end.synchronize()
        return self.cupy.cuda.get_elapsed_time(start, end)


def _timed(lib, call, number: int) -> float:
    start, end = lib.event(), lib.event()
    start.record()
    for _ in range(number):
        call()
    end.record()
    return lib.elapsed_ms(start, end) / 1e3 / number


def gpu_baseline_job(payload: dict, emit) -> dict:
    """Check and time one GPU library on one workload: the runner's result fields."""
    from .. import ops
    impl, cfg = payload["impl"], RunConfig.from_json(payload["config"])
    missing = available(impl)
    if missing:
        return {"error": missing, "error_kind": "run"}
    wl = ops.get(payload["op"], dtype=payload["dtype"], **payload["params"])
    ref = _refs.get(wl, cfg.seed)
    lib = _Torch() if impl == "torch" else _Cupy()
    args = ref.fresh_args()
    dev = [lib.to_device(a) for a in args]
    call = lib.impl(wl.name, dict(wl.params), dev)
    if call is None:
        return {"error": f"no {impl} implementation of {wl.name} with these parameters",
                "error_kind": "run", "flops": wl.flops}
    emit("running")
    first = _timed(lib, call, 1)
    n_in = len(wl.inputs)
    outs = [lib.to_host(t) for t in dev[n_in:]]
    try:
        err = ref.compare(args[:n_in] + outs, cfg.rtol, cfg.atol) if cfg.check else None
    except MeasureError as e:
        return {"error": f"{impl}: {e}", "error_kind": "wrong", "flops": wl.flops}
    for _ in range(cfg.warmup):
        call()
    number = max(cfg.number, int(np.ceil(cfg.min_repeat_secs / max(first, 1e-7))))
    samples = [_timed(lib, call, number) for _ in range(max(1, cfg.repeats))]
    return {"run_secs": samples, "number": number, "first_run_secs": first,
            "max_abs_error": err, "flops": wl.flops}


def gpu_info_job(payload: dict, emit) -> dict:
    """The library's version and the device it runs on."""
    impl = payload["impl"]
    if impl == "torch":
        import torch
        return {"impl": impl, "torch": torch.__version__, "cuda": torch.version.cuda,
                "device": torch.cuda.get_device_name(0), "tf32": False}
    import cupy
    return {"impl": impl, "cupy": cupy.__version__,
            "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), "tf32": False}


def gpu_baseline_pool(impl: str):
    """A one-worker pool for GPU library ``impl`` (its own process and CUDA context)."""
    from .pool import WorkerPool
    missing = available(impl)
    if missing:
        raise MeasureError(missing)
    return WorkerPool(1, "explorer.measure.gpu_baselines", {"OPENBLAS_NUM_THREADS": 1},
                      ("CUPY_TF32",))


def gpu_baseline_request(pool, impl: str, wl, cfg: RunConfig):
    """Check and time ``impl`` on ``wl`` once in ``pool``: a MeasureResult (failures too)."""
    from .baselines import library_call
    payload = {"impl": impl, "op": wl.name, "params": {k: v for k, v in wl.params},
               "dtype": wl.dtype, "config": cfg.as_json()}
    return library_call(pool, "gpu_baseline", impl, payload, cfg)


HANDLERS = {"gpu_baseline": gpu_baseline_job, "gpu_info": gpu_info_job,
            "ping": lambda p, e: {"pid": os.getpid()}}

__all__ = ["GPU_IMPLS", "available", "gpu_baseline_job", "gpu_baseline_pool",
           "gpu_baseline_request", "HANDLERS"]
