// cudrv-query: the table of CUDA device attributes, and the names of enumeration and bitmask values.
//
// Source of truth: enum CUdevice_attribute_enum of cuda.h (its per-enumerator comments give units and kinds).
// Deprecated enumerators and CU_DEVICE_ATTRIBUTE_MAX are left out. The oldest supported toolkit is CUDA 12.4: every
// enumerator (and every value constant used by describe()) that its cuda.h lacks sits under a CUDA_VERSION guard
// naming the first toolkit whose cuda.h has it.
#include "attributes.hpp"

#include <cstddef>
#include <cstdio>
#include <iterator>
#include <span>
#include <string>
#include <string_view>

namespace cudrv_query {

namespace {

// The groups, in display order. Table rows name them through these constants, so a typo does not compile.
namespace group {
constexpr char identity[] = "identity";                          // what the device is and where it sits
constexpr char compute[] = "compute";                            // multiprocessors, clocks, execution modes
constexpr char limits[] = "limits";                              // per-block and per-multiprocessor maxima
constexpr char memory[] = "memory";                              // device memory and host memory access
constexpr char caches[] = "caches";                              // L1 and L2
constexpr char unified_memory[] = "unified_memory";              // managed and pageable memory
constexpr char memory_pools_and_vmm[] = "memory_pools_and_vmm";  // stream-ordered pools, virtual memory, handles
constexpr char interconnect[] = "interconnect";                  // host link, GPUDirect RDMA, dma_buf, multicast
constexpr char clusters[] = "clusters";                          // thread-block clusters
constexpr char features[] = "features";                          // launch kinds, stream memory ops, IPC, interop
constexpr char textures[] = "textures";                          // texture and surface extents and alignments
}  // namespace group

constexpr const char* k_group_names[] = {
    group::identity,
    group::compute,
    group::limits,
    group::memory,
    group::caches,
    group::unified_memory,
    group::memory_pools_and_vmm,
    group::interconnect,
    group::clusters,
    group::features,
    group::textures,
};

// The units, likewise. Extents of textures are counted in texels, those of surfaces in (array) elements.
namespace unit {
constexpr char none[] = "";
constexpr char bytes[] = "bytes";
constexpr char khz[] = "kHz";
constexpr char bits[] = "bits";
constexpr char threads[] = "threads";
constexpr char blocks[] = "blocks";
constexpr char registers[] = "registers";
constexpr char multiprocessors[] = "multiprocessors";
constexpr char engines[] = "engines";
constexpr char texels[] = "texels";
constexpr char elements[] = "elements";
constexpr char layers[] = "layers";
}  // namespace unit

// One row: the enumerator's suffix (after CU_DEVICE_ATTRIBUTE_), its key, name, group, unit and kind.
#define CUDRV_QUERY_ATTR(suffix, key, name, group_id, unit_id, kind_id)                                      \
  attribute_desc {                                                                                           \
    CU_DEVICE_ATTRIBUTE_##suffix, "CU_DEVICE_ATTRIBUTE_" #suffix, key, name, group::group_id, unit::unit_id, \
        attribute_kind::kind_id                                                                              \
  }

constexpr attribute_desc k_table[] = {
    // --- identity ---------------------------------------------------------------------------------------------------
    CUDRV_QUERY_ATTR(COMPUTE_CAPABILITY_MAJOR, "compute_capability_major", "Compute capability major", identity, none,
                     integer),
    CUDRV_QUERY_ATTR(COMPUTE_CAPABILITY_MINOR, "compute_capability_minor", "Compute capability minor", identity, none,
                     integer),
    CUDRV_QUERY_ATTR(INTEGRATED, "integrated", "Integrated with host memory", identity, none, boolean),
    CUDRV_QUERY_ATTR(MULTI_GPU_BOARD, "multi_gpu_board", "On a multi-GPU board", identity, none, boolean),
    CUDRV_QUERY_ATTR(MULTI_GPU_BOARD_GROUP_ID, "multi_gpu_board_group_id", "Multi-GPU board group ID", identity, none,
                     integer),
    CUDRV_QUERY_ATTR(PCI_DOMAIN_ID, "pci_domain_id", "PCI domain ID", identity, none, integer),
    CUDRV_QUERY_ATTR(PCI_BUS_ID, "pci_bus_id", "PCI bus ID", identity, none, integer),
    CUDRV_QUERY_ATTR(PCI_DEVICE_ID, "pci_device_id", "PCI device ID (slot)", identity, none, integer),
#if CUDA_VERSION >= 12080
    CUDRV_QUERY_ATTR(GPU_PCI_DEVICE_ID, "gpu_pci_device_id", "PCI device and vendor ID", identity, none, integer),
    CUDRV_QUERY_ATTR(GPU_PCI_SUBSYSTEM_ID, "gpu_pci_subsystem_id", "PCI subsystem and subsystem vendor ID", identity,
                     none, integer),
#endif
    CUDRV_QUERY_ATTR(TCC_DRIVER, "tcc_driver", "Uses the TCC driver model", identity, none, boolean),
    CUDRV_QUERY_ATTR(NUMA_CONFIG, "numa_config", "NUMA configuration", identity, none, enumeration),
    CUDRV_QUERY_ATTR(NUMA_ID, "numa_id", "NUMA node of device memory", identity, none, integer),
    CUDRV_QUERY_ATTR(HOST_NUMA_ID, "host_numa_id", "Closest host NUMA node", identity, none, integer),

    // --- compute ----------------------------------------------------------------------------------------------------
    CUDRV_QUERY_ATTR(MULTIPROCESSOR_COUNT, "multiprocessor_count", "Multiprocessor count", compute, multiprocessors,
                     integer),
    CUDRV_QUERY_ATTR(CLOCK_RATE, "clock_rate", "Clock rate", compute, khz, integer),
    CUDRV_QUERY_ATTR(WARP_SIZE, "warp_size", "Warp size", compute, threads, integer),
    CUDRV_QUERY_ATTR(ASYNC_ENGINE_COUNT, "async_engine_count", "Asynchronous engine count", compute, engines, integer),
    CUDRV_QUERY_ATTR(SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO, "single_to_double_precision_perf_ratio",
                     "Single to double precision performance ratio", compute, none, integer),
    CUDRV_QUERY_ATTR(COMPUTE_MODE, "compute_mode", "Compute mode", compute, none, enumeration),
    CUDRV_QUERY_ATTR(MPS_ENABLED, "mps_enabled", "Contexts shared through MPS", compute, none, boolean),
    CUDRV_QUERY_ATTR(KERNEL_EXEC_TIMEOUT, "kernel_exec_timeout", "Kernel run time limit", compute, none, boolean),
    CUDRV_QUERY_ATTR(CONCURRENT_KERNELS, "concurrent_kernels", "Concurrent kernels", compute, none, boolean),
    CUDRV_QUERY_ATTR(COMPUTE_PREEMPTION_SUPPORTED, "compute_preemption_supported", "Compute preemption supported",
                     compute, none, boolean),
    CUDRV_QUERY_ATTR(STREAM_PRIORITIES_SUPPORTED, "stream_priorities_supported", "Stream priorities supported", compute,
                     none, boolean),

    // --- limits -----------------------------------------------------------------------------------------------------
    CUDRV_QUERY_ATTR(MAX_THREADS_PER_BLOCK, "max_threads_per_block", "Max threads per block", limits, threads, integer),
    CUDRV_QUERY_ATTR(MAX_BLOCK_DIM_X, "max_block_dim_x", "Max block dimension X", limits, threads, integer),
    CUDRV_QUERY_ATTR(MAX_BLOCK_DIM_Y, "max_block_dim_y", "Max block dimension Y", limits, threads, integer),
    CUDRV_QUERY_ATTR(MAX_BLOCK_DIM_Z, "max_block_dim_z", "Max block dimension Z", limits, threads, integer),
    CUDRV_QUERY_ATTR(MAX_GRID_DIM_X, "max_grid_dim_x", "Max grid dimension X", limits, blocks, integer),
    CUDRV_QUERY_ATTR(MAX_GRID_DIM_Y, "max_grid_dim_y", "Max grid dimension Y", limits, blocks, integer),
    CUDRV_QUERY_ATTR(MAX_GRID_DIM_Z, "max_grid_dim_z", "Max grid dimension Z", limits, blocks, integer),
    CUDRV_QUERY_ATTR(MAX_REGISTERS_PER_BLOCK, "max_registers_per_block", "Max 32-bit registers per block", limits,
                     registers, integer),
    CUDRV_QUERY_ATTR(MAX_SHARED_MEMORY_PER_BLOCK, "max_shared_memory_per_block", "Max shared memory per block", limits,
                     bytes, integer),
    CUDRV_QUERY_ATTR(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "max_shared_memory_per_block_optin",
                     "Max opt-in shared memory per block", limits, bytes, integer),
    CUDRV_QUERY_ATTR(RESERVED_SHARED_MEMORY_PER_BLOCK, "reserved_shared_memory_per_block",
                     "Shared memory reserved by the driver per block", limits, bytes, integer),
    CUDRV_QUERY_ATTR(MAX_THREADS_PER_MULTIPROCESSOR, "max_threads_per_multiprocessor",
                     "Max resident threads per multiprocessor", limits, threads, integer),
    CUDRV_QUERY_ATTR(MAX_BLOCKS_PER_MULTIPROCESSOR, "max_blocks_per_multiprocessor",
                     "Max resident blocks per multiprocessor", limits, blocks, integer),
    CUDRV_QUERY_ATTR(MAX_REGISTERS_PER_MULTIPROCESSOR, "max_registers_per_multiprocessor",
                     "Max 32-bit registers per multiprocessor", limits, registers, integer),
    CUDRV_QUERY_ATTR(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, "max_shared_memory_per_multiprocessor",
                     "Max shared memory per multiprocessor", limits, bytes, integer),
    CUDRV_QUERY_ATTR(TOTAL_CONSTANT_MEMORY, "total_constant_memory", "Constant memory", limits, bytes, integer),

    // --- memory -----------------------------------------------------------------------------------------------------
    CUDRV_QUERY_ATTR(MEMORY_CLOCK_RATE, "memory_clock_rate", "Peak memory clock rate", memory, khz, integer),
    CUDRV_QUERY_ATTR(GLOBAL_MEMORY_BUS_WIDTH, "global_memory_bus_width", "Global memory bus width", memory, bits,
                     integer),
    CUDRV_QUERY_ATTR(ECC_ENABLED, "ecc_enabled", "ECC enabled", memory, none, boolean),
    CUDRV_QUERY_ATTR(MAX_PITCH, "max_pitch", "Max pitch for memory copies", memory, bytes, integer),
    CUDRV_QUERY_ATTR(UNIFIED_ADDRESSING, "unified_addressing", "Address space unified with the host", memory, none,
                     boolean),
    CUDRV_QUERY_ATTR(CAN_MAP_HOST_MEMORY, "can_map_host_memory", "Can map host memory", memory, none, boolean),
    CUDRV_QUERY_ATTR(HOST_REGISTER_SUPPORTED, "host_register_supported", "Host memory registration supported", memory,
                     none, boolean),
    CUDRV_QUERY_ATTR(READ_ONLY_HOST_REGISTER_SUPPORTED, "read_only_host_register_supported",
                     "Read-only host memory registration supported", memory, none, boolean),
    CUDRV_QUERY_ATTR(CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, "can_use_host_pointer_for_registered_mem",
                     "Registered host memory at the host's address", memory, none, boolean),
    CUDRV_QUERY_ATTR(GENERIC_COMPRESSION_SUPPORTED, "generic_compression_supported", "Memory compression supported",
                     memory, none, boolean),
#if CUDA_VERSION >= 12080
    CUDRV_QUERY_ATTR(MEM_DECOMPRESS_ALGORITHM_MASK, "mem_decompress_algorithm_mask", "Decompression algorithms", memory,
                     none, bitmask),
    CUDRV_QUERY_ATTR(MEM_DECOMPRESS_MAXIMUM_LENGTH, "mem_decompress_maximum_length", "Max decompression length", memory,
                     bytes, integer),
#endif

    // --- caches -----------------------------------------------------------------------------------------------------
    CUDRV_QUERY_ATTR(L2_CACHE_SIZE, "l2_cache_size", "L2 cache size", caches, bytes, integer),
    CUDRV_QUERY_ATTR(MAX_PERSISTING_L2_CACHE_SIZE, "max_persisting_l2_cache_size", "Max persisting L2 cache size",
                     caches, bytes, integer),
    CUDRV_QUERY_ATTR(MAX_ACCESS_POLICY_WINDOW_SIZE, "max_access_policy_window_size", "Max access policy window size",
                     caches, bytes, integer),
    CUDRV_QUERY_ATTR(GLOBAL_L1_CACHE_SUPPORTED, "global_l1_cache_supported", "Globals cached in L1", caches, none,
                     boolean),
    CUDRV_QUERY_ATTR(LOCAL_L1_CACHE_SUPPORTED, "local_l1_cache_supported", "Locals cached in L1", caches, none,
                     boolean),

    // --- unified_memory ---------------------------------------------------------------------------------------------
    CUDRV_QUERY_ATTR(MANAGED_MEMORY, "managed_memory", "Managed memory supported", unified_memory, none, boolean),
    CUDRV_QUERY_ATTR(CONCURRENT_MANAGED_ACCESS, "concurrent_managed_access", "Concurrent managed access",
                     unified_memory, none, boolean),
    CUDRV_QUERY_ATTR(DIRECT_MANAGED_MEM_ACCESS_FROM_HOST, "direct_managed_mem_access_from_host",
                     "Host accesses managed memory without migration", unified_memory, none, boolean),
    CUDRV_QUERY_ATTR(PAGEABLE_MEMORY_ACCESS, "pageable_memory_access", "Pageable memory access", unified_memory, none,
                     boolean),
    CUDRV_QUERY_ATTR(PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, "pageable_memory_access_uses_host_page_tables",
                     "Pageable memory access through host page tables", unified_memory, none, boolean),
    CUDRV_QUERY_ATTR(UNIFIED_FUNCTION_POINTERS, "unified_function_pointers", "Unified function pointers",
                     unified_memory, none, boolean),

    // --- memory_pools_and_vmm ---------------------------------------------------------------------------------------
    CUDRV_QUERY_ATTR(MEMORY_POOLS_SUPPORTED, "memory_pools_supported", "Memory pools supported", memory_pools_and_vmm,
                     none, boolean),
    CUDRV_QUERY_ATTR(MEMPOOL_SUPPORTED_HANDLE_TYPES, "mempool_supported_handle_types", "Memory pool IPC handle types",
                     memory_pools_and_vmm, none, bitmask),
#if CUDA_VERSION >= 13000
    CUDRV_QUERY_ATTR(HOST_MEMORY_POOLS_SUPPORTED, "host_memory_pools_supported", "Host memory pools supported",
                     memory_pools_and_vmm, none, boolean),
#endif
#if CUDA_VERSION >= 12090
    CUDRV_QUERY_ATTR(HOST_NUMA_MEMORY_POOLS_SUPPORTED, "host_numa_memory_pools_supported",
                     "Host NUMA memory pools supported", memory_pools_and_vmm, none, boolean),
#endif
    CUDRV_QUERY_ATTR(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "virtual_memory_management_supported",
                     "Virtual memory management supported", memory_pools_and_vmm, none, boolean),
#if CUDA_VERSION >= 13000
    CUDRV_QUERY_ATTR(HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "host_virtual_memory_management_supported",
                     "Host virtual memory management supported", memory_pools_and_vmm, none, boolean),
#endif
#if CUDA_VERSION >= 12090
    CUDRV_QUERY_ATTR(HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "host_numa_virtual_memory_management_supported",
                     "Host NUMA virtual memory management supported", memory_pools_and_vmm, none, boolean),
#endif
#if CUDA_VERSION >= 12080
    CUDRV_QUERY_ATTR(HOST_NUMA_MULTINODE_IPC_SUPPORTED, "host_numa_multinode_ipc_supported",
                     "Host NUMA IPC between nodes supported", memory_pools_and_vmm, none, boolean),
#endif
    CUDRV_QUERY_ATTR(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, "handle_type_posix_file_descriptor_supported",
                     "Export to POSIX file descriptor supported", memory_pools_and_vmm, none, boolean),
    CUDRV_QUERY_ATTR(HANDLE_TYPE_WIN32_HANDLE_SUPPORTED, "handle_type_win32_handle_supported",
                     "Export to Win32 NT handle supported", memory_pools_and_vmm, none, boolean),
    CUDRV_QUERY_ATTR(HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED, "handle_type_win32_kmt_handle_supported",
                     "Export to Win32 KMT handle supported", memory_pools_and_vmm, none, boolean),
    CUDRV_QUERY_ATTR(HANDLE_TYPE_FABRIC_SUPPORTED, "handle_type_fabric_supported", "Export to fabric handle supported",
                     memory_pools_and_vmm, none, boolean),
    CUDRV_QUERY_ATTR(GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, "gpu_direct_rdma_with_cuda_vmm_supported",
                     "GPUDirect RDMA with VMM allocations supported", memory_pools_and_vmm, none, boolean),
    CUDRV_QUERY_ATTR(SPARSE_CUDA_ARRAY_SUPPORTED, "sparse_cuda_array_supported", "Sparse CUDA arrays supported",
                     memory_pools_and_vmm, none, boolean),
    CUDRV_QUERY_ATTR(DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED, "deferred_mapping_cuda_array_supported",
                     "Deferred mapping CUDA arrays supported", memory_pools_and_vmm, none, boolean),

    // --- interconnect -----------------------------------------------------------------------------------------------
    CUDRV_QUERY_ATTR(HOST_NATIVE_ATOMIC_SUPPORTED, "host_native_atomic_supported",
                     "All native atomics over the host link", interconnect, none, boolean),
#if CUDA_VERSION >= 13000
    CUDRV_QUERY_ATTR(ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED, "only_partial_host_native_atomic_supported",
                     "Only some native atomics over the host link", interconnect, none, boolean),
#endif
    CUDRV_QUERY_ATTR(GPU_DIRECT_RDMA_SUPPORTED, "gpu_direct_rdma_supported", "GPUDirect RDMA supported", interconnect,
                     none, boolean),
    CUDRV_QUERY_ATTR(GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS, "gpu_direct_rdma_flush_writes_options",
                     "GPUDirect RDMA write flush options", interconnect, none, bitmask),
    CUDRV_QUERY_ATTR(GPU_DIRECT_RDMA_WRITES_ORDERING, "gpu_direct_rdma_writes_ordering",
                     "GPUDirect RDMA write ordering", interconnect, none, enumeration),
    CUDRV_QUERY_ATTR(CAN_FLUSH_REMOTE_WRITES, "can_flush_remote_writes", "Can flush remote writes", interconnect, none,
                     boolean),
    CUDRV_QUERY_ATTR(DMA_BUF_SUPPORTED, "dma_buf_supported", "Buffer sharing through dma_buf supported", interconnect,
                     none, boolean),
#if CUDA_VERSION >= 13000
    CUDRV_QUERY_ATTR(HOST_ALLOC_DMA_BUF_SUPPORTED, "host_alloc_dma_buf_supported",
                     "Pinned host buffer sharing through dma_buf supported", interconnect, none, boolean),
#endif
    CUDRV_QUERY_ATTR(MULTICAST_SUPPORTED, "multicast_supported", "Switch multicast and reduction supported",
                     interconnect, none, boolean),

    // --- clusters ---------------------------------------------------------------------------------------------------
    // The only cluster attribute of the device; the cluster sizes a kernel can use depend on the kernel
    // (cuOccupancyMaxPotentialClusterSize), so they are not device attributes.
    CUDRV_QUERY_ATTR(CLUSTER_LAUNCH, "cluster_launch", "Cluster launch supported", clusters, none, boolean),
    // --- features ---------------------------------------------------------------------------------------------------
    CUDRV_QUERY_ATTR(COOPERATIVE_LAUNCH, "cooperative_launch", "Cooperative launch supported", features, none, boolean),
    CUDRV_QUERY_ATTR(TENSOR_MAP_ACCESS_SUPPORTED, "tensor_map_access_supported", "Tensor map access supported",
                     features, none, boolean),
    CUDRV_QUERY_ATTR(MEM_SYNC_DOMAIN_COUNT, "mem_sync_domain_count", "Memory synchronization domain count", features,
                     none, integer),
    CUDRV_QUERY_ATTR(CAN_USE_64_BIT_STREAM_MEM_OPS, "can_use_64_bit_stream_mem_ops",
                     "64-bit stream memory operations supported", features, none, boolean),
    CUDRV_QUERY_ATTR(CAN_USE_STREAM_WAIT_VALUE_NOR, "can_use_stream_wait_value_nor", "Stream wait value NOR supported",
                     features, none, boolean),
    CUDRV_QUERY_ATTR(IPC_EVENT_SUPPORTED, "ipc_event_supported", "IPC events supported", features, none, boolean),
    CUDRV_QUERY_ATTR(TIMELINE_SEMAPHORE_INTEROP_SUPPORTED, "timeline_semaphore_interop_supported",
                     "Timeline semaphore interop supported", features, none, boolean),
#if CUDA_VERSION >= 12050
    CUDRV_QUERY_ATTR(D3D12_CIG_SUPPORTED, "d3d12_cig_supported", "CIG with D3D12 supported", features, none, boolean),
#endif
#if CUDA_VERSION >= 12090
    CUDRV_QUERY_ATTR(VULKAN_CIG_SUPPORTED, "vulkan_cig_supported", "CIG with Vulkan supported", features, none,
                     boolean),
#endif

    // --- textures ---------------------------------------------------------------------------------------------------
    CUDRV_QUERY_ATTR(TEXTURE_ALIGNMENT, "texture_alignment", "Texture alignment", textures, bytes, integer),
    CUDRV_QUERY_ATTR(TEXTURE_PITCH_ALIGNMENT, "texture_pitch_alignment", "Texture pitch alignment", textures, bytes,
                     integer),
    CUDRV_QUERY_ATTR(SURFACE_ALIGNMENT, "surface_alignment", "Surface alignment", textures, bytes, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE1D_WIDTH, "maximum_texture1d_width", "Max 1D texture width", textures, texels,
                     integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH, "maximum_texture1d_mipmapped_width",
                     "Max 1D mipmapped texture width", textures, texels, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE1D_LAYERED_WIDTH, "maximum_texture1d_layered_width", "Max 1D layered texture width",
                     textures, texels, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE1D_LAYERED_LAYERS, "maximum_texture1d_layered_layers",
                     "Max 1D layered texture layers", textures, layers, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE2D_WIDTH, "maximum_texture2d_width", "Max 2D texture width", textures, texels,
                     integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE2D_HEIGHT, "maximum_texture2d_height", "Max 2D texture height", textures, texels,
                     integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE2D_LINEAR_WIDTH, "maximum_texture2d_linear_width", "Max 2D linear texture width",
                     textures, texels, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE2D_LINEAR_HEIGHT, "maximum_texture2d_linear_height", "Max 2D linear texture height",
                     textures, texels, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE2D_LINEAR_PITCH, "maximum_texture2d_linear_pitch", "Max 2D linear texture pitch",
                     textures, bytes, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH, "maximum_texture2d_mipmapped_width",
                     "Max 2D mipmapped texture width", textures, texels, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT, "maximum_texture2d_mipmapped_height",
                     "Max 2D mipmapped texture height", textures, texels, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE2D_GATHER_WIDTH, "maximum_texture2d_gather_width", "Max 2D gather texture width",
                     textures, texels, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE2D_GATHER_HEIGHT, "maximum_texture2d_gather_height", "Max 2D gather texture height",
                     textures, texels, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE2D_LAYERED_WIDTH, "maximum_texture2d_layered_width", "Max 2D layered texture width",
                     textures, texels, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE2D_LAYERED_HEIGHT, "maximum_texture2d_layered_height",
                     "Max 2D layered texture height", textures, texels, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE2D_LAYERED_LAYERS, "maximum_texture2d_layered_layers",
                     "Max 2D layered texture layers", textures, layers, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE3D_WIDTH, "maximum_texture3d_width", "Max 3D texture width", textures, texels,
                     integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE3D_HEIGHT, "maximum_texture3d_height", "Max 3D texture height", textures, texels,
                     integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE3D_DEPTH, "maximum_texture3d_depth", "Max 3D texture depth", textures, texels,
                     integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE, "maximum_texture3d_width_alternate",
                     "Alternate max 3D texture width", textures, texels, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE, "maximum_texture3d_height_alternate",
                     "Alternate max 3D texture height", textures, texels, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE, "maximum_texture3d_depth_alternate",
                     "Alternate max 3D texture depth", textures, texels, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURECUBEMAP_WIDTH, "maximum_texturecubemap_width", "Max cubemap texture width",
                     textures, texels, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH, "maximum_texturecubemap_layered_width",
                     "Max layered cubemap texture width", textures, texels, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS, "maximum_texturecubemap_layered_layers",
                     "Max layered cubemap texture layers", textures, layers, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_SURFACE1D_WIDTH, "maximum_surface1d_width", "Max 1D surface width", textures, elements,
                     integer),
    CUDRV_QUERY_ATTR(MAXIMUM_SURFACE1D_LAYERED_WIDTH, "maximum_surface1d_layered_width", "Max 1D layered surface width",
                     textures, elements, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_SURFACE1D_LAYERED_LAYERS, "maximum_surface1d_layered_layers",
                     "Max 1D layered surface layers", textures, layers, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_SURFACE2D_WIDTH, "maximum_surface2d_width", "Max 2D surface width", textures, elements,
                     integer),
    CUDRV_QUERY_ATTR(MAXIMUM_SURFACE2D_HEIGHT, "maximum_surface2d_height", "Max 2D surface height", textures, elements,
                     integer),
    CUDRV_QUERY_ATTR(MAXIMUM_SURFACE2D_LAYERED_WIDTH, "maximum_surface2d_layered_width", "Max 2D layered surface width",
                     textures, elements, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_SURFACE2D_LAYERED_HEIGHT, "maximum_surface2d_layered_height",
                     "Max 2D layered surface height", textures, elements, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_SURFACE2D_LAYERED_LAYERS, "maximum_surface2d_layered_layers",
                     "Max 2D layered surface layers", textures, layers, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_SURFACE3D_WIDTH, "maximum_surface3d_width", "Max 3D surface width", textures, elements,
                     integer),
    CUDRV_QUERY_ATTR(MAXIMUM_SURFACE3D_HEIGHT, "maximum_surface3d_height", "Max 3D surface height", textures, elements,
                     integer),
    CUDRV_QUERY_ATTR(MAXIMUM_SURFACE3D_DEPTH, "maximum_surface3d_depth", "Max 3D surface depth", textures, elements,
                     integer),
    CUDRV_QUERY_ATTR(MAXIMUM_SURFACECUBEMAP_WIDTH, "maximum_surfacecubemap_width", "Max cubemap surface width",
                     textures, elements, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH, "maximum_surfacecubemap_layered_width",
                     "Max layered cubemap surface width", textures, elements, integer),
    CUDRV_QUERY_ATTR(MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS, "maximum_surfacecubemap_layered_layers",
                     "Max layered cubemap surface layers", textures, layers, integer),
};

#undef CUDRV_QUERY_ATTR

// --- compile-time checks of the table (the unit test checks it against cuda.h itself) --------------------------------

constexpr std::string_view k_enum_prefix = "CU_DEVICE_ATTRIBUTE_";

constexpr int group_index(std::string_view name) {
  for (int i = 0; i < static_cast<int>(std::size(k_group_names)); ++i) {
    if (name == k_group_names[i]) return i;
  }
  return -1;
}

constexpr bool keys_are_lower_case_suffixes() {
  for (const attribute_desc& a : k_table) {
    std::string_view name = a.enum_name;
    std::string_view key = a.key;
    if (!name.starts_with(k_enum_prefix)) return false;
    name.remove_prefix(k_enum_prefix.size());
    if (name.size() != key.size()) return false;
    for (std::size_t i = 0; i < name.size(); ++i) {
      char c = name[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (c != key[i]) return false;
    }
  }
  return true;
}

constexpr bool sorted_by_group_and_every_group_used() {
  int previous = 0;
  bool used[std::size(k_group_names)] = {};
  for (const attribute_desc& a : k_table) {
    int index = group_index(a.group);
    if (index < previous) return false;  // also catches -1, an unknown group
    used[index] = true;
    previous = index;
  }
  for (bool u : used) {
    if (!u) return false;
  }
  return true;
}

// Distinct ids imply distinct enum names, and so (given the check above) distinct keys.
constexpr bool ids_unique() {
  for (std::size_t i = 0; i < std::size(k_table); ++i) {
    for (std::size_t j = i + 1; j < std::size(k_table); ++j) {
      if (k_table[i].id == k_table[j].id) return false;
    }
  }
  return true;
}

constexpr bool names_short_without_period() {
  for (const attribute_desc& a : k_table) {
    std::string_view name = a.name;
    if (name.empty() || name.size() > 60 || name.ends_with('.')) return false;
  }
  return true;
}

constexpr bool units_only_on_integers() {
  for (const attribute_desc& a : k_table) {
    if (a.kind != attribute_kind::integer && std::string_view(a.unit) != unit::none) return false;
  }
  return true;
}

static_assert(keys_are_lower_case_suffixes(), "a key is not the lower-case suffix of its enum_name");
static_assert(sorted_by_group_and_every_group_used(), "rows out of group order, or a group without rows");
static_assert(ids_unique(), "an attribute is listed twice");
static_assert(names_short_without_period(), "a name is empty, longer than 60 characters or ends with a period");
static_assert(units_only_on_integers(), "a unit on a boolean, enumeration or bitmask attribute");

// --- names of enumeration and bitmask values -----------------------------------------------------------------------

/// One value of a driver enum, or one flag of a driver bitmask, and its snake_case name.
struct value_name {
  long long value;
  const char* name;
};

// CUcomputemode (CU_COMPUTEMODE_EXCLUSIVE_THREAD, 1, is gone from the header: 1 reads as unknown).
constexpr value_name k_compute_modes[] = {
    {CU_COMPUTEMODE_DEFAULT, "default"},
    {CU_COMPUTEMODE_PROHIBITED, "prohibited"},
    {CU_COMPUTEMODE_EXCLUSIVE_PROCESS, "exclusive_process"},
};

// CUdeviceNumaConfig.
constexpr value_name k_numa_configs[] = {
    {CU_DEVICE_NUMA_CONFIG_NONE, "none"},
    {CU_DEVICE_NUMA_CONFIG_NUMA_NODE, "numa_node"},
};

// CUGPUDirectRDMAWritesOrdering.
constexpr value_name k_rdma_writes_orderings[] = {
    {CU_GPU_DIRECT_RDMA_WRITES_ORDERING_NONE, "none"},
    {CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER, "owner"},
    {CU_GPU_DIRECT_RDMA_WRITES_ORDERING_ALL_DEVICES, "all_devices"},
};

// CUmemAllocationHandleType flags (CU_MEM_HANDLE_TYPE_NONE, 0, is the empty mask).
constexpr value_name k_handle_types[] = {
    {CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, "posix_file_descriptor"},
    {CU_MEM_HANDLE_TYPE_WIN32, "win32"},
    {CU_MEM_HANDLE_TYPE_WIN32_KMT, "win32_kmt"},
    {CU_MEM_HANDLE_TYPE_FABRIC, "fabric"},
};

// CUflushGPUDirectRDMAWritesOptions flags.
constexpr value_name k_rdma_flush_options[] = {
    {CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST, "host"},
    {CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_MEMOPS, "memops"},
};

#if CUDA_VERSION >= 12080
// CUmemDecompressAlgorithm flags (CU_MEM_DECOMPRESS_UNSUPPORTED, 0, is the empty mask).
constexpr value_name k_decompress_algorithms[] = {
    {CU_MEM_DECOMPRESS_ALGORITHM_DEFLATE, "deflate"},
    {CU_MEM_DECOMPRESS_ALGORITHM_SNAPPY, "snappy"},
#if CUDA_VERSION >= 12090
    {CU_MEM_DECOMPRESS_ALGORITHM_LZ4, "lz4"},
#endif
};
#endif

/// The value names of an enumeration or bitmask attribute; empty for any other.
std::span<const value_name> value_names(CUdevice_attribute id) noexcept {
  switch (id) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: return k_compute_modes;
    case CU_DEVICE_ATTRIBUTE_NUMA_CONFIG: return k_numa_configs;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING: return k_rdma_writes_orderings;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: return k_handle_types;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS: return k_rdma_flush_options;
#if CUDA_VERSION >= 12080
    case CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_ALGORITHM_MASK: return k_decompress_algorithms;
#endif
    default: return {};
  }
}

std::string describe_enumeration(std::span<const value_name> names, long long value) {
  for (const value_name& n : names) {
    if (n.value == value) return n.name;
  }
  return "unknown(" + std::to_string(value) + ")";
}

std::string describe_bitmask(std::span<const value_name> flags, long long value) {
  if (value == 0) return "none";
  auto left = static_cast<unsigned long long>(value);
  std::string out;
  for (const value_name& f : flags) {
    auto bits = static_cast<unsigned long long>(f.value);
    if (bits != 0 && (left & bits) == bits) {
      if (!out.empty()) out += '|';
      out += f.name;
      left &= ~bits;
    }
  }
  if (left != 0) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "unknown(0x%llx)", left);
    if (!out.empty()) out += '|';
    out += hex;
  }
  return out;
}

}  // namespace

std::span<const attribute_desc> attribute_table() noexcept { return k_table; }

std::span<const char* const> group_names() noexcept { return k_group_names; }

std::string describe(const attribute_desc& attribute, long long value) {
  switch (attribute.kind) {
    case attribute_kind::enumeration: return describe_enumeration(value_names(attribute.id), value);
    case attribute_kind::bitmask: return describe_bitmask(value_names(attribute.id), value);
    case attribute_kind::integer:
    case attribute_kind::boolean: break;
  }
  return {};
}

const attribute_desc* find_attribute(std::string_view key) noexcept {
  for (const attribute_desc& a : k_table) {
    if (key == a.key) return &a;
  }
  return nullptr;
}

}  // namespace cudrv_query
