"""Suites end to end (issue 17): every task of a suite gets trials, the closing table
times every task against numpy in the same minutes, a task left without a correct
candidate is named and fails the run, a budget below one round per task is refused,
``--no-expert-seed`` changes the first trial; the fused-epilogue workloads and layer
norm equal numpy, naive and as fused schedules of the design space.

Tiny suites of small shapes, replay search with the random model, rounds of 2."""
import json
import math
import statistics

import numpy as np
import pytest

from explorer import ExplorerError, Schedule, Trace, build, ops
from explorer import cli
from explorer.database import Database
from explorer.errors import SpaceError
from explorer.events import RoundStarted
from explorer.measure import Measurer
from explorer.space import DesignSpace
from explorer.space.expert import expert_schedule, expert_trace
from explorer.task_scheduler import Task, TaskScheduler, load_suite, min_trials
from explorer.tune import Tuner

TASKS = [{"op": "gemm", "params": {"M": 16, "N": 16, "K": 16}, "weight": 2, "name": "g"},
         {"op": "row_sum", "params": {"M": 8, "N": 32}, "weight": 1, "name": "r"},
         {"op": "conv2d_bias_relu", "params": {"N": 1, "C": 4, "H": 8, "W": 8, "K": 8, "R": 3,
                                               "S": 3, "padding": 1}, "weight": 1, "name": "c"}]
FAST = ["--batch-size", "2", "--retime", "0", "--strategy", "replay", "--cost-model", "random",
        "--quiet"]


@pytest.fixture()
def suite(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({"tasks": TASKS}))
    return path


def _status(argv) -> int:
    """``cli.main``'s exit status; usage errors exit through argparse (status 2)."""
    try:
        return cli.main(argv)
    except SystemExit as e:
        return e.code


def _tune(suite, db, *more):
    return _status(["tune", "--suite", str(suite), "--db", str(db), *FAST, *more])


def test_every_task_gets_trials_and_the_table_times_each_against_numpy(tmp_path, suite,
                                                                       capsys):
    out = tmp_path / "r.json"
    assert _tune(suite, tmp_path / "db", "--trials-per-task", "2", "--table-rounds", "2",
                 "--json", str(out)) == 0
    text = capsys.readouterr().out
    res = json.loads(out.read_text())
    assert res["trials"] == 6 and [t["task"] for t in res["tasks"]] == ["g", "r", "c"]
    for t in res["tasks"]:     # one round of 2 each: the budget is exactly one warm-up
        assert t["trials"] == 2 and t["best_seconds"] > 0
    table = res["table"]
    assert [e["task"] for e in table["tasks"]] == ["g", "r", "c"]
    for e in table["tasks"]:
        tuned, numpy_row = e["rows"]["tuned"], e["rows"]["numpy"]
        assert tuned["median_secs"] > 0 and numpy_row["median_secs"] > 0, e
        assert len(tuned["samples"]) >= 2 and len(numpy_row["samples"]) >= 2
        # both checked against the numpy reference on the way
        assert tuned["max_abs_error"] is not None and numpy_row["max_abs_error"] is not None
    for t, e in zip(res["tasks"], table["tasks"]):
        assert math.isclose(t["numpy_gflops"], e["flops"] / e["rows"]["numpy"]["median_secs"]
                            / 1e9)
    weighted = sum(e["weight"] * e["rows"]["numpy"]["median_secs"] for e in table["tasks"])
    assert math.isclose(table["totals"]["numpy"]["weighted_secs"], weighted)
    assert table["totals"]["tuned"]["weighted_secs"] > 0
    # where the time went: the phases add up to the run's seconds, the table included
    phases = res["phase_seconds"]
    assert {"setup", "search", "measure", "train", "table", "other"} <= set(phases)
    assert all(v >= 0 for v in phases.values()) and phases["measure"] > 0
    assert math.isclose(sum(phases.values()), res["seconds"], abs_tol=0.01)
    assert res["measured"] == 6 and res["batch_size"] == 2
    assert res["seconds_per_trial"] == pytest.approx((res["seconds"] - phases["table"]) / 6,
                                                     abs=0.01)
    for t in res["tasks"]:   # a task's own phases: its own turns, not the other tasks'
        assert sum(t["phase_seconds"].values()) < res["seconds"]
    assert sum(sum(t["phase_seconds"].values()) for t in res["tasks"]) <= res["seconds"]
    assert any(line.startswith("time: ") and "rounds of 2" in line
               for line in text.splitlines())
    for name in ("g", "r", "c", "network (weighted)"):
        assert any(line.startswith(name + " ") for line in text.splitlines()), name
    # each task's share of what the host allows it, from a roofline measured in the run
    roof = table["roofline"]
    assert roof["peak_gflops"] > 1 and roof["bandwidth_gbs"] > 0.5
    for e in table["tasks"]:
        assert 0 < e["roof_gflops"] <= roof["peak_gflops"]
        share = round(100 * e["flops"] / e["rows"]["tuned"]["median_secs"] / 1e9
                      / e["roof_gflops"])
        row = [ln for ln in text.splitlines() if ln.startswith(e["task"] + " ")][-1]
        assert row.rstrip().endswith(f"{share}%"), row
    assert "of roof = tuned GFLOP/s over what this host allows" in text
    assert "before and after the table" in table["roofline"]["source"]
    assert "nan" not in text
    # later: the same database timed again against the libraries
    assert cli.main(["bench", "--suite", str(suite), "--db", str(tmp_path / "db"),
                     "--repeats", "1", "--json", str(tmp_path / "b.json")]) == 0
    again = json.loads((tmp_path / "b.json").read_text())
    assert all(e["rows"]["tuned"]["median_secs"] and e["rows"]["numpy"]["median_secs"]
               for e in again["tasks"])
    # a suite the database holds no records of: every task is named, status 1
    capsys.readouterr()
    assert cli.main(["bench", "--suite", "mlp", "--db", str(tmp_path / "db"), "--repeats",
                     "1"]) == 1
    err = capsys.readouterr().err
    assert all(f"task {n} of --suite mlp has no tuned time: no record" in err
               for n in ("fc1", "fc2", "fc3"))


