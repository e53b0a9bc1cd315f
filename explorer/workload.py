"""A workload: a tensor expression plus what checks it.

    A = te.placeholder((34, 34), "float32", "A")
    B = te.compute((32, 32), lambda i, j: A[i + 1, j + 1] * 4 - A[i, j + 1] - A[i + 2, j + 1]
                   - A[i + 1, j] - A[i + 1, j + 2], "B")
    wl = Workload.from_te([A, B], reference=my_numpy_stencil)   # or no reference
    Tuner(wl, "llvm", trials=32, database="tuning_db").run()

What checks a workload (``checked_by``) is one of

- ``"library"``: an ``explorer.ops`` operator's own numpy reference;
- ``"numpy"``: a numpy function the user gives, ``reference(*inputs)`` returning
  the outputs (one array, or a tuple in the order of the outputs);
- ``"program"``: the unscheduled program itself, compiled for the host with LLVM
  (when the user gives no reference),

with a tolerance ``(rtol, atol)``: given, or derived from the dtype and the
longest chain of reductions (see ``reduction_tolerance``).

A workload travels as JSON (``to_json`` / ``from_json``) holding the function
itself (``explorer.ir_json``), not a name, so measurement workers and the
tuning database rebuild it from data alone; loading never executes code. A
numpy function cannot travel as data: the parent computes the expected
outputs once (``expected``) and workers get the arrays.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .backends.kernel import array_problem
from .errors import MeasureError, WorkloadError
from .ir.expr import FLOAT_DTYPES, Add, BufferLoad, Call, Div, Max, Min, Mul, Select, Sub
from .ir.functor import collect_loads, expr_children, iter_nodes
from .ir.stmt import BlockRealize, PrimFunc

JSON_VERSION = 1
CHECKED_BY = ("library", "numpy", "program")
MAX_JSON_CHARS = 16_000_000
_ARITH_OPS = (Add, Sub, Mul, Div, Min, Max, Call)
_EPS = {"float32": float(np.finfo(np.float32).eps), "float64": float(np.finfo(np.float64).eps)}


@dataclass(frozen=True, eq=False)
class Workload:
    """One operator instance: its function, FLOP count, key, arguments and reference.

    Equality and hashing go by ``key`` (for a library op its name, parameters and
    dtype; for a user's operator a digest of its function), so workloads can key
    dicts in a task scheduler. Make one with ``explorer.ops`` (``ops.gemm(...)``),
    ``Workload.from_te`` or ``Workload.from_func``.
    """
    name: str
    params: tuple
    func: PrimFunc = field(repr=False)
    flops: int
    inputs: tuple
    outputs: tuple
    dtype: str
    key: str
    checked_by: str = "program"
    reference_fn: Callable | None = field(default=None, repr=False)
    tolerance: tuple | None = None
    _cache: dict = field(default_factory=dict, repr=False)

    def __eq__(self, other) -> bool:
        return isinstance(other, Workload) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"Workload({self.key}, {self.flops} flops)"

    @property
    def library(self) -> bool:
        """True for an ``explorer.ops`` operator (rebuilt by name and parameters)."""
        return self.checked_by == "library"

    # ------------------------------------------------------------ making one
    @classmethod
    def from_te(cls, tensors: list, reference: Callable | None = None, *,
                tolerance: tuple | None = None, name: str | None = None) -> "Workload":
        """The workload of ``te.create_func(tensors, name)``: the input placeholders
        first, then the computed outputs. ``reference(*inputs)`` returns the
        outputs with numpy; without it the unscheduled program checks schedules."""
        from . import te
        return cls.from_func(te.create_func(list(tensors), name=name), reference,
                             tolerance=tolerance)

    @classmethod
    def from_func(cls, func: PrimFunc, reference: Callable | None = None, *,
                  tolerance: tuple | None = None) -> "Workload":
        """The workload of an unscheduled PrimFunc (inputs are the parameters it only
        reads, outputs those it writes; inputs come first)."""
        if not isinstance(func, PrimFunc):
            raise WorkloadError(f"Workload.from_func takes a PrimFunc, not "
                                f"{type(func).__name__}: use Workload.from_te for te tensors")
        if reference is not None and not callable(reference):
            raise WorkloadError(f"reference must be a function of the input arrays returning "
                                f"the outputs, not {type(reference).__name__}")
        inputs, outputs = split_params(func)
        name = f"user:{func.name}"
        return cls(name, (), func, count_flops(func), inputs, outputs,
                   _dtype_of(func, outputs[0]), f"{name}#{func_digest(func)}",
                   "program" if reference is None else "numpy", reference,
                   check_tolerance(tolerance))

    def with_reference(self, reference: Callable | None, tolerance=None) -> "Workload":
        """This function checked by ``reference`` (None: by the unscheduled program)."""
        return Workload.from_func(self.func, reference,
                                  tolerance=self.tolerance if tolerance is None else tolerance)

    # ------------------------------------------------------------ arguments and checks
    def make_args(self, seed=0) -> list:
        """Arrays in ``func.params`` order: random inputs, zeroed outputs.

        Floats are uniform in [-1, 1), integers in [-4, 4]; ``seed`` is an int or a
        ``numpy.random.Generator``.
        """
        rng = np.random.default_rng(seed)
        args = []
        for buf in self.func.params:
            if buf.name in self.outputs:
                args.append(np.zeros(buf.shape, dtype=buf.dtype))
            elif buf.dtype in FLOAT_DTYPES:
                args.append(rng.random(buf.shape, dtype=buf.dtype) * 2 - 1)
            else:
                args.append(rng.integers(-4, 5, size=buf.shape).astype(buf.dtype))
        return args

    def reference(self, *inputs) -> tuple:
        """The expected outputs for ``inputs`` (the input arrays, in parameter order)."""
        bufs = self.func.params[:len(self.inputs)]
        if len(inputs) != len(bufs):
            raise MeasureError(f"{self.key}: reference takes the {len(bufs)} inputs "
                               f"({', '.join(self.inputs)}) but got {len(inputs)} arrays: "
                               f"pass args[:{len(bufs)}]")
        arrays = [checked_array(self.key, b, a) for b, a in zip(bufs, inputs)]
        if self.checked_by == "program":
            return self._run_unscheduled(arrays)
        if self.reference_fn is None:
            raise WorkloadError(
                f"{self.key} was checked by a numpy function, which does not travel with its "
                f"JSON: give it again with wl.with_reference(fn), or wl.with_reference(None) "
                f"to check against the unscheduled program")
        return self._outputs_of(self.reference_fn(*arrays))

    def _outputs_of(self, outs) -> tuple:
        outs = outs if isinstance(outs, (tuple, list)) else (outs,)
        bufs = self.func.params[len(self.inputs):]
        if len(outs) != len(bufs):
            raise WorkloadError(f"{self.key}: the reference returned {len(outs)} arrays but "
                                f"the workload has {len(bufs)} outputs ({', '.join(self.outputs)})")
        got = []
        for b, o in zip(bufs, outs):
            o = np.asarray(o)
            if o.shape != tuple(b.shape):
                raise WorkloadError(f"{self.key}: the reference returned output {b.name} of "
                                    f"shape {o.shape}, expected {tuple(b.shape)}")
            got.append(np.ascontiguousarray(o).astype(b.dtype))
        return tuple(got)

    def _run_unscheduled(self, inputs: list) -> tuple:
        kernel = self._cache.get("program")
        if kernel is None:
            from .backends import build
            kernel = self._cache["program"] = build(self.func, "llvm")
        outs = [np.zeros(b.shape, dtype=b.dtype) for b in self.func.params[len(inputs):]]
        kernel(*[a.copy() for a in inputs], *outs)
        return tuple(outs)

    def expected(self, seed: int = 0) -> tuple:
        """``(inputs, outputs)`` for ``make_args(seed)``, computed once and kept (read-only)."""
        key = ("expected", seed)
        if key not in self._cache:
            inputs = self.make_args(seed)[:len(self.inputs)]
            outputs = self.reference(*inputs)
            for a in (*inputs, *outputs):
                a.setflags(write=False)
            self._cache[key] = (tuple(inputs), outputs)
        return self._cache[key]

    def default_tolerance(self) -> tuple:
        """``(rtol, atol)`` used by :meth:`check` when none are given."""
        if self.tolerance is not None:
            return self.tolerance
        return reduction_tolerance(reduction_length(self.func, self.outputs), self.dtype)

    def check(self, args, rtol=None, atol=None, expected=None) -> float:
        """Compare the outputs in ``args`` (the full parameter list) with the reference.

        An element passes when ``|got - want| <= atol + rtol * |want|``. Returns
        the largest absolute error; raises MeasureError naming the output, the
        error and where it is when any element fails. ``expected``: reference
        outputs computed before (they are recomputed otherwise).
        """
        args = list(args)
        params = self.func.params
        if len(args) != len(params):
            raise MeasureError(f"{self.key}: check takes all {len(params)} arguments "
                               f"({', '.join(p.name for p in params)}) but got {len(args)}")
        args = [checked_array(self.key, b, a) for b, a in zip(params, args)]
        n_in = len(self.inputs)
        refs = self.reference(*args[:n_in]) if expected is None else expected
        return self.compare_outputs(args[n_in:], refs, rtol, atol)

    def compare_outputs(self, outputs, expected, rtol=None, atol=None, sentinel=None) -> float:
        """The largest absolute error of ``outputs`` against ``expected`` (both in the
        order of ``self.outputs``) under the workload's tolerance unless ``rtol``/``atol``
        are given; MeasureError naming the first output that fails. The one comparison
        behind :meth:`check` and the measurement workers' check."""
        d_rtol, d_atol = self.default_tolerance()
        rtol = d_rtol if rtol is None else rtol
        atol = d_atol if atol is None else atol
        return max((compare_arrays(self.key, name, got, want, rtol, atol, sentinel)
                    for name, got, want in zip(self.outputs, outputs, expected)), default=0.0)

    # ------------------------------------------------------------ JSON
    def to_json(self) -> dict:
        """The workload as JSON-able data: its function, what checks it, its key."""
        from .ir_json import func_to_json
        out = {"workload": JSON_VERSION, "name": self.name, "key": self.key,
               "dtype": self.dtype, "flops": int(self.flops), "inputs": list(self.inputs),
               "outputs": list(self.outputs), "checked_by": self.checked_by,
               "tolerance": None if self.tolerance is None else list(self.tolerance),
               "func": func_to_json(self.func)}
        if self.library:
            out["library"] = {"op": self.name, "params": {k: _thaw(v) for k, v in self.params}}
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_json(cls, data, reference: Callable | None = None) -> "Workload":
        """Rebuild a workload from ``to_json`` data (or its text). A library op comes
        back as the library builds it; a user's operator checked by a numpy function
        needs ``reference`` again (without it, ``reference()`` says so)."""
        from .workload_json import workload_from_json
        return workload_from_json(data, reference)

    loads = from_json


# ------------------------------------------------------------------ analysis

def split_params(func: PrimFunc) -> tuple:
    """``(inputs, outputs)``: names of the parameters ``func`` only reads and of those it
    writes; WorkloadError unless every input comes before every output."""
    written = {n.block.body.buffer.name for n in iter_nodes(func.body)
               if isinstance(n, BlockRealize)}
    names = [b.name for b in func.params]
    outputs = tuple(n for n in names if n in written)
    inputs = tuple(n for n in names if n not in written)
    if not outputs:
        raise WorkloadError(f"{func.name}: no parameter is written, so there is nothing to "
                            "check: pass the computed tensors as parameters too")
    if names != list(inputs + outputs):
        raise WorkloadError(f"{func.name}: parameters {names} mix inputs and outputs; list the "
                            f"inputs first, then the outputs: {list(inputs + outputs)}")
    return inputs, outputs


def _dtype_of(func: PrimFunc, name: str) -> str:
    return next(b.dtype for b in func.params if b.name == name)


def _blocks(func: PrimFunc) -> list:
    return [n.block for n in iter_nodes(func.body) if isinstance(n, BlockRealize)]


def count_flops(func: PrimFunc) -> int:
    """Arithmetic operations of the unscheduled ``func``: per block, the add, sub, mul,
    div, min, max and math calls computing its value (not its indices, not the
    conditions of selects) times its iteration domain, so a multiply-add of a
    reduction counts 2, as the library counts. A function without arithmetic
    (a transpose, a copy) counts one per element written, as ``ops.transpose`` does."""
    flops = written = 0
    for b in _blocks(func):
        domain = math.prod(iv.extent for iv in b.iter_vars)
        flops += _value_ops(b.body.value) * domain
        written += math.prod(iv.extent for iv in b.iter_vars if iv.kind == "S")
    return int(flops or written)


def _value_ops(e) -> int:
    """Arithmetic nodes of ``e`` outside buffer indices and select conditions."""
    if isinstance(e, BufferLoad):
        return 0
    if isinstance(e, Select):
        return _value_ops(e.true_value) + _value_ops(e.false_value)
    own = isinstance(e, _ARITH_OPS) and e.dtype != "bool"
    return own + sum(_value_ops(k) for k in expr_children(e))


def reduction_length(func: PrimFunc, outputs) -> int:
    """The longest chain of reductions behind any output: the product of the reduce
    extents of the blocks along it (a gemm's K; a gemm feeding a row sum, K * N)."""
    length: dict = {}
    for b in _blocks(func):
        own = math.prod(iv.extent for iv in b.iter_vars if iv.kind == "R")
        feeds = [length.get(ld.buffer.name, 1) for ld in collect_loads(b.body.value)]
        length[b.body.buffer.name] = max(length.get(b.body.buffer.name, 1),
                                         own * max(feeds, default=1))
    return max(length.get(o, 1) for o in outputs)


def reduction_tolerance(length: int, dtype: str) -> tuple:
    """Tolerance for outputs that are sums of ``length`` products of inputs from make_args.

    Partial sums grow like sqrt(length) and each addition rounds by eps, so the
    worst case over summation orders is ~eps * length * sqrt(length) / 3; the
    float32 atol, 1e-4 * sqrt(length), covers it up to length ~5000 (ResNet-18's
    deepest reduction is 4608) and real errors are ~40x smaller still, while a
    wrong index or a lost term costs ~0.1. float64 scales by its eps; integers are exact.
    """
    if dtype not in FLOAT_DTYPES:
        return 0.0, 0.0
    base = 1e-4 if dtype == "float32" else 1e-12
    return 1e-5 if dtype == "float32" else 1e-12, base * math.sqrt(max(length, 1))


def normalized_tolerance(dtype: str) -> tuple:
    """Softmax outputs are at most e^2/N and their relative error at most ~N eps,
    so the absolute error stays below ~8 eps whatever N is."""
    return (1e-5 if dtype == "float32" else 1e-12), 16 * _EPS[dtype]


def check_tolerance(tol) -> tuple | None:
    """``tol`` as ``(rtol, atol)`` of finite floats >= 0, or None; WorkloadError otherwise."""
    if tol is None:
        return None
    ok = (isinstance(tol, (tuple, list)) and len(tol) == 2
          and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                  and x >= 0 for x in tol))
    if not ok:
        raise WorkloadError(f"tolerance {tol!r} must be a pair (rtol, atol) of finite numbers "
                            ">= 0")
    return float(tol[0]), float(tol[1])


