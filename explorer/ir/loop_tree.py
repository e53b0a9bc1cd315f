"""The loop tree of a function as a reader sees it: its loops and blocks, in order.

Read-only summaries of a (scheduled, not yet lowered) ``PrimFunc``: every loop
with its extent, kind, depth, parent, the blocks beneath it and the roles it
plays in their bindings (spatial, reduce); every block with its loops and the
buffers it reads and writes. Loop trees in notebooks and the names a
primitive's controls offer come from here.
"""
from __future__ import annotations

from dataclasses import dataclass

from .functor import expr_vars, walk_stmt
from .stmt import BlockRealize, For, PrimFunc


@dataclass(frozen=True)
class LoopInfo:
    """One loop: name, extent, kind (and thread tag), where it sits, what it iterates."""
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
        """``"i_0 (32, parallel, spatial)"``: name, extent, kind unless serial, role."""
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


def realizes_with_loops(func: PrimFunc) -> list:
    """``(BlockRealize, loops around it, outermost first)`` for every block, in order."""
    return [(n, [p for p in path if isinstance(p, For)]) for n, path in walk_stmt(func.body)
            if isinstance(n, BlockRealize)]


def loop_roles(loop_var: str, realize: BlockRealize) -> set:
    """Kinds ("S", "R") of the block's iteration variables bound through ``loop_var``."""
    return {iv.kind for iv, val in zip(realize.block.iter_vars, realize.iter_values)
            if loop_var in expr_vars(val)}


def loop_infos(func: PrimFunc) -> list:
    """Every loop in tree order (pre-order, outer before inner)."""
    realizes = [(n, p) for n, p in walk_stmt(func.body) if isinstance(n, BlockRealize)]
    out = []
    for node, path in walk_stmt(func.body):
        if not isinstance(node, For):
            continue
        outer = [p for p in path if isinstance(p, For)]
        under = [r for r, p in realizes if any(x is node for x in p)]
        roles = set().union(*(loop_roles(node.var.name, r) for r in under))
        out.append(LoopInfo(node.var.name, node.extent, node.kind, node.thread, len(outer),
                            outer[-1].var.name if outer else None,
                            tuple(r.block.name for r in under),
                            "".join(k for k in "SR" if k in roles)))
    return out


def block_infos(func: PrimFunc) -> list:
    """Every block in execution order."""
    return [BlockInfo(r.block.name, tuple(lp.var.name for lp in loops),
                      tuple(x.name for x in r.block.reads()), r.block.body.buffer.name,
                      r.block.is_reduction, tuple(r.block.body.buffer.shape))
            for r, loops in realizes_with_loops(func)]


def find_realize(func: PrimFunc, block: str | None = None, ndim: int = 0) -> tuple:
    """``(realize, loops)`` of ``block``; without a name, of the last block writing a
    parameter of at least ``ndim`` dimensions (the operator's output), else the last
    block. ValueError naming the blocks there are when ``block`` is not one."""
    found = realizes_with_loops(func)
    if block is not None:
        for r, loops in found:
            if r.block.name == block:
                return r, loops
        raise ValueError(f"no block {block!r}; blocks are {[r.block.name for r, _ in found]}")
    outs = {p.name for p in func.params}
    pick = [x for x in found if x[0].block.body.buffer.name in outs
            and len(x[0].block.body.buffer.shape) >= ndim]
    return (pick or found)[-1]
