/// @file nccl.hpp
/// @brief NCCL communicators and collectives (opt-in, not part of `<cudrv/cudrv.hpp>`): the owning
/// @ref cudrv::nccl::communicator and its view @ref cudrv::nccl::communicator_ref, @ref cudrv::nccl::unique_id,
/// collectives typed on cudrv buffers and ordered on cudrv streams, @ref cudrv::nccl::group scopes,
/// @ref cudrv::nccl::registration of user buffers, memory NCCL allocates (@ref cudrv::nccl::buffer) and
/// its symmetric @ref cudrv::nccl::window, premultiplied-sum operators (@ref cudrv::nccl::premul_sum),
/// and the fault path of revoke and shrink.
///
/// Functions of NCCL releases newer than 2.18 (window registration, shrink, revoke, all-to-all, gather,
/// scatter, scalable initialisation, group simulation, ncclMemAlloc, premultiplied sums) are optional:
/// with an NCCL that lacks one, its cudrv call throws @ref cudrv::not_supported_error naming the NCCL
/// version that brought it.
///
/// NCCL is loaded at run time, like the driver: the first call that needs it opens `libnccl.so.2`
/// with `dlopen` (or the file named by `CUDRV_LIBNCCL`), so nothing links libnccl and a machine without
/// NCCL gets a @ref cudrv::library_unavailable_error that says so. This header does not include `<nccl.h>`,
/// but the layer's source is compiled against it: libcudrv has this header's functions only where CMake
/// found `nccl.h` when cudrv was built (`CUDRV_WITH_NCCL`; `find_package(cudrv COMPONENTS nccl)` checks).
///
/// Layer: scaleout (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cudrv/detail/exchange.hpp"
#include "cudrv/device.hpp"
#include "cudrv/device_buffer.hpp"
#include "cudrv/error.hpp"
#include "cudrv/span.hpp"
#include "cudrv/stream.hpp"

/// @cond INTERNAL
// NCCL's communicator: ncclComm_t is `struct ncclComm*`. The CUDA headers declare the 16-bit float
// types the same way (cuda_fp16.h); declaring them here maps them without including those headers.
struct ncclComm;
struct ncclWindow_vidmem;
struct __half;
struct __nv_bfloat16;
/// @endcond

namespace cudrv {

/// @brief An NCCL call failed. @ref error::source is @ref error_source::nccl, @ref error::code the
/// `ncclResult_t`, @ref error::name its name from `ncclGetErrorString` (e.g. `invalid argument`
/// prefixed by the enumerator, `ncclInvalidArgument`), and @ref last_error NCCL's own explanation
/// (`ncclGetLastError`), which `what()` includes.
///
/// @code
/// try {
///   comm.all_reduce(send, recv, cudrv::nccl::reduction::sum, s);
/// } catch (const cudrv::nccl_error& e) {
///   std::cerr << e.name() << ": " << e.last_error() << '\n';   // ncclInvalidUsage: ...
/// }
/// @endcode
class nccl_error : public error {
 public:
  /// @brief Builds the error.
  /// @param result the `ncclResult_t` NCCL returned
  /// @param name the enumerator's name, e.g. `ncclInvalidUsage`
  /// @param description NCCL's text for the code (`ncclGetErrorString`)
  /// @param last_error NCCL's message for the failure (`ncclGetLastError`), may be empty
  /// @param api the NCCL call that failed, e.g. `ncclAllReduce`
  /// @param context what was being done (counts, ranks, device)
  nccl_error(int result, std::string name, std::string description, std::string last_error, std::string api,
             std::string context);
  /// @brief The `ncclResult_t` NCCL returned, as an int (same as @ref error::code).
  [[nodiscard]] int nccl_result() const noexcept { return code(); }
  /// @brief NCCL's message for the failure (`ncclGetLastError`); may be empty.
  [[nodiscard]] const std::string& last_error() const noexcept { return last_error_; }

 private:
  std::string last_error_;
};

/// @brief NCCL: communicators, collectives and point-to-point transfers over cudrv buffers and streams.
/// See @ref scale-out for the model.
namespace nccl {

/// @brief A non-blocking communicator was still in progress (`ncclInProgress`) when the bound cudrv
/// waits for it ran out (@ref communicator_config::timeout, or the bound given to
/// @ref communicator_base::wait_ready). @ref error::code is 7 (`ncclInProgress`). The communicator may
/// be unusable: abort it (@ref communicator::abort) unless the caller knows the peers are just slow.
///
/// @code
/// try {
///   comm.wait_ready(std::chrono::seconds(30));
/// } catch (const cudrv::nccl::timeout_error& e) {
///   std::cerr << "no progress after " << e.timeout().count() << " ms\n";
///   comm.abort();
/// }
/// @endcode
class timeout_error : public nccl_error {
 public:
  /// @brief Builds the error.
  /// @param api the NCCL call that was being waited for, e.g. `ncclCommShrink`
  /// @param context what was being done
  /// @param timeout the bound that passed
  timeout_error(std::string api, std::string context, std::chrono::milliseconds timeout);
  /// @brief The bound that passed.
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return timeout_; }

