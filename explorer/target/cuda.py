"""CUDA device presets: the limits the GPU search space and its verifier respect,
per architecture (the compute capability's ``sm_XY``). Figures from NVIDIA's CUDA
C++ Programming Guide (compute capability tables) and the devices' data sheets;
shared memory per block is the static 48 KiB a kernel gets without opting in
(dynamic shared memory above it needs ``cudaFuncAttributeMaxDynamicSharedMemorySize``,
up to ``max_shared_memory_per_sm`` minus 1 KiB).
"""
from __future__ import annotations

from ..errors import BuildError

# arch -> (example devices, SM count of the first, shared memory per SM, registers per SM)
PRESETS = {
    "sm_90": ("H100 / H200 (SXM)", 132, 228 * 1024, 65536),
    "sm_89": ("L40S / RTX 4090", 142, 100 * 1024, 65536),
    "sm_86": ("A10 / RTX 3090", 72, 100 * 1024, 65536),
    "sm_80": ("A100", 108, 164 * 1024, 65536),
}
DEFAULT_ARCH = "sm_90"


def preset_fields(arch: str) -> dict:
    """The Target fields of architecture ``arch``."""
    if arch not in PRESETS:
        raise BuildError(f"unknown CUDA architecture {arch!r}: presets exist for "
                         f"{', '.join(sorted(PRESETS))} (e.g. cuda -arch=sm_80)")
    _, sms, smem_sm, regs_sm = PRESETS[arch]
    return {"arch": arch, "sm_count": sms, "max_threads_per_block": 1024,
            "max_shared_memory_per_block": 48 * 1024, "max_shared_memory_per_sm": smem_sm,
            "max_registers_per_thread": 255, "max_registers_per_sm": regs_sm, "warp_size": 32}


def fill(target, given=frozenset()) -> None:
    """Complete a cuda Target from its architecture's preset; fields named in ``given``
    were set by the user and stay."""
    for name, value in preset_fields(target.arch or DEFAULT_ARCH).items():
        if name not in given or name == "arch" and not target.arch:
            object.__setattr__(target, name, value)
