"""Running a compiled CudaModule on the GPU through pycuda (the ``cuda`` extra).

``load(module, cubin)`` loads a cubin (from ``nvcc.compile_cubin``) into this
process's CUDA context and returns a ``DeviceModule``: ``.run(arrays)`` allocates
the buffers, copies the arrays in, launches each ``KernelLaunch`` in order and
copies the results back; ``.time(arrays, number, repeat)`` times the launch
sequence with CUDA events after a warm-up. ``measure_cuda`` is what a
measurement worker calls: it checks the output before a time counts and turns
every failure into a value.

Each process owns one context, made on first use (a context does not survive a
fork, so a worker makes its own). A kernel that faults (an illegal address)
leaves the context unusable: the error is a ``DeviceFault`` with
``context_lost`` set, and the process must be replaced; a kernel that does not
finish within the time-out is reported the same way.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import time

import numpy as np

from ...errors import ArgumentError, BuildError, ExplorerError, MeasureError

PYCUDA_MISSING = ("pycuda is not installed: pip install -e '.[cuda]' (needs the CUDA toolkit "
                  "and an NVIDIA driver)")
DEFAULT_DYNAMIC_SHARED = 48 * 1024   # above it a kernel must opt in through an attribute
RUN_TIMEOUT = 10.0
_NO_GPU_HINT = ("code generation, compile checks with nvcc and host emulation still work "
                "without a GPU")


class DeviceFault(MeasureError):
    """A kernel faulted or hung on the device. ``context_lost``: this process's CUDA
    context cannot be used again (the worker must be replaced); ``hung``: it did not
    finish in time."""

    def __init__(self, message: str, context_lost: bool = True, hung: bool = False):
        super().__init__(message)
        self.context_lost, self.hung = context_lost, hung


def driver():
    """``pycuda.driver``, or a BuildError saying what is missing."""
    try:
        import pycuda.driver as drv
    except ModuleNotFoundError as e:
        if e.name == "pycuda":
            raise BuildError(PYCUDA_MISSING) from None
        raise BuildError(f"pycuda is installed but cannot be imported ({e}): reinstall it "
                         "with pip install -e '.[cuda]'") from None
    except ImportError as e:          # pycuda._driver links libcuda.so.1, the driver's library
        raise BuildError(f"pycuda is installed but the NVIDIA driver is not ({e}): run on a "
                         f"machine with an NVIDIA GPU and its driver; {_NO_GPU_HINT}") from None
    return drv


class _Context:
    """This process's CUDA context (one per process, made on first use)."""
    pid = None
    ctx = None
    device = None
    lost = ""


def context(device: int = 0):
    """This process's CUDA context on device number ``device``, made on first use;
    BuildError when there is no driver or device."""
    drv = driver()
    if _Context.pid == os.getpid():
        if _Context.lost:
            raise DeviceFault(f"this process's CUDA context was lost ({_Context.lost}): start "
                              "a new process")
        return _Context.ctx
    try:
        drv.init()
        count = drv.Device.count()
    except drv.Error as e:
        raise BuildError(f"pycuda is installed but found no usable NVIDIA driver ({e}): "
                         f"check nvidia-smi; {_NO_GPU_HINT}") from None
    if count == 0:
        raise BuildError(f"the NVIDIA driver reports no CUDA device: {_NO_GPU_HINT}")
    if not 0 <= device < count:
        raise BuildError(f"there is no CUDA device {device}: this machine has {count} "
                         f"(numbered 0 to {count - 1})")
    dev = drv.Device(device)
    _Context.ctx, _Context.device = dev.make_context(), dev
    _Context.pid, _Context.lost = os.getpid(), ""
    atexit.register(_close, os.getpid())
    return _Context.ctx


def _close(pid: int) -> None:
    if _Context.pid == pid and _Context.ctx is not None:
        try:
            _Context.ctx.pop()
        except Exception:   # a lost context cannot be popped cleanly; the process is ending
            pass
        _Context.ctx = None


def device(index: int = 0):
    """The ``pycuda.driver.Device`` of this process's context."""
    context(index)
    return _Context.device


def device_arch(index: int = 0) -> str:
    """The architecture of this process's device (``sm_90`` on an H100 or H200)."""
    major, minor = device(index).compute_capability()
    return f"sm_{major}{minor}"


def device_name(index: int = 0) -> str:
    """Name and architecture of this process's device (``NVIDIA H200, sm_90``)."""
    return f"{device(index).name()}, {device_arch(index)}"


def load(module, cubin, device: int = 0) -> "DeviceModule":
    """Load ``cubin`` (bytes, or a Compiled) for ``module`` (a CudaModule) into this
    process's context."""
    return DeviceModule(module, getattr(cubin, "cubin", cubin), device)