 private:
  std::chrono::milliseconds timeout_;
};

/// @brief NCCL's status codes (`ncclResult_t`), as returned by `communicator_base::async_error()`.
///
/// @code
/// if (comm.async_error() != cudrv::nccl::result::success) { comm_owner.abort(); }
/// @endcode
enum class result : int {
  success = 0,               ///< ncclSuccess
  unhandled_cuda_error = 1,  ///< ncclUnhandledCudaError
  system_error = 2,          ///< ncclSystemError
  internal_error = 3,        ///< ncclInternalError
  invalid_argument = 4,      ///< ncclInvalidArgument
  invalid_usage = 5,         ///< ncclInvalidUsage
  remote_error = 6,          ///< ncclRemoteError
  in_progress = 7,           ///< ncclInProgress (non-blocking communicators)
};

/// @brief NCCL's element types (`ncclDataType_t`). `data_type_of` gives the one of a C++ type.
///
/// @code
/// static_assert(cudrv::nccl::data_type_of_v<float> == cudrv::nccl::data_type::float32);
/// @endcode
enum class data_type : int {
  int8 = 0,          ///< ncclInt8 (also `char`, `signed char`)
  uint8 = 1,         ///< ncclUint8
  int32 = 2,         ///< ncclInt32
  uint32 = 3,        ///< ncclUint32
  int64 = 4,         ///< ncclInt64
  uint64 = 5,        ///< ncclUint64
  float16 = 6,       ///< ncclFloat16 (`__half`, @ref half_t)
  float32 = 7,       ///< ncclFloat32
  float64 = 8,       ///< ncclFloat64
  bfloat16 = 9,      ///< ncclBfloat16 (`__nv_bfloat16`, @ref bfloat16_t)
  float8_e4m3 = 10,  ///< ncclFloat8e4m3 (NCCL 2.24 and newer, sm_90 and newer)
  float8_e5m2 = 11,  ///< ncclFloat8e5m2 (NCCL 2.24 and newer, sm_90 and newer)
};

/// @brief NCCL's built-in reduction operations (`ncclRedOp_t`).
///
/// @code
/// comm.all_reduce(buf, cudrv::nccl::reduction::max, s);
/// @endcode
enum class reduction : int {
  sum = 0,   ///< ncclSum
  prod = 1,  ///< ncclProd
  max = 2,   ///< ncclMax
  min = 3,   ///< ncclMin
  avg = 4,   ///< ncclAvg (NCCL 2.10 and newer); on a one-rank communicator cudrv asks NCCL for the sum, the same
             ///< result, since NCCL 2.28's one-rank ncclAvg leaves elements past the last multiple of 2^18 unwritten
};

/// @brief A 16-bit IEEE float held as its bits, for code that does not include `<cuda_fp16.h>`;
/// maps to @ref data_type::float16 like `__half`.
///
/// @code
/// cudrv::device_buffer<cudrv::nccl::half_t> grads(dev, n);
/// comm.all_reduce(grads, cudrv::nccl::reduction::sum, s);
/// @endcode
struct half_t {
  std::uint16_t bits;  ///< The IEEE binary16 bits.
};

/// @brief A bfloat16 held as its bits, for code that does not include `<cuda_bf16.h>`; maps to
/// @ref data_type::bfloat16 like `__nv_bfloat16`.
///
/// @code
/// cudrv::device_buffer<cudrv::nccl::bfloat16_t> weights(dev, n);
/// comm.broadcast(weights, 0, s);
/// @endcode
struct bfloat16_t {
  std::uint16_t bits;  ///< The upper 16 bits of the IEEE binary32 value.
};

/// @brief The NCCL data type of @p T; defined for the types NCCL reduces and copies. Specialise it
/// for a type of your own with the same representation as one of NCCL's.
///
/// @code
/// struct my_half { std::uint16_t bits; };
/// template <> struct cudrv::nccl::data_type_of<my_half>
///     : std::integral_constant<cudrv::nccl::data_type, cudrv::nccl::data_type::float16> {};
/// @endcode
template <class T>
struct data_type_of {};

/// @cond INTERNAL
template <class T>
struct data_type_of<const T> : data_type_of<T> {};
template <>
struct data_type_of<char>
    : std::integral_constant<data_type, std::is_signed_v<char> ? data_type::int8 : data_type::uint8> {};
template <>
struct data_type_of<signed char> : std::integral_constant<data_type, data_type::int8> {};
template <>
struct data_type_of<unsigned char> : std::integral_constant<data_type, data_type::uint8> {};
template <>
struct data_type_of<std::byte> : std::integral_constant<data_type, data_type::uint8> {};
template <>
struct data_type_of<int> : std::integral_constant<data_type, data_type::int32> {};
template <>
struct data_type_of<unsigned int> : std::integral_constant<data_type, data_type::uint32> {};
template <>
struct data_type_of<long> : std::integral_constant<data_type, sizeof(long) == 8 ? data_type::int64 : data_type::int32> {
};
template <>
struct data_type_of<unsigned long>
    : std::integral_constant<data_type, sizeof(long) == 8 ? data_type::uint64 : data_type::uint32> {};
template <>
struct data_type_of<long long> : std::integral_constant<data_type, data_type::int64> {};
template <>
struct data_type_of<unsigned long long> : std::integral_constant<data_type, data_type::uint64> {};
template <>
struct data_type_of<float> : std::integral_constant<data_type, data_type::float32> {};
template <>
struct data_type_of<double> : std::integral_constant<data_type, data_type::float64> {};
template <>
struct data_type_of<::__half> : std::integral_constant<data_type, data_type::float16> {};
template <>
struct data_type_of<::__nv_bfloat16> : std::integral_constant<data_type, data_type::bfloat16> {};
template <>
struct data_type_of<half_t> : std::integral_constant<data_type, data_type::float16> {};
template <>
struct data_type_of<bfloat16_t> : std::integral_constant<data_type, data_type::bfloat16> {};
/// @endcond

/// @brief The NCCL data type of @p T, at compile time.
///
/// @code
/// static_assert(cudrv::nccl::data_type_of_v<std::int64_t> == cudrv::nccl::data_type::int64);
/// @endcode
template <class T>
inline constexpr data_type data_type_of_v = data_type_of<T>::value;

/// @brief Whether @p T has an NCCL data type (`data_type_of` defines `value` for it).
///
/// @code
/// static_assert(cudrv::nccl::element<float> && !cudrv::nccl::element<bool>);
/// @endcode
template <class T>
concept element = requires {
  { data_type_of<T>::value } -> std::convertible_to<data_type>;
};

/// @brief Whether NCCL can be loaded and has every function cudrv needs. Never throws.
///
/// @code
/// if (!cudrv::nccl::available()) { std::cerr << cudrv::nccl::unavailable_reason() << '\n'; return 2; }
/// @endcode
[[nodiscard]] bool available() noexcept;

/// @brief Why NCCL cannot be used: the files tried and what `dlopen` or `dlsym` said; empty when
/// @ref available is true. Never throws.
///
/// @code
/// std::string why = cudrv::nccl::unavailable_reason();
/// @endcode
[[nodiscard]] std::string unavailable_reason() noexcept;

/// @brief What a newer NCCL brings, for @ref cudrv::nccl::supports.
///
/// @code
/// if (cudrv::nccl::supports(cudrv::nccl::feature::revoke)) { comm.revoke(); }
/// @endcode
enum class feature : int {
  premul_sum,        ///< @ref premul_sum (ncclRedOpCreatePreMulSum, NCCL 2.11)
  registration,      ///< @ref registration (ncclCommRegister, NCCL 2.19)
  memory,            ///< @ref buffer (ncclMemAlloc, NCCL 2.19)
  group_simulation,  ///< @ref group::simulate_end (ncclGroupSimulateEnd, NCCL 2.22)
  scalable_init,     ///< @ref communicator::init_rank_scalable (ncclCommInitRankScalable, NCCL 2.23)
  windows,           ///< @ref window (ncclCommWindowRegister, NCCL 2.27)
  shrink,            ///< @ref communicator_base::shrink (ncclCommShrink, NCCL 2.27)
  all_to_all,        ///< all_to_all, gather and scatter (ncclAlltoAll, ncclGather, ncclScatter, NCCL 2.28)
  revoke,            ///< @ref communicator::revoke (ncclCommRevoke, NCCL 2.28.9)
};

/// @brief Whether the loaded NCCL has what @p f needs (false when NCCL cannot be loaded). The call that
/// needs a missing function throws not_supported_error; ask first where a fallback exists. Never throws.
///
/// @code
/// if (!cudrv::nccl::supports(cudrv::nccl::feature::all_to_all)) { use_grouped_send_recv(); }
/// @endcode
[[nodiscard]] bool supports(feature f) noexcept;

/// @brief The version of the loaded NCCL as `ncclGetVersion` gives it (22809 for 2.28.9).
///
/// @code
/// std::printf("NCCL %d\n", cudrv::nccl::version());
/// @endcode
/// @throws library_unavailable_error when NCCL cannot be loaded
[[nodiscard]] int version();

/// @brief The path of the loaded NCCL library (the name given to `dlopen` when the loader did not
/// report a path); empty when none could be loaded. Never throws.
///
/// @code
/// std::cout << cudrv::nccl::library_path() << '\n';   // /usr/lib/x86_64-linux-gnu/libnccl.so.2
/// @endcode
[[nodiscard]] std::string library_path() noexcept;

/// @brief The identifier every rank of a new communicator is created from (`ncclUniqueId`): one
/// rank makes it with @ref generate and sends its bytes to the others (MPI, a socket, a file).
///
/// @code
/// cudrv::nccl::unique_id id;
/// if (rank == 0) id = cudrv::nccl::unique_id::generate();
/// MPI_Bcast(id.bytes.data(), int(id.bytes.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
/// auto comm = cudrv::nccl::communicator::init_rank(id, nranks, rank, cudrv::device(local_rank));
/// @endcode
struct unique_id {
  std::array<char, 128> bytes{};  ///< The identifier's bytes (`NCCL_UNIQUE_ID_BYTES`), to be sent as they are.
  /// @brief A new identifier (`ncclGetUniqueId`); NCCL opens its bootstrap listener here.
  /// @throws nccl_error when NCCL refuses, library_unavailable_error without NCCL
  [[nodiscard]] static unique_id generate();
  /// @brief Two identifiers are equal when their bytes are.
  [[nodiscard]] friend bool operator==(const unique_id&, const unique_id&) = default;
};

/// @brief How a communicator is created (`ncclConfig_t`); unset fields keep NCCL's defaults.
///
/// @code
/// cudrv::nccl::communicator_config cfg;
/// cfg.blocking = false;            // calls return at once; poll async_error() or wait_ready()
/// cfg.cga_cluster_size = 4;
/// cfg.name = "tensor-parallel";
/// auto comm = cudrv::nccl::communicator::init_rank(id, nranks, rank, dev, cfg);
/// @endcode
struct communicator_config {
  /// @brief Whether NCCL calls block until done (the default) or return `ncclInProgress` at once.
  std::optional<bool> blocking{};
  /// @brief The CGA cluster size of NCCL's kernels (0 to 8; sm_90 and newer).
  std::optional<int> cga_cluster_size{};
  /// @brief The least number of CTAs NCCL uses.
  std::optional<int> min_ctas{};
  /// @brief The most CTAs NCCL uses.
  std::optional<int> max_ctas{};
  /// @brief The network module to use (e.g. `"IB"`, `"Socket"`); empty for NCCL's choice.
  std::string net_name{};
  /// @brief Whether communicators split from this one share its resources.
  std::optional<bool> split_share{};
  /// @brief A name for the communicator in NCCL's logs; empty for none.
  std::string name{};
  /// @brief Whether communicators shrunk from this one share its resources (`shrinkShare`, NCCL 2.27).
  std::optional<bool> shrink_share{};
  /// @brief NCCL's CTA policy (`CTAPolicy`, NCCL 2.27): @ref cta_policy::efficiency uses fewer CTAs,
  /// @ref cta_policy::zero lets symmetric-memory collectives run without NCCL's CTAs where it can.
  std::optional<int> cta_policy{};
  /// @brief How long cudrv waits for a non-blocking communicator that answers `ncclInProgress` (each
  /// call, @ref communicator_base::wait_ready, split, shrink, revoke, window registration, the
  /// finalisation in @ref communicator::reset) before it gives up with @ref timeout_error; at least
  /// 1 ms. Blocking communicators never wait here. A bound larger than the clock can add saturates.
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
};

/// @brief The values of @ref communicator_config::cta_policy (`NCCL_CTA_POLICY_*`).
///
/// @code
/// cudrv::nccl::communicator_config cfg;
/// cfg.cta_policy = cudrv::nccl::cta_policy::efficiency;
/// @endcode
namespace cta_policy {
inline constexpr int standard = 0;    ///< NCCL_CTA_POLICY_DEFAULT
inline constexpr int efficiency = 1;  ///< NCCL_CTA_POLICY_EFFICIENCY
inline constexpr int zero = 2;        ///< NCCL_CTA_POLICY_ZERO
}  // namespace cta_policy

/// @brief How @ref cudrv::nccl::communicator_base::shrink treats the parent's work in flight (`NCCL_SHRINK_*`).
///
/// @code
/// auto smaller = comm.shrink(std::array{dead_rank}, cudrv::nccl::shrink_mode::abort);
/// @endcode
enum class shrink_mode : int {
  normal = 0,  ///< NCCL_SHRINK_DEFAULT: the parent is healthy; its work completes first
  abort = 1,   ///< NCCL_SHRINK_ABORT: the parent's operations in flight are stopped first (a rank was lost)
};

/// @brief How a @ref cudrv::nccl::window is registered (`NCCL_WIN_*`).
///
/// @code
/// cudrv::nccl::window win(comm, buf, cudrv::nccl::window_flags::collective_symmetric);
/// @endcode
enum class window_flags : int {
  none = 0,                  ///< NCCL_WIN_DEFAULT: a plain registered window
  collective_symmetric = 1,  ///< NCCL_WIN_COLL_SYMMETRIC: the same offsets on every rank, for symmetric-memory kernels
};

/// @brief The alignment NCCL requires of a window's address (`NCCL_WIN_REQUIRED_ALIGNMENT`).
///
/// @code
/// static_assert(cudrv::nccl::window_alignment == 4096);
/// @endcode
inline constexpr std::size_t window_alignment = 4096;

/// @brief The color that leaves a rank out of every communicator of a @ref communicator_base::split.
///
/// @code
/// auto sub = comm.split(in_group ? 0 : cudrv::nccl::no_color, comm.rank());
/// @endcode
inline constexpr int no_color = -1;

template <class T>
class buffer;
template <element T>
class premul_sum;

/// @brief What a reducing collective over elements of @p T accepts as its operation: a built-in
/// @ref cudrv::nccl::reduction, or a @ref cudrv::nccl::premul_sum made for @p T.
///
/// @code
/// static_assert(cudrv::nccl::reduction_operator_for<cudrv::nccl::reduction, float>);
/// static_assert(!cudrv::nccl::reduction_operator_for<cudrv::nccl::premul_sum<double>, float>);
/// @endcode
template <class Op, class T>
concept reduction_operator_for =
    std::is_same_v<std::remove_cvref_t<Op>, reduction> || std::is_same_v<std::remove_cvref_t<Op>, premul_sum<T>>;

}  // namespace nccl

