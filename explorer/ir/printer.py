"""Readable Python-like text and an HTML form of functions and loop nests."""
from __future__ import annotations

import html as _html

from .expr import (BinaryOp, BufferLoad, Call, Cast, CmpOp, Expr, FloatImm, IntImm, Max, Min,
                   Not, Select, Var, And, Or)
from .stmt import (Allocate, Block, BlockRealize, BufferStore, For, IfThenElse, PrimFunc,
                   SeqStmt, Stmt)

_PREC = {"or": 1, "and": 2, "<": 4, "<=": 4, "==": 4, "!=": 4, "+": 5, "-": 5, "*": 6,
         "/": 6, "//": 6, "%": 6}


def expr_str(e: Expr, parent_prec: int = 0) -> str:
    if isinstance(e, Var):
        return e.name
    if isinstance(e, IntImm):
        if e.dtype == "bool":
            return "True" if e.value else "False"
        return str(e.value)
    if isinstance(e, FloatImm):
        return repr(e.value) if e.dtype == "float32" else f"float64({e.value!r})"
    if isinstance(e, (Min, Max)):
        return f"{e.symbol}({expr_str(e.a)}, {expr_str(e.b)})"
    if isinstance(e, BinaryOp):
        p = _PREC[e.symbol]
        right_p = p + 1 if not isinstance(e, (And, Or)) else p
        text = f"{expr_str(e.a, p)} {e.symbol} {expr_str(e.b, right_p)}"
        return f"({text})" if p < parent_prec else text
    if isinstance(e, Not):
        return f"not {expr_str(e.a, 3)}"
    if isinstance(e, BufferLoad):
        return f"{e.buffer.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, Call):
        return f"{e.op}({', '.join(expr_str(a) for a in e.args)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({expr_str(e.value)})"
    if isinstance(e, Select):
        return (f"select({expr_str(e.cond)}, {expr_str(e.true_value)}, "
                f"{expr_str(e.false_value)})")
    return repr(e)


def _store(s: BufferStore) -> str:
    idx = ", ".join(expr_str(i) for i in s.indices)
    return f"{s.buffer.name}[{idx}] = {expr_str(s.value)}"


def _loop_head(f: For) -> str:
    if f.kind == "thread":
        rng = f'thread_binding({f.extent}, "{f.thread}")'
    elif f.kind == "serial":
        rng = f"range({f.extent})"
    else:
        rng = {"parallel": "parallel", "vectorized": "vectorized",
               "unrolled": "unroll"}[f.kind] + f"({f.extent})"
    ann = ""
    if f.annotations:
        ann = "  # " + ", ".join(f"{k}={v!r}" for k, v in f.annotations)
    return f"for {f.var.name} in {rng}:{ann}"


def stmt_lines(s: Stmt, depth: int = 0) -> list:
    """(depth, text, tag) triples; tag names the loop var or block on that line."""
    out: list = []
    if isinstance(s, For):
        out.append((depth, _loop_head(s), s.var.name))
        out += stmt_lines(s.body, depth + 1)
    elif isinstance(s, SeqStmt):
        for x in s.stmts:
            out += stmt_lines(x, depth)
    elif isinstance(s, BlockRealize):
        out += _block_lines(s, depth)
    elif isinstance(s, BufferStore):
        out.append((depth, _store(s), None))
    elif isinstance(s, IfThenElse):
        out.append((depth, f"if {expr_str(s.cond)}:", None))
        out += stmt_lines(s.then_case, depth + 1)
        if s.else_case is not None:
            out.append((depth, "else:", None))
            out += stmt_lines(s.else_case, depth + 1)
    elif isinstance(s, Allocate):
        b = s.buffer
        out.append((depth, f"{b.name} = alloc({list(b.shape)}, \"{b.dtype}\", "
                           f"scope=\"{b.scope}\")", b.name))
        out += stmt_lines(s.body, depth)
    return out


def _block_lines(r: BlockRealize, depth: int) -> list:
    b: Block = r.block
    tag = b.name
    out = [(depth, f'with block("{b.name}"):', tag)]
    d = depth + 1
    for iv, val in zip(b.iter_vars, r.iter_values):
        kind = "spatial" if iv.kind == "S" else "reduce"
        out.append((d, f"{iv.var.name} = {kind}({iv.extent}, {expr_str(val)})", tag))
    if not (isinstance(r.predicate, IntImm) and r.predicate.value == 1):
        out.append((d, f"where({expr_str(r.predicate)})", tag))
    if not (isinstance(b.reduce_where, IntImm) and b.reduce_where.value == 1):
        out.append((d, f"reduce_where({expr_str(b.reduce_where)})", tag))
    for k, v in b.annotations:
        out.append((d, f"annotate({k!r}, {v!r})", tag))
    if b.init is not None:
        out.append((d, "with init():", tag))
        out.append((d + 1, _store(b.init), tag))
    out.append((d, _store(b.body), tag))
    return out


def _header(f: PrimFunc) -> list:
    params = ", ".join(f"{b.name}: Buffer({tuple(b.shape)}, \"{b.dtype}\")" for b in f.params)
    lines = [(0, f"def {f.name}({params}):", None)]
    for b in f.alloc_buffers:
        lines.append((1, f"{b.name} = alloc_buffer({tuple(b.shape)}, \"{b.dtype}\", "
                         f"scope=\"{b.scope}\")", b.name))
    return lines


def func_lines(f) -> list:
    return _header(f) + stmt_lines(f.body, 1)


def to_text(f) -> str:
    return "\n".join("    " * d + t for d, t, _ in func_lines(f))


def to_html(f, highlight: set | frozenset = frozenset()) -> str:
    """The same text as a <pre>, lines of highlighted loops/blocks marked."""
    rows = []
    for d, t, tag in func_lines(f):
        cls = ' class="se-hl"' if tag is not None and tag in highlight else ""
        rows.append(f'<span{cls} data-tag="{_html.escape(tag or "")}">'
                    f'{"    " * d}{_html.escape(t)}</span>')
    style = ("<style>.se-code{font-family:monospace;font-size:12px;line-height:1.35}"
             ".se-code .se-hl{background:#fff3b0;font-weight:bold}</style>")
    return style + '<pre class="se-code">' + "\n".join(rows) + "</pre>"