def test_a_failed_closing_table_says_where_the_tuning_is_and_how_to_time_it(
        tmp_path, suite, capsys, monkeypatch):
    from explorer.cli import suite_bench

    def broken(*a, **k):
        raise RuntimeError("the table broke")
    monkeypatch.setattr(suite_bench, "print_suite_table", broken)
    db = tmp_path / "db"
    assert _tune(suite, db, "--trials-per-task", "2") != 0
    err = capsys.readouterr().err
    assert f"saved in {db}: time it with explorer bench --suite {suite} --db {db}" in err
    assert "the table broke" in err
    monkeypatch.undo()
    assert cli.main(["bench", "--suite", str(suite), "--db", str(db), "--repeats", "1",
                     "--no-torch"]) == 0      # what the message says works


def test_the_table_keeps_the_higher_roof_of_its_two_measurements():
    from explorer.cli.suite_bench import higher_roof
    from explorer.measure import Roofline
    busy, quiet = Roofline(163.0, 30.0, "m"), Roofline(340.0, 21.0, "m")
    roof = higher_roof(busy, quiet)
    assert (roof.peak_gflops, roof.bandwidth_gbs) == (340.0, 30.0)
    assert "before and after" in roof.source
    assert higher_roof(None, quiet) is quiet and higher_roof(busy, None) is busy


def _row(samples):
    return {"median_secs": statistics.median(samples), "min_secs": min(samples),
            "max_secs": max(samples), "samples": samples}


def test_a_table_timed_while_the_host_was_busy_says_so():
    from explorer.cli.suite_bench import busy_notes
    from explorer.measure import Roofline
    quiet_rows = {"tuned": _row([1.0e-3, 1.01e-3, 1.02e-3]),
                  "numpy": _row([2.0e-3, 2.1e-3, 2.05e-3])}
    quiet = [{"task": "C1", "rows": quiet_rows}]
    roof = Roofline(340.0, 30.0, "m")
    assert busy_notes(roof, Roofline(330.0, 28.0, "m"), quiet) == []
    # a neighbour during the last measurement: half the peak
    notes = busy_notes(roof, Roofline(163.0, 29.0, "m"), quiet)
    assert len(notes) == 1 and "FMA peak read 340.0 GFLOP/s before the table and 163.0" in notes[0]
    assert "explorer bench --suite" in notes[0]
    notes = busy_notes(roof, Roofline(335.0, 12.0, "m"), quiet)
    assert len(notes) == 1
    assert "copy bandwidth read 30.0 GB/s before the table and 12.0" in notes[0]
    # a neighbour during some rounds of one task: that row alone is named
    busy = dict(quiet_rows, torch=_row([1.0e-3, 2.5e-3, 2.6e-3, 1.1e-3, 3.0e-3]))
    notes = busy_notes(roof, roof, quiet + [{"task": "C2", "rows": busy}])
    assert notes == ["C2 torch: its rounds read 1.000 to 3.000 ms, the median 2.500 ms: the "
                     "cores were busy during some of them (another process, or threads a "
                     "call before left spinning), and the median reads slow"]
    # two rounds say nothing of a spread; a row without a time (failed) is skipped
    few = {"tuned": _row([1e-3, 2e-3]), "torch": {"median_secs": None, "min_secs": None,
                                                  "max_secs": None, "samples": []}}
    assert busy_notes(None, None, [{"task": "C3", "rows": few}]) == []