namespace detail {
// Argument checks of the collectives, before any NCCL call (all throw invalid_argument_error).
// Counts are in elements; nranks and rank are the communicator's.
void nccl_check_handle(const ncclComm* comm, const char* api);
void nccl_check_not_empty(const char* api, const char* what, std::size_t count);
void nccl_check_same_count(const char* api, std::size_t send, std::size_t recv);
void nccl_check_count(const char* api, std::size_t count, std::size_t send, std::size_t recv);
void nccl_check_rank(const char* api, const char* what, int rank, int nranks);
void nccl_check_in_place(const char* api, std::size_t total, int nranks);
void nccl_check_gather(const char* api, std::size_t send, std::size_t recv, int nranks);
void nccl_check_scatter(const char* api, std::size_t send, std::size_t recv, int nranks);
void nccl_check_point_to_point(const char* api, std::size_t count, int peer, int nranks);

// Where a call goes: the communicator, the primary context of its device when known (null otherwise),
// and the bound on waiting for it when it is non-blocking (milliseconds).
struct nccl_target {
  ncclComm* comm;
  CUcontext home;
  std::int64_t timeout_ms;
};
// The default bound of communicator_config::timeout, in milliseconds.
inline constexpr std::int64_t nccl_default_timeout_ms = 5 * 60 * 1000;

// The NCCL calls, untyped (src/scaleout/nccl.cpp). Each throws nccl_error on failure. `op` is an
// ncclRedOp_t: a built-in reduction's value or a premul_sum's handle.
void nccl_all_reduce(nccl_target t, CUdeviceptr send, CUdeviceptr recv, std::size_t count, nccl::data_type type, int op,
                     CUstream stream);
void nccl_broadcast(nccl_target t, CUdeviceptr send, CUdeviceptr recv, std::size_t count, nccl::data_type type,
                    int root, CUstream stream);
void nccl_reduce(nccl_target t, CUdeviceptr send, CUdeviceptr recv, std::size_t count, nccl::data_type type, int op,
                 int root, CUstream stream);
void nccl_all_gather(nccl_target t, CUdeviceptr send, CUdeviceptr recv, std::size_t send_count, nccl::data_type type,
                     CUstream stream);
void nccl_reduce_scatter(nccl_target t, CUdeviceptr send, CUdeviceptr recv, std::size_t recv_count,
                         nccl::data_type type, int op, CUstream stream);
void nccl_send(nccl_target t, CUdeviceptr send, std::size_t count, nccl::data_type type, int peer, CUstream stream);
void nccl_recv(nccl_target t, CUdeviceptr recv, std::size_t count, nccl::data_type type, int peer, CUstream stream);
void nccl_all_to_all(nccl_target t, CUdeviceptr send, CUdeviceptr recv, std::size_t count, nccl::data_type type,
                     CUstream stream);
void nccl_gather(nccl_target t, CUdeviceptr send, CUdeviceptr recv, std::size_t count, nccl::data_type type, int root,
                 CUstream stream);
void nccl_scatter(nccl_target t, CUdeviceptr send, CUdeviceptr recv, std::size_t count, nccl::data_type type, int root,
                  CUstream stream);
// The uneven all-to-all: one group of sends and receives; counts and offsets in elements of
// element_bytes bytes, already checked against the buffers (nccl_check_all_to_all_v).
void nccl_all_to_all_v(nccl_target t, CUdeviceptr send, std::span<const std::size_t> send_counts,
                       std::span<const std::size_t> send_offsets, CUdeviceptr recv,
                       std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_offsets,
                       std::size_t element_bytes, nccl::data_type type, CUstream stream);
void nccl_check_all_to_all_v(const char* api, int nranks, std::size_t send_size,
                             std::span<const std::size_t> send_counts, std::span<const std::size_t> send_offsets,
                             std::size_t recv_size, std::span<const std::size_t> recv_counts,
                             std::span<const std::size_t> recv_offsets);
void nccl_check_disjoint(const char* api, CUdeviceptr a, std::size_t a_bytes, CUdeviceptr b, std::size_t b_bytes);
// The ncclRedOp_t of a premul_sum for a collective on comm: checked that the operator exists and
// belongs to comm (its element type is checked at compile time).
int nccl_check_operator(const char* api, const ncclComm* op_comm, int op, const ncclComm* comm);
// The number cudrv gave the owner of comm (0: not held by a cudrv owner). A dependent records it and
// skips its NCCL call at destruction once that communicator is gone (NCCL freed it with it).
std::uint64_t nccl_generation(const ncclComm* comm) noexcept;
void* nccl_register(ncclComm* comm, std::int64_t timeout_ms, CUdeviceptr address, std::size_t bytes);
int nccl_query_rank(ncclComm* comm);
int nccl_query_size(ncclComm* comm);
void nccl_deregister(ncclComm* comm, std::uint64_t generation, void* handle) noexcept;
int nccl_premul_sum_create(nccl_target t, const void* scalar, bool on_device, nccl::data_type type);
void nccl_premul_sum_destroy(ncclComm* comm, std::uint64_t generation, int op) noexcept;
CUdeviceptr nccl_mem_alloc(int device_ordinal, std::size_t bytes);
void nccl_mem_free(int device_ordinal, CUdeviceptr address) noexcept;
ncclWindow_vidmem* nccl_window_register(nccl_target t, CUdeviceptr address, std::size_t bytes,
                                        nccl::window_flags flags);
void nccl_window_deregister(nccl_target t, std::uint64_t generation, ncclWindow_vidmem* window) noexcept;

// A device span of what a collective is given: a device_span or a device_buffer.
template <class T>
device_span<T> nccl_span(device_span<T> s) noexcept {
  return s;
}
template <class T>
device_span<T> nccl_span(device_buffer<T>& b) noexcept {
  return b.view();
}
template <class T>
device_span<const T> nccl_span(const device_buffer<T>& b) noexcept {
  return b.view();
}
template <class T>
device_span<T> nccl_span(nccl::buffer<T>& b) noexcept {
  return b.view();
}
template <class T>
device_span<const T> nccl_span(const nccl::buffer<T>& b) noexcept {
  return b.view();
}
template <class R>
using nccl_span_t = decltype(nccl_span(std::declval<R&>()));
template <class R>
using nccl_value_t = std::remove_cv_t<typename nccl_span_t<R>::element_type>;
}  // namespace detail

namespace nccl {

/// @brief What a collective takes as its data: a `cudrv::device_span<T>` or a `cudrv::device_buffer<T>`
/// whose element type has an NCCL data type.
///
/// @code
/// static_assert(cudrv::nccl::device_range<cudrv::device_buffer<float>>);
/// static_assert(cudrv::nccl::device_range<cudrv::device_span<const int>>);
/// @endcode
template <class R>
concept device_range = requires(R& r) {
  cudrv::detail::nccl_span(r);
}
&&element<cudrv::detail::nccl_value_t<R>>;

/// @brief A `device_range` whose elements may be written (not a view of const elements, not a
/// const buffer).
///
/// @code
/// static_assert(!cudrv::nccl::writable_device_range<const cudrv::device_buffer<float>>);
/// @endcode
template <class R>
concept writable_device_range =
    device_range<R> && !std::is_const_v<typename cudrv::detail::nccl_span_t<R>::element_type>;

class communicator;

/// @brief The operations of a communicator, shared by the view @ref communicator_ref and the owner
/// @ref communicator, with rank, size and device queries, asynchronous-error polling, and the collectives.
///
/// Each collective checks its arguments against the buffers' sizes and the communicator's size and
/// rank before NCCL is called, throwing @ref cudrv::invalid_argument_error; counts are those of the
/// buffers. The work is enqueued on the given stream: the call returns once NCCL has queued it, or,
/// inside a @ref group, when the group ends. Out-of-place forms take a source and a destination,
/// in-place forms one buffer.
///
/// @code
/// cudrv::device_buffer<float> grads(dev, n);
/// comm.all_reduce(grads, cudrv::nccl::reduction::sum, s);          // in place
/// comm.all_gather(shard, gathered, s);                              // out of place
/// comm.broadcast(weights, 0, s);
/// s.synchronize();
/// @endcode
class communicator_base {
 public:
  /// @brief The raw NCCL handle (`ncclComm_t`); null in an empty owner.
  [[nodiscard]] ncclComm* native_handle() const noexcept { return handle_; }
  /// @brief This communicator's rank, from 0 to size() - 1: known without an NCCL call, except for a
  /// view adopted from a raw handle without its rank (then asked of NCCL, ncclCommUserRank, each time).
  /// @throws invalid_argument_error for an empty owner or a view of a null handle
  [[nodiscard]] int rank() const {
    cudrv::detail::nccl_check_handle(handle_, "cudrv::nccl::communicator::rank");
    return known_rank();
  }
  /// @brief The number of ranks: known without an NCCL call, except for a view adopted from a raw
  /// handle without its size (then asked of NCCL, ncclCommCount, each time).
  /// @throws invalid_argument_error for an empty owner or a view of a null handle
  [[nodiscard]] int size() const {
    cudrv::detail::nccl_check_handle(handle_, "cudrv::nccl::communicator::size");
    return known_size();
  }
  /// @brief The device this rank runs on (`ncclCommCuDevice`).
  [[nodiscard]] cudrv::device device() const;
  /// @brief The asynchronous state of the communicator (`ncclCommGetAsyncError`): @ref result::success,
  /// @ref result::in_progress while a non-blocking call is under way, or the error that broke it
  /// (then @ref communicator::abort it).
  /// @code
  /// while (comm.async_error() == cudrv::nccl::result::in_progress) { do_other_work(); }
  /// @endcode
  [[nodiscard]] result async_error() const;
  /// @brief Polls @ref async_error until it is no longer @ref result::in_progress, for at most the
  /// communicator's @ref communicator_config::timeout; throws the error it then reports, if any. Use
  /// after creating a non-blocking communicator (cudrv's other calls wait by themselves).
  /// @throws nccl_error when the communicator reports an error
  /// @throws timeout_error when it is still in progress after the bound
  void wait_ready() const { wait_ready(std::chrono::milliseconds(timeout_ms_)); }
  /// @brief @ref wait_ready with the bound @p timeout instead of the communicator's.
  /// @code
  /// comm.wait_ready(std::chrono::seconds(10));   // timeout_error after 10 s in progress
  /// @endcode
  /// @throws invalid_argument_error for a bound below 1 ms
  void wait_ready(std::chrono::milliseconds timeout) const;
  /// @brief The bound on cudrv's waits for this communicator (@ref communicator_config::timeout; the
  /// default for a view adopted from a raw handle).
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return std::chrono::milliseconds(timeout_ms_); }

