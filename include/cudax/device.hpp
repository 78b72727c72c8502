/// @file device.hpp
/// @brief CUDA devices: the value type @ref cudax::device, typed attributes, and the range of all
/// devices.
#pragma once

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "cudax/context.hpp"

namespace cudax {

/// @brief A device attribute tag: the `CUdevice_attribute` to query and the type of its value.
/// @tparam Attr the driver attribute
/// @tparam T the type the value is returned as (`int`, `bool`, `std::size_t` or an enum)
template <CUdevice_attribute Attr, class T>
struct device_attribute {
  /// @brief The driver attribute this tag queries.
  static constexpr CUdevice_attribute value = Attr;
  /// @brief The type of the attribute's value.
  using type = T;
};

/// @brief Typed tags for the commonly used device attributes, for @ref device::attribute.
///
/// Each tag fixes the type of the result: `dev.attribute(device_attributes::l2_cache_size)` is a
/// `std::size_t`, `dev.attribute(device_attributes::managed_memory)` a `bool`. Attributes without a
/// tag stay reachable with the raw overload `dev.attribute(CU_DEVICE_ATTRIBUTE_...)`.
namespace device_attributes {
/// @brief Maximum threads per block.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, int> max_threads_per_block{};
/// @brief Maximum block dimension x.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, int> max_block_dim_x{};
/// @brief Maximum block dimension y.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, int> max_block_dim_y{};
/// @brief Maximum block dimension z.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, int> max_block_dim_z{};
/// @brief Maximum grid dimension x.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, int> max_grid_dim_x{};
/// @brief Maximum grid dimension y.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, int> max_grid_dim_y{};
/// @brief Maximum grid dimension z.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, int> max_grid_dim_z{};
/// @brief Shared memory available to a block without opting in, in bytes.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, std::size_t> max_shared_memory_per_block{};
/// @brief Shared memory a block can use after opting in (cuFuncSetAttribute), in bytes.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, std::size_t> max_shared_memory_per_block_optin{};
/// @brief Shared memory per multiprocessor, in bytes.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, std::size_t> max_shared_memory_per_multiprocessor{};
/// @brief Shared memory reserved by the system per block, in bytes.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, std::size_t> reserved_shared_memory_per_block{};
/// @brief Constant memory, in bytes.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, std::size_t> total_constant_memory{};
/// @brief Threads per warp.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_WARP_SIZE, int> warp_size{};
/// @brief Maximum pitch of a pitched allocation, in bytes.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MAX_PITCH, std::size_t> max_pitch{};
/// @brief 32-bit registers per block.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, int> max_registers_per_block{};
/// @brief 32-bit registers per multiprocessor.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, int> max_registers_per_multiprocessor{};
/// @brief Peak SM clock, in kHz.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_CLOCK_RATE, int> clock_rate_khz{};
/// @brief Peak memory clock, in kHz.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, int> memory_clock_rate_khz{};
/// @brief Width of the global memory bus, in bits.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, int> global_memory_bus_width{};
/// @brief Size of the L2 cache, in bytes.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, std::size_t> l2_cache_size{};
/// @brief Largest persisting L2 cache size, in bytes.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, std::size_t> max_persisting_l2_cache_size{};
/// @brief Number of streaming multiprocessors.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, int> multiprocessor_count{};
/// @brief Maximum resident threads per multiprocessor.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, int> max_threads_per_multiprocessor{};
/// @brief Maximum resident blocks per multiprocessor.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, int> max_blocks_per_multiprocessor{};
/// @brief Compute capability, major number.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, int> compute_capability_major{};
/// @brief Compute capability, minor number.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, int> compute_capability_minor{};
/// @brief The compute mode (default, prohibited, exclusive process).
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, CUcomputemode> compute_mode{};
/// @brief Number of asynchronous copy engines.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, int> async_engine_count{};
/// @brief Whether kernels have a run-time limit (a display is attached).
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT, bool> kernel_exec_timeout{};
/// @brief Whether the device is integrated with the host memory.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_INTEGRATED, bool> integrated{};
/// @brief Whether the device can map host memory.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, bool> can_map_host_memory{};
/// @brief Whether kernels of one context can run concurrently.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, bool> concurrent_kernels{};
/// @brief Whether ECC is enabled.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_ECC_ENABLED, bool> ecc_enabled{};
/// @brief PCI bus number.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, int> pci_bus_id{};
/// @brief PCI device (slot) number.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, int> pci_device_id{};
/// @brief PCI domain number.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, int> pci_domain_id{};
/// @brief Whether the device shares one address space with the host.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, bool> unified_addressing{};
/// @brief Whether streams can have priorities.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, bool> stream_priorities_supported{};
/// @brief Whether managed memory is supported.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, bool> managed_memory{};
/// @brief Whether the device is on a multi-GPU board.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD, bool> multi_gpu_board{};
/// @brief Whether the link to the host supports native atomics.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, bool> host_native_atomic_supported{};
/// @brief Whether the device can access pageable host memory.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, bool> pageable_memory_access{};
/// @brief Whether the device and the host can access managed memory concurrently.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, bool> concurrent_managed_access{};
/// @brief Whether compute preemption is supported.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED, bool> compute_preemption_supported{};
/// @brief Whether cooperative launches are supported.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, bool> cooperative_launch{};
/// @brief Whether cuMemHostRegister is supported.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, bool> host_register_supported{};
/// @brief Whether read-only host registration is supported.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, bool> read_only_host_register_supported{};
/// @brief Whether virtual memory management is supported.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, bool> virtual_memory_management_supported{};
/// @brief Whether stream-ordered memory pools are supported.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, bool> memory_pools_supported{};
/// @brief The IPC handle types memory pools support, as a mask of `CUmemAllocationHandleType`.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, unsigned int> mempool_supported_handle_types{};
/// @brief Whether GPUDirect RDMA is supported.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, bool> gpu_direct_rdma_supported{};
/// @brief Whether thread-block clusters can be launched.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, bool> cluster_launch{};
/// @brief Whether IPC events are supported.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, bool> ipc_event_supported{};
/// @brief Whether TMA tensor maps are supported.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED, bool> tensor_map_access_supported{};
/// @brief Number of memory synchronisation domains.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT, int> mem_sync_domain_count{};
/// @brief Whether the device supports multicast objects.
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, bool> multicast_supported{};
#if CUDA_VERSION >= 12040
/// @brief Whether the device is driven by MPS (CUDA 12.4 headers and newer).
inline constexpr device_attribute<CU_DEVICE_ATTRIBUTE_MPS_ENABLED, bool> mps_enabled{};
#endif
}  // namespace device_attributes

/// @brief The compute capability of a device (9.0 for the H100).
struct compute_capability {
  int major;  ///< Major number.
  int minor;  ///< Minor number.
  /// @brief As one number, `10 * major + minor` (90 for 9.0).
  [[nodiscard]] constexpr int as_int() const noexcept { return 10 * major + minor; }
  /// @brief Capabilities compare by major, then minor.
  [[nodiscard]] friend constexpr auto operator<=>(compute_capability, compute_capability) = default;
};

/// @brief A device's 16-byte UUID.
struct device_uuid {
  std::array<unsigned char, 16> bytes;  ///< The raw bytes.
  /// @brief The form nvidia-smi prints: `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
  [[nodiscard]] std::string to_string() const;
  /// @brief UUIDs compare byte by byte.
  [[nodiscard]] friend bool operator==(const device_uuid&, const device_uuid&) = default;
};

/// @brief A CUDA device: a cheap value type holding the device's ordinal.
///
/// Ordinals count the devices the process sees, so they follow `CUDA_VISIBLE_DEVICES` and
/// `CUDA_DEVICE_ORDER`. Queries go through cuDeviceGetAttribute one attribute at a time (tens of
/// nanoseconds each); none creates a context except those that need one by nature
/// (@ref free_memory, @ref stream_priority_range, @ref synchronize), which use the primary context.
/// @code
/// for (cudax::device dev : cudax::devices()) {
///   std::printf("%d %s %s, %d SMs, %zu MiB\n", dev.ordinal(), dev.name().c_str(), dev.arch().c_str(),
///               dev.attribute(cudax::device_attributes::multiprocessor_count),
///               dev.total_memory() >> 20);
/// }
/// @endcode
class device {
 public:
  /// @brief The device with this ordinal.
  /// @throws error with `CUDA_ERROR_INVALID_DEVICE` when the ordinal is out of range; the message
  /// gives the number of visible devices
  explicit device(int ordinal);

