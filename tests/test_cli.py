"""The ``explorer`` command line: help, subcommand table, and usage errors with exit 2."""
import json
import subprocess
import sys

import pytest

from explorer import cli


def run_cli(*argv):
    return subprocess.run([sys.executable, "-m", "explorer.cli", *argv], capture_output=True,
                          text=True, timeout=120)


def test_help_lists_the_subcommands(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "usage: explorer" in out and "bench" in out


def test_bench_help_documents_the_options(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for option in ("--cases", "--repeats", "--threads", "--quick", "--json", "--target"):
        assert option in out


def test_no_command_prints_help_and_exits_2(capsys):
    assert cli.main([]) == 2
    assert "usage: explorer" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["bench", "--cases", "gemm-9"], "unknown bench case 'gemm-9'"),
    (["bench", "--cases", "nosuchop:1,2"], "unknown operator 'nosuchop'"),
    (["bench", "--cases", "conv2d:1,2,3"], "conv2d takes 7 shape values"),
    (["bench", "--threads", "0"], "--threads must be at least 1"),
    (["bench", "--target", "tpu"], "unknown target 'tpu'"),
])
def test_usage_errors_exit_2_with_what_to_fix(capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "usage: explorer bench" in err and message in err


def test_unknown_subcommand_exits_2(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["frobnicate"])
    assert e.value.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_module_entry_point_maps_usage_errors_to_exit_2():
    proc = run_cli("bench", "--cases", "gemm:1")
    assert proc.returncode == 2
    assert "gemm takes 3 shape values" in proc.stderr and "Traceback" not in proc.stderr


def test_bench_list_names_cases_and_groups():
    proc = run_cli("bench", "--list")
    assert proc.returncode == 0
    assert "conv-C12" in proc.stdout and "default" in proc.stdout


def test_subcommand_table_has_room_for_more():
    assert set(cli.SUBCOMMANDS) >= {"bench"}
    for module, help_text in cli.SUBCOMMANDS.values():
        assert module.startswith("explorer.") and help_text


def test_console_script_runs_when_installed():
    import shutil
    exe = shutil.which("explorer")
    if exe is None:
        pytest.skip("the package is not installed (pip install -e .)")
    proc = subprocess.run([exe, "bench", "--cases", "gemm-9"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "unknown bench case 'gemm-9'" in proc.stderr


def test_progress_lines_say_when_the_fastest_are_timed_again():
    import io
    from explorer.events import (CandidateMeasured, NewBest, Retiming, TuningFinished,
                                 TuningStarted)
    from explorer.cli.tune import Progress
    out = io.StringIO()
    p = Progress(stream=out)
    p(TuningStarted("gemm", "llvm", 2, "evolutionary", 0))
    for t in range(2):
        p(CandidateMeasured("gemm", 0, t, {}, 1e-3, 2.0, None, None))
    p(NewBest("gemm", 1, 1e-3, 2.0, {}))
    p(Retiming("gemm", 2, 3))
    p(NewBest("gemm", 0, 1.2e-3, 1.5, {}))
    p(TuningFinished("gemm", 2, 2, 0, 1.2e-3, 1.5, 0.1))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("tuning gemm on llvm")
    assert "timing the 2 fastest again (3 interleaved rounds)" in lines[-2]
    assert "2/2 trials, best 1.5 GFLOP/s" in lines[-1]


def test_suite_progress_counts_every_tasks_trials_against_the_suite_budget():
    # each tuner of a suite counts its own trials from 0; the line counts the suite's
    import io
    from explorer.events import CandidateMeasured, NewBest, RoundStarted, TuningStarted
    from explorer.cli.tune import Progress
    out = io.StringIO()
    p = Progress(stream=out, suite_trials=12)
    for wl in ("C1", "C2"):
        p(TuningStarted(wl, "llvm", 12, "evolutionary", 0))
    for t in range(3):
        p(CandidateMeasured("C1", 0, t, {}, 1e-3, 2.0, None, None))
    p(NewBest("C1", 2, 1e-3, 2.0, {}))
    for t in range(2):
        p(CandidateMeasured("C2", 0, t, {}, 1e-3, 9.0, "build failed", None))
    p(RoundStarted("C2", 1, 4))
    line = out.getvalue().splitlines()[-1]
    assert "5/12 trials" in line and "last task 2 trials, best -" in line, line
    assert "2 failed" in line


def test_show_prints_the_best_per_workload_with_its_runs(tmp_path, capsys):
    from explorer import Schedule, Trace, build, ops
    from explorer.database import Database, TuningRecord
    wl = ops.get("gemm", 16, 16, 16)
    db = Database(tmp_path / "db")
    db.commit_workload(wl)
    traces = []
    for factor in (2, 4):
        sch = Schedule(wl)
        i, _, _ = sch.get_loops(sch.get_block("C"))
        sch.split(i, [None, factor])
        traces.append(sch.trace.as_json())
    lucky = TuningRecord(wl.key, "llvm", traces[0], (1e-4, 1e-4, 1e-4), trial=0)
    steady = TuningRecord(wl.key, "llvm", traces[1], (2e-4, 2e-4, 2e-4), trial=1)
    db.commit_record(lucky)
    db.commit_record(steady)
    db.commit_retime(lucky, [5e-4] * 6)
    db.commit_retime(steady, [2e-4] * 6)
    assert cli.main(["show", "--db", str(tmp_path / "db"), "--trace"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[-3:] == ["ms", "GFLOP/s", "runs"]
    row = out[1].split()
    assert row[-5:] == ["2", "0", "0.200", f"{wl.flops / 2e-4 / 1e9:.1f}", "9"]
    assert "split" in "\n".join(out[2:]) and "4" in "\n".join(out[2:])
    sch = Trace.from_json(traces[1]).apply_to(Schedule(wl))
    args = wl.make_args(0)
    build(sch, "interp")(*args)
    wl.check(args)
    with pytest.raises(SystemExit) as e:
        cli.main(["show", "--db", str(tmp_path / "missing")])
    assert e.value.code == 2 and not (tmp_path / "missing").exists()


def test_tune_refused_before_the_database_is_created(tmp_path, capsys):
    """A target that cannot be built here, or a bad shape, is refused with a message
    naming the fix, and leaves no database directory behind."""
    db = tmp_path / "db"
    assert cli.main(["tune", "--target", "cuda", "--db", str(db)]) == 1
    assert "pycuda" in capsys.readouterr().err and not db.exists()    # no GPU here
    with pytest.raises(SystemExit) as e:
        cli.main(["tune", "--shape", "64,64", "--db", str(db)])
    assert e.value.code == 2 and not db.exists()
    assert "shape" in capsys.readouterr().err


def _tiny_tune(db, trials: int, what=("--op", "row_sum", "--shape", "4,4")) -> list:
    return ["tune", *what, "--trials", str(trials), "--batch-size", "2", "--retime", "0",
            "--strategy", "replay", "--cost-model", "random", "--no-numpy", "--quiet",
            "--db", str(db)]


def test_tune_again_on_a_database_that_holds_the_budget_says_how_to_go_on(tmp_path, capsys):
    """Before, the second run measured nothing and said nothing: the database's records
    count toward --trials."""
    from explorer.database import Database
    db = tmp_path / "db"
    assert cli.main(_tiny_tune(db, 2)) == 0
    assert capsys.readouterr().err == ""
    assert cli.main(_tiny_tune(db, 2)) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"explorer tune: {db} already holds 2 trials "
                                               "of row_sum(M=4,N=4")
    assert err[0].endswith("the whole --trials 2 budget: no new trials are run; to tune "
                           "further, raise --trials (the records held count toward it, e.g. "
                           "--trials 4) or give another --db")
    assert len(Database(db).records()) == 2
    assert cli.main(_tiny_tune(db, 3)) == 0           # as the line says: one more trial
    assert capsys.readouterr().err == "" and len(Database(db).records()) == 3


def test_tune_a_suite_again_on_a_database_that_holds_the_budget_says_so(tmp_path, capsys):
    suite = tmp_path / "tiny.json"
    suite.write_text(json.dumps({"tasks": [{"op": "row_sum", "params": {"M": 4, "N": 4}}]}))
    argv = _tiny_tune(tmp_path / "db", 2, what=("--suite", str(suite)))
    assert cli.main(argv) == 0 and capsys.readouterr().err == ""
    assert cli.main(argv) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and f"already holds 2 trials of each task of suite {suite} (1 task), " \
        "the whole --trials 2 budget: no new trials are run" in err[0]


def test_a_suite_started_again_with_a_larger_budget_tunes_only_the_difference(tmp_path,
                                                                                capsys):
    """Before, --trials-per-task 6 on a database holding 4 per task ran 6 more per task:
    a suite's records did not count toward its budget, as a single operator's do."""
    from explorer.database import Database
    suite = tmp_path / "two.json"
    suite.write_text(json.dumps({"tasks": [{"op": "row_sum", "params": {"M": 4, "N": 4}},
                                           {"op": "row_sum", "params": {"M": 8, "N": 4}}]}))
    db = tmp_path / "db"
    argv = _tiny_tune(db, 2, what=("--suite", str(suite)))
    i = argv.index("--trials")
    argv[i:i + 2] = ["--trials-per-task", "4"]
    assert cli.main(argv) == 0
    assert len(Database(db).records()) == 8
    argv[i + 1] = "6"
    assert cli.main(argv) == 0
    records = Database(db).records()
    assert len(records) == 12, len(records)
    capsys.readouterr()
    assert cli.main(argv) == 0 and len(Database(db).records()) == 12
    err = capsys.readouterr().err
    assert "the whole --trials 12 budget: no new trials are run; to tune further, raise " \
        "--trials or --trials-per-task" in err

