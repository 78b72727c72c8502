#!/usr/bin/env bash
# Builds NVIDIA's nvbandwidth (github.com/NVIDIA/nvbandwidth) beside cudrv, for the comparison runs of
# scripts/gpu-suite.sh --only bandwidth (docs/cudrv-query.md, "Against nvbandwidth"): the figures of
# cudrv-query --bandwidth beside nvbandwidth's own, from one call on the GPU machine. Needs nvcc,
# cmake, a C++17 compiler and Boost's program_options development files; no GPU.
#
# The binary goes to $BUILD/nvbandwidth (default ./build/nvbandwidth, an ignored folder: the build
# tree carries it to the GPU machine), stripped, built for one GPU architecture: $NVBANDWIDTH_ARCH
# (default 90, Hopper). Boost's program_options is linked statically (nvbandwidth's own CMake does so
# outside Fedora), so the binary needs nothing on the GPU machine beyond the driver (libcuda.so.1,
# libnvidia-ml.so.1; the CUDA runtime is linked statically too). $BUILD/nvbandwidth/BUILD-INFO
# records the commit built, the toolkit and Boost used. The source is unpacked into a temporary folder
# and removed afterwards: nvbandwidth's source and binary are never committed to cudrv.
#
# Where the source comes from (the first that applies):
#   --source DIR   a checkout of nvbandwidth, or a git directory (bare or not) holding it; with a git
#                  directory, --rev REV (default HEAD) names the commit, exported with git archive;
#   otherwise      git clone --depth 1 of https://github.com/NVIDIA/nvbandwidth.git ($NVBANDWIDTH_URL),
#                  which needs network access.
# NVML: nvbandwidth includes nvml.h and links libnvidia-ml. Without the toolkit's NVML header, the
# header of PyPI's nvidia-nvml-dev package is installed with pip into the temporary folder; without an
# NVML library to link (no toolkit stub, no driver), a stand-in that names the NVML functions
# nvbandwidth's objects call is made and linked, so that the GPU machine's libnvidia-ml.so.1 provides
# them (BUILD-INFO says which happened).
# Boost: when libboost_program_options.a is missing, the script installs the Debian/Ubuntu package
# libboost-program-options-dev with apt-get (as root, or through sudo); CI never runs this script.
# Run it by hand on the machine that builds cudrv, before copying the build tree to the GPU machine:
#   scripts/build-nvbandwidth.sh                                # clone, build for sm_90
#   scripts/build-nvbandwidth.sh --source ~/src/nvbandwidth     # a checkout you have
#   NVBANDWIDTH_ARCH=100 BUILD=build-rel scripts/build-nvbandwidth.sh
# Environment: BUILD, NVBANDWIDTH_ARCH, CUDA_HOME (default /usr/local/cuda), JOBS (default: the
# processor count).
# Exit status: 0 built, 1 a build step failed, 2 a usage error or a missing tool.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
dest=$build/nvbandwidth
source_dir=
rev=HEAD
url=${NVBANDWIDTH_URL:-https://github.com/NVIDIA/nvbandwidth.git}
arch=${NVBANDWIDTH_ARCH:-90}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
jobs=${JOBS:-$(nproc 2> /dev/null || echo 2)}

usage() {
  sed -n '2,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}
while [ $# -gt 0 ]; do
  case $1 in
    --source) source_dir=${2:?--source takes a folder}; shift ;;
    --rev) rev=${2:?--rev takes a commit}; shift ;;
    -h | --help) usage 0 ;;
    *) echo "build-nvbandwidth: unknown argument $1" >&2; usage 2 ;;
  esac
  shift
done

need() {
  command -v "$1" > /dev/null || { echo "build-nvbandwidth: $1 not found ($2)" >&2; exit 2; }
}
need cmake "install cmake 3.20 or newer"
need git "install git"
need strip "install binutils"
[ -x "$cuda_home/bin/nvcc" ] || { echo "build-nvbandwidth: no nvcc in $cuda_home/bin (set CUDA_HOME)" >&2; exit 2; }
# nvbandwidth links -lcuda and -lnvidia-ml: the toolkit's stubs stand in for the driver's libraries.
stubs=$cuda_home/lib64/stubs
[ -f "$stubs/libcuda.so" ] || { echo "build-nvbandwidth: no libcuda.so stub in $stubs" >&2; exit 2; }

