#!/usr/bin/env python3
"""Generates include/cudrv/device_attributes.hpp from the CUdevice_attribute enum of cuda.h.

Every enumerator that cuda.h does not mark deprecated gets a typed tag in cudrv::device_attributes,
named after it in lower case (CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE -> l2_cache_size), with the type its
value means: bool for yes/no attributes, std::size_t for byte counts, the driver's enum for the
attributes that hold one, unsigned int for bit masks, int otherwise. The rules below decide the type;
an enumerator they do not name is an int. Attributes newer than the oldest supported toolkit (CUDA 12.4)
are guarded by the CUDA_VERSION that introduced them.

The CPU test tests/cpu/test_device_attributes.cpp compares the generated list with the cuda.h cudrv is
built with: rerun this script when a toolkit adds attributes.

Usage: scripts/gen/device_attributes.py [--cuda-h /usr/local/cuda/include/cuda.h] > include/cudrv/device_attributes.hpp
       scripts/gen/device_attributes.py --cuda-h <cuda.h> --check include/cudrv/device_attributes.hpp
(--check: the freshness test of the CPU tier; see generated.py)
"""
import argparse
import io
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generated  # noqa: E402

BOOLEAN = {
    "KERNEL_EXEC_TIMEOUT", "INTEGRATED", "CAN_MAP_HOST_MEMORY", "CONCURRENT_KERNELS", "ECC_ENABLED", "TCC_DRIVER",
    "UNIFIED_ADDRESSING", "MANAGED_MEMORY", "MULTI_GPU_BOARD", "PAGEABLE_MEMORY_ACCESS", "CONCURRENT_MANAGED_ACCESS",
    "CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM", "COOPERATIVE_LAUNCH", "CAN_FLUSH_REMOTE_WRITES",
    "PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES", "DIRECT_MANAGED_MEM_ACCESS_FROM_HOST", "CLUSTER_LAUNCH",
    "CAN_USE_64_BIT_STREAM_MEM_OPS", "CAN_USE_STREAM_WAIT_VALUE_NOR", "UNIFIED_FUNCTION_POINTERS", "MPS_ENABLED",
}
BYTES = {
    "MAX_SHARED_MEMORY_PER_BLOCK", "TOTAL_CONSTANT_MEMORY", "MAX_PITCH", "TEXTURE_ALIGNMENT", "SURFACE_ALIGNMENT",
    "L2_CACHE_SIZE", "TEXTURE_PITCH_ALIGNMENT", "MAXIMUM_TEXTURE2D_LINEAR_PITCH", "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
    "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", "MAX_PERSISTING_L2_CACHE_SIZE", "MAX_ACCESS_POLICY_WINDOW_SIZE",
    "RESERVED_SHARED_MEMORY_PER_BLOCK", "MEM_DECOMPRESS_MAXIMUM_LENGTH",
}
ENUMS = {
    "COMPUTE_MODE": "CUcomputemode",
    "NUMA_CONFIG": "CUdeviceNumaConfig",
    "GPU_DIRECT_RDMA_WRITES_ORDERING": "CUGPUDirectRDMAWritesOrdering",
}
MASKS = {
    "MEMPOOL_SUPPORTED_HANDLE_TYPES": "a mask of CUmemAllocationHandleType",
    "GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS": "a mask of CUflushGPUDirectRDMAWritesOptions",
    "MEM_DECOMPRESS_ALGORITHM_MASK": "a mask of CUmemDecompressAlgorithm",
    "GPU_PCI_DEVICE_ID": "PCI device id << 16 | PCI vendor id",
    "GPU_PCI_SUBSYSTEM_ID": "PCI subsystem id << 16 | subsystem vendor id",
}
RENAMES = {"CLOCK_RATE": "clock_rate_khz", "MEMORY_CLOCK_RATE": "memory_clock_rate_khz"}
UNITS = {"CLOCK_RATE": "kHz", "MEMORY_CLOCK_RATE": "kHz", "GLOBAL_MEMORY_BUS_WIDTH": "bits"}
# The first toolkit whose cuda.h has the enumerator, for those newer than CUDA 12.4.
SINCE = {
    "D3D12_CIG_SUPPORTED": 12050,
    "MEM_DECOMPRESS_ALGORITHM_MASK": 12080,
    "MEM_DECOMPRESS_MAXIMUM_LENGTH": 12080,
    "GPU_PCI_DEVICE_ID": 12080,
    "GPU_PCI_SUBSYSTEM_ID": 12080,
    "HOST_NUMA_MULTINODE_IPC_SUPPORTED": 12080,
    "VULKAN_CIG_SUPPORTED": 12090,
    "HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED": 12090,
    "HOST_NUMA_MEMORY_POOLS_SUPPORTED": 12090,
    "HOST_MEMORY_POOLS_SUPPORTED": 13000,
    "HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED": 13000,
    "HOST_ALLOC_DMA_BUF_SUPPORTED": 13000,
    "ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED": 13000,
}


