"""The "gpu_resources" group: what each CUDA kernel uses of an SM, per store row.

Seven values, the same on every row of one kernel (a store belongs to the kernel,
the outermost loop, it sits in): registers per thread, spill store and spill load
bytes per thread, shared bytes per block (static + dynamic), threads per block, the
occupancy those allow (resident warps per SM / the most an SM holds, ``occupancy``)
and whether the first four are ptxas's (1) or estimated (0). On a CPU target all
seven are 0.

Where the values come from: ``extract(sch, target, resources=...)`` takes ptxas's
report (kernel name -> ``{"registers", "spill_stores", "spill_loads",
"shared_bytes", "local_bytes"}`` as ``TuningRecord.resources`` stores it, or the
``Resources`` of ``backends.cuda.resources.parse_ptxas``); without it, the estimate
``VerifyGPUCode`` judges candidates by (``space.postprocs.verify_gpu``: registers =
local array words + ``REGISTER_OVERHEAD``, shared bytes as lowering allocates them,
no spills), read from the same lowered program. Kernels match ptxas's names by
their ``_kernel<n>`` suffix (the code generator's names), else in name order.

Training uses ptxas's values, prediction the estimate: the tuner learns from the
records of measured candidates, which were compiled anyway and carry ptxas's report,
so the model learns from real registers and spills (``explorer.tune`` passes them);
an unmeasured candidate is scored from the estimate, because compiling every
candidate the search scores (thousands a round) costs about 1 s each with nvcc. The
flag column tells the model which of the two a row holds. The two differ: on 6 sampled
gemm 64^3 and 6 conv2d 16x14x14 candidates (sm_80, nvcc 13.0) ptxas used 0.5 to 3.2
times the estimated registers (median 2.4 for gemm, 1.5 for conv2d) and the occupancy
agreed on 5 of 12 (``benchmarks/gpu_resource_features.py``), so what the model learns
of registers carries over to the estimate only roughly; shared memory and threads, read
from the same lowered program, agree.

Occupancy follows CUDA's occupancy calculator: blocks per SM are limited by the
SM's warps, blocks, register file (``registers_per_block``: per warp, in units of
256) and shared memory (per block rounded up to 128 bytes, plus the 1 KiB the
runtime reserves per block). Registers per SM, shared memory per SM and the warp
size come from the Target; warps and blocks per SM, which the Target does not
hold, from ``SM_LIMITS`` by compute capability (CUDA C Programming Guide,
"Technical Specifications per Compute Capability").
"""
from __future__ import annotations

import re

from ..errors import FeatureError

NAMES = ("gpu_registers", "gpu_spill_store_bytes", "gpu_spill_load_bytes", "gpu_shared_bytes",
         "gpu_threads", "gpu_occupancy", "gpu_from_ptxas")

# compute capability -> (max resident warps per SM, max resident blocks per SM)
SM_LIMITS = {(7, 0): (64, 32), (7, 5): (32, 16), (8, 0): (64, 32), (8, 6): (48, 16),
             (8, 7): (48, 16), (8, 9): (48, 24), (9, 0): (64, 32), (10, 0): (64, 32),
             (12, 0): (48, 32)}
DEFAULT_SM_LIMITS = (64, 32)
SHARED_ALLOCATION_UNIT = 128         # bytes: shared memory is given to blocks in these

_FIELDS = ("registers", "spill_stores", "spill_loads", "shared_bytes")
_SUFFIX = re.compile(r"_kernel(\d+)$")


def sm_limits(target) -> tuple:
    """(max resident warps, max resident blocks) per SM of a cuda target."""
    return SM_LIMITS.get(target.compute_capability, DEFAULT_SM_LIMITS)


