#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/), a handful of small files each.

    python3 fuzz/make_seeds.py [--nvcc PATH]

fuzz_image seeds start with the kind byte (0 PTX, 1 cubin, 2 fatbin; fuzz_image.cpp). The cubin and
fatbins are compiled by nvcc from a one-kernel program when nvcc is found; else the committed ones are
kept. fuzz_cache_entry seeds start with the mode byte (0: the rest is an entry file, 1: the rest is a
payload that the target frames with a valid header and checksum; fuzz_cache_entry.cpp); the entry
files are written in the format of src/code/compile_cache.cpp (its checksum is computed here too, and
tests/cpu/test_image_check.cpp checks that the seed still decodes as a valid entry). fuzz_query_args
seeds are command lines, one argument per NUL-terminated string. fuzz_socket_frames seeds are scripts of
what a peer sends (two option bytes, then tagged chunks; fuzz_socket_frames.cpp): well-formed messages
and the hostile cases the receiver must refuse. fuzz_ipc_import seeds are six header bytes and the bytes
they consume (fuzz_ipc_import.cpp). fuzz_inspect seeds: see inspect_seeds() (issue 36).
"""
import argparse
import os
import random
import shutil
import struct
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
M64 = (1 << 64) - 1

KERNEL = r'''extern "C" __global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
'''

PTX = b"""//
// A hand-written module: one kernel, two parameters.
//
.version 8.0
.target sm_90
.address_size 64

