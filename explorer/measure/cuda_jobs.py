"""What a measurement worker does for a ``cuda`` candidate: compile, check limits, run.

Called by ``jobs.py`` inside the worker process. Building a cuda candidate:

1. code generation (``build(sch, target, emulate=...)``) gives the CUDA C;
2. nvcc (or NVRTC) compiles it to a cubin for the target's architecture and ptxas
   reports each kernel's registers, spills and shared memory; ``check_resources``
   rejects a launch over the Target's limits *before anything runs* (a failed
   "build" candidate whose error names the kernel and the limit). Without nvcc or
   NVRTC an emulated build goes on without resources (the parent says so once,
   see ``compiler_note``); a GPU build cannot (the device needs a cubin);
3. emulated: the same source compiled for the host (``emulate.load``).

Running: on a GPU through ``runtime.measure_cuda`` (this process's own CUDA
context; allocate, copy, launch, CUDA-event timing with warm-up and repeats, the
output checked against the reference before a time counts; a fault or hang comes
back with ``replace_worker`` and the runner replaces this process). Emulated: one
run on the host emulator, checked against the reference; its host seconds are a
marker that it ran, never a GPU time (``emulated: True`` in the result).
"""
from __future__ import annotations

import time

from ..errors import ExplorerError

COMPILER_MISSING = ("nvcc (and NVRTC) not found: the CUDA candidates are emulated without "
                    "compile checks (no registers, spills or shared memory from ptxas, no "
                    "limits checked); install the CUDA toolkit or set CUDA_HOME to check them")


def compiler_available() -> bool:
    """True when nvcc or NVRTC can compile CUDA C here."""
    from ..backends.cuda.nvcc import find_nvcc
    from ..backends.cuda.nvrtc import find_nvrtc
    return find_nvcc() is not None or find_nvrtc() is not None


def compiler_note() -> str | None:
    """The one line to say when CUDA candidates cannot be compile-checked here, or None."""
    return None if compiler_available() else COMPILER_MISSING


def resources_json(compiled) -> dict:
    """Kernel name -> what ptxas reported, as plain JSON."""
    return {name: {"registers": r.registers, "spill_stores": r.spill_stores,
                   "spill_loads": r.spill_loads, "shared_bytes": r.static_shared_bytes,
                   "local_bytes": r.local_bytes}
            for name, r in compiled.resources.items()}


class CudaArtifact:
    """What a cuda build leaves in the worker: the kernel, its cubin (None when no
    compiler is here) and resources, and the loaded emulator module when emulated."""

    def __init__(self, kernel, target, compiled, emulated_module):
        self.kernel, self.target = kernel, target
        self.compiled, self.emulated_module = compiled, emulated_module
        self.resources = resources_json(compiled) if compiled is not None else None

    @property
    def emulated(self) -> bool:
        return self.emulated_module is not None


def build_cuda(kernel, target, emulate: bool, fail, fresh: bool = False) -> CudaArtifact:
    """Compile and check ``kernel`` (a CudaKernel); ``fail(kind, message)`` raises the
    worker's failure for an expected problem; ``fresh`` bypasses the cubin cache."""
    from ..backends.cuda.nvcc import compile_cubin
    from ..backends.cuda.resources import check_resources
    compiled = None
    if compiler_available() or not emulate:
        try:
            compiled = compile_cubin(kernel.source, target.arch or "sm_90", cache=not fresh)
        except ExplorerError as e:
            fail("build", f"nvcc: {e}")
        try:
            check_resources(kernel.module, compiled, target)
        except ExplorerError as e:
            fail("build", f"over the device's limits, rejected before it ran: {e}")
    em = None
    if emulate:
        from ..backends.cuda import emulate as emu
        try:
            em = emu.load(kernel.module)
        except ExplorerError as e:
            fail("build", f"the host emulator could not compile the CUDA C: {e}")
    return CudaArtifact(kernel, target, compiled, em)


def run_cuda(art: CudaArtifact, ref, cfg, fail) -> dict:
    """The run job's result for a cuda artifact: emulated or on the GPU (see the module
    docstring). ``ref`` is the workload's ``Reference``."""
    args = ref.fresh_args()
    if art.emulated:
        return _run_emulated(art, ref, args, cfg, fail)
    from ..backends.cuda import runtime

    def check(module, arrays) -> float:
        return ref.compare(arrays, cfg.rtol, cfg.atol) if cfg.check else 0.0
    out = runtime.measure_cuda(art.kernel.module, art.compiled, args, check,
                               repeat=max(1, cfg.repeats), warmup=cfg.warmup,
                               min_repeat_secs=cfg.min_repeat_secs,
                               timeout=cfg.run_timeout)
    out["resources"] = art.resources
    return out


def _run_emulated(art: CudaArtifact, ref, args, cfg, fail) -> dict:
    t0 = time.perf_counter()
    try:
        art.emulated_module.run(args)
    except ExplorerError as e:   # KernelFault, RaceError (a barrier not all reach)...
        fail("run", f"the emulated kernel failed: {e}")
    secs = max(time.perf_counter() - t0, 1e-9)
    err = None
    if cfg.check:
        try:
            err = ref.compare(args, cfg.rtol, cfg.atol)
        except ExplorerError as e:
            fail("wrong", f"{e} (emulated run)")
    return {"run_secs": [secs], "number": 1, "first_run_secs": secs, "max_abs_error": err,
            "emulated": True, "resources": art.resources}