  /// @brief Reduces @p send across all ranks into @p recv on every rank (ncclAllReduce); both hold the
  /// same number of elements.
  /// @code
  /// comm.all_reduce(local, total, cudrv::nccl::reduction::sum, s);
  /// @endcode
  template <device_range Send, writable_device_range Recv, reduction_operator_for<cudrv::detail::nccl_value_t<Recv>> Op>
  void all_reduce(const Send& send, Recv&& recv, const Op& op, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::all_reduce");
    auto [in, out] = same_type_spans(send, recv);
    cudrv::detail::nccl_check_same_count("cudrv::nccl::communicator::all_reduce", in.size(), out.size());
    cudrv::detail::nccl_all_reduce(target(c), in.data(), out.data(), in.size(), type_of(out), raw_op(op),
                                   s.native_handle());
  }
  /// @brief All-reduce in place: @p buffer holds this rank's data before and the result after.
  /// @code
  /// comm.all_reduce(grads, cudrv::nccl::reduction::avg, s);
  /// @endcode
  template <writable_device_range Buffer, reduction_operator_for<cudrv::detail::nccl_value_t<Buffer>> Op>
  void all_reduce(Buffer&& buffer, const Op& op, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::all_reduce");
    auto b = cudrv::detail::nccl_span(buffer);
    cudrv::detail::nccl_check_same_count("cudrv::nccl::communicator::all_reduce", b.size(), b.size());
    cudrv::detail::nccl_all_reduce(target(c), b.data(), b.data(), b.size(), type_of(b), raw_op(op), s.native_handle());
  }

  /// @brief Copies @p send of rank @p root into @p recv on every rank (ncclBroadcast); @p send is read
  /// on the root only, and both hold the same number of elements.
  /// @code
  /// comm.broadcast(src, dst, 0, s);
  /// @endcode
  template <device_range Send, writable_device_range Recv>
  void broadcast(const Send& send, Recv&& recv, int root, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::broadcast");
    auto [in, out] = same_type_spans(send, recv);
    cudrv::detail::nccl_check_same_count("cudrv::nccl::communicator::broadcast", in.size(), out.size());
    cudrv::detail::nccl_check_rank("cudrv::nccl::communicator::broadcast", "root", root, known_size());
    cudrv::detail::nccl_broadcast(target(c), in.data(), out.data(), in.size(), type_of(out), root, s.native_handle());
  }
  /// @brief Broadcast in place: the root's @p buffer is copied into every other rank's.
  /// @code
  /// comm.broadcast(weights, 0, s);
  /// @endcode
  template <writable_device_range Buffer>
  void broadcast(Buffer&& buffer, int root, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::broadcast");
    auto b = cudrv::detail::nccl_span(buffer);
    cudrv::detail::nccl_check_same_count("cudrv::nccl::communicator::broadcast", b.size(), b.size());
    cudrv::detail::nccl_check_rank("cudrv::nccl::communicator::broadcast", "root", root, known_size());
    cudrv::detail::nccl_broadcast(target(c), b.data(), b.data(), b.size(), type_of(b), root, s.native_handle());
  }

  /// @brief Reduces @p send across all ranks into @p recv of rank @p root (ncclReduce); both hold the
  /// same number of elements (@p recv is written on the root only).
  /// @code
  /// comm.reduce(local, total, cudrv::nccl::reduction::sum, 0, s);
  /// @endcode
  template <device_range Send, writable_device_range Recv, reduction_operator_for<cudrv::detail::nccl_value_t<Recv>> Op>
  void reduce(const Send& send, Recv&& recv, const Op& op, int root, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::reduce");
    auto [in, out] = same_type_spans(send, recv);
    cudrv::detail::nccl_check_same_count("cudrv::nccl::communicator::reduce", in.size(), out.size());
    cudrv::detail::nccl_check_rank("cudrv::nccl::communicator::reduce", "root", root, known_size());
    cudrv::detail::nccl_reduce(target(c), in.data(), out.data(), in.size(), type_of(out), raw_op(op), root,
                               s.native_handle());
  }
  /// @brief Reduce in place: the root's @p buffer receives the result.
  /// @code
  /// comm.reduce(buf, cudrv::nccl::reduction::max, 0, s);
  /// @endcode
  template <writable_device_range Buffer, reduction_operator_for<cudrv::detail::nccl_value_t<Buffer>> Op>
  void reduce(Buffer&& buffer, const Op& op, int root, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::reduce");
    auto b = cudrv::detail::nccl_span(buffer);
    cudrv::detail::nccl_check_same_count("cudrv::nccl::communicator::reduce", b.size(), b.size());
    cudrv::detail::nccl_check_rank("cudrv::nccl::communicator::reduce", "root", root, known_size());
    cudrv::detail::nccl_reduce(target(c), b.data(), b.data(), b.size(), type_of(b), raw_op(op), root,
                               s.native_handle());
  }

  /// @brief Gathers every rank's @p send into @p recv on every rank, rank i's at offset
  /// i * send.size() (ncclAllGather); @p recv holds size() * send.size() elements.
  /// @code
  /// comm.all_gather(shard, full, s);   // full.size() == comm.size() * shard.size()
  /// @endcode
  template <device_range Send, writable_device_range Recv>
  void all_gather(const Send& send, Recv&& recv, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::all_gather");
    auto [in, out] = same_type_spans(send, recv);
    cudrv::detail::nccl_check_gather("cudrv::nccl::communicator::all_gather", in.size(), out.size(), known_size());
    cudrv::detail::nccl_all_gather(target(c), in.data(), out.data(), in.size(), type_of(out), s.native_handle());
  }
  /// @brief All-gather in place: @p buffer holds size() equal parts, and this rank's part (rank() of
  /// them) is sent to the others.
  /// @code
  /// comm.all_gather(full, s);   // this rank's shard at full.subspan(rank * part, part)
  /// @endcode
  template <writable_device_range Buffer>
  void all_gather(Buffer&& buffer, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::all_gather");
    auto b = cudrv::detail::nccl_span(buffer);
    cudrv::detail::nccl_check_in_place("cudrv::nccl::communicator::all_gather", b.size(), known_size());
    const std::size_t part = b.size() / static_cast<std::size_t>(known_size());
    cudrv::detail::nccl_all_gather(target(c), b.subspan(part * static_cast<std::size_t>(known_rank()), part).data(),
                                   b.data(), part, type_of(b), s.native_handle());
  }

  /// @brief Reduces @p send across all ranks and leaves part i of the result in @p recv of rank i
  /// (ncclReduceScatter); @p send holds size() * recv.size() elements.
  /// @code
  /// comm.reduce_scatter(full, shard, cudrv::nccl::reduction::sum, s);
  /// @endcode
  template <device_range Send, writable_device_range Recv, reduction_operator_for<cudrv::detail::nccl_value_t<Recv>> Op>
  void reduce_scatter(const Send& send, Recv&& recv, const Op& op, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::reduce_scatter");
    auto [in, out] = same_type_spans(send, recv);
    cudrv::detail::nccl_check_scatter("cudrv::nccl::communicator::reduce_scatter", in.size(), out.size(), known_size());
    cudrv::detail::nccl_reduce_scatter(target(c), in.data(), out.data(), out.size(), type_of(out), raw_op(op),
                                       s.native_handle());
  }
  /// @brief Reduce-scatter in place: @p buffer holds size() equal parts, and this rank's part of the
  /// result lands in part rank() of it.
  /// @code
  /// comm.reduce_scatter(full, cudrv::nccl::reduction::sum, s);
  /// @endcode
  template <writable_device_range Buffer, reduction_operator_for<cudrv::detail::nccl_value_t<Buffer>> Op>
  void reduce_scatter(Buffer&& buffer, const Op& op, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::reduce_scatter");
    auto b = cudrv::detail::nccl_span(buffer);
    cudrv::detail::nccl_check_in_place("cudrv::nccl::communicator::reduce_scatter", b.size(), known_size());
    const std::size_t part = b.size() / static_cast<std::size_t>(known_size());
    cudrv::detail::nccl_reduce_scatter(target(c), b.data(),
                                       b.subspan(part * static_cast<std::size_t>(known_rank()), part).data(), part,
                                       type_of(b), raw_op(op), s.native_handle());
  }

  /// @brief Sends @p data to rank @p peer (ncclSend), which must receive as many elements of the same
  /// type. A send and its receive must progress together: put both in a @ref group.
  /// @code
  /// { cudrv::nccl::group g; comm.send(out, right, s); comm.recv(in, left, s); g.end(); }
  /// @endcode
  template <device_range Data>
  void send(const Data& data, int peer, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::send");
    auto d = cudrv::detail::nccl_span(data);
    cudrv::detail::nccl_check_point_to_point("cudrv::nccl::communicator::send", d.size(), peer, known_size());
    cudrv::detail::nccl_send(target(c), d.data(), d.size(), type_of(d), peer, s.native_handle());
  }
  /// @brief Receives @p data from rank @p peer (ncclRecv), which must send as many elements of the same type.
  /// @code
  /// comm.recv(in, left, s);
  /// @endcode
  template <writable_device_range Data>
  void recv(Data&& data, int peer, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::recv");
    auto d = cudrv::detail::nccl_span(data);
    cudrv::detail::nccl_check_point_to_point("cudrv::nccl::communicator::recv", d.size(), peer, known_size());
    cudrv::detail::nccl_recv(target(c), d.data(), d.size(), type_of(d), peer, s.native_handle());
  }

  /// @brief Sends block j of @p send to rank j and receives rank i's block into block i of @p recv
  /// (ncclAlltoAll, NCCL 2.28): both hold size() equal blocks. Out of place only.
  /// @code
  /// comm.all_to_all(tokens_by_expert, tokens_for_me, s);   // each size() * block elements
  /// @endcode
  /// @throws invalid_argument_error for sizes that are not size() equal blocks or overlapping buffers
  template <device_range Send, writable_device_range Recv>
  void all_to_all(const Send& send, Recv&& recv, stream_ref s) const {
    constexpr const char* api = "cudrv::nccl::communicator::all_to_all";
    ncclComm* c = checked(api);
    auto [in, out] = same_type_spans(send, recv);
    cudrv::detail::nccl_check_same_count(api, in.size(), out.size());
    cudrv::detail::nccl_check_in_place(api, out.size(), known_size());
    cudrv::detail::nccl_check_disjoint(api, in.data(), in.size_bytes(), out.data(), out.size_bytes());
    cudrv::detail::nccl_all_to_all(target(c), in.data(), out.data(),
                                   out.size() / static_cast<std::size_t>(known_size()), type_of(out),
                                   s.native_handle());
  }
  /// @brief The uneven all-to-all, over one group of ncclSend and ncclRecv: to rank j go
  /// @p send_counts[j] elements from offset @p send_offsets[j] of @p send; from rank i come
  /// @p recv_counts[i] elements into offset @p recv_offsets[i] of @p recv. Each span has size()
  /// entries, every block lies inside its buffer, and rank i's send count to j must equal j's receive
  /// count from i (NCCL matches them). Zero counts are skipped. Inside a user's @ref group it joins it.
  /// @code
  /// std::vector<std::size_t> sc{3, 0, 5}, so{0, 3, 3}, rc{2, 4, 1}, ro{0, 2, 6};
  /// comm.all_to_all_v(send, sc, so, recv, rc, ro, s);
  /// @endcode
  /// @throws invalid_argument_error for a span of the wrong length, a block outside its buffer, an
  /// offset + count that overflows, overlapping receive blocks, or a source and destination that
  /// overlap (checked first). A rank with nothing to send or receive then returns at once.
  template <device_range Send, writable_device_range Recv>
  void all_to_all_v(const Send& send, std::span<const std::size_t> send_counts,
                    std::span<const std::size_t> send_offsets, Recv&& recv, std::span<const std::size_t> recv_counts,
                    std::span<const std::size_t> recv_offsets, stream_ref s) const {
    constexpr const char* api = "cudrv::nccl::communicator::all_to_all_v";
    ncclComm* c = checked(api);
    auto [in, out] = same_type_spans(send, recv);
    cudrv::detail::nccl_check_all_to_all_v(api, known_size(), in.size(), send_counts, send_offsets, out.size(),
                                           recv_counts, recv_offsets);
    cudrv::detail::nccl_check_disjoint(api, in.data(), in.size_bytes(), out.data(), out.size_bytes());
    using T = typename decltype(out)::element_type;
    cudrv::detail::nccl_all_to_all_v(target(c), in.data(), send_counts, send_offsets, out.data(), recv_counts,
                                     recv_offsets, sizeof(T), type_of(out), s.native_handle());
  }

