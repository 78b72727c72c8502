#!/usr/bin/env python3
"""A PyTorch operator written with cudrv, and DLPack round trips with PyTorch and CuPy.

Builds two extensions with torch.utils.cpp_extension.load() (JIT, ninja):
  cudrv_torch_op        cudrv_op.cpp, linked with the build tree's libcudrv.a: the kernel is compiled
                        at run time by cudrv::program through the compile cache and launched with
                        cudrv::launch on PyTorch's current stream;
  cudrv_torch_plain_op  plain_op.cu: the same kernel (axpby_kernel.cuh) compiled by nvcc, launched with
                        <<<>>> on the same stream (the reference of the launch-cost comparison).
Then runs every check, prints one PASS, FAIL or SKIP line each, the launch-cost figure as a line for
people and a JSON line, and exits with 1 when a check failed (2 when it cannot start at all).

  python3 examples/torch_extension/run.py [--build BUILD] [--ext-dir DIR] [--quick] [--verbose]

BUILD is the cudrv build tree (default $CUDRV_BUILD, else the repository's build/): libcudrv.a and
generated/include come from there, the headers from the repository's include/. The extensions are
built in DIR (default BUILD/torch_extension). DLPack's header is PyTorch's own (dlpack/dlpack.h, or
ATen/dlpack.h through a one-line forwarding header made in DIR), else $CUDRV_DLPACK_INCLUDE_DIR.
The kernel's cubin is cached where cudrv's compile cache is ($CUDRV_CACHE_DIR, ...).
"""

import argparse
import gc
import importlib
import json
import math
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time
import traceback

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent

KDL_CUDA = 2  # DLPack's kDLCUDA


class Skip(Exception):
    """A check that cannot run here (says why); not a failure."""


class Report:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.skipped = 0

    def run(self, name, check, *args):
        """Runs check(*args); it returns a detail string (or None) and raises on failure."""
        try:
            detail = check(*args)
        except Skip as s:
            self.skipped += 1
            print(f"SKIP {name}: {s}", flush=True)
            return False
        except Exception as e:  # noqa: BLE001 - every failure is reported, then the next check runs
            self.failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc(file=sys.stderr)
            return False
        self.passed += 1
        print(f"PASS {name}" + (f": {detail}" if detail else ""), flush=True)
        return True


def expect(condition, message):
    if not condition:
        raise AssertionError(message)


def stream_value(handle):
    """The DLPack protocol's value for a CUDA stream handle: 1 names the legacy default stream (0)."""
    return handle if handle != 0 else 1


# ------------------------------------------------------------------------------------------------
# Building

def dlpack_include(torch_includes, ext_dir):
    """A folder that makes <dlpack/dlpack.h> PyTorch's DLPack header (one DLPack in the extension)."""
    for d in torch_includes:
        if (pathlib.Path(d) / "dlpack" / "dlpack.h").is_file():
            return None  # already on PyTorch's include path
    for d in torch_includes:
        if (pathlib.Path(d) / "ATen" / "dlpack.h").is_file():
            shim = ext_dir / "dlpack_shim"
            (shim / "dlpack").mkdir(parents=True, exist_ok=True)
            header = shim / "dlpack" / "dlpack.h"
            text = "// Made by examples/torch_extension/run.py: DLPack's header is PyTorch's.\n#include <ATen/dlpack.h>\n"
            if not header.is_file() or header.read_text() != text:
                header.write_text(text)
            return shim
    env = os.environ.get("CUDRV_DLPACK_INCLUDE_DIR")
    if env and (pathlib.Path(env) / "dlpack" / "dlpack.h").is_file():
        return pathlib.Path(env)
    raise RuntimeError("no DLPack header: PyTorch's include folders hold neither dlpack/dlpack.h nor "
                       "ATen/dlpack.h, and CUDRV_DLPACK_INCLUDE_DIR names no folder holding dlpack/dlpack.h")


def cudrv_definitions(build):
    """The compile definitions libcudrv's users get from CMake (cudrv's PUBLIC ones)."""
    cache = build / "CMakeCache.txt"
    if cache.is_file() and "CUDRV_ENABLE_NVTX:BOOL=OFF" in cache.read_text(errors="replace"):
        return ["-DCUDRV_DISABLE_NVTX=1"]
    return []


