"""Immutable expression nodes.

Expressions are frozen dataclasses: structural equality and hashing come for
free, and every transformation builds new nodes. Variables are identified by
name (the schedule keeps loop names unique within a function), so two
functions that print the same are equal.

Python operators build expressions (``a + b``, ``a < b``); ``==`` stays
structural equality, use :func:`equal` for the comparison node.
"""
from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Union

DTYPES = ("float32", "float64", "int32", "bool")
FLOAT_DTYPES = ("float32", "float64")


def check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        from ..errors import ExplorerError
        raise ExplorerError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    return dtype


class Expr:
    """Base of all expression nodes; gives Python operator sugar."""

    dtype: str

    def __add__(self, o): return binary(Add, self, o)
    def __radd__(self, o): return binary(Add, o, self)
    def __sub__(self, o): return binary(Sub, self, o)
    def __rsub__(self, o): return binary(Sub, o, self)
    def __mul__(self, o): return binary(Mul, self, o)
    def __rmul__(self, o): return binary(Mul, o, self)
    def __truediv__(self, o): return binary(Div, self, o)
    def __rtruediv__(self, o): return binary(Div, o, self)
    def __floordiv__(self, o): return binary(FloorDiv, self, o)
    def __rfloordiv__(self, o): return binary(FloorDiv, o, self)
    def __mod__(self, o): return binary(FloorMod, self, o)
    def __rmod__(self, o): return binary(FloorMod, o, self)
    def __neg__(self): return binary(Sub, const(0, self.dtype), self)
    def __lt__(self, o): return binary(LT, self, o)
    def __le__(self, o): return binary(LE, self, o)
    def __gt__(self, o): return binary(LT, o, self)
    def __ge__(self, o): return binary(LE, o, self)
    def __and__(self, o): return binary(And, self, o)
    def __or__(self, o): return binary(Or, self, o)
    def __getstate__(self):   # pickled: the fields, not the analyses cached on the node
        return {k: v for k, v in self.__dict__.items() if k[0] != "_"}

    def __bool__(self):
        from ..errors import ExplorerError
        raise ExplorerError("an expression has no truth value: use equal(a, b), all_of(...) "
                            "or if_then_else(...) to build a condition")


@dataclass(frozen=True, eq=True)
class Var(Expr):
    name: str
    dtype: str = "int32"

    def __hash__(self):   # equal vars have equal names; a name's hash is cached by Python
        return hash(self.name)


@dataclass(frozen=True, eq=True)
class IntImm(Expr):
    value: int
    dtype: str = "int32"


@dataclass(frozen=True, eq=True)
class FloatImm(Expr):
    value: float
    dtype: str = "float32"


@dataclass(frozen=True, eq=True)
class BinaryOp(Expr):
    a: Expr
    b: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        e = self.a
        while type(e) in _ARITH:    # down a chain of sums without a call per level
            e = e.a
        return e.dtype


class Add(BinaryOp): symbol = "+"
class Sub(BinaryOp): symbol = "-"
class Mul(BinaryOp): symbol = "*"
class Div(BinaryOp): symbol = "/"
class FloorDiv(BinaryOp): symbol = "//"
class FloorMod(BinaryOp): symbol = "%"
class Min(BinaryOp): symbol = "min"
class Max(BinaryOp): symbol = "max"


_ARITH = frozenset((Add, Sub, Mul, Div, FloorDiv, FloorMod, Min, Max))  # dtype: their a's


class CmpOp(BinaryOp):
    @property
    def dtype(self) -> str:  # type: ignore[override]
        return "bool"


class LT(CmpOp): symbol = "<"
class LE(CmpOp): symbol = "<="
class EQ(CmpOp): symbol = "=="
class NE(CmpOp): symbol = "!="
class And(CmpOp): symbol = "and"
class Or(CmpOp): symbol = "or"


@dataclass(frozen=True, eq=True)
class Not(Expr):
    a: Expr
    dtype: str = "bool"


@dataclass(frozen=True, eq=True)
class Cast(Expr):
    dtype: str
    value: Expr


@dataclass(frozen=True, eq=True)
class Call(Expr):
    """A math intrinsic: exp, log, sqrt, tanh, abs, sigmoid."""
    op: str
    args: tuple
    dtype: str


@dataclass(frozen=True, eq=True)
class Select(Expr):
    cond: Expr
    true_value: Expr
    false_value: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.true_value.dtype


@dataclass(frozen=True, eq=True)
class BufferLoad(Expr):
    buffer: "Buffer"
    indices: tuple

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.buffer.dtype


@dataclass(frozen=True, eq=True)
class Buffer:
    """A named n-d array. ``scope`` is global, shared or local."""
    name: str
    shape: tuple
    dtype: str = "float32"
    scope: str = "global"

    def __getitem__(self, idx) -> BufferLoad:
        if not isinstance(idx, tuple):
            idx = (idx,)
        return BufferLoad(self, tuple(as_expr(i) for i in idx))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def with_(self, **changes) -> "Buffer":
        from dataclasses import replace
        return replace(self, **changes)


