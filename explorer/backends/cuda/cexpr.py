"""IR expressions as CUDA C expressions, with the interpreter's semantics.

- Integer ``//`` and ``%`` floor (as numpy and the interpreter do); C's ``/`` and ``%``
  truncate, so they are used only where the dividend is provably non-negative and the
  divisor a positive constant, and the ``explorer_floordiv``/``explorer_floormod``
  helpers elsewhere (:data:`HELPERS`; the generator defines the ones it used).
- float32 arithmetic stays float32 (``f``-suffixed literals and functions), float64
  uses the double functions; ``min``/``max`` are ``fminf``/``fmaxf`` on floats.
- Parentheses only where C's precedence needs them, so the source reads like the IR.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import BuildError
from ...ir.arith import NonAffine, int_bounds, simplify
from ...ir.expr import (LE, LT, Add, And, BinaryOp, BufferLoad, Call, Cast, Div, EQ, Expr,
                        FloatImm, FloorDiv, FloorMod, IntImm, Max, Min, Mul, NE, Not, Or,
                        Select, Sub, Var, FLOAT_DTYPES)
from .module import CTYPES

HELPERS = {
    "explorer_floordiv": (
        "__device__ __forceinline__ int explorer_floordiv(int a, int b) {\n"
        "    int q = a / b;\n"
        "    return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;\n"
        "}"),
    "explorer_floormod": (
        "__device__ __forceinline__ int explorer_floormod(int a, int b) {\n"
        "    int r = a % b;\n"
        "    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n"
        "}"),
    "explorer_abs": (
        "__device__ __forceinline__ int explorer_abs(int a) { return a < 0 ? -a : a; }"),
}

# names an IR variable or buffer cannot keep in C: C++ keywords, CUDA built-ins, the math
# functions and helpers the source calls, and the generator's own temporaries
RESERVED = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char16_t
char32_t char8_t class co_await co_return co_yield compl concept const const_cast consteval
constexpr constinit continue decltype default delete do double dynamic_cast else enum
explicit export extern false float for friend goto if inline int long mutable namespace new
noexcept not not_eq nullptr operator or or_eq private protected public register
reinterpret_cast requires restrict return short signed sizeof static static_assert
static_cast struct switch template this thread_local throw true try typedef typeid typename
union unsigned using virtual void volatile wchar_t while xor xor_eq
threadIdx blockIdx blockDim gridDim warpSize INFINITY NAN min max exp expf log logf sqrt
sqrtf tanh tanhf fabs fabsf fmax fmaxf fmin fminf erff main red_tid off
explorer_floordiv explorer_floormod explorer_abs explorer_shared
""".split())


def cname(name: str) -> str:
    """``name`` as a C identifier: unchanged when it is one and not reserved, otherwise
    with other characters replaced and a trailing underscore."""
    if name.isidentifier() and name.isascii() and name not in RESERVED \
            and not name.startswith("__"):
        return name
    fixed = "".join(ch if ch.isascii() and (ch.isalnum() or ch == "_") else "_" for ch in name)
    if not fixed or fixed[0].isdigit():
        fixed = "v_" + fixed
    return fixed.lstrip("_") + "_" if fixed.startswith("__") else fixed + "_"


def subst_all(indices: tuple, mapping: dict) -> tuple:
    """``substitute`` on each index."""
    from ...ir.functor import substitute
    return tuple(substitute(i, mapping) for i in indices) if mapping else tuple(indices)


class RawName(Var):
    """A name the generator made (``A_v0.x``, a partial result): printed as it is."""


# precedence: higher binds tighter
_PREC = {Mul: 13, Div: 13, FloorDiv: 13, FloorMod: 13, Add: 12, Sub: 12, LT: 10, LE: 10,
         EQ: 9, NE: 9, And: 5, Or: 4}
_SYMBOL = {Add: "+", Sub: "-", Mul: "*", Div: "/", FloorDiv: "/", FloorMod: "%", LT: "<",
           LE: "<=", EQ: "==", NE: "!=", And: "&&", Or: "||"}
_UNARY, _TERNARY, _ATOM = 15, 3, 20
_FLOAT_FN = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "abs": "fabs"}


def ctype(dtype: str) -> str:
    return CTYPES[dtype]


def float_literal(v: float, dtype: str) -> str:
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    if math.isnan(v):
        return "(INFINITY - INFINITY)" if dtype == "float32" else "(double)(INFINITY - INFINITY)"
    if dtype == "float32":
        text = str(np.float32(v))
        text = text if any(ch in text for ch in ".en") else text + ".0"
        return text + "f"
    text = repr(float(v))
    return text if any(ch in text for ch in ".en") else text + ".0"


