#!/usr/bin/env bash
# Builds NVIDIA's nccl-tests (github.com/NVIDIA/nccl-tests) beside cudrv, for the comparison runs of
# scripts/gpu-suite.sh --only scaleout (docs/scale-out.md, "Against nccl-tests"). Needs nvcc and the
# NCCL of the CUDA toolkit (or $NCCL_HOME), Open MPI's development files (mpicc) and make; no GPU.
#
# The binaries go to $BUILD/nccl-tests (default ./build/nccl-tests, an ignored folder: the build tree
# carries them to the GPU machine), stripped, built with MPI=1 (one rank per GPU under mpirun) for one
# GPU architecture: $NCCL_TESTS_ARCH (default 90, Hopper). $BUILD/nccl-tests/BUILD-INFO records the
# commit built, the toolkit, NCCL and MPI used. The source is unpacked into a temporary folder and
# removed afterwards: nccl-tests' source and binaries are never committed to cudrv.
#
# Where the source comes from (the first that applies):
#   --source DIR   a checkout of nccl-tests, or a git directory (bare or not) holding it; with a git
#                  directory, --rev REV (default HEAD) names the commit, exported with git archive;
#   otherwise      git clone --depth 1 of https://github.com/NVIDIA/nccl-tests.git ($NCCL_TESTS_URL),
#                  which needs network access.
# CI never runs this script (it needs the network and minutes of nvcc); run it by hand on the
# machine that builds cudrv, before copying the build tree to the GPU machine:
#   scripts/build-nccl-tests.sh                              # clone, build for sm_90
#   scripts/build-nccl-tests.sh --source ~/src/nccl-tests    # a checkout you have
#   NCCL_TESTS_ARCH=100 BUILD=build-rel scripts/build-nccl-tests.sh
# Environment: BUILD, NCCL_TESTS_ARCH, CUDA_HOME (default /usr/local/cuda), NCCL_HOME (default
# $CUDA_HOME, whose include/nccl.h and lib64/libnccl.so are the toolkit's NCCL), MPI_HOME (default:
# the folder above mpicc's include directory), JOBS (default: the processor count).
# Exit status: 0 built, 1 a build step failed, 2 a usage error or a missing tool.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
dest=$build/nccl-tests
source_dir=
rev=HEAD
url=${NCCL_TESTS_URL:-https://github.com/NVIDIA/nccl-tests.git}
arch=${NCCL_TESTS_ARCH:-90}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
nccl_home=${NCCL_HOME:-$cuda_home}
jobs=${JOBS:-$(nproc 2> /dev/null || echo 2)}
# The programs gpu-suite.sh runs, and their siblings; each is <name>_perf.
programs=(all_reduce all_gather broadcast reduce_scatter reduce alltoall scatter gather sendrecv)

usage() {
  sed -n '2,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}
while [ $# -gt 0 ]; do
  case $1 in
    --source) source_dir=${2:?--source takes a folder}; shift ;;
    --rev) rev=${2:?--rev takes a commit}; shift ;;
    -h | --help) usage 0 ;;
    *) echo "build-nccl-tests: unknown argument $1" >&2; usage 2 ;;
  esac
  shift
done

need() {
  command -v "$1" > /dev/null || { echo "build-nccl-tests: $1 not found ($2)" >&2; exit 2; }
}
need make "install make"
need git "install git"
need strip "install binutils"
need mpicc "install Open MPI's development files (Debian/Ubuntu: libopenmpi-dev)"
[ -x "$cuda_home/bin/nvcc" ] || { echo "build-nccl-tests: no nvcc in $cuda_home/bin (set CUDA_HOME)" >&2; exit 2; }
[ -f "$nccl_home/include/nccl.h" ] || { echo "build-nccl-tests: no nccl.h in $nccl_home/include (set NCCL_HOME)" >&2; exit 2; }
if [ -z "${MPI_HOME:-}" ]; then
  mpi_inc=$(mpicc --showme:incdirs 2> /dev/null | tr ' ' '\n' | head -n 1)
  MPI_HOME=$(dirname "${mpi_inc:-/usr/include/mpi}")