def build_extensions(args, torch, cpp_extension):
    build = pathlib.Path(args.build).resolve()
    library = build / "libcudrv.a"
    generated = build / "generated" / "include"
    if not library.is_file() or not (generated / "cudrv" / "version.hpp").is_file():
        raise RuntimeError(f"{build} is not a cudrv build tree with a static libcudrv.a and generated/include "
                           "(cmake --build BUILD --target cudrv), or pass --build")
    abi = getattr(torch, "compiled_with_cxx11_abi", lambda: True)()
    if not abi:
        raise RuntimeError("this PyTorch was built with the pre-C++11 libstdc++ ABI "
                           "(_GLIBCXX_USE_CXX11_ABI=0); libcudrv.a uses the C++11 ABI: rebuild cudrv with "
                           "-D_GLIBCXX_USE_CXX11_ABI=0 to link it into this PyTorch's extensions")
    ext_dir = pathlib.Path(args.ext_dir).resolve() if args.ext_dir else build / "torch_extension"
    includes = [str(ROOT / "include"), str(generated), str(HERE)]
    shim = dlpack_include(cpp_extension.include_paths(), ext_dir)
    if shim is not None:
        includes.append(str(shim))
    # The library's time stamp is one of the flags, so that load() relinks when libcudrv.a changed.
    stamp = int(library.stat().st_mtime)
    cflags = ["-std=c++20", "-O2", f"-DCUDRV_TORCH_LIBRARY_STAMP={stamp}"] + cudrv_definitions(build)
    # cudrv loads libcuda, NVRTC and nvJitLink at run time: only the static library and dl are linked.
    # libstdc++ is named as the shared library the process already has (PyTorch loads it). Without it,
    # on the GPU machine (Ubuntu 24.04, g++ 13.3, torch 2.11) the extension came out with no NEEDED entry
    # for libstdc++ and libstdc++'s own code inside it: a second copy of the standard library whose locale
    # state mixed with the process's, and the first std::istream use in libcudrv.a crashed (SIGSEGV).
    ldflags = [str(library), "-ldl", "-l:libstdc++.so.6"]
    for sub in ("cudrv", "plain"):
        (ext_dir / sub).mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    cudrv_ext = cpp_extension.load(
        name="cudrv_torch_op", sources=[str(HERE / "cudrv_op.cpp")], extra_cflags=cflags,
        extra_ldflags=ldflags, extra_include_paths=includes, build_directory=str(ext_dir / "cudrv"),
        with_cuda=True, verbose=args.verbose)
    t1 = time.perf_counter()
    plain_ext = cpp_extension.load(
        name="cudrv_torch_plain_op", sources=[str(HERE / "plain_op.cu")], extra_cflags=["-O2"],
        extra_cuda_cflags=["-O3", "-fmad=false"], extra_ldflags=["-l:libstdc++.so.6"],
        extra_include_paths=[str(HERE)],
        build_directory=str(ext_dir / "plain"), with_cuda=True, verbose=args.verbose)
    t2 = time.perf_counter()
    for ext in (cudrv_ext, plain_ext):
        check_shared_libstdcxx(ext)
    return cudrv_ext, plain_ext, (t1 - t0, t2 - t1, ext_dir)


def check_shared_libstdcxx(ext):
    """Refuses an extension linked with a static copy of libstdc++ (see build_extensions)."""
    readelf = shutil.which("readelf")
    if readelf is None:
        return
    dynamic = subprocess.run([readelf, "-d", ext.__file__], capture_output=True, text=True, check=False).stdout
    if "libstdc++.so" not in dynamic:
        raise RuntimeError(f"{ext.__file__} was linked without the shared libstdc++ (a static copy would mix "
                           "with the one PyTorch loaded): check `g++ -print-file-name=libstdc++.so`")


# ------------------------------------------------------------------------------------------------
# The operator

def check_compile(torch, ext):
    dev = torch.cuda.current_device()
    x = torch.ones(4, device="cuda")
    ext.axpby(x, x, 1.0, 1.0)  # compiles (or reads the cache) and loads on first use
    info = ext.compile_info()
    expect(info["kernels"] >= 1, f"no kernel was compiled: {info}")
    again = ext.compile_again(dev)
    detail = (f"first use {info['compile_ms']:.1f} ms ({'cache hit' if info['cache_hit'] else 'compiled by NVRTC'}); "
              f"a new cache object over the same directory: {again['ms']:.2f} ms, {again['hits']} hit(s)")
    if not again["cache_enabled"]:
        raise Skip("the compile cache is disabled here (CUDRV_DISABLE_CACHE): " + detail)
    expect(again["hits"] == 1 and again["misses"] == 0,
           f"the second compilation was not a cache hit ({again}); cache directory {info['cache_directory']}")
    return detail + f", in {info['cache_directory']}"


