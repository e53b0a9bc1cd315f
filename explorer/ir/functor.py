"""Generic traversal and rewriting of expressions and statements."""
from __future__ import annotations

from typing import Callable, Iterator

from .expr import (EQ, LE, LT, NE, Add, And, BinaryOp, BufferLoad, Call, Cast, Div, Expr,
                   FloatImm, FloorDiv, FloorMod, IntImm, Max, Min, Mul, Not, Or, Select, Sub,
                   Var)
from .stmt import (Allocate, Block, BlockRealize, BufferStore, For, IfThenElse, SeqStmt,
                   Stmt)


def expr_children(e: Expr) -> tuple:
    t = type(e)
    if t in _BINARY:        # the common cases by exact type, before the isinstance chain
        return (e.a, e.b)
    if t in _LEAVES:
        return ()
    if isinstance(e, BinaryOp):
        return (e.a, e.b)
    if isinstance(e, BufferLoad):
        return e.indices
    if isinstance(e, Select):
        return (e.cond, e.true_value, e.false_value)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, Not):
        return (e.a,)
    return ()


_BINARY = frozenset((Add, Sub, Mul, Div, FloorDiv, FloorMod, Min, Max, LT, LE, EQ, NE, And, Or))
_LEAVES = frozenset((Var, IntImm, FloatImm))


def rebuild_expr(e: Expr, kids: tuple) -> Expr:
    if isinstance(e, BinaryOp):
        return type(e)(kids[0], kids[1])
    if isinstance(e, BufferLoad):
        return BufferLoad(e.buffer, tuple(kids))
    if isinstance(e, Select):
        return Select(*kids)
    if isinstance(e, Call):
        return Call(e.op, tuple(kids), e.dtype)
    if isinstance(e, Cast):
        return Cast(e.dtype, kids[0])
    if isinstance(e, Not):
        return Not(kids[0])
    return e


