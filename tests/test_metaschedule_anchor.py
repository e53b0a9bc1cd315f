"""The MetaSchedule anchor benchmark's parts that run without TVM: its arguments, the
one-line message when TVM is missing, and the table it prints. Where TVM is importable
(its own virtual environment), the operators written with tvm.te are also compiled
unscheduled and checked against numpy."""
from __future__ import annotations

import sys
from types import SimpleNamespace
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import metaschedule_anchor as anchor  # noqa: E402
from explorer import ops  # noqa: E402


def _row(impl, gflops, err=1e-5, error=None, kind=None, note=""):
    return {"impl": impl, "gflops": gflops, "median_secs": 1 / gflops if gflops else None,
            "max_abs_error": err, "error": error, "error_kind": kind, "note": note}


def test_cases_are_gemm_n_and_c2():
    assert anchor.case_workload("gemm-1024").key == ops.gemm(1024, 1024, 1024).key
    assert anchor.case_workload("gemm-48").key == ops.gemm(48, 48, 48).key
    c2 = anchor.case_workload("C2")
    assert c2.key == ops.conv2d(1, 64, 56, 56, 64, 3, 3, stride=1, padding=1).key
    assert c2.flops == 2 * 64 * 56 * 56 * 64 * 9


@pytest.mark.parametrize("argv, says", [
    (["--cases", "gemm-1024", "C3"], "unknown case 'C3': the cases are gemm-1024"),
    (["--cases", "gemm-0"], "unknown case 'gemm-0'"),
    (["--cases", "gemm"], "and C2 (ResNet-18 conv2d"),
    (["--trials", "0"], "--trials must be at least 1, got 0"),
    (["--threads", "-2"], "--threads must be at least 1, got -2"),
    (["--rounds", "0"], "--rounds must be at least 1"),
])
def test_bad_arguments_exit_2_saying_what_to_fix(argv, says, capsys):
    with pytest.raises(SystemExit) as e:
        anchor.parse_args(argv)
    assert e.value.code == 2
    assert says in capsys.readouterr().err


def test_defaults_are_the_issues_run():
    args = anchor.parse_args([])
    assert args.cases == ["gemm-1024", "C2"] and args.trials == 64
    assert args.threads == anchor.Target("llvm").num_cores
    assert anchor.MS_TRIALS_PER_ROUND == 32


def test_missing_tvm_is_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tvm", None)        # import tvm raises ImportError
    monkeypatch.setenv("TVM_NUM_THREADS", "unset")       # main sets it; restored after
    monkeypatch.setattr(anchor.search_alone, "tune", lambda *a, **k: pytest.fail("tuned"))
    assert anchor.main(["--cases", "gemm-32", "--trials", "1"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("TVM is not importable here")
    assert "apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1" in lines[0]
    assert "/" not in lines[0]                            # no machine path


def test_a_tvm_without_s_tir_meta_schedule_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "tvm", SimpleNamespace(__version__="0.19.0"))
    monkeypatch.setitem(sys.modules, "tvm.s_tir", None)
    tvm, line = anchor.import_tvm()
    assert tvm is None
    assert line.startswith("TVM 0.19.0 has no tvm.s_tir.meta_schedule (this script is "
                           "written for 0.27): run this script in a virtual environment")


def test_table_from_fake_numbers_passes_and_fails_the_targets():
    ours = {"wall_secs": 40.0, "trials": 64}
    ms_run = {"wall_secs": 300.0, "trials": 64}
    rows = [_row("ours", 360.0), _row("metaschedule", 100.0), _row("numpy", 50.0)]
    text = anchor.format_case("gemm-1024", "rocketlake", 2, 11, rows, ours, ms_run)
    lines = text.splitlines()
    assert lines[0] == "gemm-1024 on rocketlake, 2 threads: medians of 11 interleaved rounds"
    assert lines[2].split() == ["ours", "(alone)", "360.0", "40.0", "64", "1e-05"]
    assert lines[3].split() == ["MetaSchedule", "100.0", "300.0", "64", "1e-05"]
    assert lines[4].split() == ["numpy", "50.0", "-", "-", "1e-05"]
    assert len({len(x) for x in lines[1:5]}) == 1          # the columns line up
    assert lines[5] == ("  ours / MetaSchedule: speed 3.600x (target >= 3x: PASS), tuning "
                        "wall time 0.133 (target <= 0.20: PASS)")
    slow = [_row("ours", 290.0), _row("metaschedule", 100.0)]
    s = anchor.summary(slow, {"wall_secs": 61.0}, ms_run)
    assert (s["speed"], s["wall"]) == ("FAIL", "FAIL")
    assert s["speed_ratio"] == pytest.approx(2.9) and s["wall_ratio"] == pytest.approx(61 / 300)


def test_table_says_why_a_row_has_no_figure():
    rows = [_row("ours", 200.0),
            _row("metaschedule", None, err=None, error="conv: max abs error 3.0", kind="wrong"),
            _row("numpy", None, err=None, note="skipped")]
    text = anchor.format_case("C2", "haswell", 1, 3, rows, {"wall_secs": 9.0, "trials": 8},
                              {"wall_secs": 90.0, "trials": 8})
    assert "1 thread:" in text
    assert "wrong: conv: max abs error 3.0" in text and "skipped" in text
    assert text.splitlines()[-1] == ("  ours / MetaSchedule: speed -x (target >= 3x: n/a), "
                                     "tuning wall time 0.100 (target <= 0.20: PASS)")


@pytest.mark.parametrize("case", ["gemm-48", "C2"])
def test_tvm_te_definitions_match_numpy(case):
    """In a venv with TVM only: the unscheduled tvm.te operator, built and timed as the
    final timing does, gives numpy's result on our inputs."""
    tvm = pytest.importorskip("tvm")
    wl = anchor.case_workload(case)
    mod = tvm.IRModule({"main": anchor.tvm_prim_func(tvm, wl)})
    target = anchor.ms_target(tvm, anchor.Target("llvm"), 1)
    cfg = anchor.bench.RunConfig(min_repeat_secs=0.001)
    r = anchor.TVMKernel(tvm, tvm.compile(mod, target=target), wl, cfg)()
    assert r.ok, r.error
    assert r.max_abs_error < 1e-3 and r.run_secs[0] > 0


def test_a_metaschedule_failure_is_a_row_not_a_crash(monkeypatch):
    """tune_tir raising (a TVM error) leaves an error for the table; the run goes on."""
    def tune_tir(*a, **k):
        raise RuntimeError("InternalError: boom")
    fake_tvm = SimpleNamespace(IRModule=dict)
    monkeypatch.setattr(anchor, "tvm_prim_func", lambda tvm, wl: "func")
    out = anchor.tune_metaschedule(fake_tvm, SimpleNamespace(tune_tir=tune_tir),
                                   ops.gemm(8, 8, 8), "target", 4, 42)
    assert out["error"] == "MetaSchedule failed: RuntimeError: InternalError: boom"
    assert out["executable"] is None and out["wall_secs"] is None and out["trials"] == 0
    rows = [_row("ours", 10.0), _row("metaschedule", None, err=None, note=out["error"])]
    text = anchor.format_case("gemm-8", "haswell", 2, 3, rows, {"wall_secs": 1.0, "trials": 4},
                              out)
    assert "MetaSchedule failed: RuntimeError" in text
    assert text.endswith("speed -x (target >= 3x: n/a), tuning wall time - (target <= 0.20: n/a)")