  /// @brief Wraps a CUdevice obtained from the driver (cuDeviceGet, cuCtxGetDevice).
  [[nodiscard]] static device from_native_handle(CUdevice handle) noexcept { return device(handle, 0); }

  /// @brief The ordinal of the device among those visible to the process.
  [[nodiscard]] int ordinal() const noexcept { return static_cast<int>(handle_); }
  /// @brief The driver handle.
  [[nodiscard]] CUdevice native_handle() const noexcept { return handle_; }

  /// @brief The product name, e.g. `NVIDIA H100 80GB HBM3`.
  [[nodiscard]] std::string name() const;
  /// @brief The device UUID.
  [[nodiscard]] device_uuid uuid() const;
  /// @brief The PCI bus id in the form `0000:c1:00.0` (domain:bus:device.function, lower case).
  [[nodiscard]] std::string pci_bus_id() const;
  /// @brief The compute capability.
  [[nodiscard]] cudax::compute_capability compute_capability() const;
  /// @brief The architecture name used by compilers, e.g. `sm_90`.
  [[nodiscard]] std::string arch() const;
  /// @brief Total device memory in bytes (cuDeviceTotalMem; needs no context).
  [[nodiscard]] std::size_t total_memory() const;
  /// @brief Free device memory in bytes (cuMemGetInfo in the primary context).
  [[nodiscard]] std::size_t free_memory() const;