def check_against_torch(torch, ext, plain, quick):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(20261127)
    shapes = [(1,), (255,), (4097,), (3, 5, 7), (1 << 20,)] + ([] if quick else [((1 << 24) + 3,)])
    worst = 0.0
    bitwise = True
    for shape in shapes:
        x = torch.randn(shape, device="cuda", generator=gen)
        y = torch.randn(shape, device="cuda", generator=gen)
        alpha, beta = (torch.rand(2, generator=gen, device="cuda") * 4 - 2).tolist()
        ref = alpha * x + beta * y
        out = torch.full_like(x, float("nan"))  # poisoned: every element must be written
        got = ext.axpby_out(x, y, out, alpha, beta)
        expect(got.data_ptr() == out.data_ptr(), "axpby_out did not return out")
        fresh = ext.axpby(x, y, alpha, beta)
        other = plain.axpby_out(x, y, torch.full_like(x, float("nan")), alpha, beta)
        torch.cuda.synchronize()
        expect(not torch.isnan(out).any().item(), f"shape {shape}: elements left unwritten (NaN)")
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5, msg=lambda m: f"shape {shape}: {m}")
        expect(torch.equal(fresh, out), f"shape {shape}: axpby and axpby_out differ")
        expect(torch.equal(other, out), f"shape {shape}: cudrv's and the plain extension's results differ "
                                        f"(max {(other - out).abs().max().item():g})")
        worst = max(worst, (out - ref).abs().max().item())
        bitwise = bitwise and torch.equal(out, ref)
    return (f"{len(shapes)} shapes up to {max(math.prod(s) for s in shapes)} elements, random alpha and beta: "
            f"cudrv == plain <<<>>> bit for bit; vs alpha * x + beta * y in PyTorch max |diff| {worst:g}"
            f"{' (bit for bit)' if bitwise else ''}")


def check_streams(torch, ext):
    x = torch.randn(1 << 16, device="cuda")
    y = torch.randn(1 << 16, device="cuda")
    ext.axpby(x, y, 1.0, 1.0)
    default = torch.cuda.current_stream().cuda_stream
    expect(ext.last_stream() == stream_value(default),
           f"on the default stream, cudrv launched on {ext.last_stream():#x}, not {stream_value(default):#x}")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        # Produced and consumed on the side stream: ordered by it alone.
        a = torch.randn(1 << 22, device="cuda")
        b = torch.randn(1 << 22, device="cuda")
        out = ext.axpby(a, b, 3.0, -0.5)
        expect(ext.last_stream() == side.cuda_stream,
               f"inside torch.cuda.stream(s), cudrv launched on {ext.last_stream():#x}, not s = {side.cuda_stream:#x}")
        ref = 3.0 * a - 0.5 * b
    side.synchronize()
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    return f"default stream (handle 0, the legacy stream: {stream_value(default):#x}) and a side stream {side.cuda_stream:#x}"


def check_context(torch, ext):
    dev = torch.cuda.current_device()
    info = ext.context_info(dev)
    expect(info["current"] == info["primary"],
           f"the current context {info['current']:#x} is not device {dev}'s primary context {info['primary']:#x}")
    return f"the context current in PyTorch's thread is device {dev}'s primary context ({info['primary']:#x})"


def check_bad_inputs(torch, ext):
    x = torch.randn(16, device="cuda")
    cases = [
        ("a CPU tensor", lambda: ext.axpby(x.cpu(), x, 1.0, 1.0), "must be a CUDA tensor"),
        ("float64", lambda: ext.axpby(x, x.double(), 1.0, 1.0), "must be float32"),
        ("non-contiguous", lambda: ext.axpby(torch.randn(4, 8, device="cuda").t(),
                                             torch.randn(8, 4, device="cuda"), 1.0, 1.0), "must be contiguous"),
        ("shapes differ", lambda: ext.axpby(x, torch.randn(17, device="cuda"), 1.0, 1.0), "the shapes must be equal"),
        ("out of another shape", lambda: ext.axpby_out(x, x, torch.empty(8, device="cuda"), 1.0, 1.0),
         "the shapes must be equal"),
    ]
    for what, call, needle in cases:
        try:
            call()
        except RuntimeError as e:
            expect(needle in str(e), f"{what}: the message does not say '{needle}': {e}")
            continue
        raise AssertionError(f"{what} was accepted")
    empty = torch.empty(0, device="cuda")
    expect(ext.axpby(empty, empty, 1.0, 1.0).numel() == 0, "an empty tensor gave a non-empty result")
    return f"{len(cases)} refusals with clear messages (RuntimeError), and an empty tensor gives an empty result"