def enumerators(cuda_h):
    text = open(cuda_h, encoding="utf-8").read()
    body = re.search(r"typedef enum CUdevice_attribute_enum \{(.*?)\} CUdevice_attribute;", text, re.S).group(1)
    out = []
    for m in re.finditer(r"CU_DEVICE_ATTRIBUTE_(\w+)\s*=\s*(\d+)\s*,?\s*(/\*\*<(.*?)\*/)?", body, re.S):
        suffix, value, comment = m.group(1), int(m.group(2)), (m.group(4) or "").strip()
        if comment.lower().startswith("deprecated") or suffix == "MAX":
            continue
        out.append((suffix, value))
    return out


def type_of(suffix):
    if suffix in ENUMS:
        return ENUMS[suffix], "the driver's enum"
    if suffix in MASKS:
        return "unsigned int", MASKS[suffix]
    if suffix in BYTES:
        return "std::size_t", "bytes"
    if suffix in BOOLEAN or suffix.endswith("_SUPPORTED"):
        return "bool", "yes or no"
    return "int", UNITS.get(suffix, "")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda-h", default="/usr/local/cuda/include/cuda.h")
    parser.add_argument("--check", metavar="FILE", help="compare the output with FILE instead of printing it")
    args = parser.parse_args()
    rows = enumerators(args.cuda_h)
    out = io.StringIO()
    w = out.write
    w("/// @file device_attributes.hpp\n")
    w("/// @brief Typed tags for every device attribute of the driver, for @ref cudrv::device::attribute.\n")
    w("///\n")
    w("/// Generated by scripts/gen/device_attributes.py from the `CUdevice_attribute` enum of cuda.h; do not edit.\n")
    w("///\n")
    w('/// Layer: driver (docs/design.md, "Source layers").\n')
    w("#pragma once\n\n#include <cuda.h>\n\n#include <cstddef>\n\nnamespace cudrv {\n\n")
    w("/// @brief A device attribute tag: the `CUdevice_attribute` to query and the type of its value.\n")
    w("///\n")
    w("/// The attribute is a member, not a template argument: the tags below are about a dozen class types\n")
    w("/// rather than one per attribute, which keeps this header cheap to include (docs/design.md, \"Header\n")
    w("/// cost\"). A tag for an attribute this header lacks: `cudrv::device_attribute<int>{CU_DEVICE_ATTRIBUTE_...}`.\n")
    w("/// @tparam T the type the value is returned as (`int`, `bool`, `std::size_t`, `unsigned int` or an enum)\n")
    w("template <class T>\nstruct device_attribute {\n")
    w("  /// @brief The driver attribute this tag queries.\n  CUdevice_attribute value;\n")
    w("  /// @brief The type of the attribute's value.\n  using type = T;\n};\n\n")
    w("/// @brief One entry of `device_attributes::all`: an attribute and its tag's name.\n")
    w("struct device_attribute_entry {\n  CUdevice_attribute id;  ///< The driver attribute.\n")
    w("  const char* name;       ///< The tag's name, e.g. `\"l2_cache_size\"`.\n};\n\n")
    w("/// @brief Typed tags for every device attribute the driver has (all of `CUdevice_attribute` but the\n")
    w("/// deprecated names), for @ref device::attribute.\n///\n")
    w("/// Each tag fixes the type of the result: `dev.attribute(device_attributes::l2_cache_size)` is a\n")
    w("/// `std::size_t`, `dev.attribute(device_attributes::managed_memory)` a `bool`,\n")
    w("/// `dev.attribute(device_attributes::compute_mode)` a `CUcomputemode`.\n")
    w("namespace device_attributes {\n")
    for suffix, value in rows:
        name = RENAMES.get(suffix, suffix.lower())
        ty, meaning = type_of(suffix)
        guard = SINCE.get(suffix)
        if guard:
            w(f"#if CUDA_VERSION >= {guard}\n")
        detail = f", {meaning}" if meaning else ""
        w(f"/// @brief `CU_DEVICE_ATTRIBUTE_{suffix}` as `{ty}`{detail}.\n")
        w(f"inline constexpr device_attribute<{ty}> {name}{{CU_DEVICE_ATTRIBUTE_{suffix}}};\n")
        if guard:
            w("#endif\n")
    w("\n/// @brief Every attribute above with its tag's name, in the order of cuda.h.\n")
    w("inline constexpr device_attribute_entry all[] = {\n")
    for suffix, value in rows:
        name = RENAMES.get(suffix, suffix.lower())
        guard = SINCE.get(suffix)
        if guard:
            w(f"#if CUDA_VERSION >= {guard}\n")
        w(f"    {{CU_DEVICE_ATTRIBUTE_{suffix}, \"{name}\"}},\n")
        if guard:
            w("#endif\n")
    w("};\n}  // namespace device_attributes\n\n}  // namespace cudrv\n")
    return generated.emit(out.getvalue(), args.check, args.cuda_h, "scripts/gen/device_attributes.py")


if __name__ == "__main__":
    sys.exit(main())
