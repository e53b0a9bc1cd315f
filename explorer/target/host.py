"""Host CPU facts for the llvm target, read through llvmlite and the OS.

``fill`` completes a ``Target("llvm")``: CPU name and feature string (so that
LLVM generates AVX-512 code where the host has it), the widest vector register,
the usable core count, and cache sizes from sysfs. Options given explicitly
(``-mcpu``, ``-num-cores``, ...) are kept; a CPU other than the host's gets no
host feature string, LLVM then derives the features from the CPU name.

``EXPLORER_HOST_ISA=avx2`` describes an AVX-512 host as the AVX2-only machine it
also is (CPU ``haswell``, its AVX-512 and AMX features off), in this process and
the worker processes it starts: the whole test suite then runs as on an AVX2-only
CI machine (8 fp32 lanes, 16 vector registers) without one.
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys

from ..errors import BuildError

# CPU names (LLVM spelling) whose feature set includes AVX-512 / AVX2, for -mcpu without features.
_AVX512_CPUS = ("skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake-client",
                "icelake-server", "tigerlake", "rocketlake", "sapphirerapids", "emeraldrapids",
                "graniterapids", "graniterapids-d", "diamondrapids", "znver4", "znver5",
                "x86-64-v4")
_AVX2_CPUS = ("haswell", "broadwell", "skylake", "alderlake", "raptorlake", "meteorlake",
              "arrowlake", "lunarlake", "gracemont", "znver1", "znver2", "znver3", "x86-64-v3",
              "bdver4")


HOST_ISA = "EXPLORER_HOST_ISA"
_WIDE = ("avx512", "amx", "avx10", "evex512")   # features an AVX2-only machine lacks


@functools.lru_cache(maxsize=1)
def host_cpu() -> tuple:
    """(cpu name, feature string) of this machine as LLVM names them (as an AVX2-only
    one when ``EXPLORER_HOST_ISA=avx2``)."""
    import llvmlite.binding as llvm
    try:
        features = llvm.get_host_cpu_features().flatten()
    except RuntimeError:  # some platforms cannot list features
        features = ""
    name = llvm.get_host_cpu_name()
    isa = os.environ.get(HOST_ISA, "").strip().lower()
    if not isa:
        return name, features
    if isa != "avx2":
        raise BuildError(f"{HOST_ISA}={isa!r}: the only ISA a host can be described as is "
                         f"'avx2' (unset it for the host as it is)")
    if "+avx2" not in features.split(","):
        raise BuildError(f"{HOST_ISA}=avx2 describes an AVX-512 host as AVX2-only, but this "
                         f"host ({name}) has no AVX2: unset {HOST_ISA}")
    narrow = [("-" + f[1:]) if f[1:].startswith(_WIDE) else f for f in features.split(",")]
    return "haswell", ",".join(narrow)


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


def implied(mcpu: str) -> dict:
    """What ``fill`` gives an llvm target of ``mcpu`` that sets nothing else: features
    and cache sizes (``Target.__str__`` writes out the fields that differ)."""
    name, features = host_cpu()
    out = {"features": features if mcpu == name else ""}
    from . import options
    for key in ("l1_bytes", "l2_bytes", "l3_bytes"):
        out[key] = cache_sizes().get(key, options.DEFAULTS[key])
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


_PROBE = r"""
import sys
import llvmlite.binding as llvm
llvm.initialize_native_target()
llvm.initialize_native_asmprinter()
t = llvm.Target.from_triple(llvm.get_process_triple())
tm = t.create_target_machine(cpu=sys.argv[1], features=sys.argv[2], opt=0)
tm.emit_object(llvm.parse_assembly("define i32 @f(i32 %x) {\n  ret i32 %x\n}"))
"""


@functools.lru_cache(maxsize=16)
def _llvm_complaint(mcpu: str, features: str) -> str:
    """What LLVM says compiling a tiny function for (mcpu, features) here; "" if happy.
    Runs in a child process: LLVM aborts the process on some CPU names."""
    try:
        p = subprocess.run([sys.executable, "-c", _PROBE, mcpu, features], capture_output=True,
                           text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"could not ask LLVM ({e})"
    lines = [ln.strip() for ln in p.stderr.splitlines() if ln.strip()]
    if p.returncode == 0 and not lines:
        return ""
    return lines[0] if lines else f"LLVM exited with status {p.returncode}"


def check_cpu(target) -> None:
    """Raise BuildError unless LLVM can generate code for ``target``'s -mcpu and -features
    on this host (an unknown CPU would make every kernel fail to build)."""
    from . import as_target
    target = as_target(target)
    if target.kind != "llvm":
        return
    name, features = host_cpu()
    if target.mcpu == name and target.features in ("", features):
        return
    why = _llvm_complaint(target.mcpu, target.features)
    if not why:
        return
    import llvmlite.binding as llvm
    where = f"on {llvm.get_process_triple()} ({why})"
    if "feature" in why:
        raise BuildError(f"LLVM cannot use -features={target.features} for -mcpu={target.mcpu} "
                         f"{where}: give features LLVM knows, e.g. -features=+avx2, or leave "
                         "-features out")
    raise BuildError(f"LLVM does not know the CPU -mcpu={target.mcpu} {where}; this host's CPU "
                     f"is {name!r}: use -mcpu={name} or leave -mcpu out")
