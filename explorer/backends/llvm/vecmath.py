"""Vector math: an inlined float32 exp and tanh, and glibc's libmvec
(``_ZGVeN16v_expf`` and friends) for the rest.

``exp_f32`` emits exp of a float32 vector inline (Cephes' expf: a Cody-Waite
reduction by ln 2 and a degree-6 polynomial, within 2 ulp of libm over the whole
range, subnormal results, overflow to inf, NaN kept). Inline, it costs about 22
vector instructions and no call; on an AVX-512 target (``has_scalef``; the code
generator says which target a module is for, ``use_target``) 15: the polynomial in
fused multiply-adds to the end and the scaling by 2**n one ``vscalefps`` that takes n
as a float and rounds once (eight integer and float instructions before). That made
the tuned softmax's row 1.1-1.2x faster on the Intel Xeon of session 9 (its exp pass
is the row's largest part; an elementwise exp runs at copy speed either way). A
libmvec call costs more: it clobbers every vector register (all are
caller-saved), so each call in a loop spills and reloads the loop's vectors.
Measured on Zen 5 (``benchmarks/memory_bound_parts.py`` and the tuned softmax,
CPU-time medians, loaded machine): 1.13-1.36x libmvec where the exp pass is a loop,
but 0.72-0.93x where a 1024-element row is unrolled 64 times (1500 instructions of
straight-line exp a row, where libmvec's calls stay small); the tuner picks the
unroll. A target that is not the host (libmvec unused) gains most: one scalar
``expf`` call per lane before.

``tanh_f32`` emits tanh of a float32 vector inline (Cephes' tanhf: an odd polynomial
below |x| = 0.625, 1 - 2 / (exp(2|x|) + 1) above, the sign copied back; about 30
vector instructions and one division). Within 1.3 ulp of numpy's float64 tanh over
every 37th float32 in [1e-6, 10] of both signs (10.5 M values; libmvec's AVX-512
tanhf: 1.37 ulp there), exact below 2**-12
(subnormals included), +-0 and +-inf to +-0 and +-1, NaN kept. Measured on Zen 5
(2 cores, load 5-6, one process, interleaved medians): a plain tanh loop 0.95x
libmvec's AVX-512 tanhf (which uses tables); the BERT FFN's gemm + bias + GELU
expert (128x3072x768, 1 thread) level with libmvec (0.998-1.006x: its GELU runs
unrolled on the register tile and both spill there, libmvec's calls clobbering every
register, the inline code's 16 interleaved chains and hoisted constants outnumbering
them); on ``-mcpu=haswell`` (not the host, so one scalar ``tanhf`` a lane before) the
tanh loop 19.6x and the fused gemm 2.4x faster.

LLVM lowers ``llvm.exp.v16f32`` to sixteen scalar ``expf`` calls. glibc ships
vector versions of exp, log and tanh for SSE, AVX2 and AVX-512 in libmvec;
where the target CPU is the host and the library has the function, a vector
call is split into pieces of the library's width and each piece is one call:
about ten times less work in exp-heavy kernels (softmax, sigmoid).
"""
from __future__ import annotations

import functools
import weakref

import llvmlite.binding as llvm
import llvmlite.ir as ir

from .runtime import load_library
from .types import F32, I32, lanes_of, splat_const, suffix, vector_const

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


# Cephes expf: exp(x) = 2**n * exp(r), r = x - n ln2 (ln2 in two parts, the first exact
# in few bits so that n * _LN2_HI is exact), exp(r) = 1 + r + r^2 P(r) on |r| <= ln2 / 2.
_LOG2E = 1.44269504088896341
_LN2_HI, _LN2_LO = 0.693359375, -2.12194440e-4
_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
         1.6666665459e-1, 5.0000001201e-1)
# exp(x) is inf above 88.73 and rounds to 0 below -103.98: the clamped range keeps n
# within [-150, 129], whose halves are both normal exponents (see ``_scale``).
_X_MIN, _X_MAX = -104.0, 89.0
_FLAGS = ("contract",)
_ROUND, _ROUND_BITS = 12582912.0, 0x4B400000      # 1.5 * 2**23 and its float32 bits


_SCALEF: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # module -> bool


def use_target(module: ir.Module, target) -> None:
    """Say which target ``module`` is built for: with AVX-512 (``has_scalef``) the exp
    scales by 2**n in one ``vscalefps``."""
    _SCALEF[module] = has_scalef(target)


def has_scalef(target) -> bool:
    """Does ``target`` have AVX-512 (``vscalefps``: y * 2**n in one instruction, rounded
    once, subnormal results and overflow to inf included)? Its features say so, or,
    without features, its vector width."""
    feats = (getattr(target, "features", "") or "").split(",")
    if "+avx512f" in feats:
        return True
    return not any(feats) and getattr(target, "vector_bits", 0) >= 512


