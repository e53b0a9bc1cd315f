"""``explorer bench``: case names, library baselines, and a tiny end-to-end run with JSON."""
import importlib.util
import json

import pytest

from explorer import ops
from explorer.cli import bench
from explorer.errors import ExplorerError
from explorer.measure import Reference
from explorer.measure.baselines import numpy_impl, torch_impl

HAS_TORCH = importlib.util.find_spec("torch") is not None


TARGET = "llvm"     # llvmlite is a dependency: a backend that does not build fails here



def test_default_cases_are_the_issue_set():
    names = [c.name for c in bench.resolve_cases(["default"])]
    assert names == ["gemm-1024", "gemm-2048", "batch_matmul", "conv-C2", "conv-C6", "conv-C9",
                     "conv-C12"]
    c6 = bench.CASES["conv-C6"].workload()
    assert c6.key == ops.resnet18_conv("C6").key
    assert bench.CASES["batch_matmul"].workload().key == ops.batch_matmul(16, 128, 128, 64).key


def test_cases_mix_names_groups_and_op_shapes():
    specs = bench.split_cases("gemm-1024,gemm:64,32,16,conv2d:1,4,6,6,4,3,3,tiny")
    assert specs == ["gemm-1024", "gemm:64,32,16", "conv2d:1,4,6,6,4,3,3", "tiny"]
    cases = bench.resolve_cases(specs + ["gemm-1024"])
    assert [c.name for c in cases][:3] == specs[:3]
    assert len(cases) == 3 + len(bench.GROUPS["tiny"])
    assert cases[1].workload().key == ops.gemm(64, 32, 16).key
    assert dict(cases[2].params)["padding"] == 1  # same-size conv by default


@pytest.mark.parametrize("spec, message", [
    ("gemm-4096", "unknown bench case 'gemm-4096': use a case"),
    ("matmul:4,4,4", "unknown operator 'matmul'"),
    ("gemm:4,4", "case 'gemm:4,4' gives 2 values: gemm takes 3 shape values (M, N, K), e.g. "
                 "gemm:512,512,512"),
    ("gemm:4,x,4", "case 'gemm:4,x,4': N='x' is not a whole number"),
    ("gemm:", "case 'gemm:' has an empty value"),
    ("gemm:0,4,4", "M=0 must be a positive int"),
])
def test_bad_cases_say_what_to_fix(spec, message):
    with pytest.raises(ExplorerError) as e:
        bench.resolve_cases(bench.split_cases(spec))
    assert message in str(e.value)


def test_naive_policy_skips_what_would_take_minutes():
    assert bench.naive_policy(ops.resnet18_conv("C6").flops, quick=False) == "full"
    assert bench.naive_policy(ops.gemm(1024, 1024, 1024).flops, quick=False) == "single"
    assert bench.naive_policy(ops.gemm(2048, 2048, 2048).flops, quick=False) == "skip"
    assert bench.naive_policy(ops.gemm(1024, 1024, 1024).flops, quick=True) == "skip"


BASELINE_CASES = [ops.gemm(8, 12, 10), ops.gemm(8, 12, 10, transpose_a=True, transpose_b=True),
                  ops.batch_matmul(2, 6, 8, 5), ops.conv2d(1, 3, 7, 6, 4, 3, 3, padding=1),
                  ops.conv2d(2, 3, 9, 8, 4, 3, 2, stride=(2, 1), padding=(1, 0),
                             dilation=(1, 2)),
                  ops.conv2d(1, 3, 7, 6, 4, 3, 3, stride=2, padding=1, layout="NHWC"),
                  ops.dense_bias_relu(6, 8, 10)]


