"""The intermediate representation: expressions, the loop/block tree, analysis, printing.

Analyses of a function that read the IR only, each a public module:
``arith`` (bounds, simplification), ``region`` (what accesses touch under a
loop), ``loop_tree`` (loops and blocks as a reader sees them), ``footprint``
(bytes per buffer per loop level), ``tiling`` (how loops cut an output into
tiles), ``eval`` (index expressions on numpy arrays). ``names`` gives fresh
names to new nodes.
"""
from .expr import (Add, And, Buffer, BufferLoad, Call, Cast, CmpOp, Div, EQ, Expr, FloatImm,
                   FloorDiv, FloorMod, IntImm, LE, LT, Max, Min, Mul, NE, Not, Or, Select, Sub,
                   Var, all_of, as_expr, const, equal)
from .stmt import (Allocate, Block, BlockRealize, BufferStore, For, IfThenElse, IterVar,
                   PrimFunc, SeqStmt, Stmt, seq)
from .printer import to_html, to_text
