// NCCL, loaded at run time: communicators, collectives, groups and buffer registration
// (<cudrv/nccl.hpp>).
//
// NCCL is not linked: libnccl.so.2 (or $CUDRV_LIBNCCL) is opened with dlopen on first use, once per
// process, and every function is resolved with dlsym and typed with decltype of its declaration in
// the toolkit's <nccl.h>. The outcome is cached and never destroyed, so a failed load fails the same
// way on every later call.
#include "cudrv/nccl.hpp"

#include <dlfcn.h>
#include <link.h>
#include <nccl.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <mutex>
#include <new>  // std::nothrow_t
#include <optional>
#include <thread>

#include "driver/driver_api.hpp"

// Every NCCL function cudrv needs; a library lacking one of them is refused.
#define CUDRV_NCCL_FUNCTIONS(X) \
  X(ncclGetVersion)             \
  X(ncclGetUniqueId)            \
  X(ncclCommInitRankConfig)     \
  X(ncclCommInitAll)            \
  X(ncclCommFinalize)           \
  X(ncclCommDestroy)            \
  X(ncclCommAbort)              \
  X(ncclCommSplit)              \
  X(ncclGetErrorString)         \
  X(ncclGetLastError)           \
  X(ncclCommGetAsyncError)      \
  X(ncclCommCount)              \
  X(ncclCommCuDevice)           \
  X(ncclCommUserRank)           \
  X(ncclAllReduce)              \
  X(ncclBroadcast)              \
  X(ncclReduce)                 \
  X(ncclAllGather)              \
  X(ncclReduceScatter)          \
  X(ncclSend)                   \
  X(ncclRecv)                   \
  X(ncclGroupStart)             \
  X(ncclGroupEnd)

// Functions of newer NCCL versions: null when the library lacks them (not_supported_error on use).
#define CUDRV_NCCL_OPTIONAL_FUNCTIONS(X) \
  X(ncclCommRegister)                    \
  X(ncclCommDeregister)