class DeviceModule:
    """A CudaModule's cubin loaded on the device; see the module docstring."""

    def __init__(self, module, cubin: bytes, device: int = 0):
        self.drv = drv = driver()
        context(device)
        self.module = module
        try:
            self._mod = drv.module_from_buffer(cubin)
        except drv.Error as e:
            raise BuildError(f"the driver could not load the cubin of {module.func_name} ({e}):"
                             " it was compiled for another architecture than this device's, "
                             "or by a CUDA newer than the driver supports (nvidia-smi shows "
                             "the driver's CUDA version)") from None
        self._funcs = [self._function(launch) for launch in module.launches]

    def _function(self, launch):
        drv = self.drv
        try:
            f = self._mod.get_function(launch.name)
        except drv.Error as e:
            raise BuildError(f"the cubin has no kernel {launch.name!r} ({e}): the module's "
                             "launches and its source disagree") from None
        if launch.dynamic_shared_bytes > DEFAULT_DYNAMIC_SHARED:
            try:
                f.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                launch.dynamic_shared_bytes)
            except drv.Error as e:
                raise BuildError(f"kernel {launch.name!r} asks for "
                                 f"{launch.dynamic_shared_bytes} bytes of dynamic shared "
                                 f"memory, more than this device allows per block ({e})"
                                 ) from None
        f.prepare("P" * len(launch.args))
        return f

    def resources(self) -> dict:
        """Kernel name -> (registers per thread, static shared bytes, local bytes per
        thread), as the driver reports them for the loaded kernels."""
        return {launch.name: (f.num_regs, f.shared_size_bytes, f.local_size_bytes)
                for launch, f in zip(self.module.launches, self._funcs)}

    def check_args(self, arrays) -> list:
        """``arrays`` (one per parameter, in order) once each fits; ArgumentError else.
        Read-only arrays are taken (as inputs) and not written back."""
        return self.module.check_args(arrays)

    def run(self, arrays, timeout: float = RUN_TIMEOUT) -> None:
        """Copy ``arrays`` in, launch every kernel in order, copy back the writable ones."""
        arrays = self.check_args(arrays)
        with self._faults(), _Buffers(self.drv, self.module) as bufs:
            bufs.copy_in(arrays)
            self._fenced(lambda: self._launch_all(bufs), timeout)
            bufs.copy_out(arrays)

    def time(self, arrays, number: int = 1, repeat: int = 3, warmup: int = 1,
             timeout: float = RUN_TIMEOUT) -> list:
        """Seconds per run of the launch sequence, one per repeat, each the mean of
        ``number`` runs between two CUDA events, after ``warmup`` runs; the outputs are
        copied back afterwards so that they can be checked again."""
        arrays = self.check_args(arrays)
        if number < 1 or repeat < 1 or warmup < 0:
            raise ArgumentError(f"time needs number >= 1, repeat >= 1, warmup >= 0; got "
                                f"{number}, {repeat}, {warmup}")
        with self._faults(), _Buffers(self.drv, self.module) as bufs:
            bufs.copy_in(arrays)
            for _ in range(warmup):
                self._fenced(lambda: self._launch_all(bufs), timeout)
            out = [self._timed(bufs, number, timeout) for _ in range(repeat)]
            bufs.copy_out(arrays)
        return out

    def _timed(self, bufs, number: int, timeout: float) -> float:
        start, end = self.drv.Event(), self.drv.Event()

        def runs():
            start.record()
            for _ in range(number):
                self._launch_all(bufs)
            end.record()
            return end
        self._fenced(runs, timeout * number)
        return start.time_till(end) / 1e3 / number

    def _launch_all(self, bufs) -> None:
        for launch, f in zip(self.module.launches, self._funcs):
            f.prepared_call(tuple(launch.grid), tuple(launch.block),
                            *(bufs.pointer(name) for name in launch.args),
                            shared_size=launch.dynamic_shared_bytes)

    def _fenced(self, launches, timeout: float) -> None:
        """Run ``launches`` (which may return the event to wait for), then wait for the
        device at most ``timeout`` seconds."""
        end = launches() or self.drv.Event().record()
        _wait(end, timeout, self.module.func_name)

    @contextlib.contextmanager
    def _faults(self):
        """Driver errors (a launch, a copy, a wait) as DeviceFault, the context marked lost
        when the error is one CUDA cannot recover from."""
        try:
            yield
        except self.drv.Error as e:
            raise _fault(f"running {self.module.func_name} failed on the device: {e}",
                         _sticky(str(e))) from None


def _wait(event, timeout: float, name: str) -> None:
    deadline = time.perf_counter() + timeout
    pause = 1e-5
    while not event.query():
        if time.perf_counter() > deadline:
            _Context.lost = f"{name} did not finish within {timeout:g} s"
            raise DeviceFault(f"{name} did not finish within {timeout:g} s on the device (a "
                              "hang, or far too slow); this process's CUDA context cannot be "
                              "used again: replace the worker", context_lost=True, hung=True)
        time.sleep(pause)
        pause = min(pause * 2, 1e-3)


# Driver errors after which the context is unusable (CUDA's "sticky" errors).
_STICKY = ("illegal", "misaligned", "exception", "trap", "unspecified launch failure",
           "hardware stack error", "invalid program counter", "launch timed out",
           "context is destroyed", "not permitted")


def _sticky(message: str) -> bool:
    return any(s in message.lower() for s in _STICKY)


