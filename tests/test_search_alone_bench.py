"""``benchmarks/search_alone.py``: several seeds per case, each seed's alone / seeded and
their median, the arguments it refuses, and one small run end to end whose kernels are
checked against numpy by the final timing."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import search_alone  # noqa: E402
from explorer import ops  # noqa: E402


def _row(impl, gflops):
    return {"impl": impl, "gflops": gflops, "median_secs": 1 / gflops if gflops else None,
            "max_abs_error": 0.0, "error": None, "error_kind": None, "note": ""}


def test_labels_name_the_seed_only_when_there_are_several():
    assert search_alone.run_label("alone", 3, [3]) == "alone"
    assert search_alone.run_label("seeded", 3, [0, 3]) == "seeded s3"


def test_the_summary_gives_each_seeds_ratio_and_their_median():
    rows = [_row("seeded s0", 100.0), _row("alone s0", 80.0),
            _row("seeded s1", 200.0), _row("alone s1", 190.0),
            _row("seeded s2", 150.0), _row("alone s2", 165.0),
            _row("numpy", 120.0)]
    sm = search_alone.seed_summary(rows, [0, 1, 2])
    assert sm["ratios"] == pytest.approx({0: 0.8, 1: 0.95, 2: 1.1})
    assert sm["median_ratio"] == pytest.approx(0.95)
    assert sm["median_alone_over_median_seeded"] == pytest.approx(165.0 / 150.0)
    runs = {r["impl"]: {"wall_secs": 1.0} for r in rows if r["impl"] != "numpy"}
    text = search_alone.format_case("C6", runs, rows, [0, 1, 2])
    assert "alone / seeded per seed: s0 0.80, s1 0.95, s2 1.10" in text
    assert "median over 3 seeds: alone / seeded = 0.95 (target >= 0.90)" in text


def test_a_seed_without_a_timing_is_left_out_of_the_median_and_said():
    rows = [_row("seeded s0", 100.0), _row("alone s0", None),
            _row("seeded s1", 100.0), _row("alone s1", 90.0)]
    sm = search_alone.seed_summary(rows, [0, 1])
    assert sm["ratios"][0] is None and sm["median_ratio"] == pytest.approx(0.9)
    assert "s0 n/a, s1 0.90" in search_alone.format_case("gemm-8", {}, rows, [0, 1])


@pytest.mark.parametrize("argv, says", [
    (["--seeds", "0", "0"], "--seeds must be distinct integers >= 0, got 0 0"),
    (["--seeds", "-1"], "--seeds must be distinct integers >= 0"),
    (["--cases", "gemm-0"], "unknown case 'gemm-0': use gemm-N"),
    (["--trials", "0"], "--trials and --rounds must be at least 1"),
])
def test_bad_arguments_are_refused_with_what_to_fix(argv, says, capsys):
    with pytest.raises(SystemExit) as e:
        search_alone.main(argv)
    assert e.value.code == 2
    assert says in capsys.readouterr().err


def test_gemm_n_cases_are_square_gemms():
    assert search_alone.workload("gemm-48").key == ops.gemm(48, 48, 48).key


def test_two_seeds_end_to_end_time_every_run_correctly(tmp_path, capsys):
    out = tmp_path / "alone.json"
    assert search_alone.main(["--cases", "gemm-32", "--trials", "2", "--seeds", "0", "1",
                              "--rounds", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["seeds"] == [0, 1]
    case = report["cases"][0]
    labels = ["seeded s0", "alone s0", "seeded s1", "alone s1"]
    assert list(case["runs"]) == labels
    assert [case["runs"][k]["seed"] for k in labels] == [0, 0, 1, 1]
    rows = {r["impl"]: r for r in case["rows"]}
    for k in labels:                # each best kernel ran and matched numpy's gemm
        assert rows[k]["error"] is None and rows[k]["gflops"] > 0
        assert rows[k]["max_abs_error"] < 1e-3
    g = {k: rows[k]["gflops"] for k in labels}
    want = {0: g["alone s0"] / g["seeded s0"], 1: g["alone s1"] / g["seeded s1"]}
    got = {int(k): v for k, v in case["summary"]["ratios"].items()}
    assert got == pytest.approx(want)
    assert case["summary"]["median_ratio"] == pytest.approx(float(np.median(list(want.values()))))
    assert "median over 2 seeds" in capsys.readouterr().out
