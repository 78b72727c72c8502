#!/usr/bin/env bash
# Installs what cudrv needs to build, test and document itself on Debian or Ubuntu, when missing:
# cmake, g++, make, Catch2, Doxygen, nlohmann-json, CLI11, Python's jsonschema (the cudrv-query tests
# validate its JSON with it) and Open MPI (headers, library and mpirun: the cudrv::mpi component and its
# tests under mpiexec); for CI's extra build trees (.ci/run, docs/reliability.md): clang (Debian's clang++),
# libclang-rt-dev (clang's compiler-rt: libFuzzer and the sanitizer runtimes, libclang_rt.fuzzer*.a) and
# llvm (llvm-symbolizer, which names the frames of clang-built sanitizer reports); clang-format-14 and
# clang-tidy-14 (scripts/format.sh, scripts/tidy.sh: CI's format check and clang-tidy over src/). g++'s own sanitizer
# runtimes (libasan, libubsan) come with g++. The CUDA toolkit (with NCCL's header, nccl.h) must already be installed; this
# script only checks for it.
#
# Idempotent: when everything is present it returns at once, without apt-get or network access.
# Runs apt-get through sudo when not root. Environment:
#   CUDAToolkit_ROOT, CUDA_PATH   where the CUDA toolkit is (default /usr/local/cuda)
#   CUDRV_SKIP_DEPS=1             do nothing (for machines managed some other way)
# It also makes the project's Python environment .venv (python3 -m venv, then pip; Debian's pip refuses
# system-wide installs) and installs the DLPack header into it: the wheel apache-tvm-ffi (pip install
# --no-deps, about 3 MB) carries dlpack/dlpack.h 1.x, which CMake finds there for <cudrv/dlpack.hpp>
# (Debian's libdlpack-dev is 0.6, without the versioned struct). Without network the build goes on
# without DLPack. With --plot it also installs matplotlib into .venv, for scripts/plot-examples.py.
set -euo pipefail
plot=0
for arg in "$@"; do
  case "$arg" in
    --plot) plot=1 ;;
    *) printf 'install-deps: unknown option %s (known: --plot)\n' "$arg" >&2; exit 1 ;;
  esac
done

say() { printf 'install-deps: %s\n' "$*"; }
die() { printf 'install-deps: error: %s\n' "$*" >&2; exit 1; }

if [[ "${CUDRV_SKIP_DEPS:-0}" == "1" ]]; then
  say "CUDRV_SKIP_DEPS=1: not checking dependencies"
  exit 0
fi

# --- the CUDA toolkit (never installed here) ------------------------------------------------------
cuda_root=""
for candidate in "${CUDAToolkit_ROOT:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
  if [[ -n "$candidate" && -f "$candidate/include/cuda.h" ]]; then
    cuda_root="$candidate"
    break
  fi
done
if [[ -z "$cuda_root" ]]; then
  die "the CUDA toolkit was not found (looked for include/cuda.h under \$CUDAToolkit_ROOT, \$CUDA_PATH and /usr/local/cuda).
  Install the CUDA toolkit 12.0 or newer (https://developer.nvidia.com/cuda-downloads), or set
  CUDAToolkit_ROOT to its directory. A GPU and a driver are not needed to build."
fi
if [[ ! -f "$cuda_root/include/cudaTypedefs.h" ]]; then
  die "$cuda_root/include/cudaTypedefs.h is missing: the CUDA toolkit at $cuda_root is incomplete or older than 12.0"
fi
# NCCL's header (the NCCL layer is compiled against it; NCCL itself is loaded at run time).
if [[ ! -f "$cuda_root/include/nccl.h" && ! -f /usr/include/nccl.h && ! -f /usr/local/include/nccl.h &&
      -z "${CUDRV_NCCL_INCLUDE_DIR:-}" ]]; then
  die "NCCL's header nccl.h was not found in $cuda_root/include, /usr/include or /usr/local/include.
  Install NCCL's development files (NVIDIA's libnccl-dev package from the CUDA repository), or pass
  -DCUDRV_NCCL_INCLUDE_DIR=<folder of nccl.h> to CMake and set CUDRV_NCCL_INCLUDE_DIR here."
fi

# --- packages ---------------------------------------------------------------------------------------
# Each entry: the Debian/Ubuntu package, and a check that passes when the tool or headers are present
# without the package (a CMake from pip or Kitware, Catch2 built from source, ...).
have_pkg() { dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'; }
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_header() {
  local h
  for h in "$@"; do
    [[ -f "/usr/include/$h" || -f "/usr/local/include/$h" ]] && return 0
  done
  return 1
}

have_python_module() {
  local py
  for py in "$(command -v python3 2>/dev/null || true)" /usr/bin/python3; do
    [[ -n "$py" && -x "$py" ]] && "$py" -c "import $1" 2>/dev/null && return 0
  done
  return 1
}

present() {
  case "$1" in
    cmake) have_cmd cmake ;;
    g++) have_cmd g++ ;;
    make) have_cmd make ;;
    doxygen) have_cmd doxygen ;;
    catch2) have_header catch2/catch.hpp catch2/catch_all.hpp catch2/catch_test_macros.hpp ;;
    nlohmann-json3-dev) have_header nlohmann/json.hpp ;;
    libcli11-dev) have_header CLI/CLI.hpp ;;
    # Any python3 that imports jsonschema will do (a pip or pyenv one included).
    python3-jsonschema) have_python_module jsonschema ;;
    # Open MPI's launcher (any MPI's mpirun or mpiexec will do).
    openmpi-bin) have_cmd mpirun || have_cmd mpiexec ;;
    # MPI's headers and library, found by CMake's FindMPI through the compiler wrapper mpicc (or an
    # mpi.h in the standard include directories, as some MPIs install it).
    libopenmpi-dev) have_cmd mpicc || have_header mpi.h ;;
    # A python3 whose venv module can make an environment with pip.
    python3-venv) have_python_module ensurepip ;;
    clang) have_cmd clang++ ;;
    # libFuzzer's archive, in clang's resource folder (lib/linux/libclang_rt.fuzzer-x86_64.a up to LLVM 15,
    # lib/<target>/libclang_rt.fuzzer.a later).
    libclang-rt-dev) have_cmd clang++ && compgen -G "$(clang++ -print-resource-dir)/lib/*/libclang_rt.fuzzer*.a" >/dev/null ;;
    llvm) have_cmd llvm-symbolizer ;;
    # The style tools, version 14 exactly (another version formats differently): scripts/format.sh, scripts/tidy.sh.
    clang-format-14) have_cmd clang-format-14 ;;
    clang-tidy-14) have_cmd clang-tidy-14 ;;
    *) return 1 ;;
  esac
}

