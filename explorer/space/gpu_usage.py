"""What each kernel of a CUDA schedule uses (shared memory per block, registers per thread)
against the target's limits: ptxas's report where a CUDA compiler is here, else the
verifier's estimate, labelled as such.

    usage = gpu_usage(sch, Target("cuda"))
    for k in usage.kernels:
        print(k.kernel, k.shared_bytes, k.shared_limit, k.registers, k.register_limit,
              k.source)                     # "ptxas" or "estimate"
    usage.note                              # why estimates, when they are

Shared bytes come from the generated module (static declarations plus dynamic shared
memory; ptxas's ``smem`` when it is larger); registers from ptxas, or estimated as the
kernel's local words plus ``REGISTER_OVERHEAD`` (``postprocs/verify_gpu.py``, which
says how that estimate compares with ptxas). Limits: ``shared_limit`` and the SM's
register file shared by the block's threads (``register_limit``). ``problem`` is the
clear message of a kernel that cannot run (``check_resources``), or None.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import BuildError
from ..target import as_target
from .postprocs.verify_gpu import REGISTER_OVERHEAD, kernel_memory, register_estimate, \
    register_limit

PTXAS, ESTIMATE = "ptxas", "estimate"


@dataclass(frozen=True)
class KernelUsage:
    """One kernel (launch) of the module and what it uses against the limits."""
    kernel: str
    grid: tuple
    block: tuple
    shared_bytes: int           # per block: static + dynamic
    shared_limit: int           # per block, for this launch (dynamic opts in to more)
    registers: int              # per thread
    register_limit: int         # per thread, for a block of this many threads
    spill_bytes: int | None     # stores + loads per thread (None: not compiled)
    local_bytes: int            # per thread: local arrays (ptxas: the stack frame)
    source: str                 # PTXAS or ESTIMATE
    problem: str | None = None  # why it cannot run on the target, or None

    @property
    def threads(self) -> int:
        x, y, z = self.block
        return x * y * z

    @property
    def fits(self) -> bool:
        return self.problem is None and self.shared_bytes <= self.shared_limit \
            and self.registers <= self.register_limit


@dataclass(frozen=True)
class GpuUsage:
    """Usage of every kernel of a schedule on ``target``; ``note`` says where the figures
    come from when they are not all ptxas's (no compiler, a compile that failed)."""
    target: object
    kernels: tuple
    note: str = ""

    @property
    def estimated(self) -> bool:
        return any(k.source == ESTIMATE for k in self.kernels)


def compiler_available() -> bool:
    """Is there nvcc or NVRTC to compile CUDA C here (the checks say which is missing)?"""
    from ..backends.cuda import nvcc, nvrtc
    return nvcc.find_nvcc() is not None or nvrtc.find_nvrtc() is not None


def gpu_usage(obj, target="cuda", compile: bool = True) -> GpuUsage:
    """Usage of each kernel of ``obj`` (a Schedule, Workload or PrimFunc, or a kernel from
    ``build(..., "cuda")``) on ``target`` (a cuda Target). ``compile``: ask ptxas (nvcc or
    NVRTC) where one is here; otherwise, or when it is missing, estimate."""
    from ..backends import build
    from ..backends.cuda.resources import check_resources, shared_limit
    target = as_target(target)
    if target.kind != "cuda":
        raise BuildError(f"gpu_usage: target {target} is not a cuda target; GPU limits "
                         "apply to Target('cuda') (e.g. cuda -arch=sm_80)")
    kernel = obj if hasattr(obj, "module") and hasattr(obj, "lowered") else build(obj, target)
    module = kernel.module
    resources, note, failure = None, "", None
    if not compile:
        note = ("not compiled: registers are estimates (local array words + "
                f"{REGISTER_OVERHEAD})")
    elif not compiler_available():
        note = ("nvcc (and NVRTC) not found: registers are estimates (local array words + "
                f"{REGISTER_OVERHEAD}); install the CUDA toolkit for ptxas's figures")
    else:
        from ..backends.cuda.nvcc import compile_cubin
        try:
            resources = compile_cubin(module.source, target.arch or "sm_90").resources
        except BuildError as e:
            failure = str(e)
            note = f"the compile failed, figures are estimates: {failure.splitlines()[0]}"
    estimates = kernel_memory(kernel.lowered)
    out = []
    for n, la in enumerate(module.launches):
        est = estimates[n] if n < len(estimates) else {"local_words": 0}
        res = (resources or {}).get(la.name)
        threads = la.threads_per_block
        static = max(la.static_shared_bytes, res.static_shared_bytes if res else 0)
        problem = failure
        if res is not None:
            try:
                check_resources(_one(module, la), {la.name: res}, target)
            except BuildError as e:
                problem = str(e)
        out.append(KernelUsage(
            la.name, tuple(la.grid), tuple(la.block), static + la.dynamic_shared_bytes,
            shared_limit(target, la.dynamic_shared_bytes),
            res.registers if res else register_estimate(est["local_words"]),
            register_limit(target, threads), res.spills if res else None,
            res.local_bytes if res else 4 * est["local_words"],
            PTXAS if res else ESTIMATE, problem))
    return GpuUsage(target, tuple(out), note)


def _one(module, launch):
    """``module`` with only ``launch``: to check one kernel at a time."""
    from dataclasses import replace
    return replace(module, launches=(launch,))
