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
#include <memory>
#include <mutex>
#include <new>  // std::nothrow_t
#include <optional>
#include <string_view>
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

// Functions of newer NCCL versions, with the version that brought each: null when the library lacks
// them (not_supported_error naming that version on use).
#define CUDRV_NCCL_OPTIONAL_FUNCTIONS(X) \
  X(ncclRedOpCreatePreMulSum, "2.11")    \
  X(ncclRedOpDestroy, "2.11")            \
  X(ncclCommRegister, "2.19")            \
  X(ncclCommDeregister, "2.19")          \
  X(ncclMemAlloc, "2.19")                \
  X(ncclMemFree, "2.19")                 \
  X(ncclGroupSimulateEnd, "2.22")        \
  X(ncclCommInitRankScalable, "2.23")    \
  X(ncclCommWindowRegister, "2.27")      \
  X(ncclCommWindowDeregister, "2.27")    \
  X(ncclCommShrink, "2.27")              \
  X(ncclCommRevoke, "2.28.9")            \
  X(ncclAlltoAll, "2.28")                \
  X(ncclGather, "2.28")                  \
  X(ncclScatter, "2.28")

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
static_assert(static_cast<int>(nccl::shrink_mode::normal) == NCCL_SHRINK_DEFAULT);
static_assert(static_cast<int>(nccl::shrink_mode::abort) == NCCL_SHRINK_ABORT);
static_assert(static_cast<int>(nccl::window_flags::none) == NCCL_WIN_DEFAULT);
static_assert(static_cast<int>(nccl::window_flags::collective_symmetric) == NCCL_WIN_COLL_SYMMETRIC);
static_assert(nccl::window_alignment == NCCL_WIN_REQUIRED_ALIGNMENT);
static_assert(nccl::cta_policy::standard == NCCL_CTA_POLICY_DEFAULT);
static_assert(nccl::cta_policy::efficiency == NCCL_CTA_POLICY_EFFICIENCY);
static_assert(nccl::cta_policy::zero == NCCL_CTA_POLICY_ZERO);
static_assert(std::is_same_v<ncclWindow_t, ncclWindow_vidmem*>);

namespace {

struct nccl_api {
// NOLINTNEXTLINE(bugprone-macro-parentheses): name is a function's name, declared as a member
#define CUDRV_NCCL_MEMBER(name) decltype(&::name) name = nullptr;
// NOLINTNEXTLINE(bugprone-macro-parentheses): the same, for the optional functions
#define CUDRV_NCCL_OPTIONAL_MEMBER(name, since) decltype(&::name) name = nullptr;
  CUDRV_NCCL_FUNCTIONS(CUDRV_NCCL_MEMBER)
  CUDRV_NCCL_OPTIONAL_FUNCTIONS(CUDRV_NCCL_OPTIONAL_MEMBER)
#undef CUDRV_NCCL_OPTIONAL_MEMBER
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
#define CUDRV_RESOLVE(name, since) resolve(#name, s->api.name, false);
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

// An optional function, or not_supported_error naming the NCCL version that brought it.
template <class Fn>
Fn require(Fn fn, const char* name, const char* version, const char* where) {
  if (fn == nullptr) [[unlikely]] {
    throw not_supported_error(error_source::nccl, static_cast<int>(CUDA_ERROR_NOT_SUPPORTED),
                              error_name(CUDA_ERROR_NOT_SUPPORTED),
                              "the loaded NCCL (" + state().path + ") lacks " + name + ": it needs NCCL " + version +
                                  " or newer",
                              where, {});
  }
  return fn;
}
// The NCCL version that brought an optional function (CUDRV_NCCL_OPTIONAL_FUNCTIONS).
const char* since(std::string_view name) {
#define CUDRV_SINCE(fn, version) \
  if (name == #fn) {             \
    return version;              \
  }
  CUDRV_NCCL_OPTIONAL_FUNCTIONS(CUDRV_SINCE)
#undef CUDRV_SINCE
  return "newer than this one";
}
// NOLINTNEXTLINE(cppcoreguidelines-macro-usage): names the function once
#define CUDRV_NCCL_REQUIRE(a, name, where) require((a).name, #name, since(#name), where)

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

// How many cudrv::nccl::group scopes are open on this thread (NCCL's group state is per thread too),
// and the communicators called inside them: when the outermost group's end answers ncclInProgress
// (a non-blocking communicator), cudrv waits for each of them.
thread_local int open_groups = 0;
// group_targets may be gone when a thread-local or static owner is destroyed after it (thread exit):
// its holder raises a trivially destructible flag first, and note_gone then leaves it alone.
thread_local bool group_targets_gone = false;
struct group_targets_holder {
  std::vector<detail::nccl_target> targets;
  group_targets_holder() = default;
  group_targets_holder(const group_targets_holder&) = delete;
  group_targets_holder& operator=(const group_targets_holder&) = delete;
  ~group_targets_holder() { group_targets_gone = true; }
};
thread_local group_targets_holder group_targets_storage;
thread_local std::vector<detail::nccl_target>& group_targets = group_targets_storage.targets;

// The communicators cudrv's owners hold, each with a number of its own (a freed handle's address can
// come back): what depends on a communicator (a window, a premultiplied sum, a registration) records
// the number when it is made, and skips its NCCL call at destruction when that communicator is gone
// (NCCL freed it with the communicator). 0: a communicator cudrv does not own (a view of a raw handle).
struct comm_registry {
  std::mutex mutex;
  std::vector<std::pair<const ncclComm*, std::uint64_t>> live;
  std::uint64_t next = 1;
};
comm_registry& registry() {
  static auto* r = new comm_registry;  // never destroyed: owners may outlive static destruction
  return *r;
}
// keep: an adopted handle (from_native_handle) keeps the number it has, so what depends on it from
// before a release() and adopt round trip still calls NCCL; a newly made communicator gets a new one.
void note_owned(const ncclComm* c, bool keep = false) noexcept {
  comm_registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  try {
    if (keep && std::any_of(r.live.begin(), r.live.end(), [c](const auto& e) { return e.first == c; })) {
      return;
    }
    std::erase_if(r.live, [c](const auto& e) { return e.first == c; });
    r.live.emplace_back(c, r.next++);
  } catch (...) {  // out of memory: its dependents treat it as a communicator cudrv does not own
  }
}
void note_gone(const ncclComm* c) noexcept {
  {
    comm_registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    std::erase_if(r.live, [c](const auto& e) { return e.first == c; });
  }
  // A group of this thread must not poll it at its end.
  if (!group_targets_gone) {
    std::erase_if(group_targets, [c](const detail::nccl_target& t) { return t.comm == c; });
  }
}

// Where NCCL writes a communicator it makes in the background (split, shrink; non-blocking creation
// with NCCL before 2.23): on the heap, and kept for the life of the process when cudrv stops waiting
// before NCCL is done with it (see lasting_slot below).
class comm_slot {
 public:
  comm_slot() : slot_(std::make_unique<ncclComm_t>(nullptr)) {}
  comm_slot(const comm_slot&) = delete;
  comm_slot& operator=(const comm_slot&) = delete;
  ~comm_slot();
  ncclComm_t* get() noexcept { return slot_.get(); }
  ncclComm_t value() const noexcept { return *slot_; }
  // NCCL is done with the slot: it may be freed.
  void settled() noexcept { settled_ = true; }

