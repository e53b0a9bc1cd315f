"""LLVM IR text -> machine code in this process (MCJIT), optimized at O3 for the target CPU."""
from __future__ import annotations

import threading

import llvmlite.binding as llvm

from ...errors import BuildError

_init_lock = threading.Lock()
_initialized: list = []
# llvmlite parses into LLVM's global context, which is not thread-safe: one compile at a time.
_llvm_lock = threading.RLock()


def _init() -> None:
    with _init_lock:
        if not _initialized:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _initialized.append(True)


def target_machine(target) -> "llvm.TargetMachine":
    """A fresh target machine for the target's CPU and features (MCJIT takes ownership of
    the one it is given, so every compile makes its own)."""
    _init()
    t = llvm.Target.from_triple(llvm.get_process_triple())
    return t.create_target_machine(cpu=target.mcpu, features=target.features, opt=3,
                                   reloc="default", codemodel="jitdefault", jit=True)


def optimize(text: str, target) -> tuple:
    """Parse, verify and run the O3 pipeline (new pass manager); (module, target machine)."""
    _init()
    with _llvm_lock:
        return _optimize(text, target)


def _optimize(text: str, target) -> tuple:
    try:
        mod = llvm.parse_assembly(text)
        mod.verify()
    except RuntimeError as err:
        raise BuildError(f"llvm codegen produced invalid IR ({err}); this is a code generator "
                         "bug: please report it with the loop nest") from None
    tm = target_machine(target)
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod, tm


class JitModule:
    """Machine code of one module, alive as long as this object."""

    def __init__(self, text: str, entry: str, target):
        with _llvm_lock:
            mod, tm = optimize(text, target)
            self.engine = llvm.create_mcjit_compiler(mod, tm)
            self.engine.finalize_object()
            self.address = self.engine.get_function_address(entry)
        if not self.address:
            raise BuildError(f"llvm: function {entry} not found after JIT compilation")


def assembly(text: str, target) -> str:
    """The target assembly of a module (recompiled from its IR text, for reading)."""
    with _llvm_lock:
        mod, tm = optimize(text, target)
        return tm.emit_assembly(mod)


def optimized_ir(text: str, target) -> str:
    with _llvm_lock:
        mod, _ = optimize(text, target)
        return str(mod)
