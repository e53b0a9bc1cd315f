"""The README's code examples run as written."""
import pathlib
import re

README = pathlib.Path(__file__).parent.parent / "README.md"


def test_readme_python_blocks_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 2
    env: dict = {}
    for code in blocks:
        exec(compile(code, "README.md", "exec"), env)
    out = capsys.readouterr().out
    assert "for i_0 in parallel(8):" in out and "vectorized(16)" in out
    assert "parallel: loop 'k' is a reduction loop of block 'C'" in out


def test_readme_setup_commands_are_the_real_ones():
    text = README.read_text()
    assert "pip install -e . && explorer tune" in text
    assert "bash .ci/run" in text
    ci = (README.parent / ".ci" / "run").read_text()
    assert "python3 -m pytest -q" in ci and "python3 -m pytest -q" in text
