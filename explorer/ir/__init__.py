"""The intermediate representation: expressions, the loop/block tree, analysis, printing."""
from .expr import (Add, And, Buffer, BufferLoad, Call, Cast, CmpOp, Div, EQ, Expr, FloatImm,
                   FloorDiv, FloorMod, IntImm, LE, LT, Max, Min, Mul, NE, Not, Or, Select, Sub,
                   Var, all_of, as_expr, const, equal)
from .stmt import (Allocate, Block, BlockRealize, BufferStore, For, IfThenElse, IterVar,
                   PrimFunc, SeqStmt, Stmt, seq)
from .printer import to_html, to_text