def test_a_task_above_its_roof_is_told_apart_from_a_busy_host():
    from explorer.cli.suite_bench import above_roof
    from explorer.measure import Roofline
    roof = Roofline(500.0, 40.0, "m", (("L2", 1 << 20, 300.0), ("L3", 16 << 20, 150.0)))
    # a compute-bound task cannot pass the FMA peak: the peak read low
    assert "other processes were busy" in above_roof("C2", 1 << 20, roof, True)
    # a memory-bound task is held to the copy of the level that holds its bytes
    assert above_roof("D1", 3 << 20, roof, False) == (
        "D1 ran above its roof, the L3's copy bandwidth (150.0 GB/s): part of its 3.0 MiB "
        "stays in a faster level between runs, or the L3 copy read low (other processes "
        "busy while it was measured)")
    assert "the memory's copy bandwidth (40.0 GB/s): part of its 48.0 MiB" in \
        above_roof("T", 48 << 20, roof, False)
    # the table's own call: a suite's task, its bytes and its bound from the workload
    from explorer.cli.suite_bench import SuiteBench
    tasks = {t.name: t for t in load_suite("memory_bound") + load_suite("resnet18")}
    note = SuiteBench._above_roof_note(None, tasks["softmax_1k"], roof)
    assert note.startswith("softmax_1k ran above its roof, the L3's copy bandwidth (150.0 "
                           "GB/s): part of its 8.0 MiB")
    assert "other processes were busy" in SuiteBench._above_roof_note(None, tasks["C2"], roof)


def test_a_task_is_held_to_the_copy_of_the_level_that_holds_its_bytes():
    """The roof over a memory-bound task is its compulsory bytes at the copy bandwidth of
    the smallest cache level whose measured copy held as many bytes, else the memory's;
    a compute-bound task's roof stays the FMA peak; the higher of two roofs keeps each
    level's higher reading; the table's legend names every level."""
    from explorer.cli.suite_bench import higher_roof
    from explorer.measure import Roofline
    from explorer.measure.roofline import compulsory_bytes
    roof = Roofline(500.0, 40.0, "m", (("L2", 1 << 20, 300.0), ("L3", 16 << 20, 150.0)))
    assert roof.bandwidth_for(1 << 20) == ("L2", 300.0)
    assert roof.bandwidth_for((1 << 20) + 1) == ("L3", 150.0)
    assert roof.bandwidth_for(17 << 20) == ("memory", 40.0)
    # a level that read slower than the memory (a busy moment) never lowers the roof
    assert Roofline(500.0, 40.0, "m", (("L3", 16 << 20, 30.0),)).bandwidth_for(1) == \
        ("L3", 40.0)
    tasks = {t.name: t for t in load_suite("memory_bound") + load_suite("resnet18")}
    for name, level in (("softmax_1k", "L3"), ("softmax_4k", "memory")):
        wl = tasks[name].workload
        nbytes = compulsory_bytes(wl)
        assert roof.bandwidth_for(nbytes)[0] == level
        assert roof.attainable_gflops(wl) == pytest.approx(
            wl.flops / nbytes * dict(L3=150.0, memory=40.0)[level])
    assert roof.attainable_gflops(tasks["C2"].workload) == 500.0
    assert Roofline(**roof.as_json()) == roof     # a table's JSON gives the roof back
    other = Roofline(450.0, 45.0, "m", (("L2", 1 << 20, 280.0), ("L3", 16 << 20, 170.0)))
    both = higher_roof(roof, other)
    assert (both.peak_gflops, both.bandwidth_gbs) == (500.0, 45.0)
    assert both.cache_roofs == (("L2", 1 << 20, 300.0), ("L3", 16 << 20, 170.0))
    table = {"target": "llvm", "threads": 2, "rounds": 3, "libraries": [], "notes": [],
             "tasks": [], "totals": {"tuned": {"weighted_secs": None, "tasks_timed": 0}},
             "roofline": both.as_json()}
    from explorer.cli.suite_bench import format_suite_table
    text = format_suite_table(table)
    assert ("its compulsory bytes at the copy bandwidth of the level that holds them: L2 "
            "(up to 1 MiB) 300 GB/s, L3 (up to 16 MiB) 170 GB/s, memory 45.0 GB/s") in text


