/// @file nccl.hpp
/// @brief NCCL communicators and collectives (opt-in, not part of `<cudrv/cudrv.hpp>`): the owning
/// @ref cudrv::nccl::communicator and its view @ref cudrv::nccl::communicator_ref, @ref cudrv::nccl::unique_id,
/// collectives typed on cudrv buffers and ordered on cudrv streams, @ref cudrv::nccl::group scopes and
/// @ref cudrv::nccl::registration of user buffers.
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
};

/// @brief The color that leaves a rank out of every communicator of a @ref communicator_base::split.
///
/// @code
/// auto sub = comm.split(in_group ? 0 : cudrv::nccl::no_color, comm.rank());
/// @endcode
inline constexpr int no_color = -1;

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

// The NCCL calls, untyped (src/scaleout/nccl.cpp). Each throws nccl_error on failure.
void nccl_all_reduce(ncclComm* comm, CUcontext home, CUdeviceptr send, CUdeviceptr recv, std::size_t count,
                     nccl::data_type type, nccl::reduction op, CUstream stream);
void nccl_broadcast(ncclComm* comm, CUcontext home, CUdeviceptr send, CUdeviceptr recv, std::size_t count,
                    nccl::data_type type, int root, CUstream stream);
void nccl_reduce(ncclComm* comm, CUcontext home, CUdeviceptr send, CUdeviceptr recv, std::size_t count,
                 nccl::data_type type, nccl::reduction op, int root, CUstream stream);
void nccl_all_gather(ncclComm* comm, CUcontext home, CUdeviceptr send, CUdeviceptr recv, std::size_t send_count,
                     nccl::data_type type, CUstream stream);
void nccl_reduce_scatter(ncclComm* comm, CUcontext home, CUdeviceptr send, CUdeviceptr recv, std::size_t recv_count,
                         nccl::data_type type, nccl::reduction op, CUstream stream);
void nccl_send(ncclComm* comm, CUcontext home, CUdeviceptr send, std::size_t count, nccl::data_type type, int peer,
               CUstream stream);
void nccl_recv(ncclComm* comm, CUcontext home, CUdeviceptr recv, std::size_t count, nccl::data_type type, int peer,
               CUstream stream);
