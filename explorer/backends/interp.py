"""The reference interpreter: runs any lowered program with Python semantics.

The lowered nest is translated to a plain Python function over flat
``array.array`` buffers (float32 storage rounds like the hardware does) and
compiled once with ``compile``: the source is generated from our own IR, never
from user text. It is the semantic reference for tests, teaching and GPU
schedules on machines without a GPU.

GPU-bound programs run as the GPU runs them, by the model of
``explorer.backends.barriers`` (the one the CUDA generator follows): each
kernel launch becomes a Python generator per thread (``blockIdx`` and
``threadIdx`` loops become ``if idx < extent: var = idx``, so a cooperative
fetch's thread loop under the compute's is the same thread; ``vthread`` loops
stay loops inside one real thread); ``local`` buffers get one copy per thread,
``shared`` ones one per block. The threads of a block run one after another up
to the next barrier (``yield`` at each ``__syncthreads()`` that
:func:`~explorer.backends.barriers.barrier_points` places), then all go on to
the next; blocks run in turn.

Race check (on unless ``check_races=False``): between two barriers every thread
logs the elements it reads and writes of each ``shared`` or ``global`` buffer
the launch writes; at each barrier numpy compares the logs of the block's
threads, and at the end of each block its ``global`` accesses are compared
with earlier blocks' (no barrier orders blocks). Two threads touching one
element, one of them writing, raise a :class:`~explorer.errors.RaceError` naming
the buffer, the element, both threads and who read and who wrote; so does a
barrier that some threads of a block reach and others never do. A thread is
``(blockIdx, threadIdx)``; vthreads of one thread are one thread. Programs
without thread bindings (CPU programs) run exactly as before, with no logging.
Accumulations under a thread loop marked for a cross-thread reduction are not
logged: they stand for the reduction the code generator emits (``_allreduced``).
"""
from __future__ import annotations

import array
import math

import numpy as np

from ..errors import BuildError, RaceError
from ..ir.expr import (BinaryOp, BufferLoad, Call, Cast, Div, Expr, FloatImm, IntImm, Max, Min,
                       Not, Select, Var, FLOAT_DTYPES)
from ..ir.functor import collect_loads
from ..ir.stmt import (Allocate, BufferStore, For, IfThenElse, PrimFunc, SeqStmt, Stmt)
from ..schedule.loop_prims import CROSS_THREAD_REDUCTION
from .barriers import BLOCK_TAGS, THREAD_TAGS, barrier_points, is_thread_loop, launch_of
from .kernel import Kernel

_TYPECODE = {"float32": "f", "float64": "d", "int32": "i", "bool": "b"}
_PYOP = {"+": "+", "-": "-", "*": "*", "//": "//", "%": "%", "<": "<", "<=": "<=",
         "==": "==", "!=": "!=", "and": "and", "or": "or"}


def _exp(x):
    return math.exp(x) if x < 700.0 else math.inf


def _log(x):
    return math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)


def _sqrt(x):
    return math.sqrt(x) if x >= 0 else math.nan


def _sigmoid(x):
    return 1.0 / (1.0 + _exp(-x))


def _div(a, b):
    if b == 0:
        return math.copysign(math.inf, a) if a != 0 else math.nan
    return a / b


_RUNTIME = {"_exp": _exp, "_log": _log, "_sqrt": _sqrt, "_tanh": math.tanh, "_abs": abs,
            "_sigmoid": _sigmoid, "_div": _div, "inf": math.inf, "nan": math.nan,
            "_array": array.array}


_TAG_VAR = {"blockIdx.x": "_bx", "blockIdx.y": "_by", "blockIdx.z": "_bz",
            "threadIdx.x": "_tx", "threadIdx.y": "_ty", "threadIdx.z": "_tz"}


class _LaunchInfo:
    """What the runner needs to know about one launch (filled in by the code generator)."""

    def __init__(self, number: int, func_name: str, launch, check: bool):
        self.number = number
        self.func_name = func_name
        self.grid = launch.grid
        self.block = launch.block
        self.tags = [t for t in BLOCK_TAGS + THREAD_TAGS if t in launch.extents]
        self.shared: list = []      # (name, typecode, size, fill) allocated per block
        self.logged: list = []      # (name, shape, scope) of buffers whose accesses are logged
        self.check = check


