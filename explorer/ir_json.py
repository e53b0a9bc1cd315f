"""A PrimFunc as plain JSON data and back: buffers, loops, blocks, expressions.

This is how a workload's tensor expression travels (``explorer.workload``):
measurement workers, the tuning database and remote workers rebuild the
function from this data alone. Expressions are tagged lists::

    ["add", a, b]   ["load", "A", [i, k]]   ["var", "i", "int32"]   ["float", 0.5, "float32"]

statements are objects (``{"for": ..., "extent": 8, "body": ...}``, ``{"seq": [...]}``,
``{"block": {...}, "iter_values": [...], "predicate": ...}``), buffers are
declared once and named where they are used.

Loading only reads JSON values (no pickle, no eval) and validates them: types,
sizes, nesting depth, dtypes of operands, and that every buffer and variable
used is declared where it is used. Anything else raises ``WorkloadError``
naming the place (``body.seq[1].block.body.value``) and what is wrong.
"""
from __future__ import annotations

import math

from .errors import WorkloadError
from .ir.expr import (DTYPES, EQ, FLOAT_DTYPES, LE, LT, MATH_OPS, NE, Add, And, Buffer,
                      BufferLoad, Call, Cast, Div, FloatImm, FloorDiv, FloorMod, IntImm, Max, Min,
                      Mul, Not, Or, Select, Sub, Var)
from .ir.stmt import (LOOP_KINDS, THREAD_TAGS, Block, BlockRealize, BufferStore, For, IterVar,
                      PrimFunc, SeqStmt)

MAX_NODES = 200_000            # expression and statement nodes in one function
MAX_DEPTH = 200                # nesting of statements and expressions
MAX_DIMS = 8
MAX_ELEMENTS = 2 ** 28         # per buffer (1 GiB of float32): loading must not allocate more
MAX_NAME = 128
SCOPES = ("global", "shared", "local")

_BINARY = {"add": Add, "sub": Sub, "mul": Mul, "div": Div, "floordiv": FloorDiv,
           "floormod": FloorMod, "min": Min, "max": Max, "lt": LT, "le": LE, "eq": EQ, "ne": NE,
           "and": And, "or": Or}
_TAG = {cls: tag for tag, cls in _BINARY.items()}
_COMPARE = ("lt", "le", "eq", "ne")
_LOGIC = ("and", "or")


# ------------------------------------------------------------------ encoding

def func_to_json(func: PrimFunc) -> dict:
    """``func`` as JSON-able data (see the module docstring); WorkloadError for a node
    this format does not hold (a lowered function: encode the unscheduled one)."""
    if not isinstance(func, PrimFunc):
        raise WorkloadError(f"func_to_json takes a PrimFunc, not {type(func).__name__}")
    enc = _Encoder()
    params = [enc.buffer(b) for b in func.params]
    allocs = [enc.buffer(b) for b in func.alloc_buffers]
    body = enc.stmt(func.body)
    return {"name": func.name, "buffers": list(enc.buffers.values()), "params": params,
            "alloc_buffers": allocs, "attrs": _pairs(func.attrs, "attrs"), "body": body}


def _scalar(v, what: str):
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float) and math.isfinite(v):
        return v
    raise WorkloadError(f"{what}: value {v!r} is not a JSON scalar (int, finite float, string, "
                        "bool or None)")


def _pairs(items, what: str) -> list:
    return [[str(k), _scalar(v, f"{what} {k!r}")] for k, v in items]


