"""benchmarks/property_run.py: counts every example, and survives a chunk that dies."""
import json
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "property_run.py"


def run(tmp_path, *extra):
    totals = tmp_path / "totals.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--examples", "6", "--chunk", "3",
                           "--seed", "5", "--out", str(tmp_path / "regs"), "--json",
                           str(totals), *extra], capture_output=True, text=True, timeout=300)
    return proc, json.loads(totals.read_text())


def test_a_crashing_chunk_is_counted_saved_and_resumed(tmp_path):
    """A segfault at the second example of each chunk: both counted as crashes, their
    breadcrumbs saved as regression cases, and the chunks' other examples still run."""
    proc, totals = run(tmp_path, "--inject", "crash:1")
    assert proc.returncode == 1, proc.stderr
    assert totals["examples"] == 6
    assert totals["failures"] == {"crash": 2}
    assert sum(totals["outcomes"].values()) == 4
    saved = list((tmp_path / "regs").glob("*_crash_*.json"))
    assert saved and json.loads(saved[0].read_text())["kind"] == "crash"
    assert "crash 2" in proc.stdout and "seed 5: 6 examples" in proc.stdout


def test_a_clean_run_counts_primitives(tmp_path):
    proc, totals = run(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert totals["examples"] == 6 and not totals["failures"]
    assert totals["prims"]["get_block"][0] > 0
