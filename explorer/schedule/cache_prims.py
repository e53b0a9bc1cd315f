"""Cache stages: cache_read and cache_write copy a buffer through a new one in
another storage scope (global, shared, local); compute_at / reverse_compute_at
then place the copy where it pays.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir.expr import BufferLoad, Var
from ..ir.functor import replace_loads
from ..ir.region import full_region
from ..ir.stmt import Block, BufferStore, IterVar
from .block_prims import cover_nest, insert_reader_after
from .tree import (Namer, children, body_of, contains_block, find_block, insert_in, loops_of,
                   realizes_under, replace_block, writers)

SCOPES = ("global", "shared", "local")


def _check_scope(prim: str, scope: str):
    if scope not in SCOPES:
        raise ScheduleError(f"{prim}: unknown storage scope {scope!r}; use one of "
                            f"{', '.join(SCOPES)}")


def _copy_block(name: str, src, dst) -> Block:
    vs = tuple(Var(f"v{d}") for d in range(len(src.shape)))
    ivs = tuple(IterVar(v, n, "S") for v, n in zip(vs, src.shape))
    return Block(name, ivs, BufferStore(dst, BufferLoad(src, vs), vs))


def _retarget(value, old: str, new_buf):
    return replace_loads(value, lambda ld: BufferLoad(new_buf, ld.indices)
                         if ld.buffer.name == old else None)


def cache_read(func, block: str, read_index: int, scope: str):
    """Read buffer ``read_index`` of ``block`` through a copy in ``scope``."""
    _check_scope("cache_read", scope)
    cons, cpath = find_block(func, block, "cache_read")
    reads = cons.block.reads()
    if not isinstance(read_index, int) or not 0 <= read_index < len(reads):
        raise ScheduleError(f"cache_read: block {block!r} reads {len(reads)} buffer(s) "
                            f"({', '.join(b.name for b in reads)}); read_index {read_index!r} "
                            "is out of range")
    buf = reads[read_index]
    name = Namer(func)(f"{buf.name}_{scope}")
    new_buf = buf.with_(name=name, scope=scope)
    copy = _copy_block(name, buf, new_buf)
    nest = cover_nest(copy, list(range(buf.ndim)), full_region(buf.shape), func, {})
    ws = writers(func, buf.name)
    cloops = loops_of(cpath)
    if ws:
        _, ppath = find_block(func, ws[-1])
        common = []
        for a, b in zip(loops_of(ppath), cloops):
            if a.var != b.var:
                break
            common.append(a)
        parent = common[-1].var.name if common else None
        kids = children(body_of(func, parent))
        pos = max(i for i, k in enumerate(kids) if contains_block(k, set(ws))) + 1
    else:
        parent = None
        kids = children(func.body)
        pos = min(i for i, k in enumerate(kids) if contains_block(k, {block}))
    new_block = cons.block.with_(body=cons.block.body.with_(
        value=_retarget(cons.block.body.value, buf.name, new_buf)))
    out = replace_block(func, block, cons.with_(block=new_block))
    out = insert_in(out, parent, pos, nest)
    return out.with_(alloc_buffers=out.alloc_buffers + (new_buf,)), name


def cache_write(func, block: str, write_index: int, scope: str):
    """Let ``block`` write into a buffer in ``scope``, copied back right after it."""
    _check_scope("cache_write", scope)
    prod, ppath = find_block(func, block, "cache_write")
    if write_index != 0:
        raise ScheduleError(f"cache_write: block {block!r} writes one buffer; write_index must "
                            f"be 0, not {write_index!r}")
    b = prod.block
    buf = b.body.buffer
    if writers(func, buf.name) != [block]:
        raise ScheduleError(f"cache_write: {buf.name} is written by blocks "
                            f"{writers(func, buf.name)}, not by {block!r} alone (a decomposed "
                            "init?): cache it before decompose_reduction")
    name = Namer(func)(f"{buf.name}_{scope}")
    new_buf = buf.with_(name=name, scope=scope)
    body = BufferStore(new_buf, _retarget(b.body.value, buf.name, new_buf), b.body.indices)
    init = b.init.with_(buffer=new_buf) if b.init is not None else None
    out = replace_block(func, block, prod.with_(block=b.with_(body=body, init=init)))
    copy = _copy_block(name, new_buf, buf)
    out = insert_reader_after(out, block, copy, list(range(buf.ndim)), "cache_write")
    return out.with_(alloc_buffers=out.alloc_buffers + (new_buf,)), name
