"""Lookups over one function, built in one walk and kept on the function object.

A schedule primitive asks many questions of the same function: where is loop
``i_0`` and what is around it, which blocks write or read ``C``, in what order do
the blocks run, which names are taken. Functions are immutable, so the answers
never change: ``index_of(func)`` walks the tree once and stores them on ``func``
(outside its dataclass fields: equality, hashing and ``with_`` ignore them, and a
new function, which every edit makes, starts without them).
"""
from __future__ import annotations

from .functor import stmt_children
from .stmt import BlockRealize, For, PrimFunc, SeqStmt

_KEY = "_index"


class FuncIndex:
    """``loops`` / ``blocks``: name -> (node, ancestors outermost first), first in
    pre-order; ``order``: block names in execution order; ``writers`` / ``readers``:
    buffer name -> block names in execution order; ``ranges``: loop name -> (0,
    extent - 1); ``names``: every loop, block, parameter and allocated buffer name.
    The last four are computed on first use."""

    __slots__ = ("_buffers", "loops", "blocks", "order", "_writers", "_readers", "_ranges",
                 "_names")

    def __init__(self, func: PrimFunc):
        self._buffers = (func.params, func.alloc_buffers)   # not func: no reference cycle
        self.loops: dict = {}
        self.blocks: dict = {}
        self.order: list = []
        self._writers = self._readers = self._ranges = self._names = None
        loops, blocks, order = self.loops, self.blocks, self.order
        stack = [(func.body, ())]
        pop, push = stack.pop, stack.append
        while stack:
            node, path = pop()
            t = type(node)
            while t is For:     # down a chain of loops without the stack
                name = node.var.name
                if name not in loops:
                    loops[name] = (node, path)
                path = path + (node,)
                node = node.body
                t = type(node)
            if t is BlockRealize:
                name = node.block.name
                if name not in blocks:
                    blocks[name] = (node, path)
                order.append(name)
            else:
                kids = node.stmts if t is SeqStmt else stmt_children(node)
                if kids:
                    inner = path + (node,)
                    for k in reversed(kids):
                        push((k, inner))

    def _realizes(self):
        blocks = self.blocks
        return [blocks[n][0] for n in self.order]

    @property
    def writers(self) -> dict:
        if self._writers is None:
            out: dict = {}
            for r in self._realizes():
                out.setdefault(r.block.body.buffer.name, []).append(r.block.name)
            self._writers = out
        return self._writers

    @property
    def readers(self) -> dict:
        if self._readers is None:
            out: dict = {}
            for r in self._realizes():
                for name in dict.fromkeys(buf.name for buf in r.block.reads()):
                    out.setdefault(name, []).append(r.block.name)
            self._readers = out
        return self._readers

    @property
    def ranges(self) -> dict:
        if self._ranges is None:
            self._ranges = {name: (0, n.extent - 1) for name, (n, _) in self.loops.items()}
        return self._ranges

    @property
    def names(self) -> frozenset:
        if self._names is None:
            params, allocs = self._buffers
            self._names = frozenset(self.loops) | frozenset(self.blocks) \
                | {p.name for p in params} | {b.name for b in allocs}
        return self._names


def index_of(func: PrimFunc) -> FuncIndex:
    """The (cached) index of ``func``."""
    idx = getattr(func, _KEY, None)
    if idx is None:
        idx = FuncIndex(func)
        object.__setattr__(func, _KEY, idx)
    return idx


def cached(obj, key: str, fn):
    """``fn(obj)``, computed once per (immutable) ``obj`` and kept on it under ``key``."""
    out = getattr(obj, key, None)
    if out is None:
        out = fn(obj)
        object.__setattr__(obj, key, out)
    return out
