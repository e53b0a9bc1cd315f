"""The GPU check script's parts that run without a GPU: its usage, the table it prints,
and a tuning step that says why it cannot run instead of failing obscurely."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import gpu_check  # noqa: E402


def test_shell_script_parses_and_prints_its_usage():
    script = REPO / "benchmarks" / "gpu_check.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    out = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "gpu_check.sh --prepare .gpu-wheels" in out.stdout
    assert "without network access" in out.stdout


def test_table_compares_with_the_goal():
    rows = [{"case": "gemm-2048", "goal": 0.8, "tuned_gflops": 15000.0,
             "library": "cuBLAS (PyTorch)", "library_gflops": 20000.0, "ratio": 0.75},
            {"case": "conv-C6", "goal": 0.7, "tuned_gflops": 9000.0,
             "library": "cuDNN (PyTorch)", "library_gflops": 10000.0, "ratio": 0.9},
            {"case": "gemm-x", "goal": 0.8, "library_error": "RuntimeError: no torch"}]
    lines = gpu_check.table(rows).splitlines()
    assert lines[2].split()[-3:] == ["0.80", "not", "met"] and "0.75" in lines[2]
    assert lines[3].split()[-2:] == ["0.70", "met"] and "10000 GFLOP/s" in lines[3]
    assert "n/a" in lines[4] and "RuntimeError" in lines[4]
    assert "TF32 off" in lines[-1]


def test_case_flops_are_the_workloads():
    gemm, conv = (gpu_check.case_flops(c) for c in gpu_check.CASES)
    assert gemm == 2 * 2048 ** 3
    assert conv == 2 * 128 * 28 * 28 * 128 * 3 * 3


@pytest.mark.skipif(importlib.util.find_spec("pycuda") is not None,
                    reason="pycuda is installed: the tuning step would tune")
def test_tuning_without_pycuda_says_why(tmp_path):
    out = gpu_check.tune(gpu_check.CASES[0], "sm_90", 2, tmp_path, timeout=300)
    assert out["error"].startswith("explorer tune exited with status 1")
    assert "pycuda is not installed: pip install -e '.[cuda]'" in out["error"]
    assert (tmp_path / "tune-gemm-2048.log").is_file()
