"""Vector math through glibc's libmvec (``_ZGVeN16v_expf`` and friends).

LLVM lowers ``llvm.exp.v16f32`` to sixteen scalar ``expf`` calls. glibc ships
vector versions of exp, log and tanh for SSE, AVX2 and AVX-512 in libmvec;
where the target CPU is the host and the library has the function, a vector
call is split into pieces of the library's width and each piece is one call:
about ten times less work in exp-heavy kernels (softmax, sigmoid).
"""
from __future__ import annotations

import functools

import llvmlite.binding as llvm

from .runtime import load_library

# Vector function ABI ISA letter and register width (bits) per instruction set.
_ISAS = (("e", 512, "+avx512f"), ("d", 256, "+avx2"))
_SCALAR = {("exp", 32): "expf", ("log", 32): "logf", ("tanh", 32): "tanhf",
           ("exp", 64): "exp", ("log", 64): "log", ("tanh", 64): "tanh"}


@functools.lru_cache(maxsize=1)
def _loaded() -> bool:
    return load_library("mvec", "libmvec.so.1")


@functools.lru_cache(maxsize=64)
def vector_function(op: str, bits: int, features: str, is_host: bool):
    """(symbol, lanes) of a libmvec function for ``op`` on ``bits``-bit floats, or None."""
    scalar = _SCALAR.get((op, bits))
    if scalar is None or not is_host or not _loaded():
        return None
    feats = set(features.split(","))
    for isa, width, feature in _ISAS:
        if feature in feats:
            lanes = width // bits
            symbol = f"_ZGV{isa}N{lanes}v_{scalar}"
            if llvm.address_of_symbol(symbol):
                return symbol, lanes
    return None