  /// @brief Gathers every rank's @p send into @p recv of rank @p root, rank i's at offset
  /// i * send.size() (ncclGather, NCCL 2.28). On the root @p recv holds size() * send.size() elements;
  /// on the other ranks it is not used and may be empty.
  /// @code
  /// comm.gather(shard, rank == 0 ? full.view() : cudrv::device_span<float>{}, 0, s);
  /// @endcode
  template <device_range Send, writable_device_range Recv>
  void gather(const Send& send, Recv&& recv, int root, stream_ref s) const {
    constexpr const char* api = "cudrv::nccl::communicator::gather";
    ncclComm* c = checked(api);
    auto [in, out] = same_type_spans(send, recv);
    cudrv::detail::nccl_check_rank(api, "root", root, known_size());
    if (known_rank() == root) {
      cudrv::detail::nccl_check_gather(api, in.size(), out.size(), known_size());
      if (in.data() != out.data() + static_cast<std::size_t>(root) * in.size_bytes()) {  // NCCL's in-place alias
        cudrv::detail::nccl_check_disjoint(api, in.data(), in.size_bytes(), out.data(), out.size_bytes());
      }
    } else {
      cudrv::detail::nccl_check_not_empty(api, "the source", in.size());
    }
    cudrv::detail::nccl_gather(target(c), in.data(), out.data(), in.size(), type_of(out), root, s.native_handle());
  }
  /// @brief Gather in place: @p buffer holds size() equal parts on every rank; this rank's part
  /// rank() is sent, and the root's buffer receives every part.
  /// @code
  /// comm.gather(full, 0, s);   // this rank's shard at full.subspan(rank * part, part)
  /// @endcode
  template <writable_device_range Buffer>
  void gather(Buffer&& buffer, int root, stream_ref s) const {
    constexpr const char* api = "cudrv::nccl::communicator::gather";
    ncclComm* c = checked(api);
    auto b = cudrv::detail::nccl_span(buffer);
    cudrv::detail::nccl_check_rank(api, "root", root, known_size());
    cudrv::detail::nccl_check_in_place(api, b.size(), known_size());
    const std::size_t part = b.size() / static_cast<std::size_t>(known_size());
    cudrv::detail::nccl_gather(target(c), b.subspan(part * static_cast<std::size_t>(known_rank()), part).data(),
                               b.data(), part, type_of(b), root, s.native_handle());
  }
  /// @brief Sends part i of @p send of rank @p root to rank i's @p recv (ncclScatter, NCCL 2.28). On the
  /// root @p send holds size() * recv.size() elements; on the other ranks it is not used and may be empty.
  /// @code
  /// comm.scatter(rank == 0 ? full.view() : cudrv::device_span<const float>{}, shard, 0, s);
  /// @endcode
  template <device_range Send, writable_device_range Recv>
  void scatter(const Send& send, Recv&& recv, int root, stream_ref s) const {
    constexpr const char* api = "cudrv::nccl::communicator::scatter";
    ncclComm* c = checked(api);
    auto [in, out] = same_type_spans(send, recv);
    cudrv::detail::nccl_check_rank(api, "root", root, known_size());
    if (known_rank() == root) {
      cudrv::detail::nccl_check_scatter(api, in.size(), out.size(), known_size());
      if (out.data() != in.data() + static_cast<std::size_t>(root) * out.size_bytes()) {  // NCCL's in-place alias
        cudrv::detail::nccl_check_disjoint(api, in.data(), in.size_bytes(), out.data(), out.size_bytes());
      }
    } else {
      cudrv::detail::nccl_check_not_empty(api, "the destination", out.size());
    }
    cudrv::detail::nccl_scatter(target(c), in.data(), out.data(), out.size(), type_of(out), root, s.native_handle());
  }
  /// @brief Scatter in place: @p buffer holds size() equal parts on every rank; part rank() of each
  /// rank's buffer receives the root's part rank().
  /// @code
  /// comm.scatter(full, 0, s);
  /// @endcode
  template <writable_device_range Buffer>
  void scatter(Buffer&& buffer, int root, stream_ref s) const {
    constexpr const char* api = "cudrv::nccl::communicator::scatter";
    ncclComm* c = checked(api);
    auto b = cudrv::detail::nccl_span(buffer);
    cudrv::detail::nccl_check_rank(api, "root", root, known_size());
    cudrv::detail::nccl_check_in_place(api, b.size(), known_size());
    const std::size_t part = b.size() / static_cast<std::size_t>(known_size());
    cudrv::detail::nccl_scatter(target(c), b.data(),
                                b.subspan(part * static_cast<std::size_t>(known_rank()), part).data(), part, type_of(b),
                                root, s.native_handle());
  }

  /// @brief A new communicator of the ranks not in @p exclude_ranks (ncclCommShrink, NCCL 2.27), renumbered
  /// densely in their old order. Every remaining rank calls it with the same list; the excluded ranks
  /// must not call it. After a lost rank: @ref communicator::revoke the parent, then shrink with
  /// @ref shrink_mode::abort, then destroy the parent (its owner aborts a revoked communicator).
  /// @code
  /// comm.revoke();
  /// int lost[] = {dead};
  /// auto survivors = comm.shrink(lost, cudrv::nccl::shrink_mode::abort);
  /// @endcode
  /// @param exclude_ranks the ranks to leave out: each a rank of this communicator, none twice, not
  /// this rank, not every rank
  /// @param mode whether the parent's work in flight completes (normal) or is stopped first (abort)
  /// @param config the new communicator's configuration; unset: the parent's
  /// @throws invalid_argument_error for a list breaking those rules, or inside an open @ref group
  /// @throws not_supported_error when the loaded NCCL lacks ncclCommShrink
  /// @throws timeout_error when a non-blocking shrink stays in progress past the bound
  [[nodiscard]] communicator shrink(std::span<const int> exclude_ranks, shrink_mode mode = shrink_mode::normal,
                                    const std::optional<communicator_config>& config = {}) const;

  /// @brief Splits the communicator (ncclCommSplit): the ranks giving the same @p color form a new one,
  /// ordered by @p key. Every rank must call it. A rank giving @ref no_color gets an empty owner.
  /// @code
  /// auto row = comm.split(comm.rank() / columns, comm.rank());
  /// @endcode
  /// @param color the group to join, or @ref no_color
  /// @param key the order within the group (ties keep the parent's order)
  /// @param config the new communicator's configuration; unset: the parent's
  /// @throws invalid_argument_error inside an open @ref group of this thread (the new communicator's
  /// rank and size are known only once the group has ended), or for a negative color other than no_color
  /// @throws nccl_error when NCCL refuses
  [[nodiscard]] communicator split(int color, int key, const std::optional<communicator_config>& config = {}) const;

  /// @brief Two handles are equal when they name the same communicator.
  [[nodiscard]] friend bool operator==(const communicator_base& a, const communicator_base& b) noexcept {
    return a.handle_ == b.handle_;
  }

 protected:
  /// @brief Holds @p handle, @p rank, @p size, @p home and @p timeout_ms unchanged.
  constexpr communicator_base(ncclComm* handle, int rank, int size, CUcontext home = nullptr,
                              std::int64_t timeout_ms = cudrv::detail::nccl_default_timeout_ms) noexcept
      : handle_(handle), rank_(rank), size_(size), home_(home), timeout_ms_(timeout_ms) {}
  /// @brief Copies the handle (for the view).
  constexpr communicator_base(const communicator_base&) noexcept = default;
  /// @brief Copies the handle (for the view).
  constexpr communicator_base& operator=(const communicator_base&) noexcept = default;
  ~communicator_base() = default;
  /// @brief The handle; null only in an empty owner.
  ncclComm* handle_;
  /// @brief This rank; -1 when not known (a view adopted without it: asked of NCCL).
  int rank_;
  /// @brief The number of ranks; -1 when not known (a view adopted without it: asked of NCCL).
  int size_;
  /// @brief The primary context of the communicator's device when cudrv knows it (null otherwise): a
  /// collective called with it current leaves it current, so cudrv need not look again afterwards.
  CUcontext home_;
  /// @brief The bound on waiting for a non-blocking communicator, in milliseconds (>= 1).
  std::int64_t timeout_ms_;

