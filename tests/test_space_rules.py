"""Schedule rules and postprocessors one by one: what each does to a block, and the
reasons postprocessors give when they reject a candidate."""
import pytest

from explorer import Schedule, Target, Trace, build, lower, ops
from explorer.errors import ExplorerError
from explorer.ir.functor import walk_stmt
from explorer.ir.stmt import BlockRealize, For
from explorer.space import DesignSpace, PostprocError
from explorer.space import analysis as A
from explorer.space.expert import expert_trace, sketch_with_write_cache
from explorer.space.postprocs import (RewriteCooperativeFetch, RewriteParallelVectorizeUnroll,
                                      RewriteReductionBlock, RewriteUnboundBlock, VerifyGPUCode)
from explorer.space.postprocs.parallel_vectorize_unroll import (plan_parallel_vectorize,
                                                                unroll_plan)
from explorer.space.rules import (AddRFactor, AutoBind, AutoInline, MultiLevelTiling,
                                  ParallelizeVectorizeUnroll, RandomComputeLocation,
                                  ReuseConfig)
from explorer.space.rules.multi_level_tiling import vector_channel_plan
from explorer.space.validate import check_on_interp

CPU = Target("llvm -num-cores=2")
GPU = Target("cuda")


def _llvm_builds() -> bool:
    try:
        build(ops.elementwise(2, 2), CPU)
        return True
    except ExplorerError:
        return False


LLVM = _llvm_builds()


def blocks(sch) -> list:
    return [n.block.name for n, _ in walk_stmt(sch.func.body) if isinstance(n, BlockRealize)]


def loops(sch) -> list:
    return [(n.var.name, n.kind, n.extent) for n, _ in walk_stmt(sch.func.body)
            if isinstance(n, For)]


def kinds(trace) -> list:
    return [i.kind for i in trace.insts]


def space(wl, target, *rules):
    return DesignSpace(wl, target, rules=list(rules), postprocs=[])


# ------------------------------------------------------------------ auto-inline

def test_auto_inline_cpu_inlines_injective_producers_only():
    sch = space(ops.dense_bias_relu(6, 8, 10), CPU, AutoInline()).sketches[0]
    assert blocks(sch) == ["dense", "relu"]           # bias_add folded into relu
    padded = space(ops.conv2d(1, 3, 5, 5, 4, 3, 3, padding=1), CPU, AutoInline()).sketches[0]
    assert "pad" in blocks(padded)                     # if-then-else: not on CPU
    soft = space(ops.softmax(4, 8), CPU, AutoInline()).sketches[0]
    assert "exp" in blocks(soft)                       # exp is disallowed on CPU


def test_auto_inline_gpu_inlines_both_ways():
    rule = AutoInline(into_producer=True, disallow_if_then_else=False, require_injective=False,
                      require_ordered=False, disallow_op=())
    sch = space(ops.dense_bias_relu(6, 8, 10), GPU, rule).sketches[0]
    assert blocks(sch) == ["dense", "bias_add"]        # relu reverse-inlined into bias_add
    assert "reverse_compute_inline" in kinds(sch.trace)
    padded = space(ops.conv2d(1, 3, 5, 5, 4, 3, 3, padding=1), GPU, rule).sketches[0]
    assert blocks(padded) == ["conv"]
    soft = space(ops.softmax(4, 8), GPU, rule).sketches[0]
    assert "exp" not in blocks(soft)


# ------------------------------------------------------------------ add-rfactor

def test_add_rfactor_makes_two_rfactor_sketches_and_keeps_the_original():
    wl = ops.row_sum(4, 64)
    sketches = space(wl, CPU, AddRFactor()).sketches
    assert len(sketches) == 3
    with_rf = [s for s in sketches if "B_rf" in blocks(s)]
    assert len(with_rf) == 2
    for s in with_rf:
        ann = A.block_annotations(s.func, "B")
        assert ann[A.RANDOM_COMPUTE_PRODUCER] == 1
    # the full CPU space: random compute location places the rfactor block, all correct
    for sch in DesignSpace(wl, CPU).sample(12, seed=3):
        check_on_interp(sch, wl)


def test_add_rfactor_leaves_parallel_enough_reductions_alone():
    assert len(space(ops.gemm(64, 64, 8), CPU, AddRFactor()).sketches) == 1


# ------------------------------------------------------------------ multi-level tiling