def test_warm_up_gives_every_task_a_round_before_any_task_gets_a_second(tmp_path):
    tasks = [Task(t["name"], ops.get(t["op"], **t["params"]), t["weight"]) for t in TASKS]
    ts = TaskScheduler(tasks, "llvm", trials=10, batch_size=2, seed=0, database=tmp_path,
                       strategy="replay", cost_model="random", retime_top=0)
    order = []
    for task, tuner in zip(tasks, ts.tuners):
        tuner.events.subscribe(lambda ev, n=task.name: order.append(n)
                               if isinstance(ev, RoundStarted) else None)
    results = ts.run()
    assert order[:3] == ["g", "r", "c"] and len(order) == 5
    assert ts.used == 10 and all(r.trials >= 2 and r.best_seconds for r in results)
    assert ts.untuned() == {}


def test_a_budget_below_one_round_per_task_is_refused_up_front(tmp_path, suite, capsys):
    assert min_trials(3, 2) == 6
    assert _tune(suite, tmp_path / "db", "--trials", "5") == 2
    err = capsys.readouterr().err
    assert "--trials 5 cannot give each of the 3 tasks" in err
    assert "give at least --trials 6" in err and not (tmp_path / "db").exists()
    # the run of the issue: 12 ResNet-18 layers, rounds of 16, 32 trials
    assert _status(["tune", "--suite", "resnet18", "--trials", "32", "--db",
                    str(tmp_path / "db")]) == 2
    assert "give at least --trials 192" in capsys.readouterr().err
    assert _tune(suite, tmp_path / "db", "--trials", "6", "--trials-per-task", "2") == 2
    assert "not both" in capsys.readouterr().err
    assert _status(["tune", "--op", "gemm", "--trials-per-task", "2", "--db",
                    str(tmp_path / "db")]) == 2
    assert "--trials-per-task applies to --suite" in capsys.readouterr().err
    assert _status(["tune", "--op", "gemm", "--min-share", "0.5", "--db",
                    str(tmp_path / "db")]) == 2
    assert "--min-share applies to --suite" in capsys.readouterr().err
    for share in ("1.5", "-1", "nan"):
        assert _tune(suite, tmp_path / "db", "--trials", "6", "--min-share", share) == 2
        assert f"--min-share {float(share)} is out of range" in capsys.readouterr().err
    tasks = load_suite(suite)
    with pytest.raises(ExplorerError, match="give at least 6 trials"):
        TaskScheduler(tasks, trials=5, batch_size=2)


def test_a_task_that_cannot_be_tuned_is_named_and_the_run_fails(tmp_path, suite, capsys,
                                                                 monkeypatch):
    """Every candidate of row_sum computes a wrong result (the worker's fault injection:
    the real kernel runs, its output is corrupted, the real check catches it)."""
    real_input = Measurer.input

    def faulty(self, sch, fault=None):
        return real_input(self, sch, fault="wrong" if sch.workload.name == "row_sum"
                          else fault)
    monkeypatch.setattr(Measurer, "input", faulty)
    db = tmp_path / "db"
    assert _tune(suite, db, "--trials", "12", "--no-numpy") == 1
    err = capsys.readouterr().err
    assert "task r of --suite" in err and "was not tuned: all 4 trials failed" in err
    assert "wrong" in err and "1 of 3 tasks have no tuned schedule" in err
    assert "task g " not in err and "task c " not in err
    recs = Database(db).records(ops.row_sum(8, 32))
    # the failing task stopped after max_failed_rounds rounds; the others got the rest
    assert len(recs) == 4 and not any(r.ok for r in recs)
    assert len(Database(db).records()) == 12


