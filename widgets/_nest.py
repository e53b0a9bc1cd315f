"""Read-only summaries of a function's loop tree for display: which loops and
blocks there are, their extents, kinds and roles. No scheduling logic here;
the engine's IR is only read.
"""
from __future__ import annotations

from dataclasses import dataclass

from explorer.ir.functor import expr_vars, walk_stmt
from explorer.ir.stmt import BlockRealize, For, PrimFunc
from explorer.ops import Workload

KIND_COLORS = {"serial": "#9e9e9e", "parallel": "#2e7d32", "vectorized": "#1565c0",
               "unrolled": "#ef6c00", "thread": "#6a1b9a"}


@dataclass(frozen=True)
class LoopInfo:
    """One loop as a person reads it: name, extent, kind and what it iterates."""
    name: str
    extent: int
    kind: str
    thread: str | None
    depth: int
    parent: str | None
    blocks: tuple        # blocks under the loop, in execution order
    roles: str           # "S", "R", "SR" or "": iteration kinds it binds in those blocks

    @property
    def label(self) -> str:
        kind = self.thread if self.kind == "thread" else self.kind
        role = {"S": "spatial", "R": "reduce", "SR": "spatial+reduce"}.get(self.roles, "")
        extra = ", ".join(x for x in (kind if kind != "serial" else "", role) if x)
        return f"{self.name} ({self.extent}{', ' + extra if extra else ''})"


@dataclass(frozen=True)
class BlockInfo:
    """One block: its loops (outermost first), the buffers it reads and writes."""
    name: str
    loops: tuple
    reads: tuple         # buffer names; position = cache_read's read_buffer_index
    writes: str
    is_reduction: bool
    write_shape: tuple


def func_of(obj) -> PrimFunc:
    """The PrimFunc behind a Schedule, Workload, Kernel or PrimFunc."""
    if isinstance(obj, PrimFunc):
        return obj
    func = getattr(obj, "func", None)
    if isinstance(func, PrimFunc):
        return func
    raise TypeError(f"expected a Schedule, Workload or PrimFunc, got {type(obj).__name__}")


def workload_of(obj) -> Workload | None:
    if isinstance(obj, Workload):
        return obj
    return getattr(obj, "workload", None)


def loop_infos(func: PrimFunc) -> list:
    """Every loop in tree order (pre-order, outer before inner)."""
    realizes = [(n, p) for n, p in walk_stmt(func.body) if isinstance(n, BlockRealize)]
    out = []
    for node, path in walk_stmt(func.body):
        if not isinstance(node, For):
            continue
        outer = [p for p in path if isinstance(p, For)]
        under = [(r, p) for r, p in realizes if any(x is node for x in p)]
        roles = set()
        for r, _ in under:
            for iv, val in zip(r.block.iter_vars, r.iter_values):
                if node.var.name in expr_vars(val):
                    roles.add(iv.kind)
        out.append(LoopInfo(node.var.name, node.extent, node.kind, node.thread, len(outer),
                            outer[-1].var.name if outer else None,
                            tuple(r.block.name for r, _ in under),
                            "".join(k for k in "SR" if k in roles)))
    return out


def block_infos(func: PrimFunc) -> list:
    """Every block in execution order."""
    out = []
    for node, path in walk_stmt(func.body):
        if isinstance(node, BlockRealize):
            b = node.block
            out.append(BlockInfo(b.name, tuple(p.var.name for p in path if isinstance(p, For)),
                                 tuple(x.name for x in b.reads()), b.body.buffer.name,
                                 b.is_reduction, tuple(b.body.buffer.shape)))
    return out


def divisors(n: int) -> list:
    """All divisors of ``n`` in increasing order (the split factors that leave no tail)."""
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))