 private:
  std::unique_ptr<ncclComm_t> slot_;
  bool settled_ = false;
};

// Keeps heap slots NCCL may still write, reachable for the life of the process (no leak report).
template <class T>
void keep_slot(std::unique_ptr<T> slot) noexcept {
  static std::mutex mutex;
  static auto* kept = new (std::nothrow) std::vector<std::unique_ptr<T>>;  // never destroyed
  std::lock_guard<std::mutex> lock(mutex);
  try {
    if (kept == nullptr) {
      throw std::bad_alloc();
    }
    kept->push_back(std::move(slot));
  } catch (...) {
    (void)slot.release();  // out of memory: leak it rather than free what NCCL may write
  }
}

comm_slot::~comm_slot() {
  if (!settled_) {
    keep_slot(std::move(slot_));
  }
}

using steady = std::chrono::steady_clock;

// now + ms, saturating at the clock's end.
steady::time_point deadline_after(std::int64_t ms) {
  const steady::time_point now = steady::now();
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(steady::time_point::max() - now).count();
  return ms >= room ? steady::time_point::max() : now + std::chrono::milliseconds(ms);
}

// Waits until comm is no longer ncclInProgress, at most timeout_ms (timeout_error after), and returns
// the state it then reports (ncclSuccess or the error).
ncclResult_t wait_settled(ncclComm_t comm, std::int64_t timeout_ms, const char* call, const std::string& what) {
  const nccl_api& a = api();
  const steady::time_point deadline = deadline_after(timeout_ms);
  ncclResult_t async = ncclInProgress;
  for (int polls = 0;; ++polls) {
    ncheck(a.ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError", comm, [&] { return what; });
    if (async != ncclInProgress) {
      return async;
    }
    if (steady::now() >= deadline) {
      throw nccl::timeout_error(call, what, std::chrono::milliseconds(timeout_ms));
    }
    if (polls < 256) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

// Waits until comm is no longer ncclInProgress, at most timeout_ms; throws the error it then reports.
void wait_quiet(ncclComm_t comm, std::int64_t timeout_ms, const char* call, const std::string& what) {
  if (const ncclResult_t async = wait_settled(comm, timeout_ms, call, what); async != ncclSuccess) {
    throw make_error(async, call, comm, what.empty() ? "reported by ncclCommGetAsyncError" : what);
  }
}

// After a call on t: ncclInProgress is a non-blocking communicator still at work. Inside a group the
// outermost end waits for it; otherwise cudrv waits here, within t's bound.
template <class ContextFn>
void settle(const detail::nccl_target& t, ncclResult_t r, const char* call, ContextFn&& context) {
  ncheck(r, call, t.comm, context);
  if (open_groups > 0) [[unlikely]] {
    if (std::find_if(group_targets.begin(), group_targets.end(),
                     [&](const detail::nccl_target& g) { return g.comm == t.comm; }) == group_targets.end()) {
      group_targets.push_back(t);
    }
  } else if (r == ncclInProgress) [[unlikely]] {
    wait_quiet(t.comm, t.timeout_ms, call, context());
  }
}

// A call that writes a handle into *slot (window and buffer registration). A non-blocking
// communicator answers ncclSuccess at once and writes the handle when NCCL's job ends, the communicator
// in progress until then: cudrv waits (bounded) for it to settle, then reads the slot; when the wait
// times out the slot is kept for the life of the process (NCCL may still write it).
template <class T, class Call, class ContextFn>
T written_when_settled(const detail::nccl_target& t, const char* name, Call&& call, ContextFn&& what) {
  auto slot = std::make_unique<T>(nullptr);
  struct keeper {  // kept for the process unless NCCL is known to be done with it
    std::unique_ptr<T>& slot;
    bool settled = false;
    ~keeper() {
      if (!settled) {
        keep_slot(std::move(slot));
      }
    }
  } guard{slot};
  if (const ncclResult_t r = call(slot.get()); r != ncclSuccess && r != ncclInProgress) {
    guard.settled = true;  // refused at once: no job
    throw make_error(r, name, t.comm, what());
  }
  // An error the communicator reports may be an earlier one while the job still runs: the slot is
  // then kept (the guard), and a handle already written is returned rather than lost.
  const ncclResult_t done = wait_settled(t.comm, t.timeout_ms, name, what());
  guard.settled = done == ncclSuccess;
  if (*slot != nullptr) {
    return *slot;
  }
  throw make_error(done != ncclSuccess ? done : ncclInternalError, name, t.comm,
                   what() + (done == ncclSuccess ? "; NCCL wrote no handle" : ""));
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
  if (c.shrink_share) {
    cfg.shrinkShare = *c.shrink_share ? 1 : 0;
  }
  if (c.cta_policy) {
    cfg.CTAPolicy = *c.cta_policy;
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
  if (c.timeout < std::chrono::milliseconds(1)) {
    throw invalid_argument_error(where,
                                 "timeout " + std::to_string(c.timeout.count()) +
                                     " ms is less than 1 ms: cudrv must be able to wait for a non-blocking call");
  }
  if (c.cta_policy && (*c.cta_policy < 0 || *c.cta_policy > 2)) {
    throw invalid_argument_error(where, "cta_policy " + std::to_string(*c.cta_policy) +
                                            " is not one of cudrv::nccl::cta_policy's values (0, 1, 2)");
  }
  if (c.min_ctas && c.max_ctas && *c.min_ctas > *c.max_ctas) {
    throw invalid_argument_error(where, "min_ctas " + std::to_string(*c.min_ctas) + " exceeds max_ctas " +
                                            std::to_string(*c.max_ctas));
  }
}

// Rank and size of a communicator, asked of NCCL (waiting, within timeout_ms, for a non-blocking one).
std::pair<int, int> query_rank_size(ncclComm_t comm, const char* where,
                                    std::int64_t timeout_ms = detail::nccl_default_timeout_ms) {
  const nccl_api& a = api();
  wait_quiet(comm, timeout_ms, "ncclCommGetAsyncError", where);
  int rank = 0;
  int size = 0;
  ncheck(a.ncclCommUserRank(comm, &rank), "ncclCommUserRank", comm, [] { return std::string(); });
  ncheck(a.ncclCommCount(comm, &size), "ncclCommCount", comm, [] { return std::string(); });
  return {rank, size};
}

std::string hex(std::uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof text, "%llx", static_cast<unsigned long long>(v));
  return text;
}

std::string counts(std::size_t send, std::size_t recv) {
  return "source of " + std::to_string(send) + " elements, destination of " + std::to_string(recv);
}

}  // namespace

nccl::timeout_error::timeout_error(std::string api, std::string context, std::chrono::milliseconds timeout)
    : nccl_error(ncclInProgress, "ncclInProgress", "operation is still in progress", {}, std::move(api),
                 (context.empty() ? std::string() : std::move(context) + "; ") + "still in progress after " +
                     std::to_string(timeout.count()) + " ms (cudrv::nccl::communicator_config::timeout)"),
      timeout_(timeout) {}

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

std::uint64_t nccl_generation(const ncclComm* comm) noexcept {
  comm_registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& [c, number] : r.live) {
    if (c == comm) {
      return number;
    }
  }
  return 0;
}

namespace {
// Whether the communicator a dependent was made on (its number, 0 for one cudrv does not own) is gone.
bool outlived(const ncclComm* comm, std::uint64_t generation) noexcept {
  return generation != 0 && nccl_generation(comm) != generation;
}
}  // namespace

void nccl_check_disjoint(const char* api, CUdeviceptr a, std::size_t a_bytes, CUdeviceptr b, std::size_t b_bytes) {
  if (a < b + b_bytes && b < a + a_bytes) {
    throw invalid_argument_error(api,
                                 "the source and the destination overlap: this collective works out of place only");
  }
}

namespace {
// Blocks [offset, offset + count) of one side of an uneven all-to-all: each inside the buffer.
void check_blocks(const char* api, const char* side, int nranks, std::size_t size, std::span<const std::size_t> counts,
                  std::span<const std::size_t> offsets) {
  const auto n = static_cast<std::size_t>(nranks);
  if (counts.size() != n || offsets.size() != n) {
    throw invalid_argument_error(api, std::string("the ") + side +
                                          " counts and offsets must have one entry per rank (" + std::to_string(n) +
                                          "), not " + std::to_string(counts.size()) + " and " +
                                          std::to_string(offsets.size()));
  }
  for (std::size_t r = 0; r < n; ++r) {
    if (counts[r] != 0 && (counts[r] > size || offsets[r] > size - counts[r])) {
      throw invalid_argument_error(api, std::string("the ") + side + " block of rank " + std::to_string(r) + " (" +
                                            std::to_string(counts[r]) + " elements at offset " +
                                            std::to_string(offsets[r]) + ") lies outside the " + side + " buffer of " +
                                            std::to_string(size) + " elements");
    }
  }
}
}  // namespace

void nccl_check_all_to_all_v(const char* api, int nranks, std::size_t send_size,
                             std::span<const std::size_t> send_counts, std::span<const std::size_t> send_offsets,
                             std::size_t recv_size, std::span<const std::size_t> recv_counts,
                             std::span<const std::size_t> recv_offsets) {
  check_blocks(api, "send", nranks, send_size, send_counts, send_offsets);
  check_blocks(api, "receive", nranks, recv_size, recv_counts, recv_offsets);
  // Two receive blocks must not overlap: their data would race.
  std::vector<std::pair<std::size_t, std::size_t>> blocks;
  for (std::size_t r = 0; r < recv_counts.size(); ++r) {
    if (recv_counts[r] != 0) {
      blocks.emplace_back(recv_offsets[r], recv_offsets[r] + recv_counts[r]);
    }
  }
  std::sort(blocks.begin(), blocks.end());
  for (std::size_t i = 1; i < blocks.size(); ++i) {
    if (blocks[i].first < blocks[i - 1].second) {
      throw invalid_argument_error(api, "two receive blocks overlap (elements " + std::to_string(blocks[i].first) +
                                            " to " + std::to_string(blocks[i - 1].second - 1) + ")");
    }
  }
}

int nccl_check_operator(const char* api, const ncclComm* op_comm, int op, const ncclComm* comm) {
  if (op_comm == nullptr) {
    throw invalid_argument_error(api, "the reduction operator is empty (a moved-from or reset premul_sum)");
  }
  if (op_comm != comm) {
    throw invalid_argument_error(api, "the premul_sum was made for another communicator: NCCL's operators "
                                      "are valid only on the communicator that made them");
  }
  return op;
}

// --- the calls --------------------------------------------------------------------------------------

namespace {
std::string describe(const char* what, std::size_t count, nccl::data_type type) {
  return std::string(what) + std::to_string(count) + " elements of ncclDataType_t " +
         std::to_string(static_cast<int>(type));
}
}  // namespace

void nccl_all_reduce(nccl_target t, CUdeviceptr send, CUdeviceptr recv, std::size_t count, nccl::data_type type, int op,
                     CUstream stream) {
  const nccl_api& a = api();
  keep_current_context keep(t.home);
  settle(t,
         a.ncclAllReduce(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv), count,
                         static_cast<ncclDataType_t>(type), static_cast<ncclRedOp_t>(op), t.comm, stream),
         "ncclAllReduce", [&] { return describe("", count, type); });
}

void nccl_broadcast(nccl_target t, CUdeviceptr send, CUdeviceptr recv, std::size_t count, nccl::data_type type,
                    int root, CUstream stream) {
  const nccl_api& a = api();
  keep_current_context keep(t.home);
  settle(t,
         a.ncclBroadcast(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv), count,
                         static_cast<ncclDataType_t>(type), root, t.comm, stream),
         "ncclBroadcast", [&] { return describe("", count, type) + ", root " + std::to_string(root); });
}

void nccl_reduce(nccl_target t, CUdeviceptr send, CUdeviceptr recv, std::size_t count, nccl::data_type type, int op,
                 int root, CUstream stream) {
  const nccl_api& a = api();
  keep_current_context keep(t.home);
  settle(t,
         a.ncclReduce(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv), count,
                      static_cast<ncclDataType_t>(type), static_cast<ncclRedOp_t>(op), root, t.comm, stream),
         "ncclReduce", [&] { return describe("", count, type) + ", root " + std::to_string(root); });
}

