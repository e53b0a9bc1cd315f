"""``explorer show --source`` / ``--asm``: the best record's kernel rebuilt and printed."""
from __future__ import annotations

from explorer import Schedule, build, cli, ops
from explorer.database import Database, TuningRecord


def _gpu_gemm(wl):
    """A small gemm bound to blocks and threads (correct on the race-checking interpreter)."""
    sch = Schedule(wl)
    i, j, _ = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, i1, j1)
    sch.bind(i0, "blockIdx.x")
    sch.bind(j0, "blockIdx.y")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    return sch


def _db(tmp_path, wl):
    db = Database(tmp_path / "db")
    db.commit_workload(wl)
    cpu = Schedule(wl)
    i, j, k = cpu.get_loops(cpu.get_block("C"))
    cpu.reorder(i, k, j)
    cpu.vectorize(j)
    gpu = _gpu_gemm(wl)
    for sch, target in ((cpu, "llvm"), (gpu, "cuda")):
        args = wl.make_args(0)
        build(sch, "interp")(*args)
        wl.check(args)                       # the schedules shown are correct ones
        db.commit_record(TuningRecord(wl.key, target, sch.trace.as_json(), (1e-4,), trial=0))
    return tmp_path / "db"


def test_source_prints_cuda_c_and_llvm_ir_of_the_best(tmp_path, capsys):
    wl = ops.get("gemm", 16, 16, 16)
    path = _db(tmp_path, wl)
    assert cli.main(["show", "--db", str(path), "--source"]) == 0
    out = capsys.readouterr().out
    assert "--- CUDA C of the best gemm" in out and "--- LLVM IR of the best gemm" in out
    cuda = out.split("--- CUDA C")[1].split("\n---")[0]
    assert '__global__' in cuda and "threadIdx.x" in cuda and "blockIdx.y" in cuda
    llvm = out.split("--- LLVM IR")[1].split("\n---")[0]
    assert "define void @" in llvm and "x float>" in llvm     # j vectorized: a vector type


def test_asm_prints_machine_code_for_llvm_and_says_why_not_for_cuda(tmp_path, capsys):
    wl = ops.get("gemm", 16, 16, 16)
    path = _db(tmp_path, wl)
    assert cli.main(["show", "--db", str(path), "--asm"]) == 0
    out = capsys.readouterr().out
    assert "--- assembly of the best gemm" in out and "\tret" in out
    assert "--asm shows LLVM's assembly; this record is for cuda: use --source" in out


def test_a_kernel_that_cannot_be_built_is_named_not_a_crash(tmp_path, capsys):
    """A record filed under cuda whose schedule binds no loop to a thread: the row is
    shown and the reason replaces the source; the command still succeeds."""
    wl = ops.get("gemm", 16, 16, 16)
    db = Database(tmp_path / "db")
    db.commit_workload(wl)
    db.commit_record(TuningRecord(wl.key, "cuda", Schedule(wl).trace.as_json(), (1e-4,),
                                  trial=0))
    assert cli.main(["show", "--db", str(tmp_path / "db"), "--source"]) == 0
    out = capsys.readouterr().out
    assert "cannot be rebuilt here" in out and "blockIdx" in out and "Traceback" not in out


def test_a_reader_that_leaves_early_is_no_error(tmp_path):
    """``explorer show --source | head``: the closed pipe ends the command quietly."""
    import subprocess
    import sys
    path = _db(tmp_path, ops.get("gemm", 16, 16, 16))
    p = subprocess.Popen([sys.executable, "-m", "explorer.cli", "show", "--db", str(path),
                          "--source"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()                       # before the command writes its first line
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0 and err == ""
