#pragma once
/// @file mpi.hpp
/// @brief The MPI helper of the optional `cudrv::mpi` component: starting MPI, the node-local rank,
/// one device per local rank, the NCCL unique id handed to every rank, GPU-aware MPI detection and
/// MPI datatypes of C++ element types.
///
/// Not part of the umbrella header and not of `libcudrv`: link `cudrv::mpi` (CMake:
/// `find_package(cudrv COMPONENTS mpi)`), which links MPI. This header includes `<mpi.h>`.
/// See @ref scale-out for the whole model.
///
/// Layer: scaleout (docs/design.md, "Source layers").

#include <cudrv/device.hpp>
#include <cudrv/error.hpp>
#include <cudrv/nccl.hpp>

/// @cond INTERNAL
// cudrv::mpi uses MPI's C API only. Open MPI's and MPICH's <mpi.h> bring the MPI-2 C++ bindings
// (removed in MPI-3) into C++ code unless told not to, and those need a library (libmpi_cxx) that the
// C component does not link. The cudrv::mpi target sets both macros for its users as well.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
/// @endcond
#include <mpi.h>

#include <complex>  // heavy, needed: std::complex element types map to MPI's complex datatypes
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

namespace cudrv {

/// @brief An MPI call failed. @ref error::source is @ref error_source::mpi, @ref error::code the MPI
/// error code, @ref error::name its error class (`MPI_ERR_TRUNCATE`, ...), @ref error::description
/// the text of `MPI_Error_string`. cudrv's MPI helper sets `MPI_ERRORS_RETURN` on the communicators it
/// calls MPI on only for the duration of its own calls, so these errors reach C++ instead of aborting.
///
/// @code
/// try {
///   auto id = cudrv::mpi::broadcast_unique_id(MPI_COMM_WORLD);
/// } catch (const cudrv::mpi_error& e) {
///   std::cerr << e.api() << ": " << e.name() << '\n';   // MPI_Bcast: MPI_ERR_COMM
/// }
/// @endcode
class mpi_error : public error {
 public:
  /// @brief Builds the error from an MPI return code.
  /// @param code what the MPI call returned
  /// @param api the MPI call that failed, e.g. `MPI_Comm_split_type`
  /// @param context what was being done; may be empty
  mpi_error(int code, std::string api, std::string context = {});
};

/// @brief MPI for GPU programs: one rank per GPU, chosen by the node-local rank. See @ref scale-out.
///
/// The functions that call MPI (@ref node_local, @ref broadcast_unique_id) throw an @ref error with
/// source @ref error_source::mpi (name `MPI_ERR_OTHER`) when MPI is not initialized yet or already
/// finalized, instead of making the call.
namespace mpi {

/// @brief Throws @ref mpi_error when @p code is not `MPI_SUCCESS`. The communicator the call was made
/// on must have `MPI_ERRORS_RETURN` (or another handler that returns) for a failure to get here; with
/// MPI's default, `MPI_ERRORS_ARE_FATAL`, MPI aborts the job first.
/// @code
/// cudrv::mpi::check(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, comm), "MPI_Allreduce");
/// @endcode
/// @param code what an MPI call returned
/// @param api the call's name, for the message
/// @param context what was being done; may be empty
void check(int code, const char* api, const char* context = "");

/// @brief Starts MPI for the lifetime of the object (`MPI_Init_thread`) and finalizes it
/// (`MPI_Finalize`) at destruction, unless MPI was already started when it was made: then it only
/// reads the thread level (`MPI_Query_thread`) and leaves finalizing to whoever started MPI. Not
/// copyable or movable. MPI cannot be started again once finalized: make one environment, in `main`.
///
/// @code
/// int main(int argc, char** argv) {
///   cudrv::mpi::environment env(argc, argv);          // MPI_THREAD_FUNNELED by default
///   auto node = cudrv::mpi::node_local();
///   cudrv::device dev = cudrv::mpi::select_device(node);
///   ...
/// }
/// @endcode
class environment {
 public:
  /// @brief Starts MPI with command-line arguments, asking for thread support @p required.
  /// @throws mpi_error when MPI_Init_thread fails, or MPI provides less than @p required (MPI, when
  /// this object started it, is finalized again before the throw), or MPI was already finalized
  environment(int& argc, char**& argv, int required = MPI_THREAD_FUNNELED);
  /// @brief Starts MPI without command-line arguments.
  /// @throws mpi_error as the constructor with arguments
  explicit environment(int required = MPI_THREAD_FUNNELED);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  environment(const environment&) = delete;
  environment& operator=(const environment&) = delete;
  /// @}
  /// @brief Finalizes MPI when this object started it; never throws.
  ~environment();
  /// @brief The thread support MPI provides (`MPI_THREAD_SINGLE` ... `MPI_THREAD_MULTIPLE`).
  [[nodiscard]] int thread_level() const noexcept { return provided_; }
  /// @brief Whether this object started MPI (and so finalizes it).
  [[nodiscard]] bool started_mpi() const noexcept { return owns_; }

