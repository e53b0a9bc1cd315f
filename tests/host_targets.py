"""The LLVM targets a backend test runs on: this host, and an AVX2 (Haswell) target too
when the host has AVX2 but wider vectors, so both mask and gather forms are covered on
an AVX-512 machine and nothing assumes one vector width."""
from explorer.target import Target, host


def host_and_avx2() -> list:
    out = [Target("llvm")]
    if "+avx2" in host.host_cpu()[1].split(",") and out[0].vector_bits != 256:
        out.append(Target("llvm -mcpu=haswell"))
    return out