fi
[ -f "$MPI_HOME/include/mpi.h" ] || { echo "build-nccl-tests: no mpi.h in $MPI_HOME/include (set MPI_HOME)" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/nccl-tests.XXXXXX")
trap 'rm -rf "$work"' EXIT
src=$work/src
mkdir -p "$src"
if [ -n "$source_dir" ] && git --git-dir="$source_dir" rev-parse --git-dir > /dev/null 2>&1; then
  gitdir=$source_dir # a bare repository, or the .git folder of a checkout
elif [ -n "$source_dir" ] && [ -d "$source_dir/.git" ]; then
  gitdir=$source_dir/.git
elif [ -n "$source_dir" ]; then
  [ -f "$source_dir/src/Makefile" ] || { echo "build-nccl-tests: $source_dir holds no nccl-tests source" >&2; exit 2; }
  gitdir=
  cp -a "$source_dir/." "$src/"
  commit="unknown (a copy of $source_dir without git)"
else
  echo "build-nccl-tests: cloning $url"
  git clone --quiet --depth 1 "$url" "$work/clone"
  gitdir=$work/clone/.git
fi
if [ -n "${gitdir:-}" ]; then
  commit=$(git --git-dir="$gitdir" rev-parse --verify "$rev^{commit}")
  git --git-dir="$gitdir" archive "$commit" | tar -x -C "$src"
fi
[ -f "$src/src/Makefile" ] || { echo "build-nccl-tests: the source has no src/Makefile" >&2; exit 2; }
version=$(sed -n 's/^#define NCCL_TESTS_VERSION *"\{0,1\}\([^" ]*\).*/\1/p' "$src/src/common.h" | head -n 1)

echo "build-nccl-tests: nccl-tests ${version:-?} at $commit, sm_$arch, NCCL $nccl_home, MPI $MPI_HOME, $jobs jobs"
gencode="-gencode=arch=compute_$arch,code=sm_$arch"
start=$(date +%s)
# nccl-tests' makefiles read these as make variables; NCCL_HOME adds its include/ and lib/ folders,
# CUDA_HOME its lib64 (where the toolkit keeps libnccl.so too), MPI=1 links -lmpi from MPI_HOME.
if ! nice -n 5 make -C "$src" -j "$jobs" MPI=1 MPI_HOME="$MPI_HOME" CUDA_HOME="$cuda_home" \
  NCCL_HOME="$nccl_home" NVCC_GENCODE="$gencode" DSO=1 BUILDDIR="$work/out" > "$work/make.log" 2>&1; then
  tail -n 40 "$work/make.log" >&2
  echo "build-nccl-tests: make failed" >&2
  exit 1
fi
rm -rf "$dest"
mkdir -p "$dest"
for p in "${programs[@]}"; do
  [ -x "$work/out/${p}_perf" ] || { echo "build-nccl-tests: ${p}_perf was not built" >&2; exit 1; }
  strip -o "$dest/${p}_perf" "$work/out/${p}_perf"
done
# DSO=1: the checking code (device code for every type and operation, most of each binary's size) is
# one shared library beside the programs, which find it through their $ORIGIN run path.
strip -o "$dest/libverifiable.so.0" "$work/out/verifiable/libverifiable.so.0"
nccl_version=$(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) *\([0-9]*\).*/\2/p' "$nccl_home/include/nccl.h" | paste -sd.)
{
  echo "nccl-tests $version"
  echo "source ${source_dir:-$url}"
  echo "commit $commit"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(($(date +%s) - start)) s"
  echo "arch sm_$arch"
  echo "nvcc $("$cuda_home/bin/nvcc" --version | sed -n 's/.*release \([^,]*\),.*/\1/p')"
  echo "nccl.h $nccl_version ($nccl_home)"
  echo "mpi $(mpirun --version 2>&1 | head -n 1) ($MPI_HOME)"
  echo "programs ${programs[*]/%/_perf}"
} > "$dest/BUILD-INFO"
cat "$dest/BUILD-INFO"
ldd "$dest/all_reduce_perf" | grep -E 'libnccl|libmpi|libcudart' || true
du -sh "$dest"
