"""The loop nest around each store of a lowered program.

One walk over the plain loop nest gives, per ``BufferStore`` in program order,
the loops around it (outermost first) and the ``if`` conditions it sits under,
and, per buffer, where it is allocated. Serial loops of extent 1 without
annotations are dropped, as MetaSchedule does before extracting features:
they cost nothing and their variable is 0.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.stmt import Allocate, BufferStore, For, IfThenElse, PrimFunc, SeqStmt, Stmt

UNROLL_KEYS = ("pragma_auto_unroll_max_step", "meta_schedule.unroll_explicit",
               "meta_schedule.unroll_implicit")


@dataclass(frozen=True)
class Loop:
    uid: int            # position of the loop in the walk: unique within one program
    var: str
    extent: int
    kind: str           # serial, parallel, vectorized, unrolled, thread
    thread: str | None
    unroll_step: int    # auto-unroll annotation, 0 when absent


@dataclass(frozen=True)
class Site:
    """One store with its surroundings."""
    store: BufferStore
    loops: tuple        # Loop, outermost first
    guards: tuple       # conditions of the enclosing ifs


@dataclass(frozen=True)
class AllocSite:
    buffer: object
    outer_prod: int     # product of the extents of the loops around the allocation


def _unroll_step(loop: For) -> int:
    for key, value in loop.annotations:
        if key in UNROLL_KEYS and isinstance(value, (int, float)) and value > 0:
            return int(value)
    return 0


class _Walker:
    def __init__(self):
        self.sites: list = []
        self.allocs: dict = {}
        self.next_uid = 0

    def visit(self, s: Stmt, loops: tuple, guards: tuple, prod: int) -> None:
        if isinstance(s, BufferStore):
            self.sites.append(Site(s, loops, guards))
        elif isinstance(s, For):
            step = _unroll_step(s)
            if s.extent == 1 and s.kind == "serial" and not s.annotations:
                self.visit(s.body, loops, guards, prod)
                return
            loop = Loop(self.next_uid, s.var.name, int(s.extent), s.kind, s.thread, step)
            self.next_uid += 1
            self.visit(s.body, loops + (loop,), guards, prod * max(1, loop.extent))
        elif isinstance(s, SeqStmt):
            for x in s.stmts:
                self.visit(x, loops, guards, prod)
        elif isinstance(s, IfThenElse):
            inner = guards + (s.cond,)
            self.visit(s.then_case, loops, inner, prod)
            if s.else_case is not None:
                self.visit(s.else_case, loops, inner, prod)
        elif isinstance(s, Allocate):
            self.allocs[s.buffer.name] = AllocSite(s.buffer, prod)
            self.visit(s.body, loops, guards, prod)


def collect(func: PrimFunc) -> tuple:
    """(sites in program order, {buffer name: AllocSite}) of a lowered function.

    Parameters count as allocated outside every loop, as in MetaSchedule."""
    w = _Walker()
    for p in func.params:
        w.allocs[p.name] = AllocSite(p, 1)
    w.visit(func.body, (), (), 1)
    return w.sites, w.allocs