 private:
  ncclComm* checked(const char* api) const {
    cudrv::detail::nccl_check_handle(handle_, api);
    return handle_;
  }
  cudrv::detail::nccl_target target(ncclComm* c) const noexcept { return {c, home_, timeout_ms_}; }
  // The rank and size, asked of NCCL when this view was adopted without them (the handle is not null).
  int known_rank() const { return rank_ >= 0 ? rank_ : cudrv::detail::nccl_query_rank(handle_); }
  int known_size() const { return size_ >= 1 ? size_ : cudrv::detail::nccl_query_size(handle_); }
  // The operation NCCL is asked for. On one rank the average of one value is that value, as is the sum:
  // NCCL 2.28's ncclAvg on a one-rank communicator leaves the elements past the last multiple of 2^18
  // unwritten (out of place), so cudrv asks for the sum there, which NCCL copies correctly.
  [[nodiscard]] int raw_op(reduction op) const {
    return static_cast<int>(op == reduction::avg && known_size() == 1 ? reduction::sum : op);
  }
  // A premultiplied sum: made for this communicator (its element type matches by construction).
  template <class T>
  [[nodiscard]] int raw_op(const premul_sum<T>& op) const {
    return cudrv::detail::nccl_check_operator("cudrv::nccl::premul_sum", op.communicator_handle(), op.native_handle(),
                                              handle_);
  }
  template <class T>
  static constexpr data_type type_of(device_span<T>) noexcept {
    return data_type_of_v<std::remove_cv_t<T>>;
  }
  template <class Send, class Recv>
  static auto same_type_spans(const Send& send, Recv& recv) {
    static_assert(std::is_same_v<cudrv::detail::nccl_value_t<const Send>, cudrv::detail::nccl_value_t<Recv>>,
                  "the source and destination of a collective must have the same element type");
    using T = cudrv::detail::nccl_value_t<Recv>;
    return std::pair<device_span<const T>, device_span<T>>(cudrv::detail::nccl_span(send),
                                                           cudrv::detail::nccl_span(recv));
  }
};

/// @brief A non-owning view of an NCCL communicator. Trivially copyable; it does not keep the
/// communicator alive and never destroys it.
///
/// @code
/// void step(cudrv::nccl::communicator_ref comm, cudrv::device_buffer<float>& grads, cudrv::stream_ref s) {
///   comm.all_reduce(grads, cudrv::nccl::reduction::avg, s);
/// }
/// ncclComm_t raw = framework_comm();
/// auto view = cudrv::nccl::communicator_ref::from_native_handle(raw);   // no NCCL call
/// @endcode
class communicator_ref : public communicator_base {
 public:
  /// @brief Views @p handle without an NCCL call; its rank and size are asked of NCCL
  /// (ncclCommUserRank, ncclCommCount) where a call needs them, each time. A view of a null handle is
  /// refused by every operation (invalid_argument_error).
  [[nodiscard]] static communicator_ref from_native_handle(ncclComm* handle) noexcept {
    return communicator_ref(handle, -1, -1);
  }
  /// @brief Views @p handle whose @p rank and @p size the caller knows: no NCCL call, ever; the
  /// collectives' checks use them. Figures that cannot be a communicator's (size < 1, rank outside
  /// [0, size)) are not kept: NCCL is asked where they are needed, as for the one-argument form.
  [[nodiscard]] static communicator_ref from_native_handle(ncclComm* handle, int rank, int size) noexcept {
    const bool known = size >= 1 && rank >= 0 && rank < size;
    return communicator_ref(handle, known ? rank : -1, known ? size : -1);
  }

 private:
  friend class communicator;
  constexpr communicator_ref(ncclComm* handle, int rank, int size, CUcontext home = nullptr,
                             std::int64_t timeout_ms = cudrv::detail::nccl_default_timeout_ms) noexcept
      : communicator_base(handle, rank, size, home, timeout_ms) {}
};

/// @brief An owning NCCL communicator: destroyed with ncclCommFinalize and ncclCommDestroy (errors go
/// to the destruction handler), or torn down with @ref abort on the fault path. Move-only; converts
/// to @ref communicator_ref.
///
/// @code
/// cudrv::device dev(0);
/// auto comms = cudrv::nccl::communicator::init_all(std::vector{dev});   // one rank, this process
/// cudrv::stream s(dev);
/// cudrv::device_buffer<float> buf(dev, 1024);
/// comms[0].all_reduce(buf, cudrv::nccl::reduction::sum, s);
/// s.synchronize();
/// if (comms[0].async_error() != cudrv::nccl::result::success) comms[0].abort();
/// @endcode
class communicator : public communicator_base {
 public:
  /// @brief An empty owner.
  communicator() noexcept : communicator_base(nullptr, 0, 0) {}
  /// @brief Creates this process's rank @p rank of @p nranks on @p dev (ncclCommInitRankConfig), with
  /// @p dev's primary context current during the call. Every rank calls it with the same @p id.
  /// @code
  /// auto comm = cudrv::nccl::communicator::init_rank(id, world, me, cudrv::device(local), {.blocking = true});
  /// @endcode
  /// @throws invalid_argument_error when nranks < 1 or rank is outside [0, nranks), before NCCL is called
  /// @throws nccl_error when NCCL refuses
  [[nodiscard]] static communicator init_rank(const unique_id& id, int nranks, int rank, const cudrv::device& dev,
                                              const communicator_config& config = {});
  /// @brief Creates this process's rank @p rank of @p nranks from several unique ids
  /// (ncclCommInitRankScalable, NCCL 2.23), which spreads the bootstrap of a large job over several
  /// roots. Every rank passes the same ids in the same order; typically rank
  /// `i * nranks / ids.size()` generates id i and sends it to the others.
  /// @code
  /// std::vector<cudrv::nccl::unique_id> ids(4);   // made by ranks 0, n/4, n/2, 3n/4 and shared
  /// auto comm = cudrv::nccl::communicator::init_rank_scalable(ids, world, me, cudrv::device(local));
  /// @endcode
  /// @throws invalid_argument_error for no id, more ids than ranks, or a rank outside [0, nranks)
  /// @throws not_supported_error when the loaded NCCL lacks ncclCommInitRankScalable
  /// @throws nccl_error when NCCL refuses
  [[nodiscard]] static communicator init_rank_scalable(std::span<const unique_id> ids, int nranks, int rank,
                                                       const cudrv::device& dev,
                                                       const communicator_config& config = {});
  /// @brief Creates one communicator per device of @p devices in this process (ncclCommInitAll);
  /// element i is rank i.
  /// @code
  /// std::vector<cudrv::device> devs{cudrv::device(0), cudrv::device(1)};
  /// std::vector<cudrv::nccl::communicator> comms = cudrv::nccl::communicator::init_all(devs);
  /// @endcode
  /// @throws invalid_argument_error for no device or a device named twice, before NCCL is called
  [[nodiscard]] static std::vector<communicator> init_all(std::span<const cudrv::device> devices);
  /// @brief Takes ownership of @p handle; rank and size are asked of NCCL.
  /// @code
  /// auto comm = cudrv::nccl::communicator::from_native_handle(raw);
  /// @endcode
  [[nodiscard]] static communicator from_native_handle(ncclComm* handle);

  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  /// @}
  /// @brief Takes over @p other's communicator; @p other becomes empty.
  communicator(communicator&& other) noexcept
      : communicator_base(other), revoked_(cudrv::detail::exchange(other.revoked_, false)) {
    other.handle_ = nullptr;
  }
  /// @brief Destroys the held communicator, then takes over @p other's.
  communicator& operator=(communicator&& other) noexcept {
    if (this != &other) {
      reset();
      communicator_base::operator=(other);
      revoked_ = cudrv::detail::exchange(other.revoked_, false);
      other.handle_ = nullptr;
    }
    return *this;
  }
  /// @brief Finalizes and destroys the communicator (errors go to the destruction handler). Destroyed
  /// while an exception propagates (stack unwinding), it aborts it instead (ncclCommAbort): finalizing
  /// waits until the other ranks have matched this rank's work, which after a failure may never happen.
  ~communicator();

  /// @brief Finalizes (ncclCommFinalize, waiting for a non-blocking one within its timeout) and
  /// destroys (ncclCommDestroy) the communicator now; it becomes empty. A revoked communicator, one
  /// reporting an error, or one still in progress at the bound is aborted instead (ncclCommAbort).
  /// Errors go to the destruction handler.
  void reset() noexcept;
  /// @brief Revokes the communicator (ncclCommRevoke, NCCL 2.28.9): its operations in flight stop, on
  /// this rank, without waiting for the others; then waits, within the timeout, until it is quiescent.
  /// Afterwards it can only be shrunk (@ref shrink), split or destroyed: a revoked communicator is
  /// aborted, not finalized, when this owner lets it go. The first step after a lost rank.
  /// @code
  /// if (comm.async_error() != cudrv::nccl::result::success) { comm.revoke(); auto next = comm.shrink(lost); }
  /// @endcode
  /// @throws not_supported_error when the loaded NCCL lacks ncclCommRevoke
  /// @throws timeout_error when the communicator is still in progress after the bound (it stays revoked)
  /// @throws nccl_error when NCCL refuses
  void revoke();
  /// @brief Whether @ref revoke was called on this owner.
  [[nodiscard]] bool revoked() const noexcept { return revoked_; }
  /// @brief Aborts the communicator (ncclCommAbort): in-flight operations are stopped and resources
  /// freed without waiting for the other ranks. The fault path; it becomes empty.
  /// @code
  /// if (comm.async_error() != cudrv::nccl::result::success) comm.abort();
  /// @endcode
  /// @throws nccl_error when NCCL reports an error while aborting (the owner is empty anyway)
  void abort();
  /// @brief Gives up ownership; the caller must destroy the returned handle.
  [[nodiscard]] ncclComm* release() noexcept {
    revoked_ = false;
    return cudrv::detail::exchange(handle_, nullptr);
  }
  /// @brief Whether the owner holds a communicator.
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A view, valid while this communicator lives (an empty owner gives a view of a null handle).
  operator communicator_ref() const& noexcept {  // NOLINT: implicit on purpose
    return communicator_ref(handle_, rank_, size_, home_, timeout_ms_);
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the communicator is destroyed at the end of the statement
  /// (`communicator_ref v = communicator::init_rank(...)` would dangle at once).
  operator communicator_ref() const&& = delete;
  /// @}

 private:
  friend class communicator_base;
  communicator(ncclComm* handle, int rank, int size, CUcontext home, std::int64_t timeout_ms) noexcept
      : communicator_base(handle, rank, size, home, timeout_ms) {}
  // Whether revoke() was called: the communicator is then aborted, never finalized.
  bool revoked_ = false;
};

/// @brief A scope of NCCL calls fused into one operation (ncclGroupStart at construction,
/// ncclGroupEnd at @ref end). Groups nest; only the outermost end launches the work.
///
/// Call @ref end to close the group and hear about errors: it throws @ref nccl_error. When the scope
/// is left without end (an exception), the destructor ends the group, so no group is ever left open,
/// and reports a failure to the destruction handler. NCCL cannot cancel the calls already made in
/// the group: they are launched.
///
/// @code
/// {
///   cudrv::nccl::group g;
///   comm.send(out, peer, s);
///   comm.recv(in, peer, s);
///   g.end();                 // launches both; throws nccl_error on failure
/// }
/// @endcode
class group {
 public:
  /// @brief Starts a group (ncclGroupStart).
  /// @throws nccl_error when NCCL refuses, library_unavailable_error without NCCL
  group();
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  group(const group&) = delete;
  group& operator=(const group&) = delete;
  /// @}
  /// @brief Ends the group when @ref end was not called; failures go to the destruction handler.
  ~group();
  /// @brief Ends the group (ncclGroupEnd), launching its calls. Call it once.
  /// @throws nccl_error when NCCL reports an error (the group is closed anyway)
  /// @throws invalid_argument_error when the group was already ended
  void end();
  /// @brief Ends the group WITHOUT launching its calls (ncclGroupSimulateEnd, NCCL 2.22) and returns
  /// NCCL's estimate of the time they would take, in microseconds: a cost model for planners. Call it
  /// instead of @ref end, on the outermost group; nothing is enqueued. NCCL 2.28 simulates groups of
  /// blocking communicators of two ranks or more only: for a non-blocking communicator's group, or
  /// calls of a one-rank communicator, it launches the calls and returns a negative estimate (-1; read in
  /// NCCL's source).
  /// @code
  /// cudrv::nccl::group g;
  /// comm.all_reduce(grads, cudrv::nccl::reduction::sum, s);
  /// float us = g.simulate_end();   // grads untouched
  /// @endcode
  /// @throws invalid_argument_error when the group was already ended or is nested in another
  /// @throws not_supported_error when the loaded NCCL lacks ncclGroupSimulateEnd: the group stays open and
  /// its calls are launched when it ends (ask @ref simulation_supported first)
  /// @throws nccl_error when NCCL refuses
  [[nodiscard]] float simulate_end();
  /// @brief Whether the loaded NCCL can simulate a group (has ncclGroupSimulateEnd, NCCL 2.22). Ask
  /// before queuing the calls to simulate: without it, @ref simulate_end throws and the group's calls
  /// are launched when the group ends (NCCL cannot take them back). Never throws.
  /// @code
  /// if (cudrv::nccl::group::simulation_supported()) { cudrv::nccl::group g; ...; cost = g.simulate_end(); }
  /// @endcode
  [[nodiscard]] static bool simulation_supported() noexcept;
  /// @brief Whether @ref end has not been called yet.
  [[nodiscard]] bool is_open() const noexcept { return open_; }

