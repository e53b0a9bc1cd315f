"""Targets: what the search, the features and the code generators need to know about
a device. A target string is parsed once, where it enters (the command line, a
notebook's first cell), into a ``Target`` that is passed down; nothing below
re-parses it.

- ``Target("llvm")`` is this host, read through llvmlite and the OS
  (``explorer.target.host``): CPU name and features, the widest vector register
  and how many there are, usable cores, cache sizes. Options override:
  ``"llvm -mcpu=haswell -num-cores=2"``.
- ``Target("cuda")`` is a CUDA device from a preset per architecture
  (``explorer.target.cuda``; ``"cuda -arch=sm_80"``): threads, shared memory and
  registers per block and per SM, warp size, SM count.
- ``Target("interp")`` is the reference interpreter.

``str(target)`` parses back to the same target on this host (the measuring workers
re-parse it) and is the key the database files records under: an llvm target always
says its vector width, and its features and cache sizes where they were set by hand
(``"llvm -mcpu=znver5 -num-cores=2 -vector-bits=256 -features=+avx2,+fma"``).
``canonical`` reads a key written before the width was in it as this host would have
meant it.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

from ..errors import BuildError

KINDS = ("llvm", "cuda", "interp")


@dataclass(frozen=True)
class Target:
    """A device description; see the module docstring for how to build one."""
    kind: str = "llvm"
    mcpu: str = ""
    features: str = ""
    num_cores: int = 0
    vector_bits: int = 0
    l1_bytes: int = 32 * 1024
    l2_bytes: int = 1024 * 1024
    l3_bytes: int = 32 * 1024 * 1024
    arch: str = ""
    max_threads_per_block: int = 1024
    max_shared_memory_per_block: int = 48 * 1024
    max_shared_memory_per_sm: int = 228 * 1024
    max_registers_per_thread: int = 255
    max_registers_per_sm: int = 65536
    warp_size: int = 32
    sm_count: int = 132
    max_local_memory_per_block: int = 2 ** 31
    options: tuple = field(default=())

    def __init__(self, kind: str = "llvm", **kw):
        from . import options
        if not isinstance(kind, str):
            raise BuildError(f"Target takes a string such as 'llvm' or 'cuda', not {kind!r}")
        spec = options.parse(kind)
        spec.update(kw)
        k = spec.pop("kind")
        given = frozenset(spec)
        object.__setattr__(self, "kind", k)
        for name, default in options.DEFAULTS.items():
            object.__setattr__(self, name, spec.pop(name, default))
        if spec:
            raise BuildError(f"unknown target option(s) {sorted(spec)} for {k}: known are "
                             f"{sorted(options.DEFAULTS)}")
        if k == "llvm":
            from . import host
            host.fill(self, given)
        elif k == "cuda":
            from . import cuda
            cuda.fill(self, given)

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

    @property
    def vector_registers(self) -> int:
        """Vector registers the code generator can use: 32 with AVX-512 or on AArch64,
        16 with AVX/AVX2 or SSE."""
        feats = set(self.features.split(","))
        return 32 if self.vector_bits >= 512 or "+neon" in feats else 16

    @property
    def compute_capability(self) -> tuple:
        """(major, minor) of a CUDA target, from its architecture (sm_90 -> (9, 0))."""
        digits = self.arch[3:] if self.arch.startswith("sm_") else ""
        return (int(digits[:-1]), int(digits[-1])) if digits.isdigit() else (0, 0)

    def describe(self) -> str:
        """One line a person reads: what the device is and what the search assumes."""
        if self.kind == "llvm":
            return (f"{self.mcpu}, {self.num_cores} core{'s' * (self.num_cores != 1)}, "
                    f"{self.vector_bits}-bit vectors ({self.vector_lanes} fp32 lanes, "
                    f"{self.vector_registers} registers), L1 {self.l1_bytes >> 10} KiB, "
                    f"L2 {self.l2_bytes >> 10} KiB, L3 {self.l3_bytes >> 20} MiB")
        if self.kind == "cuda":
            return (f"CUDA {self.arch}: {self.sm_count} SMs, {self.max_threads_per_block} "
                    f"threads and {self.max_shared_memory_per_block >> 10} KiB shared memory "
                    f"per block, warp {self.warp_size}")
        return "the reference interpreter (numpy)"

    def __str__(self) -> str:
        """The target string that parses back to this target here (``as_target(str(t))
        == t``), and the key its database records are filed under. An llvm target always
        says its vector width, so that an AVX2 and an AVX-512 host of one ``-mcpu`` (a VM
        with AVX-512 masked off) file their records apart, and says its features, cache
        sizes and vector width wherever they are not what ``-mcpu`` gives on this host
        (set by hand: the code was built for them)."""
        parts = [self.kind]
        if self.kind == "llvm":
            from .host import implied
            parts += [f"-mcpu={self.mcpu}", f"-num-cores={self.num_cores}",
                      f"-vector-bits={self.vector_bits}"]
            parts += [f"-{k.replace('_', '-')}={getattr(self, k)}"
                      for k, v in implied(self.mcpu).items() if getattr(self, k) != v]
        elif self.kind == "cuda":
            from .cuda import preset_fields
            parts += [f"-arch={self.arch}"]
            parts += [f"-{k.replace('_', '-')}={getattr(self, k)}"   # limits set by hand
                      for k, v in preset_fields(self.arch).items() if getattr(self, k) != v]
        return " ".join(parts)


@functools.lru_cache(maxsize=256)
def canonical(text: str) -> str:
    """The key of a target string: ``str(Target(text))`` on this host, so that a string
    written before llvm keys said their vector width ("llvm -mcpu=znver5 -num-cores=2")
    names what this host makes of it (its own width and features where -mcpu is this
    host's CPU, the CPU's where it is another); ``text`` itself when it does not parse."""
    try:
        return str(Target(text))
    except BuildError:
        return text


def as_target(t) -> Target:
    """``t`` as a Target (a Target is returned as it is; a string is parsed)."""
    if isinstance(t, Target):
        return t
    if isinstance(t, str):
        return Target(t)
    raise BuildError(f"expected a Target or a target string, got {type(t).__name__}")


from .host import check_cpu  # noqa: E402  (host reads Target's fields)

__all__ = ["Target", "as_target", "canonical", "check_cpu", "KINDS"]
