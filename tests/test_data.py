"""The data shipped with the package (``data/``, installed as ``explorer.data``): every
suite loads and each of its workloads computes what numpy does; the example database
loads, names the machine that measured it, and its records replay."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import explorer.suites
from explorer import ExplorerError, Schedule, Target, build, ops
from explorer.database import Database
from explorer.schedule import Trace
from explorer.space import DesignSpace
from explorer.suites import (example_database_names, example_database_path, suite_names,
                             suite_tasks)
from explorer.task_scheduler import load_suite

DATA = Path(__file__).resolve().parent.parent / "data"
SMALL_FLOPS = 2_000_000           # workloads above this are checked at a reduced size
# parameters that may shrink (per op): sizes, never a kernel, stride or padding
SHRINK = {"conv2d": ("C", "K", "H", "W"), "depthwise_conv2d": ("C", "H", "W"),
          "gemm": ("M", "N", "K"), "batch_matmul": ("B", "M", "N", "K"),
          "dense_bias_relu": ("M", "N", "K"), "softmax": ("M", "N"), "layer_norm": ("M", "N"),
          "row_sum": ("M", "N"), "elementwise": ("M", "N"), "transpose": ("M", "N"),
          "conv2d_bias_relu": ("C", "K", "H", "W"), "gemm_bias_gelu": ("M", "N", "K")}


def test_the_suites_are_the_files_in_data_and_nowhere_else():
    assert suite_names() == sorted(p.stem for p in DATA.glob("*.json"))
    assert {"resnet18", "bert_base", "mobilenet_v2", "mlp"} <= set(suite_names())
    assert not list(Path(explorer.suites.__file__).parent.glob("*.json"))
    assert ops.RESNET18_CONVS == {t["name"]: t["params"] for t in suite_tasks("resnet18")}


def test_every_suite_loads_with_named_weighted_tasks():
    for name in suite_names():
        tasks = load_suite(name)
        assert tasks, name
        assert len({t.name for t in tasks}) == len(tasks), f"{name}: task names repeat"
        assert all(t.weight >= 1 and t.workload.flops > 0 for t in tasks), name
    assert [t.name for t in load_suite("resnet18")] == [f"C{i}" for i in range(1, 13)]
    bert = {t.workload.name for t in load_suite("bert_base")}
    assert bert == {"gemm", "batch_matmul"}           # projections and attention
    for t in load_suite("bert_base"):
        p = dict(t.workload.params)
        assert p["M"] == 128 and (t.workload.name == "gemm" or p["B"] == 12)
    mobile = load_suite("mobilenet_v2")
    dw = [t for t in mobile if t.workload.name == "depthwise_conv2d"]
    pw = [t for t in mobile if t.workload.name == "conv2d"]
    assert len(dw) == 10 and len(pw) == 19 and len(mobile) == 29
    assert all(dict(t.workload.params)["R"] == 1 for t in pw)
    # the layers of the network, counted by weight: 17 depthwise convolutions
    assert sum(t.weight for t in dw) == 17
    assert [t.workload.name for t in load_suite("mlp")] == ["dense_bias_relu"] * 3


def _reduced(op: str, params: dict) -> dict:
    """``params`` with the sizes halved, largest first, until the op is small."""
    p = dict(params)
    names = SHRINK[op]
    while ops.get(op, **p).flops > SMALL_FLOPS:
        big = max(names, key=lambda n: p[n])
        if p[big] <= 4:
            break
        p[big] = max(4, p[big] // 2)
    return p


def _all_tasks():
    for name in suite_names():
        for t in suite_tasks(name):
            yield name, t


def test_each_suite_workload_computes_what_numpy_does():
    seen = set()
    for suite, t in _all_tasks():
        p = _reduced(t["op"], t["params"])
        wl = ops.get(t["op"], **p)
        if wl.key in seen:
            continue
        seen.add(wl.key)
        args = wl.make_args(seed=0)
        build(Schedule(wl), "llvm")(*args)          # the naive loop nest, compiled
        try:
            wl.check(args)
        except ExplorerError as e:
            pytest.fail(f"{suite} {t['name']} at {p}: {e}")
    assert len(seen) >= 30


def test_reduced_sizes_keep_the_layer_shape():
    p = _reduced("conv2d", ops.RESNET18_CONVS["C1"])
    assert (p["R"], p["S"], p["stride"], p["padding"]) == (7, 7, 2, 3)
    assert ops.get("conv2d", **p).flops <= SMALL_FLOPS


# ------------------------------------------------------------------ example database

@pytest.fixture(scope="module")
def example():
    path = example_database_path()
    return Database(path), json.loads((path / "machine.json").read_text())


def test_the_example_database_is_shipped_and_named():
    assert example_database_names() == ["example_db"]
    assert Path(str(example_database_path())).resolve() == (DATA / "example_db").resolve()
    with pytest.raises(ExplorerError, match="no example database 'nope'; shipped: example_db"):
        example_database_path("nope")


def test_the_example_database_records_its_machine(example):
    db, machine = example
    assert {"describe", "target", "num_cores", "vector_lanes", "commands", "date"} <= set(machine)
    recorded = Target(machine["target"])
    assert recorded.num_cores == machine["num_cores"]
    assert machine["describe"].startswith(recorded.mcpu)
    assert {r.target for r in db.records()} == {machine["target"]}
    assert all(c.startswith("explorer tune ") for c in machine["commands"])
    assert len(machine["commands"]) == len(db.workloads())


def test_the_example_database_holds_enough_to_train_a_model(example):
    db, _ = example
    keys = {w["key"] for w in db.workloads()}
    assert ops.resnet18_conv("C6").key in keys and ops.resnet18_conv("C9").key in keys
    for key in keys:
        recs = db.records(key)
        assert len(recs) >= 32, key                   # the cost model trains from 32
        assert sum(r.ok for r in recs) >= 16, key


def test_the_example_records_replay_and_the_best_are_correct(example):
    db, machine = example
    target = Target(machine["target"])
    for w in db.workloads():
        wl = db.workload(w["key"])
        recs = db.records(wl)
        space = DesignSpace(wl, target)
        replayed = [space.apply(Trace.from_json(r.trace)) for r in recs]
        assert all(s is not None for s in replayed), space.last_error
        best = db.best_schedule(wl, machine["target"])
        args = wl.make_args(seed=3)
        build(best, "llvm")(*args)
        assert np.isfinite(wl.check(args))
