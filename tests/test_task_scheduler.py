"""The task scheduler splits one trial budget over several operators."""
import pytest

from explorer import ExplorerError, Schedule, Trace, build, ops
from explorer.database import Database
from explorer.task_scheduler import Task, TaskScheduler, load_suite


@pytest.mark.parametrize("mode", ["gradient", "round-robin"])
def test_budget_is_split_and_every_task_is_tuned(tmp_path, mode):
    tasks = [Task("a", ops.get("gemm", 32, 32, 32), 1.0),
             Task("b", ops.get("dense_bias_relu", 16, 16, 16), 2.0)]
    ts = TaskScheduler(tasks, "llvm", trials=12, batch_size=4, seed=0, database=tmp_path,
                       strategy="replay", mode=mode)
    results = ts.run()
    assert ts.used == 12 and sum(r.trials for r in results) == 12
    assert all(r.trials >= 4 and r.best_seconds for r in results)
    db = Database(tmp_path)
    for task in tasks:
        recs = db.records(task.workload)
        assert recs
        best = min((r for r in recs if r.ok), key=lambda r: r.seconds)
        sch = Trace.from_json(best.trace).apply_to(Schedule(task.workload))
        args = task.workload.make_args(1)
        build(sch, "interp")(*args)
        task.workload.check(args)


def test_suites_load_and_bad_suites_say_what_to_fix(tmp_path):
    assert [t.name for t in load_suite("resnet18")][:2] == ["C1", "C2"]
    assert len(load_suite("bert_base")) == 5 and len(load_suite("mlp")) == 3
    with pytest.raises(ExplorerError, match="unknown suite 'vgg'; known: bert_base, fused, memory_bound, mlp"):
        load_suite("vgg")
    bad = tmp_path / "s.json"
    bad.write_text('{"tasks": [{"params": {}}]}')
    with pytest.raises(ExplorerError, match="is malformed"):
        load_suite(bad)
    with pytest.raises(ExplorerError, match="unknown task scheduling mode"):
        TaskScheduler([Task("a", ops.get("gemm", 8, 8, 8))], mode="fifo")


def test_every_task_gets_its_floor_however_little_it_weighs(tmp_path):
    """The gradient weighs tasks by their share of the network's time; a task that
    weighs almost nothing still gets ``min_share`` of an even share (here 0.75 * 48 / 2
    = 18 trials), and every schedule tuned is checked against numpy."""
    tasks = [Task("heavy", ops.get("gemm", 32, 32, 32), 1000.0),
             Task("light", ops.get("gemm", 16, 16, 16), 0.001)]
    ts = TaskScheduler(tasks, "llvm", trials=48, batch_size=4, seed=0, database=tmp_path,
                       strategy="replay", min_share=0.75)
    assert ts.floor == 18
    results = ts.run()
    assert ts.used == 48 and all(r.trials >= 18 for r in results)
    for task, res in zip(tasks, results):
        args = task.workload.make_args(1)
        build(Trace.from_json(res.trace).apply_to(Schedule(task.workload)), "interp")(*args)
        task.workload.check(args)


@pytest.mark.parametrize("share", [-0.1, 1.5, float("nan"), "half", True])
def test_a_floor_out_of_range_says_what_to_give(share):
    with pytest.raises(ExplorerError, match="min_share .* out of range: give a fraction"):
        TaskScheduler([Task("a", ops.get("gemm", 8, 8, 8))], trials=16, min_share=share)
