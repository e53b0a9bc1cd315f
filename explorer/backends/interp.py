"""The reference interpreter: runs any lowered program with Python semantics.

The lowered nest is translated to a plain Python function over flat
``array.array`` buffers (float32 storage rounds like the hardware does) and
compiled once with ``compile``: the source is generated from our own IR, never
from user text. Thread-bound loops run serially, each as an ordinary loop;
``shared`` buffers are allocated once per thread block and ``local`` ones per
thread by lowering, so a GPU schedule computes here what it computes on the
device. It is the semantic reference for tests, teaching and GPU schedules on
machines without a GPU.
"""
from __future__ import annotations

import array
import math

import numpy as np

from ..errors import BuildError
from ..ir.expr import (BinaryOp, BufferLoad, Call, Cast, Div, Expr, FloatImm, IntImm, Max, Min,
                       Not, Select, Var, FLOAT_DTYPES)
from ..ir.stmt import (Allocate, BufferStore, For, IfThenElse, PrimFunc, SeqStmt, Stmt)
from .kernel import Kernel

_TYPECODE = {"float32": "f", "float64": "d", "int32": "i", "bool": "b"}
_PYOP = {"+": "+", "-": "-", "*": "*", "//": "//", "%": "%", "<": "<", "<=": "<=",
         "==": "==", "!=": "!=", "and": "and", "or": "or"}


def _exp(x):
    return math.exp(x) if x < 700.0 else math.inf


def _log(x):
    return math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)


def _sqrt(x):
    return math.sqrt(x) if x >= 0 else math.nan


def _sigmoid(x):
    return 1.0 / (1.0 + _exp(-x))


def _div(a, b):
    if b == 0:
        return math.copysign(math.inf, a) if a != 0 else math.nan
    return a / b


_RUNTIME = {"_exp": _exp, "_log": _log, "_sqrt": _sqrt, "_tanh": math.tanh, "_abs": abs,
            "_sigmoid": _sigmoid, "_div": _div, "inf": math.inf, "nan": math.nan,
            "_array": array.array}


