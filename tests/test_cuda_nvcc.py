"""Compile checks without a GPU: nvcc to cubin, ptxas's resources, the device limits,
the cubin cache, and what is said when nvcc is missing or the source is wrong."""
from __future__ import annotations

from pathlib import Path

import pytest

import cuda_kernels as K
from explorer.backends.cuda import nvcc, nvrtc
from explorer.backends.cuda.module import CudaModule, KernelLaunch
from explorer.backends.cuda.resources import Resources, check_resources, parse_ptxas
from explorer.errors import BuildError
from explorer.target import Target

LOGS = Path(__file__).parent / "data" / "ptxas"
HAVE_NVCC = nvcc.find_nvcc() is not None
needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc (the CUDA toolkit) is not installed "
                                "in $CUDA_HOME/bin, /usr/local/cuda/bin or on PATH")
needs_nvrtc = pytest.mark.skipif(nvrtc.find_nvrtc() is None, reason="no libnvrtc here (the CUDA "
                                 "toolkit's lib64, or pip install nvidia-cuda-nvrtc)")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cubin")


# -- ptxas's report, as each toolkit release prints it -----------------------------------

@pytest.mark.parametrize("log", sorted(p.name for p in LOGS.glob("cuda*.txt")))
def test_real_ptxas_logs_parse(log):
    text = (LOGS / log).read_text()
    res = parse_ptxas(text)
    # kernels.cu: entries tile, dyn, spill and a mangled one; helper is a __device__ function
    assert set(res) == {"tile", "dyn", "spill", "_Z7mangledPf"}
    assert res["tile"].static_shared_bytes == 512 * 4
    assert res["dyn"].static_shared_bytes == 64 * 4       # the dynamic part is not static
    assert res["spill"].registers == 64                    # -maxrregcount=64
    assert res["spill"].spill_stores > 0 and res["spill"].spill_loads > 0
    assert res["spill"].local_bytes >= res["spill"].spill_stores
    assert res["dyn"].local_bytes > 0                      # helper's frame did not replace it
    assert all(r.registers > 0 for r in res.values())
    old = log.startswith("cuda12.1")                       # no "used N barriers" before 12.x
    assert res["tile"].barriers == (-1 if old else 1)


# -- compiling ------------------------------------------------------------------------------

@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_compile_reads_registers_and_shared_memory(arch, cache):
    module = K.scale_add_module()
    out = nvcc.compile_cubin(module.source, arch, cache=cache)
    assert out.cubin[:4] == b"\x7fELF" and out.arch == arch
    k0, k1 = out.resources["scale_add_k0"], out.resources["scale_add_k1"]
    assert k0.registers > 0 and k1.registers > 0
    assert k0.static_shared_bytes == module.launches[0].static_shared_bytes == K.THREADS * 4
    assert k1.static_shared_bytes == 0
    assert k0.spills == 0
    check_resources(module, out, Target(f"cuda -arch={arch}"))


@needs_nvcc
@pytest.mark.parametrize("make", ["gemm", "softmax"])
def test_generated_kernels_compile_and_fit(make, cache):
    from explorer import build, ops
    from explorer.space import DesignSpace
    target = Target("cuda -arch=sm_80")
    wl = ops.gemm(64, 64, 64) if make == "gemm" else ops.softmax(16, 128)
    sch = DesignSpace(wl, target).sample(1, seed=0)[0]
    module = build(sch, target).module
    out = nvcc.compile_cubin(module.source, "sm_80", cache=cache)
    assert set(out.resources) == {launch.name for launch in module.launches}
    for launch in module.launches:
        res = out.resources[launch.name]
        assert res.registers > 0
        assert res.static_shared_bytes >= launch.static_shared_bytes    # a lower bound
    check_resources(module, out, target)