namespace cudrv {

// The public enums are NCCL's values.
static_assert(static_cast<int>(nccl::result::in_progress) == ncclInProgress);
static_assert(static_cast<int>(nccl::data_type::int8) == ncclInt8);
static_assert(static_cast<int>(nccl::data_type::uint8) == ncclUint8);
static_assert(static_cast<int>(nccl::data_type::int32) == ncclInt32);
static_assert(static_cast<int>(nccl::data_type::uint32) == ncclUint32);
static_assert(static_cast<int>(nccl::data_type::int64) == ncclInt64);
static_assert(static_cast<int>(nccl::data_type::uint64) == ncclUint64);
static_assert(static_cast<int>(nccl::data_type::float16) == ncclFloat16);
static_assert(static_cast<int>(nccl::data_type::float32) == ncclFloat32);
static_assert(static_cast<int>(nccl::data_type::float64) == ncclFloat64);
static_assert(static_cast<int>(nccl::data_type::bfloat16) == ncclBfloat16);
static_assert(static_cast<int>(nccl::reduction::sum) == ncclSum);
static_assert(static_cast<int>(nccl::reduction::prod) == ncclProd);
static_assert(static_cast<int>(nccl::reduction::max) == ncclMax);
static_assert(static_cast<int>(nccl::reduction::min) == ncclMin);
static_assert(static_cast<int>(nccl::reduction::avg) == ncclAvg);
static_assert(sizeof(nccl::unique_id::bytes) == sizeof(ncclUniqueId));
static_assert(std::is_same_v<ncclComm_t, ncclComm*>);
static_assert(std::is_same_v<cudaStream_t, CUstream>);

namespace {

struct nccl_api {
// NOLINTNEXTLINE(bugprone-macro-parentheses): name is a function's name, declared as a member
#define CUDRV_NCCL_MEMBER(name) decltype(&::name) name = nullptr;
  CUDRV_NCCL_FUNCTIONS(CUDRV_NCCL_MEMBER)
  CUDRV_NCCL_OPTIONAL_FUNCTIONS(CUDRV_NCCL_MEMBER)
#undef CUDRV_NCCL_MEMBER
};

struct nccl_state {
  nccl_api api;
  bool loaded = false;
  CUresult code = CUDA_SUCCESS;  // CUDA_ERROR_FILE_NOT_FOUND or CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND
  std::string call;              // "dlopen" or "dlsym"
  std::string reason;
  std::string path;
};

constexpr const char* nccl_soname = "libnccl.so.2";
constexpr const char* nccl_env = "CUDRV_LIBNCCL";

std::string dl_error() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

nccl_state* load_nccl() {
  auto* s = new nccl_state;  // intentionally never destroyed, like the driver's state
  std::vector<std::string> candidates;
  const char* env = std::getenv(nccl_env);
  const bool from_env = env != nullptr && *env != '\0';
  if (from_env) {
    candidates.emplace_back(env);
  } else {
    candidates = {nccl_soname, std::string("/usr/local/cuda/lib64/") + nccl_soname,
                  std::string("/usr/local/cuda/lib/") + nccl_soname};
  }
  std::string tried;
  void* lib = nullptr;
  for (const auto& name : candidates) {
    if ((lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) {
      s->path = name;
      if (link_map* map = nullptr;
          dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr && *map->l_name != '\0') {
        s->path = map->l_name;
      }
      break;
    }
    tried += (tried.empty() ? "" : "; ") + name + " (" + dl_error() + ")";
  }
  if (lib == nullptr) {
    s->code = CUDA_ERROR_FILE_NOT_FOUND;
    s->call = "dlopen";
    s->reason = "NCCL could not be loaded: tried " + tried + ". ";
    if (from_env) {
      s->reason += std::string("Set ") + nccl_env + " to the full path of " + nccl_soname +
                   ", or unset it to search the default locations";
    } else {
      s->reason += std::string("Install NCCL (") + nccl_soname +
                   ", e.g. the libnccl2 package), add its directory to "
                   "LD_LIBRARY_PATH, or set " +
                   nccl_env + " to its full path";
    }
    return s;
  }
  std::string missing;
  auto resolve = [&](const char* symbol, auto& fn, bool required) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
    if (fn == nullptr && required) {
      missing += (missing.empty() ? "" : ", ") + std::string(symbol);
    }
  };
#define CUDRV_RESOLVE(name) resolve(#name, s->api.name, true);
  CUDRV_NCCL_FUNCTIONS(CUDRV_RESOLVE)
#undef CUDRV_RESOLVE
#define CUDRV_RESOLVE(name) resolve(#name, s->api.name, false);
  CUDRV_NCCL_OPTIONAL_FUNCTIONS(CUDRV_RESOLVE)
#undef CUDRV_RESOLVE
  if (!missing.empty()) {
    s->code = CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
    s->call = "dlsym";
    s->reason = s->path + " is not a usable NCCL: it lacks " + missing + " (cudrv needs NCCL 2.18 or newer); set " +
                nccl_env + " to the path of " + nccl_soname;
    dlclose(lib);
    s->api = nccl_api{};
    return s;
  }
  s->loaded = true;
  return s;
}

const nccl_state& state() {
  static const nccl_state* s = load_nccl();
  return *s;
}

const nccl_api& api() {
  const nccl_state& s = state();
  if (!s.loaded) [[unlikely]] {
    throw library_unavailable_error(error_source::nccl, static_cast<int>(s.code), error_name(s.code), s.reason, s.call,
                                    "NCCL");
  }
  return s.api;
}

const char* result_name(int r) {
  static constexpr const char* names[] = {"ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
                                          "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
                                          "ncclRemoteError",   "ncclInProgress"};
  return r >= 0 && static_cast<std::size_t>(r) < std::size(names) ? names[r] : nullptr;
}

nccl_error make_error(ncclResult_t r, const char* call, ncclComm_t comm, std::string context) {
  const nccl_api& a = api();
  const char* name = result_name(static_cast<int>(r));
  const char* text = a.ncclGetErrorString(r);
  const char* last = a.ncclGetLastError(comm);
  return nccl_error(static_cast<int>(r), name != nullptr ? name : "ncclResult " + std::to_string(static_cast<int>(r)),
                    text != nullptr ? text : "", last != nullptr ? last : "", call, std::move(context));
}

// Success, or ncclInProgress (the normal answer of a non-blocking communicator); else nccl_error.
template <class ContextFn>
void ncheck(ncclResult_t r, const char* call, ncclComm_t comm, ContextFn&& context) {
  if (r != ncclSuccess && r != ncclInProgress) [[unlikely]] {
    throw make_error(r, call, comm, context());
  }
}

void report(ncclResult_t r, const char* call, ncclComm_t comm) noexcept {
  try {
    get_destruction_error_handler()(make_error(r, call, comm, {}));
  } catch (...) {
    std::fprintf(stderr, "cudrv: error during destruction: %s failed with ncclResult_t %d\n", call,
                 static_cast<int>(r));
  }
}

// A cudrv error met while destroying: to the destruction handler, guarded like report(); an error that
// only says the driver has shut down (a static owner destroyed at exit) is not reported.
void report_caught(const error& e, const char* what) noexcept {
  if (e.source() == error_source::driver && e.result() == CUDA_ERROR_DEINITIALIZED) {
    return;
  }
  try {
    get_destruction_error_handler()(e);
  } catch (...) {
    std::fprintf(stderr, "cudrv: error during destruction: %s\n", what);
  }
}

// NCCL calls cudaSetDevice; the caller's current context is put back afterwards (cudrv's context rule).
class keep_current_context {
 public:
  // home: the primary context of the communicator's device, when known. NCCL switches to that device
  // (cudaSetDevice, its primary context) and back, so when home is current to begin with it is current
  // afterwards too, and the second look is saved: the collectives' fast path, one cuCtxGetCurrent.
  explicit keep_current_context(CUcontext home = nullptr) : home_(home) {
    detail::check(detail::drv::cuCtxGetCurrent(&saved_), "cuCtxGetCurrent");
  }
  // For destructors: when the current context cannot be read, nothing is restored afterwards (and
  // nothing is thrown).
  keep_current_context(CUcontext home, const std::nothrow_t&) noexcept : home_(home) {
    try {
      restore_ = detail::drv::cuCtxGetCurrent(&saved_) == CUDA_SUCCESS;
    } catch (...) {
      restore_ = false;
    }
  }
  keep_current_context(const keep_current_context&) = delete;
  keep_current_context& operator=(const keep_current_context&) = delete;
  ~keep_current_context() {
    if (!restore_ || (saved_ != nullptr && saved_ == home_)) {
      return;
    }
    CUcontext now = nullptr;
    if (detail::drv::cuCtxGetCurrent(&now) == CUDA_SUCCESS && now != saved_) {
      CUcontext p = saved_;
      detail::destroy_noexcept("cuCtxSetCurrent", [p] { return detail::drv::cuCtxSetCurrent(p); });
    }
  }