class _PyGen:
    def __init__(self, func: PrimFunc, check_races: bool = True, barriers=None):
        self.func = func
        self.lines: list = []
        self.check_races = check_races
        self.gpu = any(is_thread_loop(n) for n in _iter_fors(func.body))
        if self.gpu and barriers is None:
            barriers = barrier_points(func)
        self.barriers = barriers if self.gpu else None
        self.launch: _LaunchInfo | None = None     # set while generating a launch's code
        self.launch_infos: list = []
        self.logged: dict = {}                     # buffer name -> slot, in the current launch

    def flat_index(self, buf, idx) -> str:
        parts, stride = [], 1
        for d in range(len(buf.shape) - 1, -1, -1):
            e = self.expr(idx[d])
            parts.append(e if stride == 1 else f"({e})*{stride}")
            stride *= buf.shape[d]
        return " + ".join(reversed(parts)) if parts else "0"

    def expr(self, e: Expr) -> str:
        if isinstance(e, Var):
            return "v_" + e.name
        if isinstance(e, IntImm):
            return str(e.value)
        if isinstance(e, FloatImm):
            v = e.value
            return "inf" if v == math.inf else "(-inf)" if v == -math.inf else repr(v)
        if isinstance(e, BufferLoad):
            j = self.logged.get(e.buffer.name)
            if j is not None:   # log the element, then load it (the index runs once)
                return (f"(_r{j}(_t := {self.flat_index(e.buffer, e.indices)}) "
                        f"or b_{e.buffer.name}[_t])")
            return f"b_{e.buffer.name}[{self.flat_index(e.buffer, e.indices)}]"
        if isinstance(e, (Min, Max)):
            return f"{e.symbol}({self.expr(e.a)}, {self.expr(e.b)})"
        if isinstance(e, Div):
            if e.a.dtype in FLOAT_DTYPES:
                return f"_div({self.expr(e.a)}, {self.expr(e.b)})"
            return f"({self.expr(e.a)} // {self.expr(e.b)})"
        if isinstance(e, BinaryOp):
            return f"({self.expr(e.a)} {_PYOP[e.symbol]} {self.expr(e.b)})"
        if isinstance(e, Not):
            return f"(not {self.expr(e.a)})"
        if isinstance(e, Select):
            return (f"({self.expr(e.true_value)} if {self.expr(e.cond)} "
                    f"else {self.expr(e.false_value)})")
        if isinstance(e, Call):
            return f"_{e.op}({', '.join(self.expr(a) for a in e.args)})"
        if isinstance(e, Cast):
            conv = "float" if e.dtype in FLOAT_DTYPES else "int" if e.dtype == "int32" else "bool"
            return f"{conv}({self.expr(e.value)})"
        raise BuildError(f"interp: cannot translate expression {type(e).__name__}")

    def _fusable(self, s: For) -> bool:
        return (isinstance(s.body, For) and not is_thread_loop(s.body)
                and not (self.barriers and self.barriers.at_loop_end(s)))

    def stmt(self, s: Stmt, d: int):
        pad = "    " * d
        if is_thread_loop(s) and self.launch is None:
            self._launch(s, d)
        elif is_thread_loop(s) and s.thread in _TAG_VAR:
            tv = _TAG_VAR[s.thread]
            if s.extent < self.launch_extents[s.thread]:
                self.lines.append(f"{pad}if {tv} < {s.extent}:")
                d += 1
                pad = "    " * d
            self.lines.append(f"{pad}v_{s.var.name} = {tv}")
            saved = self.logged
            self.logged = {k: v for k, v in saved.items() if k not in _allreduced(s)}
            self.stmt(s.body, d)
            self.logged = saved
        elif isinstance(s, For) and d >= 12 and self._fusable(s):
            self._fused_loops(s, d)
        elif isinstance(s, For):
            self.lines.append(f"{pad}for v_{s.var.name} in range({s.extent}):")
            self.stmt(s.body, d + 1)
            if self.launch is not None and self.barriers.at_loop_end(s):
                self.lines.append(f"{pad}    yield  # __syncthreads()")
        elif isinstance(s, SeqStmt):
            for i, x in enumerate(s.stmts):
                if self.launch is not None and self.barriers.before(s, i):
                    self.lines.append(f"{pad}yield  # __syncthreads()")
                self.stmt(x, d)
        elif isinstance(s, IfThenElse):
            self.lines.append(f"{pad}if {self.expr(s.cond)}:")
            self.stmt(s.then_case, d + 1)
            if s.else_case is not None:
                self.lines.append(f"{pad}else:")
                self.stmt(s.else_case, d + 1)
        elif isinstance(s, Allocate) and self.launch is not None and s.buffer.scope != "local":
            b = s.buffer     # one copy per block: the runner allocates it
            k = len(self.launch.shared)
            zero = "nan" if b.dtype in FLOAT_DTYPES else "0"
            self.launch.shared.append((b.name, _TYPECODE[b.dtype], int(np.prod(b.shape)),
                                       math.nan if zero == "nan" else 0))
            self.lines.append(f"{pad}b_{b.name} = _sh[{k}]")
            self.stmt(s.body, d)
        elif isinstance(s, Allocate):
            b = s.buffer
            n = int(np.prod(b.shape))
            # NaN-filled: a read before any write shows up in the result
            zero = "nan" if b.dtype in FLOAT_DTYPES else "0"
            self.lines.append(f"{pad}b_{b.name} = _array('{_TYPECODE[b.dtype]}', [{zero}]) * {n}")
            self.stmt(s.body, d)
        elif isinstance(s, BufferStore):
            val = self.expr(s.value)
            if s.buffer.dtype == "int32" and s.value.dtype == "int32":
                val = f"_wrap32({val})"
            j = self.logged.get(s.buffer.name)
            if j is not None:
                self.lines.append(f"{pad}_s = {self.flat_index(s.buffer, s.indices)}")
                self.lines.append(f"{pad}_w{j}(_s)")
                self.lines.append(f"{pad}b_{s.buffer.name}[_s] = {val}")
                return
            self.lines.append(f"{pad}b_{s.buffer.name}[{self.flat_index(s.buffer, s.indices)}] "
                              f"= {val}")
        else:
            raise BuildError(f"interp: unexpected statement {type(s).__name__}; lower it first")

    def _launch(self, root: For, d: int):
        """One kernel launch: a generator function per thread, run by ``_run_launch``."""
        launch = launch_of(root)
        n = len(self.launch_infos)
        info = _LaunchInfo(n, self.func.name, launch, self.check_races)
        self.launch_infos.append(info)
        written = []
        for node in _iter_stmts(root):
            if (isinstance(node, BufferStore) and node.buffer.scope in ("shared", "global")
                    and node.buffer.name not in written):
                written.append(node.buffer.name)
                info.logged.append((node.buffer.name, tuple(node.buffer.shape),
                                    node.buffer.scope))
        if not self.check_races:
            info.logged = []
        self.launch, self.launch_extents = info, launch.extents
        self.logged = {name: j for j, (name, _, _) in enumerate(info.logged)}
        pad, inner = "    " * d, "    " * (d + 1)
        self.lines.append(f"{pad}def _k{n}(_bx, _by, _bz, _tx, _ty, _tz, _sh, _lg):")
        self.lines.append(f"{inner}if False:")
        self.lines.append(f"{inner}    yield    # a generator: it stops at each barrier")
        for j in range(len(info.logged)):
            self.lines.append(f"{inner}_r{j} = _lg[{2 * j}].append; "
                              f"_w{j} = _lg[{2 * j + 1}].append")
        self.stmt(root, d + 1)
        self.lines.append(f"{pad}_run_launch(_k{n}, _launch_info[{n}])")
        self.launch, self.logged = None, {}

    def _fused_loops(self, s: For, d: int):
        """Python allows 20 nested blocks: deep perfectly nested loops run as one."""
        chain = [s]
        while self._fusable(chain[-1]):
            chain.append(chain[-1].body)
        pad, total = "    " * d, 1
        for lp in chain:
            total *= lp.extent
        self.lines.append(f"{pad}for _f{d} in range({total}):")
        rest = f"_f{d}"
        for lp in reversed(chain[1:]):
            self.lines.append(f"{pad}    {rest}, v_{lp.var.name} = divmod({rest}, {lp.extent})")
        self.lines.append(f"{pad}    v_{chain[0].var.name} = {rest}")
        self.stmt(chain[-1].body, d + 1)

    def source(self) -> str:
        args = ", ".join("b_" + p.name for p in self.func.params)
        self.lines = [f"def kernel({args}):"]
        self.stmt(self.func.body, 1)
        self.lines.append("    return None")
        return "\n".join(self.lines) + "\n"