boost_static() {
  find /usr/lib /usr/local/lib -name 'libboost_program_options.a' 2> /dev/null | head -n 1
}
if [ -z "$(boost_static)" ]; then
  echo "build-nvbandwidth: installing libboost-program-options-dev (Boost's program_options, static)"
  sudo=
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  need apt-get "install Boost's program_options development files (libboost-program-options-dev)"
  $sudo apt-get install -y -q libboost-program-options-dev > /dev/null ||
    { echo "build-nvbandwidth: apt-get install libboost-program-options-dev failed" >&2; exit 2; }
  [ -n "$(boost_static)" ] || { echo "build-nvbandwidth: no libboost_program_options.a after the install" >&2; exit 2; }
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/nvbandwidth.XXXXXX")
trap 'rm -rf "$work"' EXIT
src=$work/src
mkdir -p "$src"
if [ -n "$source_dir" ] && git --git-dir="$source_dir" rev-parse --git-dir > /dev/null 2>&1; then
  gitdir=$source_dir # a bare repository, or the .git folder of a checkout
elif [ -n "$source_dir" ] && [ -d "$source_dir/.git" ]; then
  gitdir=$source_dir/.git
elif [ -n "$source_dir" ]; then
  [ -f "$source_dir/nvbandwidth.cpp" ] || { echo "build-nvbandwidth: $source_dir holds no nvbandwidth source" >&2; exit 2; }
  gitdir=
  cp -a "$source_dir/." "$src/"
  commit="unknown (a copy of $source_dir without git)"
else
  echo "build-nvbandwidth: cloning $url"
  git clone --quiet --depth 1 "$url" "$work/clone"
  gitdir=$work/clone/.git
fi
if [ -n "${gitdir:-}" ]; then
  commit=$(git --git-dir="$gitdir" rev-parse --verify "$rev^{commit}")
  git --git-dir="$gitdir" archive "$commit" | tar -x -C "$src"
fi
[ -f "$src/CMakeLists.txt" ] && [ -f "$src/nvbandwidth.cpp" ] ||
  { echo "build-nvbandwidth: the source has no CMakeLists.txt and nvbandwidth.cpp" >&2; exit 2; }
version=$(sed -n 's/^#define NVBANDWIDTH_VERSION *"\{0,1\}\([^" ]*\).*/\1/p' "$src/version.h" | head -n 1)

# NVML: the toolkit's stub, else the driver's library, else (a toolkit without the NVML stub and no
# driver, as on a build machine without a GPU) a stand-in libnvidia-ml.so.1 made here that defines
# the NVML functions nvbandwidth's objects call, so that the binary names them for the GPU machine's
# libnvidia-ml.so.1 to provide (see build below).
link_flags="-L$stubs"
nvml=
for candidate in "$stubs/libnvidia-ml.so" /usr/lib/x86_64-linux-gnu/libnvidia-ml.so /usr/lib64/libnvidia-ml.so; do
  [ -f "$candidate" ] && { nvml=$candidate; break; }
done
[ -n "$nvml" ] && link_flags="$link_flags -L$(dirname "$nvml")"