@pytest.mark.parametrize("wl", BASELINE_CASES, ids=lambda wl: wl.key)
@pytest.mark.parametrize("impl", ["numpy", "torch"])
def test_baselines_compute_the_reference(wl, impl):
    if impl == "torch" and not HAS_TORCH:
        pytest.skip("PyTorch is not installed")
    ref = Reference(wl, seed=2)
    args = ref.fresh_args()
    call = (numpy_impl if impl == "numpy" else torch_impl)(wl.name, dict(wl.params), args)
    if call is None:
        assert impl == "torch" and dict(wl.params).get("layout") == "NHWC"
        return
    call()
    assert ref.compare(args) < 1e-4


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "bench.json"
    from explorer.cli import main
    rc = main(["bench", "--quick", "--cases", "gemm:32,32,16", "conv2d:1,4,6,6,4,3,3",
               "--repeats", "2", "--target", TARGET, "--json", str(path)])
    assert rc == 0
    return json.loads(path.read_text())


def test_tiny_bench_writes_the_documented_json(tiny_report):
    r = tiny_report
    for field in ("version", "created", "target", "threads", "rounds", "min_repeat_secs",
                  "quick", "machine", "versions", "baselines", "expert", "cases", "scaling",
                  "build_time", "notes"):
        assert field in r, field
    assert r["rounds"] == 2 and r["quick"] is True
    assert [c["case"] for c in r["cases"]] == ["gemm:32,32,16", "conv2d:1,4,6,6,4,3,3"]
    env = r["baselines"]["numpy"]["env"]
    assert env["OPENBLAS_CORETYPE"] is None and env["OPENBLAS_L2_SIZE"] is None
    assert r["baselines"]["numpy"]["blas"]["source"] in ("threadpoolctl", "numpy.show_config")
    if TARGET == "llvm":
        assert r["build_time"]["median_secs"] > 0 and r["build_time"]["case"] == "gemm-512"


def test_tiny_bench_rows_are_checked_and_timed(tiny_report):
    impls = ["naive", "expert", "numpy"] + (["torch"] if HAS_TORCH else [])
    for case in tiny_report["cases"]:
        rows = {row["impl"]: row for row in case["rows"]}
        assert list(rows) == impls
        for row in rows.values():
            assert row["error"] is None, row["error"]
            assert row["max_abs_error"] is not None and row["max_abs_error"] < 1e-4
            assert row["min_secs"] <= row["median_secs"] <= row["max_secs"]
            assert len(row["samples"]) == 2
            assert row["gflops"] == pytest.approx(case["flops"] / row["median_secs"] / 1e9)
        expert, numpy_row = rows["expert"], rows["numpy"]
        assert expert["ratio_numpy"] == pytest.approx(numpy_row["median_secs"] /
                                                      expert["median_secs"])
        assert numpy_row["ratio_numpy"] is None


def test_table_shows_every_row_and_the_extras(tiny_report):
    text = bench.format_table(tiny_report)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["case", "impl", "median"]
    assert sum(1 for line in lines if " expert " in line) == 2
    assert ("build time gemm-512" in text) == (TARGET == "llvm")
    if tiny_report["scaling"]:
        assert "scaling gemm:32,32,16" in text


def test_expert_rows_and_thread_scaling_with_an_expert_schedule(monkeypatch):
    from explorer import Schedule

    def fake_expert(wl, target):
        sch = Schedule(wl)
        i, j, k = sch.get_loops(sch.get_block("C"))
        io, ii = sch.split(i, [None, 4])
        jo, ji = sch.split(j, [None, 16])
        sch.reorder(io, jo, k, ii, ji)
        sch.parallel(io)
        return sch, ""
    monkeypatch.setattr(bench, "expert_schedule_for", fake_expert)
    b = bench.Bench("llvm", threads=2, rounds=2, quick=True, torch=False, log=lambda m: None)
    try:
        cases = bench.resolve_cases(["gemm:32,64,16"])
        case = b.run_case(cases[0])
        scaling = b.scaling(cases)
    finally:
        b.close()
    rows = {r["impl"]: r for r in case["rows"]}
    assert rows["expert"]["note"] == "" and rows["expert"]["error"] is None
    assert rows["expert"]["samples"] != rows["naive"]["samples"]
    assert rows["expert"]["max_abs_error"] < 1e-4
    assert scaling["case"] == "gemm:32,64,16" and scaling["threads"] == [1, 2]
    assert scaling["error"] is None and scaling["speedup"] > 0
    assert set(scaling["median_secs"]) == {"1", "2"}