def _allreduced(loop: For) -> set:
    """Buffers the threads of ``loop`` reduce together: a loop bound to threadIdx with
    the ``cross_thread_reduction`` annotation (``Schedule.bind`` puts it there) asks the
    code generator for a cross-thread reduction (warp shuffles or a shared-memory tree)
    of the accumulations under it. Run one thread after another, those accumulations
    compute what that reduction computes, so they are not races."""
    if not dict(loop.annotations).get(CROSS_THREAD_REDUCTION):
        return set()
    out = set()
    for node in _iter_stmts(loop.body):
        if isinstance(node, BufferStore) and any(
                ld.buffer.name == node.buffer.name and ld.indices == node.indices
                for ld in collect_loads(node.value)):
            out.add(node.buffer.name)
    return out


def _iter_fors(s):
    return (n for n in _iter_stmts(s) if isinstance(n, For))


def _iter_stmts(s):
    from ..ir.functor import iter_nodes
    return iter_nodes(s)


def _wrap32(v: int) -> int:
    return ((v + 2 ** 31) % 2 ** 32) - 2 ** 31


# ------------------------------------------------------------------ GPU launches

def _run_launch(fn, info: _LaunchInfo) -> None:
    """Run one launch: blocks in turn; in a block, every thread up to the next barrier,
    then the next phase; the logs checked at every barrier and at the end of each block."""
    gx, gy, gz = info.grid
    tx_, ty_, tz_ = info.block
    n_threads = tx_ * ty_ * tz_
    n_slots = 2 * len(info.logged)
    owners = {j: (np.full(int(np.prod(shape)), -1, np.int64),
                  np.full(int(np.prod(shape)), -1, np.int64))
              for j, (_, shape, scope) in enumerate(info.logged) if scope == "global"}
    for bz in range(gz):
        for by in range(gy):
            for bx in range(gx):
                block = (bx, by, bz)
                shared = [array.array(tc, [fill]) * size for _, tc, size, fill in info.shared]
                logs = [[[] for _ in range(n_slots)] for _ in range(n_threads)]
                gens = [fn(bx, by, bz, tx, ty, tz, shared, logs[k])
                        for k, (tz, ty, tx) in enumerate(
                            (z, y, x) for z in range(tz_) for y in range(ty_)
                            for x in range(tx_))]
                block_acc: dict = {j: ([], []) for j in owners}
                live = list(range(n_threads))
                while live:
                    waiting, done = [], []
                    for k in live:
                        try:
                            next(gens[k])
                            waiting.append(k)
                        except StopIteration:
                            done.append(k)
                    if n_slots:
                        _check_phase(info, block, logs, block_acc)
                    if waiting and done:
                        raise RaceError(
                            f"barrier divergence in {info.func_name} (launch {info.number}): "
                            f"{_thread_name(info, block, waiting[0])} waits at a "
                            f"__syncthreads() that {_thread_name(info, block, done[0])} "
                            f"never reaches (it finished): every thread of a block must reach "
                            f"every barrier; give all loops of one thread tag the same extent")
                    live = waiting
                if owners:
                    _check_blocks(info, block, block_acc, owners)