 private:
  bool open_ = false;
};

/// @brief Device memory registered with a communicator for zero-copy transfers (ncclCommRegister),
/// deregistered (ncclCommDeregister) when the registration is destroyed. Move-only. Needs NCCL 2.19
/// or newer. The memory must outlive the registration: a temporary communicator or a temporary buffer
/// does not compile here (a view of memory owned elsewhere, a `device_span`, does). A communicator held by
/// a cudrv owner may go first (NCCL deregisters with it; the registration then makes no call); one
/// adopted only as a view must outlive it.
///
/// @code
/// cudrv::device_buffer<float> buf(dev, n);
/// cudrv::nccl::registration reg(comm, buf);   // NCCL may now use buf without staging copies
/// comm.all_reduce(buf, cudrv::nccl::reduction::sum, s);
/// @endcode
class registration {
 public:
  /// @brief An empty registration.
  registration() noexcept = default;
  /// @brief Registers the memory of @p data with @p comm.
  /// @throws invalid_argument_error for an empty communicator or empty memory, before NCCL is called
  /// @throws invalid_argument_error inside an open @ref group of this thread (NCCL writes the handle at
  /// the group's end)
  /// @throws timeout_error when a non-blocking communicator stays in progress past its timeout
  /// @throws not_supported_error when the loaded NCCL lacks ncclCommRegister
  template <device_range Data>
  registration(communicator_ref comm, const Data& data) {
    auto d = cudrv::detail::nccl_span(data);
    cudrv::detail::nccl_check_handle(comm.native_handle(), "cudrv::nccl::registration");
    cudrv::detail::nccl_check_not_empty("cudrv::nccl::registration", "the memory to register", d.size());
    handle_ = cudrv::detail::nccl_register(comm.native_handle(), comm.timeout().count(), d.data(), d.size_bytes());
    comm_ = comm.native_handle();
    generation_ = cudrv::detail::nccl_generation(comm_);
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief A temporary owner of the memory does not compile: it would be freed while registered.
  template <class Data>
  requires(!std::is_lvalue_reference_v<Data> && !cudrv::detail::is_view_type<std::remove_cv_t<Data>>)
      registration(communicator_ref comm, Data&& data)
  = delete;
  registration(const registration&) = delete;
  registration& operator=(const registration&) = delete;
  /// @}
  /// @brief Takes over @p other's registration; @p other becomes empty.
  registration(registration&& other) noexcept
      : comm_(cudrv::detail::exchange(other.comm_, nullptr)),
        handle_(cudrv::detail::exchange(other.handle_, nullptr)),
        generation_(other.generation_) {}
  /// @brief Deregisters the held memory, then takes over @p other's registration.
  registration& operator=(registration&& other) noexcept {
    if (this != &other) {
      reset();
      comm_ = cudrv::detail::exchange(other.comm_, nullptr);
      handle_ = cudrv::detail::exchange(other.handle_, nullptr);
      generation_ = other.generation_;
    }
    return *this;
  }
  /// @brief Deregisters the memory (errors go to the destruction handler); nothing when the
  /// communicator's cudrv owner has destroyed it already (NCCL deregistered it then).
  ~registration() { reset(); }
  /// @brief Deregisters the memory now; the registration becomes empty.
  void reset() noexcept {
    if (handle_ != nullptr) {
      cudrv::detail::nccl_deregister(comm_, generation_, handle_);
    }
    comm_ = nullptr;
    handle_ = nullptr;
  }
  /// @brief NCCL's registration handle; null when empty.
  [[nodiscard]] void* native_handle() const noexcept { return handle_; }
  /// @brief Whether the registration holds registered memory.
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }

 private:
  ncclComm* comm_ = nullptr;
  void* handle_ = nullptr;
  std::uint64_t generation_ = 0;  // the communicator's owner's number (nccl_generation)
};

/// @brief A premultiplied-sum reduction operator (ncclRedOpCreatePreMulSum, NCCL 2.11): each rank's
/// input is multiplied by a scalar before the sum, so `all_reduce` with `premul_sum(comm, 1.0f / n)`
/// averages, and a per-rank scalar weighs each rank. Made for one communicator and one element type
/// @p T: a reducing collective takes it in place of a @ref reduction, on that communicator only
/// (another is refused with invalid_argument_error) and on buffers of @p T only (others do not
/// compile). Destroyed with ncclRedOpDestroy. Move-only. A communicator held by a cudrv owner may go
/// first (NCCL frees its operators; the destructor then makes no call); one adopted only as a view must
/// outlive it.
///
/// The scalar is either a host value, read once when the operator is made, or one element of device
/// memory, read by the device each time a collective runs (change it between collectives to change the
/// weight without a new operator); that memory must outlive the operator's last collective, so a
/// temporary buffer is refused.
///
/// @code
/// cudrv::nccl::premul_sum<float> mean(comm, 1.0f / float(comm.size()));
/// comm.all_reduce(grads, mean, s);                  // the average
/// cudrv::device_buffer<float> weight(dev, 1);
/// cudrv::nccl::premul_sum<float> weighted(comm, weight.view());   // read when each collective runs
/// @endcode
template <element T>
class premul_sum {
 public:
  /// @brief An empty operator (refused by the collectives).
  premul_sum() noexcept = default;
  /// @brief An operator whose scalar @p scalar is read now (`ncclScalarHostImmediate`).
  /// @throws invalid_argument_error for an empty communicator
  /// @throws not_supported_error when the loaded NCCL lacks ncclRedOpCreatePreMulSum
  premul_sum(communicator_ref comm, T scalar) { create(comm, &scalar, false); }
  /// @brief An operator whose scalar is the one element of @p scalar, read by the device while each
  /// collective runs (`ncclScalarDevice`).
  /// @throws invalid_argument_error for an empty communicator or a span that is not one element
  /// @throws not_supported_error when the loaded NCCL lacks ncclRedOpCreatePreMulSum
  premul_sum(communicator_ref comm, device_span<const T> scalar) {
    if (scalar.size() != 1) {
      throw invalid_argument_error("cudrv::nccl::premul_sum",
                                   "the device scalar must be one element, not " + std::to_string(scalar.size()));
    }
    const CUdeviceptr address = scalar.data();
    create(comm, reinterpret_cast<const void*>(address), true);
  }
  /// @brief An operator whose scalar is the one element of @p scalar (a device buffer of one element).
  premul_sum(communicator_ref comm, const device_buffer<T>& scalar) : premul_sum(comm, scalar.view()) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief A temporary buffer would be freed while the device still reads the scalar from it.
  premul_sum(communicator_ref comm, device_buffer<T>&& scalar) = delete;
  premul_sum(const premul_sum&) = delete;
  premul_sum& operator=(const premul_sum&) = delete;
  /// @}
  /// @brief Takes over @p other's operator; @p other becomes empty.
  premul_sum(premul_sum&& other) noexcept
      : comm_(cudrv::detail::exchange(other.comm_, nullptr)),
        op_(cudrv::detail::exchange(other.op_, -1)),
        generation_(other.generation_) {}
  /// @brief Destroys the held operator, then takes over @p other's.
  premul_sum& operator=(premul_sum&& other) noexcept {
    if (this != &other) {
      reset();
      comm_ = cudrv::detail::exchange(other.comm_, nullptr);
      op_ = cudrv::detail::exchange(other.op_, -1);
      generation_ = other.generation_;
    }
    return *this;
  }
  /// @brief Destroys the operator (errors go to the destruction handler); nothing when the
  /// communicator's cudrv owner has destroyed it already (NCCL freed the operator with it).
  ~premul_sum() { reset(); }
  /// @brief Destroys the operator now (ncclRedOpDestroy); it becomes empty.
  void reset() noexcept {
    if (comm_ != nullptr) {
      cudrv::detail::nccl_premul_sum_destroy(comm_, generation_, op_);
    }
    comm_ = nullptr;
    op_ = -1;
  }
  /// @brief The operator's `ncclRedOp_t` value; -1 when empty.
  [[nodiscard]] int native_handle() const noexcept { return op_; }
  /// @brief The communicator it was made for; null when empty.
  [[nodiscard]] ncclComm* communicator_handle() const noexcept { return comm_; }
  /// @brief Whether it holds an operator.
  [[nodiscard]] explicit operator bool() const noexcept { return comm_ != nullptr; }

