"""Expressions to LLVM values, scalar or vector.

One emitter serves both: outside a vectorized loop every value is a scalar;
inside one (``lane`` set, ``lanes`` > 1) the lane variable is the vector
<b, b+1, ..., b+lanes-1> (``b``, its first value, is bound like a loop variable:
0, or the start of a chunk of a long vectorized loop) and every other value
stays scalar until it meets a vector, then it is broadcast. So a lane-invariant
subexpression is computed once as a scalar and broadcast.

Loads inside a vectorized loop are classified by the lane coefficient of their
flat index: 0 -> one scalar load, 1 -> one contiguous vector load, otherwise a
gather. ``Select`` and ``and``/``or`` are lazy without branching: a side that
may fault (loads, integer division) is evaluated under a guard that makes it
harmless where it is not taken (see "lazy forms" below).
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...errors import BuildError
from ...ir.expr import (Add, And, BufferLoad, Call, Cast, Div, EQ, FloatImm, FloorDiv, FloorMod,
                        IntImm, LE, LT, Max, Min, Mul, NE, Not, Or, Select, Sub, Var)
from ...target.host import host_cpu
from .access import AccessEmitter
from .analysis import has_load, has_unsafe
from .types import (F32, I1, I32, I64, TextConstant, const_int, is_float, lanes_of, poison,
                    reg_type, scalar_type, splat_const, splat_of, suffix, vector_const)
from .vecmath import exp_f32, inline_exp, inline_tanh, tanh_f32, vector_function

# fast-math flags on float arithmetic: only contraction (a*b+c -> fma), never reassociation,
# so results stay IEEE apart from the fused rounding.
FP_FLAGS = ("contract",)
_ICMP = {LT: "<", LE: "<=", EQ: "==", NE: "!="}
_FCMP = {LT: "<", LE: "<=", EQ: "=="}


class ExprEmitter(AccessEmitter):
    """Emits expressions with ``fn.builder``; ``lane``/``lanes`` set inside a vectorized loop."""

    def __init__(self, fn, lane: str | None = None, lanes: int = 1):
        self.fn = fn
        self.lane = lane
        self.lanes = lanes
        self.in_index = False

    @property
    def b(self) -> ir.IRBuilder:
        return self.fn.builder

    # ------------------------------------------------------------ helpers
    def splat(self, v: ir.Value, lanes: int) -> ir.Value:
        if lanes == 1 or isinstance(v.type, ir.VectorType):
            return v
        vt = ir.VectorType(v.type, lanes)
        if isinstance(v, ir.Constant) and not isinstance(v, TextConstant):
            return splat_of(v, lanes)
        one = self.b.insert_element(poison(vt), v, ir.Constant(I32, 0))
        return self.b.shuffle_vector(one, poison(vt), vector_const(I32, (0,) * lanes))

    def unify(self, a: ir.Value, b: ir.Value) -> tuple:
        n = max(lanes_of(a), lanes_of(b))
        return self.splat(a, n), self.splat(b, n)

    def iota(self) -> ir.Constant:
        return vector_const(I64, tuple(range(self.lanes)))

    def int_type(self) -> ir.Type:
        """int32 values are i64 inside index arithmetic (see ``emit_index``), else i32."""
        return I64 if self.in_index else I32

    def as_int32(self, v: ir.Value) -> ir.Value:
        c = const_int(v)
        if c is not None:
            return ir.Constant(I32, ((c + 2 ** 31) % 2 ** 32) - 2 ** 31)
        n = lanes_of(v)
        return self.b.trunc(v, I32 if n == 1 else ir.VectorType(I32, n))

    def as_index(self, v: ir.Value) -> ir.Value:
        """An i32 value (a loaded int32) widened for index arithmetic."""
        return self.sext64(v)

    def lane_value(self) -> ir.Value:
        """The lane variable: its first value (bound like a loop variable) plus <0, 1, ...>."""
        base = self.fn.vars[self.lane]
        if const_int(base) == 0:
            return self.iota()
        return self.b.add(self.splat(base, self.lanes), self.iota(), flags=("nsw",))

    def all_true(self, lanes: int) -> ir.Constant:
        return splat_const(ir.VectorType(I1, lanes), 1)

    def intrinsic(self, name: str, ret: ir.Type, args: list) -> ir.Function:
        return self.fn.mod.declare(name, ret, [a.type for a in args])

    def call_intr(self, base: str, args: list, ret: ir.Type | None = None) -> ir.Value:
        t = args[0].type if ret is None else ret
        fn = self.intrinsic(f"{base}.{suffix(t)}", t, args)
        return self.b.call(fn, args)

    def unsafe(self, e) -> bool:
        return self.memo("unsafe", e, lambda: has_unsafe(e))

    # ------------------------------------------------------------ entry
    def emit(self, e, mask=None) -> ir.Value:
        try:
            method = _DISPATCH[type(e)]
        except KeyError:
            raise BuildError(f"llvm codegen: unsupported expression {type(e).__name__}; "
                             "lower the function first (explorer.lower.lower)") from None
        return method(self, e, mask)

    # ------------------------------------------------------------ leaves
    def _var(self, e: Var, mask):
        if e.name == self.lane:
            v = self.lane_value()
        else:
            v = self.bound(e.name)
        return v if self.in_index else self.as_int32(v)

    def _int(self, e: IntImm, mask):
        if e.dtype == "int32":
            return ir.Constant(self.int_type(), e.value)
        return ir.Constant(reg_type(e.dtype), e.value)

    def _float(self, e: FloatImm, mask):
        return ir.Constant(reg_type(e.dtype), e.value)

    # ------------------------------------------------------------ arithmetic
    def _arith(self, e, mask):
        a, b = self.unify(self.emit(e.a, mask), self.emit(e.b, mask))
        if is_float(a.type):
            op = {Add: self.b.fadd, Sub: self.b.fsub, Mul: self.b.fmul}[type(e)]
            return op(a, b, flags=FP_FLAGS)
        ca, cb = const_int(a), const_int(b)
        if ca is not None and cb is not None:
            v = {Add: ca + cb, Sub: ca - cb, Mul: ca * cb}[type(e)]
            return ir.Constant(a.type, v) if a.type == I64 else self.as_int32(ir.Constant(I64, v))
        if isinstance(e, (Add, Sub)) and cb == 0:
            return a
        if isinstance(e, Add) and ca == 0:
            return b
        if isinstance(e, Mul) and (ca == 1 or cb == 1):
            return b if ca == 1 else a
        flags = ("nsw",) if self.in_index else ()
        op = {Add: self.b.add, Sub: self.b.sub, Mul: self.b.mul}[type(e)]
        return op(a, b, flags=flags)

    def _div(self, e, mask):
        a, b = self.emit(e.a, mask), self.emit(e.b, mask)
        divisor = const_int(b)   # before unify: a broadcast constant is no longer one
        a, b = self.unify(a, b)
        if is_float(a.type):
            if isinstance(e, Div):
                return self.b.fdiv(a, b)
            q = self.call_intr("llvm.floor", [self.b.fdiv(a, b)])
            if isinstance(e, FloorDiv):
                return q
            return self.b.fsub(a, self.b.fmul(q, b))
        # A guarded division never divides by 0. A constant divisor needs no guard, and
        # must not get one: the quotient is then pure (analysis.has_unsafe), reused for
        # the same index outside the guard (emit_index), where masked-off lanes count too.
        if mask is not None and divisor is None:
            b = self.b.select(self.guard_for(b, mask), b, splat_const(b.type, 1))
        return self.int_floordiv(a, b, isinstance(e, FloorMod))

    def int_floordiv(self, a, b, want_mod: bool) -> ir.Value:
        """Python floor division / modulus (rounding toward -inf, remainder signed like b)."""
        ca, cb = const_int(a), const_int(b)
        if ca is not None and cb is not None and cb != 0:
            return ir.Constant(a.type, ca % cb if want_mod else ca // cb)
        if cb is not None and cb > 0 and cb & (cb - 1) == 0:
            if want_mod:
                return self.b.and_(a, splat_const(a.type, cb - 1))
            return self.b.ashr(a, splat_const(a.type, cb.bit_length() - 1))
        q, r = self.b.sdiv(a, b), self.b.srem(a, b)
        zero = splat_const(a.type, 0)
        fix = self.b.and_(self.b.icmp_signed("!=", r, zero),
                          self.b.icmp_signed("<", self.b.xor(r, b), zero))
        if want_mod:
            return self.b.add(r, self.b.select(fix, b, zero))
        return self.b.sub(q, self.b.zext(fix, a.type))

    def _minmax(self, e, mask):
        a, b = self.unify(self.emit(e.a, mask), self.emit(e.b, mask))
        # Python's min(a, b) keeps a unless b < a; max keeps a unless b > a.
        if is_float(a.type):
            pick_b = self.b.fcmp_ordered("<" if isinstance(e, Min) else ">", b, a)
        else:
            pick_b = self.b.icmp_signed("<" if isinstance(e, Min) else ">", b, a)
        return self.b.select(pick_b, b, a)

    def _cmp(self, e, mask):
        if e.a.dtype == "int32" and not self.in_index and self.memo(
                "loadfree", e, lambda: not (has_load(e.a) or has_load(e.b))):
            a, b = self.unify(self.emit_index(e.a, mask), self.emit_index(e.b, mask))
        else:
            a, b = self.unify(self.emit(e.a, mask), self.emit(e.b, mask))
        if is_float(a.type):
            if isinstance(e, NE):
                return self.b.fcmp_unordered("!=", a, b)
            return self.b.fcmp_ordered(_FCMP[type(e)], a, b)
        ca, cb = const_int(a), const_int(b)
        if ca is not None and cb is not None:
            res = {LT: ca < cb, LE: ca <= cb, EQ: ca == cb, NE: ca != cb}[type(e)]
            return ir.Constant(I1, int(res))
        return self.b.icmp_signed(_ICMP[type(e)], a, b)

    def _not(self, e: Not, mask):
        a = self.emit(e.a, mask)
        return self.b.xor(a, splat_const(a.type, 1))

    # ------------------------------------------------------------ lazy forms
    # The side of a Select (or the right of and/or) that is not taken must not fault. It is
    # evaluated under a guard instead of behind a branch: ``mask`` is an i1 (scalar code, or
    # a lane-invariant condition) or a lane mask (vector code). A guarded scalar load reads
    # the buffer's first element when the guard is off, a guarded vector load is a masked
    # load or gather, a guarded integer division divides by 1. The code stays straight-line,
    # so a padded convolution's unrolled tile stays one basic block.
    def _logic(self, e, mask):
        is_and = isinstance(e, And)
        a = self.emit(e.a, mask)
        if self.unsafe(e.b):
            b = self.emit(e.b, self.and_mask(mask, a if is_and else self.not_(a)))
        else:
            b = self.emit(e.b, mask)
        a, b = self.unify(a, b)
        return self.b.and_(a, b) if is_and else self.b.or_(a, b)

    def _select(self, e: Select, mask):
        c = self.emit(e.cond, mask)
        if self.unsafe(e.true_value) or self.unsafe(e.false_value):
            t = self.emit(e.true_value, self.and_mask(mask, c))
            f = self.emit(e.false_value, self.and_mask(mask, self.not_(c)))
        else:
            t, f = self.emit(e.true_value, mask), self.emit(e.false_value, mask)
        n = max(lanes_of(c), lanes_of(t), lanes_of(f))
        return self.b.select(self.splat(c, n), self.splat(t, n), self.splat(f, n))

    def not_(self, v: ir.Value) -> ir.Value:
        return self.b.xor(v, splat_const(v.type, 1))

    def and_mask(self, mask, m):
        if mask is None:
            return m
        mask, m = self.unify(mask, m)
        return self.b.and_(mask, m)

    def guard_for(self, v: ir.Value, mask) -> ir.Value:
        """The guard ``mask`` shaped like ``v``: a lane mask for a vector, an i1 for a
        scalar (on when any lane is)."""
        if lanes_of(v) > 1:
            return self.splat(mask, lanes_of(v))
        return mask if lanes_of(mask) == 1 else self.any_lane(mask)

    # ------------------------------------------------------------ casts and calls
    def _cast(self, e: Cast, mask):
        v = self.emit(e.value, mask)
        src, dst = e.value.dtype, e.dtype
        n = lanes_of(v)
        to = reg_type(dst, n) if dst != "int32" else (
            self.int_type() if n == 1 else ir.VectorType(self.int_type(), n))
        if src == dst:
            return v
        if dst == "bool":
            zero = splat_const(v.type, 0.0 if is_float(v.type) else 0)
            if is_float(v.type):
                return self.b.fcmp_unordered("!=", v, zero)
            return self.b.icmp_signed("!=", v, zero)
        if src == "bool":
            return self.b.uitofp(v, to) if is_float(to) else self.b.zext(v, to)
        if is_float(v.type) and is_float(to):
            return self.b.fpext(v, to) if dst == "float64" else self.b.fptrunc(v, to)
        if is_float(to):
            return self.b.sitofp(v, to)
        return self.b.fptosi(v, to)

    def _call(self, e: Call, mask):
        x = self.emit(e.args[0], mask)
        if e.op in ("exp", "log", "tanh"):
            return self.math(e.op, x)
        if e.op == "sqrt":
            return self.call_intr("llvm.sqrt", [x])
        if e.op == "abs":
            if is_float(x.type):
                return self.call_intr("llvm.fabs", [x])
            neg = self.b.sub(splat_const(x.type, 0), x)
            return self.b.select(self.b.icmp_signed("<", x, splat_const(x.type, 0)), neg, x)
        if e.op == "sigmoid":
            one = splat_const(x.type, 1.0)
            ex = self.math("exp", self.b.fneg(x))
            return self.b.fdiv(one, self.b.fadd(one, ex))
        raise BuildError(f"llvm codegen: unknown math function {e.op!r}")

    def math(self, op: str, x: ir.Value) -> ir.Value:
        """exp/log/tanh: float32 vector exp and tanh inline (``vecmath.exp_f32``,
        ``tanh_f32``); otherwise one libmvec call per register-wide piece of a vector
        (see ``vecmath``), else the LLVM intrinsic (libm, one call per lane)."""
        if inline_exp(op, x):
            return exp_f32(self.b, x)
        if inline_tanh(op, x):
            return tanh_f32(self.b, x)
        n = lanes_of(x)
        target = self.fn.mod.target
        found = None
        if n > 1:
            bits = 32 if scalar_type(x.type) == F32 else 64
            found = vector_function(op, bits, target.features, target.mcpu == host_cpu()[0])
        pieces = n // found[1] if found else 0
        if not found or n % found[1] or pieces & (pieces - 1):
            return self.call_intr(f"llvm.{op}", [x])
        symbol, width = found
        piece_t = ir.VectorType(scalar_type(x.type), width)
        fn = self.fn.mod.declare(symbol, piece_t, [piece_t])
        if n == width:
            return self.b.call(fn, [x])
        pieces = [self.b.call(fn, [self.b.shuffle_vector(x, poison(x.type), ir.Constant(
            ir.VectorType(I32, width), list(range(p, p + width))))]) for p in range(0, n, width)]
        while len(pieces) > 1:  # concatenate pairwise
            pairs = []
            for a, b in zip(pieces[::2], pieces[1::2]):
                m = lanes_of(a) * 2
                pairs.append(self.b.shuffle_vector(a, b, vector_const(I32, tuple(range(m)))))
            pieces = pairs
        return pieces[0]

_DISPATCH = {
    Var: ExprEmitter._var, IntImm: ExprEmitter._int, FloatImm: ExprEmitter._float,
    Add: ExprEmitter._arith, Sub: ExprEmitter._arith, Mul: ExprEmitter._arith,
    Div: ExprEmitter._div, FloorDiv: ExprEmitter._div, FloorMod: ExprEmitter._div,
    Min: ExprEmitter._minmax, Max: ExprEmitter._minmax,
    LT: ExprEmitter._cmp, LE: ExprEmitter._cmp, EQ: ExprEmitter._cmp, NE: ExprEmitter._cmp,
    And: ExprEmitter._logic, Or: ExprEmitter._logic, Not: ExprEmitter._not,
    Select: ExprEmitter._select, Cast: ExprEmitter._cast, Call: ExprEmitter._call,
    BufferLoad: ExprEmitter._load,
}