void nccl_all_gather(nccl_target t, CUdeviceptr send, CUdeviceptr recv, std::size_t send_count, nccl::data_type type,
                     CUstream stream) {
  const nccl_api& a = api();
  keep_current_context keep(t.home);
  settle(t,
         a.ncclAllGather(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv), send_count,
                         static_cast<ncclDataType_t>(type), t.comm, stream),
         "ncclAllGather", [&] { return describe("send count ", send_count, type); });
}

void nccl_reduce_scatter(nccl_target t, CUdeviceptr send, CUdeviceptr recv, std::size_t recv_count,
                         nccl::data_type type, int op, CUstream stream) {
  const nccl_api& a = api();
  keep_current_context keep(t.home);
  settle(t,
         a.ncclReduceScatter(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv), recv_count,
                             static_cast<ncclDataType_t>(type), static_cast<ncclRedOp_t>(op), t.comm, stream),
         "ncclReduceScatter", [&] { return describe("receive count ", recv_count, type); });
}

void nccl_send(nccl_target t, CUdeviceptr send, std::size_t count, nccl::data_type type, int peer, CUstream stream) {
  const nccl_api& a = api();
  keep_current_context keep(t.home);
  settle(t,
         a.ncclSend(reinterpret_cast<const void*>(send), count, static_cast<ncclDataType_t>(type), peer, t.comm,
                    stream),
         "ncclSend", [&] { return describe("", count, type) + " to rank " + std::to_string(peer); });
}