def func_digest(func: PrimFunc) -> str:
    """12 hex digits of the SHA-256 of the function's canonical JSON: equal for equal
    functions, in any process."""
    from .ir_json import func_to_json
    text = json.dumps(func_to_json(func), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _thaw(v):
    return [_thaw(x) for x in v] if isinstance(v, tuple) else v


# ------------------------------------------------------------------ checking arrays

def checked_array(key: str, buf, a) -> np.ndarray:
    """``a`` when it fits buffer ``buf``; MeasureError naming workload ``key`` otherwise."""
    problem = array_problem(buf, a)
    if problem:
        raise MeasureError(f"{key}: {problem}")
    return a


def compare_arrays(key: str, name: str, got, want, rtol: float, atol: float,
                   sentinel=None) -> float:
    """``|got - want| <= atol + rtol * |want|`` elementwise, NaN never equal; returns the
    largest absolute error or raises MeasureError saying where and by how much.
    ``sentinel``: the value unwritten outputs were filled with (NaN always counts)."""
    got = np.asarray(got)
    if got.shape != want.shape:
        raise MeasureError(f"{key}: output {name} has shape {got.shape}, expected {want.shape}")
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(invalid="ignore"):
        diff = np.where(got64 == want64, 0.0, np.abs(got64 - want64))
    diff = np.where(np.isnan(diff), np.inf, diff)
    bad = diff > atol + rtol * np.where(np.isfinite(want64), np.abs(want64), 0.0)
    if not bad.any():
        return float(diff.max()) if diff.size else 0.0
    where = tuple(int(i) for i in np.unravel_index(int(np.argmax(np.where(bad, diff, -1.0))),
                                                   diff.shape))
    g = got[where]
    unwritten = (" (never written: still the NaN/sentinel it was filled with)"
                 if sentinel is not None and (g != g or g == sentinel) else "")
    raise MeasureError(
        f"{key}: output {name} is wrong: max abs error {float(diff[bad].max()):.3g} at index "
        f"{where} (got {g.item()!r}{unwritten}, expected {want[where].item()!r}); "
        f"{int(bad.sum())} of {bad.size} elements exceed atol={atol:.3g} + rtol={rtol:.3g} * "
        f"|expected|")


# ------------------------------------------------------------------ coercion

def as_workload(obj, who: str = "Tuner") -> Workload:
    """``obj`` as a Workload: a Workload itself; a PrimFunc (checked against its
    unscheduled program); a Schedule's workload (or its unscheduled function).
    WorkloadError saying what to pass for anything else."""
    if isinstance(obj, Workload):
        return obj
    if isinstance(obj, PrimFunc):
        return Workload.from_func(obj)
    from .schedule import Schedule
    if isinstance(obj, Schedule):
        wl = obj.workload
        return wl if isinstance(wl, Workload) else Workload.from_func(obj.original)
    raise WorkloadError(
        f"{who} takes a Workload (ops.gemm(64, 64, 64), Workload.from_te([A, B, C], "
        f"reference=...)), a PrimFunc or a Schedule, not {type(obj).__name__}")