.visible .entry k(.param .u64 p, .param .align 4 .b8 s[12])
{
  ret;
}
"""

# --- the checksum of compile_cache.cpp (hash64, multiply-fold) ------------------------------------
K0, K1, K2, K3 = 0xa0761d6478bd642f, 0xe7037ed1a0b428db, 0x8ebc6af09c88c6e3, 0x589965cc75374cc3
CHECKSUM_SEED = 0x5be0cd19137e2179
FORMAT_VERSION = 3


def mum(a, b):
    r = (a & M64) * (b & M64)
    return (r & M64) ^ (r >> 64)


def hash64(data, seed):
    n = len(data)
    h = mum(seed ^ K0, n ^ K1)
    p = 0
    while n - p >= 16:
        a, b = struct.unpack_from("<QQ", data, p)
        h ^= mum(a ^ K1, b ^ h ^ K2)
        p += 16
    tail = data[p:] + bytes(16 - (n - p))
    a, b = struct.unpack_from("<QQ", tail, 0)
    h ^= mum(a ^ K2, b ^ h ^ K3)
    return mum(h ^ K3, h ^ K0 ^ seed)


def string(b):
    return struct.pack("<Q", len(b)) + b


def payload(kind, code, log=b"", names=()):
    out = struct.pack("<I", kind) + string(code) + string(log) + struct.pack("<Q", len(names))
    for expr, lowered in names:
        out += string(expr) + string(lowered)
    return out


def entry(key, body, version=FORMAT_VERSION):
    head = b"CUDRVNVC" + struct.pack("<IIQQ", version, 0, len(key), len(body)) + key + body
    return head + struct.pack("<Q", hash64(head, CHECKSUM_SEED))


# --- fuzz_socket_frames scripts (the chunk kinds of fuzz_socket_frames.cpp) ----------------------
FRAME_MAGIC = 0x56524443


def options(max_descriptors=4, timeout=0, max_payload_byte=255):
    """Byte 0: max_descriptors (0..8) and the timeout choice (0 none, 1 0 ms, 2 -1 ms, 3 max); byte 1:
    max_payload (255: the default, else 4 x the byte)."""
    return bytes([max_descriptors | timeout << 4, max_payload_byte])


def tag(kind, fds=0, flags=0):
    return bytes([kind | fds << 2 | flags << 5])


def raw(data, fds=0):
    return tag(0, fds) + bytes([len(data)]) + data


def header(announced, payload, fds=0):
    if payload < 1 << 16:
        return tag(1, fds) + bytes([announced]) + struct.pack("<H", payload)
    return tag(1, fds, 1) + bytes([announced]) + struct.pack("<Q", payload)


def message(payload, fds=0):
    return tag(2, fds) + bytes([len(payload)]) + payload


def dribble(data, fds=0):
    return tag(3, fds) + bytes([len(data)]) + data


def frame(announced, payload_size, magic=FRAME_MAGIC):
    return struct.pack("<IIQ", magic, announced, payload_size)


def write(target, name, data):
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data)


def compile_images(nvcc):
    """(cubin, fatbin, compressed fatbin) from nvcc, or None when nvcc is missing."""
    if nvcc is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.cu")
        with open(src, "w") as f:
            f.write(KERNEL)
        out = {}
        for name, args in (("k.cubin", ["-cubin", "-arch=sm_90"]),
                           ("k.fatbin", ["-fatbin", "-gencode", "arch=compute_90,code=[sm_90,compute_90]"]),
                           ("kc.fatbin", ["-fatbin", "-gencode", "arch=compute_90,code=[sm_90,compute_90]",
                                          "-Xfatbin", "-compress-all"])):
            subprocess.run([nvcc, *args, "-o", os.path.join(tmp, name), src], check=True)
            with open(os.path.join(tmp, name), "rb") as f:
                out[name] = f.read()
        return out["k.cubin"], out["k.fatbin"], out["kc.fatbin"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nvcc", default=shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                        if os.path.exists("/usr/local/cuda/bin/nvcc") else None))
    args = parser.parse_args()
    for target in ("fuzz_image", "fuzz_cache_entry", "fuzz_cache_deps", "fuzz_query_args", "fuzz_socket_frames"):
        os.makedirs(os.path.join(CORPUS, target), exist_ok=True)

    images = compile_images(args.nvcc)
    if images is not None:
        cubin, fatbin, compressed = images
        write("fuzz_image", "cubin_scale", b"\x01" + cubin)
        write("fuzz_image", "fatbin_scale", b"\x02" + fatbin)
        write("fuzz_image", "fatbin_compressed", b"\x02" + compressed)
        write("fuzz_image", "cubin_truncated", b"\x01" + cubin[:300])
    else:
        with open(os.path.join(CORPUS, "fuzz_image", "cubin_scale"), "rb") as f:
            cubin = f.read()[1:]
    write("fuzz_image", "ptx_entry", b"\x00" + PTX)
    write("fuzz_image", "ptx_padded", b"\x00" + PTX + b"\0\0\0\0")

    key = b"fuzz seed key"
    write("fuzz_cache_entry", "entry_ptx", b"\x00" + entry(key, payload(0, PTX, b"", ((b"k", b"k"),))))
    write("fuzz_cache_entry", "entry_cubin", b"\x00" + entry(key, payload(1, cubin, b"warning: none\n")))
    write("fuzz_cache_entry", "entry_old_version", b"\x00" + entry(key, payload(0, PTX), version=2))
    write("fuzz_cache_entry", "payload_ptx", b"\x01" + payload(0, PTX, b"log", ((b"k<int>", b"_Z1kIiEvv"),)))
    write("fuzz_cache_entry", "payload_ltoir", b"\x01" + payload(3, b"\x7fNVVM-ish bytes"))

    # fuzz_cache_deps: every byte chooses (a line's trick, a name, a directory, an option's blanks), and
    # bytes past the end read as zeros, which generate nothing: seeds of random bytes start the fuzzer
    # on programs with several includes, files and options.
    rng = random.Random(31)
    for i in range(16):
        write("fuzz_cache_deps", "random_%02d" % i, bytes(rng.randrange(256) for _ in range(384)))

    for name, argv in (("summary_json", ["--json"]),
                       ("details_devices", ["--details", "-d", "0,GPU-8f3a", "-d", "0000:c1:00.0"]),
                       ("bench_sizes", ["--bench", "--bench-size", "64M", "--bench-iterations", "3",
                                        "--bench-trials", "2", "--no-progress", "--json"]),
                       ("p2p_color", ["--p2p", "--color", "always", "-d", "MIG-1234"]),
                       ("help", ["--help"]),
                       ("bad_option", ["--details", "--p2p", "--bench-size", "1x"])):
        write("fuzz_query_args", name, b"".join(a.encode() + b"\0" for a in argv))

    for name, script in (
            ("messages", options(4) + message(b"first", 2) + message(b"") + message(b"third, 3 fds", 3)),
            ("too_many_then_valid", options(1, 1) + message(b"five descriptors", 5) + message(b"next", 1)),
            ("too_large_then_valid", options(2, 2, 2) + message(bytes(100)) + message(b"fits")),
            ("payload_descriptors", options(8) + header(0, 8) + dribble(b"12345678", 3) + message(b"after")),
            ("header_dribbled", options(3, 3) + dribble(frame(2, 4), 2) + raw(b"body")),
            ("announced_missing", options(4) + header(2, 3) + raw(b"abc") + message(b"ok", 1)),
            ("foreign_bytes", options(4) + raw(b"not a frame....." * 2, 1) + message(b"x")),
            ("closed_mid_message", options(4) + header(1, 1000, 1) + raw(b"only ten b")),
            ("huge_payload", options(4, 0, 1) + header(0, (1 << 64) - 1) + raw(bytes(32)))):
        write("fuzz_socket_frames", name, script)

    # fuzz_ipc_import: op, which export, element type, how the bytes change, how the size is made, wrong
    # message size (fuzz_ipc_import.cpp); then the bytes those consume.
    def ipc(op, which, element, how, size_how, wrong=0, rest=b""):
        return bytes((op, which, element, how, size_how, wrong)) + rest
    write("fuzz_ipc_import", "pool_exact", ipc(0, 2, 1, 0, 0, rest=b"\x00"))
    write("fuzz_ipc_import", "pool_inflated", ipc(0, 2, 1, 0, 1, rest=struct.pack(">Q", 65536 * 4)))
    write("fuzz_ipc_import", "pool_prefix_bytes", ipc(0, 3, 0, 0, 0, rest=b"\xf0"))
    write("fuzz_ipc_import", "pool_flipped", ipc(0, 1, 1, 2, 0, rest=bytes(8) + b"\x01" + bytes(64)))
    write("fuzz_ipc_import", "legacy_exact", ipc(1, 2, 2, 0, 0, rest=b"\x00"))
    write("fuzz_ipc_import", "legacy_huge", ipc(1, 0, 1, 0, 1, rest=struct.pack(">Q", M64)))
    write("fuzz_ipc_import", "wrong_size", ipc(1, 1, 1, 0, 0, 0xff, rest=b"\x00"))
    write("fuzz_ipc_import", "descriptor", ipc(2, 2, 1, 0, 0, rest=b"\x08" + struct.pack("<q", 0) + b"\x00"))
    inspect_seeds(args.nvcc)  # issue 36: inspect


# issue 36: inspect. fuzz_inspect seeds start with the kind byte (0 PTX, 1 cubin, 2 fatbin, 3 host ELF
# object; fuzz_inspect.cpp): the fuzz_image images, a fatbin whose entry is LZ4-compressed (fatbinary
# -compress-mode=speed), a host object with its .nv_fatbin, and that object cut short.
def inspect_seeds(nvcc):
    os.makedirs(os.path.join(CORPUS, "fuzz_inspect"), exist_ok=True)
    for name in ("cubin_scale", "fatbin_scale", "fatbin_compressed", "ptx_entry"):
        with open(os.path.join(CORPUS, "fuzz_image", name), "rb") as f:
            write("fuzz_inspect", name, f.read())
    if nvcc is None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.cu")
        with open(src, "w") as f:
            f.write(KERNEL)
        cubin, lz4, obj = (os.path.join(tmp, n) for n in ("k.cubin", "k.fatbin", "k.o"))
        subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-o", cubin, src], check=True)
        fatbinary = os.path.join(os.path.dirname(nvcc), "fatbinary")
        subprocess.run([fatbinary, "--create=" + lz4, "-64", "--image3=kind=elf,sm=90,file=" + cubin,
                        "-compress-all", "-compress-mode=speed"], check=True)
        subprocess.run([nvcc, "-c", "-arch=sm_90", "-o", obj, src], check=True)
        with open(lz4, "rb") as f:
            write("fuzz_inspect", "fatbin_lz4", b"\x02" + f.read())
        with open(obj, "rb") as f:
            data = f.read()
        write("fuzz_inspect", "object_scale", b"\x03" + data)
        write("fuzz_inspect", "object_truncated", b"\x03" + data[:len(data) // 2])


if __name__ == "__main__":
    main()
