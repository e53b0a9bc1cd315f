"""Memory accesses and index arithmetic of the expression emitter.

Addresses are flat row-major indices in i64 (``emit_index``); inside a vectorized
loop an access is classified by the lane coefficient of its flat index (see
``ExprEmitter``). Index values and addresses are reused within a basic block, and
per-node facts (lane coefficients, purity) are memoized by node identity.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...errors import BuildError
from ...ir.expr import BufferLoad, IntImm, Var
from ...ir.functor import walk_expr
from . import strided
from .analysis import affine_form, has_unsafe, lane_stride
from .types import (F32, F64, I1, I32, I64, PTR, const_int, lanes_of, mem_type, poison,
                    scalar_type, splat_const, suffix)


class AccessEmitter:
    """Loads, addresses and index expressions; mixed into ``ExprEmitter``."""

    def memo(self, kind: str, node, compute):
        return self.fn.mod.memo(kind, node, compute)

    def canonical(self, node):
        """One object per structurally equal node (hashed once per object), so caches keyed
        by identity still share equal expressions written twice."""
        interned = self.fn.mod.interned
        return self.memo("canon", node, lambda: interned.setdefault(node, node))

    def coeff(self, access):
        """Lane coefficient of an access's flat index (see ``analysis.lane_stride``)."""
        return self.memo(f"coeff {self.lane} {access.buffer.shape}", access.indices,
                         lambda: lane_stride(access.buffer.shape, access.indices, self.lane))

    def bound(self, name: str) -> ir.Value:
        """The i64 value bound to loop variable ``name``."""
        try:
            return self.fn.vars[name]
        except KeyError:
            raise BuildError(f"llvm codegen: variable {name} is used outside its loop") from None

    # ------------------------------------------------------------ indices
    def emit_index(self, e, mask=None) -> ir.Value:
        """An int32 index expression as i64 (scalar, or vector of lanes), with nsw
        arithmetic: indices of in-bounds accesses do not overflow, and i64 spares the
        sign extensions that LLVM would otherwise have to widen away. Reused within a
        basic block like addresses (see ``gep``) unless it loads memory or divides by a
        variable (then its value may depend on a store or a guard in between)."""
        key = None
        if not isinstance(e, (Var, IntImm)) and self.memo("pure", e, lambda: not has_unsafe(e)):
            key = ("index", id(self.canonical(e)), self.lane, self.lanes, self.bindings(e))
            hit = self.cached(key)
            if hit is not None:
                return hit
        prev, self.in_index = self.in_index, True
        try:
            value = self.emit(e, mask)
        finally:
            self.in_index = prev
        if key is not None:
            self.fn.address_cache[key] = value
        return value

    def bindings(self, exprs) -> tuple:
        """The values bound to the variables of an expression (or a tuple of them)."""
        names = self.memo("vars", exprs, lambda: index_vars(
            exprs if isinstance(exprs, tuple) else (exprs,)))
        return tuple(_value_key(self.fn.vars.get(n)) for n in names)

    def at_lane0(self, e) -> ir.Value:
        """``e`` as a scalar for the first lane (the base of a contiguous access; a load
        inside it has a lane-invariant index and is not masked)."""
        saved = (self.lane, self.lanes)
        self.lane, self.lanes = None, 1
        try:
            return self.emit_index(e)
        finally:
            self.lane, self.lanes = saved

    # ------------------------------------------------------------ memory
    def in_stack_bounds(self, access) -> bool:
        """Is every lane's element of ``access`` inside its buffer, a stack buffer? Then
        touching it cannot fault, and a lane mask need not reach the memory operation.
        Known when the flat index is affine in loop variables of known ranges."""
        numel = self.fn.stack_numel.get(access.buffer.name)
        if numel is None:
            return False
        const, terms, atoms = self.memo(f"affine {access.buffer.shape}", access.indices,
                                        lambda: affine_form(access.buffer.shape,
                                                            access.indices))
        if atoms:
            return False
        lo = hi = const
        for name, coef in terms:
            r = self.fn.ranges.get(name)
            if r is None:
                return False
            a, b = coef * r[0], coef * r[1]
            lo, hi = lo + min(a, b), hi + max(a, b)
        return lo >= 0 and hi < numel

    def _load(self, e: BufferLoad, mask):
        ptr = self.fn.buffer_ptr(e.buffer)
        if mask is not None and self.in_stack_bounds(e):
            mask = None     # cannot fault; the lanes that are off are not used
        mt = mem_type(e.buffer.dtype)
        if self.lane is None:
            return self.scalar_load(ptr, e, mask, lane0=False)
        coeff = self.coeff(e)
        if coeff == 0:
            guard = None if mask is None else self.guard_for(ir.Constant(I1, 0), mask)
            return self.scalar_load(ptr, e, guard, lane0=True)
        if mask is not None:
            mask = self.splat(mask, self.lanes)
        if coeff == 1:
            base = self.gep(ptr, e, lane0=True, inbounds=mask is None, mask=mask)
            vt = mem_type(e.buffer.dtype, self.lanes)
            if mask is None:
                v = self.b.load(base, typ=vt, align=mt_align(mt))
            else:
                fn = self.fn.mod.declare(f"llvm.masked.load.{suffix(vt)}.p0", vt,
                                         [PTR, I32, mask.type, vt])
                v = self.b.call(fn, [base, ir.Constant(I32, mt_align(mt)), mask,
                                     poison(vt)])
            return self.from_mem(v, e.buffer.dtype)
        if coeff is not None and 2 <= coeff <= strided.MAX_SHUFFLED_STRIDE \
                and self.lanes >= coeff:
            return self.from_mem(strided.strided_load(self, ptr, e, coeff, mask,
                                                      mt_align(mt)), e.buffer.dtype)
        ptrs = self.gep(ptr, e, inbounds=mask is None, mask=mask)
        vt = mem_type(e.buffer.dtype, self.lanes)
        fn = self.fn.mod.declare(f"llvm.masked.gather.{suffix(vt)}.{suffix(ptrs.type)}", vt,
                                 [ptrs.type, I32, ir.VectorType(I1, self.lanes), vt])
        v = self.b.call(fn, [ptrs, ir.Constant(I32, mt_align(mt)),
                             mask if mask is not None else self.all_true(self.lanes),
                             poison(vt)])
        return self.from_mem(v, e.buffer.dtype)

    def scalar_load(self, ptr, e: BufferLoad, guard, lane0: bool) -> ir.Value:
        """One element (lane-invariant in vector code); with the guard off it reads the
        buffer's first element instead, which always exists."""
        addr = self.gep(ptr, e, lane0=lane0, inbounds=guard is None, mask=guard)
        if guard is not None:
            addr = self.b.select(guard, addr, ptr)
        return self.from_mem(self.b.load(addr, typ=mem_type(e.buffer.dtype)), e.buffer.dtype)

    def any_lane(self, mask: ir.Value) -> ir.Value:
        """i1: some lane of ``mask`` is on."""
        bits = self.b.bitcast(mask, ir.IntType(lanes_of(mask)))
        return self.b.icmp_unsigned("!=", bits, ir.Constant(bits.type, 0))

    def from_mem(self, v: ir.Value, dtype: str) -> ir.Value:
        if dtype == "bool":
            return self.b.icmp_unsigned("!=", v, splat_const(v.type, 0))
        if dtype == "int32" and self.in_index:
            return self.as_index(v)
        return v

    def to_mem(self, v: ir.Value, dtype: str) -> ir.Value:
        if dtype == "bool":
            return self.b.zext(v, mem_type("bool", lanes_of(v)))
        return v

    def gep(self, ptr, access, lane0: bool = False, inbounds: bool = True,
            mask=None) -> ir.Value:
        """Address of an access (a BufferLoad or BufferStore); a vector of addresses when its
        index depends on the lane, unless ``lane0`` asks for the address of lane 0.

        Addresses are reused within a basic block (unrolled tiles compute the same
        address many times): less IR to build, print, parse and optimize. An index
        that loads memory (indirect access) is not reused, and under ``mask`` its loads
        are guarded too.
        """
        key = None
        if self.memo("pure", access.indices,
                     lambda: not any(has_unsafe(i) for i in access.indices)):
            key = self.address_key(ptr, access, lane0, inbounds)
            hit = self.cached(key)
            if hit is not None:
                return hit
        if key is not None and (lane0 or self.lane is None):
            idx = self.split_flat(access.buffer.shape, access.indices)
        else:
            idx = self.flat(access.buffer.shape, access.indices, lane0, mask,
                            narrow=not lane0 and self.lane is not None
                            and offsets_fit_i32(access.buffer))
        g = self.b.gep(ptr, [idx], inbounds=inbounds,
                       source_etype=mem_type(access.buffer.dtype))
        if isinstance(idx.type, ir.VectorType):
            g.type = ir.VectorType(PTR, idx.type.count)
        if key is not None:
            self.fn.address_cache[key] = g
        return g

    def address_key(self, ptr, access, lane0: bool, inbounds: bool) -> tuple:
        return (id(ptr), access.buffer.dtype, access.buffer.shape,
                id(self.canonical(access.indices)), lane0,
                inbounds, self.lane, self.lanes, self.bindings(access.indices))

    def cached(self, key):
        fn = self.fn
        if fn.address_block is not self.b.block:
            fn.address_cache.clear()
            fn.address_block = self.b.block
            return None
        return fn.address_cache.get(key)

    def split_flat(self, shape: tuple, indices: tuple) -> ir.Value:
        """The scalar flat index of pure ``indices`` as (variable part) + constant. The
        variable part sums the terms of variables not bound to constants, in one order,
        and is reused within a basic block; unrolled copies (their loop variables bound
        to constants) then address one base plus constant offsets, which LLVM's alias
        analysis tells apart, so it keeps an accumulator tile in registers and forwards
        its stores."""
        const, terms, atoms = self.memo(f"affine {shape}", indices,  # a tuple may index two shapes
                                        lambda: affine_form(shape, indices))
        saved = (self.lane, self.lanes)
        self.lane, self.lanes = None, 1
        try:
            live = []
            for name, coef in terms:
                v = self.bound(name)
                c = const_int(v)
                if c is not None:
                    const += c * coef
                else:
                    live.append((name, coef, v))
            key = ("split", tuple((n, k, id(v)) for n, k, v in live),
                   tuple((k, id(self.canonical(a))) for k, a in atoms),
                   self.bindings(tuple(a for _, a in atoms)) if atoms else ())
            acc = self.cached(key)
            if acc is None:
                acc = ir.Constant(I64, 0)
                for _, coef, v in live:
                    acc = self.add64(acc, self.mul64(v, coef))
                for coef, atom in atoms:
                    acc = self.add64(acc, self.mul64(self.sext64(self.emit_index(atom)), coef))
                self.fn.address_cache[key] = acc
            return self.add64(acc, ir.Constant(I64, const))
        finally:
            self.lane, self.lanes = saved

    def flat(self, shape: tuple, indices: tuple, lane0: bool, mask=None,
             narrow: bool = False) -> ir.Value:
        """Row-major flat index as i64 (scalar or vector). ``narrow``: a vector index as
        <n x i32>, summed in i32 (see ``offsets_fit_i32``), so that the address vector
        stays base + sign-extended i32 lanes through LLVM's folds."""
        acc = None
        for dim, idx in zip(shape, indices):
            v = self.at_lane0(idx) if (lane0 and self.lane) else self.emit_index(idx, mask)
            v = self.as_int32(v) if narrow else self.sext64(v)
            if acc is None:
                acc = v
                continue
            if narrow:
                acc, v = self.unify(self.mul32(acc, dim), v)
                acc = self.add32(acc, v)
                continue
            acc, v = self.unify(self.mul64(acc, dim), v)
            acc = self.add64(acc, v)
        if acc is None:
            return ir.Constant(I32 if narrow else I64, 0)
        return self.sext64(acc) if narrow and lanes_of(acc) == 1 else acc

    def mul32(self, v, k: int):
        """i32 arithmetic of a narrowed index, without wrap flags: a lane a mask turns off
        may overflow, and its address is never used."""
        c = const_int(v)
        if c is not None:
            return self.as_int32(ir.Constant(I64, c * k))
        return v if k == 1 else self.b.mul(v, splat_const(v.type, k))

    def add32(self, a, b):
        ca, cb = const_int(a), const_int(b)
        if ca is not None and cb is not None:
            return self.as_int32(ir.Constant(I64, ca + cb))
        if cb == 0:
            return a
        if ca == 0:
            return b
        return self.b.add(a, b)

    def sext64(self, v):
        if scalar_type(v.type) == I64:
            return v
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


def _value_key(v):
    """Identity of a bound variable value: constants by value (their objects come and go,
    so ids could repeat), other values by identity (the module keeps them alive)."""
    c = const_int(v)
    return ("const", c) if c is not None else id(v)


def index_vars(indices: tuple) -> tuple:
    """Names of the variables in index expressions, sorted."""
    return tuple(sorted({x.name for e in indices for x in walk_expr(e) if isinstance(x, Var)}))


def offsets_fit_i32(buf) -> bool:
    """Does every in-bounds flat index of ``buf`` fit in int32 (its element count is
    below 2**31)? Then a vector of addresses is its base plus an i32 index vector, which
    x86 gathers and scatters with 32-bit indices (AVX-512: one ``vgatherdps`` per 16
    lanes instead of two ``vgatherqps`` of 64-bit addresses; LLVM's AVX2 tuning of
    Haswell and later expands gathers into scalar loads either way). Lanes that a mask
    turns off may hold any index: they touch no memory."""
    n = 1
    for d in buf.shape:
        n *= d
    return n < 2 ** 31


def mt_align(t: ir.Type) -> int:
    t = scalar_type(t)
    return {F32: 4, F64: 8, I32: 4}.get(t, 1)

