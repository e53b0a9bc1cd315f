"""Immutable statement nodes: the loop tree around blocks, and the plain loop nest.

A scheduled function (``PrimFunc``) is a tree of ``For`` loops and ``SeqStmt``
around ``BlockRealize`` leaves. A ``Block`` is one computation with its own
iteration variables (spatial ``S`` or reduce ``R``), each bound by the realize
to an affine expression of the surrounding loop variables; its body is a
single ``BufferStore`` in terms of its iteration variables, and a reduction
block carries the ``init`` store. A reduction whose domain is not a box (an
rfactor block after a split that overshoots its loop) carries the condition on
its iteration variables in ``reduce_where``: the update runs only where it
holds, the init runs at every spatial point regardless. Loops carry only a variable, a constant
extent (their minimum is always 0), a kind and annotations.

Lowering turns this into the plain nest the backends consume: ``For``,
``SeqStmt``, ``IfThenElse``, ``Allocate`` and ``BufferStore``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .expr import Buffer, Expr, Var, const, keep_hash, quick_init

LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled", "thread")
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
               "threadIdx.z", "vthread.x")


class Stmt:
    def with_(self, **changes):
        """A copy with ``changes`` to its fields (what ``dataclasses.replace`` does, without
        its cost, and without the analyses cached on this node)."""
        cls = type(self)
        fields = cls.__dataclass_fields__
        for k in changes:
            if k not in fields:
                raise TypeError(f"{cls.__name__} has no field {k!r}")
        new = object.__new__(cls)
        for k in fields:
            object.__setattr__(new, k, changes[k] if k in changes else getattr(self, k))
        return new

    def __getstate__(self):
        return _fields_only(self)


@dataclass(frozen=True)
class BufferStore(Stmt):
    buffer: Buffer
    value: Expr
    indices: tuple


@dataclass(frozen=True)
class IterVar:
    var: Var
    extent: int
    kind: str  # "S" spatial or "R" reduce


@dataclass(frozen=True)
class Block(Stmt):
    name: str
    iter_vars: tuple
    body: BufferStore
    init: BufferStore | None = None
    annotations: tuple = ()
    reduce_where: Expr = const(True)

    @property
    def is_reduction(self) -> bool:
        return any(iv.kind == "R" for iv in self.iter_vars)

    @property
    def write_buffer(self) -> Buffer:
        return self.body.buffer

    def reads(self) -> list:
        """Buffers the block reads (its own output excluded), in first-use order."""
        cached = getattr(self, "_reads", None)
        if cached is None:
            from .functor import collect_loads
            seen: list = []
            for load in collect_loads(self.body.value):
                if load.buffer != self.body.buffer and load.buffer not in seen:
                    seen.append(load.buffer)
            cached = tuple(seen)
            object.__setattr__(self, "_reads", cached)
        return list(cached)

    def read_indices(self, buf: Buffer) -> list:
        """Index tuples of every load of ``buf`` in the body."""
        from .functor import collect_loads
        return [ld.indices for ld in collect_loads(self.body.value) if ld.buffer == buf]


@dataclass(frozen=True)
class BlockRealize(Stmt):
    iter_values: tuple
    predicate: Expr
    block: Block


@dataclass(frozen=True)
class For(Stmt):
    var: Var
    extent: int
    body: Stmt
    kind: str = "serial"
    thread: str | None = None
    annotations: tuple = ()

    def annotation(self, key, default=None):
        return dict(self.annotations).get(key, default)


@dataclass(frozen=True)
class SeqStmt(Stmt):
    stmts: tuple


@dataclass(frozen=True)
class IfThenElse(Stmt):
    cond: Expr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True)
class Allocate(Stmt):
    buffer: Buffer
    body: Stmt


@dataclass(frozen=True)
class PrimFunc:
    """A function over parameter buffers: the unit that is scheduled and built."""
    name: str
    params: tuple
    body: Stmt
    alloc_buffers: tuple = ()
    attrs: tuple = field(default=())

    def __getstate__(self):
        return _fields_only(self)

    def script(self) -> str:
        from .printer import to_text
        return to_text(self)

    def _repr_html_(self) -> str:
        from .printer import to_html
        return to_html(self)

    def __str__(self) -> str:
        return self.script()


def _fields_only(node) -> dict:
    """Pickled state: the fields, not the analyses cached on the node."""
    return {k: v for k, v in node.__dict__.items() if k[0] != "_"}


def seq(stmts) -> Stmt:
    flat: list = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return SeqStmt(tuple(flat))


_MISSING = object()


def _fast_with(cls) -> None:
    """Give statement class ``cls`` a ``with_`` with its fields spelled out (as dataclasses
    writes ``__init__``): the same copy as ``Stmt.with_`` at half its cost, which counts,
    as every edit rebuilds the loops above the node it changes."""
    names = list(cls.__dataclass_fields__)
    src = (f"def with_(self, *, {', '.join(n + '=_M' for n in names)}):\n"
           + "".join(f"    if {n} is _M:\n        {n} = self.{n}\n" for n in names)
           + f"    return _cls({', '.join(names)})\n")
    space = {"_M": _MISSING, "_cls": cls}
    exec(src, space)
    space["with_"].__doc__ = Stmt.with_.__doc__
    cls.with_ = space["with_"]


for _cls in (BufferStore, Block, BlockRealize, For, SeqStmt, IfThenElse, Allocate, PrimFunc):
    keep_hash(_cls)
for _cls in (BufferStore, IterVar, Block, BlockRealize, For, SeqStmt, IfThenElse, Allocate,
             PrimFunc):
    quick_init(_cls)
for _cls in (BufferStore, Block, BlockRealize, For, SeqStmt, IfThenElse, Allocate, PrimFunc):
    _fast_with(_cls)

TRUE = const(True)