  /// @brief Any device attribute, as the driver's `int`.
  [[nodiscard]] int attribute(CUdevice_attribute attr) const;
  /// @brief A typed attribute, e.g. `dev.attribute(device_attributes::l2_cache_size)` (a size_t).
  template <CUdevice_attribute Attr, class T>
  [[nodiscard]] T attribute(device_attribute<Attr, T>) const {
    if constexpr (std::is_same_v<T, bool>) {
      return attribute(Attr) != 0;
    } else {
      return static_cast<T>(attribute(Attr));
    }
  }

  /// @brief Whether this device can access memory of @p peer directly (cuDeviceCanAccessPeer);
  /// false for the device itself.
  [[nodiscard]] bool can_access_peer(const device& peer) const;
  /// @brief A P2P attribute of the link from this device to @p peer (cuDeviceGetP2PAttribute),
  /// e.g. `CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK`.
  [[nodiscard]] int p2p_attribute(CUdevice_P2PAttribute attr, const device& peer) const;
  /// @brief Lets this device's primary context access @p peer's memory. Already enabled is not an error.
  /// @throws not_supported_error when the devices cannot access each other
  void enable_peer_access(const device& peer) const;
  /// @brief Revokes access enabled by @ref enable_peer_access.
  void disable_peer_access(const device& peer) const;

  /// @brief The stream priority range {greatest, least}; numerically lower is higher priority.
  [[nodiscard]] std::pair<int, int> stream_priority_range() const;
  /// @brief Blocks until all work in the device's primary context has completed.
  void synchronize() const;
  /// @brief Makes the device's primary context current on the calling thread (the one call in cudax
  /// that changes the current context on purpose, like cudaSetDevice).
  void set_current() const;

  /// @brief The device's primary context, retained once by cudax for the rest of the process on
  /// first use. Objects created from a device live in this context.
  [[nodiscard]] context_ref primary_context() const;
  /// @brief One balanced reference on the primary context (see @ref cudax::primary_context).
  [[nodiscard]] cudax::primary_context retain_primary_context() const { return cudax::primary_context(*this); }
  /// @brief Whether the primary context is active (retained by anybody), from cuDevicePrimaryCtxGetState.
  [[nodiscard]] bool primary_context_active() const;
  /// @brief The flags of the primary context, from cuDevicePrimaryCtxGetState.
  [[nodiscard]] unsigned int primary_context_flags() const;
  /// @brief Sets the flags the primary context is (or will be) created with (cuDevicePrimaryCtxSetFlags).
  void set_primary_context_flags(context_flags flags) const;

  /// @brief Devices compare by ordinal.
  [[nodiscard]] friend bool operator==(const device& a, const device& b) noexcept { return a.handle_ == b.handle_; }

 private:
  device(CUdevice handle, int /*unchecked*/) noexcept : handle_(handle) {}
  CUdevice handle_;
};

/// @brief The number of devices visible to the process; 0 when the driver reports none.
/// @throws driver_unavailable_error when the driver cannot be loaded
[[nodiscard]] int device_count();

/// @brief The range of all visible devices, in ordinal order: `for (cudax::device d : cudax::devices())`.
class device_range {
 public:
  /// @brief Iterates over ordinals and yields @ref device values.
  class iterator {
   public:
    using value_type = device;              ///< Yields devices.
    using difference_type = std::ptrdiff_t;  ///< Distance between ordinals.
    /// @brief An iterator at the start of an empty range.
    iterator() = default;
    /// @brief An iterator at @p ordinal.
    explicit iterator(int ordinal) noexcept : ordinal_(ordinal) {}
    /// @brief The device at the current ordinal.
    [[nodiscard]] device operator*() const { return device::from_native_handle(static_cast<CUdevice>(ordinal_)); }
    /// @brief Advances to the next ordinal.
    iterator& operator++() noexcept {
      ++ordinal_;
      return *this;
    }
    /// @brief Advances to the next ordinal, returning the previous position.
    iterator operator++(int) noexcept {
      iterator old = *this;
      ++ordinal_;
      return old;
    }
    /// @brief Iterators compare by ordinal.
    [[nodiscard]] friend bool operator==(iterator a, iterator b) noexcept { return a.ordinal_ == b.ordinal_; }

   private:
    int ordinal_ = 0;
  };
  /// @brief A range over @p count devices.
  explicit device_range(int count) noexcept : count_(count) {}
  /// @brief The first device.
  [[nodiscard]] iterator begin() const noexcept { return iterator(0); }
  /// @brief One past the last device.
  [[nodiscard]] iterator end() const noexcept { return iterator(count_); }
  /// @brief The number of devices.
  [[nodiscard]] std::size_t size() const noexcept { return static_cast<std::size_t>(count_); }
  /// @brief Whether there is no device.
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  /// @brief The device with ordinal @p i (checked like @ref device::device).
  [[nodiscard]] device operator[](std::size_t i) const { return device(static_cast<int>(i)); }

 private:
  int count_;
};

/// @brief All visible devices.
/// @throws driver_unavailable_error when the driver cannot be loaded
[[nodiscard]] device_range devices();

}  // namespace cudax
