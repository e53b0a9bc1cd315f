"""Per-store features of a lowered program: what the cost model learns from.

``extract(sch_or_func, target, resources=None)`` lowers its argument (a
Schedule, Workload or PrimFunc; a lowered PrimFunc is used as is) and returns a
float32 array of shape ``(n_stores, NUM_FEATURES)``: one row per ``BufferStore`` of the lowered
loop nest, in program order, every value ``log2(|x| + 1)``.

NUM_FEATURES = 203: MetaSchedule's ``PerStoreFeature`` layout (164 values:
arithmetic, vectorize/unroll/parallel loops, GPU bindings, 5 buffers x 18
access values, arithmetic-intensity curve, allocation, loop products), a
"target" group of 18 (cache traffic per level, vector/parallel use of the
target, the innermost emitted loop and its straight-line body, roofline
estimates), a "codegen" group of 14 (what LLVM makes of the innermost
loops: vector width, accumulators in registers, dependence chains, L1 set
conflicts, and a cycle estimate the cost model starts from) and a
"gpu_resources" group of 7 (per CUDA kernel: registers, spills, shared memory,
threads, occupancy, and whether these are ptxas's; zeros on CPU targets).
``resources`` is ptxas's report of the candidate's kernels (as
``TuningRecord.resources`` stores it): given, the last group holds ptxas's
figures, else the estimate ``VerifyGPUCode`` uses; the tuner trains on ptxas's
figures and predicts from the estimate (:mod:`explorer.features.gpu_resources`
says why). :mod:`explorer.features.names` says what each value means,
:func:`feature_names` names them, :func:`feature_groups` slices them. A
candidate's score is the sum of its rows' scores ("pack-sum"), so programs
with different numbers of stores compare.

``FEATURE_VERSION`` changes whenever a value's meaning changes: records and
saved cost models carry it, and models refuse features of another version.
Version 2 added the codegen group (182 -> 196 values); version 3 counts guarded
reads in loop-vectorized code as gathers (the codegen group's loads and cycles);
version 4 added the gpu_resources group (196 -> 203 values).
"""
from __future__ import annotations

import functools
import warnings

import numpy as np

from ..errors import FeatureError
from .names import GROUPS, NAMES
from .gpu_resources import resource_rows
from .per_store import store_rows
from .target import Machine

FEATURE_VERSION = 4
NUM_FEATURES = len(NAMES)


def feature_names() -> list:
    """Readable names of the NUM_FEATURES columns, e.g. ``"vec_len"``, ``"buf0.unique_bytes"``.

    ``buf0`` is the buffer with the most cache lines touched by the store, ``buf4``
    the fifth; absent buffers are zeros."""
    return list(NAMES)


def feature_groups() -> dict:
    """Group name -> slice of the columns it covers (arith, vectorize, ..., outer)."""
    return dict(GROUPS)


def extract(sch_or_func, target=None, resources=None) -> np.ndarray:
    """Feature rows of one candidate: float32 array (n_stores, NUM_FEATURES).

    ``target`` is a Target or a target string ("llvm", "cuda"): it decides the
    GPU group and the target group (cores, vector lanes, cache sizes). None means
    a generic CPU (1 core, 8 lanes, 32 KB / 1 MB / 32 MB caches). ``resources``
    (cuda only): ptxas's report, kernel name -> {"registers", "spill_stores",
    "spill_loads", "shared_bytes"} (``TuningRecord.resources``) or ``Resources``;
    None: the gpu_resources group is estimated. Deterministic: equal programs,
    targets and resources give equal rows.
    """
    from ..lower import lower
    func = lower(sch_or_func)
    machine = _machine(target)
    rows = store_rows(func, machine)
    if not rows:
        return np.zeros((0, NUM_FEATURES), dtype=np.float32)
    extra = resource_rows(func, _target(target) if machine.is_gpu else None, len(rows),
                          resources)
    raw = np.hstack([np.asarray(rows, dtype=np.float64), np.asarray(extra, dtype=np.float64)])
    if raw.shape[1] != NUM_FEATURES:  # a bug, not a user error: say where
        raise FeatureError(f"feature rows have {raw.shape[1]} values, expected {NUM_FEATURES}")
    return np.log2(np.abs(raw) + 1.0).astype(np.float32)


def with_resources(rows: np.ndarray, sch_or_func, target, resources) -> np.ndarray:
    """``rows`` (``extract(sch_or_func, target)``) with the gpu_resources group taken
    from ptxas's ``resources`` instead of the estimate: what ``extract(...,
    resources=resources)`` gives, without extracting the other groups again."""
    from ..lower import lower
    if resources is None or len(rows) == 0:
        return rows
    func = lower(sch_or_func)
    target = _target(target) if _machine(target).is_gpu else None
    extra = np.asarray(resource_rows(func, target, len(rows), resources), dtype=np.float64)
    out = np.array(rows, dtype=np.float32, copy=True)
    out[:, GROUPS["gpu_resources"]] = np.log2(np.abs(extra) + 1.0)
    return out


def training_rows(scheds: list, rows: list, target, resources: list) -> list:
    """The rows the cost model learns from, one array per schedule: where a measured cuda
    candidate carries ptxas's report (``resources``), its gpu_resources group holds
    ptxas's registers and spills; the estimate otherwise, as for the candidates it
    scores. A report the features cannot read keeps the estimate, with a warning."""
    if not any(resources):
        return rows
    out = []
    for s, f, r in zip(scheds, rows, resources):
        try:
            out.append(with_resources(f, s, target, r) if r else f)
        except FeatureError as e:
            warnings.warn(f"trained on the estimated GPU resources of a candidate: {e}")
            out.append(f)
    return out


def _target(target):
    return _target_of_string(target) if isinstance(target, str) else target


@functools.lru_cache(maxsize=16)
def _target_of_string(text: str):
    from ..target import as_target  # Target("cuda") may ask the driver: once per string
    return as_target(text)


@functools.lru_cache(maxsize=16)
def _machine_of_string(text: str) -> Machine:
    from ..target import as_target  # Target("llvm") reads the host: once per string
    return _machine(as_target(text))


def _machine(target) -> Machine:
    if target is None:
        return Machine()
    if isinstance(target, str):
        return _machine_of_string(target)
    if not all(hasattr(target, a) for a in ("kind", "num_cores", "vector_lanes", "l1_bytes")):
        raise FeatureError(f"extract: target must be a Target, a target string or None, "
                           f"not {type(target).__name__}")
    return Machine(is_gpu=target.kind == "cuda", cores=max(1, target.num_cores or 1),
                   lanes=target.vector_lanes, registers=target.vector_registers,
                   caches=(target.l1_bytes, target.l2_bytes, target.l3_bytes))


__all__ = ["extract", "with_resources", "training_rows", "feature_names", "feature_groups", "FEATURE_VERSION", "NUM_FEATURES",
           "FeatureError"]