@needs_nvcc
def test_cache_hit_does_not_call_nvcc(tmp_path, monkeypatch):
    src = K.scale_add_module().source
    first = nvcc.compile_cubin(src, "sm_90", cache=tmp_path)
    assert not first.cached
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".cubin", ".txt"]   # no .tmp left

    def no_nvcc(*a, **k):
        raise AssertionError("nvcc ran although the cubin is cached")
    monkeypatch.setattr(nvcc, "_run_nvcc", no_nvcc)
    again = nvcc.compile_cubin(src, "sm_90", cache=tmp_path)
    assert again.cached and again.cubin == first.cubin and again.resources == first.resources
    assert again.seconds < first.seconds
    with pytest.raises(AssertionError, match="nvcc ran"):     # another arch is another key
        nvcc.compile_cubin(src, "sm_80", cache=tmp_path)
    with pytest.raises(AssertionError, match="nvcc ran"):     # so is another source
        nvcc.compile_cubin(src + "\n", "sm_90", cache=tmp_path)


def test_cache_lives_in_the_user_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert nvcc.cache_dir() == tmp_path / "schedule-explorer" / "cubin"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert nvcc.cache_dir() == tmp_path / "home" / ".cache" / "schedule-explorer" / "cubin"


# -- limits ---------------------------------------------------------------------------------

@needs_nvcc
def test_static_shared_memory_over_48k_is_rejected(cache):
    with pytest.raises(BuildError, match=r"kernel 'big_k0' declares 65536 bytes of static "
                       r"shared memory; a block may declare at most 49152 bytes \(48 KiB\)"):
        nvcc.compile_cubin(K.BIG_STATIC, "sm_90", cache=cache)


@needs_nvcc
def test_launch_with_2048_threads_is_rejected(cache):
    module = K.scale_add_module(block=2048)
    out = nvcc.compile_cubin(module.source, "sm_80", cache=cache)
    with pytest.raises(BuildError, match=r"kernel 'scale_add_k0' cannot run on sm_80: 2048 "
                       r"threads per block \(block \(2048, 1, 1\)\) exceed the limit of 1024"):
        check_resources(module, out, Target("cuda -arch=sm_80"))


@needs_nvcc
def test_registers_per_block_over_the_sm_are_rejected(cache):
    out = nvcc.compile_cubin((LOGS / "kernels.cu").read_text(), "sm_90", cache=cache)
    regs = out.resources["spill"].registers
    assert regs > 128                 # no register cap: ptxas keeps r[256] in registers

    def module(threads):
        launch = KernelLaunch("spill", (1, 1, 1), (threads, 1, 1), ("C", "A"))
        return CudaModule("spill", "", (launch,), ())
    target = Target("cuda -arch=sm_90")
    fits = 65536 // (-(-regs * 32 // 256) * 256) * 32        # whole warps that fit
    check_resources(module(fits), out, target)
    with pytest.raises(BuildError, match=rf"'spill' cannot run on sm_90: {regs} registers x "
                       rf"{fits + 32} threads need \d+ registers per block .* over the 65536 "
                       "registers per SM"):
        check_resources(module(fits + 32), out, target)


@needs_nvcc
def test_dynamic_shared_memory_limit_depends_on_the_arch(cache):
    module = K.dynamic_module(dynamic_bytes=200 * 1024)
    sm80 = nvcc.compile_cubin(module.source, "sm_80", cache=cache)
    with pytest.raises(BuildError, match=r"'reverse_k0' cannot run on sm_80: 0 bytes static \+ "
                       r"204800 bytes dynamic shared memory = 204800 bytes exceed the limit "
                       r"of 166912 bytes of shared memory per block"):
        check_resources(module, sm80, Target("cuda -arch=sm_80"))
    sm90 = nvcc.compile_cubin(module.source, "sm_90", cache=cache)
    check_resources(module, sm90, Target("cuda -arch=sm_90"))         # 227 KiB on Hopper


def test_a_kernel_ptxas_did_not_report_is_a_generator_bug():
    module = K.scale_add_module()
    with pytest.raises(BuildError, match=r"ptxas reported nothing for kernel 'scale_add_k0'"):
        check_resources(module, {"scale_add_k1": Resources(8)}, Target("cuda"))


# -- NVRTC where there is no nvcc ---------------------------------------------------------------