def occupancy(target, threads: int, registers: int, shared_bytes: int) -> float:
    """Resident warps per SM / the most an SM holds, for blocks of ``threads`` threads
    using ``registers`` per thread and ``shared_bytes`` per block; 0 when a block
    cannot launch at all (over the registers per thread, the register file or the
    shared memory of an SM)."""
    from ..backends.cuda.resources import RESERVED_SHARED_PER_BLOCK, registers_per_block
    max_warps, max_blocks = sm_limits(target)
    warp = target.warp_size
    warps = -(-max(threads, 1) // warp)
    if registers > target.max_registers_per_thread or warps > max_warps:
        return 0.0
    blocks = [max_blocks, max_warps // warps]
    if registers > 0:
        blocks.append(target.max_registers_per_sm
                      // registers_per_block(registers, threads, warp))
    unit = SHARED_ALLOCATION_UNIT
    per_block = -(-(shared_bytes + RESERVED_SHARED_PER_BLOCK) // unit) * unit
    blocks.append(target.max_shared_memory_per_sm // per_block)
    return min(blocks) * warps / max_warps


def check_resources(resources) -> dict:
    """``resources`` as kernel name -> {field: int}: ptxas's report as records store it,
    a dict of ``Resources`` or a ``Compiled``; FeatureError saying what to fix."""
    resources = getattr(resources, "resources", resources)
    if not isinstance(resources, dict):
        raise FeatureError(f"extract: resources must be a dict of kernel name -> ptxas's "
                           f"report (TuningRecord.resources), not {type(resources).__name__}")
    out = {}
    for name, res in resources.items():
        if not isinstance(name, str):
            raise FeatureError(f"extract: resources keys are kernel names (str), not "
                               f"{name!r}")
        get = res.get if isinstance(res, dict) else (lambda f, d=None, r=res: getattr(r, f, d))
        if not isinstance(res, dict) and not hasattr(res, "registers"):
            raise FeatureError(f"extract: resources[{name!r}] must be a dict with "
                               f"'registers' (and 'spill_stores', 'spill_loads', "
                               f"'shared_bytes'), not {type(res).__name__}")
        values = {}
        for field in _FIELDS:
            v = get(field, None if field == "registers" else 0)
            if field == "shared_bytes" and not isinstance(res, dict):
                v = getattr(res, "static_shared_bytes", 0)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise FeatureError(f"extract: resources[{name!r}][{field!r}] must be an int "
                                   f">= 0 (ptxas's {field.replace('_', ' ')}), not {v!r}")
            values[field] = v
        out[name] = values
    return out


def _by_kernel(resources: dict, n_kernels: int) -> list:
    """ptxas's entries in kernel order (None for a kernel it does not name)."""
    numbered = {int(m.group(1)): v for k, v in resources.items() if (m := _SUFFIX.search(k))}
    if len(numbered) == len(resources):
        return [numbered.get(n) for n in range(n_kernels)]
    ordered = [resources[k] for k in sorted(resources)]
    return (ordered + [None] * n_kernels)[:n_kernels]


def _top_level(body, top: bool = True) -> list:
    """The function body's statements as ``kernel_memory`` sees them: (stmt, is kernel)."""
    from ..ir.stmt import Allocate, For, SeqStmt
    while top and isinstance(body, Allocate):
        body = body.body
    if isinstance(body, SeqStmt):
        return [x for s in body.stmts for x in _top_level(s, False)]
    return [(body, isinstance(body, For))]


def _stores_in(stmt) -> int:
    from .nest import _Walker
    w = _Walker()
    w.visit(stmt, (), (), 1)
    return len(w.sites)


def kernel_values(func, target, resources=None) -> list:
    """Raw values of the group per kernel of the lowered cuda ``func``, in order."""
    from ..space.postprocs.verify_gpu import kernel_memory, register_estimate
    kernels = kernel_memory(func)
    given = _by_kernel(check_resources(resources), len(kernels)) if resources is not None \
        else [None] * len(kernels)
    out = []
    for use, res in zip(kernels, given):
        shared, threads = use["shared_bytes"], use["threads"]
        if res is None:
            regs, stores, loads, flag = register_estimate(use["local_words"]), 0, 0, 0
        else:
            regs, stores, loads, flag = (res["registers"], res["spill_stores"],
                                         res["spill_loads"], 1)
            shared = max(shared, res["shared_bytes"])
        out.append([regs, stores, loads, shared, threads,
                    occupancy(target, threads, regs, shared), flag])
    return out


def resource_rows(func, target, n_rows: int, resources=None) -> list:
    """One raw row of the group per store of the lowered ``func`` (program order, as
    ``per_store.store_rows``): its kernel's values; zeros on a CPU target."""
    if target is None or getattr(target, "kind", None) != "cuda":
        if resources is not None:
            raise FeatureError(f"extract: resources (ptxas's report) apply to cuda targets, "
                               f"not {target}; pass resources=None")
        return [[0.0] * len(NAMES)] * n_rows
    per_kernel = kernel_values(func, target, resources)
    rows, k = [], 0
    for stmt, is_kernel in _top_level(func.body):
        n = _stores_in(stmt)
        value = per_kernel[k] if is_kernel and k < len(per_kernel) else [0.0] * len(NAMES)
        k += is_kernel
        rows += [value] * n
    if len(rows) != n_rows:  # a bug, not a user error: say where
        raise FeatureError(f"gpu_resources: {len(rows)} rows for {n_rows} stores")
    return rows


__all__ = ["NAMES", "occupancy", "sm_limits", "check_resources", "kernel_values",
           "resource_rows", "SM_LIMITS"]
