"""How a GPU-bound lowered program runs on a GPU, and where its ``__syncthreads()`` go.

The lowered IR has no barrier statement: barriers are implied by the structure
lowering produces, and this module is the one place that says where. The
interpreter (which runs GPU programs thread by thread and checks them for
races) and the CUDA code generator both ask :func:`barrier_points`, so the
program the interpreter checks is the program the GPU runs.

The execution model
-------------------
- **Launches.** A thread-bound ``For`` (``blockIdx.*``, ``threadIdx.*`` or
  ``vthread.*``) that is not inside another thread-bound loop starts one kernel
  launch; everything under it runs on the device, launches run one after the
  other (the end of a launch synchronizes everything). Per tag, the launch's
  extent is the largest extent of the loops with that tag in it.
- **Threads.** A thread is ``(blockIdx.x/y/z, threadIdx.x/y/z)``. A
  ``blockIdx``/``threadIdx`` loop is not a loop on the device: it is
  ``if idx < extent: var = idx`` (no test when the extent is the launch's). A
  loop nested inside another loop of the same tag (a cooperative fetch under
  the compute's thread loop) is therefore the *same* thread, not a second one.
  ``vthread`` loops are ordinary loops run by one real thread: vthreads are not
  threads, and two vthreads of one thread never race.
- **Memory.** ``local`` buffers have one copy per thread, wherever lowering
  allocates them; ``shared`` ones one copy per block; ``global`` ones one copy.
- **Barriers** (``__syncthreads()``, all threads of a block) go only at
  *uniform* places: inside a launch, not under an ``if`` whose condition reads
  a ``threadIdx``-bound variable or a buffer, and not under a ``threadIdx``
  loop whose extent is smaller than the launch's for its tag (every thread of
  the block must reach every barrier). At such places:

  1. *between two statements of a* ``SeqStmt`` when either of them contains a
     ``threadIdx`` loop (a cooperative stage: a fetch into shared memory under
     the compute's thread loops, or one of several per-thread stages of a
     block) and a ``shared`` or ``global`` buffer written by one side is read
     or written by the other (counting everything since the previous barrier);
  2. *at the end of each iteration of a loop* whose body holds a barrier of
     rule 1 (or 2) and whose accesses after its last barrier conflict, in the
     same sense, with those before its first one in the next iteration (the
     shared tile must not be refilled while other threads still read it).

  Conflicts are decided per buffer, not per element: a barrier may be more than
  needed, never placed where some threads cannot reach it. Whether the barriers
  are *enough* is what the interpreter's race check answers, element by element.

Barrier positions are keyed by the identity of the nodes of the lowered
function that was analysed: walk that same object when emitting code.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.expr import Buffer
from ..ir.functor import collect_loads, expr_vars, iter_nodes
from ..ir.stmt import Allocate, BufferStore, For, IfThenElse, PrimFunc, SeqStmt, Stmt

BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass
class Launch:
    """One kernel launch: its root loop and, per tag, the launch's extent."""
    root: For
    extents: dict

    @property
    def grid(self) -> tuple:
        return tuple(self.extents.get(t, 1) for t in BLOCK_TAGS)

    @property
    def block(self) -> tuple:
        return tuple(self.extents.get(t, 1) for t in THREAD_TAGS)


@dataclass
class Barriers:
    """Where the ``__syncthreads()`` of a lowered function go (see the module docstring)."""
    launches: list
    _before: set = field(default_factory=set)      # (id(seq), i): before seq.stmts[i]
    _loop_end: set = field(default_factory=set)    # id(loop): last thing in each iteration
    descriptions: list = field(default_factory=list)
    _order: list = field(default_factory=list)     # the keys, in descriptions order

    def before(self, seq: SeqStmt, i: int) -> bool:
        """Is there a barrier just before ``seq.stmts[i]``?"""
        return (id(seq), i) in self._before

    def at_loop_end(self, loop: For) -> bool:
        """Does every iteration of ``loop`` end with a barrier?"""
        return id(loop) in self._loop_end

    def __len__(self) -> int:
        return len(self._before) + len(self._loop_end)

    def without(self, k: int) -> "Barriers":
        """The same plan with its ``k``-th barrier (in ``descriptions`` order) removed:
        for showing that the race check catches a missing ``__syncthreads()``."""
        keys = self._keys()
        drop = keys[k]
        out = Barriers(self.launches, set(self._before), set(self._loop_end),
                       [d for i, d in enumerate(self.descriptions) if i != k],
                       [x for i, x in enumerate(keys) if i != k])
        (out._before if drop[0] == "before" else out._loop_end).discard(drop[1])
        return out

    def _keys(self) -> list:
        return list(self._order)


def is_thread_loop(s) -> bool:
    return isinstance(s, For) and s.kind == "thread"