def test_cpu_tiling_structure_and_write_cache_sketches():
    rule = MultiLevelTiling("SSRSRS", reuse_write=ReuseConfig("may", (1, 2), "local"))
    sketches = space(ops.gemm(16, 16, 8), CPU, rule).sketches
    assert len(sketches) == 3
    orders = [[name for name, _, _ in loops(s) if not name.startswith("ax")] for s in sketches]
    assert all(o == ["i_0", "j_0", "i_1", "j_1", "k_0", "i_2", "j_2", "k_1", "i_3", "j_3"]
               for o in orders)
    where = []
    for s in sketches:
        if "C_local" not in blocks(s):
            where.append(None)
            continue
        path = next(p for n, p in walk_stmt(s.func.body)
                    if isinstance(n, BlockRealize) and n.block.name == "C_local")
        where.append([lp.var.name for lp in path if isinstance(lp, For)][-3])
    assert sorted(map(str, where)) == ["None", "j_0", "j_1"]   # no cache, level 1, level 2


def _channel_sketches(sp):
    return [s for s in sp.sketches if "transform_layout" in kinds(s.trace)]


def test_vector_channel_sketch_vectorizes_the_output_channel_of_a_narrow_conv():
    wl = ops.conv2d(1, 4, 7, 7, 32, 3, 3, padding=1)          # 7 columns, 32 channels
    sp = DesignSpace(wl, CPU)
    assert vector_channel_plan(sp.func, "conv", CPU)[0] == 1   # k, the second spatial var
    (sk,) = _channel_sketches(sp)
    # the conv block writes the local cache and reads the packed weight with k last
    conv = next(n.block for n, _ in walk_stmt(sk.func.body)
                if isinstance(n, BlockRealize) and n.block.name == "conv")
    assert conv.body.buffer.name == "conv_local" and conv.body.buffer.shape == (1, 7, 7, 32)
    assert [b.shape for b in conv.reads() if b.name == "W_global"] == [(4, 3, 3, 32)]
    seen = vectorized = 0
    for seed in range(12):
        sch = sp.apply(Trace(sk.trace.insts, {}), seed=seed)     # decisions sampled
        if sch is None:
            continue
        seen += 1
        assert check_on_interp(sch, wl, seed) < 1e-3
        path = next(p for n, p in walk_stmt(sch.func.body)
                    if isinstance(n, BlockRealize) and n.block.name == "conv")
        inner = [lp for lp in path if isinstance(lp, For)][-1]
        assert inner.var.name.startswith("k_3")             # the channel is innermost
        if inner.extent > 1 and A.is_single_stmt(inner):  # (not the padding's place)
            assert inner.kind == "vectorized"               # ... and the vector
            vectorized += 1
        if seed < 3 and LLVM:
            args = wl.make_args(seed)
            build(sch, CPU)(*args)
            wl.check(args)
    assert seen >= 10 and vectorized >= 5


@pytest.mark.parametrize("wl, expect", [
    (ops.conv2d(1, 4, 8, 8, 32, 3, 3, padding=1), True),     # 8 columns: half a vector
    (ops.conv2d(1, 4, 7, 7, 8, 3, 3, padding=1), False),     # fewer channels than lanes
    (ops.conv2d(1, 4, 32, 32, 32, 3, 3, padding=1), False),  # 32 columns fill the vectors
    (ops.depthwise_conv2d(1, 32, 7, 7, 3, 3, padding=1), False),   # input gathered over c
    (ops.gemm(32, 24, 8), True),                              # A packed as [k, i]
    (ops.gemm(32, 32, 8), False),
    (ops.dense_bias_relu(32, 24, 8), True),    # the epilogue fused at the channel tile
])
def test_vector_channel_sketch_only_where_it_fills_vectors(wl, expect):
    # the cases are written for 16 fp32 lanes: name such a CPU, whatever the host
    sp = DesignSpace(wl, Target("llvm -mcpu=skylake-avx512 -num-cores=2"))
    assert bool(_channel_sketches(sp)) == expect
    assert DesignSpace(wl, GPU).sketches and not _channel_sketches(DesignSpace(wl, GPU))


def test_expert_conv_uses_the_channel_sketch_when_rows_are_narrow():
    for name in ("C9", "C12"):
        trace = expert_trace(ops.resnet18_conv(name), CPU)
        assert "transform_layout" in kinds(trace)
    assert "transform_layout" not in kinds(expert_trace(ops.gemm(64, 96, 40), CPU))


def test_cpu_tiling_fuses_an_elementwise_consumer_instead_of_a_cache():
    sketches = DesignSpace(ops.dense_bias_relu(6, 8, 10), CPU).sketches
    assert len(sketches) == 3
    for s in sketches:
        assert "cache_write" not in kinds(s.trace)
    assert sum("reverse_compute_at" in kinds(s.trace) for s in sketches) == 2