def _thread_name(info: _LaunchInfo, block, k: int) -> str:
    tx_, ty_, _ = info.block
    ids = dict(zip(BLOCK_TAGS, block))
    ids.update(zip(THREAD_TAGS, (k % tx_, k // tx_ % ty_, k // (tx_ * ty_))))
    return "thread (" + ", ".join(f"{t}={ids[t]}" for t in info.tags if t in ids) + ")"


def _element(shape, flat: int) -> str:
    return "[" + ", ".join(str(int(i)) for i in np.unravel_index(int(flat), shape)) + "]"


def _gather(logs, slot: int):
    """(element, thread) arrays of what every thread logged in ``slot``; the logs emptied."""
    lens = [len(lg[slot]) for lg in logs]
    if not any(lens):
        return None
    idx = np.fromiter((i for lg in logs for i in lg[slot]), np.int64, sum(lens))
    tid = np.repeat(np.arange(len(logs), dtype=np.int64), lens)
    for lg in logs:
        lg[slot].clear()
    return idx, tid


def _race(info, name, scope, shape, elem, first, second, how) -> RaceError:
    return RaceError(
        f"data race in {info.func_name} (launch {info.number}) on {scope} buffer {name}, "
        f"element {_element(shape, elem)}: {first} {how[0]} it and {second} {how[1]} it "
        f"{how[2]}. Put a __syncthreads() between the two accesses (barriers go where "
        f"explorer.backends.barriers.barrier_points says), or give each thread its own "
        f"elements (a reduction loop bound to threads needs a cross-thread reduction)")


def _check_phase(info: _LaunchInfo, block, logs, block_acc) -> None:
    """Between two barriers of one block: no element touched by two threads, one writing."""
    n = len(logs)
    for j, (name, shape, scope) in enumerate(info.logged):
        reads, writes = _gather(logs, 2 * j), _gather(logs, 2 * j + 1)
        if j in block_acc:
            for acc, got in zip(block_acc[j], (reads, writes)):
                if got is not None:
                    acc.append(got)
        if writes is None:
            continue
        keys = np.unique(writes[0] * n + writes[1])
        w_elem, w_tid = keys // n, keys % n
        elems, first, counts = np.unique(w_elem, return_index=True, return_counts=True)
        if (counts > 1).any():
            k = int(np.argmax(counts > 1))
            a, b = w_tid[first[k]], w_tid[first[k] + 1]
            raise _race(info, name, scope, shape, elems[k], _thread_name(info, block, a),
                        _thread_name(info, block, b),
                        ("writes", "writes", "between the same two barriers"))
        if reads is None:
            continue
        r_elem, r_tid = reads
        pos = np.minimum(np.searchsorted(elems, r_elem), len(elems) - 1)
        writer = w_tid[first[pos]]
        bad = (elems[pos] == r_elem) & (writer != r_tid)
        if bad.any():
            k = int(np.argmax(bad))
            raise _race(info, name, scope, shape, r_elem[k],
                        _thread_name(info, block, writer[k]),
                        _thread_name(info, block, r_tid[k]),
                        ("writes", "reads", "between the same two barriers"))


def _check_blocks(info: _LaunchInfo, block, block_acc, owners) -> None:
    """Global buffers: no element one block writes is touched by another block."""
    gx, gy, _ = info.grid
    n = int(np.prod(info.block))
    code = (block[0] + gx * (block[1] + gy * block[2])) * n

    def who(c):
        b = int(c) // n
        return _thread_name(info, (b % gx, b // gx % gy, b // (gx * gy)), int(c) % n)

    for j, (reads_l, writes_l) in block_acc.items():
        name, shape, scope = info.logged[j]
        w_own, r_own = owners[j]
        got = []
        for parts in (reads_l, writes_l):
            if not parts:
                got.append((np.zeros(0, np.int64), np.zeros(0, np.int64)))
                continue
            e = np.concatenate([p[0] for p in parts])
            t = np.concatenate([p[1] for p in parts])
            e, first = np.unique(e, return_index=True)
            got.append((e, t[first] + code))
        (r_e, r_t), (w_e, w_t) = got
        for elems, mine, table, how in ((w_e, w_t, w_own, ("writes", "writes")),
                                        (w_e, w_t, r_own, ("reads", "writes")),
                                        (r_e, r_t, w_own, ("writes", "reads"))):
            prev = table[elems]
            bad = prev >= 0
            if bad.any():
                k = int(np.argmax(bad))
                raise _race(info, name, scope, shape, elems[k], who(prev[k]), who(mine[k]),
                            how + ("from another block (no barrier orders the blocks of a "
                                   "launch)",))
        w_own[w_e] = w_t
        fresh = r_own[r_e] < 0
        r_own[r_e[fresh]] = r_t[fresh]


class InterpKernel(Kernel):
    target_kind = "interp"

    def __init__(self, func: PrimFunc, lowered: PrimFunc, check_races: bool = True,
                 barriers=None):
        gen = _PyGen(lowered, check_races, barriers)
        src = gen.source()
        super().__init__(func, lowered, src)
        self.check_races = check_races
        self.barriers = gen.barriers
        scope = dict(_RUNTIME, _wrap32=_wrap32, _run_launch=_run_launch,
                     _launch_info=gen.launch_infos)
        exec(compile(src, f"<interp {func.name}>", "exec"), scope)  # our own generated code
        self._fn = scope["kernel"]

    def _run(self, arrays):
        flat = []
        for p, a in zip(self.func.params, arrays):
            buf = array.array(_TYPECODE[p.dtype])
            buf.frombytes(a.tobytes())
            flat.append(buf)
        self._fn(*flat)
        for a, buf in zip(arrays, flat):
            a[...] = np.frombuffer(buf, dtype=a.dtype).reshape(a.shape)


def build_interp(func: PrimFunc, lowered: PrimFunc, check_races: bool = True,
                 barriers=None) -> InterpKernel:
    """The interpreter's kernel; GPU-bound programs are checked for races unless
    ``check_races`` is False (they still run thread by thread, barriers respected).
    ``barriers`` replaces the plan of ``barrier_points(lowered)`` (a test that removes
    a barrier by hand passes the edited plan)."""
    return InterpKernel(func, lowered, check_races, barriers)