 private:
  int provided_ = MPI_THREAD_SINGLE;
  bool owns_ = false;
};

/// @brief Where a rank runs: its rank among all ranks and among the ranks of its node.
struct node_info {
  int rank = 0;        ///< The rank in the communicator that was split.
  int size = 1;        ///< The size of that communicator.
  int local_rank = 0;  ///< The rank among the ranks that share this node's memory (the shared-memory split).
  int local_size = 1;  ///< How many ranks share this node.
  int node = 0;        ///< This node's index, 0 to @ref nodes - 1, in the order of the nodes' lowest ranks.
  int nodes = 1;       ///< How many nodes the communicator spans.
  /// @brief The launcher's variable that confirmed @ref local_rank (`OMPI_COMM_WORLD_LOCAL_RANK`,
  /// `MPI_LOCALRANKID`, `MV2_COMM_WORLD_LOCAL_RANK`), empty when none was set or the communicator is
  /// not `MPI_COMM_WORLD`.
  std::string checked_by{};
};

/// @brief The node-local rank the launcher put in the environment, before MPI is started: the first
/// of `OMPI_COMM_WORLD_LOCAL_RANK` (Open MPI), `MPI_LOCALRANKID` (MPICH, Intel MPI) and
/// `MV2_COMM_WORLD_LOCAL_RANK` (MVAPICH2) that holds a non-negative integer (digits only); a variable
/// set to anything else is passed over. Empty when none does. Needs no MPI call: for choosing a device
/// before `MPI_Init`, which some GPU-aware MPIs want.
/// @code
/// int local = cudrv::mpi::launcher_local_rank().value_or(0);
/// @endcode
[[nodiscard]] std::optional<int> launcher_local_rank() noexcept;

/// @brief This rank's place on its node: splits @p comm by shared memory
/// (`MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`), counts the nodes, and, when @p comm is
/// `MPI_COMM_WORLD` (or congruent with it) and the launcher set a local-rank variable, checks that both
/// agree. Collective over @p comm; a disagreement on any rank makes every rank throw.
/// @code
/// auto node = cudrv::mpi::node_local();
/// std::printf("rank %d is %d of %d on node %d\n", node.rank, node.local_rank, node.local_size, node.node);
/// @endcode
/// @throws mpi_error when an MPI call fails
/// @throws invalid_argument_error when @p comm is `MPI_COMM_NULL`
/// @throws error (source mpi) when the launcher's variable disagrees with the split (a launcher that
/// placed ranks differently from what MPI reports: the message names the variable and both values; the
/// other ranks' errors name the ranks that disagree)
[[nodiscard]] node_info node_local(MPI_Comm comm = MPI_COMM_WORLD);

/// @brief How local ranks map to devices.
enum class device_policy {
  exclusive,  ///< One device per local rank; more local ranks than devices is an error.
  shared,     ///< Local rank r uses device r mod (device count); ranks may share a device.
};

/// @brief The device ordinal of local rank @p local_rank of @p local_size on a node with
/// @p device_count devices, under @p policy. Pure arithmetic: needs neither MPI nor a driver.
/// @code
/// int ordinal = cudrv::mpi::device_ordinal(node.local_rank, node.local_size, 8);   // 0..7
/// @endcode
/// @throws invalid_argument_error when @p device_count < 1, when @p local_rank is outside
/// [0, @p local_size), or, for @ref device_policy::exclusive, when @p local_size > @p device_count (the
/// message gives both numbers and the ways out: fewer ranks per node, or the shared policy)
[[nodiscard]] int device_ordinal(int local_rank, int local_size, int device_count,
                                 device_policy policy = device_policy::exclusive);

/// @brief The device of this rank: @ref device_ordinal over the devices the driver sees
/// (`CUDA_VISIBLE_DEVICES` applies). Creates no context.
/// @code
/// cudrv::device dev = cudrv::mpi::select_device(cudrv::mpi::node_local());
/// @endcode
/// @throws invalid_argument_error as @ref device_ordinal (a driver that sees no device included)
/// @throws driver_unavailable_error without a usable driver
[[nodiscard]] cudrv::device select_device(const node_info& node, device_policy policy = device_policy::exclusive);

/// @brief A new NCCL unique id made on rank @p root of @p comm and broadcast to every rank
/// (`MPI_Bcast`), for `cudrv::nccl::communicator::init_rank`. Collective over @p comm. When @p root
/// cannot make the id (no NCCL, NCCL refuses), every rank throws, none waits forever: the root sends
/// its failure along with the bytes. Part of the NCCL layer: defined only where cudrv was built with it
/// (see `<cudrv/nccl.hpp>`).
/// @code
/// auto id = cudrv::mpi::broadcast_unique_id(MPI_COMM_WORLD);
/// auto comm = cudrv::nccl::communicator::init_rank(id, node.size, node.rank, dev);
/// @endcode
/// @throws the root's nccl_error or library_unavailable_error on the root; on the other ranks an
/// @ref error (source nccl) that says the root could not make the id and quotes its message
/// @throws mpi_error when the broadcast fails
/// @throws invalid_argument_error when @p comm is `MPI_COMM_NULL` or @p root is not a rank of it
[[nodiscard]] nccl::unique_id broadcast_unique_id(MPI_Comm comm = MPI_COMM_WORLD, int root = 0);

/// @brief Whether MPI accepts device pointers in its calls (GPU-aware, "CUDA-aware" MPI).
enum class gpu_awareness {
  yes,      ///< MPI says so at run time (or CUDRV_MPI_GPU_AWARE=1 says so).
  no,       ///< MPI says it is not, or was built without it (or CUDRV_MPI_GPU_AWARE=0 says so).
  unknown,  ///< This MPI has no way to ask (no `MPIX_Query_cuda_support`), or MPI is not running yet.
};

/// @brief Whether this MPI is GPU-aware: `CUDRV_MPI_GPU_AWARE` (`0` or `1`; other values are
/// ignored) when set, else `MPIX_Query_cuda_support()` where the MPI has it (Open MPI's
/// `<mpi-ext.h>`), asked once MPI is running; before `MPI_Init`, or after `MPI_Finalize`, the answer
/// is @ref gpu_awareness::no for an Open MPI built without CUDA support (`MPIX_CUDA_AWARE_SUPPORT` 0)
/// and @ref gpu_awareness::unknown otherwise. An MPI without the query gives
/// @ref gpu_awareness::unknown. Treat anything but `yes` as no: stage device data through pinned host
/// memory (see @ref scale-out, "The MPI helper").
/// @code
/// if (cudrv::mpi::gpu_aware() == cudrv::mpi::gpu_awareness::yes) { ... send device pointers ... }
/// else { ... copy to a pinned_buffer, send, copy back ... }
/// @endcode
[[nodiscard]] gpu_awareness gpu_aware() noexcept;

/// @brief The name of @p a: `"yes"`, `"no"` or `"unknown"`.
[[nodiscard]] const char* to_string(gpu_awareness a) noexcept;

/// @brief The MPI datatype of C++ element type @p T (the fixed-width integers, `float`, `double`,
/// `std::complex` of both, `char`, `std::byte`, `bool`), chosen at compile time.
/// @code
/// MPI_Allreduce(MPI_IN_PLACE, v.data(), int(v.size()), cudrv::mpi::datatype<double>(), MPI_SUM, comm);
/// @endcode
template <class T>
[[nodiscard]] MPI_Datatype datatype() noexcept {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, char>)
    return MPI_CHAR;
  else if constexpr (std::is_same_v<U, signed char>)
    return MPI_SIGNED_CHAR;
  else if constexpr (std::is_same_v<U, unsigned char> || std::is_same_v<U, std::byte>)
    return MPI_UNSIGNED_CHAR;
  else if constexpr (std::is_same_v<U, bool>)
    return MPI_CXX_BOOL;
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U> && sizeof(U) == 1)
    return MPI_INT8_T;
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U> && sizeof(U) == 2)
    return MPI_INT16_T;
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U> && sizeof(U) == 4)
    return MPI_INT32_T;
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U> && sizeof(U) == 8)
    return MPI_INT64_T;
  else if constexpr (std::is_integral_v<U> && std::is_unsigned_v<U> && sizeof(U) == 1)
    return MPI_UINT8_T;
  else if constexpr (std::is_integral_v<U> && std::is_unsigned_v<U> && sizeof(U) == 2)
    return MPI_UINT16_T;
  else if constexpr (std::is_integral_v<U> && std::is_unsigned_v<U> && sizeof(U) == 4)
    return MPI_UINT32_T;
  else if constexpr (std::is_integral_v<U> && std::is_unsigned_v<U> && sizeof(U) == 8)
    return MPI_UINT64_T;
  else if constexpr (std::is_same_v<U, float>)
    return MPI_FLOAT;
  else if constexpr (std::is_same_v<U, double>)
    return MPI_DOUBLE;
  else if constexpr (std::is_same_v<U, std::complex<float>>)
    return MPI_CXX_FLOAT_COMPLEX;
  else if constexpr (std::is_same_v<U, std::complex<double>>)
    return MPI_CXX_DOUBLE_COMPLEX;
  else
    static_assert(sizeof(U) == 0, "cudrv::mpi::datatype: no MPI datatype for this element type");
}

}  // namespace mpi
}  // namespace cudrv