# ------------------------------------------------------------------------------------------------
# DLPack

class CudrvArray:
    """cudrv-allocated memory with DLPack's Python protocol (the C++ Producer does the work)."""

    def __init__(self, producer):
        self.producer = producer

    def __dlpack_device__(self):
        return (KDL_CUDA, self.producer.device)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("cudrv exports without a copy only")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"the memory is on {self.__dlpack_device__()}, not on {tuple(dl_device)}")
        versioned = max_version is not None and max_version[0] >= 1
        # None is the legacy default stream for CUDA (the protocol's value 1). The protocol disallows 0;
        # a consumer that passes it for its null stream means the legacy default stream too.
        return self.producer.dlpack(versioned, 1 if stream is None or stream == 0 else stream)


def take_capsule(obj, stream, versioned):
    """obj.__dlpack__ for cudrv as the consumer, asking for the versioned struct when versioned."""
    if versioned:
        try:
            return obj.__dlpack__(stream=stream, max_version=(1, 0))
        except TypeError:  # a producer from before DLPack 1.0's protocol: the legacy struct
            pass
    return obj.__dlpack__(stream=stream)


def to_cpu(torch, array):
    """A PyTorch or CuPy array's values as a CPU tensor."""
    if isinstance(array, torch.Tensor):
        return array.cpu()
    import cupy
    return torch.from_numpy(cupy.asnumpy(array))


def dlpack_round_trip(torch, ext, framework, versioned):
    """cudrv -> framework -> cudrv, without a copy, counting the deleters' calls."""
    n = 1 << 16
    src = torch.randn(n)
    producer = ext.Producer(src)
    base = producer.data_ptr
    if framework == "torch":
        import torch.utils.dlpack as tdl
        if versioned:
            t = torch.from_dlpack(CudrvArray(producer))  # calls __dlpack__(stream=..., max_version=...)
        else:
            # A legacy capsule ("dltensor") handed over directly, as older consumers take it.
            cap = CudrvArray(producer).__dlpack__(stream=stream_value(torch.cuda.current_stream().cuda_stream))
            t = tdl.from_dlpack(cap)
            del cap
        ptr = t.data_ptr()
        stream = stream_value(torch.cuda.current_stream().cuda_stream)
        expect(torch.equal(t.cpu(), src), "the framework reads other values than cudrv wrote")
        t.mul_(2)  # written by the framework, read back by cudrv
    else:
        import cupy
        t = cupy.from_dlpack(CudrvArray(producer))
        ptr = t.data.ptr
        stream = stream_value(cupy.cuda.get_current_stream().ptr)
        expect(bool((cupy.asnumpy(t) == src.numpy()).all()), "CuPy reads other values than cudrv wrote")
        t *= 2
    expect(ptr == base, f"the {framework} array's address {ptr:#x} is not cudrv's buffer {base:#x} (a copy?)")
    expect(producer.deleter_calls == 0, "the deleter ran while the array is alive")
    expect(torch.equal(producer.to_host(stream), src * 2), f"cudrv does not see what {framework} wrote")

    # Back: cudrv imports the framework's own capsule of the same memory.
    imported = ext.import_dlpack(take_capsule(t, stream, versioned))
    expect(imported.data_ptr == base, f"the imported view's address {imported.data_ptr:#x} is not {base:#x}")
    expect(imported.size == n and imported.is_open, "the imported view has another size")
    imported.axpby_self(1.0, 1.0, stream)  # in place on the framework's stream: 2 * src -> 4 * src
    expect(torch.equal(to_cpu(torch, t), src * 4), f"{framework} does not see what cudrv wrote through the import")
    expect(imported.deleter_calls == 0, "the framework's deleter ran while cudrv holds its tensor")
    imported.close()
    imported.close()
    expect(imported.deleter_calls == 1, f"the framework's deleter ran {imported.deleter_calls} times, not once")
    expect(producer.deleter_calls == 0, "cudrv's deleter ran while the framework's array is alive")
    got_struct = "versioned" if imported.versioned else "legacy"
    del t, imported
    gc.collect()
    torch.cuda.synchronize()
    expect(producer.deleter_calls == 1,
           f"cudrv's deleter ran {producer.deleter_calls} times after the {framework} array went, not once")

    # A capsule nobody consumes is deleted by its destructor, once.
    cap = CudrvArray(producer).__dlpack__(stream=stream, max_version=(1, 0) if versioned else None)
    del cap
    gc.collect()
    expect(producer.deleter_calls == 2 and producer.exports == 2,
           f"an unconsumed capsule: {producer.deleter_calls} deleter calls for {producer.exports} exports")
    return (f"{n} floats at {base:#x}: {framework} array and cudrv's import at the same address, writes seen "
            f"both ways, each deleter ran once (cudrv's after the {framework} array went, {framework}'s at "
            f"close(); an unused capsule's at its destruction); {framework} handed back the {got_struct} struct")