@needs_nvrtc
def test_nvrtc_compiles_where_nvcc_is_missing(monkeypatch, cache):
    module = K.scale_add_module()
    by_nvcc = nvcc.compile_cubin(module.source, "sm_90", cache=cache) if HAVE_NVCC else None
    monkeypatch.setattr(nvcc, "find_nvcc", lambda: None)
    out = nvcc.compile_cubin(module.source, "sm_90", cache=False)
    assert out.nvcc_version.startswith("NVRTC ") and out.cubin[:4] == b"\x7fELF"
    assert out.resources["scale_add_k0"].static_shared_bytes == K.THREADS * 4
    assert out.resources["scale_add_k1"].registers > 0
    check_resources(module, out, Target("cuda -arch=sm_90"))
    if by_nvcc is not None and by_nvcc.nvcc_version[1:3] == out.nvcc_version[6:8]:
        assert out.resources == by_nvcc.resources          # one release: the same ptxas


@needs_nvrtc
def test_nvrtc_errors_are_said_like_nvcc_ones(monkeypatch):
    monkeypatch.setattr(nvcc, "find_nvcc", lambda: None)
    src = 'extern "C" __global__ void bad_k0(float* C) {\n  C[threadIdx.x] = undefined_thing;\n}\n'
    with pytest.raises(BuildError, match=r"NVRTC could not compile the CUDA source for sm_80:\n"
                       r'kernel.cu\(2\): error: identifier "undefined_thing" is undefined'):
        nvcc.compile_cubin(src, "sm_80", cache=False)
    with pytest.raises(BuildError, match=r"kernel 'big_k0' declares 65536 bytes of static "):
        nvcc.compile_cubin(K.BIG_STATIC, "sm_80", cache=False)


# -- what is said when something is missing or wrong ---------------------------------------

def test_missing_nvcc_says_what_still_works(monkeypatch, tmp_path):
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(nvcc, "STANDARD_ROOT", str(tmp_path / "no-cuda"))
    monkeypatch.setattr(nvrtc, "find_nvrtc", lambda: None)
    assert nvcc.find_nvcc() is None
    with pytest.raises(BuildError, match=r"nvcc \(the CUDA toolkit's compiler\) was not found "
                       r"in \$CUDA_HOME/bin, /usr/local/cuda/bin or on PATH, nor NVRTC .*Code "
                       r"generation \(the CUDA source\), host emulation and the interpreter "
                       "still work"):
        nvcc.compile_cubin(K.SCALE_ADD, "sm_90", cache=False)


def test_cuda_home_is_looked_at_first(monkeypatch, tmp_path):
    fake = tmp_path / "bin" / "nvcc"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert nvcc.find_nvcc() == str(fake)


@needs_nvcc
def test_compile_error_shows_the_first_error_lines():
    src = 'extern "C" __global__ void bad_k0(float* C) {\n  C[threadIdx.x] = undefined_thing;\n}\n'
    with pytest.raises(BuildError) as info:
        nvcc.compile_cubin(src, "sm_90", cache=False)
    msg = str(info.value)
    assert msg.startswith("nvcc could not compile the CUDA source for sm_90:")
    assert 'kernel.cu(2): error: identifier "undefined_thing" is undefined' in msg


@needs_nvcc
def test_compile_time_out_is_an_error():
    with pytest.raises(BuildError, match=r"nvcc did not finish within 0.05 s"):
        nvcc.compile_cubin(K.SCALE_ADD, "sm_90", cache=False, timeout=0.05)


@pytest.mark.parametrize("arch", ["90", "sm90", "compute_90", "sm_9x", None])
def test_bad_arch_names_the_form(arch):
    with pytest.raises(BuildError, match=r"unknown CUDA architecture .*sm_XY, e.g. sm_80"):
        nvcc.compile_cubin(K.SCALE_ADD, arch, cache=False)


def test_a_cuda_target_gives_its_arch():
    assert nvcc.check_arch(Target("cuda -arch=sm_86")) == "sm_86"