void* nccl_register(ncclComm* comm, CUdeviceptr address, std::size_t bytes);
int nccl_query_rank(ncclComm* comm);
int nccl_query_size(ncclComm* comm);
void nccl_deregister(ncclComm* comm, void* handle) noexcept;

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
  /// @brief Polls @ref async_error until it is no longer @ref result::in_progress; throws the error it
  /// then reports, if any. Use after creating or calling a non-blocking communicator.
  /// @throws nccl_error when the communicator reports an error
  void wait_ready() const;

  /// @brief Reduces @p send across all ranks into @p recv on every rank (ncclAllReduce); both hold the
  /// same number of elements.
  /// @code
  /// comm.all_reduce(local, total, cudrv::nccl::reduction::sum, s);
  /// @endcode
  template <device_range Send, writable_device_range Recv>
  void all_reduce(const Send& send, Recv&& recv, reduction op, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::all_reduce");
    auto [in, out] = same_type_spans(send, recv);
    cudrv::detail::nccl_check_same_count("cudrv::nccl::communicator::all_reduce", in.size(), out.size());
    cudrv::detail::nccl_all_reduce(c, home_, in.data(), out.data(), in.size(), type_of(out), effective(op),
                                   s.native_handle());
  }
  /// @brief All-reduce in place: @p buffer holds this rank's data before and the result after.
  /// @code
  /// comm.all_reduce(grads, cudrv::nccl::reduction::avg, s);
  /// @endcode
  template <writable_device_range Buffer>
  void all_reduce(Buffer&& buffer, reduction op, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::all_reduce");
    auto b = cudrv::detail::nccl_span(buffer);
    cudrv::detail::nccl_check_same_count("cudrv::nccl::communicator::all_reduce", b.size(), b.size());
    cudrv::detail::nccl_all_reduce(c, home_, b.data(), b.data(), b.size(), type_of(b), effective(op),
                                   s.native_handle());
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
    cudrv::detail::nccl_broadcast(c, home_, in.data(), out.data(), in.size(), type_of(out), root, s.native_handle());
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
    cudrv::detail::nccl_broadcast(c, home_, b.data(), b.data(), b.size(), type_of(b), root, s.native_handle());
  }

  /// @brief Reduces @p send across all ranks into @p recv of rank @p root (ncclReduce); both hold the
  /// same number of elements (@p recv is written on the root only).
  /// @code
  /// comm.reduce(local, total, cudrv::nccl::reduction::sum, 0, s);
  /// @endcode
  template <device_range Send, writable_device_range Recv>
  void reduce(const Send& send, Recv&& recv, reduction op, int root, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::reduce");
    auto [in, out] = same_type_spans(send, recv);
    cudrv::detail::nccl_check_same_count("cudrv::nccl::communicator::reduce", in.size(), out.size());
    cudrv::detail::nccl_check_rank("cudrv::nccl::communicator::reduce", "root", root, known_size());
    cudrv::detail::nccl_reduce(c, home_, in.data(), out.data(), in.size(), type_of(out), effective(op), root,
                               s.native_handle());
  }
  /// @brief Reduce in place: the root's @p buffer receives the result.
  /// @code
  /// comm.reduce(buf, cudrv::nccl::reduction::max, 0, s);
  /// @endcode
  template <writable_device_range Buffer>
  void reduce(Buffer&& buffer, reduction op, int root, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::reduce");
    auto b = cudrv::detail::nccl_span(buffer);
    cudrv::detail::nccl_check_same_count("cudrv::nccl::communicator::reduce", b.size(), b.size());
    cudrv::detail::nccl_check_rank("cudrv::nccl::communicator::reduce", "root", root, known_size());
    cudrv::detail::nccl_reduce(c, home_, b.data(), b.data(), b.size(), type_of(b), effective(op), root,
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
    cudrv::detail::nccl_all_gather(c, home_, in.data(), out.data(), in.size(), type_of(out), s.native_handle());
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
    cudrv::detail::nccl_all_gather(c, home_, b.subspan(part * static_cast<std::size_t>(known_rank()), part).data(),
                                   b.data(), part, type_of(b), s.native_handle());
  }

  /// @brief Reduces @p send across all ranks and leaves part i of the result in @p recv of rank i
  /// (ncclReduceScatter); @p send holds size() * recv.size() elements.
  /// @code
  /// comm.reduce_scatter(full, shard, cudrv::nccl::reduction::sum, s);
  /// @endcode
  template <device_range Send, writable_device_range Recv>
  void reduce_scatter(const Send& send, Recv&& recv, reduction op, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::reduce_scatter");
    auto [in, out] = same_type_spans(send, recv);
    cudrv::detail::nccl_check_scatter("cudrv::nccl::communicator::reduce_scatter", in.size(), out.size(), known_size());
    cudrv::detail::nccl_reduce_scatter(c, home_, in.data(), out.data(), out.size(), type_of(out), effective(op),
                                       s.native_handle());
  }
  /// @brief Reduce-scatter in place: @p buffer holds size() equal parts, and this rank's part of the
  /// result lands in part rank() of it.
  /// @code
  /// comm.reduce_scatter(full, cudrv::nccl::reduction::sum, s);
  /// @endcode
  template <writable_device_range Buffer>
  void reduce_scatter(Buffer&& buffer, reduction op, stream_ref s) const {
    ncclComm* c = checked("cudrv::nccl::communicator::reduce_scatter");
    auto b = cudrv::detail::nccl_span(buffer);
    cudrv::detail::nccl_check_in_place("cudrv::nccl::communicator::reduce_scatter", b.size(), known_size());
    const std::size_t part = b.size() / static_cast<std::size_t>(known_size());
    cudrv::detail::nccl_reduce_scatter(c, home_, b.data(),
                                       b.subspan(part * static_cast<std::size_t>(known_rank()), part).data(), part,
                                       type_of(b), effective(op), s.native_handle());
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
    cudrv::detail::nccl_send(c, home_, d.data(), d.size(), type_of(d), peer, s.native_handle());
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
    cudrv::detail::nccl_recv(c, home_, d.data(), d.size(), type_of(d), peer, s.native_handle());
  }

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
  /// @brief Holds @p handle, @p rank, @p size and @p home unchanged.
  constexpr communicator_base(ncclComm* handle, int rank, int size, CUcontext home = nullptr) noexcept
      : handle_(handle), rank_(rank), size_(size), home_(home) {}
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

 private:
  ncclComm* checked(const char* api) const {
    cudrv::detail::nccl_check_handle(handle_, api);
    return handle_;
  }
  // The rank and size, asked of NCCL when this view was adopted without them (the handle is not null).
  int known_rank() const { return rank_ >= 0 ? rank_ : cudrv::detail::nccl_query_rank(handle_); }
  int known_size() const { return size_ >= 1 ? size_ : cudrv::detail::nccl_query_size(handle_); }
  // The operation NCCL is asked for. On one rank the average of one value is that value, as is the sum:
  // NCCL 2.28's ncclAvg on a one-rank communicator leaves the elements past the last multiple of 2^18
  // unwritten (out of place), so cudrv asks for the sum there, which NCCL copies correctly.
  [[nodiscard]] reduction effective(reduction op) const {
    return op == reduction::avg && known_size() == 1 ? reduction::sum : op;
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
  constexpr communicator_ref(ncclComm* handle, int rank, int size, CUcontext home = nullptr) noexcept
      : communicator_base(handle, rank, size, home) {}
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
  communicator(communicator&& other) noexcept : communicator_base(other) { other.handle_ = nullptr; }
  /// @brief Destroys the held communicator, then takes over @p other's.
  communicator& operator=(communicator&& other) noexcept {
    if (this != &other) {
      reset();
      communicator_base::operator=(other);
      other.handle_ = nullptr;
    }
    return *this;
  }
  /// @brief Finalizes and destroys the communicator (errors go to the destruction handler). Destroyed
  /// while an exception propagates (stack unwinding), it aborts it instead (ncclCommAbort): finalizing
  /// waits until the other ranks have matched this rank's work, which after a failure may never happen.
  ~communicator();

  /// @brief Finalizes (ncclCommFinalize, waiting for a non-blocking one) and destroys (ncclCommDestroy)
  /// the communicator now; it becomes empty. Errors go to the destruction handler.
  void reset() noexcept;
  /// @brief Aborts the communicator (ncclCommAbort): in-flight operations are stopped and resources
  /// freed without waiting for the other ranks. The fault path; it becomes empty.
  /// @code
  /// if (comm.async_error() != cudrv::nccl::result::success) comm.abort();
  /// @endcode
  /// @throws nccl_error when NCCL reports an error while aborting (the owner is empty anyway)
  void abort();
  /// @brief Gives up ownership; the caller must destroy the returned handle.
  [[nodiscard]] ncclComm* release() noexcept { return cudrv::detail::exchange(handle_, nullptr); }
  /// @brief Whether the owner holds a communicator.
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A view, valid while this communicator lives (an empty owner gives a view of a null handle).
  operator communicator_ref() const& noexcept {  // NOLINT: implicit on purpose
    return communicator_ref(handle_, rank_, size_, home_);
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the communicator is destroyed at the end of the statement
  /// (`communicator_ref v = communicator::init_rank(...)` would dangle at once).
  operator communicator_ref() const&& = delete;
  /// @}

 private:
  friend class communicator_base;
  communicator(ncclComm* handle, int rank, int size, CUcontext home = nullptr) noexcept
      : communicator_base(handle, rank, size, home) {}
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
  /// @brief Whether @ref end has not been called yet.
  [[nodiscard]] bool is_open() const noexcept { return open_; }

 private:
  bool open_ = false;
};

/// @brief Device memory registered with a communicator for zero-copy transfers (ncclCommRegister),
/// deregistered (ncclCommDeregister) when the registration is destroyed. Move-only. Needs NCCL 2.19
/// or newer. The communicator and the memory must outlive the registration: a temporary communicator
/// or a temporary buffer does not compile here (a view of memory owned elsewhere, a `device_span`, does).
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
  /// @throws not_supported_error when the loaded NCCL lacks ncclCommRegister
  template <device_range Data>
  registration(communicator_ref comm, const Data& data) {
    auto d = cudrv::detail::nccl_span(data);
    cudrv::detail::nccl_check_handle(comm.native_handle(), "cudrv::nccl::registration");
    cudrv::detail::nccl_check_not_empty("cudrv::nccl::registration", "the memory to register", d.size());
    handle_ = cudrv::detail::nccl_register(comm.native_handle(), d.data(), d.size_bytes());
    comm_ = comm.native_handle();
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
        handle_(cudrv::detail::exchange(other.handle_, nullptr)) {}
  /// @brief Deregisters the held memory, then takes over @p other's registration.
  registration& operator=(registration&& other) noexcept {
    if (this != &other) {
      reset();
      comm_ = cudrv::detail::exchange(other.comm_, nullptr);
      handle_ = cudrv::detail::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  /// @brief Deregisters the memory (errors go to the destruction handler).
  ~registration() { reset(); }
  /// @brief Deregisters the memory now; the registration becomes empty.
  void reset() noexcept {
    if (handle_ != nullptr) {
      cudrv::detail::nccl_deregister(comm_, handle_);
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
};

}  // namespace nccl
}  // namespace cudrv