class _PyGen:
    def __init__(self, func: PrimFunc):
        self.func = func
        self.lines: list = []

    def flat_index(self, buf, idx) -> str:
        parts, stride = [], 1
        for d in range(len(buf.shape) - 1, -1, -1):
            e = self.expr(idx[d])
            parts.append(e if stride == 1 else f"({e})*{stride}")
            stride *= buf.shape[d]
        return " + ".join(reversed(parts)) if parts else "0"

    def expr(self, e: Expr) -> str:
        if isinstance(e, Var):
            return "v_" + e.name
        if isinstance(e, IntImm):
            return str(e.value)
        if isinstance(e, FloatImm):
            v = e.value
            return "inf" if v == math.inf else "(-inf)" if v == -math.inf else repr(v)
        if isinstance(e, BufferLoad):
            return f"b_{e.buffer.name}[{self.flat_index(e.buffer, e.indices)}]"
        if isinstance(e, (Min, Max)):
            return f"{e.symbol}({self.expr(e.a)}, {self.expr(e.b)})"
        if isinstance(e, Div):
            if e.a.dtype in FLOAT_DTYPES:
                return f"_div({self.expr(e.a)}, {self.expr(e.b)})"
            return f"({self.expr(e.a)} // {self.expr(e.b)})"
        if isinstance(e, BinaryOp):
            return f"({self.expr(e.a)} {_PYOP[e.symbol]} {self.expr(e.b)})"
        if isinstance(e, Not):
            return f"(not {self.expr(e.a)})"
        if isinstance(e, Select):
            return (f"({self.expr(e.true_value)} if {self.expr(e.cond)} "
                    f"else {self.expr(e.false_value)})")
        if isinstance(e, Call):
            return f"_{e.op}({', '.join(self.expr(a) for a in e.args)})"
        if isinstance(e, Cast):
            conv = "float" if e.dtype in FLOAT_DTYPES else "int" if e.dtype == "int32" else "bool"
            return f"{conv}({self.expr(e.value)})"
        raise BuildError(f"interp: cannot translate expression {type(e).__name__}")

    def stmt(self, s: Stmt, d: int):
        pad = "    " * d
        if isinstance(s, For) and d >= 12 and isinstance(s.body, For):
            self._fused_loops(s, d)
        elif isinstance(s, For):
            self.lines.append(f"{pad}for v_{s.var.name} in range({s.extent}):")
            self.stmt(s.body, d + 1)
        elif isinstance(s, SeqStmt):
            for x in s.stmts:
                self.stmt(x, d)
        elif isinstance(s, IfThenElse):
            self.lines.append(f"{pad}if {self.expr(s.cond)}:")
            self.stmt(s.then_case, d + 1)
            if s.else_case is not None:
                self.lines.append(f"{pad}else:")
                self.stmt(s.else_case, d + 1)
        elif isinstance(s, Allocate):
            b = s.buffer
            n = int(np.prod(b.shape))
            # NaN-filled: a read before any write shows up in the result
            zero = "nan" if b.dtype in FLOAT_DTYPES else "0"
            self.lines.append(f"{pad}b_{b.name} = _array('{_TYPECODE[b.dtype]}', [{zero}]) * {n}")
            self.stmt(s.body, d)
        elif isinstance(s, BufferStore):
            val = self.expr(s.value)
            if s.buffer.dtype == "int32" and s.value.dtype == "int32":
                val = f"_wrap32({val})"
            self.lines.append(f"{pad}b_{s.buffer.name}[{self.flat_index(s.buffer, s.indices)}] "
                              f"= {val}")
        else:
            raise BuildError(f"interp: unexpected statement {type(s).__name__}; lower it first")

    def _fused_loops(self, s: For, d: int):
        """Python allows 20 nested blocks: deep perfectly nested loops run as one."""
        chain = [s]
        while isinstance(chain[-1].body, For):
            chain.append(chain[-1].body)
        pad, total = "    " * d, 1
        for lp in chain:
            total *= lp.extent
        self.lines.append(f"{pad}for _f{d} in range({total}):")
        rest = f"_f{d}"
        for lp in reversed(chain[1:]):
            self.lines.append(f"{pad}    {rest}, v_{lp.var.name} = divmod({rest}, {lp.extent})")
        self.lines.append(f"{pad}    v_{chain[0].var.name} = {rest}")
        self.stmt(chain[-1].body, d + 1)

    def source(self) -> str:
        args = ", ".join("b_" + p.name for p in self.func.params)
        self.lines = [f"def kernel({args}):"]
        self.stmt(self.func.body, 1)
        self.lines.append("    return None")
        return "\n".join(self.lines) + "\n"


def _wrap32(v: int) -> int:
    return ((v + 2 ** 31) % 2 ** 32) - 2 ** 31


class InterpKernel(Kernel):
    target_kind = "interp"

    def __init__(self, func: PrimFunc, lowered: PrimFunc):
        src = _PyGen(lowered).source()
        super().__init__(func, lowered, src)
        scope = dict(_RUNTIME, _wrap32=_wrap32)
        exec(compile(src, f"<interp {func.name}>", "exec"), scope)  # our own generated code
        self._fn = scope["kernel"]

    def _run(self, arrays):
        flat = []
        for p, a in zip(self.func.params, arrays):
            buf = array.array(_TYPECODE[p.dtype])
            buf.frombytes(a.tobytes())
            flat.append(buf)
        self._fn(*flat)
        for a, buf in zip(arrays, flat):
            a[...] = np.frombuffer(buf, dtype=a.dtype).reshape(a.shape)


def build_interp(func: PrimFunc, lowered: PrimFunc) -> InterpKernel:
    return InterpKernel(func, lowered)
