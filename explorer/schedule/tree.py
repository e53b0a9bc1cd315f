"""Finding, replacing and inserting nodes of the loop/block tree by name.

Loops are identified by their variable's name and blocks by their name; both
are unique within a function. Every edit returns a new function.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir.expr import BufferLoad, Var
from ..ir.functor import (REMOVE, collect_loads, expr_vars, iter_nodes, stmt_children,
                          transform_stmt, walk_stmt)
from ..ir.names import FreshNames
from ..ir.stmt import Block, BlockRealize, For, PrimFunc, SeqStmt, Stmt, seq


def _find(stmt, match) -> tuple | None:
    """(node, ancestors) of the first node in pre-order with ``match(node)``."""
    path: list = []

    def rec(s):
        if match(s):
            return s
        kids = stmt_children(s)
        if kids:
            path.append(s)
            for k in kids:
                hit = rec(k)
                if hit is not None:
                    return hit
            path.pop()
        return None
    hit = rec(stmt)
    return None if hit is None else (hit, tuple(path))


def find_loop(func: PrimFunc, name: str, prim: str = "") -> tuple:
    """(For node, ancestors outermost first) of the loop called ``name``."""
    hit = _find(func.body, lambda s: isinstance(s, For) and s.var.name == name)
    if hit is not None:
        return hit
    raise ScheduleError(f"{prim}: loop {name!r} is not in the function (it was removed or "
                        "replaced by an earlier primitive): get the loops again with get_loops")


def find_block(func: PrimFunc, name: str, prim: str = "") -> tuple:
    hit = _find(func.body, lambda s: isinstance(s, BlockRealize) and s.block.name == name)
    if hit is not None:
        return hit
    raise ScheduleError(f"{prim}: block {name!r} is not in the function; blocks are: "
                        f"{', '.join(block_names(func))}")


def block_names(func: PrimFunc) -> list:
    return [n.block.name for n in iter_nodes(func.body) if isinstance(n, BlockRealize)]


def realizes_under(stmt: Stmt) -> list:
    """(BlockRealize, ancestors within ``stmt``) pairs."""
    return [(n, p) for n, p in walk_stmt(stmt) if isinstance(n, BlockRealize)]


def loops_of(path: tuple) -> list:
    return [p for p in path if isinstance(p, For)]


def used_names(func: PrimFunc) -> set:
    names = {p.name for p in func.params} | {b.name for b in func.alloc_buffers}
    for node in iter_nodes(func.body):
        if isinstance(node, For):
            names.add(node.var.name)
        elif isinstance(node, BlockRealize):
            names.add(node.block.name)
    return names


class Namer(FreshNames):
    """Fresh names (``base``, ``base_1``...) that clash with no loop, block or buffer of
    the function."""

    def __init__(self, func: PrimFunc):
        super().__init__(used_names(func), "_")


def replace_loop(func: PrimFunc, name: str, new: Stmt) -> PrimFunc:
    def fn(s):
        if isinstance(s, For) and s.var.name == name:
            return new
        return None
    return func.with_(body=transform_stmt(func.body, fn))


def map_realizes(stmt: Stmt, fn) -> Stmt:
    """Apply ``fn(realize) -> Stmt | None | REMOVE`` to every block realize."""
    out = transform_stmt(stmt, lambda s: fn(s) if isinstance(s, BlockRealize) else None)
    return out


def remove_block(func: PrimFunc, name: str) -> PrimFunc:
    def fn(r):
        return REMOVE if r.block.name == name else None
    body = map_realizes(func.body, fn)
    if body is REMOVE:
        raise ScheduleError(f"removing block {name!r} would leave the function empty")
    return func.with_(body=body)


def replace_block(func: PrimFunc, name: str, new: Stmt) -> PrimFunc:
    return func.with_(body=map_realizes(
        func.body, lambda r: new if r.block.name == name else None))


def children(stmt: Stmt) -> list:
    return list(stmt.stmts) if isinstance(stmt, SeqStmt) else [stmt]


def contains_block(stmt: Stmt, names) -> bool:
    return any(r.block.name in names for r, _ in realizes_under(stmt))


def insert_in(func: PrimFunc, loop_name: str | None, index: int, new: Stmt) -> PrimFunc:
    """Insert ``new`` at position ``index`` of the body of loop ``loop_name`` (None: root)."""
    if loop_name is None:
        kids = children(func.body)
        kids.insert(index, new)
        return func.with_(body=seq(kids))
    loop, _ = find_loop(func, loop_name)
    kids = children(loop.body)
    kids.insert(index, new)
    return replace_loop(func, loop_name, loop.with_(body=seq(kids)))


def body_of(func: PrimFunc, loop_name: str | None) -> Stmt:
    return func.body if loop_name is None else find_loop(func, loop_name)[0].body


def writers(func: PrimFunc, buf_name: str) -> list:
    return [r.block.name for r, _ in realizes_under(func.body)
            if r.block.body.buffer.name == buf_name]


def readers(func: PrimFunc, buf_name: str) -> list:
    out = []
    for r, _ in realizes_under(func.body):
        if any(b.name == buf_name for b in r.block.reads()):
            out.append(r.block.name)
    return out


def loop_role(loop_var: str, realize: BlockRealize) -> set:
    """Kinds ("S", "R") of the iteration variables whose binding uses ``loop_var``."""
    kinds = set()
    for iv, val in zip(realize.block.iter_vars, realize.iter_values):
        if loop_var in expr_vars(val):
            kinds.add(iv.kind)
    return kinds


def iter_dims(block: Block, indices: tuple) -> list | None:
    """For each iter var, the dimension whose index is exactly that var (or None).
    Returns None if some index is not a plain iteration variable."""
    pos = {}
    for d, idx in enumerate(indices):
        if not isinstance(idx, Var) or idx.name in pos:
            return None
        pos[idx.name] = d
    names = {iv.var.name for iv in block.iter_vars}
    if not set(pos) <= names:
        return None
    return [pos.get(iv.var.name) for iv in block.iter_vars]


def loads_of(block: Block, buf_name: str) -> list:
    return [ld for ld in collect_loads(block.body.value) if ld.buffer.name == buf_name]


__all__ = ["find_loop", "find_block", "Namer", "BufferLoad"]