# nvml.h: the toolkit's, else the one of PyPI's nvidia-nvml-dev package (NVIDIA's NVML headers),
# installed with pip into the temporary folder.
nvml_include=
for candidate in "$cuda_home/include" "$cuda_home"/targets/*/include; do
  [ -f "$candidate/nvml.h" ] && { nvml_include=$candidate; break; }
done
if [ -z "$nvml_include" ]; then
  need python3 "install Python 3 and pip, or the toolkit's NVML development files"
  echo "build-nvbandwidth: no nvml.h in $cuda_home: installing PyPI's nvidia-nvml-dev into a temporary folder"
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$work/nvml-dev" \
    "nvidia-nvml-dev<14" > "$work/pip.log" 2>&1 || { cat "$work/pip.log" >&2; echo "build-nvbandwidth: pip failed" >&2; exit 2; }
  nvml_include=$(dirname "$(find "$work/nvml-dev" -name nvml.h | head -n 1)")
  [ -f "$nvml_include/nvml.h" ] || { echo "build-nvbandwidth: the package has no nvml.h" >&2; exit 2; }
fi

echo "build-nvbandwidth: nvbandwidth ${version:-?} at $commit, sm_$arch, $jobs jobs"
start=$(date +%s)
# An exported tree has no .git: nvbandwidth's CMake asks git describe for its version string, which
# then comes out empty; the commit is in BUILD-INFO instead.
build() { # $1: the linker flags
  nice -n 5 cmake -S "$src" -B "$work/out" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DCMAKE_CUDA_COMPILER="$cuda_home/bin/nvcc" -DCMAKE_EXE_LINKER_FLAGS="$1" \
    -DCMAKE_CXX_FLAGS="-I$nvml_include" -DCMAKE_CUDA_FLAGS="-I$nvml_include" >> "$work/cmake.log" 2>&1 &&
    nice -n 5 cmake --build "$work/out" -j "$jobs" >> "$work/make.log" 2>&1
}
failed() {
  tail -n 40 "$work/cmake.log" "$work/make.log" >&2 2> /dev/null
  echo "build-nvbandwidth: the build failed" >&2
  exit 1
}
if [ -n "$nvml" ]; then
  build "$link_flags" || failed
else
  # First the objects (the link told to let NVML's names be), then a stand-in library with those
  # names, then the link again against it.
  need cc "install a C compiler"
  mkdir -p "$work/nvml"
  echo 'void cudrv_nvml_stand_in(void) {}' > "$work/nvml/stand-in.c"
  cc -shared -fPIC -o "$work/nvml/libnvidia-ml.so" "$work/nvml/stand-in.c" -Wl,-soname,libnvidia-ml.so.1
  build "$link_flags -L$work/nvml -Wl,--unresolved-symbols=ignore-all" || failed
  names=$(find "$work/out" -name '*.o' -exec nm --undefined-only {} + | awk '$2 ~ /^nvml/ {print $2}' | sort -u)
  [ -n "$names" ] || { echo "build-nvbandwidth: nvbandwidth's objects call no NVML function?" >&2; exit 1; }
  for n in $names; do echo "void $n(void) {}"; done > "$work/nvml/stand-in.c"
  cc -shared -fPIC -o "$work/nvml/libnvidia-ml.so" "$work/nvml/stand-in.c" -Wl,-soname,libnvidia-ml.so.1
  rm -f "$work/out/nvbandwidth"
  build "$link_flags -L$work/nvml" || failed
  nvml="none here: linked against a stand-in; the GPU machine's libnvidia-ml.so.1 provides $(echo "$names" | wc -l) functions"
fi
[ -x "$work/out/nvbandwidth" ] || { echo "build-nvbandwidth: nvbandwidth was not built" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest"
strip -o "$dest/nvbandwidth" "$work/out/nvbandwidth"
if ldd "$dest/nvbandwidth" | grep -q 'libboost'; then
  echo "build-nvbandwidth: Boost was linked dynamically (the GPU machine may not have it)" >&2
  exit 1
fi
{
  echo "nvbandwidth ${version:-?}"
  echo "source ${source_dir:-$url}"
  echo "commit $commit"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(($(date +%s) - start)) s"
  echo "arch sm_$arch"
  echo "nvcc $("$cuda_home/bin/nvcc" --version | sed -n 's/.*release \([^,]*\),.*/\1/p')"
  echo "boost program_options $(basename "$(boost_static)") (static)"
  echo "nvml $nvml"
  echo "nvml.h ${nvml_include/#$work\//PyPI nvidia-nvml-dev: }"
} > "$dest/BUILD-INFO"
cat "$dest/BUILD-INFO"
readelf -d "$dest/nvbandwidth" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/needs \1/p'
echo "NVML functions from libnvidia-ml.so.1: $(nm -D --undefined-only "$dest/nvbandwidth" | grep -c ' nvml' || true)"
du -sh "$dest"