def test_gpu_tiling_binds_caches_and_fetches_cooperatively():
    sch = DesignSpace(ops.gemm(32, 32, 16), GPU).sketches[0]
    text = sch.script()
    for tag in ("blockIdx.x", "vthread.x", "threadIdx.x"):
        assert f'"{tag}"' in text
    assert blocks(sch) == ["A_shared", "B_shared", "C", "C_local"]
    fetch = [i for i in sch.trace.insts if i.kind == "annotate"
             and i.inputs[1] == A.COOPERATIVE_FETCH]
    assert len(fetch) == 2
    cat = next(i for i in sch.trace.insts if i.kind == "sample_categorical")
    assert cat.inputs[0] == [1, 2, 3, 4]   # fp32: at most 16 bytes per vector load


def test_tiling_skips_blocks_without_reuse():
    for wl in (ops.row_sum(4, 8), ops.elementwise(4, 8), ops.transpose(4, 8)):
        sk = space(wl, CPU, MultiLevelTiling()).sketches
        assert len(sk) == 1 and "split" not in kinds(sk[0].trace)


# ------------------------------------------------------------------ parallel-vectorize-unroll

def test_pvu_annotates_every_block_with_one_unroll_decision():
    sch = space(ops.softmax(4, 8), CPU, ParallelizeVectorizeUnroll()).sketches[0]
    assert kinds(sch.trace).count("sample_categorical") == 1
    for name in blocks(sch):
        ann = A.block_annotations(sch.func, name)
        assert ann[A.PARALLEL] == 32 and ann[A.VECTORIZE] == 64 and A.UNROLL_EXPLICIT in ann


def test_pvu_samples_no_unroll_for_purely_spatial_functions():
    sch = space(ops.elementwise(4, 8), CPU, ParallelizeVectorizeUnroll()).sketches[0]
    assert "sample_categorical" not in kinds(sch.trace)


def test_rewrite_parallel_vectorize_unroll_makes_loop_kinds():
    wl = ops.gemm(64, 64, 64)
    sp = DesignSpace(wl, CPU)
    trace = sketch_with_write_cache(sp, 2)
    idx = trace.sampling_indices()
    trace = (trace.with_decision(idx[0], [2, 4, 1, 8]).with_decision(idx[1], [2, 1, 1, 32])
             .with_decision(idx[2], [1, 64]).with_decision(idx[3], 1))   # unroll <= 16
    sch = sp.apply(trace)
    got = {name: (kind, ext) for name, kind, ext in loops(sch)}
    assert got["i_0_j_0_i_1_j_1_fused"] == ("parallel", 16)   # fused until j_1 holds two nests
    assert got["j_3"] == ("vectorized", 32) and got["i_3"] == ("unrolled", 8)
    assert got["k_1"] == ("serial", 64)            # 64 x 8 > 16: stays a loop
    assert got["j_3_init"] == ("vectorized", 32)   # init keeps the kinds (decomposed)
    check_on_interp(sch, wl)


def test_parallel_vectorize_plan():
    sch = Schedule(ops.elementwise(6, 10))
    assert plan_parallel_vectorize(sch.func, "C", 32, 64) == (0, 2)   # vector first
    assert plan_parallel_vectorize(sch.func, "C", 32, 8) == (2, 0)
    sch = Schedule(ops.transpose(6, 9))   # B[i, j] = A[j, i]: j is contiguous in B only
    assert plan_parallel_vectorize(sch.func, "B", None, 64) == (-1, 1)


def test_unroll_plan_counts_statements_like_tvm():
    root = Schedule(ops.gemm(4, 8, 3)).func.body
    assert unroll_plan(root, 96)[3] == ["k", "j", "i"]     # 3, 24, 96 statements
    assert unroll_plan(root, 24)[3] == ["k", "j"]
    assert unroll_plan(root, 2)[3] == []


# ------------------------------------------------------------------ random compute location

def test_random_compute_location_places_the_padding():
    wl = ops.conv2d(1, 2, 4, 4, 2, 3, 3, padding=1)
    sp = DesignSpace(wl, CPU)
    seen = set()
    for sch in sp.sample(10, seed=5):
        i = next(i for i in sch.trace.sampling_indices()
                 if sch.trace.insts[i].kind == "sample_compute_location")
        seen.add(sch.trace.decisions[i])
        check_on_interp(sch, wl)
    assert len(seen) > 2


def test_random_compute_location_skips_tiled_and_output_blocks():
    sch = space(ops.gemm(8, 8, 8), CPU, MultiLevelTiling(), RandomComputeLocation()).sketches[0]
    assert "sample_compute_location" not in kinds(sch.trace)


# ------------------------------------------------------------------ GPU rules

def test_cross_thread_reduction_binds_the_reduction_to_threads():
    wl = ops.row_sum(4, 256)
    sp = DesignSpace(wl, GPU)
    assert len(sp.sketches) == 2
    crt = [s for s in sp.sketches if "sample_categorical" in kinds(s.trace)
           and any(i.kind == "bind" for i in s.trace.insts[:12])]
    assert crt
    for sch in sp.sample(6, seed=1):
        check_on_interp(sch, wl)