packages=(cmake g++ make catch2 doxygen nlohmann-json3-dev libcli11-dev python3-jsonschema libopenmpi-dev openmpi-bin
          python3-venv clang libclang-rt-dev llvm clang-format-14 clang-tidy-14)
missing=()
for pkg in "${packages[@]}"; do
  if ! have_pkg "$pkg" && ! present "$pkg"; then
    missing+=("$pkg")
  fi
done

# Doxygen only adds the `docs` target and its test; without it the build and the other tests work.
# python3-venv only brings the DLPack header (and --plot's matplotlib).
optional=" doxygen python3-venv "
still_missing() {
  local pkg out=()
  for pkg in "${missing[@]}"; do
    if ! have_pkg "$pkg" && ! present "$pkg"; then
      out+=("$pkg")
    fi
  done
  printf '%s\n' "${out[@]}"
}

if ((${#missing[@]} > 0)); then
  have_cmd apt-get || die "missing: ${missing[*]}; this script installs them only with apt-get (Debian/Ubuntu)"
  sudo=()
  if [[ "$(id -u)" -ne 0 ]]; then
    have_cmd sudo || die "missing: ${missing[*]}; run as root or install sudo"
    sudo=(sudo)
  fi
  say "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
         "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
           "${missing[@]}"; }; then
    say "apt-get failed (no network or no such package?)"
  fi
  required_left=()
  while IFS= read -r pkg; do
    [[ -z "$pkg" ]] && continue
    if [[ "$optional" == *" $pkg "* ]]; then
      say "warning: $pkg is not installed; continuing without it (no 'docs' target)"
    else
      required_left+=("$pkg")
    fi
  done < <(still_missing)
  if ((${#required_left[@]} > 0)); then
    die "still missing: ${required_left[*]}; install these packages by hand"
  fi
fi

# --- versions that matter -----------------------------------------------------------------------------
cmake_version="$(cmake --version | sed -n 's/^cmake version \([0-9][0-9.]*\).*/\1/p')"
if [[ -z "$cmake_version" ]] || ! printf '3.25\n%s\n' "$cmake_version" | sort -V -C; then
  die "CMake ${cmake_version:-?} is too old: cudrv needs 3.25 or newer (on Ubuntu 22.04: pip install cmake,
  or the Kitware APT repository https://apt.kitware.com)"
fi

say "ok: CUDA toolkit at $cuda_root, cmake $cmake_version, $(g++ -dumpfullversion 2>/dev/null | sed 's/^/g++ /'), $(clang++ -dumpversion 2>/dev/null | sed 's/^/clang++ /')"
if [[ "$cuda_root" != /usr/local/cuda && "${CUDAToolkit_ROOT:-}" != "$cuda_root" ]]; then
  say "note: the toolkit is not at /usr/local/cuda; export CUDAToolkit_ROOT=$cuda_root before running cmake"
fi

# --- the project's Python environment .venv: the DLPack header, and matplotlib with --plot -------------
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
make_venv() {
  [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
}
dlpack_header() {
  compgen -G "$venv/lib/python3*/site-packages/tvm_ffi/include/dlpack/dlpack.h" | head -n 1
}
if [[ -n "$(dlpack_header)" ]]; then
  say "ok: DLPack header at $(dlpack_header)"
elif ! make_venv; then
  say "warning: python3 -m venv $venv failed; building without DLPack (<cudrv/dlpack.hpp> and its tests)"
elif ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps apache-tvm-ffi; then
  say "warning: pip could not install apache-tvm-ffi into $venv (no network?); building without DLPack"
elif [[ -n "$(dlpack_header)" ]]; then
  say "ok: DLPack header installed at $(dlpack_header)"
else
  say "warning: apache-tvm-ffi installed but carries no tvm_ffi/include/dlpack/dlpack.h; building without DLPack"
fi

if [[ "$plot" == 1 ]]; then
  if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "import matplotlib" 2>/dev/null; then
    say "ok: $venv has matplotlib"
  else
    make_venv || die "python3 -m venv $venv failed"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "matplotlib>=3.5" ||
      die "pip could not install matplotlib into $venv (no network?)"
    say "ok: matplotlib installed into $venv"
  fi
fi
