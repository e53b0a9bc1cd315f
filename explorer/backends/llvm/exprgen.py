"""Expressions to LLVM values, scalar or vector.

One emitter serves both: outside a vectorized loop every value is a scalar;
inside one (``lane`` set, ``lanes`` > 1) the lane variable is the constant
vector <0, 1, ..., lanes-1> and every other value stays scalar until it meets
a vector, then it is broadcast. So a lane-invariant subexpression is computed
once as a scalar and broadcast, as the issue asks.

Loads inside a vectorized loop are classified by the lane coefficient of their
flat index: 0 -> one scalar load, 1 -> one contiguous vector load, otherwise a
gather. ``Select`` and ``and``/``or`` are lazy: a branch that may fault (loads,
integer division) is not evaluated for lanes (or scalars) that do not take it:
scalar code branches, vector code masks its loads (``llvm.masked.load`` /
``llvm.masked.gather``).
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...errors import BuildError
from ...ir.expr import (Add, And, BufferLoad, Call, Cast, Div, EQ, FloatImm, FloorDiv, FloorMod,
                        IntImm, LE, LT, Max, Min, Mul, NE, Not, Or, Select, Sub, Var)
from .analysis import flat_coeff, has_unsafe
from .types import (F32, F64, I1, I32, I64, PTR, const_int, is_float, lanes_of, mem_type,
                    reg_type, scalar_type, splat_const, suffix)

# fast-math flags on float arithmetic: only contraction (a*b+c -> fma), never reassociation,
# so results stay IEEE apart from the fused rounding.
FP_FLAGS = ("contract",)
_ICMP = {LT: "<", LE: "<=", EQ: "==", NE: "!="}
_FCMP = {LT: "<", LE: "<=", EQ: "=="}


class ExprEmitter:
    """Emits expressions with ``fn.builder``; ``lane``/``lanes`` set inside a vectorized loop."""

    def __init__(self, fn, lane: str | None = None, lanes: int = 1):
        self.fn = fn
        self.lane = lane
        self.lanes = lanes

    @property
    def b(self) -> ir.IRBuilder:
        return self.fn.builder

    # ------------------------------------------------------------ helpers
    def splat(self, v: ir.Value, lanes: int) -> ir.Value:
        if lanes == 1 or isinstance(v.type, ir.VectorType):
            return v
        vt = ir.VectorType(v.type, lanes)
        if isinstance(v, ir.Constant) and not isinstance(v.constant, (list, tuple)):
            return ir.Constant(vt, [v.constant] * lanes)
        one = self.b.insert_element(ir.Constant(vt, ir.Undefined), v, ir.Constant(I32, 0))
        return self.b.shuffle_vector(one, ir.Constant(vt, ir.Undefined),
                                     ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))

    def unify(self, a: ir.Value, b: ir.Value) -> tuple:
        n = max(lanes_of(a), lanes_of(b))
        return self.splat(a, n), self.splat(b, n)

    def iota(self) -> ir.Constant:
        return ir.Constant(ir.VectorType(I32, self.lanes), list(range(self.lanes)))

    def all_true(self, lanes: int) -> ir.Constant:
        return ir.Constant(ir.VectorType(I1, lanes), [1] * lanes)

    def intrinsic(self, name: str, ret: ir.Type, args: list) -> ir.Function:
        return self.fn.module.declare(name, ret, [a.type for a in args])

    def call_intr(self, base: str, args: list, ret: ir.Type | None = None) -> ir.Value:
        t = args[0].type if ret is None else ret
        fn = self.intrinsic(f"{base}.{suffix(t)}", t, args)
        return self.b.call(fn, args)

    # ------------------------------------------------------------ entry
    def emit(self, e, mask=None) -> ir.Value:
        try:
            method = _DISPATCH[type(e)]
        except KeyError:
            raise BuildError(f"llvm codegen: unsupported expression {type(e).__name__}; "
                             "lower the function first (explorer.lower.lower)") from None
        return method(self, e, mask)

    def emit_index(self, e) -> ir.Value:
        """An index expression as i32 (scalar, or vector of lanes), with nsw arithmetic."""
        prev, self.in_index = getattr(self, "in_index", False), True
        try:
            return self.emit(e)
        finally:
            self.in_index = prev

    def at_lane0(self, e) -> ir.Value:
        """``e`` as a scalar with the lane variable at 0 (base of a contiguous access)."""
        saved = (self.lane, self.lanes, self.fn.vars.get(self.lane))
        self.fn.vars[self.lane] = ir.Constant(I32, 0)
        self.lane, self.lanes = None, 1
        try:
            return self.emit_index(e)
        finally:
            self.lane, self.lanes = saved[0], saved[1]
            if saved[2] is None:
                del self.fn.vars[saved[0]]
            else:
                self.fn.vars[saved[0]] = saved[2]

    # ------------------------------------------------------------ leaves
    def _var(self, e: Var, mask):
        if e.name == self.lane:
            return self.iota()
        try:
            return self.fn.vars[e.name]
        except KeyError:
            raise BuildError(f"llvm codegen: variable {e.name} is used outside its loop") from None

    def _int(self, e: IntImm, mask):
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
            return ir.Constant(a.type, ((v + 2 ** 31) % 2 ** 32) - 2 ** 31)
        if isinstance(e, (Add, Sub)) and cb == 0:
            return a
        if isinstance(e, Add) and ca == 0:
            return b
        if isinstance(e, Mul) and (ca == 1 or cb == 1):
            return b if ca == 1 else a
        flags = ("nsw",) if getattr(self, "in_index", False) else ()
        op = {Add: self.b.add, Sub: self.b.sub, Mul: self.b.mul}[type(e)]
        return op(a, b, flags=flags)

    def _div(self, e, mask):
        a, b = self.unify(self.emit(e.a, mask), self.emit(e.b, mask))
        if is_float(a.type):
            if isinstance(e, Div):
                return self.b.fdiv(a, b)
            q = self.call_intr("llvm.floor", [self.b.fdiv(a, b)])
            if isinstance(e, FloorDiv):
                return q
            return self.b.fsub(a, self.b.fmul(q, b))
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
    def _logic(self, e, mask):
        is_and = isinstance(e, And)
        a = self.emit(e.a, mask)
        if not has_unsafe(e.b):
            a, b = self.unify(a, self.emit(e.b, mask))
            return self.b.and_(a, b) if is_and else self.b.or_(a, b)
        if lanes_of(a) == 1:
            short = lambda: ir.Constant(I1, 0 if is_and else 1)  # noqa: E731
            rhs = lambda: self.emit(e.b, mask)  # noqa: E731
            return self.branch_value(a, rhs, short) if is_and else \
                self.branch_value(a, short, rhs)
        take = a if is_and else self.b.xor(a, splat_const(a.type, 1))
        a, b = self.unify(a, self.emit(e.b, self.and_mask(mask, take)))
        return self.b.and_(a, b) if is_and else self.b.or_(a, b)

    def _select(self, e: Select, mask):
        c = self.emit(e.cond, mask)
        if not (has_unsafe(e.true_value) or has_unsafe(e.false_value)):
            t, f = self.emit(e.true_value, mask), self.emit(e.false_value, mask)
            n = max(lanes_of(c), lanes_of(t), lanes_of(f))
            return self.b.select(self.splat(c, n), self.splat(t, n), self.splat(f, n))
        if lanes_of(c) == 1:
            return self.branch_value(c, lambda: self.emit(e.true_value, mask),
                                     lambda: self.emit(e.false_value, mask))
        t = self.emit(e.true_value, self.and_mask(mask, c))
        f = self.emit(e.false_value, self.and_mask(mask, self.b.xor(c, splat_const(c.type, 1))))
        n = lanes_of(c)
        return self.b.select(c, self.splat(t, n), self.splat(f, n))

    def and_mask(self, mask, m):
        return m if mask is None else self.b.and_(mask, m)

    def branch_value(self, cond, then_fn, else_fn) -> ir.Value:
        """if cond then then_fn() else else_fn(), evaluating only the taken side (a phi)."""
        then_bb = self.b.append_basic_block()
        else_bb = self.b.append_basic_block()
        done_bb = self.b.append_basic_block()
        self.b.cbranch(cond, then_bb, else_bb)
        outs = []
        for bb, fn in ((then_bb, then_fn), (else_bb, else_fn)):
            self.b.position_at_end(bb)
            value = fn()
            outs.append((value, self.b.block))
        n = max(lanes_of(v) for v, _ in outs)
        incoming = []
        for value, end_bb in outs:
            self.b.position_at_end(end_bb)
            incoming.append((self.splat(value, n), end_bb))
            self.b.branch(done_bb)
        self.b.position_at_end(done_bb)
        phi = self.b.phi(incoming[0][0].type)
        for value, bb in incoming:
            phi.add_incoming(value, bb)
        return phi

    # ------------------------------------------------------------ casts and calls
    def _cast(self, e: Cast, mask):
        v = self.emit(e.value, mask)
        src, dst = e.value.dtype, e.dtype
        n = lanes_of(v)
        to = reg_type(dst, n)
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
        if e.op in ("exp", "log", "sqrt", "tanh"):
            return self.call_intr(f"llvm.{e.op}", [x])
        if e.op == "abs":
            if is_float(x.type):
                return self.call_intr("llvm.fabs", [x])
            neg = self.b.sub(splat_const(x.type, 0), x)
            return self.b.select(self.b.icmp_signed("<", x, splat_const(x.type, 0)), neg, x)
        if e.op == "sigmoid":
            one = splat_const(x.type, 1.0)
            ex = self.call_intr("llvm.exp", [self.b.fneg(x)])
            return self.b.fdiv(one, self.b.fadd(one, ex))
        raise BuildError(f"llvm codegen: unknown math function {e.op!r}")

    # ------------------------------------------------------------ memory
    def _load(self, e: BufferLoad, mask):
        ptr = self.fn.buffer_ptr(e.buffer)
        mt = mem_type(e.buffer.dtype)
        if self.lane is None:
            return self.from_mem(self.b.load(self.gep(ptr, e), typ=mt), e.buffer.dtype)
        coeff = flat_coeff(e.buffer.shape, e.indices, self.lane)
        if coeff == 0:
            return self.guarded_scalar_load(ptr, e, mask)
        if coeff == 1:
            base = self.gep(ptr, e, lane0=True, inbounds=mask is None)
            vt = mem_type(e.buffer.dtype, self.lanes)
            if mask is None:
                v = self.b.load(base, typ=vt, align=mt_align(mt))
            else:
                fn = self.fn.module.declare(f"llvm.masked.load.{suffix(vt)}.p0", vt,
                                            [PTR, I32, mask.type, vt])
                v = self.b.call(fn, [base, ir.Constant(I32, mt_align(mt)), mask,
                                     ir.Constant(vt, ir.Undefined)])
            return self.from_mem(v, e.buffer.dtype)
        ptrs = self.gep(ptr, e, inbounds=mask is None)
        vt = mem_type(e.buffer.dtype, self.lanes)
        fn = self.fn.module.declare(f"llvm.masked.gather.{suffix(vt)}.{suffix(ptrs.type)}", vt,
                                    [ptrs.type, I32, ir.VectorType(I1, self.lanes), vt])
        v = self.b.call(fn, [ptrs, ir.Constant(I32, mt_align(mt)),
                             mask if mask is not None else self.all_true(self.lanes),
                             ir.Constant(vt, ir.Undefined)])
        return self.from_mem(v, e.buffer.dtype)

    def guarded_scalar_load(self, ptr, e: BufferLoad, mask):
        """A lane-invariant load; under a mask it runs only if some lane is active."""
        def load():
            return self.from_mem(self.b.load(self.gep(ptr, e, lane0=True), typ=mem_type(
                e.buffer.dtype)), e.buffer.dtype)
        if mask is None:
            return load()
        bits = self.b.bitcast(mask, ir.IntType(self.lanes))
        any_on = self.b.icmp_unsigned("!=", bits, ir.Constant(ir.IntType(self.lanes), 0))
        zero = ir.Constant(reg_type(e.buffer.dtype), 0)
        return self.branch_value(any_on, load, lambda: zero)

    def from_mem(self, v: ir.Value, dtype: str) -> ir.Value:
        if dtype == "bool":
            return self.b.icmp_unsigned("!=", v, splat_const(v.type, 0))
        return v

    def to_mem(self, v: ir.Value, dtype: str) -> ir.Value:
        if dtype == "bool":
            return self.b.zext(v, mem_type("bool", lanes_of(v)))
        return v

    def gep(self, ptr, access, lane0: bool = False, inbounds: bool = True) -> ir.Value:
        """Address of an access (a BufferLoad or BufferStore); a vector of addresses when its
        index depends on the lane, unless ``lane0`` asks for the address of lane 0."""
        idx = self.flat(access.buffer.shape, access.indices, lane0)
        g = self.b.gep(ptr, [idx], inbounds=inbounds,
                       source_etype=mem_type(access.buffer.dtype))
        if isinstance(idx.type, ir.VectorType):
            g.type = ir.VectorType(PTR, idx.type.count)
        return g

    def flat(self, shape: tuple, indices: tuple, lane0: bool) -> ir.Value:
        """Row-major flat index as i64 (scalar or vector)."""
        acc = None
        for dim, idx in zip(shape, indices):
            v = self.at_lane0(idx) if (lane0 and self.lane) else self.emit_index(idx)
            v = self.sext64(v)
            if acc is None:
                acc = v
                continue
            acc, v = self.unify(self.mul64(acc, dim), v)
            acc = self.add64(acc, v)
        return acc if acc is not None else ir.Constant(I64, 0)

    def sext64(self, v):
        c = const_int(v)
        if c is not None:
            return ir.Constant(I64, c)
        return self.b.sext(v, I64 if lanes_of(v) == 1 else ir.VectorType(I64, lanes_of(v)))

    def mul64(self, v, k: int):
        c = const_int(v)
        if c is not None:
            return ir.Constant(I64, c * k)
        return v if k == 1 else self.b.mul(v, splat_const(v.type, k), flags=("nsw",))

    def add64(self, a, b):
        ca, cb = const_int(a), const_int(b)
        if ca is not None and cb is not None:
            return ir.Constant(I64, ca + cb)
        if cb == 0:
            return a
        if ca == 0:
            return b
        return self.b.add(a, b, flags=("nsw",))


def mt_align(t: ir.Type) -> int:
    t = scalar_type(t)
    return {F32: 4, F64: 8, I32: 4}.get(t, 1)


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