def test_auto_bind_samples_thread_counts_and_splits_huge_loops_three_ways():
    sch = space(ops.elementwise(64, 64), GPU, AutoBind()).sketches[0]
    cat = next(i for i in sch.trace.insts if i.kind == "sample_categorical")
    assert cat.inputs[0] == [32, 64, 128, 256, 512, 1024]
    small = Target("cuda", max_threads_per_block=32)
    sch = space(ops.elementwise(100, 100), small, AutoBind(max_threadblocks=4)).sketches[0]
    got = {name: (kind, ext) for name, kind, ext in loops(sch)}
    assert [v for v in got.values() if v[0] == "thread"] == [("thread", 4), ("thread", 32)]
    assert list(got.values())[-1] == ("serial", 79)    # 10000 / (4 * 32), rounded up


# ------------------------------------------------------------------ GPU postprocessors

def test_cooperative_fetch_splits_binds_and_vectorizes():
    wl = ops.gemm(32, 32, 16)
    sp = DesignSpace(wl, GPU)
    for sch in sp.sample(3, seed=2):
        text = sch.script()
        assert "cooperative_fetch" not in text
        copies = [n for n, p in walk_stmt(sch.func.body) if isinstance(n, For)
                  and n.kind == "thread" and n.thread == "threadIdx.x"]
        assert len(copies) == 3          # the tile's threads, and each copy's
        assert len({c.extent for c in copies}) == 1
        check_on_interp(sch, wl)


def test_unbound_blocks_get_threads():
    wl = ops.transpose(6, 9)
    sp = DesignSpace(wl, GPU, rules=[], postprocs=[RewriteUnboundBlock(), VerifyGPUCode()])
    sch = sp.sample(1)[0]
    assert '"blockIdx.x"' in sch.script() and '"threadIdx.x"' in sch.script()
    check_on_interp(sch, wl)


def _gpu_sched(threads=(16, 16), vec=None, shared=None):
    wl = ops.gemm(64, 64, 16)
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    bx, tx = sch.split(i, [None, threads[0]])
    by, ty = sch.split(j, [None, threads[1]])
    sch.reorder(bx, by, tx, ty)
    sch.bind(sch.fuse(bx, by), "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.bind(ty, "threadIdx.y")
    if shared:
        a = sch.cache_read(c, 0, "shared")
        sch.compute_at(a, ty)
    return sch


def _verify(sch, target=GPU):
    v = VerifyGPUCode()
    v.initialize(target)
    v.apply(sch)


def test_verify_gpu_limits_with_reasons():
    _verify(_gpu_sched())
    # (bind itself refuses CUDA's 1024: see tests/test_gpu_lowering.py)
    with pytest.raises(PostprocError, match="uses 1024 threads per block, more than the "
                                            "target's 512"):
        _verify(_gpu_sched((32, 32)), Target("cuda", max_threads_per_block=512))
    # a shared tile of A: 16 rows x 16 (all of k) floats = 1024 bytes
    _verify(_gpu_sched(shared=True), Target("cuda", max_shared_memory_per_block=1024))
    with pytest.raises(PostprocError, match="needs 1024 bytes of shared memory per block, "
                                            "more than the target's 1000"):
        _verify(_gpu_sched(shared=True), Target("cuda", max_shared_memory_per_block=1000))
    sch = Schedule(ops.elementwise(8, 64))
    i, j = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    jo, ji = sch.split(j, [None, 8])
    sch.bind(jo, "threadIdx.x")
    sch.vectorize(ji)
    with pytest.raises(PostprocError, match="moves 32 bytes at once; GPU vectors hold at most 16"):
        _verify(sch)
    with pytest.raises(PostprocError, match="is not bound to GPU threads"):
        _verify(Schedule(ops.elementwise(8, 8)))


def test_reduction_init_is_split_from_the_update():
    wl = ops.batch_matmul(2, 4, 8, 6)
    for sch in DesignSpace(wl, CPU).sample(5, seed=9):
        reductions = [n.block for n, _ in walk_stmt(sch.func.body)
                      if isinstance(n, BlockRealize) and n.block.is_reduction]
        assert reductions and all(b.init is None for b in reductions)
        assert "C_init" in blocks(sch)


def test_postprocessors_are_idempotent():
    wl = ops.gemm(16, 16, 8)
    sp = DesignSpace(wl, CPU)
    sch = sp.sample(1, seed=0)[0]
    before = sch.script()
    for p in (RewriteParallelVectorizeUnroll(), RewriteReductionBlock(),
              RewriteCooperativeFetch()):
        p.initialize(CPU)
        p.apply(sch)
    assert sch.script() == before