class CExpr:
    """Prints expressions; ``load`` prints a buffer access (the generator overrides what
    a reduction's partial or a vector lane stands for), ``ranges`` are the loop ranges in
    scope (for the sign of a dividend)."""

    def __init__(self, load, ranges: dict):
        self.load = load
        self.ranges = ranges
        self.helpers: set = set()

    def __call__(self, e: Expr) -> str:
        return self.print(e)[0]

    def print(self, e: Expr) -> tuple:
        """(text, precedence)"""
        if isinstance(e, RawName):
            return e.name, _ATOM
        if isinstance(e, Var):
            return cname(e.name), _ATOM
        if isinstance(e, IntImm):
            if e.dtype == "bool":
                return ("true" if e.value else "false"), _ATOM
            return (str(e.value), _ATOM) if e.value >= 0 else (f"({e.value})", _ATOM)
        if isinstance(e, FloatImm):
            text = float_literal(e.value, e.dtype)
            return text, _UNARY if text.startswith("-") else _ATOM
        if isinstance(e, BufferLoad):
            return self.load(e), _ATOM
        if isinstance(e, (Min, Max)):
            return self._minmax(e), _ATOM
        if isinstance(e, (FloorDiv, FloorMod, Div)) and e.a.dtype not in FLOAT_DTYPES:
            return self._int_div(e)
        if isinstance(e, (FloorDiv, FloorMod)):
            raise BuildError("cuda codegen: floor division of floats has no CUDA C form here; "
                             "cast to int32 first")
        if isinstance(e, BinaryOp):
            return self._binary(e)
        if isinstance(e, Not):
            return "!" + self._wrap(e.a, _UNARY), _UNARY
        if isinstance(e, Select):
            return (f"{self._wrap(e.cond, _TERNARY + 1)} ? {self._wrap(e.true_value, _TERNARY)}"
                    f" : {self._wrap(e.false_value, _TERNARY)}"), _TERNARY
        if isinstance(e, Call):
            return self._call(e), _ATOM
        if isinstance(e, Cast):
            if e.dtype == e.value.dtype:
                return self.print(e.value)
            return f"({ctype(e.dtype)}){self._wrap(e.value, _UNARY)}", _UNARY
        raise BuildError(f"cuda codegen: cannot translate expression {type(e).__name__}")

    def wrap(self, e: Expr, need: int) -> str:
        """``e`` in parentheses unless it binds at least as tightly as precedence ``need``."""
        return self._wrap(e, need)

    def _wrap(self, e: Expr, need: int) -> str:
        text, prec = self.print(e)
        return text if prec >= need else f"({text})"

    def _binary(self, e: BinaryOp) -> tuple:
        prec = _PREC[type(e)]
        left = self._wrap(e.a, prec)
        # a - (b + c), a * (b / c), and for floats a + (b + c) (another rounding): the
        # right operand of a same-level op keeps its parentheses
        right = self._wrap(e.b, prec + 1)
        return f"{left} {_SYMBOL[type(e)]} {right}", prec

    def _minmax(self, e) -> str:
        name = "min" if isinstance(e, Min) else "max"
        if e.dtype == "float32":
            name = "f" + name + "f"
        elif e.dtype == "float64":
            name = "f" + name
        return f"{name}({self(e.a)}, {self(e.b)})"

    def _int_div(self, e) -> tuple:
        if self._nonneg(e.a) and isinstance(e.b, IntImm) and e.b.value > 0:
            op = "%" if isinstance(e, FloorMod) else "/"
            prec = _PREC[FloorDiv]
            return f"{self._wrap(e.a, prec)} {op} {self._wrap(e.b, prec + 1)}", prec
        name = "explorer_floormod" if isinstance(e, FloorMod) else "explorer_floordiv"
        self.helpers.add(name)
        return f"{name}({self(e.a)}, {self(e.b)})", _ATOM

    def _nonneg(self, e: Expr) -> bool:
        try:
            return int_bounds(simplify(e, self.ranges), self.ranges)[0] >= 0
        except NonAffine:
            return False

    def _call(self, e: Call) -> str:
        args = [self(a) for a in e.args]
        f32 = e.dtype == "float32"
        if e.op == "sigmoid":
            one = "1.0f" if f32 else "1.0"
            return f"({one} / ({one} + {'expf' if f32 else 'exp'}(-({args[0]}))))"
        if e.op == "abs" and e.dtype not in FLOAT_DTYPES:
            self.helpers.add("explorer_abs")
            return f"explorer_abs({args[0]})"
        if e.op not in _FLOAT_FN:
            raise BuildError(f"cuda codegen: no CUDA function for intrinsic {e.op!r}")
        return f"{_FLOAT_FN[e.op]}{'f' if f32 else ''}({', '.join(args)})"
