"""The pycuda runtime: what is said without pycuda or a driver, the launch bookkeeping
(buffers, argument order, launch order, dynamic shared memory, timing, faults) against a
recording stand-in of ``pycuda.driver``, and on a GPU (marked ``gpu``) the real thing."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import cuda_kernels as K
from explorer.backends.cuda import nvcc, runtime
from explorer.errors import ArgumentError, BuildError, MeasureError

PYCUDA_MESSAGE = ("pycuda is not installed: pip install -e '.[cuda]' (needs the CUDA toolkit "
                  "and an NVIDIA driver)")


# -- without pycuda, or without a driver ----------------------------------------------------

@pytest.mark.skipif(importlib.util.find_spec("pycuda") is not None, reason="pycuda is installed")
def test_no_pycuda_message_here():
    with pytest.raises(BuildError) as info:
        runtime.load(K.scale_add_module(), b"")
    assert str(info.value) == PYCUDA_MESSAGE


def _forget_pycuda(monkeypatch):
    """Drop pycuda from sys.modules for this test; whatever the test imports is dropped
    again afterwards."""
    for name in ("pycuda", "pycuda.driver"):
        monkeypatch.setitem(sys.modules, name, sys.modules.get(name))
        monkeypatch.delitem(sys.modules, name)


class _NoPycuda:
    """A finder that answers for pycuda as an environment without it does."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] == "pycuda":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def test_no_pycuda_message(monkeypatch):
    _forget_pycuda(monkeypatch)
    monkeypatch.setattr(sys, "meta_path", [_NoPycuda, *sys.meta_path])
    with pytest.raises(BuildError) as info:
        runtime.driver()
    assert str(info.value) == PYCUDA_MESSAGE


def test_pycuda_without_driver_library(monkeypatch, tmp_path):
    # pycuda/driver.py imports pycuda._driver, which links libcuda.so.1: without an NVIDIA
    # driver the import fails with the dynamic loader's message
    pkg = tmp_path / "pycuda"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "driver.py").write_text("raise ImportError('libcuda.so.1: cannot open shared object "
                                   "file: No such file or directory')\n")
    _forget_pycuda(monkeypatch)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BuildError, match=r"pycuda is installed but the NVIDIA driver is not "
                       r"\(libcuda.so.1: cannot open.*code generation, compile checks with nvcc "
                       "and host emulation still work without a GPU"):
        runtime.driver()


# -- a recording stand-in of pycuda.driver --------------------------------------------------

