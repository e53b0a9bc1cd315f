"""Finding, replacing and inserting nodes of the loop/block tree by name.

Loops are identified by their variable's name and blocks by their name; both
are unique within a function. Every edit returns a new function.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir.expr import BufferLoad, Var
from ..ir.functor import REMOVE, collect_loads, expr_vars, rebuild_stmt, stmt_children
from ..ir.index import index_of
from ..ir.names import FreshNames
from ..ir.stmt import Block, BlockRealize, For, PrimFunc, SeqStmt, Stmt, seq


def find_loop(func: PrimFunc, name: str, prim: str = "") -> tuple:
    """(For node, ancestors outermost first) of the loop called ``name``."""
    hit = index_of(func).loops.get(name) if isinstance(name, str) else None
    if hit is not None:
        return hit
    raise ScheduleError(f"{prim}: loop {name!r} is not in the function (it was removed or "
                        "replaced by an earlier primitive): get the loops again with get_loops")


def find_block(func: PrimFunc, name: str, prim: str = "") -> tuple:
    hit = index_of(func).blocks.get(name) if isinstance(name, str) else None
    if hit is not None:
        return hit
    raise ScheduleError(f"{prim}: block {name!r} is not in the function; blocks are: "
                        f"{', '.join(block_names(func))}")


def block_names(func: PrimFunc) -> list:
    return list(index_of(func).order)


def realizes_under(stmt: Stmt) -> list:
    """(BlockRealize, ancestors within ``stmt``) pairs, in execution order (kept on the
    immutable ``stmt``: loops shared by successive functions are walked once). What is
    kept leaves ``stmt`` out of the paths (with it, a reference cycle)."""
    if type(stmt) is BlockRealize:
        return [(stmt, ())]
    top = (stmt,)
    return [(r, top + path) for r, path in _kept(stmt)]


def realizes_in(stmt: Stmt) -> list:
    """The BlockRealize nodes under ``stmt`` in execution order (``realizes_under``
    without the paths, which cost a tuple each)."""
    if type(stmt) is BlockRealize:
        return [stmt]
    return [r for r, _ in _kept(stmt)]


def _kept(stmt: Stmt) -> tuple:
    cached = getattr(stmt, "_realizes", None)
    if cached is None:
        cached = tuple(_realizes_under(stmt))
        object.__setattr__(stmt, "_realizes", cached)
    return cached


def _realizes_under(stmt: Stmt) -> list:
    """The pairs of ``realizes_under`` with ``stmt`` left out of the paths."""
    out = []
    stack = [(k, ()) for k in reversed(stmt_children(stmt))]
    while stack:
        node, path = stack.pop()
        while type(node) is For:    # down a chain of loops without the stack
            path = path + (node,)
            node = node.body
        if isinstance(node, BlockRealize):
            out.append((node, path))
            continue
        kids = stmt_children(node)
        if kids:
            inner = path + (node,)
            stack.extend((k, inner) for k in reversed(kids))
    return out


def loops_of(path: tuple) -> list:
    return [p for p in path if isinstance(p, For)]


def used_names(func: PrimFunc) -> set:
    return set(index_of(func).names)


class Namer(FreshNames):
    """Fresh names (``base``, ``base_1``...) that clash with no loop, block or buffer of
    the function."""

    def __init__(self, func: PrimFunc):
        super().__init__(used_names(func), "_")


def replace_loop(func: PrimFunc, name: str, new: Stmt) -> PrimFunc:
    hit = index_of(func).loops.get(name)
    if hit is None:
        return func
    return func.with_(body=replace_at(func.body, hit[1], hit[0], new))


def replace_at(root: Stmt, path: tuple, old: Stmt, new) -> Stmt:
    """``root`` with node ``old`` (whose ancestors are ``path``) replaced by ``new`` (or
    removed, with the loops it leaves empty, when ``new`` is REMOVE); only the ancestors
    are rebuilt, every other node is shared. As ``transform_stmt`` would rewrite it."""
    for parent in reversed(path):
        if type(parent) is For and new is not REMOVE:
            old, new = parent, _loop_over(parent, new)
            continue
        kids = stmt_children(parent)
        new_kids = [new if k is old else k for k in kids] if new is not REMOVE else \
            [k for k in kids if k is not old]
        if not new_kids:
            old, new = parent, REMOVE
            continue
        old, new = parent, rebuild_stmt(parent, tuple(new_kids))
    return new


def _loop_over(loop: For, body: Stmt) -> For:
    """``rebuild_stmt(loop, (body,))`` without its calls: edits rebuild every loop above
    the node they change, ~300 loops per C2 candidate."""
    return For(loop.var, loop.extent, body, loop.kind, loop.thread, loop.annotations)


def map_realizes(stmt: Stmt, fn) -> Stmt:
    """Apply ``fn(realize) -> Stmt | None | REMOVE`` to every block realize (None keeps
    it). As ``transform_stmt`` would, but only the ancestors of the realizes that changed
    are visited and rebuilt."""
    if type(stmt) is BlockRealize:
        out = fn(stmt)
        return stmt if out is None else out
    new: dict = {}
    dirty: set = {id(stmt)}
    for r, path in _kept(stmt):
        out = fn(r)
        if out is not None and out is not r:
            new[id(r)] = out
            dirty.update(map(id, path))
    return _rebuilt(stmt, new, dirty) if new else stmt


def _rebuilt(node: Stmt, new: dict, dirty: set):
    hit = new.get(id(node))
    if hit is not None:
        return hit
    if id(node) not in dirty:
        return node
    if type(node) is For:       # a loop's one child: rebuilt as rebuild_stmt would
        body = _rebuilt(node.body, new, dirty)
        return REMOVE if body is REMOVE else _loop_over(node, body)
    kids = []
    for k in stmt_children(node):
        nk = _rebuilt(k, new, dirty)
        if nk is not REMOVE:
            kids.append(nk)
    return rebuild_stmt(node, tuple(kids)) if kids else REMOVE


def set_annotations(func: PrimFunc, edits: dict) -> PrimFunc:
    """``func`` with new field values on some loops and blocks: ``edits`` maps ("loop",
    name) or ("block", name) to the changes (field -> value: ``annotations`` as sorted
    items; a loop's ``kind`` and ``thread`` too). As replacing each node in turn would
    make it, but every ancestor is rebuilt once."""
    idx = index_of(func)
    new: dict = {}
    dirty: set = set()
    for (kind, name), changes in edits.items():
        node, path = (idx.loops if kind == "loop" else idx.blocks)[name]
        new[id(node)] = changes
        dirty.update(map(id, path))
    return func.with_(body=_annotated(func.body, new, dirty))


def _annotated(node: Stmt, new: dict, dirty: set) -> Stmt:
    changes = new.get(id(node))
    if type(node) is BlockRealize:
        return node if changes is None else node.with_(block=node.block.with_(**changes))
    if type(node) is For and changes is None:     # a loop above an edit, or none
        return _loop_over(node, _annotated(node.body, new, dirty)) if id(node) in dirty \
            else node
    if id(node) in dirty:
        node = rebuild_stmt(node, tuple(_annotated(k, new, dirty) for k in stmt_children(node)))
    return node if changes is None else node.with_(**changes)


def remove_block(func: PrimFunc, name: str) -> PrimFunc:
    hit = index_of(func).blocks.get(name)
    if hit is None:
        return func
    body = replace_at(func.body, hit[1], hit[0], REMOVE)
    if body is REMOVE:
        raise ScheduleError(f"removing block {name!r} would leave the function empty")
    return func.with_(body=body)


def replace_block(func: PrimFunc, name: str, new: Stmt) -> PrimFunc:
    hit = index_of(func).blocks.get(name)
    if hit is None:
        return func
    return func.with_(body=replace_at(func.body, hit[1], hit[0], new))


def children(stmt: Stmt) -> list:
    return list(stmt.stmts) if isinstance(stmt, SeqStmt) else [stmt]


def contains_block(stmt: Stmt, names) -> bool:
    return any(r.block.name in names for r in realizes_in(stmt))


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
    return list(index_of(func).writers.get(buf_name, ()))


def readers(func: PrimFunc, buf_name: str) -> list:
    return list(index_of(func).readers.get(buf_name, ()))


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