class _Encoder:
    def __init__(self):
        self.buffers: dict = {}
        self._objs: dict = {}

    def buffer(self, b: Buffer) -> str:
        seen = self._objs.setdefault(b.name, b)
        if seen != b:
            raise WorkloadError(f"two different buffers are named {b.name!r} ({seen} and {b}): "
                                "give every tensor a unique name")
        self.buffers[b.name] = {"name": b.name, "shape": [int(s) for s in b.shape],
                                "dtype": b.dtype, "scope": b.scope}
        return b.name

    def expr(self, e) -> list:
        t = type(e)
        if t in _TAG:
            return [_TAG[t], self.expr(e.a), self.expr(e.b)]
        if t is Var:
            return ["var", e.name, e.dtype]
        if t is IntImm:
            return ["int", int(e.value), e.dtype]
        if t is FloatImm:
            v = float(e.value)
            return ["float", v if math.isfinite(v) else repr(v), e.dtype]
        if t is BufferLoad:
            return ["load", self.buffer(e.buffer), [self.expr(i) for i in e.indices]]
        if t is Not:
            return ["not", self.expr(e.a)]
        if t is Cast:
            return ["cast", e.dtype, self.expr(e.value)]
        if t is Call:
            return ["call", e.op, [self.expr(a) for a in e.args], e.dtype]
        if t is Select:
            return ["select", self.expr(e.cond), self.expr(e.true_value),
                    self.expr(e.false_value)]
        raise WorkloadError(f"cannot write a {t.__name__} expression ({e!r}) as workload JSON")

    def store(self, s: BufferStore) -> dict:
        return {"store": self.buffer(s.buffer), "indices": [self.expr(i) for i in s.indices],
                "value": self.expr(s.value)}

    def stmt(self, s) -> dict:
        t = type(s)
        if t is For:
            return {"for": self.expr(s.var), "extent": int(s.extent), "kind": s.kind,
                    "thread": s.thread, "annotations": _pairs(s.annotations, "loop annotation"),
                    "body": self.stmt(s.body)}
        if t is SeqStmt:
            return {"seq": [self.stmt(x) for x in s.stmts]}
        if t is BlockRealize:
            return {"block": self.block(s.block), "iter_values": [self.expr(v) for v in
                                                                   s.iter_values],
                    "predicate": self.expr(s.predicate)}
        raise WorkloadError(f"cannot write a {t.__name__} statement as workload JSON: a "
                            "workload holds the unscheduled loop tree (loops and blocks), not a "
                            "lowered function")

    def block(self, b: Block) -> dict:
        return {"name": b.name,
                "iter_vars": [[self.expr(iv.var), int(iv.extent), iv.kind] for iv in b.iter_vars],
                "body": self.store(b.body),
                "init": None if b.init is None else self.store(b.init),
                "annotations": _pairs(b.annotations, "block annotation"),
                "reduce_where": self.expr(b.reduce_where)}


# ------------------------------------------------------------------ decoding

def func_from_json(data) -> PrimFunc:
    """The PrimFunc ``data`` describes; WorkloadError when it is malformed (see the
    module docstring for what is checked)."""
    d = _Decoder()
    obj = d.obj(data, "function", ("name", "buffers", "params", "alloc_buffers", "body"),
                ("attrs",))
    name = d.name(obj["name"], "function.name")
    buffers = d.buffers(obj["buffers"])
    d.buffers_by_name = buffers
    params = d.buffer_list(obj["params"], "function.params")
    allocs = d.buffer_list(obj["alloc_buffers"], "function.alloc_buffers")
    both = set(b.name for b in params) & set(b.name for b in allocs)
    if both:
        d.fail("function", f"{', '.join(sorted(both))} is both a parameter and allocated")
    attrs = d.pairs(obj.get("attrs", []), "function.attrs")
    body = d.stmt(obj["body"], "body", 0, frozenset())
    return PrimFunc(name, params, body, allocs, attrs)