def launches(func: PrimFunc) -> list:
    """The kernel launches of a lowered function, in program order."""
    found: list = []

    def visit(s):
        if is_thread_loop(s):
            found.append(launch_of(s))
            return
        for k in _children(s):
            visit(k)
    visit(func.body)
    return found


def launch_of(root: For) -> Launch:
    """The launch that the outermost thread-bound loop ``root`` starts."""
    ext: dict = {}
    for n in iter_nodes(root):
        if is_thread_loop(n):
            ext[n.thread] = max(ext.get(n.thread, 1), n.extent)
    return Launch(root, ext)


def _children(s) -> tuple:
    if isinstance(s, (For, Allocate)):
        return (s.body,)
    if isinstance(s, SeqStmt):
        return s.stmts
    if isinstance(s, IfThenElse):
        return (s.then_case,) + ((s.else_case,) if s.else_case is not None else ())
    return ()


def _is_cross(buf: Buffer) -> bool:
    """Can two threads see one element of ``buf``?"""
    return buf.scope in ("shared", "global")


def _expr_access(e, acc: set) -> None:
    for ld in collect_loads(e):
        if _is_cross(ld.buffer):
            acc.add((ld.buffer.name, "R"))


def _conflict(a: set, b: set) -> bool:
    wa = {n for n, k in a if k == "W"}
    wb = {n for n, k in b if k == "W"}
    return bool(wa & {n for n, _ in b}) or bool(wb & {n for n, _ in a})


def _has_thread_loop(s: Stmt) -> bool:
    return any(is_thread_loop(n) and n.thread in THREAD_TAGS for n in iter_nodes(s))


class _Planner:
    def __init__(self, launch: Launch, out: Barriers):
        self.launch = launch
        self.out = out
        self.thread_vars: set = set()

    def uniform_under(self, s: For) -> bool:
        return not (s.thread in THREAD_TAGS and s.extent < self.launch.extents[s.thread])

    def visit(self, s, uniform: bool, where: str):
        """(first, last, has_barrier): accesses before the first barrier in ``s``, after
        the last, and whether ``s`` holds a barrier (without one, first == last == all)."""
        if isinstance(s, BufferStore):
            acc: set = set()
            if _is_cross(s.buffer):
                acc.add((s.buffer.name, "W"))
            _expr_access(s.value, acc)
            for i in s.indices:
                _expr_access(i, acc)
            return acc, acc, False
        if isinstance(s, Allocate):
            return self.visit(s.body, uniform, where)
        if isinstance(s, IfThenElse):
            cond: set = set()
            _expr_access(s.cond, cond)
            ok = uniform and not (expr_vars(s.cond) & self.thread_vars) and not cond
            parts = [self.visit(k, ok, where + "/if") for k in _children(s)]
            hb = any(p[2] for p in parts)
            first = cond.union(*[p[0] for p in parts])
            last = set().union(*[p[1] for p in parts]) if hb else first
            return first, last, hb
        if isinstance(s, For):
            here = f"{where}/{s.var.name}"
            if s.thread in THREAD_TAGS:
                self.thread_vars.add(s.var.name)
            inner_uniform = uniform and (not is_thread_loop(s) or self.uniform_under(s))
            first, last, hb = self.visit(s.body, inner_uniform, here)
            if (hb and inner_uniform and s.extent > 1
                    and not (is_thread_loop(s) and s.thread not in ("vthread.x",))
                    and _conflict(last, first)):
                self.out._loop_end.add(id(s))
                self.out._order.append(("end", id(s)))
                self.out.descriptions.append(f"end of each iteration of {here}")
                return first, set(), True
            return first, last, hb
        if isinstance(s, SeqStmt):
            first, cur, had = set(), set(), False
            prev_coop = False
            for i, c in enumerate(s.stmts):
                f, l, hb = self.visit(c, uniform, f"{where}[{i}]")
                coop = _has_thread_loop(c)
                if i > 0 and uniform and (coop or prev_coop) and _conflict(cur, f):
                    self.out._before.add((id(s), i))
                    self.out._order.append(("before", (id(s), i)))
                    self.out.descriptions.append(f"before statement {i} of {where}")
                    if not had:
                        first, had = cur, True
                    cur = set()
                if hb:
                    if not had:
                        first, had = cur | f, True
                    cur = set(l)
                else:
                    cur = cur | f
                prev_coop = coop
            return (first if had else cur), cur, had
        return set(), set(), False


def barrier_points(func: PrimFunc) -> Barriers:
    """Where ``__syncthreads()`` go in the lowered function ``func`` (see the module
    docstring for the rules); an empty plan for a program without thread bindings."""
    out = Barriers(launches(func))
    for launch in out.launches:
        _Planner(launch, out).visit(launch.root, True, "")
    return out
