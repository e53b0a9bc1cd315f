"""LLVM types of our dtypes and small value helpers shared by the code generator."""
from __future__ import annotations

import functools

import llvmlite.ir as ir

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()

_REG = {"float32": F32, "float64": F64, "int32": I32, "bool": I1}
_MEM = {"float32": F32, "float64": F64, "int32": I32, "bool": I8}
ELEM_BYTES = {"float32": 4, "float64": 8, "int32": 4, "bool": 1}


def reg_type(dtype: str, lanes: int = 1) -> ir.Type:
    """Type of a value of ``dtype`` in registers (bool is i1)."""
    t = _REG[dtype]
    return t if lanes == 1 else ir.VectorType(t, lanes)


def mem_type(dtype: str, lanes: int = 1) -> ir.Type:
    """Type of an element of ``dtype`` in memory (bool is one byte, as numpy stores it)."""
    t = _MEM[dtype]
    return t if lanes == 1 else ir.VectorType(t, lanes)


def lanes_of(v: ir.Value) -> int:
    return v.type.count if isinstance(v.type, ir.VectorType) else 1


def scalar_type(t: ir.Type) -> ir.Type:
    return t.element if isinstance(t, ir.VectorType) else t


def is_float(t: ir.Type) -> bool:
    return isinstance(scalar_type(t), (ir.FloatType, ir.DoubleType))


def const_int(v: ir.Value):
    """The Python int of a scalar integer constant, else None (for folding)."""
    if isinstance(v, ir.Constant) and isinstance(v.type, ir.IntType) \
            and isinstance(v.constant, int):
        return v.constant
    return None


class TextConstant(ir.Constant):
    """A constant written as LLVM text (``poison``, ``splat (float 1.0)``): llvmlite would
    spell vector constants element by element, which costs time to print and to parse."""

    def __init__(self, typ: ir.Type, text: str):
        self.type = typ
        self.constant = text

    def _to_string(self) -> str:
        return f"{self.type} {self.constant}"

    def _get_reference(self) -> str:
        return self.constant


@functools.lru_cache(maxsize=4096)
def vector_const(element: ir.Type, values: tuple) -> ir.Constant:
    """The constant vector of ``values`` (a tuple of Python numbers), built once and shared
    (never mutated): a shuffle mask or an iota recurs thousands of times in an unrolled
    kernel, and llvmlite wraps every element of a new constant and prints each copy anew,
    where a shared one keeps its text (a fifth of the IR generation of a register-tiled
    conv2d)."""
    return ir.Constant(ir.VectorType(element, len(values)), list(values))


def poison(t: ir.Type) -> ir.Constant:
    return TextConstant(t, "poison")


def splat_const(t: ir.Type, value) -> ir.Constant:
    """A constant of type ``t`` (scalar or vector) with every lane ``value``."""
    if isinstance(t, ir.VectorType):
        return splat_of(ir.Constant(t.element, value), t.count)
    return ir.Constant(t, value)


def splat_of(c: ir.Constant, lanes: int) -> ir.Constant:
    """The vector constant with every lane the scalar constant ``c``."""
    return TextConstant(ir.VectorType(c.type, lanes), f"splat ({c.type} {c.get_reference()})")


def suffix(t: ir.Type) -> str:
    """Overload suffix of an intrinsic name: f32, v16f32, i32, ..."""
    base = {F32: "f32", F64: "f64", I32: "i32", I1: "i1", I8: "i8", I64: "i64"}
    if isinstance(t, ir.VectorType):
        inner = "p0" if isinstance(t.element, ir.PointerType) else base[t.element]
        return f"v{t.count}{inner}"
    return base[t]
