#!/usr/bin/env bash
# Installs what cudrv needs, when missing, on Debian or Ubuntu.
#
#   scripts/install-deps.sh          what a user needs to build cudrv and run its tests (README.md): checks
#                                    the CUDA toolkit (12.4 or newer; never installed here) and CMake (3.25 or
#                                    newer); installs cmake, g++, make, Catch2, nlohmann-json and CLI11 (the
#                                    tests and cudrv-query), Python's jsonschema (the cudrv-query tests validate
#                                    its JSON with it) and python3-venv; then, in the project's Python
#                                    environment .venv, the DLPack header and, where no nccl.h is installed,
#                                    NCCL's header (see below). Also liblz4-1 and libzstd1 (present on
#                                    nearly every system), which cudrv::inspect loads to read compressed
#                                    fatbin entries.
#   scripts/install-deps.sh --ci     also what CI's stages add (.ci/run, docs/reliability.md): Doxygen (the
#                                    `docs` target and its tests), Open MPI (headers, library and mpirun: the
#                                    cudrv::mpi component and its tests under mpiexec), clang (Debian's clang++),
#                                    libclang-rt-dev (libFuzzer and clang's sanitizer runtimes), llvm
#                                    (llvm-symbolizer for clang-built sanitizer reports), clang-format-14 and
#                                    clang-tidy-14 (scripts/format.sh, scripts/tidy.sh). g++'s own sanitizer
#                                    runtimes come with g++. And cuobjdump (the toolkit's, else NVIDIA's wheel
#                                    into .venv) for the cudrv-query --inspect test.
#   scripts/install-deps.sh --plot   also matplotlib into .venv, for scripts/plot-examples.py.
#
# Idempotent: when everything is present it returns at once, without apt-get or network access.
# Runs apt-get through sudo when not root. Environment:
#   CUDAToolkit_ROOT, CUDA_PATH   where the CUDA toolkit is (default /usr/local/cuda)
#   CUDRV_NCCL_INCLUDE_DIR        a folder holding nccl.h (then no NCCL wheel is installed; CMake reads it too)
#   CUDRV_SKIP_DEPS=1             do nothing (for machines managed some other way)
# .venv is made with python3 -m venv, then pip (Debian's pip refuses system-wide installs):
# - DLPack: the wheel apache-tvm-ffi (pip install --no-deps, about 3 MB) carries dlpack/dlpack.h 1.x, which
#   CMake finds there for <cudrv/dlpack.hpp> (Debian's libdlpack-dev is 0.6, without the versioned struct).
# - NCCL: the NCCL layer (<cudrv/nccl.hpp>) is compiled against nccl.h, which a CUDA toolkit does not bring.
#   When it is in neither the toolkit, /usr/include, /usr/local/include nor $CUDRV_NCCL_INCLUDE_DIR, NCCL's
#   wheel for the toolkit's CUDA major version (nvidia-nccl-cu12 or nvidia-nccl-cu13, pip install --no-deps;
#   a download of about 300 MB, for its header and libnccl.so.2) goes into .venv, where CMake finds
#   nvidia/nccl/include/nccl.h. --no-nccl skips it.
# Without network the build goes on without DLPack and without the NCCL layer, and CMake says so.
set -euo pipefail
plot=0
ci=0
nccl=1
for arg in "$@"; do
  case "$arg" in
    --plot) plot=1 ;;
    --ci) ci=1 ;;
    --no-nccl) nccl=0 ;;
    *) printf 'install-deps: unknown option %s (known: --ci, --plot, --no-nccl)\n' "$arg" >&2; exit 1 ;;
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
  Install the CUDA toolkit 12.4 or newer (https://developer.nvidia.com/cuda-downloads), or set
  CUDAToolkit_ROOT to its directory. A GPU and a driver are not needed to build."
fi
# CUDA_VERSION in cuda.h: 1000 * major + 10 * minor (12040 is 12.4), as CMake's find_package(CUDAToolkit 12.4).
cuda_version="$(sed -n 's/^#define CUDA_VERSION \([0-9][0-9]*\).*/\1/p' "$cuda_root/include/cuda.h" | head -n 1)"
if [[ -z "$cuda_version" ]] || ((cuda_version < 12040)); then
  die "the CUDA toolkit at $cuda_root is CUDA_VERSION ${cuda_version:-?} (cuda.h): cudrv needs 12.4 or newer"
fi
cuda_major=$((cuda_version / 1000))
cuda_minor=$((cuda_version % 1000 / 10))

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

# issue 36: inspect: a shared library the dynamic loader finds by its soname.
have_library() { { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | grep -q "[[:space:]]$1 "; }
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
    # issue 36: inspect. The decompressors of compressed fatbin entries, loaded at run time by cudrv::inspect
    # (never linked: without them those entries are listed as unreadable).
    liblz4-1) have_library liblz4.so.1 ;;
    libzstd1) have_library libzstd.so.1 ;;
    *) return 1 ;;
  esac
}