def _fault(message: str, lost: bool) -> DeviceFault:
    if lost:
        _Context.lost = message
        message += ("; this process's CUDA context cannot be used again: replace the worker")
    return DeviceFault(message, context_lost=lost)


class _Buffers:
    """Device memory for every buffer of a module (parameters and scratch), freed on exit."""

    def __init__(self, drv, module):
        self.drv, self.module = drv, module
        self.mem: dict = {}

    def __enter__(self):
        try:
            for spec in self.module.buffers:
                self.mem[spec.name] = self.drv.mem_alloc(max(spec.nbytes, 1))
        except self.drv.Error as e:
            self.__exit__()
            total = sum(s.nbytes for s in self.module.buffers)
            raise MeasureError(f"allocating {total} bytes of device memory for "
                               f"{self.module.func_name} failed: {e}") from None
        return self

    def __exit__(self, *exc):
        for m in self.mem.values():
            try:
                m.free()
            except Exception:   # freeing in a lost context fails; the context goes anyway
                pass
        self.mem.clear()

    def pointer(self, name: str) -> int:
        return int(self.mem[name])

    def copy_in(self, arrays) -> None:
        for spec, a in zip(self.module.params, arrays):
            self.drv.memcpy_htod(self.mem[spec.name], np.ascontiguousarray(a))

    def copy_out(self, arrays) -> None:
        for spec, a in zip(self.module.params, arrays):
            if not a.flags.writeable:
                continue
            if a.flags.c_contiguous:
                self.drv.memcpy_dtoh(a, self.mem[spec.name])
            else:
                host = np.empty(a.shape, a.dtype)
                self.drv.memcpy_dtoh(host, self.mem[spec.name])
                a[...] = host


def allclose_check(expected: dict, rtol: float = 1e-4, atol: float = 1e-5):
    """A check for ``measure_cuda``: the parameters named in ``expected`` (name -> array)
    must match it; returns the largest absolute error, MeasureError when one differs."""
    def check(module, arrays) -> float:
        worst = 0.0
        for spec, a in zip(module.params, arrays):
            if spec.name not in expected:
                continue
            want = np.asarray(expected[spec.name])
            if not np.allclose(a, want, rtol=rtol, atol=atol, equal_nan=False):
                bad = int(np.sum(~np.isclose(a, want, rtol=rtol, atol=atol)))
                raise MeasureError(f"output {spec.name} differs from the reference in {bad} of "
                                   f"{a.size} elements (rtol={rtol}, atol={atol})")
            worst = max(worst, float(np.max(np.abs(a - want), initial=0.0)))
        return worst
    return check


def measure_cuda(module, cubin, arrays, check, *, repeat: int = 3, warmup: int = 1,
                 min_repeat_secs: float = 0.01, max_number: int = 10000,
                 timeout: float = RUN_TIMEOUT, device: int = 0, target=None) -> dict:
    """Check the limits, load, run once, check, time and check again, as a measurement
    worker does.

    ``cubin``: a Compiled (from ``nvcc.compile_cubin``), cubin bytes or a loaded
    DeviceModule; with a Compiled and a cuda ``target``, a launch over the device's
    limits is a "build" error before anything runs.

    ``arrays``: inputs and poisoned outputs in parameter order (their outputs are
    overwritten); ``check(module, arrays) -> max abs error`` raises an ExplorerError when
    the outputs are wrong (``allclose_check`` makes one). Returns ``{"run_secs",
    "number", "first_run_secs", "max_abs_error"}``, or ``{"error", "error_kind"}`` (a
    kind of ``explorer.measure.result.ERROR_KINDS``) with ``"replace_worker": True`` when
    this process's context is lost."""
    try:
        if target is not None and hasattr(cubin, "resources"):
            from .resources import check_resources
            check_resources(module, cubin, target)
        dm = cubin if isinstance(cubin, DeviceModule) else load(module, cubin, device)
    except ExplorerError as e:
        return {"error": str(e), "error_kind": "build"}
    info: dict = {}
    try:
        t0 = time.perf_counter()
        dm.run(arrays, timeout)
        info["first_run_secs"] = time.perf_counter() - t0
        info["max_abs_error"] = _checked(check, module, arrays, "first run")
        probe = dm.time(arrays, 1, 1, 0, timeout)[0]
        number = int(min(max_number, max(1, np.ceil(min_repeat_secs / max(probe, 1e-7)))))
        samples = dm.time(arrays, number, repeat, warmup, timeout)
        _checked(check, module, arrays, f"after {repeat} timed repeats: the output changes "
                 "from run to run, a race or missing initialization?")
    except _Wrong as e:
        return {"error": str(e), "error_kind": "wrong", **info}
    except DeviceFault as e:
        return {"error": str(e), "error_kind": "timeout" if e.hung else "run",
                "replace_worker": e.context_lost, **info}
    except ExplorerError as e:
        return {"error": str(e), "error_kind": "run", **info}
    return {"run_secs": samples, "number": number, **info}


class _Wrong(MeasureError):
    pass


def _checked(check, module, arrays, when: str) -> float:
    try:
        return check(module, arrays)
    except ExplorerError as e:
        raise _Wrong(f"{e} ({when})") from None
