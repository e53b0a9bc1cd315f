"""Targets: what the search and the code generators need to know about a device."""
from __future__ import annotations

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


def parse(text: str) -> dict:
    words = text.split()
    if not words or words[0] not in KINDS:
        raise BuildError(f"unknown target {text!r}: use one of {', '.join(KINDS)} "
                         "(options like 'llvm -mcpu=znver4 -num-cores=2')")
    spec: dict = {"kind": words[0]}
    for w in words[1:]:
        if not w.startswith("-") or "=" not in w:
            raise BuildError(f"target option {w!r} must look like -name=value")
        key, val = w[1:].split("=", 1)
        key = key.replace("-", "_")
        if key not in _DEFAULTS:
            raise BuildError(f"unknown target option -{key} in {text!r}: known are "
                             f"{', '.join(sorted(_DEFAULTS))}")
        spec[key] = int(val) if isinstance(_DEFAULTS[key], int) else val
    return spec


def as_target(t) -> Target:
    if isinstance(t, Target):
        return t
    if isinstance(t, str):
        return Target(t)
    raise BuildError(f"expected a Target or a target string, got {type(t).__name__}")