# What a user needs (README.md's commands), then what CI adds (--ci).
packages=(cmake g++ make catch2 nlohmann-json3-dev libcli11-dev python3-jsonschema python3-venv
  liblz4-1 libzstd1)  # issue 36: inspect
if [[ "$ci" == 1 ]]; then
  packages+=(doxygen libopenmpi-dev openmpi-bin clang libclang-rt-dev llvm clang-format-14 clang-tidy-14)
fi
missing=()
for pkg in "${packages[@]}"; do
  if ! have_pkg "$pkg" && ! present "$pkg"; then
    missing+=("$pkg")
  fi
done

# Doxygen only adds the `docs` target and its test; without it the build and the other tests work.
# python3-venv only brings the DLPack header (and --plot's matplotlib).
optional=" doxygen python3-venv liblz4-1 libzstd1 "  # issue 36: inspect: without them, compressed entries are unreadable
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
      say "warning: $pkg is not installed; continuing without it (doxygen: no 'docs' target; python3-venv: no .venv)"
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

say "ok: CUDA toolkit $cuda_major.$cuda_minor at $cuda_root, cmake $cmake_version, $(g++ -dumpfullversion 2>/dev/null | sed 's/^/g++ /')$(
  [[ "$ci" == 1 ]] && clang++ -dumpversion 2>/dev/null | sed 's/^/, clang++ /')"
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

# NCCL's header: installed elsewhere, already in .venv, or NCCL's wheel for the toolkit's CUDA major version.
nccl_elsewhere() {
  local dir
  for dir in "$cuda_root/include" /usr/include /usr/local/include "${CUDRV_NCCL_INCLUDE_DIR:-}"; do
    if [[ -n "$dir" && -f "$dir/nccl.h" ]]; then
      printf '%s\n' "$dir/nccl.h"
      return 0
    fi
  done
  return 1
}
nccl_header() {
  compgen -G "$venv/lib/python3*/site-packages/nvidia/nccl/include/nccl.h" | head -n 1
}
nccl_wheel="nvidia-nccl-cu$cuda_major"
if nccl_elsewhere >/dev/null; then
  say "ok: NCCL header at $(nccl_elsewhere)"
elif [[ -n "$(nccl_header)" ]]; then
  say "ok: NCCL header at $(nccl_header)"
elif [[ "$nccl" == 0 ]]; then
  say "--no-nccl: no NCCL header; building without the NCCL layer (<cudrv/nccl.hpp>)"
elif ! make_venv; then
  say "warning: python3 -m venv $venv failed; building without the NCCL layer (<cudrv/nccl.hpp>)"
else
  say "installing $nccl_wheel into $venv for NCCL's header (nccl.h)"
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$nccl_wheel"; then
    say "warning: pip could not install $nccl_wheel into $venv (no network?); building without the NCCL layer"
  elif [[ -n "$(nccl_header)" ]]; then
    say "ok: NCCL header installed at $(nccl_header)"
  else
    say "warning: $nccl_wheel installed but carries no nvidia/nccl/include/nccl.h; building without the NCCL layer"
  fi
fi

# issue 36: inspect. cuobjdump, which the CPU test of cudrv-query --inspect compares with (only --ci): the
# toolkit's own when it has one, else NVIDIA's wheel nvidia-cuda-cuobjdump (CUDA 13; about 350 KB, pip install
# --no-deps) into .venv, where CMake finds nvidia/cu13/bin/cuobjdump. Without it that test skips visibly.
cuobjdump_in_venv() {
  compgen -G "$venv/lib/python3*/site-packages/nvidia/cu*/bin/cuobjdump" | head -n 1
}
if [[ "$ci" == 1 ]]; then
  if [[ -x "$cuda_root/bin/cuobjdump" ]]; then
    say "ok: cuobjdump at $cuda_root/bin/cuobjdump"
  elif [[ -n "$(cuobjdump_in_venv)" ]]; then
    say "ok: cuobjdump at $(cuobjdump_in_venv)"
  elif [[ "$cuda_major" != 13 ]]; then
    say "warning: no cuobjdump in the toolkit and no wheel for CUDA $cuda_major; the --inspect comparison skips"
  elif ! make_venv; then
    say "warning: python3 -m venv $venv failed; no cuobjdump (the --inspect comparison skips)"
  elif ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
      "nvidia-cuda-cuobjdump>=13.2,<14"; then
    say "warning: pip could not install nvidia-cuda-cuobjdump into $venv (no network?); the --inspect comparison skips"
  else
    say "ok: cuobjdump installed at $(cuobjdump_in_venv)"
  fi
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