def exp_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """exp of a float32 vector ``x``, inline (see the module docstring)."""
    vt = x.type
    c = (lambda v: splat_const(vt, v))
    xc = b.select(b.fcmp_ordered("<", x, c(_X_MIN)), c(_X_MIN), x)
    xc = b.select(b.fcmp_ordered(">", xc, c(_X_MAX)), c(_X_MAX), xc)
    if not _SCALEF.get(b.module, False):
        y, ni = _exp_reduced(b, xc)
        return _scale(b, y, ni)     # NaN stays NaN: r and so y are NaN, whatever ni is
    # AVX-512: exp(r) = 1 + r (1 + r P(r)) in fused multiply-adds (Horner to the end:
    # two fewer instructions than 1 + r + r^2 P(r), same accuracy), times 2**n in one
    # vscalefps that takes n as a float
    n, r = _reduce(b, xc)
    p = _poly(b, r)
    one = c(1.0)
    y = b.fadd(b.fmul(b.fadd(b.fmul(p, r, flags=_FLAGS), one, flags=_FLAGS), r,
                      flags=_FLAGS), one, flags=_FLAGS)
    return _scalef(b, y, n)


def _scalef(b: ir.IRBuilder, y: ir.Value, n: ir.Value) -> ir.Value:
    """y * 2**n for an integral float vector ``n``: one AVX-512 ``vscalefps`` a register
    (``llvm.x86.avx512.mask.scalef.ps.512`` per 16 lanes; ``llvm.ldexp``, which LLVM
    lowers to a conversion and a ``vscalefps``, for other widths). The product is
    rounded once, to a subnormal or inf where it leaves the normal range, as libm's."""
    lanes = lanes_of(y)
    if lanes % 16:
        vi = ir.VectorType(I32, lanes)
        return _call(b, f"llvm.ldexp.{suffix(y.type)}.{suffix(vi)}", y.type,
                     [y, b.fptosi(n, vi)])
    v16 = ir.VectorType(F32, 16)
    out = []
    for k in range(0, lanes, 16):
        part = (lambda v: v if lanes == 16 else b.shuffle_vector(
            v, ir.Constant(v.type, None), _indices(range(k, k + 16))))
        out.append(_call(b, "llvm.x86.avx512.mask.scalef.ps.512", v16,
                         [part(y), part(n), ir.Constant(v16, None),
                          ir.Constant(ir.IntType(16), -1), ir.Constant(I32, 4)]))
    while len(out) > 1:      # concatenate: pairs of 16, then of 32, ...
        out = [b.shuffle_vector(out[i], out[i + 1], _indices(range(2 * out[i].type.count)))
               for i in range(0, len(out), 2)]
    return out[0]


def _indices(idx) -> ir.Constant:
    return vector_const(I32, tuple(idx))


def _call(b: ir.IRBuilder, name: str, ret: ir.Type, args: list) -> ir.Value:
    fn = b.module.globals.get(name)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(ret, [a.type for a in args]), name)
    return b.call(fn, args)


def _reduce(b: ir.IRBuilder, xc: ir.Value):
    """(n, r): n = round(xc / ln 2) as a float vector, r = xc - n ln 2."""
    vt = xc.type
    c = (lambda v: splat_const(vt, v))
    # n = round(x / ln 2): adding 1.5 * 2**23 rounds to an integer (to nearest, even),
    # which the float's low mantissa bits then hold
    t = b.fadd(b.fmul(xc, c(_LOG2E), flags=_FLAGS), c(_ROUND), flags=_FLAGS)
    n = b.fsub(t, c(_ROUND))
    r = b.fsub(xc, b.fmul(n, c(_LN2_HI), flags=_FLAGS), flags=_FLAGS)
    r = b.fsub(r, b.fmul(n, c(_LN2_LO), flags=_FLAGS), flags=_FLAGS)
    return n, r


def _poly(b: ir.IRBuilder, r: ir.Value) -> ir.Value:
    """P(r) of Cephes' expf, in Horner form."""
    p = splat_const(r.type, _POLY[0])
    for k in _POLY[1:]:
        p = b.fadd(b.fmul(p, r, flags=_FLAGS), splat_const(r.type, k), flags=_FLAGS)
    return p


