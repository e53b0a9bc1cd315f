"""The GPU check's Python half (run it through ``benchmarks/gpu_check.sh``, which installs
pycuda first): environment, correctness, tuning, and a table against cuBLAS/cuDNN.

1. environment: the driver and its CUDA version, the device, nvcc, PyTorch, CuPy;
2. correctness: hand-written kernels that follow the code generator's contract
   (``tests/cuda_kernels.py``) compiled with nvcc (or NVRTC), or loaded from the cubins
   prepared with ``--make-cubins`` when there is neither, run with
   ``explorer.backends.cuda.runtime`` and compared with numpy; the CUDA tests (``tests/test_cuda_*.py``, their ``gpu`` ones
   included) when pytest is installed; schedules sampled from the cuda design space,
   built with ``build(sch, "cuda")`` and checked, when the code generator is there;
3. tuning: ``explorer tune --target "cuda -arch=sm_XY"`` on gemm 2048^3 and ResNet-18 C6
   (``--trials`` each; a version without the cuda target says so and goes on);
4. the table: tuned GFLOP/s against cuBLAS (``torch.matmul``) and cuDNN
   (``torch.nn.functional.conv2d``, ``cudnn.benchmark`` on), or CuPy's matmul without
   PyTorch; fp32 with TF32 off, medians of CUDA-event timings.

Writes ``WORK/report.json``; exits 1 when a correctness check fails.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("CUPY_TF32", "0")

ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90")
# name, operator, shape, extra --param, goal (fraction of the library), library
CASES = (("gemm-2048", "gemm", "2048,2048,2048", (), 0.80, "cuBLAS"),
         ("conv-C6", "conv2d", "1,128,28,28,128,3,3", ("padding=1",), 0.70, "cuDNN"))


def check_modules():
    """(module, reference of its inputs) of the hand-written check kernels."""
    import cuda_kernels as K
    return ((K.scale_add_module(), K.scale_add_reference),
            (K.dynamic_module(), K.dynamic_reference))


def make_cubins(folder: Path) -> None:
    """Compile the check kernels for every preset architecture into ``folder``."""
    from explorer.backends.cuda.nvcc import compile_cubin
    folder.mkdir(parents=True, exist_ok=True)
    for module, _ in check_modules():
        for arch in ARCHS:
            path = folder / f"{module.func_name}.{arch}.cubin"
            path.write_bytes(compile_cubin(module.source, arch).cubin)
            print(f"wrote {path}")


# -- 1. environment ------------------------------------------------------------------------

def environment() -> dict:
    from explorer.backends.cuda import runtime
    env: dict = {"python": sys.version.split()[0]}
    drv = runtime.driver()
    import pycuda
    env["pycuda"] = pycuda.VERSION_TEXT
    dev = runtime.device()
    v = drv.get_driver_version()
    env["driver_cuda"] = f"{v // 1000}.{v % 1000 // 10}"
    env["device"] = dev.name()
    env["arch"] = runtime.device_arch()
    env["sm_count"] = dev.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
    env["memory_gib"] = round(dev.total_memory() / 2 ** 30, 1)
    env["compiler"] = compiler()
    for mod in ("torch", "cupy"):
        spec = importlib.util.find_spec(mod)
        env[mod] = __import__(mod).__version__ if spec else None
    for k, v in env.items():
        print(f"{k:>12}: {v}")
    return env


# -- 2. correctness --------------------------------------------------------------------------

def compiler() -> str | None:
    """What compiles kernels here: nvcc, else NVRTC, else None."""
    from explorer.backends.cuda import nvcc, nvrtc
    path = nvcc.find_nvcc()
    if path:
        return f"nvcc {nvcc.nvcc_version(path)} ({path})"
    lib = nvrtc.find_nvrtc()
    return f"{nvrtc.nvrtc_version(lib)} ({lib})" if lib else None


def hand_written(arch: str, cubins: Path, can_compile: bool) -> list:
    from explorer.backends.cuda import nvcc, runtime
    from explorer.backends.cuda.resources import check_resources
    from explorer.target import Target
    import cuda_kernels as K
    out = []
    for module, ref in check_modules():
        name = f"hand-written {module.func_name}"
        try:
            if can_compile:
                compiled = nvcc.compile_cubin(module.source, arch)
                if arch in ARCHS:
                    check_resources(module, compiled, Target(f"cuda -arch={arch}"))
                cubin, how = compiled.cubin, compiled.nvcc_version
            else:
                cubin, how = (cubins / f"{module.func_name}.{arch}.cubin").read_bytes(), "cubin"
        except Exception as e:      # report every failure and go on
            out.append(_check(name, False, f"{type(e).__name__}: {e}"))
            continue
        outputs = [s.name for s in module.params if s.name not in ("A", "B")]

        def check(mod, arrays, ref=ref, outputs=outputs):
            inputs = [a for s, a in zip(mod.params, arrays) if s.name in ("A", "B")]
            return runtime.allclose_check({outputs[-1]: ref(*inputs)})(mod, arrays)
        res = runtime.measure_cuda(module, cubin, K.random_inputs(module, 0), check)
        ok = "error" not in res
        detail = (f"{how}, {statistics.median(res['run_secs']) * 1e6:.1f} us" if ok
                  else f"{res['error_kind']}: {res['error']}")
        out.append(_check(name, ok, detail))
    return out


def generated(arch: str, samples: int) -> list:
    """Sampled cuda schedules of small workloads, built and checked against numpy."""
    from explorer import build, ops
    from explorer.errors import BuildError
    from explorer.space import DesignSpace
    from explorer.target import Target
    target = Target(f"cuda -arch={arch}") if arch in ARCHS else Target("cuda")
    out = []
    for wl in (ops.gemm(256, 256, 256), ops.conv2d(1, 32, 14, 14, 32, 3, 3, padding=1),
               ops.softmax(64, 256)):
        ok = bad = 0
        first = ""
        try:
            schedules = DesignSpace(wl, target).sample(samples, seed=0)
        except Exception as e:
            out.append(_check(f"generated {wl.key}", False, f"sampling failed: {e}"))
            continue
        for sch in schedules:
            try:
                kernel = build(sch, target)
                args = wl.make_args(0)
                kernel(*args)
                wl.check(args)
                ok += 1
            except BuildError as e:
                bad, first = bad + 1, first or str(e)
            except Exception as e:
                bad, first = bad + 1, first or f"{type(e).__name__}: {e}"
        out.append(_check(f"generated {wl.key}", bad == 0,
                          f"{ok}/{len(schedules)} correct" + (f"; first failure: {first}"
                                                               if bad else "")))
    return out


def pytest_cuda() -> list:
    if importlib.util.find_spec("pytest") is None:
        return [_check("tests/test_cuda_*.py", None, "skipped: pytest is not installed")]
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
           "tests/test_cuda_nvcc.py", "tests/test_cuda_runtime.py", "tests/test_cuda_codegen.py",
           "tests/test_cuda_emulate.py", "tests/test_cuda_tune.py"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-500:]
    if proc.returncode != 0:
        print(proc.stdout[-4000:])
    return [_check("tests/test_cuda_*.py", proc.returncode == 0, tail)]


def _check(name: str, ok, detail: str) -> dict:
    word = {True: "PASS", False: "FAIL", None: "SKIP"}[ok]
    print(f"  {word}  {name}: {detail}")
    return {"name": name, "ok": ok, "detail": detail}


# -- 3. tuning --------------------------------------------------------------------------------

def tune(case, arch: str, trials: int, work: Path, timeout: float) -> dict:
    name, op, shape, params, _, _ = case
    out_json = work / f"tune-{name}.json"
    cmd = [sys.executable, "-m", "explorer.cli", "tune", "--target", f"cuda -arch={arch}",
           "--op", op, "--shape", shape, *(a for p in params for a in ("--param", p)),
           "--trials", str(trials), "--db", str(work / "tuning_db"), "--json", str(out_json),
           "--no-numpy"]
    print(f"  $ {shlex.join(['python3', *cmd[1:]])}")
    log = work / f"tune-{name}.log"
    t0 = time.perf_counter()
    try:
        with open(log, "w") as f:
            proc = subprocess.run(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT,
                                  timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"tuning did not finish within {timeout:g} s (log: {log})"}
    text = log.read_text()
    if proc.returncode != 0:
        last = "\n".join(text.strip().splitlines()[-5:])
        if "invalid choice" in text or "unknown target" in text:
            why = "explorer tune --target cuda is not available in this version yet"
        else:
            why = f"explorer tune exited with status {proc.returncode}"
        print(f"  {why}:\n{last}")
        return {"error": f"{why}: {last}"}
    res = json.loads(out_json.read_text())
    print(f"  {name}: {res['trials']} trials, {res['failed']} failed, best "
          f"{res['best_gflops'] or 0:.1f} GFLOP/s ({time.perf_counter() - t0:.0f} s)")
    return res


# -- 4. libraries -----------------------------------------------------------------------------

def case_flops(case) -> float:
    from explorer.cli.workload_text import workload_from_text
    _, op, shape, params, _, _ = case
    return float(workload_from_text(op, shape, list(params)).flops)


def library_seconds(case, repeats: int) -> tuple:
    """(library name, median seconds) of cuBLAS/cuDNN on ``case``, fp32, TF32 off."""
    name, op, shape, _, _, lib = case
    dims = [int(x) for x in shape.split(",")]
    if importlib.util.find_spec("torch") is not None:
        return f"{lib} (PyTorch)", _torch_seconds(op, dims, repeats)
    if importlib.util.find_spec("cupy") is not None and op == "gemm":
        return f"{lib} (CuPy)", _cupy_seconds(dims, repeats)
    raise RuntimeError("neither PyTorch nor CuPy (with its cuDNN for conv2d) is installed")


def _torch_seconds(op: str, dims: list, repeats: int) -> float:
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True          # cuDNN picks its fastest algorithm
    torch.manual_seed(0)
    dev = torch.device("cuda")
    if op == "gemm":
        m, n, k = dims
        a, b = torch.randn(m, k, device=dev), torch.randn(k, n, device=dev)
        fn = lambda: torch.matmul(a, b)             # noqa: E731
    else:
        nb, c, h, w, k, r, s = dims
        x, wt = torch.randn(nb, c, h, w, device=dev), torch.randn(k, c, r, s, device=dev)
        fn = lambda: torch.nn.functional.conv2d(x, wt, padding=r // 2)   # noqa: E731
    return _event_median(fn, lambda: torch.cuda.Event(enable_timing=True),
                         lambda a, b: a.elapsed_time(b), torch.cuda.synchronize, repeats)


def _cupy_seconds(dims: list, repeats: int) -> float:
    import cupy
    m, n, k = dims
    rng = cupy.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=cupy.float32)
    b = rng.standard_normal((k, n), dtype=cupy.float32)
    return _event_median(lambda: cupy.matmul(a, b), cupy.cuda.Event,
                         cupy.cuda.get_elapsed_time, cupy.cuda.runtime.deviceSynchronize,
                         repeats)


def _event_median(fn, event, elapsed_ms, sync, repeats: int) -> float:
    """Median seconds of ``fn`` over ``repeats`` CUDA-event timings of enough calls to
    last about 20 ms, after a warm-up."""
    for _ in range(3):
        fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    number = max(1, min(1000, int(0.02 / max(time.perf_counter() - t0, 1e-6))))
    out = []
    for _ in range(repeats):
        start, end = event(), event()
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        out.append(elapsed_ms(start, end) / 1e3 / number)
    return statistics.median(out)


def table(rows: list) -> str:
    head = f"{'case':<10} {'explorer (tuned)':>18} {'library':>30} {'ratio':>6} {'goal':>6}"
    lines = [head, "-" * len(head)]
    for r in rows:
        ours = f"{r['tuned_gflops']:.0f} GFLOP/s" if r.get("tuned_gflops") else "n/a"
        lib = (f"{r['library']} {r['library_gflops']:.0f} GFLOP/s" if r.get("library_gflops")
               else f"n/a ({r.get('library_error', '')[:20]})")
        ratio = r.get("ratio")
        met = "" if ratio is None else (" met" if ratio >= r["goal"] else " not met")
        lines.append(f"{r['case']:<10} {ours:>18} {lib:>30} "
                     f"{'' if ratio is None else f'{ratio:.2f}':>6} {r['goal']:>6.2f}{met}")
    lines.append("fp32, TF32 off; tuned: the tuner's best (median of its timed repeats); "
                 "library: median of CUDA-event timings")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, default=REPO / ".gpu-check")
    p.add_argument("--cubins", type=Path, default=REPO / ".gpu-wheels" / "cubin",
                   help="prepared cubins of the check kernels, used when nvcc is missing")
    p.add_argument("--make-cubins", type=Path, default=None, metavar="DIR",
                   help="compile the check kernels for sm_80/86/89/90 into DIR and stop")
    p.add_argument("--trials", type=int, default=256)
    p.add_argument("--samples", type=int, default=8, help="sampled schedules per workload")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--tune-timeout", type=float, default=3600.0)
    p.add_argument("--skip-tune", action="store_true")
    p.add_argument("--skip-pytest", action="store_true")
    p.add_argument("--quick", action="store_true", help="16 trials, 2 samples (a smoke run)")
    args = p.parse_args()
    if args.make_cubins:
        make_cubins(args.make_cubins)
        return 0
    if args.quick:
        args.trials, args.samples = 16, 2
    args.work.mkdir(parents=True, exist_ok=True)
    print("\n== environment")
    from explorer.errors import ExplorerError
    try:
        env = environment()
    except ExplorerError as e:
        print(f"gpu_check: {e}", file=sys.stderr)
        return 1
    arch = env["arch"]
    print("\n== correctness")
    checks = (hand_written(arch, args.cubins, env["compiler"] is not None)
              + generated(arch, args.samples))
    if not args.skip_pytest:
        checks += pytest_cuda()
    rows, tuning = [], {}
    for case in CASES:
        name, goal = case[0], case[4]
        print(f"\n== {name}")
        row = {"case": name, "goal": goal, "flops": case_flops(case)}
        if args.skip_tune or not env["compiler"]:
            tuning[name] = {"error": "skipped" if args.skip_tune else
                            "neither nvcc nor NVRTC here: tuning compiles every candidate"}
        else:
            tuning[name] = tune(case, arch, args.trials, args.work, args.tune_timeout)
        row["tuned_gflops"] = tuning[name].get("best_gflops")
        try:
            row["library"], secs = library_seconds(case, args.repeats)
            row["library_gflops"] = row["flops"] / secs / 1e9
        except Exception as e:
            row["library_error"] = f"{type(e).__name__}: {e}"
        if row.get("tuned_gflops") and row.get("library_gflops"):
            row["ratio"] = row["tuned_gflops"] / row["library_gflops"]
        rows.append(row)
    print("\n== table\n" + table(rows))
    report = {"environment": env, "checks": checks, "tuning": tuning, "table": rows}
    (args.work / "report.json").write_text(json.dumps(report, indent=1, default=str))
    print(f"\nwrote {args.work / 'report.json'}")
    return 1 if any(c["ok"] is False for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