void nccl_recv(nccl_target t, CUdeviceptr recv, std::size_t count, nccl::data_type type, int peer, CUstream stream) {
  const nccl_api& a = api();
  keep_current_context keep(t.home);
  settle(t, a.ncclRecv(reinterpret_cast<void*>(recv), count, static_cast<ncclDataType_t>(type), peer, t.comm, stream),
         "ncclRecv", [&] { return describe("", count, type) + " from rank " + std::to_string(peer); });
}

void nccl_all_to_all(nccl_target t, CUdeviceptr send, CUdeviceptr recv, std::size_t count, nccl::data_type type,
                     CUstream stream) {
  const nccl_api& a = api();
  auto* fn = CUDRV_NCCL_REQUIRE(a, ncclAlltoAll, "cudrv::nccl::communicator::all_to_all");
  keep_current_context keep(t.home);
  settle(t,
         fn(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv), count,
            static_cast<ncclDataType_t>(type), t.comm, stream),
         "ncclAlltoAll", [&] { return describe("per-rank count ", count, type); });
}

void nccl_gather(nccl_target t, CUdeviceptr send, CUdeviceptr recv, std::size_t count, nccl::data_type type, int root,
                 CUstream stream) {
  const nccl_api& a = api();
  auto* fn = CUDRV_NCCL_REQUIRE(a, ncclGather, "cudrv::nccl::communicator::gather");
  keep_current_context keep(t.home);
  settle(t,
         fn(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv), count,
            static_cast<ncclDataType_t>(type), root, t.comm, stream),
         "ncclGather", [&] { return describe("send count ", count, type) + ", root " + std::to_string(root); });
}

void nccl_scatter(nccl_target t, CUdeviceptr send, CUdeviceptr recv, std::size_t count, nccl::data_type type, int root,
                  CUstream stream) {
  const nccl_api& a = api();
  auto* fn = CUDRV_NCCL_REQUIRE(a, ncclScatter, "cudrv::nccl::communicator::scatter");
  keep_current_context keep(t.home);
  settle(t,
         fn(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv), count,
            static_cast<ncclDataType_t>(type), root, t.comm, stream),
         "ncclScatter", [&] { return describe("receive count ", count, type) + ", root " + std::to_string(root); });
}

void nccl_all_to_all_v(nccl_target t, CUdeviceptr send, std::span<const std::size_t> send_counts,
                       std::span<const std::size_t> send_offsets, CUdeviceptr recv,
                       std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_offsets,
                       std::size_t element_bytes, nccl::data_type type, CUstream stream) {
  const auto nonzero = [](std::size_t c) { return c != 0; };
  if (std::none_of(send_counts.begin(), send_counts.end(), nonzero) &&
      std::none_of(recv_counts.begin(), recv_counts.end(), nonzero)) {
    return;  // nothing to exchange on this rank
  }
  nccl::group g;  // joins a group the caller has open; NCCL matches each send with its receive
  for (std::size_t peer = 0; peer < send_counts.size(); ++peer) {
    if (send_counts[peer] != 0) {
      nccl_send(t, send + send_offsets[peer] * element_bytes, send_counts[peer], type, static_cast<int>(peer), stream);
    }
  }
  for (std::size_t peer = 0; peer < recv_counts.size(); ++peer) {
    if (recv_counts[peer] != 0) {
      nccl_recv(t, recv + recv_offsets[peer] * element_bytes, recv_counts[peer], type, static_cast<int>(peer), stream);
    }
  }
  g.end();
}

