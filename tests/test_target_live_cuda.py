"""Target("cuda") from the live device: its driver's values, read in a child process.

No GPU here: a stand-in ``pycuda`` package (a device of another size than the
presets, an L4-like sm_89 with 58 SMs) on PYTHONPATH drives the real query."""
from __future__ import annotations

import textwrap

import pytest

from explorer.target import Target
from explorer.target import cuda as tcuda

FAKE_DRIVER = textwrap.dedent("""
    class device_attribute:
        MULTIPROCESSOR_COUNT, MAX_THREADS_PER_BLOCK, MAX_SHARED_MEMORY_PER_BLOCK = 1, 2, 3
        MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, MAX_REGISTERS_PER_MULTIPROCESSOR = 4, 5
        WARP_SIZE = 6
    VALUES = {1: 58, 2: 1024, 3: 49152, 4: 102400, 5: 65536, 6: 32}
    def init():
        pass
    class Device:
        def __init__(self, index):
            if index != 0:
                raise RuntimeError("invalid device ordinal")
        def compute_capability(self):
            return (8, 9)
        def get_attribute(self, a):
            return VALUES[a]
""")


@pytest.fixture
def fake_pycuda(tmp_path, monkeypatch):
    pkg = tmp_path / "pycuda"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "driver.py").write_text(FAKE_DRIVER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    tcuda.live_fields.cache_clear()
    yield
    tcuda.live_fields.cache_clear()


def test_the_device_s_own_values_replace_the_preset(fake_pycuda):
    t = Target("cuda")
    assert (t.arch, t.sm_count, t.max_shared_memory_per_sm) == ("sm_89", 58, 102400)
    assert t.sm_count != tcuda.PRESETS["sm_89"][1]          # not the preset's 142
    same = Target("cuda -arch=sm_89")                        # the device's own arch
    assert same.sm_count == 58
    other = Target("cuda -arch=sm_80")                       # another device: its preset
    assert other.sm_count == tcuda.PRESETS["sm_80"][1]
    hand = Target("cuda -max-threads-per-block=256")         # what the user set stays
    assert hand.max_threads_per_block == 256 and hand.sm_count == 58


def test_a_device_that_cannot_be_read_falls_back_to_the_presets(fake_pycuda):
    assert tcuda.live_fields(1) is None                      # no device 1: the query fails
    tcuda.live_fields.cache_clear()


def test_without_pycuda_the_presets_apply(monkeypatch):
    tcuda.live_fields.cache_clear()
    monkeypatch.setattr(tcuda.importlib.util, "find_spec", lambda name: None)
    try:
        assert tcuda.live_fields() is None
        assert Target("cuda").sm_count == tcuda.PRESETS[tcuda.DEFAULT_ARCH][1]
    finally:
        tcuda.live_fields.cache_clear()