class _Decoder:
    def __init__(self):
        self.nodes = 0
        self.buffers_by_name: dict = {}

    # ------------------------------------------------------------ basics
    @staticmethod
    def fail(path: str, msg: str):
        raise WorkloadError(f"workload JSON, at {path}: {msg}")

    def tick(self, path: str, depth: int) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            self.fail(path, f"more than {MAX_NODES} nodes: too large for a workload")
        if depth > MAX_DEPTH:
            self.fail(path, f"nested deeper than {MAX_DEPTH} levels")

    def obj(self, v, path: str, required: tuple, optional: tuple = ()) -> dict:
        if not isinstance(v, dict):
            self.fail(path, f"expected an object, got {_kind(v)}")
        missing = [k for k in required if k not in v]
        if missing:
            self.fail(path, f"missing {', '.join(missing)}")
        extra = sorted(set(v) - set(required) - set(optional))
        if extra:
            self.fail(path, f"unknown field {', '.join(map(repr, extra))}")
        return v

    def array(self, v, path: str, min_len: int = 0, max_len: int = MAX_NODES) -> list:
        if not isinstance(v, list):
            self.fail(path, f"expected a list, got {_kind(v)}")
        if not min_len <= len(v) <= max_len:
            self.fail(path, f"expected {min_len} to {max_len} items, got {len(v)}")
        return v

    def name(self, v, path: str) -> str:
        if not isinstance(v, str) or not 0 < len(v) <= MAX_NAME or not v.isprintable():
            self.fail(path, f"expected a name (1 to {MAX_NAME} printable characters), "
                      f"got {_short(v)}")
        return v

    def integer(self, v, path: str, lo: int, hi: int) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            self.fail(path, f"expected an int from {lo} to {hi}, got {_short(v)}")
        return v

    def choice(self, v, path: str, allowed) -> str:
        if v not in allowed or not isinstance(v, str):
            self.fail(path, f"expected one of {', '.join(allowed)}, got {_short(v)}")
        return v

    def pairs(self, v, path: str) -> tuple:
        out = []
        for n, item in enumerate(self.array(v, path, 0, 64)):
            p = f"{path}[{n}]"
            if not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str):
                self.fail(p, f"expected [key, value], got {_short(item)}")
            val = item[1]
            if not (val is None or isinstance(val, (bool, int, str))
                    or (isinstance(val, float) and math.isfinite(val))):
                self.fail(p, f"value must be a JSON scalar, got {_short(val)}")
            out.append((item[0], val))
        return tuple(out)

    # ------------------------------------------------------------ buffers
    def buffers(self, v) -> dict:
        out: dict = {}
        for n, item in enumerate(self.array(v, "function.buffers", 1, 4096)):
            p = f"function.buffers[{n}]"
            b = self.obj(item, p, ("name", "shape", "dtype"), ("scope",))
            name = self.name(b["name"], f"{p}.name")
            if name in out:
                self.fail(p, f"buffer {name!r} is declared twice")
            shape = tuple(self.integer(s, f"{p}.shape", 1, MAX_ELEMENTS)
                          for s in self.array(b["shape"], f"{p}.shape", 1, MAX_DIMS))
            if math.prod(shape) > MAX_ELEMENTS:
                self.fail(p, f"buffer {name!r} of shape {shape} has more than {MAX_ELEMENTS} "
                          "elements")
            dtype = self.choice(b["dtype"], f"{p}.dtype", DTYPES)
            scope = self.choice(b.get("scope", "global"), f"{p}.scope", SCOPES)
            out[name] = Buffer(name, shape, dtype, scope)
        return out

    def buffer(self, v, path: str) -> Buffer:
        if not isinstance(v, str) or v not in self.buffers_by_name:
            self.fail(path, f"{_short(v)} is not a declared buffer")
        return self.buffers_by_name[v]

    def buffer_list(self, v, path: str) -> tuple:
        names = self.array(v, path, 0, 4096)
        if len(set(map(str, names))) != len(names):
            self.fail(path, "a buffer is listed twice")
        return tuple(self.buffer(x, f"{path}[{n}]") for n, x in enumerate(names))

    # ------------------------------------------------------------ expressions
    def expr(self, v, path: str, depth: int, scope: frozenset):
        self.tick(path, depth)
        if not isinstance(v, list) or not v or not isinstance(v[0], str):
            self.fail(path, f"expected an expression [tag, ...], got {_short(v)}")
        tag, args = v[0], v[1:]
        if tag in _BINARY:
            return self._binary(tag, args, path, depth, scope)
        handler = getattr(self, f"_e_{tag}", None)
        if handler is None:
            self.fail(path, f"unknown expression tag {tag!r}")
        return handler(args, path, depth, scope)

    def _arity(self, args, n: int, path: str, form: str):
        if len(args) != n:
            self.fail(path, f"expected {form}")

    def _binary(self, tag, args, path, depth, scope):
        self._arity(args, 2, path, f"[{tag!r}, a, b]")
        a = self.expr(args[0], f"{path}.a", depth + 1, scope)
        b = self.expr(args[1], f"{path}.b", depth + 1, scope)
        if tag in _LOGIC and (a.dtype, b.dtype) != ("bool", "bool"):
            self.fail(path, f"{tag} needs bool operands, got {a.dtype} and {b.dtype}")
        if tag not in _LOGIC and a.dtype != b.dtype:
            self.fail(path, f"{tag} of {a.dtype} and {b.dtype}: operands must have one dtype")
        if tag not in _COMPARE + _LOGIC and a.dtype == "bool":
            self.fail(path, f"{tag} of bool operands")
        return _BINARY[tag](a, b)

    def _e_var(self, args, path, depth, scope):
        self._arity(args, 2, path, '["var", name, dtype]')
        name = self.name(args[0], path)
        if scope is not None and name not in scope:
            self.fail(path, f"variable {name!r} is not bound here (in scope: "
                      f"{', '.join(sorted(scope)) or 'none'})")
        return Var(name, self.choice(args[1], path, ("int32",)))

    def _e_int(self, args, path, depth, scope):
        self._arity(args, 2, path, '["int", value, dtype]')
        dtype = self.choice(args[1], path, ("int32", "bool"))
        lo, hi = (0, 1) if dtype == "bool" else (-2 ** 31, 2 ** 31 - 1)
        return IntImm(self.integer(args[0], path, lo, hi), dtype)

    def _e_float(self, args, path, depth, scope):
        self._arity(args, 2, path, '["float", value, dtype]')
        v = args[0]
        if v in ("inf", "-inf", "nan"):
            v = float(v)
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            self.fail(path, f"expected a number or 'inf', '-inf', 'nan', got {_short(v)}")
        return FloatImm(float(v), self.choice(args[1], path, FLOAT_DTYPES))

    def _e_load(self, args, path, depth, scope):
        self._arity(args, 2, path, '["load", buffer, [indices]]')
        buf = self.buffer(args[0], path)
        return BufferLoad(buf, self.indices(args[1], buf, path, depth, scope))

    def indices(self, v, buf: Buffer, path: str, depth: int, scope) -> tuple:
        items = self.array(v, f"{path}.indices", buf.ndim, buf.ndim)
        out = tuple(self.expr(x, f"{path}.indices[{n}]", depth + 1, scope)
                    for n, x in enumerate(items))
        if any(i.dtype != "int32" for i in out):
            self.fail(path, f"indices of {buf.name} must be int32 expressions")
        return out

    def _e_not(self, args, path, depth, scope):
        self._arity(args, 1, path, '["not", a]')
        a = self.expr(args[0], f"{path}.a", depth + 1, scope)
        if a.dtype != "bool":
            self.fail(path, f"not of a {a.dtype} operand")
        return Not(a)

    def _e_cast(self, args, path, depth, scope):
        self._arity(args, 2, path, '["cast", dtype, value]')
        dtype = self.choice(args[0], path, DTYPES)
        return Cast(dtype, self.expr(args[1], f"{path}.value", depth + 1, scope))

    def _e_call(self, args, path, depth, scope):
        self._arity(args, 3, path, '["call", op, [arg], dtype]')
        op = self.choice(args[0], path, MATH_OPS)
        items = self.array(args[1], f"{path}.args", 1, 1)
        x = self.expr(items[0], f"{path}.args[0]", depth + 1, scope)
        dtype = self.choice(args[2], path, DTYPES)
        if dtype != x.dtype or (op != "abs" and dtype not in FLOAT_DTYPES):
            self.fail(path, f"{op} of a {x.dtype} argument cannot give {dtype}")
        return Call(op, (x,), dtype)

    def _e_select(self, args, path, depth, scope):
        self._arity(args, 3, path, '["select", cond, true_value, false_value]')
        c, t, f = (self.expr(x, f"{path}.{n}", depth + 1, scope)
                   for x, n in zip(args, ("cond", "true_value", "false_value")))
        if c.dtype != "bool" or t.dtype != f.dtype:
            self.fail(path, f"select needs a bool condition and branches of one dtype, got "
                      f"{c.dtype}, {t.dtype}, {f.dtype}")
        return Select(c, t, f)

    def bool_expr(self, v, path: str, depth: int, scope):
        e = self.expr(v, path, depth, scope)
        if e.dtype != "bool":
            self.fail(path, f"expected a bool condition, got a {e.dtype} expression")
        return e

    # ------------------------------------------------------------ statements
    def stmt(self, v, path: str, depth: int, loops: frozenset):
        self.tick(path, depth)
        if isinstance(v, dict) and "for" in v:
            return self._for(v, path, depth, loops)
        if isinstance(v, dict) and "seq" in v:
            self.obj(v, path, ("seq",))
            items = self.array(v["seq"], f"{path}.seq", 1)
            return SeqStmt(tuple(self.stmt(s, f"{path}.seq[{n}]", depth + 1, loops)
                                 for n, s in enumerate(items)))
        if isinstance(v, dict) and "block" in v:
            return self._realize(v, path, depth, loops)
        self.fail(path, f"expected a statement (an object with 'for', 'seq' or 'block'), got "
                  f"{_short(v)}")

    def _for(self, v, path, depth, loops):
        self.obj(v, path, ("for", "extent", "body"), ("kind", "thread", "annotations"))
        var = self.expr(v["for"], f"{path}.for", depth + 1, None)
        if not isinstance(var, Var):
            self.fail(f"{path}.for", "expected a loop variable [\"var\", name, \"int32\"]")
        if var.name in loops:
            self.fail(path, f"loop variable {var.name!r} is already bound by an outer loop")
        extent = self.integer(v["extent"], f"{path}.extent", 1, MAX_ELEMENTS)
        kind = self.choice(v.get("kind", "serial"), f"{path}.kind", LOOP_KINDS)
        thread = v.get("thread")
        if thread is not None:
            self.choice(thread, f"{path}.thread", THREAD_TAGS)
        anns = self.pairs(v.get("annotations", []), f"{path}.annotations")
        body = self.stmt(v["body"], f"{path}.body", depth + 1, loops | {var.name})
        return For(var, extent, body, kind, thread, anns)

    def _realize(self, v, path, depth, loops):
        self.obj(v, path, ("block", "iter_values", "predicate"))
        values = tuple(self.expr(x, f"{path}.iter_values[{n}]", depth + 1, loops)
                       for n, x in enumerate(self.array(v["iter_values"], f"{path}.iter_values")))
        pred = self.bool_expr(v["predicate"], f"{path}.predicate", depth + 1, loops)
        block = self._block(v["block"], f"{path}.block", depth + 1)
        if len(block.iter_vars) != len(values):
            self.fail(path, f"block {block.name!r} has {len(block.iter_vars)} iteration "
                      f"variables but {len(values)} iter_values")
        if any(x.dtype != "int32" for x in values):
            self.fail(f"{path}.iter_values", "iteration values must be int32 expressions")
        return BlockRealize(values, pred, block)

    def _block(self, v, path, depth):
        self.obj(v, path, ("name", "iter_vars", "body"), ("init", "annotations", "reduce_where"))
        name = self.name(v["name"], f"{path}.name")
        ivs = []
        for n, item in enumerate(self.array(v["iter_vars"], f"{path}.iter_vars", 0, 64)):
            p = f"{path}.iter_vars[{n}]"
            if not isinstance(item, list) or len(item) != 3:
                self.fail(p, f"expected [var, extent, kind], got {_short(item)}")
            var = self.expr(item[0], p, depth + 1, None)
            if not isinstance(var, Var):
                self.fail(p, "expected an iteration variable [\"var\", name, \"int32\"]")
            ivs.append(IterVar(var, self.integer(item[1], p, 1, MAX_ELEMENTS),
                               self.choice(item[2], p, ("S", "R"))))
        scope = frozenset(iv.var.name for iv in ivs)
        if len(scope) != len(ivs):
            self.fail(f"{path}.iter_vars", "an iteration variable is declared twice")
        body = self.store(v["body"], f"{path}.body", depth + 1, scope)
        init = None if v.get("init") is None else self.store(v["init"], f"{path}.init",
                                                             depth + 1, scope)
        anns = self.pairs(v.get("annotations", []), f"{path}.annotations")
        where = v.get("reduce_where", ["int", 1, "bool"])
        return Block(name, tuple(ivs), body, init, anns,
                     self.bool_expr(where, f"{path}.reduce_where", depth + 1, scope))

    def store(self, v, path: str, depth: int, scope) -> BufferStore:
        self.tick(path, depth)
        self.obj(v, path, ("store", "indices", "value"))
        buf = self.buffer(v["store"], f"{path}.store")
        idx = self.indices(v["indices"], buf, path, depth, scope)
        value = self.expr(v["value"], f"{path}.value", depth + 1, scope)
        if value.dtype != buf.dtype:
            self.fail(path, f"stores a {value.dtype} value into {buf.name} of {buf.dtype}")
        return BufferStore(buf, value, idx)


def _kind(v) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a bool",
            type(None): "null"}.get(type(v), type(v).__name__)


def _short(v, limit: int = 60) -> str:
    text = repr(v)
    return text if len(text) <= limit else text[:limit - 3] + "..."
