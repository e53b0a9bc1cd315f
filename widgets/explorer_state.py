"""The ScheduleExplorer's view-model: plain Python, no ipywidgets.

It holds the current Schedule, undo/redo stacks of Schedules (schedules are
values: every step works on a copy, so undo is free), the selected block and
loop, the last error and the last run. Widgets call its methods and redraw
when it notifies them; tests drive it directly or through the widgets.

Runs go through the engine: an ``explorer.measure.InteractiveMeasurer`` (one
worker process, started at the first Run and kept) builds, checks and times the
schedule as the tuner does; a kernel that crashes or hangs comes back as a
failed result and the next Run gets a fresh worker.

On a ``cuda`` target it also gives the GPU views, each computed once per schedule
by the engine: the generated CUDA C (``cuda_source``), which block and thread
write each output element (``thread_map``) and what each kernel uses against
the target's limits (``gpu_usage``); each comes with the engine's message instead
when it cannot be had (nothing bound yet, an illegal binding).

Loops and blocks are named by their names in the printed loop nest; the
view-model turns names into the schedule's handles (``get_block`` /
``get_loops`` when it has none yet), so the trace stays replayable.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from explorer import BlockRV, Schedule, Trace, Workload, build, ops
from explorer.backends.cuda.thread_map import thread_map
from explorer.space.gpu_usage import gpu_usage
from explorer.target import as_target
from explorer.errors import ExplorerError, ScheduleError
from explorer.ir.loop_tree import block_infos, loop_infos
from explorer.ir.printer import to_html
from explorer.ir.stmt import PrimFunc
from explorer.measure import InteractiveMeasurer, InteractiveResult, interactive_config


@dataclass(frozen=True)
class ErrorInfo:
    """The last refused step: which control (primitive) and the engine's message."""
    primitive: str
    message: str


@dataclass
class _Entry:
    """One point of the history: a schedule, the handles known in it, the selection."""
    schedule: Schedule
    handles: dict = field(default_factory=dict)     # ("loop"|"block", name) -> RV
    loop: str | None = None
    block: str | None = None

    def copy(self) -> "_Entry":
        return _Entry(self.schedule.copy(), dict(self.handles), self.loop, self.block)


class _Resolver:
    """Names to handles on one (uncommitted) entry."""

    def __init__(self, entry: _Entry):
        self.entry = entry
        self.sch = entry.schedule

    def _known(self, key):
        rv = self.entry.handles.get(key)
        if rv is None:
            return None
        try:
            return rv if self.sch.get(rv) == key[1] else None
        except ScheduleError:
            return None

    def block(self, name: str):
        rv = self._known(("block", name))
        if rv is None:
            rv = self.sch.get_block(name)
            self.entry.handles[("block", name)] = rv
        return rv

    def loop(self, name: str):
        rv = self._known(("loop", name))
        if rv is not None:
            return rv
        owner = next((i.blocks[0] for i in loop_infos(self.sch.func) if i.name == name), None)
        if owner is None:
            raise ScheduleError(f"loop {name!r} is not in the loop nest")
        for lp in self.sch.get_loops(self.block(owner)):
            self.entry.handles[("loop", self.sch.get(lp))] = lp
        return self.entry.handles[("loop", name)]

    def remember(self, rvs):
        for rv in rvs:
            value = self.sch.get(rv)
            kind = "block" if isinstance(rv, BlockRV) else "loop"
            if isinstance(value, str):
                self.entry.handles[(kind, value)] = rv


def _as_start(obj):
    """(schedule, workload) from an op name, (name, *shape), Workload (a library op or a
    user's ``Workload.from_te``), PrimFunc (no workload: runs are not checked) or Schedule."""
    if isinstance(obj, str):
        obj = ops.get(obj)
    elif isinstance(obj, tuple) and obj and isinstance(obj[0], str):
        obj = ops.get(obj[0], *obj[1:])
    if isinstance(obj, Schedule):
        return obj.copy(), obj.workload
    if isinstance(obj, (Workload, PrimFunc)):
        sch = Schedule(obj)
        return sch, sch.workload
    raise TypeError(f"ScheduleExplorer takes an op name, a Workload, a PrimFunc or a Schedule, "
                    f"not {type(obj).__name__}")


def divisors(n: int) -> list:
    """All divisors of ``n`` in increasing order (the split factors that leave no tail)."""
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


