"""The staged register-tile transpose of ``MemoryBoundTiling`` (``stage register``): the
input tile copied into a local buffer with contiguous row reads, then transposed in
registers from that copy (``backends/llvm/tile_transpose.py``: row loads and shuffles,
no gather where the square is whole). Sampled schedules equal numpy at odd sizes, on the host and an AVX2 target."""
import numpy as np
import pytest

from explorer import build, lower, ops
from explorer.ir.functor import walk_stmt
from explorer.ir.stmt import Allocate, For
from explorer.space import DesignSpace
from explorer.space.defaults import default_rules
from explorer.space.rules import MemoryBoundTiling
from host_targets import host_and_avx2

TARGETS = [t.with_(l1_bytes=4 * 1024) for t in host_and_avx2()]
IDS = [f"{t.vector_lanes}lanes" for t in TARGETS]


def _staged_register(func, lanes: int) -> bool:
    """A local copy of the input and an unrolled square of ``lanes`` rows around a
    vector loop of ``lanes``."""
    nodes = [n for n, _ in walk_stmt(func.body)]
    staged = any(isinstance(n, Allocate) and n.buffer.name.endswith("_local") for n in nodes)
    square = any(isinstance(n, For) and n.kind == "unrolled" and n.extent == lanes
                 and isinstance(n.body, For) and n.body.kind == "vectorized"
                 and n.body.extent == lanes for n in nodes)
    return staged and square


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("M,N", [(997, 661), (256, 192)])
def test_staged_register_transpose_equals_numpy(target, M, N):
    wl = ops.transpose(M, N)
    lanes = target.vector_lanes
    found = 0
    rules = [MemoryBoundTiling(streaming_stores=False) if isinstance(r, MemoryBoundTiling)
             else r for r in default_rules(target)]     # offered without streaming stores
    for sch in DesignSpace(wl, target, rules=rules).sample(24, seed=0):
        if not _staged_register(lower(sch), lanes):
            continue
        kernel = build(sch, target)
        assert "shufflevector" in kernel.llvm_ir     # the squares in registers
        args = wl.make_args(seed=1)
        kernel(*args)
        np.testing.assert_array_equal(args[1], args[0].T)
        found += 1
    assert found, "no staged register transpose among the samples"