 private:
  void create(communicator_ref comm, const void* scalar, bool on_device) {
    cudrv::detail::nccl_check_handle(comm.native_handle(), "cudrv::nccl::premul_sum");
    op_ = cudrv::detail::nccl_premul_sum_create({comm.native_handle(), nullptr, comm.timeout().count()}, scalar,
                                                on_device, data_type_of_v<T>);
    comm_ = comm.native_handle();
    generation_ = cudrv::detail::nccl_generation(comm_);
  }
  ncclComm* comm_ = nullptr;
  int op_ = -1;
  std::uint64_t generation_ = 0;  // the communicator's owner's number (nccl_generation)
};

/// @brief Device memory allocated by NCCL (ncclMemAlloc, NCCL 2.19) on one device, freed with ncclMemFree:
/// memory NCCL can map into its peers' address spaces, which symmetric windows (@ref window) and
/// NVLink SHARP need. Usable wherever a `cudrv::device_buffer<T>` is: a collective's data, a
/// `device_span` (`view()`), copies. Move-only; `release`/`from_native_handle` hand the address off and
/// back. The size NCCL reserves may exceed the request (its granularity); @ref size is the request.
///
/// @code
/// cudrv::nccl::buffer<float> grads(dev, n);
/// cudrv::nccl::window win(comm, grads);                  // every rank, collectively
/// comm.all_reduce(grads, cudrv::nccl::reduction::sum, s);
/// @endcode
template <class T>
class buffer {
 public:
  using value_type = T;  ///< The element type.
  /// @brief An empty buffer.
  buffer() noexcept = default;
  /// @brief Allocates @p count elements on @p dev (its primary context current during the call, then
  /// the caller's put back).
  /// @throws invalid_argument_error for a count of 0 or one whose size overflows
  /// @throws not_supported_error when the loaded NCCL lacks ncclMemAlloc
  /// @throws nccl_error when NCCL refuses (out of memory among others)
  buffer(const cudrv::device& dev, std::size_t count)
      : address_(cudrv::detail::nccl_mem_alloc(dev.ordinal(), checked_bytes(count))),
        size_(count),
        ordinal_(dev.ordinal()) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  /// @}
  /// @brief Takes over @p other's memory; @p other becomes empty.
  buffer(buffer&& other) noexcept
      : address_(cudrv::detail::exchange(other.address_, CUdeviceptr{0})),
        size_(cudrv::detail::exchange(other.size_, std::size_t{0})),
        ordinal_(other.ordinal_) {}
  /// @brief Frees the held memory, then takes over @p other's.
  buffer& operator=(buffer&& other) noexcept {
    if (this != &other) {
      reset();
      address_ = cudrv::detail::exchange(other.address_, CUdeviceptr{0});
      size_ = cudrv::detail::exchange(other.size_, std::size_t{0});
      ordinal_ = other.ordinal_;
    }
    return *this;
  }
  /// @brief Frees the memory (ncclMemFree; errors go to the destruction handler).
  ~buffer() { reset(); }
  /// @brief Adopts @p count elements at @p address that ncclMemAlloc allocated on @p dev.
  /// @code
  /// CUdeviceptr p = grads.release();
  /// auto again = cudrv::nccl::buffer<float>::from_native_handle(p, n, dev);
  /// @endcode
  /// @throws invalid_argument_error for a non-null address with a count of 0 (the memory would be owned
  /// but look empty)
  [[nodiscard]] static buffer from_native_handle(CUdeviceptr address, std::size_t count, const cudrv::device& dev) {
    if (address != 0 && count == 0) {
      cudrv::detail::nccl_check_not_empty("cudrv::nccl::buffer::from_native_handle", "the element count", count);
    }
    buffer b;
    b.address_ = address;
    b.size_ = address == 0 ? 0 : count;
    b.ordinal_ = dev.ordinal();
    return b;
  }
  /// @brief Frees the memory now; the buffer becomes empty.
  void reset() noexcept {
    if (address_ != 0) {
      cudrv::detail::nccl_mem_free(ordinal_, address_);
    }
    address_ = 0;
    size_ = 0;
  }
  /// @brief Gives up the memory; the caller frees it with ncclMemFree (or adopts it again).
  [[nodiscard]] CUdeviceptr release() noexcept {
    size_ = 0;
    return cudrv::detail::exchange(address_, CUdeviceptr{0});
  }
  /// @brief The device address; 0 when empty.
  [[nodiscard]] CUdeviceptr data() const noexcept { return address_; }
  /// @brief The device address as a typed pointer (for kernels' arguments); null when empty.
  [[nodiscard]] T* get() const noexcept { return reinterpret_cast<T*>(address_); }
  /// @brief The number of elements requested.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// @brief size() * sizeof(T).
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  /// @brief Whether the buffer holds no memory.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// @brief Whether the buffer holds memory.
  [[nodiscard]] explicit operator bool() const noexcept { return address_ != 0; }
  /// @brief The device the memory is on.
  [[nodiscard]] cudrv::device device() const { return cudrv::device(ordinal_); }
  /// @brief A view of the elements.
  [[nodiscard]] device_span<T> view() noexcept { return device_span<T>(address_, size_); }
  /// @brief A read-only view of the elements.
  [[nodiscard]] device_span<const T> view() const noexcept { return device_span<const T>(address_, size_); }
  /// @brief A view of the elements (from an lvalue only).
  operator device_span<T>() & noexcept { return view(); }  // NOLINT: implicit on purpose, like device_buffer
  /// @brief A read-only view of the elements (from an lvalue only).
  operator device_span<const T>() const& noexcept { return view(); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the memory is freed at the end of the statement.
  operator device_span<T>() && = delete;
  /// @brief Refused: the memory is freed at the end of the statement.
  operator device_span<const T>() const&& = delete;
  /// @}

 private:
  static std::size_t checked_bytes(std::size_t count) {
    cudrv::detail::nccl_check_not_empty("cudrv::nccl::buffer", "the element count", count);
    if (count > static_cast<std::size_t>(-1) / sizeof(T)) {
      throw invalid_argument_error("cudrv::nccl::buffer",
                                   std::to_string(count) + " elements do not fit in the address space");
    }
    return count * sizeof(T);
  }
  CUdeviceptr address_ = 0;
  std::size_t size_ = 0;
  int ordinal_ = 0;
};

/// @brief A window of device memory registered with a communicator (ncclCommWindowRegister, NCCL 2.27),
/// deregistered (ncclCommWindowDeregister) when destroyed. Registration is collective: every rank
/// registers its part, in the same order. A @ref window_flags::collective_symmetric window (the default)
/// lets NCCL use its symmetric-memory kernels on collectives over that memory; it needs an address
/// aligned to @ref window_alignment and memory NCCL can map into its peers (a @ref buffer, or cuMem
/// virtual memory). Move-only. The memory must outlive the window: a temporary owner of the memory does
/// not compile. A communicator held by a cudrv owner may go first (NCCL deregisters its windows; the
/// window then makes no call); one adopted only as a view must outlive it.
///
/// @code
/// cudrv::nccl::buffer<float> grads(dev, n);
/// cudrv::nccl::window win(comm, grads);
/// comm.all_reduce(grads, cudrv::nccl::reduction::sum, s);   // may use the symmetric kernels
/// @endcode
class window {
 public:
  /// @brief An empty window.
  window() noexcept = default;
  /// @brief Registers the memory of @p data with @p comm (collective).
  /// @throws invalid_argument_error for an empty communicator, empty memory, (symmetric) an address
  /// not aligned to @ref window_alignment, or inside an open @ref group of this thread (NCCL writes the
  /// window only at the group's end), before NCCL is called
  /// @throws not_supported_error when the loaded NCCL lacks ncclCommWindowRegister
  /// @throws timeout_error when a non-blocking registration stays in progress past the communicator's timeout
  template <device_range Data>
  window(communicator_ref comm, const Data& data, window_flags flags = window_flags::collective_symmetric) {
    auto d = cudrv::detail::nccl_span(data);
    cudrv::detail::nccl_check_handle(comm.native_handle(), "cudrv::nccl::window");
    cudrv::detail::nccl_check_not_empty("cudrv::nccl::window", "the memory to register", d.size());
    target_ = {comm.native_handle(), nullptr, comm.timeout().count()};
    handle_ = cudrv::detail::nccl_window_register(target_, d.data(), d.size_bytes(), flags);
    generation_ = cudrv::detail::nccl_generation(target_.comm);
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief A temporary owner of the memory does not compile: it would be freed while registered.
  template <class Data>
  requires(!std::is_lvalue_reference_v<Data> && !cudrv::detail::is_view_type<std::remove_cv_t<Data>>)
      window(communicator_ref comm, Data&& data, window_flags flags = window_flags::collective_symmetric)
  = delete;
  window(const window&) = delete;
  window& operator=(const window&) = delete;
  /// @}
  /// @brief Takes over @p other's window; @p other becomes empty.
  window(window&& other) noexcept
      : target_(other.target_),
        handle_(cudrv::detail::exchange(other.handle_, nullptr)),
        generation_(other.generation_) {}
  /// @brief Deregisters the held window, then takes over @p other's.
  window& operator=(window&& other) noexcept {
    if (this != &other) {
      reset();
      target_ = other.target_;
      handle_ = cudrv::detail::exchange(other.handle_, nullptr);
      generation_ = other.generation_;
    }
    return *this;
  }
  /// @brief Deregisters the window (errors go to the destruction handler); nothing when the
  /// communicator's cudrv owner has destroyed it already (NCCL deregistered it then).
  ~window() { reset(); }
  /// @brief Deregisters the window now (ncclCommWindowDeregister); it becomes empty.
  void reset() noexcept {
    if (handle_ != nullptr) {
      cudrv::detail::nccl_window_deregister(target_, generation_, cudrv::detail::exchange(handle_, nullptr));
    }
  }
  /// @brief NCCL's window handle (`ncclWindow_t`); null when empty.
  [[nodiscard]] ncclWindow_vidmem* native_handle() const noexcept { return handle_; }
  /// @brief The communicator it is registered with; null when empty.
  [[nodiscard]] ncclComm* communicator_handle() const noexcept { return handle_ != nullptr ? target_.comm : nullptr; }
  /// @brief Whether the window holds a registration.
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }

 private:
  cudrv::detail::nccl_target target_{nullptr, nullptr, cudrv::detail::nccl_default_timeout_ms};
  ncclWindow_vidmem* handle_ = nullptr;
  std::uint64_t generation_ = 0;  // the communicator's owner's number (nccl_generation)
};

}  // namespace nccl
}  // namespace cudrv