class FakeDriver(types.ModuleType):
    """Enough of ``pycuda.driver`` to run the bookkeeping: device memory as numpy bytes,
    kernels as numpy functions of (grid, block, *pointers), an event clock that advances
    1 ms per launch, and a launch refused when its dynamic shared memory exceeds 48 KiB
    without the attribute (as the driver refuses it)."""

    def __init__(self, kernels, devices=1, init_error=None):
        super().__init__("pycuda.driver")
        self.kernels, self.devices, self.init_error = kernels, devices, init_error
        self.Error = type("Error", (Exception,), {})
        self.LaunchError = type("LaunchError", (self.Error,), {})
        self.function_attribute = types.SimpleNamespace(MAX_DYNAMIC_SHARED_SIZE_BYTES="max_dyn")
        self.memory, self.launched, self.attributes = {}, [], {}
        self.clock, self.fault, self.hang, self.next_addr = 0, None, False, 4096
        self.contexts = 0
        drv = self

        class Device:
            def __init__(self, i):
                self.i = i

            @staticmethod
            def count():
                return drv.devices

            def name(self):
                return "Fake GPU"

            def compute_capability(self):
                return (9, 0)

            def make_context(self):
                drv.contexts += 1
                return types.SimpleNamespace(pop=lambda: None)
        self.Device = Device

        class Event:
            def record(self):
                self.t = drv.clock
                return self

            def query(self):
                if drv.fault:
                    raise drv.LaunchError(drv.fault)
                return not drv.hang

            def time_till(self, end):
                return float(end.t - self.t)          # ms
        self.Event = Event

    def init(self):
        if self.init_error:
            raise self.Error(self.init_error)

    def module_from_buffer(self, cubin):
        if cubin != b"fake cubin":
            raise self.Error("cuModuleLoadData failed: device kernel image is invalid")
        return types.SimpleNamespace(get_function=self._function)

    def _function(self, name):
        drv = self
        if name not in self.kernels:
            raise self.Error("cuModuleGetFunction failed: named symbol not found")

        class Function:
            def set_attribute(self, attr, value):
                drv.attributes[(name, attr)] = value

            def prepare(self, fmt):
                self.fmt = fmt

            def prepared_call(self, grid, block, *ptrs, shared_size=0):
                assert len(ptrs) == len(self.fmt) and all(isinstance(p, int) for p in ptrs)
                if shared_size > max(48 * 1024, drv.attributes.get((name, "max_dyn"), 0)):
                    raise drv.LaunchError("cuLaunchKernel failed: invalid argument")
                drv.kernels[name](drv, grid, block, *ptrs)
                drv.launched.append((name, tuple(grid), tuple(block), shared_size))
                drv.clock += 1
        return Function()

    def mem_alloc(self, n):
        addr, self.next_addr = self.next_addr, self.next_addr + n + 256
        self.memory[addr] = np.zeros(n, np.uint8)
        drv = self

        class Alloc(int):
            def free(self):
                drv.memory.pop(int(self))
        return Alloc(addr)

    def memcpy_htod(self, alloc, a):
        self.memory[int(alloc)][:a.nbytes] = np.frombuffer(a.tobytes(), np.uint8)

    def memcpy_dtoh(self, a, alloc):
        a.reshape(-1).view(np.uint8)[:] = self.memory[int(alloc)][:a.nbytes]

    def f32(self, ptr):
        return self.memory[ptr].view(np.float32)


def _scale(drv, grid, block, t, a):
    drv.f32(t)[:] = 2 * drv.f32(a).reshape(-1, K.THREADS)[:, ::-1].reshape(-1)


def _add(drv, grid, block, c, t, b):
    drv.f32(c)[:] = drv.f32(t) + drv.f32(b)


def _reverse(drv, grid, block, c, a):
    drv.f32(c)[:] = K.dynamic_reference(drv.f32(a))


KERNELS = {"scale_add_k0": _scale, "scale_add_k1": _add, "reverse_k0": _reverse}


@pytest.fixture
def fake(monkeypatch):
    def install(**kw):
        drv = FakeDriver(dict(KERNELS), **kw)
        pkg = types.ModuleType("pycuda")
        pkg.driver = drv
        monkeypatch.setitem(sys.modules, "pycuda", pkg)
        monkeypatch.setitem(sys.modules, "pycuda.driver", drv)
        monkeypatch.setattr(runtime._Context, "pid", None)
        monkeypatch.setattr(runtime._Context, "lost", "")
        return drv
    return install


def test_no_device_and_no_driver_are_said(fake):
    fake(devices=0)
    with pytest.raises(BuildError, match="the NVIDIA driver reports no CUDA device"):
        runtime.context()
    fake(init_error="cuInit failed: no CUDA-capable device is detected")
    with pytest.raises(BuildError, match=r"pycuda is installed but found no usable NVIDIA driver "
                       r"\(cuInit failed: no CUDA-capable device is detected\)"):
        runtime.context()
    fake(devices=1)
    with pytest.raises(BuildError, match=r"there is no CUDA device 3: this machine has 1"):
        runtime.context(3)


def test_each_process_makes_its_own_context(fake, monkeypatch):
    drv = fake()
    first = runtime.context()
    assert runtime.context() is first and drv.contexts == 1     # kept within a process
    monkeypatch.setattr(runtime._Context, "pid", -1)            # as seen after a fork
    assert runtime.context() is not first and drv.contexts == 2