 private:
  CUcontext home_ = nullptr;
  CUcontext saved_ = nullptr;
  bool restore_ = true;
};

ncclConfig_t make_config(const nccl::communicator_config& c) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  if (c.blocking) {
    cfg.blocking = *c.blocking ? 1 : 0;
  }
  if (c.cga_cluster_size) {
    cfg.cgaClusterSize = *c.cga_cluster_size;
  }
  if (c.min_ctas) {
    cfg.minCTAs = *c.min_ctas;
  }
  if (c.max_ctas) {
    cfg.maxCTAs = *c.max_ctas;
  }
  if (!c.net_name.empty()) {
    cfg.netName = c.net_name.c_str();
  }
  if (c.split_share) {
    cfg.splitShare = *c.split_share ? 1 : 0;
  }
  if (!c.name.empty()) {
    cfg.commName = c.name.c_str();
  }
  return cfg;
}

void check_config(const nccl::communicator_config& c, const char* where) {
  if (c.cga_cluster_size && (*c.cga_cluster_size < 0 || *c.cga_cluster_size > 8)) {
    throw invalid_argument_error(where, "cga_cluster_size " + std::to_string(*c.cga_cluster_size) +
                                            " is outside 0..8 (NCCL's cluster sizes)");
  }
  if (c.min_ctas && *c.min_ctas < 1) {
    throw invalid_argument_error(where, "min_ctas " + std::to_string(*c.min_ctas) + " is less than 1");
  }
  if (c.max_ctas && *c.max_ctas < 1) {
    throw invalid_argument_error(where, "max_ctas " + std::to_string(*c.max_ctas) + " is less than 1");
  }
  if (c.min_ctas && c.max_ctas && *c.min_ctas > *c.max_ctas) {
    throw invalid_argument_error(where, "min_ctas " + std::to_string(*c.min_ctas) + " exceeds max_ctas " +
                                            std::to_string(*c.max_ctas));
  }
}

// Rank and size of a communicator, asked of NCCL (waiting for a non-blocking one to be ready).
std::pair<int, int> query_rank_size(ncclComm_t comm, const char* where) {
  const nccl_api& a = api();
  ncclResult_t async = ncclInProgress;
  while (true) {
    ncheck(a.ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError", comm, [&] { return std::string(where); });
    if (async != ncclInProgress) {
      break;
    }
    std::this_thread::yield();
  }
  ncheck(async, "ncclCommGetAsyncError", comm, [&] { return std::string(where); });
  int rank = 0;
  int size = 0;
  ncheck(a.ncclCommUserRank(comm, &rank), "ncclCommUserRank", comm, [] { return std::string(); });
  ncheck(a.ncclCommCount(comm, &size), "ncclCommCount", comm, [] { return std::string(); });
  return {rank, size};
}

// How many cudrv::nccl::group scopes are open on this thread (NCCL's group state is per thread too).
thread_local int open_groups = 0;

std::string counts(std::size_t send, std::size_t recv) {
  return "source of " + std::to_string(send) + " elements, destination of " + std::to_string(recv);
}

}  // namespace

nccl_error::nccl_error(int result, std::string name, std::string description, std::string last_error, std::string api,
                       std::string context)
    : error(error_source::nccl, result, std::move(name), std::move(description), std::move(api),
            last_error.empty() ? std::move(context)
                               : (context.empty() ? "NCCL: " + last_error : context + "; NCCL: " + last_error)),
      last_error_(std::move(last_error)) {}

// --- argument checks --------------------------------------------------------------------------------

namespace detail {

void nccl_check_handle(const ncclComm* comm, const char* api) {
  if (comm == nullptr) [[unlikely]] {
    throw invalid_argument_error(api, "the communicator is empty (a moved-from, released or aborted "
                                      "cudrv::nccl::communicator, or a rank left out of a split)");
  }
}

void nccl_check_not_empty(const char* api, const char* what, std::size_t count) {
  if (count == 0) {
    throw invalid_argument_error(api, std::string(what) + " is empty: NCCL would transfer nothing");
  }
}

void nccl_check_same_count(const char* api, std::size_t send, std::size_t recv) {
  nccl_check_not_empty(api, "the source", send);
  nccl_check_not_empty(api, "the destination", recv);
  if (send != recv) {
    throw invalid_argument_error(api, "the source and the destination differ in size (" + counts(send, recv) +
                                          "); pass views of equal size (subspan)");
  }
}

void nccl_check_count(const char* api, std::size_t count, std::size_t send, std::size_t recv) {
  nccl_check_not_empty(api, "the count", count);
  if (count > send || count > recv) {
    throw invalid_argument_error(api, "a count of " + std::to_string(count) + " elements exceeds the " +
                                          (count > send ? "source" : "destination") + " (" + counts(send, recv) + ")");
  }
}

void nccl_check_rank(const char* api, const char* what, int rank, int nranks) {
  if (rank < 0 || rank >= nranks) {
    throw invalid_argument_error(api, std::string(what) + " " + std::to_string(rank) +
                                          " is not a rank of this communicator of " + std::to_string(nranks) +
                                          " ranks (0 to " + std::to_string(nranks - 1) + ")");
  }
}

void nccl_check_in_place(const char* api, std::size_t total, int nranks) {
  nccl_check_not_empty(api, "the buffer", total);
  if (nranks < 1 || total % static_cast<std::size_t>(nranks) != 0) {
    throw invalid_argument_error(api, "the buffer of " + std::to_string(total) + " elements does not split into " +
                                          std::to_string(nranks) + " equal parts, one per rank");
  }
}

void nccl_check_gather(const char* api, std::size_t send, std::size_t recv, int nranks) {
  nccl_check_not_empty(api, "the source", send);
  nccl_check_not_empty(api, "the destination", recv);
  if (nranks < 1 || send > recv / static_cast<std::size_t>(nranks) || recv != send * static_cast<std::size_t>(nranks)) {
    throw invalid_argument_error(api, "the destination must hold " + std::to_string(nranks) +
                                          " (ranks) times the source (" + counts(send, recv) + ")");
  }
}

void nccl_check_scatter(const char* api, std::size_t send, std::size_t recv, int nranks) {
  nccl_check_not_empty(api, "the source", send);
  nccl_check_not_empty(api, "the destination", recv);
  if (nranks < 1 || recv > send / static_cast<std::size_t>(nranks) || send != recv * static_cast<std::size_t>(nranks)) {
    throw invalid_argument_error(api, "the source must hold " + std::to_string(nranks) +
                                          " (ranks) times the destination (" + counts(send, recv) + ")");
  }
}

void nccl_check_point_to_point(const char* api, std::size_t count, int peer, int nranks) {
  nccl_check_not_empty(api, "the buffer", count);
  nccl_check_rank(api, "peer", peer, nranks);
}

// --- the calls --------------------------------------------------------------------------------------

namespace {
std::string describe(const char* what, std::size_t count, nccl::data_type type) {
  return std::string(what) + std::to_string(count) + " elements of ncclDataType_t " +
         std::to_string(static_cast<int>(type));
}
}  // namespace

void nccl_all_reduce(ncclComm* comm, CUcontext home, CUdeviceptr send, CUdeviceptr recv, std::size_t count,
                     nccl::data_type type, nccl::reduction op, CUstream stream) {
  const nccl_api& a = api();
  keep_current_context keep(home);
  ncheck(a.ncclAllReduce(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv), count,
                         static_cast<ncclDataType_t>(type), static_cast<ncclRedOp_t>(op), comm, stream),
         "ncclAllReduce", comm, [&] { return describe("", count, type); });
}

void nccl_broadcast(ncclComm* comm, CUcontext home, CUdeviceptr send, CUdeviceptr recv, std::size_t count,
                    nccl::data_type type, int root, CUstream stream) {
  const nccl_api& a = api();
  keep_current_context keep(home);
  ncheck(a.ncclBroadcast(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv), count,
                         static_cast<ncclDataType_t>(type), root, comm, stream),
         "ncclBroadcast", comm, [&] { return describe("", count, type) + ", root " + std::to_string(root); });
}

