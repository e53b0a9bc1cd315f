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