def test_no_expert_seed_changes_the_first_trial(tmp_path):
    wl = ops.gemm(32, 32, 32)
    firsts = {}
    for flag in ((), ("--no-expert-seed",)):
        db = tmp_path / ("search" if flag else "seeded")
        assert cli.main(["tune", "--op", "gemm", "--shape", "32,32,32", "--trials", "1",
                         "--batch-size", "1", "--retime", "0", "--no-numpy", "--quiet",
                         "--db", str(db), *flag]) == 0
        (rec,) = Database(db).records(wl)
        sch = Trace.from_json(rec.trace).apply_to(Schedule(wl))
        args = wl.make_args(0)
        build(sch, "llvm")(*args)
        wl.check(args)
        firsts[bool(flag)] = sch.func
    assert firsts[False] == expert_schedule(wl).func
    assert firsts[True] != firsts[False]


# ------------------------------------------------------------------ the new workloads

NEW = [("conv2d_bias_relu", dict(N=1, C=3, H=9, W=7, K=5, R=3, S=3, stride=2, padding=1)),
       ("conv2d_bias_relu", dict(N=2, C=4, H=6, W=6, K=3, R=1, S=1, dtype="float64")),
       ("gemm_bias_gelu", dict(M=7, N=12, K=9)),
       ("layer_norm", dict(M=5, N=19)),
       ("layer_norm", dict(M=3, N=8, dtype="float64"))]


@pytest.mark.parametrize("backend", ["interp", "llvm"])
@pytest.mark.parametrize("name,kw", NEW, ids=[n for n, _ in NEW])
def test_new_ops_equal_numpy(name, kw, backend):
    wl = ops.get(name, **kw)
    args = wl.make_args(4)
    build(wl, backend)(*args)
    assert wl.check(args) <= wl.default_tolerance()[1]
    out = args[-1]
    assert out.dtype == np.dtype(wl.dtype) and np.any(out != 0)


def test_references_match_the_textbook_formulas():
    wl = ops.gemm_bias_gelu(3, 4, 5, dtype="float64")
    A, B, b, _ = wl.make_args(1)
    x = A @ B + b
    want = [[0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
             for v in row] for row in x]
    np.testing.assert_allclose(wl.reference(A, B, b)[0], want, rtol=1e-12)
    ln = ops.layer_norm(4, 6, dtype="float64")
    X, g, be, _ = ln.make_args(2)
    want = [[(v - np.mean(row)) / math.sqrt(np.var(row) + 1e-5) * g[j] + be[j]
             for j, v in enumerate(row)] for row in X]
    np.testing.assert_allclose(ln.reference(X, g, be)[0], want, rtol=1e-10)
    conv = ops.conv2d_bias_relu(1, 2, 5, 5, 3, 3, 3, padding=1, dtype="float64")
    X, W, b, _ = conv.make_args(3)
    plain = ops.conv2d(1, 2, 5, 5, 3, 3, 3, padding=1, dtype="float64").reference(X, W)[0]
    np.testing.assert_allclose(conv.reference(X, W, b)[0],
                               np.maximum(plain + b[None, :, None, None], 0), rtol=1e-12)


@pytest.mark.parametrize("name,kw,epilogue", [
    ("conv2d_bias_relu", dict(N=1, C=4, H=8, W=8, K=8, R=3, S=3, padding=1), "relu"),
    ("gemm_bias_gelu", dict(M=16, N=32, K=8), "gelu")])
def test_fused_schedules_of_the_design_space_equal_numpy(name, kw, epilogue):
    """bias_add is inlined and the epilogue computed at the main nest's tiles
    (reverse_compute_at) by the space's own rules; such samples equal numpy."""
    wl = ops.get(name, **kw)
    space = DesignSpace(wl, "llvm")
    fused = 0
    for sch in space.sample(6, seed=3):
        if "reverse_compute_at" not in [i.kind for i in sch.trace.insts]:
            continue
        fused += 1
        for backend in ("interp", "llvm"):
            args = wl.make_args(fused)
            build(sch, backend)(*args)
            wl.check(args)
    assert fused >= 1
    blocks = str(space.sketch_traces())
    assert "compute_inline" in blocks and epilogue in blocks


def test_expert_has_no_schedule_for_the_new_ops_and_the_tuner_goes_on_without_it():
    for name in ("layer_norm",):    # the fused epilogues have one: tests/test_expert_epilogue.py
        wl = ops.get(name, **ops.registry[name].small)
        with pytest.raises(SpaceError, match="no expert schedule"):
            expert_trace(wl)
        assert Tuner(wl, "llvm", trials=1, cost_model="random").strategy.seeds == []


