"""Host CPU facts for the llvm target, read through llvmlite and the OS.

``fill`` completes a ``Target("llvm")``: CPU name and feature string (so that
LLVM generates AVX-512 code where the host has it), the widest vector register,
the usable core count, and cache sizes from sysfs. Options given explicitly
(``-mcpu``, ``-num-cores``, ...) are kept; a CPU other than the host's gets no
host feature string, LLVM then derives the features from the CPU name.
"""
from __future__ import annotations

import functools
import os

# CPU names (LLVM spelling) whose feature set includes AVX-512 / AVX2, for -mcpu without features.
_AVX512_CPUS = ("skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake-client",
                "icelake-server", "tigerlake", "rocketlake", "sapphirerapids", "emeraldrapids",
                "graniterapids", "graniterapids-d", "diamondrapids", "znver4", "znver5",
                "x86-64-v4")
_AVX2_CPUS = ("haswell", "broadwell", "skylake", "alderlake", "raptorlake", "meteorlake",
              "arrowlake", "lunarlake", "gracemont", "znver1", "znver2", "znver3", "x86-64-v3",
              "bdver4")


@functools.lru_cache(maxsize=1)
def host_cpu() -> tuple:
    """(cpu name, feature string) of this machine as LLVM names them."""
    import llvmlite.binding as llvm
    try:
        features = llvm.get_host_cpu_features().flatten()
    except RuntimeError:  # some platforms cannot list features
        features = ""
    return llvm.get_host_cpu_name(), features


def vector_bits_of(mcpu: str, features: str) -> int:
    """Width in bits of the widest float vector register the CPU/features allow."""
    feats = set(features.split(","))
    if "+avx512f" in feats or (not features and mcpu in _AVX512_CPUS):
        return 512
    if "+avx" in feats or "+avx2" in feats or (not features and mcpu in _AVX2_CPUS):
        return 256
    return 128


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


@functools.lru_cache(maxsize=1)
def cache_sizes() -> dict:
    """{'l1_bytes', 'l2_bytes', 'l3_bytes'} (data/unified caches) from sysfs, where present."""
    root = "/sys/devices/system/cpu/cpu0/cache"
    out: dict = {}
    try:
        entries = sorted(e for e in os.listdir(root) if e.startswith("index"))
    except OSError:
        return out
    for e in entries:
        try:
            with open(f"{root}/{e}/level") as f:
                level = int(f.read())
            with open(f"{root}/{e}/type") as f:
                kind = f.read().strip()
            with open(f"{root}/{e}/size") as f:
                size = _parse_size(f.read())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and level in (1, 2, 3):
            out[f"l{level}_bytes"] = size
    return out


def _set(target, name: str, value) -> None:
    object.__setattr__(target, name, value)


def fill(target, given=frozenset()) -> None:
    """Complete an llvm Target from the host; fields named in ``given`` were set by the user."""
    name, features = host_cpu()
    if not target.mcpu:
        _set(target, "mcpu", name)
    if not target.features and "features" not in given:
        _set(target, "features", features if target.mcpu == name else "")
    if not target.num_cores:
        _set(target, "num_cores", len(os.sched_getaffinity(0)))
    if not target.vector_bits:
        _set(target, "vector_bits", vector_bits_of(target.mcpu, target.features))
    for key, size in cache_sizes().items():
        if key not in given:
            _set(target, key, size)