int nccl_premul_sum_create(nccl_target t, const void* scalar, bool on_device, nccl::data_type type) {
  const nccl_api& a = api();
  auto* fn = CUDRV_NCCL_REQUIRE(a, ncclRedOpCreatePreMulSum, "cudrv::nccl::premul_sum");
  (void)CUDRV_NCCL_REQUIRE(a, ncclRedOpDestroy, "cudrv::nccl::premul_sum");
  keep_current_context keep(t.home);
  ncclRedOp_t op{};
  settle(t,
         fn(&op, const_cast<void*>(scalar), static_cast<ncclDataType_t>(type),  // NCCL takes void*, reads only
            on_device ? ncclScalarDevice : ncclScalarHostImmediate, t.comm),
         "ncclRedOpCreatePreMulSum", [&] {
           return std::string(on_device ? "device" : "host") + " scalar of ncclDataType_t " +
                  std::to_string(static_cast<int>(type));
         });
  return static_cast<int>(op);
}

void nccl_premul_sum_destroy(ncclComm* comm, std::uint64_t generation, int op) noexcept {
  if (outlived(comm, generation)) {
    return;  // NCCL freed the operator with its communicator
  }
  try {
    const nccl_api& a = api();
    keep_current_context keep(nullptr, std::nothrow);
    if (ncclResult_t r = a.ncclRedOpDestroy(static_cast<ncclRedOp_t>(op), comm);
        r != ncclSuccess && r != ncclInProgress) {
      report(r, "ncclRedOpDestroy", comm);
    }
  } catch (const error& e) {
    report_caught(e, "ncclRedOpDestroy failed");
  } catch (...) {
    std::fprintf(stderr, "cudrv: error during destruction: ncclRedOpDestroy failed\n");
  }
}

CUdeviceptr nccl_mem_alloc(int device_ordinal, std::size_t bytes) {
  const nccl_api& a = api();
  auto* fn = CUDRV_NCCL_REQUIRE(a, ncclMemAlloc, "cudrv::nccl::buffer");
  (void)CUDRV_NCCL_REQUIRE(a, ncclMemFree, "cudrv::nccl::buffer");
  const CUcontext home = cudrv::device(device_ordinal).primary_context().native_handle();
  keep_current_context keep;
  detail::check(detail::drv::cuCtxSetCurrent(home), "cuCtxSetCurrent");  // NCCL allocates on the current device
  void* p = nullptr;
  ncheck(fn(&p, bytes), "ncclMemAlloc", nullptr,
         [&] { return std::to_string(bytes) + " bytes on device " + std::to_string(device_ordinal); });
  return reinterpret_cast<CUdeviceptr>(p);
}

void nccl_mem_free(int device_ordinal, CUdeviceptr address) noexcept {
  try {
    const nccl_api& a = api();
    keep_current_context keep(nullptr, std::nothrow);
    const CUcontext home = cudrv::device(device_ordinal).primary_context().native_handle();
    detail::destroy_noexcept("cuCtxSetCurrent", [home] { return detail::drv::cuCtxSetCurrent(home); });
    if (ncclResult_t r = a.ncclMemFree(reinterpret_cast<void*>(address)); r != ncclSuccess) {
      report(r, "ncclMemFree", nullptr);
    }
  } catch (const error& e) {
    report_caught(e, "ncclMemFree failed");
  } catch (...) {
    std::fprintf(stderr, "cudrv: error during destruction: ncclMemFree failed\n");
  }
}

ncclWindow_vidmem* nccl_window_register(nccl_target t, CUdeviceptr address, std::size_t bytes,
                                        nccl::window_flags flags) {
  constexpr const char* where = "cudrv::nccl::window";
  const nccl_api& a = api();
  auto* fn = CUDRV_NCCL_REQUIRE(a, ncclCommWindowRegister, where);
  (void)CUDRV_NCCL_REQUIRE(a, ncclCommWindowDeregister, where);
  if (flags == nccl::window_flags::collective_symmetric && address % nccl::window_alignment != 0) {
    throw invalid_argument_error(where,
                                 "a symmetric window's address must be aligned to " +
                                     std::to_string(nccl::window_alignment) +
                                     " bytes (NCCL_WIN_REQUIRED_ALIGNMENT); 0x" + hex(address) +
                                     " is not: register a cudrv::nccl::buffer, or a subspan at an aligned offset");
  }
  if (static_cast<int>(flags) < 0 || static_cast<int>(flags) > 1) {
    throw invalid_argument_error(where, "unknown window flags " + std::to_string(static_cast<int>(flags)));
  }
  if (open_groups > 0) {  // NCCL would queue the registration and write the handle at the group's end
    throw invalid_argument_error(where, "cannot register a window inside a cudrv::nccl::group: NCCL writes the "
                                        "window at the group's end; register outside the group (one thread per "
                                        "communicator where several register together)");
  }
  keep_current_context keep(t.home);
  return written_when_settled<ncclWindow_t>(
      t, "ncclCommWindowRegister",
      [&](ncclWindow_t* slot) {
        return fn(t.comm, reinterpret_cast<void*>(address), bytes, slot, static_cast<int>(flags));
      },
      [&] { return std::to_string(bytes) + " bytes"; });
}

void nccl_window_deregister(nccl_target t, std::uint64_t generation, ncclWindow_vidmem* window) noexcept {
  if (outlived(t.comm, generation)) {
    return;  // NCCL deregistered it with its communicator
  }
  try {
    const nccl_api& a = api();
    keep_current_context keep(nullptr, std::nothrow);
    ncclResult_t r = a.ncclCommWindowDeregister(t.comm, window);
    if (r == ncclSuccess || r == ncclInProgress) {  // a non-blocking communicator works in the background
      r = wait_settled(t.comm, t.timeout_ms, "ncclCommWindowDeregister", {});
    }
    if (r != ncclSuccess) {
      report(r, "ncclCommWindowDeregister", t.comm);
    }
  } catch (const error& e) {
    report_caught(e, "ncclCommWindowDeregister failed");
  } catch (...) {
    std::fprintf(stderr, "cudrv: error during destruction: ncclCommWindowDeregister failed\n");
  }
}