void nccl_reduce(ncclComm* comm, CUcontext home, CUdeviceptr send, CUdeviceptr recv, std::size_t count,
                 nccl::data_type type, nccl::reduction op, int root, CUstream stream) {
  const nccl_api& a = api();
  keep_current_context keep(home);
  ncheck(a.ncclReduce(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv), count,
                      static_cast<ncclDataType_t>(type), static_cast<ncclRedOp_t>(op), root, comm, stream),
         "ncclReduce", comm, [&] { return describe("", count, type) + ", root " + std::to_string(root); });
}

void nccl_all_gather(ncclComm* comm, CUcontext home, CUdeviceptr send, CUdeviceptr recv, std::size_t send_count,
                     nccl::data_type type, CUstream stream) {
  const nccl_api& a = api();
  keep_current_context keep(home);
  ncheck(a.ncclAllGather(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv), send_count,
                         static_cast<ncclDataType_t>(type), comm, stream),
         "ncclAllGather", comm, [&] { return describe("send count ", send_count, type); });
}

void nccl_reduce_scatter(ncclComm* comm, CUcontext home, CUdeviceptr send, CUdeviceptr recv, std::size_t recv_count,
                         nccl::data_type type, nccl::reduction op, CUstream stream) {
  const nccl_api& a = api();
  keep_current_context keep(home);
  ncheck(a.ncclReduceScatter(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv), recv_count,
                             static_cast<ncclDataType_t>(type), static_cast<ncclRedOp_t>(op), comm, stream),
         "ncclReduceScatter", comm, [&] { return describe("receive count ", recv_count, type); });
}