def _exp_reduced(b: ir.IRBuilder, xc: ir.Value):
    """(exp(r), n) with exp(xc) = exp(r) * 2**n, for a float32 vector ``xc``."""
    vt = xc.type
    c = (lambda v: splat_const(vt, v))
    # n = round(x / ln 2): adding 1.5 * 2**23 rounds to an integer (to nearest, even),
    # which the float's low mantissa bits then hold: the int without a conversion
    t = b.fadd(b.fmul(xc, c(_LOG2E), flags=_FLAGS), c(_ROUND), flags=_FLAGS)
    n = b.fsub(t, c(_ROUND))
    vi = ir.VectorType(I32, lanes_of(xc))
    ni = b.sub(b.bitcast(t, vi), splat_const(vi, _ROUND_BITS))
    r = b.fsub(xc, b.fmul(n, c(_LN2_HI), flags=_FLAGS), flags=_FLAGS)
    r = b.fsub(r, b.fmul(n, c(_LN2_LO), flags=_FLAGS), flags=_FLAGS)
    p = c(_POLY[0])
    for k in _POLY[1:]:
        p = b.fadd(b.fmul(p, r, flags=_FLAGS), c(k), flags=_FLAGS)
    r2 = b.fmul(r, r, flags=_FLAGS)
    y = b.fadd(b.fadd(b.fmul(p, r2, flags=_FLAGS), r, flags=_FLAGS), c(1.0), flags=_FLAGS)
    return y, ni


def _scale(b: ir.IRBuilder, y: ir.Value, n: ir.Value) -> ir.Value:
    """y * 2**n for n in [-150, 129], as two multiplications by normal powers of two
    (n // 2 and the rest), so that results below the normal range round to subnormals
    and results past it to inf, as libm's do."""
    half = b.ashr(n, splat_const(n.type, 1))
    for k in (half, b.sub(n, half)):
        bits = b.shl(b.add(k, splat_const(n.type, 127)), splat_const(n.type, 23))
        y = b.fmul(y, b.bitcast(bits, y.type))
    return y


def inline_exp(op: str, x: ir.Value) -> bool:
    """Is ``op`` on ``x`` emitted inline (``exp_f32``)? exp of float32 vectors."""
    return op == "exp" and lanes_of(x) > 1 and x.type.element == F32


# Cephes tanhf: tanh(x) = x + x^3 P(x^2) for |x| < 0.625, 1 - 2 / (exp(2|x|) + 1) above
# (no cancellation there: tanh >= 0.55), the sign of x put back.
_TANH_SMALL = 0.625
_TANH_ONE = 9.5
_TANH_POLY = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
              -3.33332819422e-1)
_SIGN = 0x80000000


def tanh_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """tanh of a float32 vector ``x``, inline: Cephes' tanhf on |x| (odd polynomial
    below 0.625, ``exp_f32`` above), the sign of x copied back bitwise, so -0.0 stays
    -0.0. exp(2|x|) overflows to inf past |x| = 44.5 and 1 - 2 / inf is exactly 1;
    NaN stays NaN (the ordered compare sends it through exp, which keeps it)."""
    vt = x.type
    c = (lambda v: splat_const(vt, v))
    vi = ir.VectorType(I32, lanes_of(x))
    bits = b.bitcast(x, vi)
    sign = b.and_(bits, splat_const(vi, _SIGN))
    ax = b.bitcast(b.and_(bits, splat_const(vi, _SIGN - 1)), vt)
    s = b.fmul(ax, ax, flags=_FLAGS)
    p = c(_TANH_POLY[0])
    for k in _TANH_POLY[1:]:
        p = b.fadd(b.fmul(p, s, flags=_FLAGS), c(k), flags=_FLAGS)
    small = b.fadd(b.fmul(b.fmul(p, s, flags=_FLAGS), ax, flags=_FLAGS), ax, flags=_FLAGS)
    # exp(2 min(|x|, 9.5)): tanh rounds to 1 from 9.011 up (1 - tanh(x) = 2 exp(-2x) is
    # then under half the ulp below 1, 2**-25), and 1 - 2 / (exp(19) + 1) rounds to 1
    # too, so 2**n has n <= 28, one normal power of two, and exp_f32's clamps and two-step scaling are
    # not needed (NaN passes the ordered compare and stays NaN)
    ac = b.select(b.fcmp_ordered(">", ax, c(_TANH_ONE)), c(_TANH_ONE), ax)
    er, n = _exp_reduced(b, b.fadd(ac, ac))
    e = b.fmul(er, b.bitcast(b.shl(b.add(n, splat_const(vi, 127)), splat_const(vi, 23)), vt))
    large = b.fsub(c(1.0), b.fdiv(c(2.0), b.fadd(e, c(1.0))))
    y = b.select(b.fcmp_ordered("<", ax, c(_TANH_SMALL)), small, large)
    return b.bitcast(b.or_(b.bitcast(y, vi), sign), vt)


def inline_tanh(op: str, x: ir.Value) -> bool:
    """Is ``op`` on ``x`` emitted inline (``tanh_f32``)? tanh of float32 vectors."""
    return op == "tanh" and lanes_of(x) > 1 and x.type.element == F32