void* nccl_register(ncclComm* comm, std::int64_t timeout_ms, CUdeviceptr address, std::size_t bytes) {
  const nccl_api& a = api();
  (void)CUDRV_NCCL_REQUIRE(a, ncclCommRegister, "cudrv::nccl::registration");
  (void)CUDRV_NCCL_REQUIRE(a, ncclCommDeregister, "cudrv::nccl::registration");
  if (open_groups > 0) {  // NCCL would write the handle at the group's end, as for a window
    throw invalid_argument_error("cudrv::nccl::registration",
                                 "cannot register memory inside a cudrv::nccl::group: register outside the group");
  }
  keep_current_context keep;
  return written_when_settled<void*>(
      {comm, nullptr, timeout_ms}, "ncclCommRegister",
      [&](void** slot) { return a.ncclCommRegister(comm, reinterpret_cast<void*>(address), bytes, slot); },
      [&] { return std::to_string(bytes) + " bytes"; });
}

void nccl_deregister(ncclComm* comm, std::uint64_t generation, void* handle) noexcept {
  if (outlived(comm, generation)) {
    return;  // NCCL deregistered it with its communicator
  }
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

bool supports(feature f) noexcept {
  try {
    const nccl_state& st = state();
    if (!st.loaded) {
      return false;
    }
    const nccl_api& a = st.api;
    switch (f) {
      case feature::premul_sum: return a.ncclRedOpCreatePreMulSum != nullptr && a.ncclRedOpDestroy != nullptr;
      case feature::registration: return a.ncclCommRegister != nullptr && a.ncclCommDeregister != nullptr;
      case feature::memory: return a.ncclMemAlloc != nullptr && a.ncclMemFree != nullptr;
      case feature::group_simulation: return a.ncclGroupSimulateEnd != nullptr;
      case feature::scalable_init: return a.ncclCommInitRankScalable != nullptr;
      case feature::windows: return a.ncclCommWindowRegister != nullptr && a.ncclCommWindowDeregister != nullptr;
      case feature::shrink: return a.ncclCommShrink != nullptr;
      case feature::all_to_all: return a.ncclAlltoAll != nullptr && a.ncclGather != nullptr && a.ncclScatter != nullptr;
      case feature::revoke: return a.ncclCommRevoke != nullptr;
    }
    return false;
  } catch (...) {
    return false;
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

void communicator_base::wait_ready(std::chrono::milliseconds timeout) const {
  constexpr const char* where = "cudrv::nccl::communicator::wait_ready";
  ncclComm_t c = checked(where);
  if (timeout < std::chrono::milliseconds(1)) {
    throw invalid_argument_error(where, "timeout " + std::to_string(timeout.count()) + " ms is less than 1 ms");
  }
  wait_quiet(c, timeout.count(), "ncclCommGetAsyncError", "the communicator reports an asynchronous error");
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
  const std::int64_t timeout = config ? config->timeout.count() : timeout_ms_;
  keep_current_context keep;
  comm_slot slot;  // with a non-blocking parent NCCL writes it when its job ends
  const auto what = [&] { return "color " + std::to_string(color) + ", key " + std::to_string(key); };
  const ncclResult_t r = a.ncclCommSplit(c, color, key, slot.get(), config ? &cfg : nullptr);
  if (r != ncclSuccess && r != ncclInProgress) {
    slot.settled();  // refused at once: no job
    throw make_error(r, "ncclCommSplit", c, what());
  }
  // The parent is in progress until the job ends (NCCL answers ncclSuccess to the call itself). An
  // error it reports with no child written may be an earlier one while the job runs: the slot is kept.
  const ncclResult_t done = wait_settled(c, timeout_ms_, "ncclCommSplit", what());
  ncclComm_t out = slot.value();
  if (done != ncclSuccess && out == nullptr) {
    throw make_error(done, "ncclCommSplit", c, what());
  }
  slot.settled();
  if (out == nullptr) {
    return communicator();  // no_color
  }
  note_owned(out);
  communicator owner(out, 0, 0, home_, timeout);  // the parent's device
  auto [rank, size] = query_rank_size(out, where, timeout);
  owner.rank_ = rank;
  owner.size_ = size;
  return owner;
}

communicator communicator_base::shrink(std::span<const int> exclude_ranks, shrink_mode mode,
                                       const std::optional<communicator_config>& config) const {
  constexpr const char* where = "cudrv::nccl::communicator::shrink";
  ncclComm_t c = checked(where);
  const nccl_api& a = api();
  auto* fn = CUDRV_NCCL_REQUIRE(a, ncclCommShrink, where);
  const int n = known_size();
  const int me = known_rank();
  std::vector<int> excluded(exclude_ranks.begin(), exclude_ranks.end());
  std::sort(excluded.begin(), excluded.end());
  for (std::size_t i = 0; i < excluded.size(); ++i) {
    detail::nccl_check_rank(where, "excluded rank", excluded[i], n);
    if (i > 0 && excluded[i] == excluded[i - 1]) {
      throw invalid_argument_error(where, "rank " + std::to_string(excluded[i]) + " is excluded twice");
    }
  }
  if (std::binary_search(excluded.begin(), excluded.end(), me)) {
    throw invalid_argument_error(where, "this rank (" + std::to_string(me) +
                                            ") is in the exclusion list: excluded ranks must not call shrink");
  }
  if (mode != shrink_mode::normal && mode != shrink_mode::abort) {
    throw invalid_argument_error(where, "unknown shrink mode " + std::to_string(static_cast<int>(mode)));
  }
  if (config) {
    check_config(*config, where);
  }
  if (open_groups > 0) {
    throw invalid_argument_error(where, "cannot shrink inside a cudrv::nccl::group: shrink outside the group");
  }
  ncclConfig_t cfg{};
  if (config) {
    cfg = make_config(*config);
  }
  const std::int64_t timeout = config ? config->timeout.count() : timeout_ms_;
  keep_current_context keep;
  comm_slot slot;  // with a non-blocking parent NCCL writes it when its job ends
  const auto what = [&] {
    return std::to_string(excluded.size()) + " of " + std::to_string(n) + " ranks excluded, flags " +
           std::to_string(static_cast<int>(mode));
  };
  const ncclResult_t r = fn(c, excluded.empty() ? nullptr : excluded.data(), static_cast<int>(excluded.size()),
                            slot.get(), config ? &cfg : nullptr, static_cast<int>(mode));
  if (r != ncclSuccess && r != ncclInProgress) {
    slot.settled();  // refused at once: no job
    throw make_error(r, "ncclCommShrink", c, what());
  }
  // As for split: the new communicator exists once the parent's job ends. The parent may report the
  // failure that led here (a lost rank): only the new communicator counts. When the parent reports an
  // error and no communicator came, the job may still run: the slot is kept (comm_slot).
  const ncclResult_t done = wait_settled(c, timeout_ms_, "ncclCommShrink", what());
  ncclComm_t out = slot.value();
  if (out == nullptr) {
    if (done == ncclSuccess) {
      slot.settled();
    }
    throw make_error(done != ncclSuccess ? done : ncclInternalError, "ncclCommShrink", c,
                     what() + "; NCCL made no communicator");
  }
  slot.settled();
  note_owned(out);
  communicator owner(out, 0, 0, home_, timeout);
  auto [rank, size] = query_rank_size(out, where, timeout);
  owner.rank_ = rank;
  owner.size_ = size;
  return owner;
}

namespace {
struct raw_parts {
  ncclComm_t comm;
  CUcontext home;
};

// The ncclCommInitRank* calls' shared part: dev's primary context current during the call (NCCL takes
// the current device), a failed creation aborted, the owner made. `init` makes the call.
template <class Init>
raw_parts init_on(const cudrv::device& dev, int nranks, int rank, const char* call, bool nonblocking, Init&& init) {
  const nccl_api& a = api();
  const CUcontext target = dev.primary_context().native_handle();
  keep_current_context keep;
  detail::check(detail::drv::cuCtxSetCurrent(target), "cuCtxSetCurrent");
  // NCCL before 2.23 writes a non-blocking communicator again when its job ends: that slot is kept.
  comm_slot slot;
  const ncclResult_t r = init(slot.get());
  const ncclComm_t out = slot.value();
  int v = 0;
  if (!nonblocking || (r != ncclSuccess && r != ncclInProgress) ||
      (a.ncclGetVersion(&v) == ncclSuccess && v >= 22300)) {
    slot.settled();
  }
  if (r != ncclSuccess && r != ncclInProgress) {
    const char* last = a.ncclGetLastError(out);
    std::string why = last != nullptr ? last : "";  // read before the abort frees the communicator
    if (out != nullptr) {
      (void)a.ncclCommAbort(out);
    }
    throw nccl_error(static_cast<int>(r),
                     result_name(static_cast<int>(r)) != nullptr ? result_name(static_cast<int>(r)) : "ncclResult",
                     a.ncclGetErrorString(r) != nullptr ? a.ncclGetErrorString(r) : "", std::move(why), call,
                     "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " on device " +
                         std::to_string(dev.ordinal()));
  }
  note_owned(out);
  return {out, target};
}

void check_ranks(const char* where, int nranks, int rank) {
  if (nranks < 1) {
    throw invalid_argument_error(where, "nranks " + std::to_string(nranks) + " is less than 1");
  }
  detail::nccl_check_rank(where, "rank", rank, nranks);
}
}  // namespace

communicator communicator::init_rank(const unique_id& id, int nranks, int rank, const cudrv::device& dev,
                                     const communicator_config& config) {
  constexpr const char* where = "cudrv::nccl::communicator::init_rank";
  check_ranks(where, nranks, rank);
  check_config(config, where);
  const nccl_api& a = api();
  ncclUniqueId raw{};
  std::memcpy(raw.internal, id.bytes.data(), id.bytes.size());
  ncclConfig_t cfg = make_config(config);
  const raw_parts p = init_on(dev, nranks, rank, "ncclCommInitRankConfig", config.blocking == false,
                              [&](ncclComm_t* out) { return a.ncclCommInitRankConfig(out, nranks, raw, rank, &cfg); });
  return communicator(p.comm, rank, nranks, p.home, config.timeout.count());
}

communicator communicator::init_rank_scalable(std::span<const unique_id> ids, int nranks, int rank,
                                              const cudrv::device& dev, const communicator_config& config) {
  constexpr const char* where = "cudrv::nccl::communicator::init_rank_scalable";
  check_ranks(where, nranks, rank);
  if (ids.empty() || ids.size() > static_cast<std::size_t>(nranks)) {
    throw invalid_argument_error(where, std::to_string(ids.size()) + " unique ids given: give from 1 to nranks (" +
                                            std::to_string(nranks) + ")");
  }
  check_config(config, where);
  const nccl_api& a = api();
  auto* fn = CUDRV_NCCL_REQUIRE(a, ncclCommInitRankScalable, where);
  std::vector<ncclUniqueId> raw(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::memcpy(raw[i].internal, ids[i].bytes.data(), ids[i].bytes.size());
  }
  ncclConfig_t cfg = make_config(config);
  const raw_parts p =
      init_on(dev, nranks, rank, "ncclCommInitRankScalable", config.blocking == false,
              [&](ncclComm_t* out) { return fn(out, nranks, rank, static_cast<int>(raw.size()), raw.data(), &cfg); });
  return communicator(p.comm, rank, nranks, p.home, config.timeout.count());
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
    note_owned(raw[static_cast<std::size_t>(i)]);
    out.push_back(communicator(raw[static_cast<std::size_t>(i)], i, n, homes[static_cast<std::size_t>(i)],
                               detail::nccl_default_timeout_ms));  // no throw: reserved
  }
  return out;
}

communicator communicator::from_native_handle(ncclComm* handle) {
  detail::nccl_check_handle(handle, "cudrv::nccl::communicator::from_native_handle");
  auto [rank, size] = query_rank_size(handle, "cudrv::nccl::communicator::from_native_handle");
  note_owned(handle, true);
  return communicator(handle, rank, size, nullptr, detail::nccl_default_timeout_ms);
}

namespace {
// Aborts c, reporting a failure; the fault path of reset().
void abort_reporting(const nccl_api& a, ncclComm_t c) noexcept {
  if (ncclResult_t r = a.ncclCommAbort(c); r != ncclSuccess) {
    report(r, "ncclCommAbort", nullptr);
  }
}

// ncclCommFinalize, and for a non-blocking communicator the wait until it is quiescent, within
// timeout_ms: ncclSuccess, the error NCCL reported, or ncclInProgress when the bound passed.
ncclResult_t finalize_within(const nccl_api& a, ncclComm_t c, std::int64_t timeout_ms) noexcept {
  ncclResult_t r = a.ncclCommFinalize(c);
  const steady::time_point deadline = deadline_after(timeout_ms);
  for (int polls = 0; r == ncclInProgress; ++polls) {
    if (steady::now() >= deadline) {
      return ncclInProgress;
    }
    if (polls < 256) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    ncclResult_t async = ncclSuccess;
    const ncclResult_t q = a.ncclCommGetAsyncError(c, &async);
    r = q != ncclSuccess ? q : async;
  }
  return r;
}
}  // namespace

void communicator::reset() noexcept {
  ncclComm_t c = std::exchange(handle_, nullptr);
  const bool revoked = std::exchange(revoked_, false);
  if (c == nullptr) {
    return;
  }
  note_gone(c);
  try {
    const nccl_api& a = api();
    keep_current_context keep(nullptr, std::nothrow);  // the communicator goes even when the driver fails here
    if (revoked) {                                     // NCCL: finalizing a revoked communicator is invalid
      abort_reporting(a, c);
      return;
    }
    // A communicator that reports an error cannot be finalized (that waits for peers): abort it.
    // A non-blocking communicator still at work (a creation not waited for) is waited for first: NCCL
    // refuses to finalize it before.
    ncclResult_t async = ncclSuccess;
    try {
      async = wait_settled(c, timeout_ms_, "ncclCommFinalize", "waiting before finalizing in reset()");
    } catch (const error& e) {
      report_caught(e, "the communicator stayed in progress");
      abort_reporting(a, c);
      return;
    } catch (...) {
      abort_reporting(a, c);
      return;
    }
    if (async != ncclSuccess) {
      report(async, "ncclCommGetAsyncError", c);
      abort_reporting(a, c);
      return;
    }
    if (const ncclResult_t r = finalize_within(a, c, timeout_ms_); r != ncclSuccess) {
      // Not quiescent: destroying could wait on peers, so abort as for an asynchronous error.
      if (r == ncclInProgress) {
        report_caught(nccl::timeout_error("ncclCommFinalize", "finalizing in cudrv::nccl::communicator::reset",
                                          std::chrono::milliseconds(timeout_ms_)),
                      "ncclCommFinalize timed out");
      } else {
        report(r, "ncclCommFinalize", c);
      }
      abort_reporting(a, c);
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

void communicator::revoke() {
  constexpr const char* where = "cudrv::nccl::communicator::revoke";
  detail::nccl_check_handle(handle_, where);
  const nccl_api& a = api();
  auto* fn = CUDRV_NCCL_REQUIRE(a, ncclCommRevoke, where);
  if (open_groups > 0) {
    throw invalid_argument_error(where, "cannot revoke inside a cudrv::nccl::group: revoke outside the group");
  }
  keep_current_context keep(nullptr, std::nothrow);  // the fault path: revoke even without a context to restore
  const ncclResult_t r = fn(handle_, NCCL_REVOKE_DEFAULT);
  ncheck(r, "ncclCommRevoke", handle_, [] { return std::string(); });
  revoked_ = true;
  // Quiescent once no longer in progress; an error reported by then is the failure that led here, not
  // the revocation's: revoke succeeded.
  const steady::time_point deadline = deadline_after(timeout_ms_);
  for (int polls = 0;; ++polls) {
    ncclResult_t async = ncclSuccess;
    ncheck(a.ncclCommGetAsyncError(handle_, &async), "ncclCommGetAsyncError", handle_,
           [] { return std::string("waiting for the revoked communicator to become quiescent"); });
    if (async != ncclInProgress) {
      return;
    }
    if (steady::now() >= deadline) {
      throw nccl::timeout_error("ncclCommRevoke", "waiting for the revoked communicator to become quiescent",
                                std::chrono::milliseconds(timeout_ms_));
    }
    if (polls < 256) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
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
  revoked_ = false;
  note_gone(c);
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
  revoked_ = false;
  note_gone(c);
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
  const ncclResult_t r = a.ncclGroupEnd();
  std::vector<detail::nccl_target> called;
  if (open_groups == 0) {
    called.swap(group_targets);
  }
  ncheck(r, "ncclGroupEnd", nullptr, [] { return std::string(); });
  if (r == ncclInProgress) {  // non-blocking communicators: wait for each one the group called
    for (const detail::nccl_target& t : called) {
      wait_quiet(t.comm, t.timeout_ms, "ncclGroupEnd", "a non-blocking communicator of the group");
    }
  }
}

bool group::simulation_supported() noexcept { return supports(feature::group_simulation); }

float group::simulate_end() {
  constexpr const char* where = "cudrv::nccl::group::simulate_end";
  if (!open_) {
    throw invalid_argument_error(where, "the group was already ended");
  }
  if (open_groups > 1) {
    throw invalid_argument_error(where, "the group is nested in another: simulate the outermost group");
  }
  const nccl_api& a = api();
  auto* fn = CUDRV_NCCL_REQUIRE(a, ncclGroupSimulateEnd, where);
  keep_current_context keep;
  open_ = false;
  --open_groups;
  group_targets.clear();
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  ncheck(fn(&info), "ncclGroupSimulateEnd", nullptr, [] { return std::string(); });
  return info.estimatedTime;
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
    const ncclResult_t r = a.ncclGroupEnd();
    std::vector<detail::nccl_target> called;
    if (open_groups == 0) {
      called.swap(group_targets);
    }
    if (r != ncclSuccess && r != ncclInProgress) {
      report(r, "ncclGroupEnd", nullptr);
    }
    for (const detail::nccl_target& t : called) {
      if (r != ncclInProgress) {
        break;
      }
      try {
        wait_quiet(t.comm, t.timeout_ms, "ncclGroupEnd", "a non-blocking communicator of the group");
      } catch (const error& e) {
        report_caught(e, "ncclGroupEnd: a communicator of the group failed");
      }
    }
  } catch (const error& e) {
    report_caught(e, "ncclGroupEnd failed");
  } catch (...) {
    std::fprintf(stderr, "cudrv: error during destruction: ncclGroupEnd failed\n");
  }
}

}  // namespace nccl
}  // namespace cudrv
