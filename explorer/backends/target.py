"""Targets: what the search and the code generators need to know about a device."""
from __future__ import annotations

import functools
import re
import subprocess
import sys
from dataclasses import dataclass, field, replace

from ..errors import BuildError

KINDS = ("llvm", "cuda", "interp")


@dataclass(frozen=True)
class Target:
    """A device description. Build one with ``Target("llvm")``, ``Target("cuda")``,
    ``Target("interp")`` or a string with options: ``"llvm -mcpu=znver4 -num-cores=2"``.

    For ``llvm`` the host is read through llvmlite (CPU name and features,
    vector width, cores, caches) unless given.
    """
    kind: str = "llvm"
    mcpu: str = ""
    features: str = ""
    num_cores: int = 0
    vector_bits: int = 0
    l1_bytes: int = 32 * 1024
    l2_bytes: int = 1024 * 1024
    l3_bytes: int = 32 * 1024 * 1024
    max_threads_per_block: int = 1024
    max_shared_memory_per_block: int = 48 * 1024
    warp_size: int = 32
    max_local_memory_per_block: int = 2 ** 31
    options: tuple = field(default=())

    def __init__(self, kind: str = "llvm", **kw):
        spec = parse(kind) if isinstance(kind, str) else {}
        if not isinstance(kind, str):
            raise BuildError(f"Target takes a string such as 'llvm' or 'cuda', not {kind!r}")
        spec.update(kw)
        k = spec.pop("kind")
        given = frozenset(spec)
        object.__setattr__(self, "kind", k)
        for name, default in _DEFAULTS.items():
            object.__setattr__(self, name, spec.pop(name, default))
        if spec:
            raise BuildError(f"unknown target option(s) {sorted(spec)} for {k}: known are "
                             f"{sorted(_DEFAULTS)}")
        if k == "llvm":
            from . import host
            host.fill(self, given)

    def with_(self, **changes) -> "Target":
        out = replace(self)
        for k, v in changes.items():
            object.__setattr__(out, k, v)
        return out

    @property
    def is_gpu(self) -> bool:
        return self.kind == "cuda"

    @property
    def vector_lanes(self) -> int:
        """fp32 lanes of the widest vector register."""
        return max(1, self.vector_bits // 32)

    def __str__(self) -> str:
        parts = [self.kind]
        if self.kind == "llvm":
            parts += [f"-mcpu={self.mcpu}", f"-num-cores={self.num_cores}"]
        return " ".join(parts)


_DEFAULTS = {f: Target.__dataclass_fields__[f].default for f in Target.__dataclass_fields__
             if f != "kind"}
_DEFAULTS["options"] = ()


# Smallest and largest value of each integer option a target string may set.
_INT_LIMITS = {"num_cores": (1, 1024), "vector_bits": (32, 2048), "warp_size": (1, 1024),
               "max_threads_per_block": (1, 65536)}
_INT_RANGE = (1, 2 ** 40)
_PARSED = tuple(k for k in _DEFAULTS if k != "options")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*$")
_FEATURE = re.compile(r"[+-][A-Za-z0-9._-]+$")


def parse(text: str) -> dict:
    """``"llvm -mcpu=znver4 -num-cores=2"`` -> {"kind": "llvm", "mcpu": "znver4", ...};
    raises BuildError naming the option that is wrong and what it takes. An option given
    twice takes its last value, as on a command line."""
    words = text.split()
    if not words or words[0] not in KINDS:
        raise BuildError(f"unknown target {text!r}: use one of {', '.join(KINDS)} "
                         "(options like 'llvm -mcpu=znver4 -num-cores=2')")
    spec: dict = {"kind": words[0]}
    for w in words[1:]:
        key, val = _option(text, w)
        spec[key] = _value(text, key, val)
    return spec


def _option(text: str, word: str) -> tuple:
    if not word.startswith("-") or "=" not in word:
        raise BuildError(f"target option {word!r} in {text!r} must look like -name=value, "
                         "e.g. -num-cores=4")
    key, val = word.lstrip("-").split("=", 1)
    key = key.replace("-", "_")
    if key not in _PARSED:
        known = ", ".join("-" + k.replace("_", "-") for k in _PARSED)
        raise BuildError(f"unknown target option {word.split('=')[0]!r} in {text!r}: known "
                         f"are {known}")
    return key, val


def _value(text: str, key: str, val: str):
    opt = "-" + key.replace("_", "-")
    if isinstance(_DEFAULTS[key], int):
        return _int_value(text, opt, key, val)
    if key == "features":
        if not all(_FEATURE.match(f) for f in val.split(",")):
            raise BuildError(f"target {text!r}: {opt}={val!r} must be a comma-separated list "
                             "of +feature or -feature, e.g. -features=+avx2,+fma")
    elif not _NAME.match(val):
        raise BuildError(f"target {text!r}: {opt}={val!r} is not a CPU name; give one such "
                         "as -mcpu=haswell, or leave -mcpu out for this host's CPU")
    return val


def _int_value(text: str, opt: str, key: str, val: str) -> int:
    lo, hi = _INT_LIMITS.get(key, _INT_RANGE)
    try:
        v = int(val)
    except ValueError:
        v = None
    if v is None or not lo <= v <= hi:
        raise BuildError(f"target {text!r}: {opt}={val!r} must be a whole number from {lo} "
                         f"to {hi}, e.g. {opt}={max(lo, min(4, hi))}")
    if key == "vector_bits" and v & (v - 1):
        raise BuildError(f"target {text!r}: {opt}={v} must be a power of two, e.g. {opt}=256")
    return v


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
    target = as_target(target)
    if target.kind != "llvm":
        return
    from .host import host_cpu
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


def as_target(t) -> Target:
    if isinstance(t, Target):
        return t
    if isinstance(t, str):
        return Target(t)
    raise BuildError(f"expected a Target or a target string, got {type(t).__name__}")
