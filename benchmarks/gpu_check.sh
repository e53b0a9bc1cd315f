#!/usr/bin/env bash
# The GPU check: what a person with an NVIDIA GPU runs in one go, without network access.
#
#   On a machine WITH network (once; Linux x86-64, pip):
#     benchmarks/gpu_check.sh --prepare .gpu-wheels [--python "3.12 3.11"]
#   Copy the repository with its .gpu-wheels folder to the GPU machine, then there:
#     benchmarks/gpu_check.sh [--wheels .gpu-wheels] [--trials 256] [--quick]
#
# --prepare DIR downloads into DIR: pycuda's source distribution, the wheels of its
# run-time dependencies (pytools, platformdirs, mako, markupsafe, siphash24,
# typing-extensions) for each --python version, setuptools and wheel (to build it),
# xgboost-cpu and llvmlite (the engine's cost model and CPU backend, installed only if
# missing there), a copy of this toolkit's cuda.h when there is one (for a GPU machine
# without the CUDA headers), and cubins of the check kernels for sm_80, sm_86, sm_89
# and sm_90 when nvcc is here (for a GPU machine without nvcc; built by this
# toolkit's nvcc, they need a driver that supports its CUDA version).
#
# The run mode, on the GPU machine: prints nvidia-smi, the driver, whether nvcc and
# cuda.h exist; builds pycuda from DIR with `pip install --no-index --find-links DIR`
# into .gpu-check/site (the Python environment itself is not changed); then
# benchmarks/gpu_check.py checks kernels against numpy, tunes gemm 2048^3 and
# ResNet-18 C6 (--trials each, `explorer tune --target cuda`) and prints a table
# against cuBLAS/cuDNN through PyTorch or CuPy (fp32, TF32 off). Everything it
# writes is under .gpu-check/ (the report: .gpu-check/report.json).
#
# Without nvcc on the GPU machine: kernels are compiled with NVRTC where a libnvrtc is
# there (the nvidia-cuda-nvrtc wheel PyTorch and CuPy bring; the same cubins and ptxas
# report); with neither, the check kernels run from DIR's cubins (loaded with pycuda's
# module_from_buffer) and tuning, which compiles every candidate, is skipped with a
# message. Without cuda.h there: pycuda is built against DIR/include/cuda.h.
set -uo pipefail
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1

here=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
PYCUDA_VERSION=2026.1
mode=run
wheels="$here/.gpu-wheels"
pythons=""
passthrough=()

usage() { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

while [ $# -gt 0 ]; do
    case "$1" in
        --prepare) mode=prepare; wheels=${2:?--prepare needs a folder}; shift 2 ;;
        --wheels) wheels=${2:?--wheels needs a folder}; shift 2 ;;
        --python) pythons=${2:?--python needs versions such as \"3.12 3.11\"}; shift 2 ;;
        -h|--help) usage 0 ;;
        *) passthrough+=("$1"); shift ;;
    esac
done
wheels=$(mkdir -p "$wheels" && cd "$wheels" && pwd)

say() { printf '\n== %s\n' "$*"; }
fail() { printf 'gpu_check: %s\n' "$*" >&2; exit 1; }

cuda_root() {   # the CUDA toolkit's folder, or nothing
    local nvcc
    for r in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
        [ -n "$r" ] && [ -x "$r/bin/nvcc" ] && { echo "$r"; return; }
    done
    nvcc=$(command -v nvcc) && dirname "$(dirname "$nvcc")"
}

