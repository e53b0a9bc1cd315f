"""CUDA device presets: the limits the GPU search space and its verifier respect,
per architecture (the compute capability's ``sm_XY``). Figures from NVIDIA's CUDA
C++ Programming Guide (compute capability tables) and the devices' data sheets;
shared memory per block is the static 48 KiB a kernel gets without opting in
(dynamic shared memory above it needs ``cudaFuncAttributeMaxDynamicSharedMemorySize``,
up to ``max_shared_memory_per_sm`` minus 1 KiB).

Where pycuda, a driver and a device are present, ``Target("cuda")`` takes the
device's own values instead (``live_fields``: SM count, threads and shared memory
per block, shared memory and registers per SM, warp size, architecture), as does
``cuda -arch=sm_XY`` when that is the device's architecture; another ``-arch``
describes another device and takes its preset.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import subprocess
import sys

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


# run in a child process: a process that initialized CUDA cannot hand it to the
# measurement workers it forks, and a broken driver must not take this one down
_QUERY = r"""
import json, sys
import pycuda.driver as drv
drv.init()
d = drv.Device(int(sys.argv[1]))
A, g = drv.device_attribute, d.get_attribute
major, minor = d.compute_capability()
print(json.dumps({"arch": f"sm_{major}{minor}", "sm_count": g(A.MULTIPROCESSOR_COUNT),
                  "max_threads_per_block": g(A.MAX_THREADS_PER_BLOCK),
                  "max_shared_memory_per_block": g(A.MAX_SHARED_MEMORY_PER_BLOCK),
                  "max_shared_memory_per_sm": g(A.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
                  "max_registers_per_sm": g(A.MAX_REGISTERS_PER_MULTIPROCESSOR),
                  "warp_size": g(A.WARP_SIZE)}))
"""
LIVE_FIELDS = ("sm_count", "max_threads_per_block", "max_shared_memory_per_block",
               "max_shared_memory_per_sm", "max_registers_per_sm", "warp_size")


@functools.lru_cache(maxsize=None)
def live_fields(index: int = 0):
    """The Target fields of CUDA device ``index`` as its driver reports them, or None
    where pycuda, a driver or the device is missing (then the presets apply)."""
    if importlib.util.find_spec("pycuda") is None:
        return None
    try:
        out = subprocess.run([sys.executable, "-c", _QUERY, str(index)], capture_output=True,
                             text=True, timeout=120)
        data = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None
    if not isinstance(data, dict) or not str(data.get("arch", "")).startswith("sm_") or not all(
            isinstance(data.get(k), int) and data[k] > 0 for k in LIVE_FIELDS):
        return None
    return {"arch": data["arch"], "max_registers_per_thread": 255,
            **{k: data[k] for k in LIVE_FIELDS}}


def fill(target, given=frozenset()) -> None:
    """Complete a cuda Target from the live device (when there is one of its
    architecture) or its architecture's preset; fields named in ``given`` were set by
    the user and stay."""
    live = live_fields()
    if live is not None and (not target.arch or target.arch == live["arch"]):
        fields = live
    else:
        fields = preset_fields(target.arch or DEFAULT_ARCH)
    for name, value in fields.items():
        if name not in given or name == "arch" and not target.arch:
            object.__setattr__(target, name, value)