def keep_hash(cls) -> type:
    """Make ``cls`` (a frozen dataclass whose pickled state leaves out ``_`` attributes)
    keep its hash on each node: the value the dataclass's own ``__hash__`` gives (the
    hash of the tuple of its fields), computed once per node instead of once per call,
    which walked the whole subtree (a function's hash keys the search's caches)."""
    names = [f.name for f in fields(cls) if (f.compare if f.hash is None else f.hash)]
    src = ("def __hash__(self):\n"
           "    h = getattr(self, '_hash', None)\n"
           "    if h is None:\n"
           f"        h = hash(({''.join(f'self.{n}, ' for n in names)}))\n"
           "        object.__setattr__(self, '_hash', h)\n"
           "    return h\n")
    space: dict = {}
    exec(src, space)   # as dataclasses writes its own methods: the fields spelled out
    cls.__hash__ = space["__hash__"]
    return cls


def quick_init(cls) -> type:
    """Give frozen dataclass ``cls`` the ``__init__`` dataclasses writes (same parameters
    and defaults, the fields set in the same order) with ``object.__setattr__`` looked up
    once, not once per field through a global and an attribute (a ``For`` 0.96 -> 0.90 us;
    every edit, simplification and lowering builds nodes)."""
    params, sets, space = [], [], {"_set": object.__setattr__}
    for f in fields(cls):
        if not f.init:
            continue
        if f.default is not MISSING:
            space[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
        elif f.default_factory is not MISSING:
            raise TypeError(f"quick_init: {cls.__name__}.{f.name} has a default_factory")
        else:
            params.append(f.name)
        sets.append(f"    _set(self, {f.name!r}, {f.name})\n")
    exec(f"def __init__(self, {', '.join(params)}):\n" + ("".join(sets) or "    pass\n"),
         space)
    space["__init__"].__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = space["__init__"]
    return cls


for _cls in (IntImm, FloatImm, BinaryOp, Not, Cast, Call, Select, BufferLoad):
    keep_hash(_cls)
for _cls in (Var, IntImm, FloatImm, BinaryOp, Not, Cast, Call, Select, BufferLoad, Buffer):
    quick_init(_cls)


MATH_OPS = ("exp", "log", "sqrt", "tanh", "abs", "sigmoid")

ExprLike = Union[Expr, int, float, bool]


_INT32: dict = {}   # int32 constants, shared (immutable; the analyses kept on them too)


def const(value, dtype: str | None = None) -> Expr:
    if type(value) is int and (dtype is None or dtype == "int32"):
        out = _INT32.get(value)
        if out is None:
            out = IntImm(value, "int32")
            if len(_INT32) < 4096:
                _INT32[value] = out
        return out
    if isinstance(value, bool):
        return IntImm(int(value), "bool")
    if dtype is None:
        dtype = "int32" if isinstance(value, int) else "float32"
    if dtype in FLOAT_DTYPES:
        return FloatImm(float(value), dtype)
    return IntImm(int(value), dtype)


def as_expr(x: ExprLike, like: Expr | None = None) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, (bool, int, float)) or type(x).__module__ == "numpy":
        if like is not None and like.dtype in FLOAT_DTYPES:
            return const(float(x), like.dtype)
        if isinstance(x, bool):
            return const(x)
        return const(x.item() if hasattr(x, "item") else x)
    from ..errors import ExplorerError
    raise ExplorerError(f"cannot use {type(x).__name__} {x!r} in an expression: "
                        "use a number, a loop/axis variable or a tensor element")


def binary(cls, a, b) -> Expr:
    if not isinstance(a, Expr):
        a = as_expr(a, like=b if isinstance(b, Expr) else None)
    if not isinstance(b, Expr):
        b = as_expr(b, like=a)
    if cls not in (And, Or) and a.dtype != b.dtype and not issubclass(cls, CmpOp):
        # int literal with a float operand: promote the literal, otherwise refuse
        if isinstance(a, IntImm) and b.dtype in FLOAT_DTYPES:
            a = const(float(a.value), b.dtype)
        elif isinstance(b, IntImm) and a.dtype in FLOAT_DTYPES:
            b = const(float(b.value), a.dtype)
        else:
            from ..errors import ExplorerError
            raise ExplorerError(f"dtype mismatch in {cls.__name__}: {a.dtype} and {b.dtype}; "
                                "insert an explicit cast(dtype, x)")
    return cls(a, b)


def equal(a: ExprLike, b: ExprLike) -> Expr:
    return binary(EQ, a, b)


def all_of(*conds: Expr) -> Expr:
    conds = [c for c in conds if not (isinstance(c, IntImm) and c.value == 1)]
    if not conds:
        return const(True)
    out = conds[0]
    for c in conds[1:]:
        out = And(out, c)
    return out


def conjuncts(e: Expr) -> list:
    """The terms of a conjunction (``a and b and c`` -> [a, b, c]); [] for true."""
    if isinstance(e, And):
        return conjuncts(e.a) + conjuncts(e.b)
    return [] if is_true(e) else [e]


def is_const(e: Expr, value=None) -> bool:
    if not isinstance(e, (IntImm, FloatImm)):
        return False
    return value is None or e.value == value


def is_true(e: Expr) -> bool:
    return isinstance(e, IntImm) and e.dtype == "bool" and e.value == 1