def transform_expr(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Post-order rewrite: children first, then ``fn`` (None keeps the node)."""
    kids = expr_children(e)
    if kids:
        new_kids = tuple(transform_expr(k, fn) for k in kids)
        if any(a is not b for a, b in zip(new_kids, kids)):
            e = rebuild_expr(e, new_kids)
    out = fn(e)
    return e if out is None else out


def substitute(e: Expr, mapping: dict) -> Expr:
    """Replace variables by name: ``mapping`` maps a var name to an expression."""
    if not mapping or (isinstance(e, Expr) and mapping.keys().isdisjoint(expr_vars(e))):
        return e    # nothing to replace: the node itself, as the rewrite would return

    def fn(x):
        if isinstance(x, Var):
            return mapping.get(x.name)
        return None
    return transform_expr(e, fn)


def walk_expr(e: Expr) -> Iterator[Expr]:
    yield e
    for k in expr_children(e):
        yield from walk_expr(k)


def collect_loads(e: Expr) -> list:
    """The loads in ``e``, in pre-order."""
    return list(_loads(e))


def _loads(e: Expr) -> tuple:
    """``collect_loads`` as a tuple, cached on the (immutable) node. A load keeps only
    the loads beneath it: kept with itself, it would be a reference cycle, freed only by
    the cycle collector's passes."""
    out = getattr(e, "_loads", None)
    if out is None:
        out = ()
        for k in expr_children(e):
            out += _loads(k)
        _keep(e, "_loads", out)
    return (e,) + out if type(e) is BufferLoad else out


# _keep(node, key, value): keep an analysis of an immutable node on it (an attribute
# beside its fields: equality, hashing and ``with_`` ignore it). Set as an attribute, not
# through ``node.__dict__``, which would make Python build a dict object per node; bound
# to object.__setattr__ itself, not wrapped: analyses keep tens of thousands a candidate.
_keep = object.__setattr__


_NO_VARS: frozenset = frozenset()


def expr_vars(e: Expr) -> frozenset:
    """Names of the variables ``e`` uses, cached on the (immutable) node."""
    out = getattr(e, "_vars", None)
    if out is None:
        if isinstance(e, Var):
            out = frozenset((e.name,))
        else:
            kids = expr_children(e)
            if not kids:
                out = _NO_VARS
            elif len(kids) == 1:
                out = expr_vars(kids[0])
            else:
                out = frozenset().union(*[expr_vars(k) for k in kids])
        _keep(e, "_vars", out)
    return out


def replace_loads(e: Expr, fn: Callable[[BufferLoad], Expr | None]) -> Expr:
    """Post-order rewrite of the loads in ``e`` (``fn`` None keeps a load); subtrees
    without loads are returned as they are, as ``transform_expr`` would return them."""
    if not _loads(e):
        return e
    kids = expr_children(e)
    new_kids = tuple(replace_loads(k, fn) for k in kids)
    if any(a is not b for a, b in zip(new_kids, kids)):
        e = rebuild_expr(e, new_kids)
    if isinstance(e, BufferLoad):
        out = fn(e)
        return e if out is None else out
    return e


# ---------------------------------------------------------------- statements

def stmt_children(s: Stmt) -> tuple:
    t = type(s)
    if t is For:
        return (s.body,)
    if t is BlockRealize:
        return ()
    if t is SeqStmt:
        return s.stmts
    if isinstance(s, For):
        return (s.body,)
    if isinstance(s, SeqStmt):
        return s.stmts
    if isinstance(s, Allocate):
        return (s.body,)
    if isinstance(s, IfThenElse):
        return (s.then_case,) if s.else_case is None else (s.then_case, s.else_case)
    return ()


def rebuild_stmt(s: Stmt, kids: tuple) -> Stmt:
    if isinstance(s, For):
        return s.with_(body=kids[0])
    if isinstance(s, SeqStmt):
        from .stmt import seq
        return seq(kids)
    if isinstance(s, Allocate):
        return s.with_(body=kids[0])
    if isinstance(s, IfThenElse):
        return s.with_(then_case=kids[0], else_case=kids[1] if len(kids) > 1 else None)
    return s


def transform_stmt(s: Stmt, fn: Callable[[Stmt], Stmt | None]) -> Stmt | None:
    """Post-order rewrite of a statement tree; ``fn`` may return a new node,
    None to keep the node, or the marker REMOVE to drop it (loops left empty go too)."""
    kids = stmt_children(s)
    if kids:
        new_kids = []
        for k in kids:
            nk = transform_stmt(k, fn)
            if nk is not REMOVE:
                new_kids.append(nk)
        if not new_kids:
            return REMOVE
        if len(new_kids) != len(kids) or any(a is not b for a, b in zip(new_kids, kids)):
            s = rebuild_stmt(s, tuple(new_kids))
    out = fn(s)
    return s if out is None else out


class _Remove:
    def __repr__(self):
        return "REMOVE"


REMOVE = _Remove()


def walk_stmt(s: Stmt, path: tuple = ()) -> Iterator[tuple]:
    """Yield (node, ancestors) pairs in pre-order, ancestors outermost first."""
    stack = [(s, path)]
    while stack:
        node, p = stack.pop()
        yield node, p
        kids = stmt_children(node)
        if kids:
            inner = p + (node,)
            stack.extend((k, inner) for k in reversed(kids))


def iter_nodes(s: Stmt) -> Iterator[Stmt]:
    """Every statement node in pre-order (no ancestor paths: cheaper than walk_stmt)."""
    stack = [s]
    while stack:
        n = stack.pop()
        yield n
        kids = stmt_children(n)
        if kids:
            stack.extend(reversed(kids))


def realizes(s: Stmt) -> list:
    return [n for n, _ in walk_stmt(s) if isinstance(n, BlockRealize)]


def loops(s: Stmt) -> list:
    return [n for n, _ in walk_stmt(s) if isinstance(n, For)]


def block_stores(block: Block) -> list:
    return [block.body] + ([block.init] if block.init is not None else [])


def store_exprs(st: BufferStore) -> list:
    return [st.value, *st.indices]
