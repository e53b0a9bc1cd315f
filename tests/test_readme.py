"""The README's code examples run as written."""
import pathlib
import re

README = pathlib.Path(__file__).parent.parent / "README.md"


def test_readme_python_blocks_run(capsys, tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 4
    monkeypatch.chdir(tmp_path)                 # the tuning example writes my_db/ here
    env: dict = {}
    for code in blocks:
        exec(compile(code, "README.md", "exec"), env)
    out = capsys.readouterr().out
    assert "for i_0 in parallel(8):" in out and "vectorized(16)" in out
    assert "parallel: loop 'k' is a reduction loop of block 'C'" in out
    assert "Workload(user:matmul_bias_gelu#" in out and "numpy program" in out
    assert re.search(r"max abs error \d\.\de-0[5-9]|max abs error 0\.0e\+00", out), out
    assert (tmp_path / "my_db" / "workloads.jsonl").exists()


def test_readme_setup_commands_are_the_real_ones():
    text = README.read_text()
    assert "pip install -e . && explorer tune" in text
    assert "bash .ci/run" in text
    ci = (README.parent / ".ci" / "run").read_text()
    assert "python3 -m pytest -q" in ci and "python3 -m pytest -q" in text