prepare() {
    local vers platforms v
    vers=${pythons:-"$($PYTHON -c 'import sys; print("%d.%d" % sys.version_info[:2])') 3.12"}
    platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
               --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
    say "pycuda $PYCUDA_VERSION source distribution -> $wheels"
    $PYTHON -m pip download -q --no-deps --no-binary pycuda -d "$wheels" \
        "pycuda==$PYCUDA_VERSION" || fail "pip download pycuda failed (is the network there?)"
    for v in $(printf '%s\n' $vers | sort -u); do
        say "wheels for Python $v"
        $PYTHON -m pip download -q -d "$wheels" --only-binary=:all: --python-version "$v" \
            --implementation cp "${platforms[@]}" pytools platformdirs mako setuptools wheel \
            || fail "pip download of pycuda's dependencies for Python $v failed"
        $PYTHON -m pip download -q -d "$wheels" --no-deps --only-binary=:all: \
            --python-version "$v" --implementation cp "${platforms[@]}" xgboost-cpu llvmlite \
            || fail "pip download of xgboost-cpu and llvmlite for Python $v failed"
    done
    local root
    root=$(cuda_root)
    if [ -n "$root" ] && [ -f "$root/include/cuda.h" ]; then
        mkdir -p "$wheels/include" && cp "$root/include/cuda.h" "$wheels/include/"
        "$root/bin/nvcc" --version | grep -o "release .*" > "$wheels/include/CUDA_VERSION.txt"
        say "cubins of the check kernels (nvcc in $root)"
        PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" $PYTHON "$here/benchmarks/gpu_check.py" \
            --make-cubins "$wheels/cubin" || fail "compiling the check kernels failed"
    else
        say "no CUDA toolkit here: no cuda.h copy and no prepared cubins"
    fi
    (cd "$wheels" && ls -1 > MANIFEST.txt && sha256sum ./*.whl ./*.tar.gz >> MANIFEST.txt)
    say "prepared $wheels:"; ls -1 "$wheels"
    du -sh "$wheels"
}

# pycuda's build reads siteconf.py beside its setup.py: the toolkit's folders, or the
# headers and a link to the driver's libcuda.so.1 when the toolkit is missing.
write_siteconf() {
    local src=$1 root=$2 inc=$3 libdirs=$4 curand=$5
    cat > "$src/siteconf.py" <<EOF
CUDA_ROOT = '${root:-/nonexistent}'
CUDA_INC_DIR = ['$inc']
CUDADRV_LIB_DIR = [$libdirs]
CUDADRV_LIBNAME = ['cuda']
CUDART_LIB_DIR = [$libdirs]
CUDART_LIBNAME = ['cudart']
CURAND_LIB_DIR = [$libdirs]
CURAND_LIBNAME = ['curand']
CUDA_ENABLE_CURAND = $curand
CUDA_ENABLE_GL = False
USE_SHIPPED_BOOST = True
CXXFLAGS = []
LDFLAGS = []
EOF
}

find_libcuda() {   # the driver's libcuda.so.1, for linking pycuda when the toolkit has no stub
    local d
    [ -n "${LIBCUDA:-}" ] && { echo "$LIBCUDA"; return; }
    d=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 .*x86-64/ {print $NF; exit}')
    [ -n "$d" ] && { echo "$d"; return; }
    for d in ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }} /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64; do
        [ -e "$d/libcuda.so.1" ] && { echo "$d/libcuda.so.1"; return; }
    done
}

install_pycuda() {
    local work=$1 site=$1/site root inc libdirs="" d curand=False sdist src jobs
    if PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" $PYTHON -c "import pycuda" 2>/dev/null; then
        say "pycuda already importable"; return 0
    fi
    sdist=$(ls "$wheels"/pycuda-*.tar.gz 2>/dev/null | head -1)
    [ -n "$sdist" ] || fail "no pycuda source distribution in $wheels: run --prepare first"
    root=$(cuda_root)
    inc="$root/include"
    if [ -z "$root" ] || [ ! -f "$inc/cuda.h" ]; then
        inc="$wheels/include"
        [ -f "$inc/cuda.h" ] || fail "no cuda.h here nor in $wheels/include: install the CUDA toolkit or --prepare on a machine that has it"
        echo "building pycuda against $inc/cuda.h ($(cat "$inc/CUDA_VERSION.txt" 2>/dev/null))"
    fi
    mkdir -p "$work/lib"
    for d in "$root/lib64/stubs" "$root/lib64" "$root/lib/stubs" "$root/lib" \
             "$root/targets/x86_64-linux/lib" "$root/targets/x86_64-linux/lib/stubs"; do
        [ -n "$root" ] && [ -d "$d" ] && libdirs="$libdirs'$d', "
        [ -n "$root" ] && [ -e "$d/libcurand.so" ] && [ -f "$inc/curand.h" ] && curand=True
    done
    if ! ls ${libdirs//[\',]/ } 2>/dev/null | grep -qx 'libcuda.so'; then
        d=$(find_libcuda)
        [ -n "$d" ] || fail "no libcuda.so.1 (the NVIDIA driver's library) in the loader's cache, LD_LIBRARY_PATH or /usr/local/nvidia/lib64: is the driver installed? (LIBCUDA=/path/to/libcuda.so.1 names it)"
        ln -sf "$d" "$work/lib/libcuda.so"
    fi
    libdirs="$libdirs'$work/lib'"
    src="$work/build/$(basename "$sdist" .tar.gz)"      # kept: a rerun only links again
    if [ ! -d "$src" ]; then
        mkdir -p "$work/build" && tar xzf "$sdist" -C "$work/build" || fail "cannot unpack $sdist"
    fi
    write_siteconf "$src" "$root" "$inc" "$libdirs" "$curand"
    build_tools "$work" || return 1
    jobs=$(nproc 2>/dev/null || echo 2)
    say "building pycuda ($jobs jobs; log: $work/pycuda-build.log)"
    (cd "$src" && PATH="${root:+$root/bin:}$PATH" $PYTHON setup.py build_ext -j "$jobs" \
        > "$work/pycuda-build.log" 2>&1) || { tail -30 "$work/pycuda-build.log"; fail "building pycuda failed (the log's end is above)"; }
    $PYTHON -m pip install -q --no-index --find-links "$wheels" --no-deps --no-build-isolation \
        --target "$site" "$src" pytools platformdirs mako markupsafe siphash24 typing_extensions \
        >> "$work/pycuda-build.log" 2>&1 \
        || { tail -30 "$work/pycuda-build.log"; fail "pip install --no-index --find-links $wheels failed"; }
}

build_tools() {   # setuptools and wheel for building pycuda, from the folder when missing
    $PYTHON -c "import setuptools, wheel, numpy" 2>/dev/null && return 0
    $PYTHON -c "import numpy" 2>/dev/null || fail "numpy is missing: pycuda and the engine need it installed"
    say "setuptools and wheel from $wheels (for the build only)"
    $PYTHON -m pip install -q --no-index --find-links "$wheels" --target "$1/buildtools" \
        setuptools wheel || fail "pip install setuptools wheel from $wheels failed"
    export PYTHONPATH="$1/buildtools${PYTHONPATH:+:$PYTHONPATH}"
}

install_engine_needs() {
    local site=$1/site name missing=()
    for name in numpy llvmlite xgboost; do
        PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" $PYTHON -c "import $name" 2>/dev/null \
            || missing+=("$name")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    [[ " ${missing[*]} " == *" numpy "* ]] && fail "numpy is missing: the engine needs it installed"
    say "installing ${missing[*]} from $wheels"
    local pkgs=("${missing[@]/xgboost/xgboost-cpu}")
    $PYTHON -m pip install -q --no-index --find-links "$wheels" --no-deps --target "$site" \
        "${pkgs[@]}" || fail "pip install ${pkgs[*]} from $wheels failed"
}

run() {
    local work="$here/.gpu-check" root
    mkdir -p "$work"
    say "machine"; date -u; uname -srm; $PYTHON --version
    say "nvidia-smi"
    if command -v nvidia-smi >/dev/null; then nvidia-smi || echo "nvidia-smi failed"
    else echo "nvidia-smi not found: is the NVIDIA driver installed?"; fi
    say "CUDA toolkit"
    root=$(cuda_root)
    if [ -n "$root" ]; then echo "nvcc: $root/bin/nvcc ($("$root/bin/nvcc" --version | grep -o "release .*"))"
    else echo "nvcc: not found (CUDA_HOME, /usr/local/cuda, PATH): NVRTC compiles if a libnvrtc is there, else prepared cubins only and no tuning"; fi
    if [ -n "$root" ] && [ -f "$root/include/cuda.h" ]; then echo "cuda.h: $root/include/cuda.h"
    else echo "cuda.h: not found in the toolkit; $wheels/include/cuda.h is used to build pycuda"; fi
    install_pycuda "$work" || exit 1
    install_engine_needs "$work" || exit 1
    say "gpu_check.py"
    PYTHONPATH="$work/site:$here${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
        $PYTHON "$here/benchmarks/gpu_check.py" --work "$work" --cubins "$wheels/cubin" \
        "${passthrough[@]}"
}

if [ "$mode" = prepare ]; then prepare; else run; fi
