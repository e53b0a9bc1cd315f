"""What each compiled kernel uses (ptxas's report) and whether a launch fits the device.

``ptxas -v`` (``nvcc -Xptxas -v``) prints, per entry function::

    ptxas info    : Compiling entry function 'tile' for 'sm_90'
    ptxas info    : Function properties for tile
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 12 registers, used 1 barriers, 2048 bytes smem

CUDA 12.1 prints ``Used 12 registers, 2048 bytes smem, 368 bytes cmem[0]``; 12.9 and
13.0 add ``used N barriers`` and ``N bytes cumulative stack size``. ``Function
properties`` blocks also appear for non-inlined ``__device__`` functions, between
two entries, so the spill line is filed under the name its block names and the
``Used`` line under the entry being compiled. Real logs of each version are in
``tests/data/ptxas``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import BuildError

STATIC_SHARED_LIMIT = 48 * 1024        # a block's static __shared__ declarations, every arch
RESERVED_SHARED_PER_BLOCK = 1024       # the runtime keeps 1 KiB of an SM's shared memory per block
MAX_BLOCK_DIMS = (1024, 1024, 64)      # blockDim.x, .y, .z (compute capability >= 3.0)
MAX_GRID_DIMS = (2 ** 31 - 1, 65535, 65535)
MAX_LOCAL_PER_THREAD = 512 * 1024
REGISTER_ALLOCATION_UNIT = 256         # registers are allocated per warp in units of 256

_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(.*)")
_SMEM = re.compile(r"(\d+) bytes smem")
_LMEM = re.compile(r"(\d+) bytes lmem")
_STACK = re.compile(r"(\d+) bytes cumulative stack size")
_BARRIERS = re.compile(r"used (\d+) barriers")
_TOO_MUCH_SHARED = re.compile(r"Entry function '([^']+)' uses too much shared data "
                              r"\((0x[0-9a-fA-F]+) bytes, (0x[0-9a-fA-F]+) max\)")


@dataclass(frozen=True)
class Resources:
    """What one kernel uses, per thread unless named per block, as ptxas reports it."""
    registers: int                  # per thread
    spill_stores: int = 0           # bytes per thread
    spill_loads: int = 0            # bytes per thread
    static_shared_bytes: int = 0    # per block (``smem``)
    local_bytes: int = 0            # per thread: the stack frame (local arrays and spills)
    barriers: int = -1              # named barriers used; -1 where ptxas does not say

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads


def parse_ptxas(log: str) -> dict:
    """Kernel name -> Resources for every entry function ``log`` (``ptxas -v``'s
    output) reports; non-entry ``__device__`` functions are left out."""
    frames: dict = {}
    used: dict = {}
    entry = props = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            entry = props = m.group(1)
        elif m := _PROPERTIES.search(line):
            props = m.group(1)
        elif (m := _FRAME.search(line)) and props is not None:
            frames[props] = tuple(int(g) for g in m.groups())
        elif (m := _USED.search(line)) and entry is not None:
            used[entry] = (int(m.group(1)), m.group(2))
    return {name: _resources(frames.get(name, (0, 0, 0)), *used[name]) for name in used}


def _resources(frame: tuple, registers: int, rest: str) -> Resources:
    def num(pattern, default=0):
        m = pattern.search(rest)
        return int(m.group(1)) if m else default
    stack, stores, loads = frame
    local = max(stack, num(_STACK), num(_LMEM))
    return Resources(registers, stores, loads, num(_SMEM), local, num(_BARRIERS, -1))


def too_much_shared(log: str) -> str | None:
    """A readable message for a compile that failed on static shared memory over 48 KiB
    (ptxas's "uses too much shared data" error; NVRTC leaves that line out of its log,
    so the reported ``smem`` is looked at too), or None."""
    m = _TOO_MUCH_SHARED.search(log)
    if m is not None:
        name, used, limit = m.group(1), int(m.group(2), 16), int(m.group(3), 16)
    else:
        over = [(n, r.static_shared_bytes) for n, r in parse_ptxas(log).items()
                if r.static_shared_bytes > STATIC_SHARED_LIMIT]
        if not over:
            return None
        (name, used), limit = over[0], STATIC_SHARED_LIMIT
    return (f"kernel {name!r} declares {used} bytes of static shared memory; a block may "
            f"declare at most {limit} bytes ({limit >> 10} KiB) statically: give it less, "
            "or declare the rest as dynamic shared memory")


def check_resources(module, resources, target) -> None:
    """Raise BuildError naming the kernel and the limit if a launch of ``module`` (a
    CudaModule) cannot run on ``target`` with what ptxas reported (``resources``: kernel
    name -> Resources, or a Compiled): threads and block and grid sizes, registers per
    thread and per block, shared memory per block (static + dynamic), local memory."""
    resources = getattr(resources, "resources", resources)
    for launch in module.launches:
        res = resources.get(launch.name)
        if res is None:
            raise BuildError(f"ptxas reported nothing for kernel {launch.name!r}: the source "
                             f"defines {sorted(resources)}; the module's launches and its "
                             "source disagree (a code generator bug)")
        for problem in (_launch_shape(launch, target), _registers(launch, res, target),
                        _shared(launch, res, target), _local(launch, res)):
            if problem:
                raise BuildError(f"kernel {launch.name!r} cannot run on {target.arch or 'cuda'}"
                                 f": {problem}")


def _launch_shape(launch, target) -> str | None:
    threads = launch.threads_per_block
    if threads > target.max_threads_per_block:
        return (f"{threads} threads per block (block {tuple(launch.block)}) exceed the "
                f"limit of {target.max_threads_per_block} threads per block")
    for axis, n, most in zip("xyz", launch.block, MAX_BLOCK_DIMS):
        if not 1 <= n <= most:
            return f"blockDim.{axis} = {n} is outside 1..{most} (the limit of blockDim.{axis})"
    for axis, n, most in zip("xyz", launch.grid, MAX_GRID_DIMS):
        if not 1 <= n <= most:
            return f"gridDim.{axis} = {n} is outside 1..{most} (the limit of gridDim.{axis})"
    return None


def registers_per_block(registers: int, threads: int, warp: int = 32) -> int:
    """Registers a block takes on an SM: per warp, rounded up to the allocation unit."""
    warps = -(-threads // warp)
    unit = REGISTER_ALLOCATION_UNIT
    return warps * (-(-registers * warp // unit) * unit)


def _registers(launch, res: Resources, target) -> str | None:
    if res.registers > target.max_registers_per_thread:
        return (f"{res.registers} registers per thread exceed the limit of "
                f"{target.max_registers_per_thread} registers per thread")
    per_block = registers_per_block(res.registers, launch.threads_per_block, target.warp_size)
    if per_block > target.max_registers_per_sm:
        return (f"{res.registers} registers x {launch.threads_per_block} threads need "
                f"{per_block} registers per block (allocated per warp in units of "
                f"{REGISTER_ALLOCATION_UNIT}), over the {target.max_registers_per_sm} "
                "registers per SM: use fewer threads per block or smaller thread tiles")
    return None


def shared_limit(target, dynamic_bytes: int) -> int:
    """Shared memory one block may use: the default per-block limit, or with dynamic
    shared memory (opted in through the function attribute) the SM's less 1 KiB."""
    if dynamic_bytes <= 0:
        return target.max_shared_memory_per_block
    return max(target.max_shared_memory_per_block,
               target.max_shared_memory_per_sm - RESERVED_SHARED_PER_BLOCK)


def _shared(launch, res: Resources, target) -> str | None:
    static = max(res.static_shared_bytes, launch.static_shared_bytes)
    if static > STATIC_SHARED_LIMIT:
        return (f"{static} bytes of static shared memory exceed the {STATIC_SHARED_LIMIT} "
                "bytes a block may declare statically")
    total = static + launch.dynamic_shared_bytes
    limit = shared_limit(target, launch.dynamic_shared_bytes)
    if total > limit:
        return (f"{static} bytes static + {launch.dynamic_shared_bytes} bytes dynamic shared "
                f"memory = {total} bytes exceed the limit of {limit} bytes of shared memory "
                "per block")
    return None


def _local(launch, res: Resources) -> str | None:
    if res.local_bytes > MAX_LOCAL_PER_THREAD:
        return (f"{res.local_bytes} bytes of local memory per thread exceed the limit of "
                f"{MAX_LOCAL_PER_THREAD} bytes per thread")
    return None
