"""Tensor expressions: describe an operator as placeholders and computes.

    A = te.placeholder((M, K), "float32", "A")
    B = te.placeholder((K, N), "float32", "B")
    k = te.reduce_axis(K, "k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), "C")
    func = te.create_func([A, B, C])

Each compute becomes one block of the function, in a loop per axis.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

from .errors import ExplorerError
from .ir.expr import (FLOAT_DTYPES, Buffer, BufferLoad, Call, Cast, Expr, Max, Min, Not, Select,
                      Var, as_expr, binary, check_dtype, const)
from .ir.functor import substitute
from .ir.names import FreshNames
from .ir.stmt import Block, BlockRealize, BufferStore, For, IterVar, PrimFunc, TRUE, seq


@dataclass(frozen=True, eq=True)
class ReduceAxis(Var):
    """A reduction axis: a variable with its extent."""
    extent: int = 1


@dataclass(frozen=True, eq=True)
class Reduce(Expr):
    combiner: str  # sum, max, min
    source: Expr
    axes: tuple

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.source.dtype


class Tensor:
    """A placeholder or the result of a compute; index it to read elements."""

    def __init__(self, buffer: Buffer, op=None):
        self.buffer = buffer
        self.op = op  # None for a placeholder, else a _ComputeOp

    name = property(lambda self: self.buffer.name)
    shape = property(lambda self: self.buffer.shape)
    dtype = property(lambda self: self.buffer.dtype)
    ndim = property(lambda self: len(self.buffer.shape))

    def __getitem__(self, idx) -> BufferLoad:
        if not isinstance(idx, tuple):
            idx = (idx,)
        if len(idx) != self.ndim:
            raise ExplorerError(f"tensor {self.name} has {self.ndim} dimensions but was indexed "
                                f"with {len(idx)}: give one index per dimension")
        if _reading:
            _reading[-1].append(self)
        return BufferLoad(self.buffer, tuple(as_expr(i) for i in idx))

    def __repr__(self) -> str:
        return f"Tensor({self.name}, shape={self.shape}, dtype={self.dtype})"


@dataclass
class _ComputeOp:
    axes: tuple
    body: Expr
    input_tensors: tuple


# Tensors indexed while an fcompute runs: how compute() learns its inputs.
_reading: list = []


def _check_shape(shape, what: str) -> tuple:
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(shape)
    if not shape or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0
                            for s in shape):
        raise ExplorerError(f"{what}: shape {shape!r} must be a non-empty tuple of positive ints")
    return shape


def placeholder(shape, dtype: str = "float32", name: str = "A") -> Tensor:
    """An input tensor of the given shape and dtype."""
    return Tensor(Buffer(name, _check_shape(shape, f"placeholder {name!r}"), check_dtype(dtype)))


def reduce_axis(extent: int, name: str = "k") -> ReduceAxis:
    if not isinstance(extent, int) or extent <= 0:
        raise ExplorerError(f"reduce_axis {name!r}: extent {extent!r} must be a positive int")
    return ReduceAxis(name, "int32", extent)


def _reduce(combiner: str, expr, axis) -> Reduce:
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    if not axes or not all(isinstance(a, ReduceAxis) for a in axes):
        raise ExplorerError(f"te.{combiner}: axis must be reduce_axis(...) objects")
    return Reduce(combiner, as_expr(expr), axes)


def sum(expr, axis) -> Reduce:  # noqa: A001 - mirrors te.sum
    """Sum reduction over ``axis`` (a reduce_axis or a list of them)."""
    return _reduce("sum", expr, axis)


def max(a, b=None, axis=None) -> Expr:  # noqa: A001
    """``max(x, axis=k)`` reduces; ``max(a, b)`` is the elementwise maximum."""
    if axis is not None:
        return _reduce("max", a, axis)
    return binary(Max, a, b)


def min(a, b=None, axis=None) -> Expr:  # noqa: A001
    """``min(x, axis=k)`` reduces; ``min(a, b)`` is the elementwise minimum."""
    if axis is not None:
        return _reduce("min", a, axis)
    return binary(Min, a, b)


def _math(op: str):
    def fn(x):
        x = as_expr(x)
        if x.dtype not in FLOAT_DTYPES:
            raise ExplorerError(f"{op} needs a float argument, got {x.dtype}: cast it first")
        return Call(op, (x,), x.dtype)
    fn.__name__ = op
    fn.__doc__ = f"Elementwise {op}."
    return fn


exp, log, sqrt, tanh, sigmoid = (_math(o) for o in ("exp", "log", "sqrt", "tanh", "sigmoid"))


def abs(x) -> Expr:  # noqa: A001
    x = as_expr(x)
    return Call("abs", (x,), x.dtype)


def cast(dtype: str, x) -> Expr:
    return Cast(check_dtype(dtype), as_expr(x))


def if_then_else(cond, true_value, false_value) -> Expr:
    t = as_expr(true_value)
    f = as_expr(false_value, like=t)
    if isinstance(t, Expr) and not isinstance(true_value, Expr):
        t = as_expr(true_value, like=f)
    if t.dtype != f.dtype:
        raise ExplorerError(f"if_then_else: branches have dtypes {t.dtype} and {f.dtype}")
    return Select(as_expr(cond), t, f)


where = if_then_else


def logical_not(x) -> Expr:
    return Not(as_expr(x))


def compute(shape, fcompute, name: str = "T", dtype: str | None = None) -> Tensor:
    """A tensor whose element at the axes is ``fcompute(*axes)``."""
    shape = _check_shape(shape, f"compute {name!r}")
    params = list(inspect.signature(fcompute).parameters)
    if len(params) != len(shape):
        raise ExplorerError(f"compute {name!r}: fcompute takes {len(params)} arguments but the "
                            f"shape has {len(shape)} dimensions")
    axes = tuple(Var(p) for p in params)
    _reading.append([])
    try:
        body = as_expr(fcompute(*axes))
    finally:
        read = _reading.pop()
    if dtype is not None and body.dtype != check_dtype(dtype):
        body = _cast_body(body, dtype)
    inputs = {id(t): t for t in read}
    return Tensor(Buffer(name, shape, body.dtype), _ComputeOp(axes, body, tuple(inputs.values())))


def _cast_body(body: Expr, dtype: str) -> Expr:
    if isinstance(body, Reduce):
        return Reduce(body.combiner, Cast(dtype, body.source), body.axes)
    return Cast(dtype, body)


def _identity(combiner: str, dtype: str) -> Expr:
    if combiner == "sum":
        return const(0, dtype)
    if dtype in FLOAT_DTYPES:
        return const(-math.inf if combiner == "max" else math.inf, dtype)
    return const(-(2 ** 31) if combiner == "max" else 2 ** 31 - 1, dtype)


def combine(combiner: str, acc: Expr, value: Expr) -> Expr:
    if combiner == "sum":
        return acc + value
    return (Max if combiner == "max" else Min)(acc, value)


def _topo(outputs: list, by_name: dict) -> list:
    order: list = []
    state: dict = {}

    def visit(t: Tensor):
        if state.get(t.name) == "done":
            return
        if state.get(t.name) == "busy":
            raise ExplorerError(f"tensor {t.name} depends on itself")
        state[t.name] = "busy"
        if t.op is not None:
            for inp in t.op.input_tensors:
                visit(inp)
        state[t.name] = "done"
        order.append(t)
    for t in outputs:
        visit(t)
    return order


def _block_for(t: Tensor, namer: FreshNames) -> object:
    op = t.op
    body = op.body
    red_axes = body.axes if isinstance(body, Reduce) else ()
    loop_vars = [Var(namer(a.name)) for a in op.axes] + [Var(namer(a.name)) for a in red_axes]
    ivs, bind = [], {}
    local = FreshNames()
    for a, ext in zip(op.axes, t.shape):
        v = Var(local("v_" + a.name))
        ivs.append(IterVar(v, ext, "S"))
        bind[a.name] = v
    for a in red_axes:
        v = Var(local("v_" + a.name))
        ivs.append(IterVar(v, a.extent, "R"))
        bind[a.name] = v
    out_idx = tuple(bind[a.name] for a in op.axes)
    if isinstance(body, Reduce):
        src = substitute(body.source, bind)
        acc = BufferLoad(t.buffer, out_idx)
        store = BufferStore(t.buffer, combine(body.combiner, acc, src), out_idx)
        init = BufferStore(t.buffer, _identity(body.combiner, t.dtype), out_idx)
    else:
        store, init = BufferStore(t.buffer, substitute(body, bind), out_idx), None
    block = Block(t.name, tuple(ivs), store, init)
    stmt = BlockRealize(tuple(loop_vars), TRUE, block)
    extents = list(t.shape) + [a.extent for a in red_axes]
    for v, ext in reversed(list(zip(loop_vars, extents))):
        stmt = For(v, ext, stmt)
    return stmt


def create_func(tensors: list, name: str | None = None) -> PrimFunc:
    """A PrimFunc whose parameters are ``tensors`` in order (inputs and outputs)."""
    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        raise ExplorerError("create_func takes a non-empty list of te tensors "
                            "(placeholders and computed outputs)")
    by_name: dict = {}
    stack = list(tensors)
    while stack:
        t = stack.pop()
        if t.name in by_name:
            if by_name[t.name] is not t:
                raise ExplorerError(f"two different tensors are named {t.name!r}: give every "
                                    "tensor a unique name")
            continue
        by_name[t.name] = t
        if t.op is not None:
            stack.extend(t.op.input_tensors)
    outputs = [t for t in tensors if t.op is not None]
    if not outputs:
        raise ExplorerError("create_func needs at least one computed tensor among its arguments")
    order = _topo(outputs, by_name)
    params = [t.buffer for t in tensors]
    for t in order:
        if t.op is None and t.buffer not in params:
            raise ExplorerError(f"placeholder {t.name} is used but not passed to create_func: "
                                "list every input tensor")
    namer = FreshNames()
    blocks = [_block_for(t, namer) for t in order if t.op is not None]
    allocs = tuple(t.buffer for t in order if t.op is not None and t.buffer not in params)
    return PrimFunc(name or outputs[-1].name.lower(), tuple(params), seq(blocks), allocs)