void nccl_send(ncclComm* comm, CUcontext home, CUdeviceptr send, std::size_t count, nccl::data_type type, int peer,
               CUstream stream) {
  const nccl_api& a = api();
  keep_current_context keep(home);
  ncheck(a.ncclSend(reinterpret_cast<const void*>(send), count, static_cast<ncclDataType_t>(type), peer, comm, stream),
         "ncclSend", comm, [&] { return describe("", count, type) + " to rank " + std::to_string(peer); });
}

void nccl_recv(ncclComm* comm, CUcontext home, CUdeviceptr recv, std::size_t count, nccl::data_type type, int peer,
               CUstream stream) {
  const nccl_api& a = api();
  keep_current_context keep(home);
  ncheck(a.ncclRecv(reinterpret_cast<void*>(recv), count, static_cast<ncclDataType_t>(type), peer, comm, stream),
         "ncclRecv", comm, [&] { return describe("", count, type) + " from rank " + std::to_string(peer); });
}

void* nccl_register(ncclComm* comm, CUdeviceptr address, std::size_t bytes) {
  const nccl_api& a = api();
  if (a.ncclCommRegister == nullptr || a.ncclCommDeregister == nullptr) {
    throw not_supported_error(error_source::nccl, static_cast<int>(CUDA_ERROR_NOT_SUPPORTED),
                              error_name(CUDA_ERROR_NOT_SUPPORTED),
                              "the loaded NCCL (" + state().path +
                                  ") lacks ncclCommRegister: it needs NCCL 2.19 or newer",
                              "cudrv::nccl::registration", {});
  }
  keep_current_context keep;
  void* handle = nullptr;
  ncheck(a.ncclCommRegister(comm, reinterpret_cast<void*>(address), bytes, &handle), "ncclCommRegister", comm,
         [&] { return std::to_string(bytes) + " bytes"; });
  return handle;
}

