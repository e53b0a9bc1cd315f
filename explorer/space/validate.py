"""Checking candidates against the numpy reference on the interpreter.

Multi-level tiled nests can be deeper than the 20 nested blocks Python's compiler
accepts (conv2d under SSRSRS has 22 loops), which the interpreter, translating
loops to Python loops, cannot run. ``interp_kernel`` first fuses every perfectly
nested chain of loops of the lowered function into one loop (all loops are serial
to the interpreter, so this changes nothing it computes).
"""
from __future__ import annotations

import math

from ..backends import build
from ..ir.arith import simplify
from ..ir.expr import FloorDiv, FloorMod, Var, const
from ..ir.functor import substitute
from ..ir.stmt import Allocate, BufferStore, For, IfThenElse, SeqStmt
from ..lower import lower


def interp_kernel(sch):
    """An interpreter kernel for a Schedule (or PrimFunc), deep loop nests flattened."""
    lowered = lower(sch)
    counter = [0]
    return build(lowered.with_(body=_flatten(lowered.body, counter)), "interp")


def check_on_interp(sch, workload, seed: int = 0) -> float:
    """Run ``sch`` on the interpreter with ``workload.make_args(seed)`` and compare with the
    numpy reference: the largest absolute error, or MeasureError."""
    args = workload.make_args(seed)
    interp_kernel(sch)(*args)
    return workload.check(args)


def _flatten(s, counter):
    if isinstance(s, For):
        chain = [s]
        while isinstance(chain[-1].body, For):
            chain.append(chain[-1].body)
        inner = _flatten(chain[-1].body, counter)
        if len(chain) == 1:
            return s.with_(body=inner)
        counter[0] += 1
        fused = Var(f"flat{counter[0]}_")
        mapping, stride = {}, math.prod(lp.extent for lp in chain)
        for i, lp in enumerate(chain):
            stride //= lp.extent
            e = FloorDiv(fused, const(stride)) if stride > 1 else fused
            mapping[lp.var.name] = simplify(FloorMod(e, const(lp.extent)) if i else e)
        return For(fused, math.prod(lp.extent for lp in chain), _subst(inner, mapping))
    if isinstance(s, SeqStmt):
        return SeqStmt(tuple(_flatten(x, counter) for x in s.stmts))
    if isinstance(s, IfThenElse):
        return s.with_(then_case=_flatten(s.then_case, counter),
                       else_case=None if s.else_case is None else _flatten(s.else_case, counter))
    if isinstance(s, Allocate):
        return s.with_(body=_flatten(s.body, counter))
    return s


def _subst(s, mapping):
    if isinstance(s, BufferStore):
        return BufferStore(s.buffer, substitute(s.value, mapping),
                           tuple(substitute(i, mapping) for i in s.indices))
    if isinstance(s, For):
        return s.with_(body=_subst(s.body, mapping))
    if isinstance(s, SeqStmt):
        return SeqStmt(tuple(_subst(x, mapping) for x in s.stmts))
    if isinstance(s, IfThenElse):
        return s.with_(cond=substitute(s.cond, mapping), then_case=_subst(s.then_case, mapping),
                       else_case=None if s.else_case is None else _subst(s.else_case, mapping))
    if isinstance(s, Allocate):
        return s.with_(body=_subst(s.body, mapping))
    return s
