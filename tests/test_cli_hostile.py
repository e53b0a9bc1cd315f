"""Hostile command lines (issue 13): each bad one exits non-zero with one clear line on
stderr, no traceback, and creates nothing; the few good ones do what they say.

The table runs in-process through ``cli.main`` (argparse exits are caught); a few
cases also run as real subprocesses, through ``python -m explorer.cli`` and the
installed console script. Nothing here tunes more than two trials of a 4x4 workload.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from explorer import cli
from explorer.cli import common

HUGE = "1000000,1000000,1"   # gemm A is 4 TB: more memory than any machine here
OVERFLOW = "4000000000000,4000000000000,1"   # 1.6e25 elements: past 64-bit indices

# (argv, exit status, a piece of the one error line). {tmp}, {file}, {db}, {junk},
# {empty}, {weird}, {suite_*} are paths set up by the ``place`` fixture.
BAD = [
    # --db / --json that cannot be written: refused before any tuning
    (["tune", "--db", "{file}"], 2, "is a file, not a directory"),
    (["tune", "--db", "{file}/db"], 2, "is a file, so no directory can be made"),
    (["tune", "--db", "/proc/explorer-db"], 2, "cannot write in /proc"),
    (["tune", "--db", "{weird}"], 2, "records.jsonl is not a regular file"),
    (["tune", "--json", "{tmp}"], 2, "is a directory; give a file name"),
    (["tune", "--json", "{file}/out.json"], 2, "does not exist"),
    (["tune", "--json", "{tmp}/no/such/dir/out.json"], 2, "does not exist"),
    (["tune", "--json", "/proc/explorer.json"], 2, "cannot write in /proc"),
    # --target
    (["tune", "--target", "llvm -num-cores=abc"], 2, "-num-cores='abc' must be a whole number"),
    (["tune", "--target", "llvm -num-cores=0"], 2, "from 1 to 1024"),
    (["tune", "--target", "llvm -num-cores=-4"], 2, "from 1 to 1024"),
    (["tune", "--target", "llvm -num-cores=99999999999999999999"], 2, "from 1 to 1024"),
    (["tune", "--target", "llvm -num-cores=2 -num-cores=0"], 2, "-num-cores='0' must be"),
    (["tune", "--target", "llvm -frobnicate=1"], 2, "unknown target option '-frobnicate'"),
    (["tune", "--target", "llvm mcpu"], 2, "must look like -name=value"),
    (["tune", "--target", "llvm -mcpu="], 2, "is not a CPU name"),
    (["tune", "--target", "llvm -features=avx2"], 2, "+feature or -feature"),
    (["tune", "--target", "llvm -vector-bits=100"], 2, "must be a power of two"),
    (["tune", "--target", "llvm -l2-bytes=0"], 2, "-l2-bytes='0' must be a whole number"),
    (["tune", "--target", "llvm -mcpu=bogus"], 2, "does not know the CPU -mcpu=bogus"),
    (["tune", "--target", "llvm -features=+bogus"], 2, "cannot use -features=+bogus"),
    (["tune", "--target", "tpu"], 2, "unknown target 'tpu'"),
    (["tune", "--target", ""], 2, "unknown target ''"),
    # --shape, for every operator
    (["tune", "--shape", ""], 2, "--shape '' has an empty value"),
    (["tune", "--shape", ","], 2, "has an empty value"),
    (["tune", "--shape", "64,,64"], 2, "has an empty value"),
    (["tune", "--shape", "1.5,64,64"], 2, "M='1.5' is not a whole number"),
    (["tune", "--shape", "abc"], 2, "gives 1 value: gemm takes 3"),
    (["tune", "--shape", "64,64"], 2, "gives 2 values: gemm takes 3"),
    (["tune", "--shape", "64,64,64,64"], 2, "gives 4 values"),
    (["tune", "--shape", "-1,64,64"], 2, "M=-1 must be a positive int"),
    (["tune", "--shape", HUGE], 2, "of memory to be measured"),
    (["tune", "--shape", OVERFLOW], 2, "overflows the 64-bit index type"),
    (["tune", "--op", "conv2d", "--shape", "1,3,2,2,4,5,5"], 2, "the kernel spans 5"),
    (["tune", "--op", "conv2d", "--shape", "1,3,8,8"], 2, "conv2d takes 7"),
    (["tune", "--op", "softmax", "--shape", "4,x"], 2, "N='x' is not a whole number"),
    # other arguments
    (["tune", "--op", "nope"], 2, "--op: unknown operator 'nope'; use one of"),
    (["tune", "--op", ""], 2, "--op: unknown operator ''"),
    (["tune", "--op", "gemm", "--suite", "mlp"], 2, "not allowed with argument"),
    (["tune", "--suite", "nope"], 2, "unknown suite 'nope'"),
    (["tune", "--suite", "{suite_bad}"], 2, "is malformed"),
    (["tune", "--suite", "{suite_utf}"], 2, "cannot be read"),
    (["tune", "--suite", "{suite_deep}"], 2, "cannot be read"),
    (["tune", "--suite", "{suite_dir}"], 2, "suite_dir.json"),
    (["tune", "--suite", "{suite_empty}"], 2, "has no tasks"),
    (["tune", "--suite", "{suite_huge}"], 2, "of memory to be measured"),
    (["tune", "--suite", "mlp", "--shape", "4,4"], 2, "apply to --op, not to --suite"),
    (["tune", "--trials", "0"], 2, "--trials 0 is out of range"),
    (["tune", "--trials", "-1"], 2, "--trials -1 is out of range"),
    (["tune", "--trials", "1000000000"], 2, "--trials 1000000000 is out of range"),
    (["tune", "--trials", "abc"], 2, "invalid int value: 'abc'"),
    (["tune", "--trials", "1.5"], 2, "invalid int value: '1.5'"),
    (["tune", "--seed", "-1"], 2, "--seed -1 is out of range"),
    (["tune", "--seed", "x"], 2, "argument --seed: invalid int value"),
    (["tune", "--seed", str(2 ** 40)], 2, "is out of range"),
    (["tune", "--batch-size", "0"], 2, "--batch-size 0 is out of range"),
    (["tune", "--retime", "-1"], 2, "--retime -1 is out of range"),
    (["tune", "--strategy", "magic"], 2, "invalid choice: 'magic'"),
    (["tune", "--op", "conv2d", "--param", "padding=-1"], 2, "padding=-1 must be an int >= 0"),
    (["tune", "--op", "conv2d", "--param", "stride=0"], 2, "stride=0 must be an int >= 1"),
    (["tune", "--op", "conv2d", "--param", "bogus=1"], 2, "conv2d has no parameter bogus"),
    (["tune", "--op", "conv2d", "--param", "layout=XYZ"], 2, "unknown layout 'XYZ'"),
    (["tune", "--param", "transpose_a=maybe"], 2, "must be True or False"),
    (["tune", "--param", "dtype=float7"], 2, "dtype 'float7' is not supported"),
    (["tune", "--param", "stride"], 2, "must look like NAME=VALUE"),
    (["tune", "--param", "=5"], 2, "must look like NAME=VALUE"),
    (["tune", "--shape", "4,4,4", "--param", "M=8"], 2, "given both in the shape"),
    (["tune", "--op", "conv2d", "--param", "padding=1", "--param", "padding=2"], 2,
     "given twice"),
    (["tune", "--frobnicate"], 2, "unrecognized arguments: --frobnicate"),
    # show
    (["show", "--db", "{tmp}/missing"], 2, "no such directory; tune first"),
    (["show", "--db", "{file}"], 2, "is a file, not a database directory"),
    (["show", "--db", "{empty}"], 2, "not a tuning database"),
    (["show", "--db", "{junk}"], 2, "not a tuning database"),
    (["show", "--db", "{weird}"], 2, "records.jsonl is not a regular file"),
    (["show", "--db", "{db_ok}", "--target", "llvm -num-cores=0"], 2, "from 1 to 1024"),
    # bench
    (["bench", "--cases", "nope"], 2, "unknown bench case 'nope'"),
    (["bench", "--cases", "gemm:0,4,4"], 2, "M=0 must be a positive int"),
    (["bench", "--cases", "gemm:" + HUGE], 2, "of memory to be measured"),
    (["bench", "--cases", ","], 2, "--cases names no case"),
    (["bench", "--repeats", "0"], 2, "--repeats must be at least 1"),
    (["bench", "--repeats", "-3"], 2, "--repeats must be at least 1"),
    (["bench", "--repeats", "100000"], 2, "at most 1000"),
    (["bench", "--repeats", "two"], 2, "invalid int value: 'two'"),
    (["bench", "--threads", "100000"], 2, "at most 1024"),
    (["bench", "--target", "llvm -mcpu=bogus"], 2, "does not know the CPU"),
    (["bench", "--json", "{tmp}"], 2, "is a directory; give a file name"),
    (["bench", "--db", "{junk}"], 2, "not a tuning database"),
    # demo, and the top level
    (["demo", "--size", "0"], 2, "--size 0 must be at least 1"),
    (["demo", "--size", "-5"], 2, "--size -5 must be at least 1"),
    (["demo", "--size", "ten"], 2, "invalid int value: 'ten'"),
    (["demo", "--size", "10000000"], 2, "of memory to be measured"),
    (["demo", "--target", "llvm -num-cores=x"], 2, "must be a whole number"),
    (["frobnicate"], 2, "invalid choice: 'frobnicate'"),
    (["--frobnicate"], 2, "unrecognized arguments: --frobnicate"),
    ([], 2, "no command given"),
]

# keep a tune that a regression lets through tiny
SAFE_TUNE = {"--trials": "2", "--batch-size": "2", "--retime": "0", "--db": "{db}"}


@pytest.fixture
def place(tmp_path):
    """Paths the table names, all under tmp_path."""
    p = {"tmp": tmp_path, "file": tmp_path / "file.txt", "db": tmp_path / "db",
         "junk": tmp_path / "junk", "empty": tmp_path / "empty", "weird": tmp_path / "weird",
         "db_ok": tmp_path / "db_ok"}
    p["file"].write_text("not a directory\n")
    p["junk"].mkdir()
    (p["junk"] / "notes.txt").write_text("hello\n")
    p["empty"].mkdir()
    (p["weird"] / "records.jsonl").mkdir(parents=True)
    p["db_ok"].mkdir()
    (p["db_ok"] / "workloads.jsonl").write_text("")
    suites = {"suite_bad": b"{not json", "suite_utf": b"\xff\xfe\x00{",
              "suite_deep": b"[" * 200000 + b"]" * 200000,
              "suite_empty": b'{"tasks": []}',
              "suite_huge": json.dumps({"tasks": [{"op": "gemm", "params": {
                  "M": 1000000, "N": 1000000, "K": 1}}]}).encode()}
    for name, data in suites.items():
        p[name] = tmp_path / f"{name}.json"
        p[name].write_bytes(data)
    p["suite_dir"] = tmp_path / "suite_dir.json"
    p["suite_dir"].mkdir()
    return p


def _argv(argv, place) -> list:
    out = [a.format(**place) for a in argv]
    if out[:1] == ["tune"]:
        for opt, val in SAFE_TUNE.items():
            if opt not in out:
                out += [opt, val.format(**place)]
        out += ["--no-numpy", "--quiet"]
    return out


def _snapshot(root) -> set:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def run_main(argv, capsys) -> tuple:
    """(exit status, stdout, stderr) of ``cli.main(argv)``, argparse exits included."""
    try:
        code = cli.main(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_clear_line(err: str, message: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and lines[0].startswith("explorer")
    assert message in lines[0], lines[0]


@pytest.mark.parametrize("argv, status, message", BAD,
                         ids=[" ".join(a)[:60] or "(nothing)" for a, _, _ in BAD])
def test_bad_command_line_fails_with_one_clear_line(argv, status, message, place, capsys):
    before = _snapshot(place["tmp"])
    code, _, err = run_main(_argv(argv, place), capsys)
    assert code == status, err
    assert_one_clear_line(err, message)
    assert _snapshot(place["tmp"]) == before, "a refused command created files"


def test_the_table_is_long_enough():
    assert len(BAD) >= 50


def test_json_that_cannot_be_written_is_refused_before_tuning(place, capsys):
    """Before the fix, a million trials ran first and the write failed after them."""
    argv = ["tune", "--op", "row_sum", "--shape", "4,4", "--trials", "1000000",
            "--json", "/proc/x.json", "--db", str(place["db"]), "--quiet"]
    code, _, err = run_main(argv, capsys)
    assert code == 2 and "--json /proc/x.json" in err and not place["db"].exists()


def test_a_tiny_tune_then_show_succeed_and_mean_what_they_say(place, capsys):
    db, out_json = place["db"], place["tmp"] / "r.json"
    code, out, err = run_main(["tune", "--op", "row_sum", "--shape", "4,4", "--trials", "2",
                               "--batch-size", "2", "--retime", "0", "--strategy", "replay",
                               "--cost-model", "random", "--no-numpy", "--quiet", "--db",
                               str(db), "--json", str(out_json)], capsys)
    assert code == 0, err
    assert "row_sum(M=4,N=4" in out and err == ""
    result = json.loads(out_json.read_text())
    assert result["trials"] == 2 and result["workload"]["key"].startswith("row_sum(M=4,N=4")
    code, out, err = run_main(["show", "--db", str(db), "--target", "llvm"], capsys)
    assert code == 0 and "row_sum(M=4,N=4" in out and err == ""
    code, out, _ = run_main(["show", "--db", str(db), "--target", "interp"], capsys)
    assert code == 0 and "no records for target interp; targets here: llvm" in out


def test_show_on_a_database_without_records_says_so(place, capsys):
    code, out, err = run_main(["show", "--db", str(place["db_ok"])], capsys)
    assert code == 0 and out.strip() == f"{place['db_ok']}: no records" and err == ""


def test_every_candidate_failing_says_why(place, capsys):
    """A run where nothing builds ends with one line naming the error, not silently."""
    from explorer import Schedule, ops
    from explorer.target import as_target
    from explorer.database import Database, TuningRecord
    wl = ops.get("row_sum", 4, 4)
    db = Database(place["db"])
    db.commit_workload(wl)
    for trial, factor in enumerate((2, 4)):
        sch = Schedule(wl)
        sch.split(sch.get_loops(sch.get_block("B"))[0], [None, factor])
        db.commit_record(TuningRecord(wl.key, str(as_target("llvm")), sch.trace.as_json(),
                                      None, error="build_crash: LLVM ERROR: bad cpu",
                                      trial=trial))
    code, _, err = run_main(["tune", "--op", "row_sum", "--shape", "4,4", "--trials", "2",
                             "--no-numpy", "--quiet", "--retime", "0", "--db",
                             str(place["db"])], capsys)
    assert code == 1
    assert_one_clear_line(err, "no candidate of row_sum(M=4,N=4")
    assert "2 with: build_crash: LLVM ERROR: bad cpu" in err


@pytest.mark.parametrize("value, parsed", [
    ("1", 1), ("1,2", (1, 2)), ("true", True), ("False", False), ("NHWC", "NHWC"),
    ("0.5", 0.5)])
def test_param_values_are_parsed_as_they_read(value, parsed):
    from explorer.cli.workload_text import param_value
    assert param_value(value) == parsed


def test_shape_values_may_be_spaced_and_params_may_be_pairs():
    from argparse import Namespace

    from explorer.cli.tune import workload_from_args
    wl = workload_from_args(Namespace(op="conv2d", shape=" 1, 3, 8, 8, 4, 3, 3 ",
                                      param=["padding=1,0"]))
    assert dict(wl.params)["padding"] == (1, 0) and dict(wl.params)["H"] == 8
    wl = workload_from_args(Namespace(op="gemm", shape=None, param=["transpose_a=true"]))
    assert dict(wl.params)["transpose_a"] is True and dict(wl.params)["M"] == 1024


def test_a_cpu_llvm_knows_is_accepted():
    from explorer.target import Target, check_cpu
    check_cpu(Target("llvm -mcpu=x86-64" if "x86" in os.uname().machine else "llvm"))


def test_writability_checks_create_nothing(tmp_path):
    common.check_writable_dir(tmp_path / "a" / "b" / "c")
    common.check_writable_file(tmp_path / "out.json")
    assert list(tmp_path.iterdir()) == []


def _subprocess(*argv, exe=None):
    cmd = [exe] if exe else [sys.executable, "-m", "explorer.cli"]
    return subprocess.run(cmd + list(argv), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("argv, message", [
    (["tune", "--target", "llvm -num-cores=abc"], "must be a whole number"),
    (["tune", "--shape", ""], "has an empty value"),
    (["show", "--db", "/nonexistent/explorer-db"], "no such directory"),
    (["frobnicate"], "invalid choice"),
])
def test_real_subprocess_exits_2_with_one_line(argv, message, tmp_path):
    proc = _subprocess(*argv, "--db", str(tmp_path / "db")) if argv[0] == "tune" \
        else _subprocess(*argv)
    assert proc.returncode == 2
    assert_one_clear_line(proc.stderr, message)
    assert not (tmp_path / "db").exists()


def test_console_script_gives_the_same_one_line(tmp_path):
    exe = shutil.which("explorer")
    if exe is None:
        pytest.skip("the package is not installed (pip install -e .)")
    proc = subprocess.run([exe, "tune", "--target", "llvm -mcpu=bogus"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and list(tmp_path.iterdir()) == []
    assert_one_clear_line(proc.stderr, "does not know the CPU -mcpu=bogus")
    from explorer.target import host     # the host as described (EXPLORER_HOST_ISA)
    assert repr(host.host_cpu()[0]) in proc.stderr


def test_demo_prints_numpy_timed_in_a_worker_without_openblas_overrides(capsys, monkeypatch):
    """The numpy figure comes from measure_baseline (its worker unsets OPENBLAS_CORETYPE and
    OPENBLAS_L2_SIZE), not from timing numpy in this process."""
    from explorer.measure import baselines
    asked = []

    def fake(impl, wl, *a, **k):
        asked.append((impl, wl.key))
        return wl.flops / 7e9
    monkeypatch.setattr(baselines, "measure_baseline", fake)
    assert set(baselines.UNSET_FOR_NUMPY) == {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"}
    code, out, err = run_main(["demo", "--size", "16", "--target", "interp"], capsys)
    assert code == 0, err
    from explorer import ops
    assert asked == [("numpy", ops.get("gemm", 16, 16, 16).key)]
    assert "numpy 7.00 GFLOP/s" in out
