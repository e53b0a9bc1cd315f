"""The package as a user installs it: a wheel in a fresh virtual environment, used
from a directory outside the repository, finds its suites and the example database
(``data/``, package data as ``explorer.data``)."""
import os
import shutil
import subprocess
import sys
import venv
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_suite_tuning_from_a_non_editable_install(tmp_path):
    wheels = tmp_path / "wheels"
    src = tmp_path / "src"          # a clean copy: setuptools leaves build/ in the tree
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "build", "*.egg-info", "artifacts", "__pycache__", ".hypothesis", "tuning_db"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
                    str(src)], check=True, timeout=600)
    env_dir = tmp_path / "venv"
    # the dependencies come from this interpreter; the package itself only from the wheel
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    wheel = next(wheels.glob("schedule_explorer-*.whl"))
    with zipfile.ZipFile(wheel) as z:       # data/ ships as explorer.data
        names = set(z.namelist())
    for suite in ("resnet18", "bert_base", "mobilenet_v2", "mlp"):
        assert f"explorer/data/{suite}.json" in names, suite
    for part in ("records.jsonl", "workloads.jsonl", "machine.json"):
        assert f"explorer/data/example_db/{part}" in names, part
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q",
                    "--no-deps", "--force-reinstall", str(wheel)], check=True, timeout=300)
    work = tmp_path / "elsewhere"
    work.mkdir()
    where = subprocess.run([str(py), "-c", "import explorer; print(explorer.__file__)"],
                           cwd=work, capture_output=True, text=True, check=True)
    assert str(env_dir) in where.stdout, where.stdout   # not the editable checkout
    code = ("from explorer.suites import example_database_path as p; "
            "from explorer.database import Database; print(len(Database(p()).records()), p())")
    shipped = subprocess.run([str(py), "-c", code], cwd=work, capture_output=True, text=True,
                             check=True)
    count, path = shipped.stdout.split()
    assert int(count) >= 64 and path.startswith(str(env_dir)), shipped.stdout
    out = subprocess.run([str(env_dir / "bin" / "explorer"), "tune", "--suite", "mlp",
                          "--trials-per-task", "4", "--batch-size", "4", "--db", "db",
                          "--no-numpy", "--quiet", "--retime", "0"],
                         cwd=work, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert (work / "db" / "records.jsonl").read_text().count("\n") == 12   # 3 tasks x 4
