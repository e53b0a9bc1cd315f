"""Target strings: ``"llvm -mcpu=znver4 -num-cores=2"`` -> the fields of a Target, each
option checked when parsed (a name, a feature list, a number in its range)."""
from __future__ import annotations

import re

from ..errors import BuildError
from . import KINDS, Target

DEFAULTS = {f: Target.__dataclass_fields__[f].default for f in Target.__dataclass_fields__
            if f != "kind"}
DEFAULTS["options"] = ()


# Smallest and largest value of each integer option a target string may set.
_INT_LIMITS = {"num_cores": (1, 1024), "vector_bits": (32, 2048), "warp_size": (1, 1024),
               "max_threads_per_block": (1, 65536)}
_INT_RANGE = (1, 2 ** 40)
_PARSED = tuple(k for k in DEFAULTS if k != "options")
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
    if isinstance(DEFAULTS[key], int):
        return _int_value(text, opt, key, val)
    if key == "features":
        if not all(_FEATURE.match(f) for f in val.split(",")):
            raise BuildError(f"target {text!r}: {opt}={val!r} must be a comma-separated list "
                             "of +feature or -feature, e.g. -features=+avx2,+fma")
    elif key == "arch":
        from .cuda import PRESETS
        if val not in PRESETS:
            raise BuildError(f"target {text!r}: {opt}={val!r} is not a CUDA architecture with "
                             f"a preset; use one of {', '.join(sorted(PRESETS))}")
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
