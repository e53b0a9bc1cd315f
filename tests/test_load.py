"""The busy-machine check: other processes' CPU use, read from /proc/stat-format
counters while this process sleeps, and the warning the CLI and tables give."""
import os

import pytest

from explorer.measure import load


def _stat(busy: int, idle: int) -> str:
    # user nice system idle iowait irq softirq steal guest guest_nice
    return (f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\n"
            f"cpu0 {busy} 0 0 {idle} 0 0 0 0 0 0\nintr 1 2 3\n")


def _counters(tmp_path, first: str, second: str):
    """A stat file that holds ``first`` and becomes ``second`` while busy_cores sleeps."""
    path = tmp_path / "stat"
    path.write_text(first)
    slept = []

    def sleep(secs):
        slept.append(secs)
        path.write_text(second)
    return str(path), sleep, slept


@pytest.fixture
def checking(monkeypatch):
    monkeypatch.delenv(load.SWITCH, raising=False)
    monkeypatch.setattr(load.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(load, "available_cores", lambda: 2)


def test_an_idle_machine_has_no_busy_cores_and_no_note(tmp_path, checking):
    path, sleep, slept = _counters(tmp_path, _stat(1000, 5000), _stat(1000, 5050))
    assert load.busy_cores(0.25, path, sleep) == 0.0
    assert slept == [0.25]
    path, sleep, _ = _counters(tmp_path, _stat(1000, 5000), _stat(1000, 5050))
    assert load.busy_note(2, 0.25, path, sleep) is None


def test_another_process_on_one_of_two_cores_is_named_for_a_two_thread_measurement(
        tmp_path, checking):
    # 50 busy and 50 idle ticks over the window: one core of two
    path, sleep, _ = _counters(tmp_path, _stat(1000, 5000), _stat(1050, 5050))
    assert load.busy_cores(0.25, path, sleep) == pytest.approx(1.0)
    path, sleep, _ = _counters(tmp_path, _stat(1000, 5000), _stat(1050, 5050))
    note = load.busy_note(2, 0.25, path, sleep)
    assert note.startswith("the machine is busy: other processes kept 1.0 of its 2 cores "
                           "busy, and kernels here run on 2 threads")
    assert "Measure on an idle machine" in note


def test_one_free_core_is_enough_for_a_one_thread_measurement(tmp_path, checking):
    path, sleep, _ = _counters(tmp_path, _stat(1000, 5000), _stat(1050, 5050))
    assert load.busy_note(1, 0.25, path, sleep) is None
    path, sleep, _ = _counters(tmp_path, _stat(1000, 5000), _stat(1090, 5010))
    assert "1 thread;" in load.busy_note(1, 0.25, path, sleep)


def test_a_little_background_work_is_tolerated(tmp_path, checking):
    # 0.4 of a core busy: under SLACK_CORES
    path, sleep, _ = _counters(tmp_path, _stat(1000, 5000), _stat(1020, 5080))
    assert load.busy_cores(0.25, path, sleep) == pytest.approx(0.4)
    path, sleep, _ = _counters(tmp_path, _stat(1000, 5000), _stat(1020, 5080))
    assert load.busy_note(2, 0.25, path, sleep) is None


def test_unreadable_or_foreign_counters_say_nothing_rather_than_guess(tmp_path, checking):
    assert load.cpu_times(str(tmp_path / "missing")) is None
    assert load.busy_cores(0.01, str(tmp_path / "missing")) is None
    assert load.busy_note(2, 0.01, str(tmp_path / "missing")) is None
    for text in ("intr 1 2 3\n", "cpu  a b c d\n", "cpu 1 2\n", ""):
        (tmp_path / "bad").write_text(text)
        assert load.cpu_times(str(tmp_path / "bad")) is None, text
    # counters that did not move (a frozen file) are no measurement
    path, sleep, _ = _counters(tmp_path, _stat(1000, 5000), _stat(1000, 5000))
    assert load.busy_cores(0.25, path, sleep) is None


def test_a_window_that_is_not_positive_is_refused(checking):
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="window must be > 0 seconds"):
            load.busy_cores(bad)


def test_the_switch_turns_the_check_off_without_reading(tmp_path, monkeypatch):
    monkeypatch.setenv(load.SWITCH, "0")
    path, sleep, slept = _counters(tmp_path, _stat(1000, 5000), _stat(1100, 5000))
    assert load.busy_note(2, 0.25, path, sleep) is None and slept == []


@pytest.mark.skipif(not os.path.exists(load.STAT), reason="no /proc/stat on this system")
def test_the_real_counters_give_a_share_of_the_machines_cores():
    busy = load.busy_cores(0.05)
    assert busy is not None and 0.0 <= busy <= os.cpu_count()


def test_bench_keeps_the_busy_note_and_tune_prints_it(tmp_path, monkeypatch, capsys):
    from explorer import cli
    from explorer.cli import bench
    monkeypatch.setattr(bench, "busy_note", lambda threads: f"busy for {threads} threads")
    b = bench.Bench("llvm", threads=1, rounds=1, quick=True, torch=False, log=lambda m: None)
    try:
        assert b.notes == ["busy for 1 threads"]
    finally:
        b.close()
    monkeypatch.setattr(load, "busy_note", lambda threads: f"others hold {threads} cores")
    assert cli.main(["tune", "--op", "row_sum", "--shape", "4,4", "--trials", "1",
                     "--retime", "0", "--strategy", "replay", "--cost-model", "random",
                     "--target", "llvm -num-cores=2", "--db", str(tmp_path / "db"),
                     "--no-numpy", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err.count("explorer tune: warning: others hold 2 cores") == 1, err


def test_a_tuner_and_a_task_scheduler_warn_once_where_they_measure_here(tmp_path,
                                                                         monkeypatch):
    from explorer import ops
    from explorer.task_scheduler import Task, TaskScheduler
    from explorer.tune import Tuner
    asked = []
    monkeypatch.setattr(load, "busy_note", lambda threads: asked.append(threads) or "busy")
    kw = dict(batch_size=2, strategy="replay", cost_model="random", retime_top=0)
    with pytest.warns(UserWarning, match="^busy$"):
        Tuner(ops.get("row_sum", 4, 4), "llvm -num-cores=2", trials=2, **kw).run()
    assert asked == [2]
    tasks = [Task(f"r{n}", ops.get("row_sum", 4, n)) for n in (4, 8)]
    with pytest.warns(UserWarning, match="^busy$") as got:
        TaskScheduler(tasks, "llvm -num-cores=1", trials=4, **kw).run()
    assert asked == [2, 1] and sum(str(w.message) == "busy" for w in got) == 1
    # kernels measured elsewhere (a GPU target here) are not this machine's business
    assert load.warn_if_busy(type("T", (), {"kind": "cuda"})()) is None and asked == [2, 1]