def test_bench_db_adds_the_tuned_row_from_the_best_record(tmp_path):
    from explorer import Target
    from explorer.database import Database
    from explorer.tune import Tuner
    wl = ops.gemm(32, 48, 16)
    target = Target("llvm -num-cores=2")
    Tuner(wl, target, trials=6, batch_size=3, database=str(tmp_path), seed=0).run()
    db = Database(str(tmp_path))
    best = db.best(wl, target)[0]
    b = bench.Bench("llvm", threads=2, rounds=2, quick=True, torch=False, log=lambda m: None,
                    db=db)
    try:
        case = b.run_case(bench.resolve_cases(["gemm:32,48,16"])[0])
        missing = b.run_case(bench.resolve_cases(["gemm:16,16,16"])[0])
    finally:
        b.close()
    rows = {r["impl"]: r for r in case["rows"]}
    tuned = rows["tuned"]
    assert tuned["error"] is None and tuned["max_abs_error"] < 1e-4
    assert tuned["note"] == f"best of {len(db.records(wl, target))} records"
    assert len(tuned["samples"]) == 2 and best.seconds > 0
    gone = {r["impl"]: r for r in missing["rows"]}["tuned"]
    assert gone["median_secs"] is None and "run explorer tune with --db first" in gone["note"]


def _tuned_row(db_dir, case: str, threads: int) -> dict:
    """The tuned row of ``case`` benched on ``threads`` threads from the database in
    ``db_dir``."""
    from explorer.database import Database
    b = bench.Bench("llvm", threads=threads, rounds=1, quick=True, torch=False,
                    log=lambda m: None, db=Database(str(db_dir)))
    try:
        got = b.run_case(bench.resolve_cases([case])[0])
    finally:
        b.close()
    return {r["impl"]: r for r in got["rows"]}["tuned"]


def test_bench_db_tuned_on_other_threads_names_the_target_it_holds(tmp_path):
    """``explorer bench --threads 1`` on a database tuned with 2 threads said only "run
    explorer tune with --db first", though the database held the records."""
    from explorer import Target
    from explorer.tune import Tuner
    wl = ops.gemm(16, 16, 8)
    target = Target("llvm -num-cores=2")
    Tuner(wl, target, trials=2, batch_size=2, database=str(tmp_path), seed=0,
          retime_top=0).run()
    tuned = _tuned_row(tmp_path, "gemm:16,16,8", threads=1)
    assert tuned["median_secs"] is None
    assert f"it holds records tuned for {target}" in tuned["note"]
    assert "time it with the same --threads" in tuned["note"]


def test_bench_db_that_does_not_exist_is_a_usage_error(tmp_path, capsys):
    from explorer.cli import main
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--quick", "--cases", "gemm:8,8,8", "--db", str(tmp_path / "nope")])
    assert exc.value.code == 2
    assert "no such directory; tune first" in capsys.readouterr().err


def test_bench_db_record_that_does_not_replay_is_a_note_not_a_crash(tmp_path):
    from explorer import Target
    from explorer.tune import Tuner
    wl = ops.gemm(16, 32, 8)
    Tuner(wl, Target("llvm -num-cores=2"), trials=2, batch_size=2, database=str(tmp_path),
          seed=0, retime_top=0).run()
    records = tmp_path / "records.jsonl"
    text = records.read_text()
    assert '"get_block",["C"]' in text
    records.write_text(text.replace('"get_block",["C"]', '"get_block",["Z"]'))
    tuned = _tuned_row(tmp_path, "gemm:16,32,8", threads=2)
    assert tuned["median_secs"] is None and "does not replay" in tuned["note"]
    assert "re-tune into a fresh --db" in tuned["note"]
