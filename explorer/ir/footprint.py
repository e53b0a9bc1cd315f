"""Memory footprint: the bytes of each buffer a block touches in one run of a loop.

For every loop around a block (outermost first), the box of each buffer the
block reads or writes while that loop and the loops inside it run (the loops
outside it fixed), in bytes: what a cache must hold for the loop's data to stay
resident. The boxes are the ones the cost model's features count
(:func:`explorer.ir.region.level_extents`), taken over the block's accesses
with its iteration variables replaced by their bindings. A box bound, not an
exact count of distinct elements.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .functor import collect_loads, substitute
from .loop_tree import find_realize
from .region import LoopRange, level_extents, parse_affine
from .stmt import PrimFunc


@dataclass(frozen=True)
class Footprint:
    """Bytes per buffer that one whole run of ``loop`` (all its iterations) touches."""
    loop: str
    extent: int
    bytes: dict

    @property
    def total(self) -> int:
        return sum(self.bytes.values())


def block_accesses(realize) -> dict:
    """Buffer name -> (buffer, [index tuples in loop variables]) of one block: the
    write first, then the reads in order."""
    b = realize.block
    bind = {iv.var.name: val for iv, val in zip(b.iter_vars, realize.iter_values)}
    out: dict = {}
    for buf, idx in [(b.body.buffer, b.body.indices)] + \
            [(ld.buffer, ld.indices) for ld in collect_loads(b.body.value)]:
        out.setdefault(buf.name, (buf, []))[1].append(tuple(substitute(i, bind) for i in idx))
    return out


def footprints(func: PrimFunc, block: str | None = None) -> list:
    """One :class:`Footprint` per loop around ``block`` (default: the block writing the
    output), outermost first."""
    realize, loops = find_realize(func, block)
    ranges = [LoopRange(lp.var.name, int(lp.extent)) for lp in loops]
    per_level: list = [{} for _ in loops]
    for name, (buf, indices) in block_accesses(realize).items():
        parsed = [tuple(parse_affine(i) for i in idx) for idx in indices]
        size = np.dtype(buf.dtype).itemsize
        for level, ext in enumerate(level_extents(parsed, ranges, tuple(buf.shape))):
            per_level[level][name] = math.prod(ext) * size
    return [Footprint(lp.var.name, int(lp.extent), nbytes) for lp, nbytes in zip(loops, per_level)]