void nccl_deregister(ncclComm* comm, void* handle) noexcept {
  try {
    const nccl_api& a = api();
    keep_current_context keep;
    if (ncclResult_t r = a.ncclCommDeregister(comm, handle); r != ncclSuccess && r != ncclInProgress) {
      report(r, "ncclCommDeregister", comm);
    }
  } catch (const error& e) {
    report_caught(e, "ncclCommDeregister failed");
  } catch (...) {
    std::fprintf(stderr, "cudrv: error during destruction: ncclCommDeregister failed\n");
  }
}

int nccl_query_rank(ncclComm* comm) {
  return query_rank_size(comm, "cudrv::nccl::communicator_ref (adopted without its rank)").first;
}

int nccl_query_size(ncclComm* comm) {
  return query_rank_size(comm, "cudrv::nccl::communicator_ref (adopted without its size)").second;
}

}  // namespace detail

// --- library ----------------------------------------------------------------------------------------

namespace nccl {

bool available() noexcept {
  try {
    return state().loaded;
  } catch (...) {
    return false;
  }
}

std::string unavailable_reason() noexcept {
  try {
    return state().loaded ? std::string() : state().reason;
  } catch (...) {
    return "NCCL could not be loaded";
  }
}

std::string library_path() noexcept {
  try {
    return state().loaded ? state().path : std::string();
  } catch (...) {
    return {};
  }
}

int version() {
  const nccl_api& a = api();
  int v = 0;
  ncheck(a.ncclGetVersion(&v), "ncclGetVersion", nullptr, [] { return std::string(); });
  return v;
}

unique_id unique_id::generate() {
  const nccl_api& a = api();
  ncclUniqueId raw{};
  ncheck(a.ncclGetUniqueId(&raw), "ncclGetUniqueId", nullptr, [] { return std::string(); });
  unique_id id;
  std::memcpy(id.bytes.data(), raw.internal, id.bytes.size());
  return id;
}

// --- communicator -----------------------------------------------------------------------------------

cudrv::device communicator_base::device() const {
  ncclComm_t c = checked("cudrv::nccl::communicator::device");
  const nccl_api& a = api();
  int ordinal = 0;
  ncheck(a.ncclCommCuDevice(c, &ordinal), "ncclCommCuDevice", c, [] { return std::string(); });
  return cudrv::device::from_native_handle(static_cast<CUdevice>(ordinal));
}

result communicator_base::async_error() const {
  ncclComm_t c = checked("cudrv::nccl::communicator::async_error");
  const nccl_api& a = api();
  ncclResult_t async = ncclSuccess;
  ncheck(a.ncclCommGetAsyncError(c, &async), "ncclCommGetAsyncError", c, [] { return std::string(); });
  return static_cast<result>(async);
}

void communicator_base::wait_ready() const {
  ncclComm_t c = checked("cudrv::nccl::communicator::wait_ready");
  const nccl_api& a = api();
  ncclResult_t async = ncclInProgress;
  do {
    ncheck(a.ncclCommGetAsyncError(c, &async), "ncclCommGetAsyncError", c, [] { return std::string(); });
    if (async == ncclInProgress) {
      std::this_thread::yield();
    }
  } while (async == ncclInProgress);
  ncheck(async, "ncclCommGetAsyncError", c,
         [] { return std::string("the communicator reports an asynchronous error"); });
}

communicator communicator_base::split(int color, int key, const std::optional<communicator_config>& config) const {
  constexpr const char* where = "cudrv::nccl::communicator::split";
  ncclComm_t c = checked(where);
  if (color < 0 && color != no_color) {
    throw invalid_argument_error(where, "color " + std::to_string(color) +
                                            " is negative: use a color >= 0, or cudrv::nccl::no_color");
  }
  if (config) {
    check_config(*config, where);
  }
  if (open_groups > 0) {
    throw invalid_argument_error(where, "cannot split inside a cudrv::nccl::group: the new communicator's rank and "
                                        "size are known only once the group has ended; split outside the group");
  }
  const nccl_api& a = api();
  ncclConfig_t cfg{};
  if (config) {
    cfg = make_config(*config);
  }
  keep_current_context keep;
  ncclComm_t out = nullptr;
  ncheck(a.ncclCommSplit(c, color, key, &out, config ? &cfg : nullptr), "ncclCommSplit", c,
         [&] { return "color " + std::to_string(color) + ", key " + std::to_string(key); });
  if (out == nullptr) {
    return communicator();  // no_color
  }
  communicator owner(out, 0, 0, home_);  // the parent's device
  auto [rank, size] = query_rank_size(out, where);
  owner.rank_ = rank;
  owner.size_ = size;
  return owner;
}

communicator communicator::init_rank(const unique_id& id, int nranks, int rank, const cudrv::device& dev,
                                     const communicator_config& config) {
  constexpr const char* where = "cudrv::nccl::communicator::init_rank";
  if (nranks < 1) {
    throw invalid_argument_error(where, "nranks " + std::to_string(nranks) + " is less than 1");
  }
  detail::nccl_check_rank(where, "rank", rank, nranks);
  check_config(config, where);
  const nccl_api& a = api();
  ncclUniqueId raw{};
  std::memcpy(raw.internal, id.bytes.data(), id.bytes.size());
  ncclConfig_t cfg = make_config(config);
  const CUcontext target = dev.primary_context().native_handle();
  keep_current_context keep;
  detail::check(detail::drv::cuCtxSetCurrent(target), "cuCtxSetCurrent");  // NCCL takes the current device
  ncclComm_t out = nullptr;
  const ncclResult_t r = a.ncclCommInitRankConfig(&out, nranks, raw, rank, &cfg);
  if (r != ncclSuccess && r != ncclInProgress) {
    nccl_error e = make_error(r, "ncclCommInitRankConfig", out,
                              "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " on device " +
                                  std::to_string(dev.ordinal()));
    if (out != nullptr) {
      (void)a.ncclCommAbort(out);
    }
    throw e;
  }
  return communicator(out, rank, nranks, target);
}

std::vector<communicator> communicator::init_all(std::span<const cudrv::device> devices) {
  constexpr const char* where = "cudrv::nccl::communicator::init_all";
  if (devices.empty()) {
    throw invalid_argument_error(where, "no device given: name at least one");
  }
  if (devices.size() > static_cast<std::size_t>(INT_MAX)) {
    throw invalid_argument_error(where, "too many devices");
  }
  std::vector<int> ordinals;
  ordinals.reserve(devices.size());
  for (const auto& d : devices) {
    if (std::find(ordinals.begin(), ordinals.end(), d.ordinal()) != ordinals.end()) {
      throw invalid_argument_error(where, "device " + std::to_string(d.ordinal()) +
                                              " is named twice: a communicator has one rank per device");
    }
    ordinals.push_back(d.ordinal());
  }
  const nccl_api& a = api();
  const int n = static_cast<int>(ordinals.size());
  // Everything that can fail is done before NCCL creates the communicators: once they exist, each is
  // handed to its owner without a call that can throw, so none can leak.
  std::vector<CUcontext> homes;
  homes.reserve(devices.size());
  for (const auto& d : devices) {
    homes.push_back(d.primary_context().native_handle());
  }
  std::vector<ncclComm_t> raw(ordinals.size(), nullptr);
  std::vector<communicator> out;
  out.reserve(raw.size());
  // NCCL switches devices while it creates them and goes back to the device current before: make
  // that the first device's primary context, so no other device's context is created or activated.
  keep_current_context keep;
  detail::check(detail::drv::cuCtxSetCurrent(homes.front()), "cuCtxSetCurrent");
  ncheck(a.ncclCommInitAll(raw.data(), n, ordinals.data()), "ncclCommInitAll", nullptr,
         [&] { return std::to_string(n) + " devices"; });
  for (int i = 0; i < n; ++i) {
    out.push_back(communicator(raw[static_cast<std::size_t>(i)], i, n,
                               homes[static_cast<std::size_t>(i)]));  // no throw: reserved
  }
  return out;
}

communicator communicator::from_native_handle(ncclComm* handle) {
  detail::nccl_check_handle(handle, "cudrv::nccl::communicator::from_native_handle");
  auto [rank, size] = query_rank_size(handle, "cudrv::nccl::communicator::from_native_handle");
  return communicator(handle, rank, size);
}

void communicator::reset() noexcept {
  ncclComm_t c = std::exchange(handle_, nullptr);
  if (c == nullptr) {
    return;
  }
  try {
    const nccl_api& a = api();
    keep_current_context keep(nullptr, std::nothrow);  // the communicator goes even when the driver fails here
    // A communicator that reports an error cannot be finalized (that waits for peers): abort it.
    ncclResult_t async = ncclSuccess;
    if (ncclResult_t r = a.ncclCommGetAsyncError(c, &async); r != ncclSuccess) {
      async = r;
    }
    if (async != ncclSuccess && async != ncclInProgress) {
      report(async, "ncclCommGetAsyncError", c);
      if (ncclResult_t r = a.ncclCommAbort(c); r != ncclSuccess) {
        report(r, "ncclCommAbort", nullptr);
      }
      return;
    }
    ncclResult_t r = a.ncclCommFinalize(c);
    while (r == ncclInProgress) {  // a non-blocking communicator: wait until it is quiescent
      std::this_thread::yield();
      if (ncclResult_t q = a.ncclCommGetAsyncError(c, &async); q != ncclSuccess) {
        r = q;
      } else {
        r = async;
      }
    }
    if (r != ncclSuccess) {
      // Not quiescent: destroying could wait on peers, so abort as for an asynchronous error.
      report(r, "ncclCommFinalize", c);
      if (ncclResult_t q = a.ncclCommAbort(c); q != ncclSuccess) {
        report(q, "ncclCommAbort", nullptr);
      }
      return;
    }
    if (ncclResult_t d = a.ncclCommDestroy(c); d != ncclSuccess && d != ncclInProgress) {
      report(d, "ncclCommDestroy", nullptr);
    }
  } catch (const error& e) {
    report_caught(e, "ncclCommDestroy failed");
  } catch (...) {
    std::fprintf(stderr, "cudrv: error during destruction: ncclCommDestroy failed\n");
  }
}

communicator::~communicator() {
  if (handle_ == nullptr) {
    return;
  }
  if (std::uncaught_exceptions() == 0) {
    reset();
    return;
  }
  ncclComm_t c = std::exchange(handle_, nullptr);
  try {
    const nccl_api& a = api();
    keep_current_context keep(nullptr, std::nothrow);
    if (ncclResult_t r = a.ncclCommAbort(c); r != ncclSuccess) {
      report(r, "ncclCommAbort", nullptr);
    }
  } catch (const error& e) {
    report_caught(e, "ncclCommAbort failed");
  } catch (...) {
    std::fprintf(stderr, "cudrv: error during destruction: ncclCommAbort failed\n");
  }
}

void communicator::abort() {
  detail::nccl_check_handle(handle_, "cudrv::nccl::communicator::abort");
  const nccl_api& a = api();
  // Without the caller's context to restore, abort all the same: this is the fault path.
  keep_current_context keep(nullptr, std::nothrow);
  ncclComm_t c = std::exchange(handle_, nullptr);
  ncheck(a.ncclCommAbort(c), "ncclCommAbort", nullptr, [] { return std::string(); });
}

// --- group --------------------------------------------------------------------------------------------

group::group() {
  const nccl_api& a = api();
  ncheck(a.ncclGroupStart(), "ncclGroupStart", nullptr, [] { return std::string(); });
  open_ = true;
  ++open_groups;
}

void group::end() {
  if (!open_) {
    throw invalid_argument_error("cudrv::nccl::group::end", "the group was already ended");
  }
  const nccl_api& a = api();
  keep_current_context keep;  // may throw: the group is still open then, and the destructor ends it
  open_ = false;              // closed by ncclGroupEnd, whatever it returns
  --open_groups;
  ncheck(a.ncclGroupEnd(), "ncclGroupEnd", nullptr, [] { return std::string(); });
}

group::~group() {
  if (!open_) {
    return;
  }
  open_ = false;
  --open_groups;
  try {
    const nccl_api& a = api();
    keep_current_context keep(nullptr, std::nothrow);  // the group is ended even when the driver fails here
    if (ncclResult_t r = a.ncclGroupEnd(); r != ncclSuccess && r != ncclInProgress) {
      report(r, "ncclGroupEnd", nullptr);
    }
  } catch (const error& e) {
    report_caught(e, "ncclGroupEnd failed");
  } catch (...) {
    std::fprintf(stderr, "cudrv: error during destruction: ncclGroupEnd failed\n");
  }
}

}  // namespace nccl
}  // namespace cudrv