def test_run_launches_in_order_through_the_scratch_buffer(fake):
    drv = fake()
    module = K.scale_add_module()
    a, b, c = K.random_inputs(module, seed=1)
    a.setflags(write=False)
    dm = runtime.load(module, b"fake cubin")
    dm.run([a, b, c])
    np.testing.assert_allclose(c, K.scale_add_reference(a, b), rtol=1e-6)
    assert [x[0] for x in drv.launched] == ["scale_add_k0", "scale_add_k1"]
    assert drv.launched[0][1:] == ((K.N // K.THREADS, 1, 1), (K.THREADS, 1, 1), 0)
    assert drv.memory == {}                        # every buffer freed, the scratch one too


def test_dynamic_shared_memory_over_48k_sets_the_attribute(fake):
    drv = fake()
    module = K.dynamic_module()
    a, c = K.random_inputs(module, seed=2)
    runtime.load(module, b"fake cubin").run([a, c])
    assert drv.attributes == {("reverse_k0", "max_dyn"): K.DYN_FLOATS * 4}
    np.testing.assert_array_equal(c, K.dynamic_reference(a))


def test_time_is_per_run_of_the_launch_sequence(fake):
    drv = fake()
    module = K.scale_add_module()
    args = K.random_inputs(module, seed=3)
    secs = runtime.load(module, b"fake cubin").time(args, number=5, repeat=3, warmup=2)
    assert secs == [0.002] * 3                     # two launches of 1 ms on the fake clock
    assert len(drv.launched) == 2 * (2 + 5 * 3)
    np.testing.assert_allclose(args[2], K.scale_add_reference(args[0], args[1]), rtol=1e-6)


def test_arguments_are_checked(fake):
    fake()
    dm = runtime.load(K.scale_add_module(), b"fake cubin")
    a, b, c = K.random_inputs(dm.module)
    with pytest.raises(ArgumentError, match=r"scale_add takes 3 arrays \(A, B, C\) but got 2"):
        dm.run([a, b])
    with pytest.raises(ArgumentError, match=r"argument B has dtype float64, expected float32"):
        dm.run([a, b.astype(np.float64), c])


def test_a_cubin_the_driver_refuses_is_a_build_error(fake):
    fake()
    with pytest.raises(BuildError, match=r"the driver could not load the cubin of scale_add"):
        runtime.load(K.scale_add_module(), b"not a cubin")


def check_scale_add(module, arrays) -> float:
    """C against numpy, from the inputs A and B in ``arrays``."""
    return runtime.allclose_check({"C": K.scale_add_reference(arrays[0], arrays[1])})(
        module, arrays)


def test_measure_checks_then_times(fake):
    fake()
    module = K.scale_add_module()
    out = runtime.measure_cuda(module, b"fake cubin", K.random_inputs(module, 4), check_scale_add,
                               repeat=4, min_repeat_secs=0.01)
    assert out["run_secs"] == [0.002] * 4 and out["number"] == 5      # 10 ms / 2 ms a run
    assert out["max_abs_error"] < 1e-5 and "error" not in out


def test_measure_refuses_a_launch_over_the_limits_before_running(fake):
    from explorer.backends.cuda.nvcc import Compiled
    from explorer.backends.cuda.resources import Resources
    from explorer.target import Target
    drv = fake()
    module = K.scale_add_module(block=2048)
    compiled = Compiled(b"fake cubin", "sm_90", {"scale_add_k0": Resources(16, 0, 0, 1024),
                                                 "scale_add_k1": Resources(16)})
    out = runtime.measure_cuda(module, compiled, K.random_inputs(module, 5), check_scale_add,
                               target=Target("cuda -arch=sm_90"))
    assert out["error_kind"] == "build" and drv.launched == []
    assert "2048 threads per block" in out["error"] and "limit of 1024" in out["error"]


def test_measure_reports_a_wrong_output(fake):
    drv = fake()
    drv.kernels["scale_add_k1"] = lambda d, g, bl, c, t, b: None     # never writes C
    module = K.scale_add_module()
    out = runtime.measure_cuda(module, b"fake cubin", K.random_inputs(module, 5), check_scale_add)
    assert out["error_kind"] == "wrong" and "run_secs" not in out
    assert out["error"] == ("output C differs from the reference in 4096 of 4096 elements "
                            "(rtol=0.0001, atol=1e-05) (first run)")


def test_a_fault_loses_the_context_and_asks_for_a_new_worker(fake):
    drv = fake()
    drv.fault = "cuCtxSynchronize failed: an illegal memory access was encountered"
    module = K.scale_add_module()
    out = runtime.measure_cuda(module, b"fake cubin", K.random_inputs(module, 6), check_scale_add)
    assert out["error_kind"] == "run" and out["replace_worker"] is True
    assert "an illegal memory access was encountered" in out["error"]
    drv.fault = None
    with pytest.raises(runtime.DeviceFault, match="this process's CUDA context was lost"):
        runtime.load(module, b"fake cubin")


def test_a_hung_kernel_is_a_timeout(fake):
    drv = fake()
    drv.hang = True
    module = K.scale_add_module()
    out = runtime.measure_cuda(module, b"fake cubin", K.random_inputs(module, 7), check_scale_add,
                               timeout=0.05)
    assert out["error_kind"] == "timeout" and out["replace_worker"] is True
    assert "did not finish within 0.05 s" in out["error"]


def test_a_refused_launch_keeps_the_context(fake):
    drv = fake()
    module = K.dynamic_module()
    dm = runtime.load(module, b"fake cubin")
    drv.attributes.clear()                         # as if the attribute had not been set
    with pytest.raises(runtime.DeviceFault) as info:
        dm.run(K.random_inputs(module, 8))
    assert not info.value.context_lost and "invalid argument" in str(info.value)
    assert isinstance(info.value, MeasureError)
    runtime.context()                              # still usable


# -- on a GPU ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gpu_arch():
    try:
        arch = runtime.device_arch()
    except BuildError as e:
        pytest.skip(f"no CUDA device here: {e}")
    if nvcc.find_nvcc() is None:
        pytest.skip("nvcc is not installed on this GPU machine")
    return arch


@pytest.mark.gpu
@pytest.mark.parametrize("make, ref", [(K.scale_add_module, K.scale_add_reference),
                                       (K.dynamic_module, K.dynamic_reference)])
def test_gpu_runs_and_times(gpu_arch, make, ref):
    module = make()
    compiled = nvcc.compile_cubin(module.source, gpu_arch)
    args = K.random_inputs(module, seed=9)
    dm = runtime.load(module, compiled)
    dm.run(args)
    inputs = [a for s, a in zip(module.params, args) if s.name in ("A", "B")]
    np.testing.assert_allclose(args[-1], ref(*inputs), rtol=1e-6)
    secs = dm.time(args, number=10, repeat=3)
    assert len(secs) == 3 and all(0 < s < 0.1 for s in secs)
    regs, smem, _ = dm.resources()[module.launches[0].name]
    assert regs == compiled.resources[module.launches[0].name].registers
    assert smem == compiled.resources[module.launches[0].name].static_shared_bytes


@pytest.mark.gpu
def test_gpu_measure_counts_only_checked_times(gpu_arch):
    module = K.scale_add_module()
    compiled = nvcc.compile_cubin(module.source, gpu_arch)
    out = runtime.measure_cuda(module, compiled, K.random_inputs(module, 10), check_scale_add)
    assert "error" not in out, out
    assert len(out["run_secs"]) == 3 and out["number"] >= 1 and out["max_abs_error"] < 1e-5


@pytest.mark.gpu
def test_gpu_fault_is_a_clean_error_in_its_own_process(gpu_arch, tmp_path):
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(K.__file__.rsplit('/', 1)[0])!r})
        import numpy as np
        import cuda_kernels as K
        from explorer.backends.cuda import nvcc, runtime
        m = K.fault_module()
        c = nvcc.compile_cubin(m.source, {gpu_arch!r})
        out = runtime.measure_cuda(m, c, K.random_inputs(m), lambda mod, a: 0.0)
        print(json.dumps(out))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["error_kind"] == "run" and out["replace_worker"] is True, out
    assert "illegal" in out["error"] or "unspecified launch failure" in out["error"]