def test_memory_bound_suite():
    tasks = load_suite("memory_bound")
    assert {t.workload.name for t in tasks} == {"softmax", "layer_norm", "row_sum",
                                                "elementwise", "transpose"}
    shapes = {(t.workload.name, dict(t.workload.params)["M"], dict(t.workload.params)["N"])
              for t in tasks}
    assert len(shapes) == 10 and {(m, n) for _, m, n in shapes} == {(1024, 1024), (4096, 1024)}


def test_a_task_whose_space_runs_out_is_said_and_its_budget_goes_elsewhere(tmp_path, capsys):
    """The CPU space of a transpose holds one schedule: its task stops there, saying so."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"tasks": [TASKS[0], {"op": "transpose", "params": {
        "M": 16, "N": 32}, "name": "t"}]}))
    assert _tune(path, tmp_path / "db", "--trials-per-task", "2", "--no-numpy") == 0
    out = capsys.readouterr().out
    db = Database(tmp_path / "db")
    n = len(db.records(ops.transpose(16, 32)))
    assert n >= 1 and len(db.records()) == 4
    assert (f"note: task t: its design space proposed fewer new candidates than a round "
            f"asked ({n} trials in all)") in out and "note: task g" not in out


def test_a_large_budget_is_tuned_in_rounds_of_the_batch_size():
    """A round's search costs the same for 16 candidates as for 32: a suite of 256 trials
    per task runs rounds of --batch-size (32), a small budget keeps rounds of 16 or less."""
    from explorer.cli.tune import suite_round
    assert suite_round(32, 256) == 32 and suite_round(32, 128) == 32
    assert suite_round(32, 64) == 16 and suite_round(32, 16) == 16
    assert suite_round(32, 8) == 8 and suite_round(2, 256) == 2 and suite_round(64, 512) == 64


def test_a_resumed_suite_teaches_its_shared_model_all_records_in_one_training(tmp_path,
                                                                          monkeypatch):
    """Resuming, every task reads its records back; the model the tasks share trains once
    on all of them (it trained once per task, each time on the records read so far)."""
    from explorer import Target
    from explorer.cost_model import XGBCostModel
    from explorer.database import TuningRecord
    tasks = [Task("a", ops.gemm(64, 64, 64)), Task("b", ops.gemm(32, 128, 64))]
    db = Database(tmp_path)
    held = {}
    for n, task in enumerate(tasks):
        for k, sch in enumerate(DesignSpace(task.workload, "llvm").sample(40, seed=n)):
            held[task.name] = held.get(task.name, 0) + db.commit_record(TuningRecord(
                task.workload.key, str(Target("llvm")), sch.trace.as_json(),
                (1e-5 * (k + 1),)))
    assert held["a"] >= XGBCostModel().params["min_samples"]   # task a alone would train
    trained = []
    real = XGBCostModel._train

    def counted(self):
        trained.append(self.samples)
        real(self)
    monkeypatch.setattr(XGBCostModel, "_train", counted)
    ts = TaskScheduler(tasks, "llvm", trials=2, batch_size=1, seed=0, database=db,
                       strategy="replay", retime_top=0, pretrained=False)
    results = ts.run()
    assert trained[0] == sum(held.values())
    assert [r.trials for r in results] == [held["a"], held["b"]]   # all read back


def test_the_table_waits_for_its_workers_before_it_measures_the_roof():
    """The library workers import numpy and PyTorch as they start; a roofline measured
    meanwhile read half the FMA peak. Every worker of the table is waited for first; one
    that died is left to fail its rows later (with a note), not the table."""
    from types import SimpleNamespace
    from explorer.cli.suite_bench import SuiteBench
    from explorer.measure.pool import WorkerDied
    waited = []

    class Worker:
        def __init__(self, name, dies=False):
            self.name, self.dies = name, dies

        def wait_ready(self):
            waited.append(self.name)
            if self.dies:
                raise WorkerDied("gone")
    def pool(*names):
        return SimpleNamespace(workers=[Worker(n, n == "dead") for n in names])
    bench = SimpleNamespace(measurer=SimpleNamespace(pool=pool("m0", "m1")),
                            pools={"numpy": pool("np0"), "torch": pool("dead", "t1")})
    SuiteBench._wait_ready(bench)
    assert waited == ["m0", "m1", "np0", "dead", "t1"]
