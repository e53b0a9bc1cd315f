"""How far the backend expands an unrolled loop into copies of its body.

``codegen`` emits an unrolled loop as copies of its body with the loop variable a
constant, so that a register tile's accesses fold to constants and the tile lives in
registers. A loop stays a loop (correct, left to LLVM) when its copies would cost more
than they give (``expands``):

- more vector instructions than the budget (``codegen.unroll_budget``): every store
  counts once per register it writes (``vector_stores``; a 48-lane store on 16-lane
  registers counts 3), since LLVM's time grows with instructions, not statements;
- a stack tile that cannot live in registers: the copies write more than
  ``TILE_REGISTERS`` times the target's vector registers of one stack buffer at
  constant places (``tile_vectors``). LLVM still keeps every such place in a register
  across the enclosing loop (LICM promotes constant addresses) and spills most of
  them. Measured on a 2-core AVX-512 VM (loaded, interleaved medians), BERT's
  128x768x768 gemm with a 16-row local tile: 48 and 96 zmm tiles ran faster unrolled
  (4.9 against 10-12 ms, 12.4 against 16.6), 192 and 768 zmm tiles slower (16.0
  against 13.4 ms, 24 against 14-16), and the 768 one took 2.5 s of CPU to compile
  (0.1 s as a loop around an unrolled 8x3 tile).
"""
from __future__ import annotations

from ...ir.functor import expr_vars, walk_stmt
from ...ir.stmt import Allocate, BufferStore, For, IfThenElse, SeqStmt, Stmt

TILE_REGISTERS = 4      # a stack tile of more than this many register files stays in memory


def expands(loop: For, budget: int, stack: dict, hw: int, registers: int) -> bool:
    """Does the backend emit the unrolled ``loop`` as copies? ``budget``: the stores (in
    registers) its copies may emit; ``stack``: name -> elements of the stack buffers in
    scope; ``hw``: float32 lanes of a register; ``registers``: vector registers."""
    if loop.extent * vector_stores(loop.body, hw) > budget:
        return False
    return tile_vectors(loop, stack, hw) <= TILE_REGISTERS * registers


def vector_stores(s: Stmt, hw: int, regs: int = 1) -> int:
    """Stores emitting ``s`` writes out, unrolled loops expanded, each counted once per
    register of ``hw`` lanes it writes (``regs`` per store outside a vectorized loop)."""
    if isinstance(s, BufferStore):
        return regs
    if isinstance(s, For):
        inner = vector_stores(s.body, hw, _registers(s, hw) if s.kind == "vectorized" else regs)
        return inner * s.extent if s.kind == "unrolled" else inner
    if isinstance(s, SeqStmt):
        return sum(vector_stores(x, hw, regs) for x in s.stmts)
    if isinstance(s, IfThenElse):
        return vector_stores(s.then_case, hw, regs) + (
            vector_stores(s.else_case, hw, regs) if s.else_case is not None else 0)
    if isinstance(s, Allocate):
        return vector_stores(s.body, hw, regs)
    return regs


def tile_vectors(loop: For, stack: dict, hw: int) -> int:
    """Registers' worth of stack-buffer places the copies of ``loop`` store to at constant
    places: per buffer, the most of any of its stores (the unrolled and vectorized loops
    its indices use, a vectorized one in registers), at most the buffer's size; a store
    whose place moves with a loop kept inside is in memory anyway and not counted."""
    places: dict = {}
    for node, path in walk_stmt(loop):
        if not isinstance(node, BufferStore) or node.buffer.name not in stack:
            continue
        used = frozenset().union(*(expr_vars(i) for i in node.indices))
        n = 1
        for lp in path:
            if not isinstance(lp, For) or lp.var.name not in used:
                continue
            if lp.kind not in ("unrolled", "vectorized"):
                n = 0
                break
            n *= lp.extent if lp.kind == "unrolled" else _registers(lp, hw)
        name = node.buffer.name
        places[name] = max(places.get(name, 0), n)
    return sum(min(n, -(-stack[name] // hw)) for name, n in places.items())


def _registers(vloop: For, hw: int) -> int:
    """Registers one statement of vectorized loop ``vloop`` writes per copy (a long loop
    runs as a loop over chunks: its chunk)."""
    from .codegen import MAX_VECTOR_LANES
    return -(-min(vloop.extent, MAX_VECTOR_LANES) // hw)