class ExplorerState:
    """Current schedule, history, selection, last error and last run of one explorer.

    ``measurer``: an ``InteractiveMeasurer`` to run schedules with (shared with other
    views); by default one for ``target`` with ``repeats`` timed repeats, started at
    the first run and ended by :meth:`close`.
    """

    def __init__(self, obj, target="llvm", repeats: int = 5,
                 measurer: InteractiveMeasurer | None = None, compile_checks: bool = True):
        sch, self.workload = _as_start(obj)
        self.compile_checks = compile_checks     # ask ptxas for the GPU usage (if here)
        self._gpu_cache: dict = {}
        self.target = measurer.target if measurer is not None else as_target(target)
        self.repeats = repeats
        self._measurer = measurer
        self._owns_measurer = measurer is None
        self._cur = _Entry(sch)
        self._undo: list = []
        self._redo: list = []
        self.error: ErrorInfo | None = None
        self.last_run: InteractiveResult | None = None
        self.run_is_current = False
        self._observers: list = []
        self._fix_selection(self._cur)

    # ------------------------------------------------------------ observing
    def observe(self, fn) -> None:
        """Call ``fn(what)`` after each change; what is "schedule", "selection",
        "error" or "run"."""
        self._observers.append(fn)

    def _notify(self, what: str) -> None:
        for fn in list(self._observers):
            fn(what)

    # ------------------------------------------------------------ reading
    @property
    def schedule(self) -> Schedule:
        return self._cur.schedule

    @property
    def func(self) -> PrimFunc:
        return self._cur.schedule.func

    @property
    def selected_loop(self) -> str | None:
        return self._cur.loop

    @property
    def selected_block(self) -> str | None:
        return self._cur.block

    def loops(self) -> list:
        return loop_infos(self.func)

    def blocks(self) -> list:
        return block_infos(self.func)

    def block(self, name: str | None = None):
        name = name or self.selected_block
        return next((b for b in self.blocks() if b.name == name), None)

    def loop(self, name: str | None = None):
        name = name or self.selected_loop
        return next((lp for lp in self.loops() if lp.name == name), None)

    def split_choices(self, loop: str | None = None) -> list:
        """Inner factors offered for splitting a loop: its divisors but 1 and itself."""
        info = self.loop(loop)
        if info is None:
            return []
        inner = divisors(info.extent)[1:-1]
        return inner or divisors(info.extent)

    def code_text(self) -> str:
        return self.func.script()

    def code_html(self) -> str:
        marks = {x for x in (self.selected_loop, self.selected_block) if x}
        return to_html(self.func, highlight=marks)

    def trace_python(self) -> str:
        return "\n".join(self.schedule.trace.as_python())

    def trace_json(self) -> dict:
        return self.schedule.trace.as_json()

    @property
    def can_undo(self) -> bool:
        return bool(self._undo)

    @property
    def can_redo(self) -> bool:
        return bool(self._redo)

    # ------------------------------------------------------------ GPU views
    @property
    def is_gpu(self) -> bool:
        return self.target.is_gpu

    def _gpu_view(self, what: str, make):
        """(value, None) or (None, the engine's message) of one view of the current
        schedule, computed once per schedule value."""
        func = self.func
        key = (what, id(func))
        hit = self._gpu_cache.get(key)
        if hit is None or hit[0] is not func:
            try:
                hit = (func, make(), None)
            except ExplorerError as e:
                hit = (func, None, str(e))
            except Exception as e:  # an engine bug must not break the explorer
                hit = (func, None, f"internal error ({type(e).__name__}): {e}")
            if len(self._gpu_cache) > 32:
                self._gpu_cache.clear()
            self._gpu_cache[key] = hit
        return hit[1], hit[2]

    def cuda_kernel(self):
        """(the current schedule built for the cuda target, None) or (None, why not)."""
        if not self.is_gpu:
            return None, f"the target is {self.target.kind}, not cuda"
        return self._gpu_view("kernel", lambda: build(self.schedule, self.target))

    def cuda_source(self):
        """(the CUDA C of the current schedule, None) or (None, why there is none)."""
        kernel, err = self.cuda_kernel()
        return (kernel.source, None) if kernel is not None else (None, err)

    def thread_map(self):
        """(``ThreadMap`` of the output: which block and thread write each element, from
        the lowered program, None) or (None, why not)."""
        kernel, err = self.cuda_kernel()
        if kernel is None:
            return None, err
        return self._gpu_view("thread_map", lambda: thread_map(kernel))

    def gpu_usage(self):
        """(``GpuUsage``: shared memory per block and registers per thread of each kernel
        against the target's limits, None) or (None, why not)."""
        kernel, err = self.cuda_kernel()
        if kernel is None:
            return None, err
        return self._gpu_view("usage", lambda: gpu_usage(kernel, self.target,
                                                         compile=self.compile_checks))

    # ------------------------------------------------------------ selection
    def select_loop(self, name: str | None) -> None:
        info = self.loop(name) if name else None
        self._cur.loop = info.name if info else None
        if info and self._cur.block not in info.blocks:
            self._cur.block = info.blocks[0]
        self._notify("selection")

    def select_block(self, name: str | None) -> None:
        info = self.block(name) if name else None
        self._cur.block = info.name if info else None
        if info and self._cur.loop not in info.loops:
            self._cur.loop = info.loops[0] if info.loops else None
        self._notify("selection")

    def _fix_selection(self, entry: _Entry) -> None:
        blocks = block_infos(entry.schedule.func)
        names = {b.name: b for b in blocks}
        loops = {lp.name: lp for lp in loop_infos(entry.schedule.func)}
        if entry.block not in names:
            owner = loops[entry.loop].blocks[0] if entry.loop in loops else None
            entry.block = owner or next((b.name for b in blocks if b.loops), blocks[0].name)
        if entry.loop not in loops:
            own = names[entry.block].loops
            entry.loop = own[0] if own else None

    # ------------------------------------------------------------ history
    def undo(self) -> bool:
        """Back to the schedule before the last step; False when there is none."""
        return self._move(self._undo, self._redo)

    def redo(self) -> bool:
        """Again the step undone last; False when there is none."""
        return self._move(self._redo, self._undo)

    def _move(self, source: list, dest: list) -> bool:
        if not source:
            return False
        dest.append(self._cur)
        self._cur = source.pop()
        return self._moved()

    def _moved(self) -> bool:
        self.error = None
        self.run_is_current = False
        self._notify("schedule")
        return True

    def load(self, sch: Schedule) -> None:
        """Make ``sch`` (a sampled or tuned schedule of this workload) the current one."""
        self._commit(_Entry(sch.copy(), {}, self.selected_loop, self.selected_block))

    def load_trace(self, trace) -> None:
        """Replay a trace (JSON text, dict or Trace) on the naive function and load it."""
        if not isinstance(trace, Trace):
            trace = Trace.from_json(trace)
        base = Schedule(self.workload) if self.workload is not None else \
            Schedule(self._first().original)
        self.load(trace.apply_to(base))

    def _first(self) -> Schedule:
        return (self._undo[0] if self._undo else self._cur).schedule

    def _commit(self, entry: _Entry) -> None:
        self._fix_selection(entry)
        self._undo.append(self._cur)
        self._redo.clear()
        self._cur = entry
        self._moved()

    # ------------------------------------------------------------ stepping
    def apply(self, primitive: str, step, select_output: bool = True) -> bool:
        """Run ``step(schedule, resolver) -> outputs`` on a copy of the current entry;
        commit it, or keep the schedule and record the error. Returns success."""
        entry = self._cur.copy()
        res = _Resolver(entry)
        try:
            outs = step(entry.schedule, res)
        except ExplorerError as e:
            return self.report_error(primitive, str(e))
        except Exception as e:  # an engine bug must not lose the user's schedule
            return self.report_error(primitive, f"internal error ({type(e).__name__}): {e}")
        outs = [] if outs is None else outs if isinstance(outs, list) else [outs]
        res.remember(outs)
        if select_output and outs:
            first = entry.schedule.get(outs[0])
            if isinstance(outs[0], BlockRV):
                entry.block, entry.loop = first, None
            else:
                entry.loop = first
        self._commit(entry)
        return True

    def report_error(self, primitive: str, message: str) -> bool:
        """Show ``message`` next to the control of ``primitive`` (e.g. a typo in a field)."""
        self.error = ErrorInfo(primitive, message)
        self._notify("error")
        return False

    def _need(self, value, what: str, prim: str):
        if value is None:
            raise ScheduleError(f"{prim}: select a {what} first")
        return value

    # ------------------------------------------------------------ primitives
    # Same names and argument order as Schedule's; loops and blocks by name,
    # None meaning the selected one.
    def _loop_name(self, loop, prim: str) -> str:
        return self._need(loop or self.selected_loop, "loop", prim)

    def _block_name(self, block, prim: str) -> str:
        return self._need(block or self.selected_block, "block", prim)

    def split(self, loop: str | None, factors: list) -> bool:
        return self.apply("split", lambda s, r: s.split(
            r.loop(self._loop_name(loop, "split")), list(factors)))

    def tile(self, loops: list, factors: list) -> bool:
        return self.apply("tile", lambda s, r: s.tile([r.loop(n) for n in loops], list(factors)))

    def reorder(self, *loops: str) -> bool:
        names = _flat(loops)
        return self.apply("reorder", lambda s, r: s.reorder(*[r.loop(n) for n in names]),
                          select_output=False)

    def fuse(self, *loops: str) -> bool:
        names = _flat(loops)
        return self.apply("fuse", lambda s, r: s.fuse(*[r.loop(n) for n in names]))

    def _set_kind(self, prim: str, loop) -> bool:
        return self.apply(prim, lambda s, r: getattr(s, prim)(
            r.loop(self._loop_name(loop, prim))), select_output=False)

    def parallel(self, loop: str | None = None) -> bool:
        return self._set_kind("parallel", loop)

    def vectorize(self, loop: str | None = None) -> bool:
        return self._set_kind("vectorize", loop)

    def unroll(self, loop: str | None = None) -> bool:
        return self._set_kind("unroll", loop)

    def bind(self, loop: str | None, thread_axis: str) -> bool:
        return self.apply("bind", lambda s, r: s.bind(
            r.loop(self._loop_name(loop, "bind")), thread_axis), select_output=False)

    def cache_read(self, block: str | None, read_index: int, scope: str) -> bool:
        return self.apply("cache_read", lambda s, r: s.cache_read(
            r.block(self._block_name(block, "cache_read")), read_index, scope))

    def cache_write(self, block: str | None, write_index: int, scope: str) -> bool:
        return self.apply("cache_write", lambda s, r: s.cache_write(
            r.block(self._block_name(block, "cache_write")), write_index, scope))

    def compute_at(self, block: str | None, loop: str) -> bool:
        return self.apply("compute_at", lambda s, r: s.compute_at(
            r.block(self._block_name(block, "compute_at")), r.loop(loop)), select_output=False)

    def reverse_compute_at(self, block: str | None, loop: str) -> bool:
        return self.apply("reverse_compute_at", lambda s, r: s.reverse_compute_at(
            r.block(self._block_name(block, "reverse_compute_at")), r.loop(loop)),
            select_output=False)

    def compute_inline(self, block: str | None = None) -> bool:
        return self.apply("compute_inline", lambda s, r: s.compute_inline(
            r.block(self._block_name(block, "compute_inline"))))

    def reverse_compute_inline(self, block: str | None = None) -> bool:
        return self.apply("reverse_compute_inline", lambda s, r: s.reverse_compute_inline(
            r.block(self._block_name(block, "reverse_compute_inline"))))

    def decompose_reduction(self, block: str | None, loop: str) -> bool:
        return self.apply("decompose_reduction", lambda s, r: s.decompose_reduction(
            r.block(self._block_name(block, "decompose_reduction")), r.loop(loop)))

    # ------------------------------------------------------------ running
    @property
    def measurer(self) -> InteractiveMeasurer:
        """The engine's interactive measurer (started on first use)."""
        if self._measurer is None:
            self._measurer = InteractiveMeasurer(self.target, interactive_config(self.repeats))
        return self._measurer

    def run(self) -> InteractiveResult:
        """Build, check and time the current schedule in the measurement worker (a
        failure, a crash or a hang included, comes back as a result, never raised)."""
        self.last_run = self.measurer.measure(self.schedule)
        self.run_is_current = True
        self._notify("run")
        return self.last_run

    def roofline(self):
        """The host's measured roofline (``explorer.measure.Roofline``), measured once."""
        return self.measurer.roofline()

    def close(self) -> None:
        """End the measurement worker this state started (a shared one is left alone)."""
        if self._owns_measurer and self._measurer is not None:
            self._measurer.close()
            self._measurer = None


def _flat(loops) -> list:
    out: list = []
    for x in loops:
        out.extend(x if isinstance(x, (list, tuple)) else [x])
    return out