def check_import_refusals(torch, ext):
    cases = [
        ("float64", torch.zeros(8, dtype=torch.float64, device="cuda"), "data type"),
        ("non-contiguous", torch.zeros(8, 4, device="cuda").t(), "not compact row-major"),
        ("CPU memory", torch.zeros(8), "kDLCPU"),
    ]
    for what, t, needle in cases:
        try:
            ext.import_dlpack(t.__dlpack__())
        except (RuntimeError, ValueError) as e:
            expect(needle in str(e), f"{what}: the message does not say '{needle}': {e}")
            continue
        raise AssertionError(f"{what} was imported")
    cap = torch.zeros(4, device="cuda").__dlpack__()
    ext.import_dlpack(cap).close()
    try:
        ext.import_dlpack(cap)
    except ValueError as e:
        expect("can be imported once" in str(e), f"a used capsule: {e}")
    else:
        raise AssertionError("a capsule was imported twice")
    return f"{len(cases)} tensors refused by cudrv::from_dlpack with clear messages, and a capsule imported twice"


# ------------------------------------------------------------------------------------------------
# Launch cost

def launch_cost(torch, ext, plain, quick):
    n = 4096
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    launches = 100 if quick else 200
    rounds = 6 if quick else 60
    sample = {"cudrv": lambda: ext.bench_launches(x, y, out, 2.0, 3.0, launches),
              "plain": lambda: plain.bench_launches(x, y, out, 2.0, 3.0, launches)}
    for f in sample.values():  # warm up: first launches, caches
        f()
    torch.cuda.synchronize()
    per = {"cudrv": [], "plain": [], "plain2": []}
    ratio, aa = [], []
    for r in range(rounds):
        order = ["plain", "cudrv", "plain2"] if r % 2 == 0 else ["cudrv", "plain2", "plain"]
        t = {}
        for key in order:
            torch.cuda.synchronize()
            t[key] = sample["plain" if key == "plain2" else key]() / launches * 1e6
            per[key].append(t[key])
        torch.cuda.synchronize()
        ratio.append(t["cudrv"] / t["plain"])
        aa.append(t["plain2"] / t["plain"])
    # The operator as Python calls it (checks, output allocation, launch), interleaved likewise.
    calls = 50 if quick else 200
    op = {"cudrv": [], "plain": []}
    for r in range(rounds // 2 or 1):
        for key in (["plain", "cudrv"] if r % 2 == 0 else ["cudrv", "plain"]):
            f = ext.axpby if key == "cudrv" else plain.axpby
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                f(x, y, 2.0, 3.0)
            op[key].append((time.perf_counter() - t0) / calls * 1e6)
    torch.cuda.synchronize()
    cudrv_us = statistics.median(per["cudrv"])
    plain_us = statistics.median(per["plain"])
    med_ratio = statistics.median(ratio)
    med_aa = statistics.median(aa)
    op_cudrv = statistics.median(op["cudrv"])
    op_plain = statistics.median(op["plain"])
    print(f"torch_extension: {cudrv_us:.3f} us per launch through cudrv = {med_ratio:.3f} x the plain extension's "
          f"<<<>>> ({plain_us:.3f} us; A/A {med_aa:.3f}); the operator called from Python {op_cudrv:.2f} us vs "
          f"{op_plain:.2f} us; {n} floats, {launches} launches x {rounds} interleaved rounds, "
          f"{torch.cuda.get_device_name()}", flush=True)
    print(json.dumps({
        "example": "torch_extension", "metric": "us/launch", "value": round(cudrv_us, 4),
        "reference": round(plain_us, 4), "fraction": round(plain_us / cudrv_us, 4),
        "reference_name": "plain PyTorch CUDA extension (<<<>>>)", "target": 0,
        "ratio": round(med_ratio, 4), "aa_ratio": round(med_aa, 4), "op_us": round(op_cudrv, 3),
        "op_reference_us": round(op_plain, 3), "elements": n, "launches": launches, "rounds": rounds,
        "device": torch.cuda.get_device_name(), "torch": torch.__version__}), flush=True)
    expect(all(v > 0 for v in per["cudrv"] + per["plain"]), "a sample measured no time")
    return f"ratio {med_ratio:.3f} (A/A {med_aa:.3f})"


# ------------------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.environ.get("CUDRV_BUILD", str(ROOT / "build")),
                        help="the cudrv build tree (libcudrv.a, generated/include)")
    parser.add_argument("--ext-dir", default=None, help="where the extensions are built (default BUILD/torch_extension)")
    parser.add_argument("--quick", action="store_true", help="fewer sizes and timing rounds (for the sanitizer)")
    parser.add_argument("--verbose", action="store_true", help="show the extensions' build commands")
    args = parser.parse_args()

    # The ninja of this Python's environment (pip's ninja puts it next to the interpreter), found by
    # cpp_extension through PATH even when the environment is not activated.
    os.environ["PATH"] = str(pathlib.Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    try:
        import torch
        import torch.utils.cpp_extension as cpp_extension
    except ImportError as e:
        print(f"FAIL import torch: {e} (run with the python3 that has PyTorch)", flush=True)
        return 2
    if not torch.cuda.is_available():
        print("FAIL torch.cuda.is_available() is False: no CUDA device for PyTorch", flush=True)
        return 2
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) on {torch.cuda.get_device_name()}; "
          f"cudrv build {pathlib.Path(args.build).resolve()}", flush=True)

    report = Report()
    built = {}

    def build():
        ext, plain, (t_cudrv, t_plain, ext_dir) = build_extensions(args, torch, cpp_extension)
        built.update(ext=ext, plain=plain)
        return (f"cudrv_torch_op (g++ -std=c++20, libcudrv.a) {t_cudrv:.1f} s, cudrv_torch_plain_op (nvcc) "
                f"{t_plain:.1f} s, in {ext_dir}; DLPack header {ext.dlpack_version() // 100}.{ext.dlpack_version() % 100}")

    if not report.run("build both extensions with torch.utils.cpp_extension.load()", build):
        print(f"{report.passed} passed, {report.failed} failed, {report.skipped} skipped", flush=True)
        return 1
    ext, plain = built["ext"], built["plain"]

    report.run("kernel compiled by cudrv::program (NVRTC) through the compile cache", check_compile, torch, ext)
    report.run("axpby through cudrv matches PyTorch and the plain extension (random inputs, poisoned outputs)",
               check_against_torch, torch, ext, plain, args.quick)
    report.run("launched on PyTorch's current stream (cudrv::stream_ref)", check_streams, torch, ext)
    report.run("no context but PyTorch's (the device's primary context)", check_context, torch, ext)
    report.run("bad tensors are refused with clear errors", check_bad_inputs, torch, ext)
    report.run("DLPack round trip with PyTorch, DLManagedTensorVersioned", dlpack_round_trip, torch, ext, "torch", True)
    report.run("DLPack round trip with PyTorch, legacy DLManagedTensor", dlpack_round_trip, torch, ext, "torch", False)

    def cupy_round_trip(versioned):
        try:
            importlib.import_module("cupy")
        except ImportError as e:
            raise Skip(f"CuPy is not importable here ({e})") from e
        return dlpack_round_trip(torch, ext, "cupy", versioned)

    report.run("DLPack round trip with CuPy (cupy.from_dlpack, __dlpack__ back to cudrv)", cupy_round_trip, True)
    report.run("cudrv::from_dlpack refuses what the kernel cannot use", check_import_refusals, torch, ext)
    report.run("launch cost: cudrv vs a plain PyTorch CUDA extension, interleaved", launch_cost, torch, ext, plain,
               args.quick)

    print(f"{report.passed} passed, {report.failed} failed, {report.skipped} skipped", flush=True)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
