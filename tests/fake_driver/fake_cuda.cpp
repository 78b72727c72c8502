// A small stand-in for libcuda.so.1, loaded by cudrv through CUDRV_LIBCUDA in the [fake-driver]
// tests. It models the driver behaviour that a machine without a GPU cannot show and that cudrv must
// handle: handle values reused after destruction (streams, contexts, device addresses), devices of
// different architectures, a device 0 that cannot be used (exclusive-process mode held by someone
// else), pageable copies that return before they land, the callback thread on which CUDA calls are
// not permitted, and contexts whose destruction frees what was made in them. It implements only the
// entry points cudrv resolves in those tests, at the API versions cudrv asks for; any other symbol is
// "not found", which cudrv reports as not supported.
//
// Configuration (read at cuInit): FAKE_CUDA_DEVICES, the compute capabilities of the devices as
// major*10+minor, comma-separated (default "80,90"); FAKE_CUDA_UNAVAILABLE, the ordinals whose
// contexts cannot be created (default "0": device 0 is taken by another process in exclusive mode).
//
// The tests read what happened through the fake_cuda_* functions (counters and an event log).
#include <cuda.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// --- state ----------------------------------------------------------------------------------------

struct fake_context {
  int device = 0;
  unsigned long long id = 0;
  bool alive = false;
  bool primary = false;
  void* green = nullptr;  // the fake_green this context stands for (cuCtxFromGreenCtx), or null
};

struct fake_stream {
  fake_context* ctx = nullptr;
  unsigned long long id = 0;
  bool alive = false;
  int pending = 0;  // host functions queued and not finished
  unsigned flags = 0;
  int priority = 0;
};

struct fake_library {
  bool alive = true;
  int target = 0;  // .target sm_NN of the PTX
  std::vector<std::string> kernels;
  std::vector<std::vector<std::size_t>> params;  // sizes per kernel
  std::map<std::string, CUdeviceptr> globals;
};

struct fake_kernel {
  fake_library* lib = nullptr;
  std::size_t index = 0;
};

struct allocation {
  std::size_t size = 0;
  fake_context* ctx = nullptr;  // null: from a pool (stream-ordered)
  int device = 0;
  bool managed = false;  // cuMemAllocManaged (CU_POINTER_ATTRIBUTE_IS_MANAGED)
};

struct host_call {
  fake_stream* stream;
  CUhostFn fn;
  void* data;
};

// A graph node: a distinct handle that remembers its graph (see fake_cuGraphAddEmptyNode), the type
// cuGraphNodeGetType reports (fake_cuda_set_node_type changes it), and for a conditional node the
// handle it tests and the body graphs it owns.
struct fake_graph_node {
  int* graph;
  int type = CU_GRAPH_NODE_TYPE_EMPTY;  // an int: a test may set a type no enumerator has
  CUgraphConditionalHandle handle = 0;
  std::vector<int*> bodies;
  std::vector<CUgraph> body_handles;  // the driver-owned array phGraph_out points to
};

struct state_t {
  std::recursive_mutex mutex;
  std::condition_variable_any idle;
  std::vector<int> devices;  // compute capability per ordinal
  std::vector<bool> unavailable;
  std::vector<std::unique_ptr<fake_context>> contexts;
  std::vector<fake_context*> free_contexts;  // destroyed: their addresses are handed out again
  std::map<CUevent, fake_context*> events;   // live events and their context (which frees them)
  std::vector<fake_context*> primary;        // per device, null when inactive
  std::vector<int> primary_refs;
  std::vector<int> primary_retains_total;
  std::vector<std::unique_ptr<fake_stream>> streams;
  std::vector<fake_stream*> free_streams;
  std::vector<std::unique_ptr<fake_library>> libraries;
  std::vector<std::unique_ptr<fake_kernel>> kernels;
  std::map<CUdeviceptr, allocation> live;
  std::map<std::size_t, std::vector<void*>> freed;               // by size: addresses to hand out again (LIFO)
  std::vector<std::pair<CUdeviceptr, std::string>> pending_dma;  // pageable copies not landed yet
  std::deque<host_call> host_calls;
  std::thread worker;
  unsigned long long next_id = 1;
  std::vector<std::unique_ptr<fake_graph_node>> graph_nodes;     // never freed: handles stay unique
  std::set<CUgraph> graphs;                                      // live graphs (fake_cuda_live_objects)
  std::map<CUgraphConditionalHandle, int*> conditional_handles;  // handle -> the graph that made it
  std::map<int*, int*> body_parents;                             // a conditional body -> its node's graph
  std::map<std::string, long long> counters;
  std::string log;
  std::vector<CUmemoryPool> pools;
  std::vector<unsigned long long> pool_threshold;
  bool initialized = false;
  std::map<std::size_t, std::size_t> pool_trimmed_to;  // by pool index: the last cuMemPoolTrimTo
  // Sticky faults and injected allocation failures (fake_cuda_make_sticky, fake_cuda_fail_allocations).
  CUresult sticky = CUDA_SUCCESS;  // set: every entry point but the few below returns it
  CUresult allocation_failure = CUDA_SUCCESS;
  long long allocation_failures_left = 0;
};

state_t& st() {
  static auto* s = new state_t;
  return *s;
}

thread_local std::vector<CUcontext> ctx_stack;  // back(): the current context
thread_local bool on_callback_thread = false;

// Bookkeeping never fails a call (the tests make allocations fail on purpose): a name given as a literal
// is copied only here, where a failed allocation is caught.
void count(std::string_view name, long long by = 1) noexcept {
  try {
    st().counters[std::string(name)] += by;
  } catch (...) {
  }
}

void note(const std::string& line) noexcept {
  try {
    st().log += line + "\n";
  } catch (...) {
  }
}

std::string hex(const void* p) {
  std::ostringstream o;
  o << p;
  return o.str();
}

// --- failure injection (fake_cuda_inject_failure) ------------------------------------------------------
// Once armed, every entry-point call that passes FAKE_ENTER or FAKE_ENTER_ALWAYS counts, on any thread
// (an entry point the fake calls from another, as cuGreenCtxStreamCreate does, counts once: only the
// outermost call of a thread counts), and the k-th returns the armed code at once, before the entry
// point does anything. The failure scenarios (tests/failure_sweep) use it to make each call cudrv makes
// fail in turn; a trace of the names lets them say which call failed.
struct injection_t {
  bool armed = false;
  long long calls = 0;    // counted since arming
  long long fail_at = 0;  // the call that fails (0: none, count only)
  CUresult code = CUDA_SUCCESS;
  const char* failed_api = nullptr;  // the entry point that returned the injected code (its fake_ name)
  bool tracing = false;
  std::vector<const char*> trace;  // the names of the counted calls, while tracing
};

injection_t& injection() {
  static auto* i = new injection_t;
  return *i;
}

// While a thread runs inside the fake (an entry point, cuInit, cuGetProcAddress): what it allocates there
// is the fake's, not the caller's (fake_cuda_in_entry_point, for the host-allocation injection).
thread_local int entry_depth = 0;
// The entry point the thread entered last (its fake_ name): the driver-log line of a failure names it.
thread_local const char* entered_api = nullptr;

struct entry_scope {
  entry_scope() noexcept { ++entry_depth; }
  ~entry_scope() { --entry_depth; }
  entry_scope(const entry_scope&) = delete;
  entry_scope& operator=(const entry_scope&) = delete;
};

CUresult fail(CUresult r) noexcept;

// In a sanitizer build, FAKE_CUDA_INJECTION_STACK=1 prints the stack of the call that gets the injected
// failure (to find the code that handles it).
extern "C" void __sanitizer_print_stack_trace() __attribute__((weak));

// Counts a call (under st().mutex) and returns the injected code for the armed one, else CUDA_SUCCESS.
CUresult injected_at_entry(const char* fn) noexcept {
  entered_api = fn;
  injection_t& in = injection();
  if (!in.armed || entry_depth != 1) {
    return CUDA_SUCCESS;
  }
  ++in.calls;
  if (in.tracing) {
    try {
      in.trace.push_back(fn);
    } catch (...) {
      in.tracing = false;  // no memory for the trace: it stops, the count goes on
    }
  }
  if (in.calls != in.fail_at) {
    return CUDA_SUCCESS;
  }
  in.failed_api = fn;
  if (__sanitizer_print_stack_trace != nullptr && std::getenv("FAKE_CUDA_INJECTION_STACK") != nullptr) {
    __sanitizer_print_stack_trace();
  }
  count("injected_failures");
  try {
    note(std::string("injected ") + fn + " call " + std::to_string(in.calls) + " code " +
         std::to_string(static_cast<int>(in.code)));
  } catch (...) {
  }
  return fail(in.code);
}

// Every entry point starts here: calls from the callback thread are refused, as by the real driver.
// After a sticky fault (fake_cuda_make_sticky) every call returns the fault's code, as the real
// driver does in the faulted context, except those that start with FAKE_ENTER_ALWAYS: device queries,
// the current-context calls and the primary-context calls (cuDevicePrimaryCtxReset is the recovery).
// An injected failure (above) comes first.
#define FAKE_ENTER_ALWAYS()                                                                \
  std::lock_guard<std::recursive_mutex> lock_(st().mutex);                                 \
  entry_scope entry_scope_;                                                                \
  if (const CUresult injected_ = injected_at_entry(__func__); injected_ != CUDA_SUCCESS) { \
    return injected_;                                                                      \
  }                                                                                        \
  if (on_callback_thread) {                                                                \
    count("not_permitted");                                                                \
    return CUDA_ERROR_NOT_PERMITTED;                                                       \
  }
#define FAKE_ENTER()                 \
  FAKE_ENTER_ALWAYS();               \
  if (st().sticky != CUDA_SUCCESS) { \
    count("sticky_refusals");        \
    return st().sticky;              \
  }
// Allocation entry points: the failure fake_cuda_fail_allocations asked for, while any is left.
#define FAKE_INJECTED_ALLOCATION_FAILURE() \
  if (st().allocation_failures_left > 0) { \
    --st().allocation_failures_left;       \
    count("injected_allocation_failures"); \
    return fail(st().allocation_failure);  \
  }

void log_failure(CUresult r) noexcept;  // issue 34 part 2, below: the driver-log line of a failed call

CUresult fail(CUresult r) noexcept {
  count("failed_calls");
  log_failure(r);
  return r;
}

CUcontext current() { return ctx_stack.empty() ? nullptr : ctx_stack.back(); }

fake_context* as_ctx(CUcontext c) { return reinterpret_cast<fake_context*>(c); }
fake_stream* as_stream(CUstream s) { return reinterpret_cast<fake_stream*>(s); }

bool known_context(fake_context* c) {
  for (auto& p : st().contexts) {
    if (p.get() == c) {
      return true;
    }
  }
  return false;
}

// A stream's context: the current one for the default streams.
fake_context* stream_context(CUstream s) {
  if (s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
    return as_ctx(current());
  }
  return as_stream(s)->ctx;
}

void land_dma() {
  for (auto& [dst, bytes] : st().pending_dma) {
    std::memcpy(reinterpret_cast<void*>(dst), bytes.data(), bytes.size());
  }
  st().pending_dma.clear();
}

fake_context* make_context(int device, bool primary) {
  state_t& s = st();
  fake_context* c = nullptr;
  if (!s.free_contexts.empty()) {
    c = s.free_contexts.back();
    s.free_contexts.pop_back();
  } else {
    s.contexts.push_back(std::make_unique<fake_context>());
    c = s.contexts.back().get();
  }
  *c = fake_context{device, s.next_id++, true, primary};
  return c;
}

void free_allocation(CUdeviceptr p) {
  state_t& s = st();
  auto it = s.live.find(p);
  s.freed[it->second.size].push_back(reinterpret_cast<void*>(p));
  s.live.erase(it);
}

// A context goes with everything made in it, as with the real driver.
void destroy_context(fake_context* c) {
  state_t& s = st();
  c->alive = false;
  for (auto it = s.live.begin(); it != s.live.end();) {
    auto next = std::next(it);
    if (it->second.ctx == c) {
      free_allocation(it->first);
    }
    it = next;
  }
  for (auto& str : s.streams) {
    if (str->alive && str->ctx == c) {
      str->alive = false;
      if (str->pending == 0) {
        s.free_streams.push_back(str.get());
      }
    }
  }
  std::erase_if(s.events, [&](const auto& e) {  // a context takes its events with it
    if (e.second != c) {
      return false;
    }
    delete reinterpret_cast<int*>(e.first);
    return true;
  });
  s.free_contexts.push_back(c);
  count("contexts_destroyed");
}

void* allocate_bytes(std::size_t size) {
  state_t& s = st();
  auto& pool = s.freed[size];
  if (!pool.empty()) {  // hand out the address freed last, as the real driver often does
    void* p = pool.back();
    pool.pop_back();
    return p;
  }
  return std::calloc(1, std::max<std::size_t>(size, 1));
}

void worker_loop() {
  on_callback_thread = true;
  state_t& s = st();
  std::unique_lock<std::recursive_mutex> lock(s.mutex);
  for (;;) {
    s.idle.wait(lock, [&] { return !s.host_calls.empty(); });
    host_call call = s.host_calls.front();
    s.host_calls.pop_front();
    lock.unlock();
    call.fn(call.data);  // on the callback thread: CUDA calls are refused (FAKE_ENTER)
    lock.lock();
    if (--call.stream->pending == 0 && !call.stream->alive) {
      s.free_streams.push_back(call.stream);
    }
    s.idle.notify_all();
  }
}

void wait_idle(fake_stream* only) {
  state_t& s = st();
  std::unique_lock<std::recursive_mutex> lock(s.mutex, std::adopt_lock);
  s.idle.wait(lock, [&] {
    if (only != nullptr) {
      return only->pending == 0;
    }
    for (auto& str : s.streams) {
      if (str->pending != 0) {
        return false;
      }
    }
    return true;
  });
  lock.release();  // the caller's lock_guard still owns it
}

// PTX: the kernels (.entry), their parameter sizes, and the target.
void parse_ptx(std::string_view ptx, fake_library& lib) {
  if (auto t = ptx.find(".target sm_"); t != std::string_view::npos) {
    lib.target = std::atoi(std::string(ptx.substr(t + 11, 3)).c_str());
  }
  std::size_t pos = 0;
  while ((pos = ptx.find(".entry ", pos)) != std::string_view::npos) {
    pos += 7;
    std::size_t end = ptx.find_first_of("( \n", pos);
    lib.kernels.emplace_back(ptx.substr(pos, end - pos));
    std::vector<std::size_t> sizes;
    if (end < ptx.size() && ptx[end] == '(') {
      std::size_t close = ptx.find(')', end);
      std::string_view list = ptx.substr(end + 1, close - end - 1);
      std::size_t p = 0;
      while ((p = list.find(".param", p)) != std::string_view::npos) {
        std::size_t stop = list.find_first_of(",", p);
        std::string_view decl = list.substr(p, stop == std::string_view::npos ? std::string_view::npos : stop - p);
        std::size_t size = 8;
        if (decl.find(".u32") != std::string_view::npos || decl.find(".s32") != std::string_view::npos ||
            decl.find(".f32") != std::string_view::npos || decl.find(".b32") != std::string_view::npos) {
          size = 4;
        }
        if (auto b = decl.find('['); b != std::string_view::npos) {
          size = static_cast<std::size_t>(std::atoi(std::string(decl.substr(b + 1)).c_str()));
        }
        sizes.push_back(size);
        p += 6;
      }
    }
    lib.params.push_back(std::move(sizes));
  }
}

// --- the entry points -------------------------------------------------------------------------------

CUresult CUDAAPI fake_cuInit(unsigned) {
  entry_scope scope;  // not an entry point that counts: cudrv calls it once, while loading the driver
  state_t& s = st();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  if (s.initialized) {
    return CUDA_SUCCESS;
  }
  s.initialized = true;
  const char* devs = std::getenv("FAKE_CUDA_DEVICES");
  std::string list = devs != nullptr ? devs : "80,90";
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) {
      s.devices.push_back(std::atoi(item.c_str()));
    }
  }
  s.unavailable.assign(s.devices.size(), false);
  const char* un = std::getenv("FAKE_CUDA_UNAVAILABLE");
  std::stringstream uin(un != nullptr ? un : "0");
  for (std::string item; std::getline(uin, item, ',');) {
    if (!item.empty() && std::atoi(item.c_str()) < static_cast<int>(s.devices.size())) {
      s.unavailable[static_cast<std::size_t>(std::atoi(item.c_str()))] = true;
    }
  }
  s.primary.assign(s.devices.size(), nullptr);
  s.primary_refs.assign(s.devices.size(), 0);
  s.primary_retains_total.assign(s.devices.size(), 0);
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    s.pools.push_back(reinterpret_cast<CUmemoryPool>(0x9000 + i));
    s.pool_threshold.push_back(0);
  }
  s.worker = std::thread(worker_loop);
  s.worker.detach();
  return CUDA_SUCCESS;
}

// FAKE_CUDA_DRIVER_VERSION (default 13000): the CUDA version the fake claims; entry points introduced
// after it are "not found" (see versioned_symbols).
int driver_version() {
  static const int v = [] {
    const char* env = std::getenv("FAKE_CUDA_DRIVER_VERSION");
    return env != nullptr ? std::atoi(env) : 13000;
  }();
  return v;
}

CUresult CUDAAPI fake_cuDriverGetVersion(int* v) {
  *v = driver_version();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuGetErrorName(CUresult r, const char** s) {
  *s = r == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuGetErrorString(CUresult, const char** s) {
  *s = "reported by the fake driver";
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDeviceGetCount(int* n) {
  FAKE_ENTER_ALWAYS();
  *n = static_cast<int>(st().devices.size());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDeviceGet(CUdevice* d, int ordinal) {
  FAKE_ENTER_ALWAYS();
  if (ordinal < 0 || ordinal >= static_cast<int>(st().devices.size())) {
    return fail(CUDA_ERROR_INVALID_DEVICE);
  }
  *d = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDeviceGetName(char* name, int len, CUdevice d) {
  FAKE_ENTER_ALWAYS();
  std::snprintf(name, static_cast<std::size_t>(len), "Fake GPU %d (sm_%d)", d,
                st().devices[static_cast<std::size_t>(d)]);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDeviceTotalMem(std::size_t* bytes, CUdevice) {
  FAKE_ENTER_ALWAYS();
  *bytes = std::size_t{16} << 30;
  return CUDA_SUCCESS;
}

// Set by fake_cuda_set_fabric_without_imex: every device reports fabric handles (pools and VMM), and
// the driver refuses them with CUDA_ERROR_NOT_PERMITTED, as a real one does without an IMEX channel.
// (Driver 580.159.04 creates a fabric *pool* without a channel, refuses to export it and crashes when it
// is destroyed; cudrv refuses such pools before calling the driver, so that refusal is cudrv's.)
bool fabric_without_imex = false;

// Set by fake_cuda_set_no_l2_persistence (issue 34 part 1): every device reports no L2 access-policy
// windows and no persisting L2, as devices before compute capability 8.0 do.
bool no_l2_persistence = false;

CUresult CUDAAPI fake_cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  FAKE_ENTER_ALWAYS();
  if (d < 0 || d >= static_cast<int>(st().devices.size())) {
    return fail(CUDA_ERROR_INVALID_DEVICE);
  }
  const int cc = st().devices[static_cast<std::size_t>(d)];
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = cc / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = cc % 10; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 100; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *v = cc >= 90 ? 1 : 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:  // IPC: POSIX descriptors, no fabric
      *v = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | (fabric_without_imex ? 0x8 : 0);
      break;
    case static_cast<CUdevice_attribute>(128):  // HANDLE_TYPE_FABRIC_SUPPORTED
      *v = fabric_without_imex ? 1 : 0;
      break;
    case static_cast<CUdevice_attribute>(122):  // CAN_USE_64_BIT_STREAM_MEM_OPS: sm_90 and newer only
      *v = cc >= 90 ? 1 : 0;
      break;
    case static_cast<CUdevice_attribute>(123):  // CAN_USE_STREAM_WAIT_VALUE_NOR: no fake device
    case CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
      *v = cc >= 90 ? 1 : 0;  // compression and fabric handles: unsupported everywhere (the default 0)
      break;
    // Texture, surface and linear-texture limits (arrays): an H100's, with a 2-D height of 4096 to test refusals.
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH: *v = 131072; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH: *v = 131072; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT: *v = 4096; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH: *v = 16384; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE: *v = 8192; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT: *v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH: *v = 16384; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS: *v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS: *v = 2046; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
      *v = 16;  // what calloc guarantees the fake's device memory
      break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH: *v = 1 << 28; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT: *v = 131072; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH: *v = 2097120; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
      *v = st().unavailable[static_cast<std::size_t>(d)] ? CU_COMPUTEMODE_EXCLUSIVE_PROCESS : CU_COMPUTEMODE_DEFAULT;
      break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:  // issue 34 part 7: FAKE_CUDA_NO_CONCURRENT_MANAGED
      *v = std::getenv("FAKE_CUDA_NO_CONCURRENT_MANAGED") != nullptr ? 0 : 1;
      break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:  // pools: device 1 sits next to node 1; device 0 reports no NUMA
      *v = d == 1 ? 1 : -1;
      break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED: *v = 1; break;
    case static_cast<CUdevice_attribute>(144):  // HOST_MEMORY_POOLS_SUPPORTED: device 1 only
      *v = d == 1 ? 1 : 0;
      break;
    // issue 34 part 1: an H100's L2 persistence and memory-sync domains on compute capability 9.0 (none
    // before, or with fake_cuda_set_no_l2_persistence).
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: *v = cc >= 90 && !no_l2_persistence ? 134213632 : 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: *v = cc >= 90 && !no_l2_persistence ? 32768000 : 0; break;
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: *v = cc >= 90 ? 4 : 1; break;
    default: *v = 0;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice d) {
  FAKE_ENTER();
  *pool = st().pools[static_cast<std::size_t>(d)];
  return CUDA_SUCCESS;
}

std::size_t pool_index(CUmemoryPool p) {
  return static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(p) - 0x9000);
}

std::size_t pool_usage(CUmemoryPool p, bool reserved);  // below, with the pools' allocations

CUresult CUDAAPI fake_cuMemPoolGetAttribute(CUmemoryPool p, CUmemPool_attribute a, void* v) {
  FAKE_ENTER();
  if (a == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) {
    *static_cast<cuuint64_t*>(v) = st().pool_threshold[pool_index(p)];
    return CUDA_SUCCESS;
  }
  if (a == CU_MEMPOOL_ATTR_USED_MEM_CURRENT || a == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) {
    *static_cast<cuuint64_t*>(v) = pool_usage(p, a == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
    return CUDA_SUCCESS;
  }
  return fail(CUDA_ERROR_NOT_SUPPORTED);
}

// cuMemPoolTrimTo: the reserve shrinks to what is used or what is kept, whichever is larger.
CUresult CUDAAPI fake_cuMemPoolTrimTo(CUmemoryPool p, std::size_t keep) {
  FAKE_ENTER();
  count("pool_trims");
  st().pool_trimmed_to[pool_index(p)] = keep;
  note("pool_trim " + hex(p) + " to " + std::to_string(keep));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemPoolSetAttribute(CUmemoryPool p, CUmemPool_attribute a, void* v) {
  FAKE_ENTER();
  if (a == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) {
    st().pool_threshold[pool_index(p)] = *static_cast<cuuint64_t*>(v);
    return CUDA_SUCCESS;
  }
  return fail(CUDA_ERROR_NOT_SUPPORTED);
}

CUresult CUDAAPI fake_cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
  FAKE_ENTER_ALWAYS();
  state_t& s = st();
  const auto i = static_cast<std::size_t>(d);
  count("primary_retain:" + std::to_string(d));
  if (s.unavailable[i]) {
    return fail(CUDA_ERROR_DEVICE_UNAVAILABLE);
  }
  if (s.primary[i] == nullptr) {
    s.primary[i] = make_context(d, true);
  }
  ++s.primary_refs[i];
  ++s.primary_retains_total[i];
  *c = reinterpret_cast<CUcontext>(s.primary[i]);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDevicePrimaryCtxRelease(CUdevice d) {
  FAKE_ENTER_ALWAYS();
  state_t& s = st();
  const auto i = static_cast<std::size_t>(d);
  if (s.primary_refs[i] == 0) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  if (--s.primary_refs[i] == 0 && s.primary[i] != nullptr) {
    destroy_context(s.primary[i]);
    s.primary[i] = nullptr;
  }
  return CUDA_SUCCESS;
}

// Destroys everything made in the primary context and leaves it inactive, its references kept (the
// next retain activates it again, usually at the same address, which make_context hands out LIFO).
// The recovery from a sticky fault: clears it.
CUresult CUDAAPI fake_cuDevicePrimaryCtxReset(CUdevice d) {
  FAKE_ENTER_ALWAYS();
  state_t& s = st();
  const auto i = static_cast<std::size_t>(d);
  if (i >= s.devices.size()) {
    return fail(CUDA_ERROR_INVALID_DEVICE);
  }
  if (s.primary[i] != nullptr) {
    std::erase(ctx_stack, reinterpret_cast<CUcontext>(s.primary[i]));
    destroy_context(s.primary[i]);
    s.primary[i] = nullptr;
  }
  s.sticky = CUDA_SUCCESS;
  count("primary_resets");
  note("primary_reset " + std::to_string(d));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDevicePrimaryCtxGetState(CUdevice d, unsigned* flags, int* active) {
  FAKE_ENTER_ALWAYS();
  *flags = 0;
  *active = st().primary[static_cast<std::size_t>(d)] != nullptr ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCtxCreate(CUcontext* c, unsigned, CUdevice d) {
  FAKE_ENTER();
  if (st().unavailable[static_cast<std::size_t>(d)]) {
    return fail(CUDA_ERROR_DEVICE_UNAVAILABLE);
  }
  *c = reinterpret_cast<CUcontext>(make_context(d, false));
  ctx_stack.push_back(*c);  // cuCtxCreate makes the new context current
  count("contexts_created");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCtxDestroy(CUcontext c) {
  FAKE_ENTER();
  if (!known_context(as_ctx(c)) || !as_ctx(c)->alive) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  destroy_context(as_ctx(c));
  std::erase(ctx_stack, c);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCtxGetCurrent(CUcontext* c) {
  FAKE_ENTER_ALWAYS();
  *c = current();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCtxSetCurrent(CUcontext c) {
  FAKE_ENTER_ALWAYS();
  if (c != nullptr && (!known_context(as_ctx(c)) || !as_ctx(c)->alive)) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  if (ctx_stack.empty()) {
    ctx_stack.push_back(c);
  } else {
    ctx_stack.back() = c;
  }
  if (c != nullptr) {
    count("made_current:" + std::to_string(as_ctx(c)->device));
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCtxPopCurrent(CUcontext* c) {
  FAKE_ENTER_ALWAYS();
  if (ctx_stack.empty()) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  *c = ctx_stack.back();
  ctx_stack.pop_back();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCtxGetDevice(CUdevice* d) {
  FAKE_ENTER_ALWAYS();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  *d = as_ctx(current())->device;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCtxGetId(CUcontext c, unsigned long long* id) {
  FAKE_ENTER_ALWAYS();
  if (!known_context(as_ctx(c)) || !as_ctx(c)->alive) {
    return fail(CUDA_ERROR_CONTEXT_IS_DESTROYED);
  }
  *id = as_ctx(c)->id;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCtxSynchronize() {
  FAKE_ENTER();
  land_dma();
  wait_idle(nullptr);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemGetInfo(std::size_t* free, std::size_t* total) {
  FAKE_ENTER();
  *free = std::size_t{8} << 30;
  *total = std::size_t{16} << 30;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuStreamCreateWithPriority(CUstream* out, unsigned flags, int priority) {
  FAKE_ENTER();
  state_t& s = st();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  fake_stream* str = nullptr;
  if (!s.free_streams.empty()) {  // the handle of the stream destroyed last, as the real driver does
    str = s.free_streams.back();
    s.free_streams.pop_back();
  } else {
    s.streams.push_back(std::make_unique<fake_stream>());
    str = s.streams.back().get();
  }
  str->ctx = as_ctx(current());
  str->id = s.next_id++;
  str->alive = true;
  str->pending = 0;
  str->flags = flags;
  str->priority = priority;
  *out = reinterpret_cast<CUstream>(str);
  count("streams_created");
  return CUDA_SUCCESS;
}

void forget_capture(CUstream h);  // issue 34 part 6: a destroyed stream captures no more

CUresult CUDAAPI fake_cuStreamDestroy(CUstream h) {
  FAKE_ENTER();
  fake_stream* str = as_stream(h);
  if (!str->alive) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  str->alive = false;
  forget_capture(h);
  if (str->pending == 0) {
    st().free_streams.push_back(str);
  }
  note("stream_destroy " + hex(h));
  count("streams_destroyed");
  return CUDA_SUCCESS;
}

bool usable_stream(CUstream h) {
  return h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD || (as_stream(h)->alive && as_stream(h)->ctx->alive);
}

CUresult CUDAAPI fake_cuStreamSynchronize(CUstream h) {
  FAKE_ENTER();
  count("stream_synchronize");
  if (!usable_stream(h)) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  land_dma();
  wait_idle(h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD ? nullptr : as_stream(h));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuStreamQuery(CUstream h) {
  FAKE_ENTER();
  if (!usable_stream(h)) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  return (h != CU_STREAM_LEGACY && as_stream(h)->pending != 0) ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuStreamGetCtx(CUstream h, CUcontext* c) {
  FAKE_ENTER();
  if (!usable_stream(h)) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  *c = reinterpret_cast<CUcontext>(stream_context(h));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuStreamGetPriority(CUstream h, int* priority) {
  FAKE_ENTER();
  if (h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD || !usable_stream(h)) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  *priority = as_stream(h)->priority;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuStreamGetFlags(CUstream h, unsigned* flags) {
  FAKE_ENTER();
  if (h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD || !usable_stream(h)) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  *flags = as_stream(h)->flags;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuStreamGetId(CUstream h, unsigned long long* id) {
  FAKE_ENTER();
  if (!usable_stream(h)) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  *id = as_stream(h)->id;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuStreamWaitEvent(CUstream h, CUevent e, unsigned) {
  FAKE_ENTER();
  if (!usable_stream(h)) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  note("stream_wait " + hex(h) + " for " + hex(e));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* g,
                                             const CUgraphNode** deps, const CUgraphEdgeData** edges, std::size_t* n) {
  FAKE_ENTER();
  if (!usable_stream(h)) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (id != nullptr) *id = 0;
  if (g != nullptr) *g = nullptr;
  if (deps != nullptr) *deps = nullptr;
  if (edges != nullptr) *edges = nullptr;
  if (n != nullptr) *n = 0;
  return CUDA_SUCCESS;
}

// Streams are never capturing here, except the one a test names (fake_cuda_set_capturing).
CUstream capturing_stream = nullptr;

CUresult CUDAAPI fake_cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus* status) {
  FAKE_ENTER();
  if (!usable_stream(h)) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  *status = h == capturing_stream ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuLaunchHostFunc(CUstream h, CUhostFn fn, void* data) {
  FAKE_ENTER();
  if (h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD || !usable_stream(h)) {
    return fail(CUDA_ERROR_INVALID_HANDLE);  // the tests queue host work on their own streams
  }
  ++as_stream(h)->pending;
  st().host_calls.push_back({as_stream(h), fn, data});
  st().idle.notify_all();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuEventCreate(CUevent* e, unsigned) {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  *e = reinterpret_cast<CUevent>(new int(0));
  st().events[*e] = as_ctx(current());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuEventDestroy(CUevent e) {
  FAKE_ENTER();
  if (st().events.erase(e) == 0) {  // unknown, or gone with its context
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  delete reinterpret_cast<int*>(e);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuEventRecord(CUevent e, CUstream h) {
  FAKE_ENTER();
  if (!usable_stream(h)) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  note("event_record " + hex(e) + " on " + hex(h));
  return CUDA_SUCCESS;
}

// Events complete at once here (the fake runs no work); a synchronisation lands pageable copies
// (the stress program's event kind: tests/stress/stress.cpp).
CUresult CUDAAPI fake_cuEventQuery(CUevent e) {
  FAKE_ENTER();
  return e != nullptr ? CUDA_SUCCESS : fail(CUDA_ERROR_INVALID_HANDLE);
}

// Every pair of live events is 0.5 ms apart (the fake runs nothing to time).
CUresult CUDAAPI fake_cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  FAKE_ENTER();
  if (ms == nullptr || st().events.count(start) == 0 || st().events.count(end) == 0) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  *ms = 0.5f;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuEventSynchronize(CUevent e) {
  FAKE_ENTER();
  if (e == nullptr) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  land_dma();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemAlloc(CUdeviceptr* p, std::size_t size) {
  FAKE_ENTER();
  FAKE_INJECTED_ALLOCATION_FAILURE();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  *p = reinterpret_cast<CUdeviceptr>(allocate_bytes(size));
  st().live[*p] = {size, as_ctx(current()), as_ctx(current())->device};
  count("allocations");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemFree(CUdeviceptr p) {
  FAKE_ENTER();
  if (st().live.count(p) == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  free_allocation(p);
  note("free " + hex(reinterpret_cast<void*>(p)));
  count("frees");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemAllocAsync(CUdeviceptr* p, std::size_t size, CUstream h) {
  FAKE_ENTER();
  FAKE_INJECTED_ALLOCATION_FAILURE();
  fake_context* c = stream_context(h);
  if (!usable_stream(h) || c == nullptr) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  *p = reinterpret_cast<CUdeviceptr>(allocate_bytes(size));
  st().live[*p] = {size, nullptr, c->device};
  count("allocations");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemFreeAsync(CUdeviceptr p, CUstream h) {
  FAKE_ENTER();
  if (!usable_stream(h)) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  if (st().live.count(p) == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  free_allocation(p);
  note("free_async " + hex(reinterpret_cast<void*>(p)) + " on " + hex(h));
  count("frees");
  return CUDA_SUCCESS;
}

bool is_device(CUdeviceptr p) {
  auto it = st().live.upper_bound(p);
  if (it == st().live.begin()) {
    return false;
  }
  --it;
  return p < it->first + it->second.size;
}

CUresult copy(CUdeviceptr dst, CUdeviceptr src, std::size_t n) {
  if (is_device(dst) && !is_device(src)) {
    // From pageable host memory: the bytes are staged now and land later, at a synchronisation
    // (cuMemcpy "may return before the DMA to the final destination has completed").
    st().pending_dma.emplace_back(dst, std::string(reinterpret_cast<const char*>(src), n));
    return CUDA_SUCCESS;
  }
  land_dma();
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemcpy(CUdeviceptr dst, CUdeviceptr src, std::size_t n) {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  return copy(dst, src, n);
}

CUresult CUDAAPI fake_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, std::size_t n, CUstream h) {
  FAKE_ENTER();
  count("memcpy_async");
  if (!usable_stream(h) || stream_context(h) == nullptr) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  return copy(dst, src, n);
}

std::map<CUdeviceptr, std::size_t>& pool_of_allocation();  // IPC section below

// The allocation holding p: its start and size, as the real driver reports them (exact sizes, also for pool
// imports and IPC mappings, on driver 580.159.04).
CUresult CUDAAPI fake_cuMemGetAddressRange(CUdeviceptr* base, std::size_t* size, CUdeviceptr p) {
  FAKE_ENTER();
  count("address_range_queries");
  if (auto it = st().live.upper_bound(p); it != st().live.begin()) {
    --it;
    if (p < it->first + it->second.size) {
      if (base != nullptr) {
        *base = it->first;
      }
      if (size != nullptr) {
        *size = it->second.size;
      }
      return CUDA_SUCCESS;
    }
  }
  return fail(CUDA_ERROR_NOT_FOUND);
}

// Fills of device memory land at once, stream-ordered or not (nothing runs concurrently here).
template <class T>
CUresult fill_device(CUdeviceptr d, T value, std::size_t n) {
  if (n == 0 || !is_device(d) || !is_device(d + n * sizeof(T) - 1)) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  land_dma();
  for (std::size_t i = 0; i < n; ++i) {
    std::memcpy(reinterpret_cast<void*>(d + i * sizeof(T)), &value, sizeof(T));
  }
  count("memsets");
  return CUDA_SUCCESS;
}

template <class T>
CUresult fill_sync(CUdeviceptr d, T value, std::size_t n) {
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  return fill_device(d, value, n);
}

template <class T>
CUresult fill_async(CUdeviceptr d, T value, std::size_t n, CUstream h) {
  if (!usable_stream(h) || stream_context(h) == nullptr) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  return fill_device(d, value, n);
}

CUresult CUDAAPI fake_cuMemsetD8(CUdeviceptr d, unsigned char v, std::size_t n) {
  FAKE_ENTER();
  return fill_sync(d, v, n);
}
CUresult CUDAAPI fake_cuMemsetD16(CUdeviceptr d, unsigned short v, std::size_t n) {
  FAKE_ENTER();
  return fill_sync(d, v, n);
}
CUresult CUDAAPI fake_cuMemsetD32(CUdeviceptr d, unsigned v, std::size_t n) {
  FAKE_ENTER();
  return fill_sync(d, v, n);
}
CUresult CUDAAPI fake_cuMemsetD8Async(CUdeviceptr d, unsigned char v, std::size_t n, CUstream h) {
  FAKE_ENTER();
  return fill_async(d, v, n, h);
}
CUresult CUDAAPI fake_cuMemsetD16Async(CUdeviceptr d, unsigned short v, std::size_t n, CUstream h) {
  FAKE_ENTER();
  return fill_async(d, v, n, h);
}
CUresult CUDAAPI fake_cuMemsetD32Async(CUdeviceptr d, unsigned v, std::size_t n, CUstream h) {
  FAKE_ENTER();
  return fill_async(d, v, n, h);
}

CUresult CUDAAPI fake_cuPointerGetAttributes(unsigned n, CUpointer_attribute* attrs, void** data, CUdeviceptr p) {
  FAKE_ENTER();
  count("pointer_queries");
  const allocation* a = nullptr;
  CUdeviceptr start = 0;
  if (auto it = st().live.upper_bound(p); it != st().live.begin()) {
    --it;
    if (p < it->first + it->second.size) {
      a = &it->second;
      start = it->first;
    }
  }
  for (unsigned i = 0; i < n; ++i) {
    switch (attrs[i]) {
      case CU_POINTER_ATTRIBUTE_CONTEXT:
        *static_cast<CUcontext*>(data[i]) = a != nullptr ? reinterpret_cast<CUcontext>(a->ctx) : nullptr;
        break;
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *static_cast<unsigned*>(data[i]) = a != nullptr ? CU_MEMORYTYPE_DEVICE : 0;
        break;
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data[i]) = a != nullptr ? a->device : -2; break;
      case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *static_cast<CUdeviceptr*>(data[i]) = a != nullptr ? start : 0; break;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<std::size_t*>(data[i]) = a != nullptr ? a->size : 0; break;
      case CU_POINTER_ATTRIBUTE_HOST_POINTER: *static_cast<void**>(data[i]) = nullptr; break;
      case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<int*>(data[i]) = a != nullptr && a->managed ? 1 : 0; break;
      case CU_POINTER_ATTRIBUTE_BUFFER_ID: *static_cast<unsigned long long*>(data[i]) = 0; break;
      case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: {
        auto pool = pool_of_allocation().find(start);
        *static_cast<CUmemoryPool*>(data[i]) = a != nullptr && pool != pool_of_allocation().end()
                                                   ? reinterpret_cast<CUmemoryPool>(0x9000 + pool->second)
                                                   : nullptr;
        break;
      }
      default: *static_cast<int*>(data[i]) = 0;
    }
  }
  return CUDA_SUCCESS;
}

fake_library* as_lib(CUlibrary l) { return reinterpret_cast<fake_library*>(l); }
fake_kernel* as_kernel(CUkernel k) { return reinterpret_cast<fake_kernel*>(k); }

CUresult CUDAAPI fake_cuLibraryLoadData(CUlibrary* out, const void* image, CUjit_option*, void**, unsigned,
                                        CUlibraryOption*, void**, unsigned) {
  FAKE_ENTER();
  count("library_load_calls");  // every call, refused or not (tests/fake_driver/test_fake_images.cpp)
  auto lib = std::make_unique<fake_library>();
  parse_ptx(static_cast<const char*>(image), *lib);
  if (lib->kernels.empty() && lib->target == 0) {
    return fail(CUDA_ERROR_INVALID_IMAGE);
  }
  for (std::size_t i = 0; i < lib->kernels.size(); ++i) {
    st().kernels.push_back(std::make_unique<fake_kernel>(fake_kernel{lib.get(), i}));
  }
  *out = reinterpret_cast<CUlibrary>(lib.get());
  st().libraries.push_back(std::move(lib));
  count("libraries_loaded");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuLibraryUnload(CUlibrary l) {
  FAKE_ENTER();
  if (!as_lib(l)->alive) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  as_lib(l)->alive = false;
  count("libraries_unloaded");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuLibraryGetKernel(CUkernel* k, CUlibrary l, const char* name) {
  FAKE_ENTER();
  if (!as_lib(l)->alive) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  for (auto& kern : st().kernels) {
    if (kern->lib == as_lib(l) && as_lib(l)->kernels[kern->index] == name) {
      *k = reinterpret_cast<CUkernel>(kern.get());
      return CUDA_SUCCESS;
    }
  }
  return fail(CUDA_ERROR_NOT_FOUND);
}

CUresult CUDAAPI fake_cuLibraryGetKernelCount(unsigned* n, CUlibrary l) {
  FAKE_ENTER();
  *n = static_cast<unsigned>(as_lib(l)->kernels.size());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuLibraryEnumerateKernels(CUkernel* ks, unsigned n, CUlibrary l) {
  FAKE_ENTER();
  unsigned i = 0;
  for (auto& kern : st().kernels) {
    if (kern->lib == as_lib(l) && i < n) {
      ks[i++] = reinterpret_cast<CUkernel>(kern.get());
    }
  }
  return CUDA_SUCCESS;
}

// Loading into the current context: refused when its device cannot run the code.
CUresult load_in_current(fake_library* lib) {
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  count("loaded_in:" + std::to_string(as_ctx(current())->device));
  note("library_load_in " + hex(current()));  // which context, for the tests of library::from_file's targets
  if (st().devices[static_cast<std::size_t>(as_ctx(current())->device)] < lib->target) {
    return fail(CUDA_ERROR_NO_BINARY_FOR_GPU);
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuLibraryGetModule(CUmodule* m, CUlibrary l) {
  FAKE_ENTER();
  *m = reinterpret_cast<CUmodule>(l);
  return load_in_current(as_lib(l));
}

CUresult CUDAAPI fake_cuKernelGetFunction(CUfunction* f, CUkernel k) {
  FAKE_ENTER();
  *f = reinterpret_cast<CUfunction>(k);
  return load_in_current(as_kernel(k)->lib);
}

CUresult CUDAAPI fake_cuFuncLoad(CUfunction f) {
  FAKE_ENTER();
  return load_in_current(as_kernel(reinterpret_cast<CUkernel>(f))->lib);
}

CUresult CUDAAPI fake_cuKernelGetName(const char** name, CUkernel k) {
  FAKE_ENTER();
  *name = as_kernel(k)->lib->kernels[as_kernel(k)->index].c_str();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuKernelGetParamInfo(CUkernel k, std::size_t i, std::size_t* offset, std::size_t* size) {
  FAKE_ENTER();
  count("param_info_calls");
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  const auto& sizes = as_kernel(k)->lib->params[as_kernel(k)->index];
  if (i >= sizes.size()) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  std::size_t o = 0;
  for (std::size_t j = 0; j < i; ++j) {
    o += sizes[j];
  }
  *offset = o;
  *size = sizes[i];
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuKernelGetAttribute(int* v, CUfunction_attribute, CUkernel, CUdevice) {
  FAKE_ENTER();
  *v = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuLibraryGetGlobal(CUdeviceptr* p, std::size_t* bytes, CUlibrary l, const char* name) {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  auto& slot = as_lib(l)->globals[name];
  if (slot == 0) {
    slot = reinterpret_cast<CUdeviceptr>(allocate_bytes(16));
    st().live[slot] = {16, as_ctx(current()), as_ctx(current())->device};
  }
  *p = slot;
  *bytes = 16;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                     unsigned bz, unsigned, CUstream h, void**, void**) {
  FAKE_ENTER();
  fake_kernel* k = as_kernel(reinterpret_cast<CUkernel>(f));
  fake_context* c = stream_context(h);
  if (!usable_stream(h) || c == nullptr) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  if (!k->lib->alive) {
    return fail(CUDA_ERROR_INVALID_HANDLE);  // the code was unloaded
  }
  if (st().devices[static_cast<std::size_t>(c->device)] < k->lib->target) {
    return fail(CUDA_ERROR_NO_BINARY_FOR_GPU);
  }
  if (gx * gy * gz == 0 || bx * by * bz == 0 || bx * by * bz > 1024) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  count("launches");
  if (c->green != nullptr) {
    count("green_launches");
  }
  count("launch_blocks", static_cast<long long>(gx) * gy * gz);
  return CUDA_SUCCESS;
}

// Pools of every kind, host and managed allocations, graph memory (the pools part of issue 17). A
// created pool gets the next handle after the default pools (0x9000 + index), so the attribute calls
// above serve it too. Host NUMA nodes 0 and 1 exist. cuDeviceGraphMemTrim wants a current context
// (to exercise cudrv's fallback to the device's primary context); the other graph-memory calls do not.
struct pool_state_t {
  std::map<CUmemoryPool, CUmemPoolProps> props;
  std::map<CUmemoryPool, bool> alive;
  std::map<std::pair<CUmemoryPool, int>, CUmemAccess_flags> access;  // by device
  std::map<void*, std::size_t> host;                                 // cuMemHostAlloc
  std::map<int, std::array<cuuint64_t, 4>> graph_memory;             // by device, CUgraphMem_attribute order
};

pool_state_t& pst() {
  static auto* s = new pool_state_t;
  return *s;
}

std::string describe_location(const CUmemLocation& l) {
  return std::to_string(static_cast<int>(l.type)) + ":" + std::to_string(l.id);
}

CUresult CUDAAPI fake_cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice d) {  // the default: never changed here
  FAKE_ENTER();
  *pool = st().pools[static_cast<std::size_t>(d)];
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemPoolSetAccess(CUmemoryPool p, const CUmemAccessDesc* d, std::size_t n) {
  FAKE_ENTER();
  for (std::size_t i = 0; i < n; ++i) {
    if (d[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || d[i].location.id < 0 ||
        d[i].location.id >= static_cast<int>(st().devices.size())) {
      return fail(CUDA_ERROR_INVALID_DEVICE);
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    pst().access[{p, d[i].location.id}] = d[i].flags;
    note("pool_access " + hex(p) + " device " + std::to_string(d[i].location.id) + " flags " +
         std::to_string(static_cast<int>(d[i].flags)));
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemPoolGetAccess(CUmemAccess_flags* f, CUmemoryPool p, CUmemLocation* l) {
  FAKE_ENTER();
  auto it = pst().access.find({p, l->id});
  *f = it != pst().access.end() ? it->second : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemHostAlloc(void** out, std::size_t size, unsigned flags) {
  FAKE_ENTER();
  FAKE_INJECTED_ALLOCATION_FAILURE();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  *out = std::calloc(1, std::max<std::size_t>(size, 1));
  pst().host[*out] = size;
  count("host_allocations");
  note("host_alloc " + hex(*out) + " flags " + std::to_string(flags));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemFreeHost(void* p) {
  FAKE_ENTER();
  if (pst().host.erase(p) == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  std::free(p);
  count("host_frees");
  note("free_host " + hex(p));
  return CUDA_SUCCESS;
}

// What the driver records of a managed allocation (issue 34 part 7: cuMemRangeGetAttributes), by its start:
// the fake keeps it per allocation, whatever part of it a call names.
struct managed_range_state {
  int read_mostly = 0;
  CUmemLocation preferred{CU_MEM_LOCATION_TYPE_INVALID, 0};
  CUmemLocation last_prefetch{CU_MEM_LOCATION_TYPE_INVALID, 0};
  std::set<int> accessed_by;
};
std::map<CUdeviceptr, managed_range_state>& managed_state() {
  static auto* m = new std::map<CUdeviceptr, managed_range_state>;
  return *m;
}
// The start of the live managed allocation holding all n bytes at p, or 0.
CUdeviceptr managed_start(CUdeviceptr p, std::size_t n) {
  auto it = st().live.upper_bound(p);
  if (it == st().live.begin()) {
    return 0;
  }
  --it;
  const bool inside = p >= it->first && n <= it->second.size && p - it->first <= it->second.size - n;
  return inside && it->second.managed ? it->first : 0;
}

CUresult CUDAAPI fake_cuMemAllocManaged(CUdeviceptr* out, std::size_t size, unsigned flags) {
  FAKE_ENTER();
  FAKE_INJECTED_ALLOCATION_FAILURE();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  *out = reinterpret_cast<CUdeviceptr>(allocate_bytes(size));
  st().live[*out] = {size, as_ctx(current()), as_ctx(current())->device, true};
  managed_state().erase(*out);  // an address handed out again starts with no advice
  count("allocations");
  count("managed_allocations");
  note("alloc_managed " + hex(reinterpret_cast<void*>(*out)) + " flags " + std::to_string(flags));
  return CUDA_SUCCESS;
}

// Managed memory: where prefetches and advice go, as the driver receives them.
CUresult CUDAAPI fake_cuMemPrefetchAsync(CUdeviceptr p, std::size_t n, CUmemLocation l, unsigned, CUstream h) {
  FAKE_ENTER();
  if (!usable_stream(h) || st().live.count(p) == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  count("prefetches");
  managed_state()[p].last_prefetch = l;
  note("prefetch " + hex(reinterpret_cast<void*>(p)) + " " + std::to_string(n) + " to " + describe_location(l));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemAdvise(CUdeviceptr p, std::size_t n, CUmem_advise a, CUmemLocation l) {
  FAKE_ENTER();
  if (st().live.count(p) == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  managed_range_state& m = managed_state()[p];
  switch (a) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY: m.read_mostly = 1; break;
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY: m.read_mostly = 0; break;
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION: m.preferred = l; break;
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION: m.preferred = {CU_MEM_LOCATION_TYPE_INVALID, 0}; break;
    case CU_MEM_ADVISE_SET_ACCESSED_BY: m.accessed_by.insert(l.type == CU_MEM_LOCATION_TYPE_DEVICE ? l.id : -1); break;
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY: m.accessed_by.erase(l.type == CU_MEM_LOCATION_TYPE_DEVICE ? l.id : -1); break;
    default: return fail(CUDA_ERROR_INVALID_VALUE);
  }
  note("advise " + hex(reinterpret_cast<void*>(p)) + " " + std::to_string(n) + " " +
       std::to_string(static_cast<int>(a)) + " at " + describe_location(l));
  return CUDA_SUCCESS;
}

std::array<cuuint64_t, 4>* graph_memory_of(CUdevice d) {
  if (d < 0 || d >= static_cast<int>(st().devices.size())) {
    return nullptr;
  }
  return &pst().graph_memory[d];  // zero-initialised on first use
}

bool injected_failure(const char* api);  // fake_cuda_vmm_fail, below

CUresult CUDAAPI fake_cuDeviceGetGraphMemAttribute(CUdevice d, CUgraphMem_attribute a, void* v) {
  FAKE_ENTER();
  auto* m = graph_memory_of(d);
  if (m == nullptr) {
    return fail(CUDA_ERROR_INVALID_DEVICE);
  }
  if (injected_failure("cuDeviceGetGraphMemAttribute")) {  // as for an attribute this driver does not know
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  if (static_cast<int>(a) < 0 || static_cast<int>(a) > 3) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  *static_cast<cuuint64_t*>(v) = (*m)[static_cast<std::size_t>(a)];
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDeviceSetGraphMemAttribute(CUdevice d, CUgraphMem_attribute a, void* v) {
  FAKE_ENTER();
  auto* m = graph_memory_of(d);
  if (m == nullptr) {
    return fail(CUDA_ERROR_INVALID_DEVICE);
  }
  // Only the high watermarks can be set, and only to zero.
  if ((a != CU_GRAPH_MEM_ATTR_USED_MEM_HIGH && a != CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH) ||
      *static_cast<cuuint64_t*>(v) != 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  (*m)[static_cast<std::size_t>(a)] = 0;
  count("graph_memory_resets");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDeviceGraphMemTrim(CUdevice d) {
  FAKE_ENTER();
  auto* m = graph_memory_of(d);
  if (m == nullptr) {
    return fail(CUDA_ERROR_INVALID_DEVICE);
  }
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  (*m)[CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT] = (*m)[CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT];
  count("graph_memory_trims:" + std::to_string(as_ctx(current())->device));
  return CUDA_SUCCESS;
}

// Graphs: only what the tests need to reach instantiation.
CUresult CUDAAPI fake_cuGraphCreate(CUgraph* g, unsigned) {
  FAKE_ENTER();
  *g = reinterpret_cast<CUgraph>(new int(0));
  st().graphs.insert(*g);
  return CUDA_SUCCESS;
}

// Frees a graph and the bodies of its conditional nodes (their node handles stay, never reused).
void free_graph(int* g) {
  for (const auto& node : st().graph_nodes) {
    if (node->graph == g) {
      node->body_handles.clear();
      for (int* body : std::exchange(node->bodies, {})) {
        st().body_parents.erase(body);
        free_graph(body);
      }
      node->graph = nullptr;
    }
  }
  std::erase_if(st().conditional_handles, [g](const auto& entry) { return entry.second == g; });
  delete g;
}

CUresult CUDAAPI fake_cuGraphDestroy(CUgraph g) {
  FAKE_ENTER_ALWAYS();
  // The graph is the fake's own host memory: freed even where a faulted context refuses the call (the
  // real driver's state goes with the process), so that a sanitized run of the fault tests leaks nothing.
  st().graphs.erase(g);
  free_graph(reinterpret_cast<int*>(g));
  if (st().sticky != CUDA_SUCCESS) {
    count("sticky_refusals");
    return st().sticky;
  }
  return CUDA_SUCCESS;
}

// Each node is a distinct handle that remembers its graph, so that a dependency array cudrv hands
// over can be checked: "graph_deps_seen" counts the dependencies received, "graph_bad_deps" those
// that are not nodes of the same graph.
CUgraphNode add_graph_node(CUgraph g, const CUgraphNode* deps, std::size_t count_deps) {
  for (std::size_t i = 0; i < count_deps; ++i) {
    const auto* dep = reinterpret_cast<const fake_graph_node*>(deps[i]);
    bool known = false;
    for (const auto& node : st().graph_nodes) {
      known = known || (node.get() == dep && node->graph == reinterpret_cast<int*>(g));
    }
    count(known ? "graph_deps_seen" : "graph_bad_deps");
  }
  ++*reinterpret_cast<int*>(g);
  st().graph_nodes.push_back(std::make_unique<fake_graph_node>(fake_graph_node{reinterpret_cast<int*>(g)}));
  return reinterpret_cast<CUgraphNode>(st().graph_nodes.back().get());
}

CUresult CUDAAPI fake_cuGraphAddEmptyNode(CUgraphNode* n, CUgraph g, const CUgraphNode* deps, std::size_t count_deps) {
  FAKE_ENTER();
  *n = add_graph_node(g, deps, count_deps);
  return CUDA_SUCCESS;
}

fake_graph_node* known_node(CUgraphNode n) {
  for (const auto& node : st().graph_nodes) {
    if (node.get() == reinterpret_cast<fake_graph_node*>(n) && node->graph != nullptr) {
      return node.get();
    }
  }
  return nullptr;
}

CUresult CUDAAPI fake_cuGraphNodeGetType(CUgraphNode n, CUgraphNodeType* type) {
  FAKE_ENTER();
  const fake_graph_node* node = known_node(n);
  if (node == nullptr) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  std::memcpy(type, &node->type, sizeof(int));  // the bytes, as a driver writes them: no enum load
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuGraphGetNodes(CUgraph g, CUgraphNode* nodes, std::size_t* num) {
  FAKE_ENTER();
  std::size_t n = 0;
  for (const auto& node : st().graph_nodes) {
    if (node->graph == reinterpret_cast<int*>(g)) {
      if (nodes != nullptr && n < *num) {
        nodes[n] = reinterpret_cast<CUgraphNode>(node.get());
      }
      ++n;
    }
  }
  *num = nodes != nullptr ? std::min(n, *num) : n;
  return CUDA_SUCCESS;
}

// The fake runs no graph: every instantiation is refused, blaming the graph's last node (none for an
// empty graph), as the driver blames the node it could not instantiate.
// issue 34 part 6: instantiations a test asked the fake to accept (fake_cuda_accept_instantiations).
bool accept_instantiation(CUgraphExec* exec, CUgraph g, const CUDA_GRAPH_INSTANTIATE_PARAMS* p);

CUresult CUDAAPI fake_cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  FAKE_ENTER();
  if (accept_instantiation(exec, g, p)) {
    p->hErrNode_out = nullptr;
    p->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
    return CUDA_SUCCESS;
  }
  *exec = nullptr;
  p->hErrNode_out = nullptr;
  for (const auto& node : st().graph_nodes) {
    if (node->graph == reinterpret_cast<int*>(g)) {
      p->hErrNode_out = reinterpret_cast<CUgraphNode>(node.get());
    }
  }
  p->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
  count("graph_instantiations_refused");
  return fail(CUDA_ERROR_INVALID_VALUE);
}

// Conditional handles remember the graph that made them. A conditional node may test a handle of its own
// graph or of a graph it is (transitively) a body of, and only one node may test a handle; anything else
// is CUDA_ERROR_INVALID_VALUE, as the real driver answers (driver 580.159.04: a handle of another graph,
// a handle a second node tests, a value no cuGraphConditionalHandleCreate returned). A driver older than
// 12.8 knows neither switch nodes nor an if with an else body: modelled as CUDA_ERROR_INVALID_VALUE too
// (not measured).
CUresult CUDAAPI fake_cuGraphConditionalHandleCreate(CUgraphConditionalHandle* h, CUgraph g, CUcontext ctx, unsigned,
                                                     unsigned) {
  FAKE_ENTER();
  if (!known_context(as_ctx(ctx)) || !as_ctx(ctx)->alive ||
      st().graphs.count(g) + st().body_parents.count(reinterpret_cast<int*>(g)) == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  *h = 0x5000 + st().next_id++;
  st().conditional_handles[*h] = reinterpret_cast<int*>(g);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuGraphAddNode(CUgraphNode* n, CUgraph g, const CUgraphNode* deps, const CUgraphEdgeData*,
                                     std::size_t count_deps, CUgraphNodeParams* p) {
  FAKE_ENTER();
  if (p->type != CU_GRAPH_NODE_TYPE_CONDITIONAL) {
    return fail(CUDA_ERROR_NOT_SUPPORTED);  // the fake makes only conditional nodes this way
  }
  CUDA_CONDITIONAL_NODE_PARAMS& c = p->conditional;
  const bool newer = c.type == CU_GRAPH_COND_TYPE_SWITCH || (c.type == CU_GRAPH_COND_TYPE_IF && c.size == 2);
  if (newer && driver_version() < 12080) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  const auto made = st().conditional_handles.find(c.handle);
  if (made == st().conditional_handles.end() || !known_context(as_ctx(c.ctx)) || !as_ctx(c.ctx)->alive) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  bool ours = false;
  for (int* graph = reinterpret_cast<int*>(g); graph != nullptr && !ours;) {
    ours = graph == made->second;
    auto parent = st().body_parents.find(graph);
    graph = parent != st().body_parents.end() ? parent->second : nullptr;
  }
  bool tested = false;
  for (const auto& node : st().graph_nodes) {
    tested =
        tested || (node->graph != nullptr && node->type == CU_GRAPH_NODE_TYPE_CONDITIONAL && node->handle == c.handle);
  }
  const unsigned most = c.type == CU_GRAPH_COND_TYPE_SWITCH ? 1024u : c.type == CU_GRAPH_COND_TYPE_IF ? 2u : 1u;
  if (!ours || tested || c.size == 0 || c.size > most) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  *n = add_graph_node(g, deps, count_deps);
  auto* node = reinterpret_cast<fake_graph_node*>(*n);
  node->type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  node->handle = c.handle;
  for (unsigned i = 0; i < c.size; ++i) {
    node->bodies.push_back(new int(0));
    st().body_parents[node->bodies.back()] = reinterpret_cast<int*>(g);
    node->body_handles.push_back(reinterpret_cast<CUgraph>(node->bodies.back()));
  }
  c.phGraph_out = node->body_handles.data();  // owned by the node, as the driver's array is
  count("conditional_nodes");
  return CUDA_SUCCESS;
}

// --- batched copies and stream memory operations ----------------------------------------------------
// The batch entry points check what the real driver checks (attribute indices, source access orders,
// the legacy default stream) and refuse an address freed earlier with the index of its copy; the log
// records the descriptors cudrv passed. FAKE_CUDA_HIDE (comma-separated names) hides entry points, as
// a driver older than CUDA 12.8 lacks cuMemcpyBatchAsync.

bool freed_address(CUdeviceptr p) {
  for (auto& [size, list] : st().freed) {
    for (void* a : list) {
      const auto start = reinterpret_cast<CUdeviceptr>(a);
      if (p >= start && p < start + std::max<std::size_t>(size, 1)) {
        return true;
      }
    }
  }
  return false;
}

std::string hint(const CUmemLocation& l) {
  return std::to_string(static_cast<int>(l.type)) + ":" + std::to_string(l.id);
}

CUresult CUDAAPI fake_cuMemcpyBatchAsync(CUdeviceptr* dsts, CUdeviceptr* srcs, std::size_t* sizes, std::size_t n,
                                         CUmemcpyAttributes* attrs, std::size_t* idxs, std::size_t num_attrs,
                                         std::size_t* fail_idx, CUstream h) {
  FAKE_ENTER();
  count("memcpy_batch");
  *fail_idx = SIZE_MAX;
  if (h == nullptr || h == CU_STREAM_LEGACY || !usable_stream(h) || stream_context(h) == nullptr) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  if (n == 0 || num_attrs == 0 || num_attrs > n || idxs[0] != 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  std::string line = "memcpy_batch n=" + std::to_string(n) + " attrs=" + std::to_string(num_attrs) + " idx=";
  std::string orders, flags, src_hints, dst_hints;
  for (std::size_t k = 0; k < num_attrs; ++k) {
    if ((k > 0 && idxs[k] <= idxs[k - 1]) || idxs[k] >= n) {
      return fail(CUDA_ERROR_INVALID_VALUE);
    }
    if (attrs[k].srcAccessOrder < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
        attrs[k].srcAccessOrder > CU_MEMCPY_SRC_ACCESS_ORDER_ANY) {
      *fail_idx = idxs[k];
      return fail(CUDA_ERROR_INVALID_VALUE);
    }
    const char* sep = k > 0 ? "," : "";
    line += sep + std::to_string(idxs[k]);
    orders += sep + std::to_string(static_cast<int>(attrs[k].srcAccessOrder));
    flags += sep + std::to_string(attrs[k].flags);
    src_hints += sep + hint(attrs[k].srcLocHint);
    dst_hints += sep + hint(attrs[k].dstLocHint);
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (sizes[i] == 0 || dsts[i] == 0 || srcs[i] == 0 || freed_address(dsts[i]) || freed_address(srcs[i])) {
      *fail_idx = i;
      return fail(CUDA_ERROR_INVALID_VALUE);
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    copy(dsts[i], srcs[i], sizes[i]);
  }
  note(line + " order=" + orders + " flags=" + flags + " srchint=" + src_hints + " dsthint=" + dst_hints);
  return CUDA_SUCCESS;
}

void copy_3d(CUdeviceptr dst, std::size_t dst_row, std::size_t dst_layer, CUdeviceptr src, std::size_t src_row,
             std::size_t src_layer, std::size_t width, std::size_t height, std::size_t depth) {
  land_dma();
  for (std::size_t z = 0; z < depth; ++z) {
    for (std::size_t y = 0; y < height; ++y) {
      std::memmove(reinterpret_cast<void*>(dst + (z * dst_layer + y) * dst_row),
                   reinterpret_cast<const void*>(src + (z * src_layer + y) * src_row), width);
    }
  }
}

CUresult CUDAAPI fake_cuMemcpy3DBatchAsync(std::size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, std::size_t* fail_idx,
                                           unsigned long long flags, CUstream h) {
  FAKE_ENTER();
  count("memcpy_3d_batch");
  *fail_idx = SIZE_MAX;
  if (h == nullptr || h == CU_STREAM_LEGACY || !usable_stream(h) || stream_context(h) == nullptr || flags != 0 ||
      n == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  std::string line = "memcpy_3d_batch n=" + std::to_string(n);
  for (std::size_t i = 0; i < n; ++i) {
    const CUDA_MEMCPY3D_BATCH_OP& o = ops[i];
    if (o.src.type != CU_MEMCPY_OPERAND_TYPE_POINTER || o.dst.type != CU_MEMCPY_OPERAND_TYPE_POINTER ||
        o.extent.width == 0 || o.extent.height == 0 || o.extent.depth == 0 ||
        o.srcAccessOrder < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM || o.srcAccessOrder > CU_MEMCPY_SRC_ACCESS_ORDER_ANY ||
        freed_address(o.src.op.ptr.ptr) || freed_address(o.dst.op.ptr.ptr)) {
      *fail_idx = i;
      return fail(CUDA_ERROR_INVALID_VALUE);
    }
    line += " [" + std::to_string(o.extent.width) + "x" + std::to_string(o.extent.height) + "x" +
            std::to_string(o.extent.depth) + " src_row=" + std::to_string(o.src.op.ptr.rowLength) +
            " src_layer=" + std::to_string(o.src.op.ptr.layerHeight) +
            " dst_row=" + std::to_string(o.dst.op.ptr.rowLength) +
            " dst_layer=" + std::to_string(o.dst.op.ptr.layerHeight) +
            " order=" + std::to_string(static_cast<int>(o.srcAccessOrder)) + " flags=" + std::to_string(o.flags) + "]";
  }
  for (std::size_t i = 0; i < n; ++i) {
    const CUDA_MEMCPY3D_BATCH_OP& o = ops[i];
    copy_3d(o.dst.op.ptr.ptr, o.dst.op.ptr.rowLength, o.dst.op.ptr.layerHeight, o.src.op.ptr.ptr,
            o.src.op.ptr.rowLength, o.src.op.ptr.layerHeight, o.extent.width, o.extent.height, o.extent.depth);
  }
  note(line);
  return CUDA_SUCCESS;
}

CUdeviceptr side(CUmemorytype type, CUdeviceptr device, const void* host) {
  return type == CU_MEMORYTYPE_HOST ? reinterpret_cast<CUdeviceptr>(host) : device;
}

CUresult CUDAAPI fake_cuMemcpy2DAsync(const CUDA_MEMCPY2D* c, CUstream h) {
  FAKE_ENTER();
  count("memcpy_2d_async");
  if (!usable_stream(h) || freed_address(side(c->dstMemoryType, c->dstDevice, c->dstHost)) ||
      freed_address(side(c->srcMemoryType, c->srcDevice, c->srcHost))) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  copy_3d(side(c->dstMemoryType, c->dstDevice, c->dstHost), c->dstPitch, c->Height,
          side(c->srcMemoryType, c->srcDevice, c->srcHost), c->srcPitch, c->Height, c->WidthInBytes, c->Height, 1);
  return CUDA_SUCCESS;
}

// Stream memory operations: 64-bit ones where the device reports them (sm_90), NOR nowhere; waits are
// logged (nothing runs concurrently here), writes land at once.
CUresult memory_op(fake_context* c, const CUstreamBatchMemOpParams& p, std::string& line) {
  const bool wide = p.operation == CU_STREAM_MEM_OP_WAIT_VALUE_64 || p.operation == CU_STREAM_MEM_OP_WRITE_VALUE_64;
  if (wide && st().devices[static_cast<std::size_t>(c->device)] < 90) {
    return fail(CUDA_ERROR_NOT_SUPPORTED);
  }
  switch (p.operation) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32:
    case CU_STREAM_MEM_OP_WAIT_VALUE_64:
      if ((p.waitValue.flags & 0x3u) == CU_STREAM_WAIT_VALUE_NOR ||
          (p.waitValue.flags & CU_STREAM_WAIT_VALUE_FLUSH) != 0) {
        return fail(CUDA_ERROR_INVALID_VALUE);
      }
      line += std::string(wide ? "wait64 " : "wait32 ") + hex(reinterpret_cast<void*>(p.waitValue.address)) + " " +
              std::to_string(wide ? p.waitValue.value64 : p.waitValue.value) +
              " flags=" + std::to_string(p.waitValue.flags) + ";";
      return CUDA_SUCCESS;
    case CU_STREAM_MEM_OP_WRITE_VALUE_32:
      std::memcpy(reinterpret_cast<void*>(p.writeValue.address), &p.writeValue.value, 4);
      line += "write32 " + hex(reinterpret_cast<void*>(p.writeValue.address)) + " " +
              std::to_string(p.writeValue.value) + ";";
      return CUDA_SUCCESS;
    case CU_STREAM_MEM_OP_WRITE_VALUE_64:
      std::memcpy(reinterpret_cast<void*>(p.writeValue.address), &p.writeValue.value64, 8);
      line += "write64 " + hex(reinterpret_cast<void*>(p.writeValue.address)) + " " +
              std::to_string(p.writeValue.value64) + ";";
      return CUDA_SUCCESS;
    case CU_STREAM_MEM_OP_BARRIER:
      line += "barrier " + std::to_string(p.memoryBarrier.flags) + ";";
      return CUDA_SUCCESS;
    default: return fail(CUDA_ERROR_INVALID_VALUE);  // flushes of remote writes: no fake device has them
  }
}

// fake_cuda_memops_need_current(1): the stream memory operations refuse a stream whose context is
// not current (CUDA_ERROR_INVALID_CONTEXT), as a driver that validates the flag's address against the
// current context would.
std::atomic<bool> memops_need_current{false};

CUresult stream_memory_ops(CUstream h, unsigned n, const CUstreamBatchMemOpParams* ops, const char* what) {
  fake_context* c = stream_context(h);
  if (!usable_stream(h) || c == nullptr) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  if (memops_need_current.load() && as_ctx(current()) != c) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  std::string line = std::string(what) + " ";
  for (unsigned i = 0; i < n; ++i) {
    if (CUresult r = memory_op(c, ops[i], line); r != CUDA_SUCCESS) {
      return r;
    }
  }
  note(line);
  return CUDA_SUCCESS;
}

template <CUstreamBatchMemOpType Op, class V>
CUresult single_memory_op(CUstream h, CUdeviceptr addr, V value, unsigned flags) {
  CUstreamBatchMemOpParams p{};
  p.operation = Op;
  if constexpr (Op == CU_STREAM_MEM_OP_WAIT_VALUE_32 || Op == CU_STREAM_MEM_OP_WAIT_VALUE_64) {
    p.waitValue.address = addr;
    p.waitValue.flags = flags;
    if constexpr (sizeof(V) == 4)
      p.waitValue.value = value;
    else
      p.waitValue.value64 = value;
  } else {
    p.writeValue.address = addr;
    p.writeValue.flags = flags;
    if constexpr (sizeof(V) == 4)
      p.writeValue.value = value;
    else
      p.writeValue.value64 = value;
  }
  return stream_memory_ops(h, 1, &p, "memop");
}

CUresult CUDAAPI fake_cuStreamWaitValue32(CUstream h, CUdeviceptr a, cuuint32_t v, unsigned f) {
  FAKE_ENTER();
  return single_memory_op<CU_STREAM_MEM_OP_WAIT_VALUE_32>(h, a, v, f);
}
CUresult CUDAAPI fake_cuStreamWaitValue64(CUstream h, CUdeviceptr a, cuuint64_t v, unsigned f) {
  FAKE_ENTER();
  return single_memory_op<CU_STREAM_MEM_OP_WAIT_VALUE_64>(h, a, v, f);
}
CUresult CUDAAPI fake_cuStreamWriteValue32(CUstream h, CUdeviceptr a, cuuint32_t v, unsigned f) {
  FAKE_ENTER();
  return single_memory_op<CU_STREAM_MEM_OP_WRITE_VALUE_32>(h, a, v, f);
}
CUresult CUDAAPI fake_cuStreamWriteValue64(CUstream h, CUdeviceptr a, cuuint64_t v, unsigned f) {
  FAKE_ENTER();
  return single_memory_op<CU_STREAM_MEM_OP_WRITE_VALUE_64>(h, a, v, f);
}
CUresult CUDAAPI fake_cuStreamBatchMemOp(CUstream h, unsigned n, CUstreamBatchMemOpParams* ops, unsigned flags) {
  FAKE_ENTER();
  if (flags != 0 || n == 0 || n > 255) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  return stream_memory_ops(h, n, ops, "batch_memop");
}

CUresult CUDAAPI fake_cuGraphAddBatchMemOpNode(CUgraphNode* node, CUgraph g, const CUgraphNode* dep_nodes,
                                               std::size_t deps, const CUDA_BATCH_MEM_OP_NODE_PARAMS* p) {
  FAKE_ENTER();
  if (!known_context(as_ctx(p->ctx)) || !as_ctx(p->ctx)->alive || p->count == 0 || p->flags != 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  const bool wide_refused = st().devices[static_cast<std::size_t>(as_ctx(p->ctx)->device)] < 90;
  std::string line =
      "graph_memop deps=" + std::to_string(deps) + " ctx_device=" + std::to_string(as_ctx(p->ctx)->device) + " ";
  for (unsigned i = 0; i < p->count; ++i) {
    const auto op = p->paramArray[i].operation;
    if (wide_refused && (op == CU_STREAM_MEM_OP_WAIT_VALUE_64 || op == CU_STREAM_MEM_OP_WRITE_VALUE_64)) {
      return fail(CUDA_ERROR_NOT_SUPPORTED);
    }
    line += std::to_string(static_cast<int>(op)) + ";";
  }
  *node = add_graph_node(g, dep_nodes, deps);
  reinterpret_cast<fake_graph_node*>(*node)->type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
  note(line);
  return CUDA_SUCCESS;
}

// --- IPC: shareable pools, pool pointer export/import, legacy IPC (issue 17) ----------------------------
// Pools made here join st().pools (handle 0x9000 + index), so that the attribute calls above work on
// them. A POSIX export is a real memfd holding the pool's index, so it can travel over a Unix socket;
// an import is a new pool handle that remembers its source. Imported and opened addresses are new
// fake allocations (their bytes are not shared: the tests check calls, errors and order). The log
// gets "pool_destroy <pool>", "free <address>" (cuMemFree) and "ipc_close <address>" lines; a pool
// destroyed while addresses imported from it are live counts "pool_destroyed_with_imports".

struct fake_pool {
  int device = 0;
  unsigned handle_types = 0;
  bool alive = true;
  long source = -1;       // imported: the index of the exported pool
  bool exported = false;  // as the real driver (580): pointers export only after the pool was exported once
};

std::map<std::size_t, fake_pool>& pool_info() {
  static auto* m = new std::map<std::size_t, fake_pool>;
  return *m;
}
std::map<CUdeviceptr, std::size_t>& pool_of_allocation() {  // cuMemAllocFromPoolAsync and imports
  static auto* m = new std::map<CUdeviceptr, std::size_t>;
  return *m;
}
std::map<CUdeviceptr, std::size_t>& ipc_mappings() {  // cuIpcOpenMemHandle: address -> size
  static auto* m = new std::map<CUdeviceptr, std::size_t>;
  return *m;
}

// A pool's usage: the live allocations made from it; its reserve keeps whole 32 MiB chunks of them, or
// what the last trim kept when that is larger.
std::size_t pool_usage(CUmemoryPool p, bool reserved) {
  std::size_t used = 0;
  for (const auto& [address, index] : pool_of_allocation()) {
    auto live = st().live.find(address);
    if (index == pool_index(p) && live != st().live.end()) {
      used += live->second.size;
    }
  }
  if (!reserved) {
    return used;
  }
  constexpr std::size_t chunk = std::size_t{32} << 20;
  std::size_t out = (used + chunk - 1) / chunk * chunk;
  if (auto t = st().pool_trimmed_to.find(pool_index(p)); t != st().pool_trimmed_to.end()) {
    out = std::max(std::min(out, t->second), used);
  }
  return out;
}

fake_pool* created_pool(CUmemoryPool p) {
  auto it = pool_info().find(pool_index(p));
  return it != pool_info().end() && it->second.alive ? &it->second : nullptr;
}

CUmemoryPool add_pool(const fake_pool& info) {
  state_t& s = st();
  const std::size_t index = s.pools.size();
  CUmemoryPool h = reinterpret_cast<CUmemoryPool>(0x9000 + index);
  s.pools.push_back(h);
  s.pool_threshold.push_back(0);
  pool_info()[index] = info;
  return h;
}

// Pools of every kind (device, host, host NUMA, managed) with the IPC bookkeeping: POSIX descriptors
// are the only shareable handle type here.
CUresult CUDAAPI fake_cuMemPoolCreate(CUmemoryPool* out, const CUmemPoolProps* p) {
  FAKE_ENTER();
  state_t& s = st();
  if (out == nullptr || p == nullptr) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  const bool managed = static_cast<int>(p->allocType) == 2;
  if (!managed && p->allocType != CU_MEM_ALLOCATION_TYPE_PINNED) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  switch (static_cast<int>(p->location.type)) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (p->location.id < 0 || p->location.id >= static_cast<int>(s.devices.size())) {
        return fail(CUDA_ERROR_INVALID_DEVICE);
      }
      break;
    case CU_MEM_LOCATION_TYPE_HOST:
      if (p->handleTypes != CU_MEM_HANDLE_TYPE_NONE) {
        return fail(CUDA_ERROR_INVALID_VALUE);  // host pools are not IPC capable
      }
      break;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      if (p->location.id < 0 || p->location.id > 1) {
        return fail(CUDA_ERROR_INVALID_VALUE);
      }
      break;
    case 0:  // CU_MEM_LOCATION_TYPE_NONE: managed pools only
      if (!managed) {
        return fail(CUDA_ERROR_INVALID_VALUE);
      }
      break;
    default: return fail(CUDA_ERROR_INVALID_VALUE);
  }
  if (fabric_without_imex && (p->handleTypes & 0x8u) != 0) {
    return fail(CUDA_ERROR_NOT_PERMITTED);  // no IMEX channel
  }
  if ((p->handleTypes & ~static_cast<unsigned>(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) != 0) {
    return fail(CUDA_ERROR_NOT_SUPPORTED);  // only POSIX descriptors here
  }
  const int device = p->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? p->location.id : -1;
  *out = add_pool({device, static_cast<unsigned>(p->handleTypes), true, -1});
  pst().props[*out] = *p;
  pst().alive[*out] = true;
  count("pools_created");
  note("pool_create " + hex(*out) + " type " + std::to_string(static_cast<int>(p->allocType)) + " location " +
       describe_location(p->location) + " handles " + std::to_string(static_cast<int>(p->handleTypes)) + " max " +
       std::to_string(p->maxSize));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemPoolDestroy(CUmemoryPool p) {
  FAKE_ENTER();
  fake_pool* info = created_pool(p);
  if (info == nullptr) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  for (auto& [address, index] : pool_of_allocation()) {
    if (index == pool_index(p) && st().live.count(address) != 0 && info->source >= 0) {
      count("pool_destroyed_with_imports");
    }
  }
  info->alive = false;
  pst().alive[p] = false;
  note("pool_destroy " + hex(p));
  count("pools_destroyed");
  return CUDA_SUCCESS;
}

// A device's default pool allocates on the stream's device; a created pool where it lives (-1: host);
// an imported pool cannot allocate.
CUresult CUDAAPI fake_cuMemAllocFromPoolAsync(CUdeviceptr* p, std::size_t size, CUmemoryPool pool, CUstream h) {
  FAKE_ENTER();
  FAKE_INJECTED_ALLOCATION_FAILURE();
  fake_context* c = stream_context(h);
  if (!usable_stream(h) || c == nullptr) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  int device = c->device;
  const bool created = pool_info().count(pool_index(pool)) != 0;
  if (created) {
    fake_pool* info = created_pool(pool);
    if (info == nullptr || info->source >= 0) {
      return fail(CUDA_ERROR_INVALID_VALUE);
    }
    device = info->device;
  }
  *p = reinterpret_cast<CUdeviceptr>(allocate_bytes(size));
  st().live[*p] = {size, nullptr, device};
  if (created) {
    pool_of_allocation()[*p] = pool_index(pool);
  }
  count("allocations");
  count("pool_allocations");
  note("alloc_from_pool " + hex(reinterpret_cast<void*>(*p)) + " pool " + hex(pool) + " on " + hex(h));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemPoolExportToShareableHandle(void* out, CUmemoryPool pool, CUmemAllocationHandleType type,
                                                       unsigned long long flags) {
  FAKE_ENTER();
  fake_pool* info = created_pool(pool);
  if (out == nullptr || info == nullptr || flags != 0 || info->source >= 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  if ((info->handle_types & static_cast<unsigned>(type)) == 0 || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return fail(CUDA_ERROR_INVALID_VALUE);  // the pool was not created shareable this way
  }
  const int fd = ::memfd_create("fake-cuda-pool", MFD_CLOEXEC);
  const long index = static_cast<long>(pool_index(pool));
  if (fd < 0 || ::write(fd, &index, sizeof(index)) != static_cast<ssize_t>(sizeof(index))) {
    return fail(CUDA_ERROR_OPERATING_SYSTEM);
  }
  *static_cast<int*>(out) = fd;
  info->exported = true;
  count("pool_exports");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemPoolImportFromShareableHandle(CUmemoryPool* pool, void* handle,
                                                         CUmemAllocationHandleType type, unsigned long long flags) {
  FAKE_ENTER();
  if (pool == nullptr || flags != 0 || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  const int fd = static_cast<int>(reinterpret_cast<std::uintptr_t>(handle));
  long index = -1;
  if (::pread(fd, &index, sizeof(index), 0) != static_cast<ssize_t>(sizeof(index)) || pool_info().count(index) == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);  // not a descriptor this driver exported
  }
  fake_pool imported = pool_info()[static_cast<std::size_t>(index)];
  imported.alive = true;
  imported.source = index;
  *pool = add_pool(imported);
  count("pool_imports");
  return CUDA_SUCCESS;
}

struct fake_export_data {  // what the 64 opaque bytes hold here
  CUdeviceptr address;
  std::size_t size;
  std::size_t pool;
};

CUresult CUDAAPI fake_cuMemPoolExportPointer(CUmemPoolPtrExportData* data, CUdeviceptr p) {
  FAKE_ENTER();
  auto it = pool_of_allocation().find(p);
  if (data == nullptr || it == pool_of_allocation().end() || st().live.count(p) == 0 ||
      pool_info()[it->second].handle_types == 0 || !pool_info()[it->second].exported) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  *data = CUmemPoolPtrExportData{};
  const fake_export_data d{p, st().live[p].size, it->second};
  static_assert(sizeof(d) <= sizeof(data->reserved));
  std::memcpy(data->reserved, &d, sizeof(d));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemPoolImportPointer(CUdeviceptr* out, CUmemoryPool pool, CUmemPoolPtrExportData* data) {
  FAKE_ENTER();
  fake_pool* info = created_pool(pool);
  if (out == nullptr || data == nullptr || info == nullptr) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  fake_export_data d{};
  std::memcpy(&d, data->reserved, sizeof(d));
  auto source = st().live.find(d.address);
  auto source_pool = pool_of_allocation().find(d.address);
  if (info->source < 0 || static_cast<std::size_t>(info->source) != d.pool || source == st().live.end() ||
      source_pool == pool_of_allocation().end() || source_pool->second != d.pool) {
    return fail(CUDA_ERROR_INVALID_VALUE);  // not an allocation of the pool this handle imported
  }
  // The mapping has the allocation's real size, whatever the 64 bytes say (the real driver keeps it).
  const std::size_t size = source->second.size;
  *out = reinterpret_cast<CUdeviceptr>(allocate_bytes(size));
  st().live[*out] = {size, nullptr, info->device};
  pool_of_allocation()[*out] = pool_index(pool);
  count("pointer_imports");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr p) {
  FAKE_ENTER();
  auto it = st().live.find(p);
  if (handle == nullptr || it == st().live.end() || it->second.ctx == nullptr) {
    return fail(CUDA_ERROR_INVALID_VALUE);  // legacy IPC: cuMemAlloc memory only
  }
  *handle = CUipcMemHandle{};
  const std::size_t size = it->second.size;
  std::memcpy(handle->reserved, &p, sizeof(p));
  std::memcpy(handle->reserved + sizeof(p), &size, sizeof(size));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuIpcOpenMemHandle(CUdeviceptr* out, CUipcMemHandle handle, unsigned flags) {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  CUdeviceptr source = 0;
  std::memcpy(&source, handle.reserved, sizeof(source));
  auto it = st().live.find(source);
  if (out == nullptr || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS || it == st().live.end() ||
      it->second.ctx == nullptr) {
    return fail(CUDA_ERROR_INVALID_VALUE);  // legacy IPC names cuMemAlloc memory
  }
  // The mapping has the allocation's real size (the handle's other bytes are the driver's, not a size).
  const std::size_t size = it->second.size;
  *out = reinterpret_cast<CUdeviceptr>(allocate_bytes(size));
  st().live[*out] = {size, as_ctx(current()), as_ctx(current())->device};
  ipc_mappings()[*out] = size;
  count("ipc_opened");
  count("ipc_opened_in:" + std::to_string(as_ctx(current())->device));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuIpcCloseMemHandle(CUdeviceptr p) {
  FAKE_ENTER();
  if (ipc_mappings().erase(p) == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  free_allocation(p);
  note("ipc_close " + hex(reinterpret_cast<void*>(p)));
  count("ipc_closed");
  return CUDA_SUCCESS;
}

// --- virtual memory management ---------------------------------------------------------------------
// Reservations hand out addresses that are never dereferenced; physical memory is bookkeeping only. The
// driver's rules that cudrv must respect are enforced: sizes, offsets and addresses on the minimum
// granularity, mappings inside one reservation and not over another, whole mappings unmapped, access set
// over fully mapped spans, a reservation freed only when nothing is mapped in it. fake_cuda_vmm_fail
// makes the n-th next call of an entry point fail, for the rollback tests.

struct vmm_physical {
  std::size_t size = 0;
  CUmemAllocationProp prop{};
  int handles = 0;   // handles not released (created or imported)
  int mappings = 0;  // live mappings of it
};

struct vmm_mapping {
  std::size_t size = 0;
  int physical = 0;
  std::map<std::pair<int, int>, unsigned long long> access;  // (location type, id) -> flags
};

struct vmm_t {
  std::map<CUdeviceptr, std::size_t> reservations;
  CUdeviceptr next_va = 0x100000000000ULL;
  std::map<CUmemGenericAllocationHandle, int> handles;  // handle -> physical id
  CUmemGenericAllocationHandle next_handle = 0x5000;
  std::map<int, vmm_physical> physical;
  int next_physical = 1;
  std::map<CUdeviceptr, vmm_mapping> mappings;
  std::size_t minimum = std::size_t{2} << 20;
  std::size_t recommended = std::size_t{2} << 20;
  std::map<std::string, long long> fail_in;  // entry point -> calls left until one fails
  std::map<int, int> exported_fds;           // fd -> physical id
};

vmm_t& vmm() {
  static auto* v = new vmm_t;
  return *v;
}

bool injected_failure(const char* api) {
  auto it = vmm().fail_in.find(api);
  if (it == vmm().fail_in.end() || --it->second > 0) {
    return false;
  }
  vmm().fail_in.erase(it);
  count(std::string("injected:") + api);
  return true;
}

bool valid_device_location(const CUmemLocation& loc) {
  return loc.type == CU_MEM_LOCATION_TYPE_DEVICE && loc.id >= 0 && loc.id < static_cast<int>(st().devices.size());
}

std::string hexa(CUdeviceptr p) { return hex(reinterpret_cast<void*>(p)); }

CUresult CUDAAPI fake_cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, std::size_t n) {  // bench_vmm's baseline
  FAKE_ENTER();
  if (current() == nullptr || !is_device(dst) || !is_device(src)) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  return copy(dst, src, n);
}

CUresult CUDAAPI fake_cuMemGetAllocationGranularity(std::size_t* g, const CUmemAllocationProp* prop,
                                                    CUmemAllocationGranularity_flags option) {
  FAKE_ENTER();
  if (prop == nullptr || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && !valid_device_location(prop->location))) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  *g = option == CU_MEM_ALLOC_GRANULARITY_MINIMUM ? vmm().minimum : vmm().recommended;
  count("vmm_granularity_queries");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemAddressReserve(CUdeviceptr* ptr, std::size_t size, std::size_t alignment, CUdeviceptr addr,
                                          unsigned long long flags) {
  FAKE_ENTER();
  if (flags != 0 || size == 0 || size % 4096 != 0 || (alignment & (alignment - 1)) != 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  if (injected_failure("cuMemAddressReserve")) {
    return fail(CUDA_ERROR_OUT_OF_MEMORY);
  }
  vmm_t& v = vmm();
  const std::size_t align = std::max<std::size_t>(alignment, v.minimum);
  auto overlaps = [&](CUdeviceptr a) {
    for (auto& [base, bytes] : v.reservations) {
      if (a < base + bytes && base < a + size) {
        return true;
      }
    }
    return false;
  };
  CUdeviceptr out = 0;
  if (addr != 0 && addr % align == 0 && !overlaps(addr)) {
    out = addr;  // the hint is honoured when it is free
  } else {
    out = (v.next_va + align - 1) / align * align;
    v.next_va = out + size + v.minimum;  // a gap between reservations
  }
  v.reservations[out] = size;
  *ptr = out;
  count("vmm_reserve");
  note("vmm_reserve " + hexa(out));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemAddressFree(CUdeviceptr ptr, std::size_t size) {
  FAKE_ENTER();
  vmm_t& v = vmm();
  auto it = v.reservations.find(ptr);
  if (it == v.reservations.end() || it->second != size) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  for (auto& [a, m] : v.mappings) {
    if (a >= ptr && a < ptr + size) {
      count("vmm_free_while_mapped");
      return fail(CUDA_ERROR_INVALID_VALUE);
    }
  }
  v.reservations.erase(it);
  count("vmm_free");
  note("vmm_free " + hexa(ptr));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemCreate(CUmemGenericAllocationHandle* handle, std::size_t size,
                                  const CUmemAllocationProp* prop, unsigned long long flags) {
  FAKE_ENTER();
  FAKE_INJECTED_ALLOCATION_FAILURE();
  vmm_t& v = vmm();
  if (flags != 0 || prop == nullptr || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || size == 0 ||
      size % v.minimum != 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && !valid_device_location(prop->location)) {
    return fail(CUDA_ERROR_INVALID_DEVICE);
  }
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE && prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE) {
    return fail(CUDA_ERROR_INVALID_VALUE);  // host allocations are not shareable
  }
  if (fabric_without_imex && (prop->requestedHandleTypes & 0x8u) != 0) {
    return fail(CUDA_ERROR_NOT_PERMITTED);  // no IMEX channel
  }
  if (injected_failure("cuMemCreate")) {
    return fail(CUDA_ERROR_OUT_OF_MEMORY);
  }
  const int id = v.next_physical++;
  vmm_physical& p = v.physical[id];
  p.size = size;
  p.prop = *prop;
  p.handles = 1;
  *handle = v.next_handle++;
  v.handles[*handle] = id;
  count("vmm_create");
  note("vmm_create " + std::to_string(*handle));
  return CUDA_SUCCESS;
}

void drop_physical_if_unused(int id) {
  auto it = vmm().physical.find(id);
  if (it != vmm().physical.end() && it->second.handles == 0 && it->second.mappings == 0) {
    vmm().physical.erase(it);
    count("vmm_physical_freed");
  }
}

CUresult CUDAAPI fake_cuMemRelease(CUmemGenericAllocationHandle handle) {
  FAKE_ENTER();
  vmm_t& v = vmm();
  auto it = v.handles.find(handle);
  if (it == v.handles.end()) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  const int id = it->second;
  v.handles.erase(it);
  --v.physical[id].handles;
  drop_physical_if_unused(id);
  count("vmm_release");
  note("vmm_release " + std::to_string(handle));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemMap(CUdeviceptr ptr, std::size_t size, std::size_t offset,
                               CUmemGenericAllocationHandle handle, unsigned long long flags) {
  FAKE_ENTER();
  vmm_t& v = vmm();
  auto h = v.handles.find(handle);
  if (flags != 0 || h == v.handles.end() || size == 0 || size % v.minimum != 0 || offset % v.minimum != 0 ||
      ptr % v.minimum != 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  vmm_physical& p = v.physical[h->second];
  if (offset > p.size || size > p.size - offset) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  bool inside = false;
  for (auto& [base, bytes] : v.reservations) {
    inside = inside || (ptr >= base && ptr + size <= base + bytes);
  }
  if (!inside) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  for (auto& [a, m] : v.mappings) {
    if (ptr < a + m.size && a < ptr + size) {
      count("vmm_map_over_mapped");
      return fail(CUDA_ERROR_INVALID_VALUE);
    }
  }
  if (injected_failure("cuMemMap")) {
    return fail(CUDA_ERROR_OUT_OF_MEMORY);
  }
  v.mappings[ptr] = vmm_mapping{size, h->second, {}};
  ++p.mappings;
  count("vmm_map");
  note("vmm_map " + hexa(ptr));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemUnmap(CUdeviceptr ptr, std::size_t size) {
  FAKE_ENTER();
  vmm_t& v = vmm();
  // Whole mappings only: every mapping the span touches must lie inside it, and it must touch one.
  std::vector<CUdeviceptr> victims;
  for (auto& [a, m] : v.mappings) {
    if (ptr < a + m.size && a < ptr + size) {
      if (a < ptr || a + m.size > ptr + size) {
        return fail(CUDA_ERROR_INVALID_VALUE);
      }
      victims.push_back(a);
    }
  }
  if (victims.empty()) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  for (CUdeviceptr a : victims) {
    const int id = v.mappings[a].physical;
    v.mappings.erase(a);
    --v.physical[id].mappings;
    drop_physical_if_unused(id);
    count("vmm_unmap");
    note("vmm_unmap " + hexa(a));
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemSetAccess(CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc, std::size_t n) {
  FAKE_ENTER();
  vmm_t& v = vmm();
  if (size == 0 || n == 0 || desc == nullptr || ptr % v.minimum != 0 || size % v.minimum != 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!valid_device_location(desc[i].location)) {
      return fail(CUDA_ERROR_INVALID_DEVICE);
    }
    if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
      return fail(CUDA_ERROR_INVALID_VALUE);
    }
  }
  // The span must be mapped without a hole.
  std::vector<vmm_mapping*> covered;
  CUdeviceptr at = ptr;
  while (at < ptr + size) {
    auto it = v.mappings.upper_bound(at);
    if (it == v.mappings.begin()) {
      return fail(CUDA_ERROR_INVALID_VALUE);
    }
    --it;
    if (at >= it->first + it->second.size) {
      return fail(CUDA_ERROR_INVALID_VALUE);
    }
    covered.push_back(&it->second);
    at = it->first + it->second.size;
  }
  if (injected_failure("cuMemSetAccess")) {
    return fail(CUDA_ERROR_OUT_OF_MEMORY);
  }
  for (vmm_mapping* m : covered) {
    for (std::size_t i = 0; i < n; ++i) {
      m->access[{desc[i].location.type, desc[i].location.id}] = desc[i].flags;
    }
  }
  count("vmm_set_access");
  note("vmm_set_access " + hexa(ptr) + " " + std::to_string(size) + " " + std::to_string(n));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemGetAccess(unsigned long long* flags, const CUmemLocation* loc, CUdeviceptr ptr) {
  FAKE_ENTER();
  auto it = vmm().mappings.upper_bound(ptr);
  if (it == vmm().mappings.begin()) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  --it;
  if (ptr >= it->first + it->second.size || !valid_device_location(*loc)) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  auto a = it->second.access.find({loc->type, loc->id});
  *flags = a != it->second.access.end() ? a->second : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                             CUmemGenericAllocationHandle handle) {
  FAKE_ENTER();
  auto it = vmm().handles.find(handle);
  if (it == vmm().handles.end()) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  *prop = vmm().physical[it->second].prop;
  prop->allocFlags.compressionType = CU_MEM_ALLOCATION_COMP_NONE;  // compression is a hint nobody grants here
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemExportToShareableHandle(void* out, CUmemGenericAllocationHandle handle,
                                                   CUmemAllocationHandleType type, unsigned long long flags) {
  FAKE_ENTER();
  auto it = vmm().handles.find(handle);
  if (it == vmm().handles.end() || flags != 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  const vmm_physical& p = vmm().physical[it->second];
  if ((p.prop.requestedHandleTypes & type) == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return fail(CUDA_ERROR_NOT_SUPPORTED);
  }
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return fail(CUDA_ERROR_OPERATING_SYSTEM);
  }
  vmm().exported_fds[fd] = it->second;
  *static_cast<int*>(out) = fd;
  count("vmm_export");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os,
                                                     CUmemAllocationHandleType type) {
  FAKE_ENTER();
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return fail(CUDA_ERROR_NOT_SUPPORTED);
  }
  auto it = vmm().exported_fds.find(static_cast<int>(reinterpret_cast<std::intptr_t>(os)));
  if (it == vmm().exported_fds.end() || vmm().physical.count(it->second) == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  ++vmm().physical[it->second].handles;
  *handle = vmm().next_handle++;
  vmm().handles[*handle] = it->second;
  count("vmm_import");
  note("vmm_import " + std::to_string(*handle));
  return CUDA_SUCCESS;
}

// --- arrays, textures, surfaces ---------------------------------------------------------------------
// Arrays keep their bytes on the host (dense rows of Width elements); cuMemcpy3DAsync copies between
// them and host or fake device memory at once. Destroying an array whose context is gone is refused,
// as the handle may name something else by then.

struct fake_array {
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  fake_context* ctx = nullptr;
  unsigned long long ctx_id = 0;
  bool alive = true;
  bool level = false;  // a level of a mipmapped array (destroyed with it)
  std::vector<unsigned char> bytes;
};

struct fake_mipmap {
  fake_context* ctx = nullptr;
  unsigned long long ctx_id = 0;
  bool alive = true;
  std::vector<fake_array*> levels;
};

struct array_state {
  std::vector<std::unique_ptr<fake_array>> arrays;
  std::vector<std::unique_ptr<fake_mipmap>> mipmaps;
  CUDA_ARRAY3D_DESCRIPTOR last_array{};
  CUDA_RESOURCE_DESC last_resource{};
  CUDA_TEXTURE_DESC last_texture{};
  CUDA_RESOURCE_VIEW_DESC last_view{};
  bool last_had_view = false;
  CUDA_MEMCPY3D last_copy{};
  unsigned long long next_object = 1;
  std::map<unsigned long long, unsigned long long> textures;  // handle -> context id
  std::map<unsigned long long, unsigned long long> surfaces;
};

array_state& arrays() {
  static auto* a = new array_state;
  return *a;
}

std::size_t channel_bytes(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
  }
}

std::size_t element_bytes(const CUDA_ARRAY3D_DESCRIPTOR& d) { return channel_bytes(d.Format) * d.NumChannels; }

bool context_alive(fake_context* c, unsigned long long id) { return c != nullptr && c->alive && c->id == id; }

fake_array* new_array(const CUDA_ARRAY3D_DESCRIPTOR& d, fake_context* c, bool level) {
  auto a = std::make_unique<fake_array>();
  a->desc = d;
  a->ctx = c;
  a->ctx_id = c->id;
  a->level = level;
  a->bytes.assign(d.Width * std::max<std::size_t>(d.Height, 1) * std::max<std::size_t>(d.Depth, 1) * element_bytes(d),
                  0xCD);
  arrays().arrays.push_back(std::move(a));
  return arrays().arrays.back().get();
}

bool valid_descriptor(const CUDA_ARRAY3D_DESCRIPTOR& d) {
  return d.Width != 0 && channel_bytes(d.Format) != 0 &&
         (d.NumChannels == 1 || d.NumChannels == 2 || d.NumChannels == 4) &&
         ((d.Flags & CUDA_ARRAY3D_CUBEMAP) == 0 || (d.Width == d.Height && d.Depth % 6 == 0));
}

CUresult CUDAAPI fake_cuArray3DCreate(CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  if (!valid_descriptor(*d)) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  arrays().last_array = *d;
  *out = reinterpret_cast<CUarray>(new_array(*d, as_ctx(current()), false));
  count("arrays_created");
  return CUDA_SUCCESS;
}

fake_array* as_array(CUarray a) {
  for (auto& p : arrays().arrays) {
    if (reinterpret_cast<CUarray>(p.get()) == a && p->alive) {
      return p.get();
    }
  }
  return nullptr;
}

CUresult CUDAAPI fake_cuArray3DGetDescriptor(CUDA_ARRAY3D_DESCRIPTOR* d, CUarray a) {
  FAKE_ENTER();
  fake_array* arr = as_array(a);
  if (arr == nullptr) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  *d = arr->desc;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuArrayDestroy(CUarray a) {
  FAKE_ENTER();
  fake_array* arr = as_array(a);
  if (arr == nullptr || arr->level) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  if (!context_alive(arr->ctx, arr->ctx_id)) {
    count("array_destroy_after_context");
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  arr->alive = false;
  note("array_destroy " + hex(a));
  count("arrays_destroyed");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMipmappedArrayCreate(CUmipmappedArray* out, const CUDA_ARRAY3D_DESCRIPTOR* d, unsigned levels) {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  if (!valid_descriptor(*d) || levels == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  arrays().last_array = *d;
  auto m = std::make_unique<fake_mipmap>();
  m->ctx = as_ctx(current());
  m->ctx_id = m->ctx->id;
  const bool layered = (d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
  for (unsigned l = 0; l < levels; ++l) {
    CUDA_ARRAY3D_DESCRIPTOR ld = *d;
    auto halve = [l](std::size_t v) { return v == 0 ? std::size_t{0} : std::max<std::size_t>(v >> l, 1); };
    ld.Width = halve(d->Width);
    ld.Height = halve(d->Height);
    ld.Depth = layered ? d->Depth : halve(d->Depth);
    m->levels.push_back(new_array(ld, m->ctx, true));
  }
  *out = reinterpret_cast<CUmipmappedArray>(m.get());
  arrays().mipmaps.push_back(std::move(m));
  count("mipmapped_arrays_created");
  return CUDA_SUCCESS;
}

fake_mipmap* as_mipmap(CUmipmappedArray m) {
  for (auto& p : arrays().mipmaps) {
    if (reinterpret_cast<CUmipmappedArray>(p.get()) == m && p->alive) {
      return p.get();
    }
  }
  return nullptr;
}

CUresult CUDAAPI fake_cuMipmappedArrayGetLevel(CUarray* out, CUmipmappedArray m, unsigned level) {
  FAKE_ENTER();
  fake_mipmap* mip = as_mipmap(m);
  if (mip == nullptr) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  if (level >= mip->levels.size()) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  *out = reinterpret_cast<CUarray>(mip->levels[level]);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMipmappedArrayDestroy(CUmipmappedArray m) {
  FAKE_ENTER();
  fake_mipmap* mip = as_mipmap(m);
  if (mip == nullptr) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  if (!context_alive(mip->ctx, mip->ctx_id)) {
    count("array_destroy_after_context");
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  mip->alive = false;
  for (fake_array* l : mip->levels) {
    l->alive = false;
  }
  count("mipmapped_arrays_destroyed");
  return CUDA_SUCCESS;
}

bool usable_resource(const CUDA_RESOURCE_DESC& r) {
  switch (r.resType) {
    case CU_RESOURCE_TYPE_ARRAY: return as_array(r.res.array.hArray) != nullptr;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY: return as_mipmap(r.res.mipmap.hMipmappedArray) != nullptr;
    case CU_RESOURCE_TYPE_LINEAR: return is_device(r.res.linear.devPtr);
    case CU_RESOURCE_TYPE_PITCH2D: return is_device(r.res.pitch2D.devPtr);
  }
  return false;
}

CUresult CUDAAPI fake_cuTexObjectCreate(CUtexObject* out, const CUDA_RESOURCE_DESC* r, const CUDA_TEXTURE_DESC* t,
                                        const CUDA_RESOURCE_VIEW_DESC* v) {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  if (!usable_resource(*r)) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  array_state& a = arrays();
  a.last_resource = *r;
  a.last_texture = *t;
  a.last_had_view = v != nullptr;
  a.last_view = v != nullptr ? *v : CUDA_RESOURCE_VIEW_DESC{};
  *out = a.next_object++;
  a.textures[*out] = as_ctx(current())->id;
  count("textures_created");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuTexObjectDestroy(CUtexObject t) {
  FAKE_ENTER();
  if (arrays().textures.erase(t) == 0) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  note("texture_destroy " + std::to_string(t));
  count("textures_destroyed");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuSurfObjectCreate(CUsurfObject* out, const CUDA_RESOURCE_DESC* r) {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  if (r->resType != CU_RESOURCE_TYPE_ARRAY || as_array(r->res.array.hArray) == nullptr ||
      (as_array(r->res.array.hArray)->desc.Flags & CUDA_ARRAY3D_SURFACE_LDST) == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  arrays().last_resource = *r;
  *out = arrays().next_object++;
  arrays().surfaces[*out] = as_ctx(current())->id;
  count("surfaces_created");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuSurfObjectDestroy(CUsurfObject h) {
  FAKE_ENTER();
  if (arrays().surfaces.erase(h) == 0) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  count("surfaces_destroyed");
  return CUDA_SUCCESS;
}

// One side of a 3-D copy: the address of row (y, z) of the box.
struct copy_side {
  unsigned char* base = nullptr;
  std::size_t pitch = 0, height = 0, x = 0, y = 0, z = 0;
  std::size_t rows = 0, slices = 0;  // for arrays: the bounds
  bool array = false;
};

bool side_of(CUmemorytype type, CUarray a, const void* host, CUdeviceptr dev, std::size_t pitch, std::size_t height,
             std::size_t x, std::size_t y, std::size_t z, copy_side* out) {
  if (type == CU_MEMORYTYPE_ARRAY) {
    fake_array* arr = as_array(a);
    if (arr == nullptr) {
      return false;
    }
    out->base = arr->bytes.data();
    out->pitch = arr->desc.Width * element_bytes(arr->desc);
    out->height = std::max<std::size_t>(arr->desc.Height, 1);
    out->rows = out->height;
    out->slices = std::max<std::size_t>(arr->desc.Depth, 1);
    out->array = true;
  } else {
    out->base = type == CU_MEMORYTYPE_HOST ? static_cast<unsigned char*>(const_cast<void*>(host))
                                           : reinterpret_cast<unsigned char*>(dev);
    out->pitch = pitch;
    out->height = height;
  }
  out->x = x;
  out->y = y;
  out->z = z;
  return out->base != nullptr;
}

CUresult CUDAAPI fake_cuMemcpy3DAsync(const CUDA_MEMCPY3D* c, CUstream h) {
  FAKE_ENTER();
  count("memcpy_3d_async");
  if (!usable_stream(h) || stream_context(h) == nullptr) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  // Pointer sides: a freed address is refused (the batched copies' fallback reports which copy failed).
  if ((c->srcMemoryType != CU_MEMORYTYPE_ARRAY && freed_address(side(c->srcMemoryType, c->srcDevice, c->srcHost))) ||
      (c->dstMemoryType != CU_MEMORYTYPE_ARRAY && freed_address(side(c->dstMemoryType, c->dstDevice, c->dstHost)))) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  copy_side src, dst;
  if (!side_of(c->srcMemoryType, c->srcArray, c->srcHost, c->srcDevice, c->srcPitch, c->srcHeight, c->srcXInBytes,
               c->srcY, c->srcZ, &src) ||
      !side_of(c->dstMemoryType, c->dstArray, c->dstHost, c->dstDevice, c->dstPitch, c->dstHeight, c->dstXInBytes,
               c->dstY, c->dstZ, &dst)) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  for (const copy_side* s : {&src, &dst}) {
    if (s->array && (s->x + c->WidthInBytes > s->pitch || s->y + c->Height > s->rows || s->z + c->Depth > s->slices)) {
      return fail(CUDA_ERROR_INVALID_VALUE);
    }
    if (!s->array && (c->WidthInBytes > s->pitch || c->Height > s->height)) {
      return fail(CUDA_ERROR_INVALID_VALUE);
    }
  }
  arrays().last_copy = *c;
  land_dma();
  for (std::size_t z = 0; z < c->Depth; ++z) {
    for (std::size_t y = 0; y < c->Height; ++y) {
      std::memmove(dst.base + ((dst.z + z) * dst.height + dst.y + y) * dst.pitch + dst.x,
                   src.base + ((src.z + z) * src.height + src.y + y) * src.pitch + src.x, c->WidthInBytes);
    }
  }
  count("memcpy3d");
  return CUDA_SUCCESS;
}

// --- green contexts ----------------------------------------------------------------------------------
// SM resources carry, in the driver's private bytes, the device and the split that made them (0: a
// device's or a context's whole resource). The split follows cuda.h 13.0's rules: a group is the
// requested count rounded up to the minimum and to a multiple of the alignment (compute capability 9.0:
// 8 and 8; 8.x: 4 and 2; with IGNORE_SM_COSCHEDULING: 1 and 1), as many groups as fit; a group or
// remainder cannot be split again. A green context retains the device's primary context and stands
// for a context of its own (cuCtxFromGreenCtx); destroying it with streams still alive in it counts
// "green_destroyed_with_live_streams" (the real driver leaks them).

struct resource_tag {
  int device;
  unsigned long long split;  // the split that made the resource, 0 for a whole resource
};
static_assert(sizeof(resource_tag) <= sizeof(CUdevResource::_internal_padding));

struct fake_desc {
  int device = 0;
  unsigned sms = 0;
};

struct fake_green {
  int device = 0;
  unsigned sms = 0;
  bool alive = true;
  fake_context* ctx = nullptr;
  unsigned long long id = 0;
};

std::vector<std::unique_ptr<fake_desc>>& descriptors() {
  static auto* d = new std::vector<std::unique_ptr<fake_desc>>;
  return *d;
}
std::vector<std::unique_ptr<fake_green>>& greens() {
  static auto* g = new std::vector<std::unique_ptr<fake_green>>;
  return *g;
}
unsigned long long next_split = 1;

resource_tag tag_of(const CUdevResource& r) {
  resource_tag t{};
  std::memcpy(&t, r._internal_padding, sizeof(t));
  return t;
}

void fill_resource(CUdevResource* r, int device, unsigned sms, unsigned long long split) {
  std::memset(r, 0, sizeof(*r));
  r->type = CU_DEV_RESOURCE_TYPE_SM;
  const int cc = st().devices[static_cast<std::size_t>(device)];
  r->sm.smCount = sms;
  r->sm.minSmPartitionSize = cc >= 90 ? 8 : cc >= 80 ? 4 : 2;
  r->sm.smCoscheduledAlignment = cc >= 90 ? 8 : 2;
  const resource_tag t{device, split};
  std::memcpy(r->_internal_padding, &t, sizeof(t));
}

constexpr unsigned device_sms = 100;  // as CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT says

fake_green* as_green(CUgreenCtx g) {
  for (auto& p : greens()) {
    if (p.get() == reinterpret_cast<fake_green*>(g)) {
      return p.get();
    }
  }
  return nullptr;
}

CUresult CUDAAPI fake_cuDeviceGetDevResource(CUdevice d, CUdevResource* r, CUdevResourceType type) {
  FAKE_ENTER();
  if (d < 0 || d >= static_cast<int>(st().devices.size())) {
    return fail(CUDA_ERROR_INVALID_DEVICE);
  }
  if (type != CU_DEV_RESOURCE_TYPE_SM || r == nullptr) {
    return fail(CUDA_ERROR_INVALID_RESOURCE_TYPE);
  }
  fill_resource(r, d, device_sms, 0);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCtxGetDevResource(CUcontext c, CUdevResource* r, CUdevResourceType type) {
  FAKE_ENTER();
  if (!known_context(as_ctx(c)) || !as_ctx(c)->alive) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  if (type != CU_DEV_RESOURCE_TYPE_SM || r == nullptr) {
    return fail(CUDA_ERROR_INVALID_RESOURCE_TYPE);
  }
  auto* g = static_cast<fake_green*>(as_ctx(c)->green);
  fill_resource(r, as_ctx(c)->device, g != nullptr ? g->sms : device_sms, 0);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuGreenCtxGetDevResource(CUgreenCtx h, CUdevResource* r, CUdevResourceType type) {
  FAKE_ENTER();
  fake_green* g = as_green(h);
  if (g == nullptr || !g->alive) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  if (type != CU_DEV_RESOURCE_TYPE_SM || r == nullptr) {
    return fail(CUDA_ERROR_INVALID_RESOURCE_TYPE);
  }
  fill_resource(r, g->device, g->sms, 0);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDevSmResourceSplitByCount(CUdevResource* result, unsigned* groups, const CUdevResource* input,
                                                  CUdevResource* remaining, unsigned flags, unsigned min_count) {
  FAKE_ENTER();
  if (input == nullptr || groups == nullptr) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  if (input->type != CU_DEV_RESOURCE_TYPE_SM) {
    return fail(CUDA_ERROR_INVALID_RESOURCE_TYPE);
  }
  if ((flags & ~3u) != 0 || min_count > input->sm.smCount) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  const resource_tag t = tag_of(*input);
  if (t.split != 0) {
    return fail(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);  // a group or remainder is not split again
  }
  const bool loose = (flags & CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING) != 0;
  const unsigned minimum = loose ? 1 : input->sm.minSmPartitionSize;
  const unsigned alignment = loose ? 1 : input->sm.smCoscheduledAlignment;
  unsigned size = std::max(min_count, minimum);
  size = (size + alignment - 1) / alignment * alignment;
  const unsigned fit = input->sm.smCount / size;
  if (result == nullptr) {
    *groups = fit;
    count("sm_split_dry_runs");
    return CUDA_SUCCESS;
  }
  const unsigned made = std::min(*groups, fit);
  const unsigned long long split = next_split++;
  for (unsigned i = 0; i < made; ++i) {
    fill_resource(&result[i], t.device, size, split);
  }
  if (remaining != nullptr) {
    fill_resource(remaining, t.device, input->sm.smCount - made * size, split);
  }
  *groups = made;
  count("sm_splits");
  note("split " + std::to_string(made) + " x " + std::to_string(size) + " flags " + std::to_string(flags));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDevResourceGenerateDesc(CUdevResourceDesc* out, CUdevResource* resources, unsigned n) {
  FAKE_ENTER();
  if (out == nullptr || resources == nullptr || n == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  auto desc = std::make_unique<fake_desc>();
  const resource_tag first = tag_of(resources[0]);
  desc->device = first.device;
  for (unsigned i = 0; i < n; ++i) {
    if (resources[i].type != CU_DEV_RESOURCE_TYPE_SM) {
      return fail(CUDA_ERROR_INVALID_RESOURCE_TYPE);
    }
    const resource_tag t = tag_of(resources[i]);
    if (t.device != first.device || (n > 1 && (t.split == 0 || t.split != first.split))) {
      return fail(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);  // one device; several: one split
    }
    desc->sms += resources[i].sm.smCount;
  }
  *out = reinterpret_cast<CUdevResourceDesc>(desc.get());
  descriptors().push_back(std::move(desc));
  count("descriptors");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuGreenCtxCreate(CUgreenCtx* out, CUdevResourceDesc d, CUdevice dev, unsigned flags) {
  FAKE_ENTER();
  state_t& s = st();
  fake_desc* desc = nullptr;
  for (auto& p : descriptors()) {
    if (p.get() == reinterpret_cast<fake_desc*>(d)) {
      desc = p.get();
    }
  }
  if (out == nullptr || desc == nullptr || (flags & CU_GREEN_CTX_DEFAULT_STREAM) == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  if (dev < 0 || dev >= static_cast<int>(s.devices.size()) || desc->device != dev) {
    return fail(CUDA_ERROR_INVALID_DEVICE);
  }
  const auto i = static_cast<std::size_t>(dev);
  if (s.unavailable[i]) {
    return fail(CUDA_ERROR_DEVICE_UNAVAILABLE);
  }
  if (s.primary[i] == nullptr) {  // the green context retains the primary context
    s.primary[i] = make_context(dev, true);
  }
  ++s.primary_refs[i];
  greens().push_back(std::make_unique<fake_green>());
  fake_green* g = greens().back().get();
  g->device = dev;
  g->sms = desc->sms;
  g->ctx = make_context(dev, false);
  g->ctx->green = g;
  g->id = s.next_id++;
  *out = reinterpret_cast<CUgreenCtx>(g);
  count("green_created");
  note("green_create " + hex(g));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuGreenCtxDestroy(CUgreenCtx h) {
  FAKE_ENTER();
  state_t& s = st();
  fake_green* g = as_green(h);
  if (g == nullptr || !g->alive) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  for (auto& str : s.streams) {
    if (str->alive && str->ctx == g->ctx) {
      count("green_destroyed_with_live_streams");
    }
  }
  g->alive = false;
  destroy_context(g->ctx);
  std::erase(ctx_stack, reinterpret_cast<CUcontext>(g->ctx));
  const auto i = static_cast<std::size_t>(g->device);
  if (--s.primary_refs[i] == 0) {
    destroy_context(s.primary[i]);
    s.primary[i] = nullptr;
  }
  count("green_destroyed");
  note("green_destroy " + hex(g));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCtxFromGreenCtx(CUcontext* out, CUgreenCtx h) {
  FAKE_ENTER();
  fake_green* g = as_green(h);
  if (g == nullptr || !g->alive || out == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  *out = reinterpret_cast<CUcontext>(g->ctx);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuGreenCtxStreamCreate(CUstream* out, CUgreenCtx h, unsigned flags, int priority) {
  FAKE_ENTER();
  fake_green* g = as_green(h);
  if (g == nullptr || !g->alive) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  if ((flags & CU_STREAM_NON_BLOCKING) == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  // As cuStreamCreateWithPriority in the green context, which the real driver does not make current.
  ctx_stack.push_back(reinterpret_cast<CUcontext>(g->ctx));
  const CUresult created = fake_cuStreamCreateWithPriority(out, flags, priority);
  ctx_stack.pop_back();
  if (created == CUDA_SUCCESS) {
    count("green_streams_created");
  }
  return created;
}

CUresult CUDAAPI fake_cuStreamGetGreenCtx(CUstream h, CUgreenCtx* out) {
  FAKE_ENTER();
  if (!usable_stream(h)) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  fake_context* c = stream_context(h);
  *out = c != nullptr ? reinterpret_cast<CUgreenCtx>(c->green) : nullptr;
  return CUDA_SUCCESS;
}

CUresult green_event_call(CUgreenCtx h, CUevent e, const char* what) {
  fake_green* g = as_green(h);
  if (g == nullptr || !g->alive) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  if (e == nullptr) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  count(what);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuGreenCtxRecordEvent(CUgreenCtx h, CUevent e) {
  FAKE_ENTER();
  return green_event_call(h, e, "green_records");
}

CUresult CUDAAPI fake_cuGreenCtxWaitEvent(CUgreenCtx h, CUevent e) {
  FAKE_ENTER();
  return green_event_call(h, e, "green_waits");
}

CUresult CUDAAPI fake_cuGreenCtxGetId(CUgreenCtx h, unsigned long long* id) {
  FAKE_ENTER();
  fake_green* g = as_green(h);
  if (g == nullptr || !g->alive) {
    return fail(CUDA_ERROR_CONTEXT_IS_DESTROYED);
  }
  *id = g->id;
  return CUDA_SUCCESS;
}

// --- launch attributes: what the stream launch, the graph kernel node and the occupancy queries hand over ---
// cuLaunchKernelEx, cuGraphAddKernelNode with cuGraphKernelNodeSetAttribute, and the two cluster
// occupancy queries record the shape and the launch attributes they were given, by entry point
// (fake_cuda_launch_attributes); a kernel node's attributes collect until the next kernel node is added.
struct launch_record {
  std::array<unsigned, 7> shape{};  // grid x, y, z, block x, y, z, dynamic shared memory
  std::vector<CUlaunchAttribute> attributes;
};
std::map<std::string, launch_record>& launch_records() {
  static std::map<std::string, launch_record> records;
  return records;
}

void record_launch_config(const char* api, const CUlaunchConfig& c) {
  launch_record& r = launch_records()[api];
  r.shape = {c.gridDimX, c.gridDimY, c.gridDimZ, c.blockDimX, c.blockDimY, c.blockDimZ, c.sharedMemBytes};
  r.attributes.assign(c.attrs, c.attrs + c.numAttrs);
}

CUresult CUDAAPI fake_cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** args, void** extra) {
  FAKE_ENTER();
  record_launch_config("cuLaunchKernelEx", *config);
  return fake_cuLaunchKernel(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                             config->blockDimY, config->blockDimZ, config->sharedMemBytes, config->hStream, args,
                             extra);
}

CUresult CUDAAPI fake_cuGraphAddKernelNode(CUgraphNode* n, CUgraph g, const CUgraphNode* deps, std::size_t count_deps,
                                           const CUDA_KERNEL_NODE_PARAMS* p) {
  FAKE_ENTER();
  if (p->kern == nullptr && p->func == nullptr) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  *n = add_graph_node(g, deps, count_deps);
  reinterpret_cast<fake_graph_node*>(*n)->type = CU_GRAPH_NODE_TYPE_KERNEL;
  launch_record& r = launch_records()["cuGraphKernelNodeSetAttribute"];
  r.shape = {p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ, p->sharedMemBytes};
  r.attributes.clear();
  count("kernel_nodes");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuGraphKernelNodeSetAttribute(CUgraphNode n, CUkernelNodeAttrID id,
                                                    const CUkernelNodeAttrValue* value) {
  FAKE_ENTER();
  const fake_graph_node* node = known_node(n);
  if (node == nullptr || node->type != CU_GRAPH_NODE_TYPE_KERNEL) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  CUlaunchAttribute a{};
  a.id = id;
  a.value = *value;
  launch_records()["cuGraphKernelNodeSetAttribute"].attributes.push_back(a);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuGraphDestroyNode(CUgraphNode n) {
  FAKE_ENTER();
  fake_graph_node* node = known_node(n);
  if (node == nullptr || !node->bodies.empty()) {
    return fail(CUDA_ERROR_INVALID_VALUE);  // the fake removes no conditional node
  }
  --*node->graph;
  if (node->type == CU_GRAPH_NODE_TYPE_KERNEL) {
    count("destroyed_kernel_nodes");
  }
  node->graph = nullptr;  // the handle stays unique, as every node's
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuOccupancyMaxActiveClusters(int* clusters, CUfunction, const CUlaunchConfig* config) {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  record_launch_config("cuOccupancyMaxActiveClusters", *config);
  *clusters = 4;
  return CUDA_SUCCESS;
}

// Eight blocks of any shape per SM (of the 100 every fake device has): the launch diagnosis's figure.
CUresult CUDAAPI fake_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, CUfunction f, int, std::size_t,
                                                                           unsigned) {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  if (f == nullptr) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  *blocks = 8;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuOccupancyMaxPotentialClusterSize(int* size, CUfunction, const CUlaunchConfig* config) {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  record_launch_config("cuOccupancyMaxPotentialClusterSize", *config);
  *size = 8;
  return CUDA_SUCCESS;
}

// --- issue 34 parts 3-4: checkpoint and restore, coredump settings ------------------------------------
// Checkpoint: a state per pid (running unless told otherwise), with the real driver's transitions
// (lock: running -> locked, checkpoint: locked -> checkpointed, restore: checkpointed -> locked, unlock:
// locked -> running) and CUDA_ERROR_ILLEGAL_STATE for any other; a lock with a timeout of a pid made
// busy (fake_cuda_checkpoint_busy) returns CUDA_ERROR_NOT_READY. Each call is logged with its pid.
// Coredump: the process-wide attributes and those of each context (copied from the process-wide ones on
// first use, as a context takes them at creation), with the real driver's sizes (a bool's, an int's for
// the flags, strings of at most 1023 characters and their NUL); a call before cuInit, which crashes the
// real driver, returns CUDA_ERROR_NOT_INITIALIZED and counts "coredump_before_init".

struct checkpoint_state_t {
  std::map<int, int> state;  // pid -> CUprocessState
  std::map<int, int> race;   // pid -> the state it moves to right after the next cuCheckpointProcessGetState
  std::set<int> busy;        // pids whose timed lock does not succeed
};

checkpoint_state_t& checkpoints() {
  static auto* c = new checkpoint_state_t;
  return *c;
}

CUresult checkpoint_transition(const char* api, int pid, int from, int to) {
  note(std::string(api) + " pid=" + std::to_string(pid));
  count(api);
  int& s = checkpoints().state[pid];
  if (s != from) {
    return fail(CUDA_ERROR_ILLEGAL_STATE);
  }
  s = to;
  return CUDA_SUCCESS;
}

bool zeroed(const void* p, std::size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  return std::all_of(b, b + n, [](unsigned char c) { return c == 0; });
}

CUresult CUDAAPI fake_cuCheckpointProcessGetState(int pid, CUprocessState* state) {
  FAKE_ENTER();
  if (pid <= 0 || state == nullptr) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  count("cuCheckpointProcessGetState");
  *state = static_cast<CUprocessState>(checkpoints().state[pid]);
  if (auto it = checkpoints().race.find(pid); it != checkpoints().race.end()) {
    checkpoints().state[pid] = it->second;
    checkpoints().race.erase(it);
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCheckpointProcessGetRestoreThreadId(int pid, int* tid) {
  FAKE_ENTER();
  if (pid <= 0 || tid == nullptr) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  *tid = pid + 1;  // the fake's restore thread
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCheckpointProcessLock(int pid, CUcheckpointLockArgs* args) {
  FAKE_ENTER();
  if (pid <= 0 || (args != nullptr && (args->reserved0 != 0 || !zeroed(args->reserved1, sizeof(args->reserved1))))) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  const unsigned timeout = args != nullptr ? args->timeoutMs : 0;
  note("cuCheckpointProcessLock timeout=" + std::to_string(timeout));
  if (timeout != 0 && checkpoints().busy.count(pid) != 0 && checkpoints().state[pid] == CU_PROCESS_STATE_RUNNING) {
    count("cuCheckpointProcessLock");
    return fail(CUDA_ERROR_NOT_READY);
  }
  return checkpoint_transition("cuCheckpointProcessLock", pid, CU_PROCESS_STATE_RUNNING, CU_PROCESS_STATE_LOCKED);
}

CUresult CUDAAPI fake_cuCheckpointProcessCheckpoint(int pid, CUcheckpointCheckpointArgs* args) {
  FAKE_ENTER();
  if (pid <= 0 || (args != nullptr && !zeroed(args, sizeof(*args)))) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  return checkpoint_transition("cuCheckpointProcessCheckpoint", pid, CU_PROCESS_STATE_LOCKED,
                               CU_PROCESS_STATE_CHECKPOINTED);
}

CUresult CUDAAPI fake_cuCheckpointProcessRestore(int pid, CUcheckpointRestoreArgs* args) {
  FAKE_ENTER();
  if (pid <= 0 || (args != nullptr && (!zeroed(args->reserved, sizeof(args->reserved)) || args->reserved1 != 0 ||
                                       (args->gpuPairsCount != 0) != (args->gpuPairs != nullptr)))) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  note("cuCheckpointProcessRestore pairs=" + std::to_string(args != nullptr ? args->gpuPairsCount : 0));
  return checkpoint_transition("cuCheckpointProcessRestore", pid, CU_PROCESS_STATE_CHECKPOINTED,
                               CU_PROCESS_STATE_LOCKED);
}

CUresult CUDAAPI fake_cuCheckpointProcessUnlock(int pid, CUcheckpointUnlockArgs* args) {
  FAKE_ENTER();
  if (pid <= 0 || (args != nullptr && !zeroed(args, sizeof(*args)))) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  return checkpoint_transition("cuCheckpointProcessUnlock", pid, CU_PROCESS_STATE_LOCKED, CU_PROCESS_STATE_RUNNING);
}

using coredump_values = std::map<int, std::string>;  // attribute -> its bytes (a string without its NUL)

struct coredump_state_t {
  coredump_values global;
  std::map<CUcontext, coredump_values> contexts;
  int fail_set = 0;  // an attribute whose next set returns CUDA_ERROR_NOT_PERMITTED (0: none)
};

coredump_state_t& coredumps() {
  static auto* c = [] {
    auto* s = new coredump_state_t;
    const std::string pid = std::to_string(getpid());
    const bool f = false;
    const bool t = true;
    const int flags = 0;
    s->global[CU_COREDUMP_ENABLE_ON_EXCEPTION] = std::string(reinterpret_cast<const char*>(&f), sizeof(bool));
    s->global[CU_COREDUMP_TRIGGER_HOST] = std::string(reinterpret_cast<const char*>(&t), sizeof(bool));
    s->global[CU_COREDUMP_LIGHTWEIGHT] = std::string(reinterpret_cast<const char*>(&f), sizeof(bool));
    s->global[CU_COREDUMP_ENABLE_USER_TRIGGER] = std::string(reinterpret_cast<const char*>(&f), sizeof(bool));
    s->global[CU_COREDUMP_FILE] = "core.cuda.fakehost." + pid;
    s->global[CU_COREDUMP_PIPE] = "corepipe.cuda.fakehost." + pid;
    s->global[CU_COREDUMP_GENERATION_FLAGS] = std::string(reinterpret_cast<const char*>(&flags), sizeof(int));
    return s;
  }();
  return *c;
}

bool coredump_string(int attr) { return attr == CU_COREDUMP_FILE || attr == CU_COREDUMP_PIPE; }

// The values a call acts on (null: no context current for a per-context call).
coredump_values* coredump_target(bool global) {
  if (global) {
    return &coredumps().global;
  }
  if (current() == nullptr) {
    return nullptr;
  }
  auto [it, inserted] = coredumps().contexts.try_emplace(current(), coredumps().global);
  return &it->second;
}

CUresult coredump_get(bool global, CUcoredumpSettings attrib, void* value, std::size_t* size) {
  const int a = static_cast<int>(attrib);
  if (!st().initialized) {
    count("coredump_before_init");
    return fail(CUDA_ERROR_NOT_INITIALIZED);
  }
  coredump_values* values = coredump_target(global);
  if (values == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  if (a < CU_COREDUMP_ENABLE_ON_EXCEPTION || a >= CU_COREDUMP_MAX || size == nullptr) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  const std::string& bytes = (*values)[a];
  const std::size_t needed = coredump_string(a) ? 1024 : bytes.size();
  if (value == nullptr) {
    *size = needed;
    return CUDA_SUCCESS;
  }
  if (coredump_string(a) ? *size < bytes.size() + 1 : *size != bytes.size()) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  std::memcpy(value, bytes.c_str(), coredump_string(a) ? bytes.size() + 1 : bytes.size());
  return CUDA_SUCCESS;
}

CUresult coredump_set(bool global, CUcoredumpSettings attrib, void* value, std::size_t* size) {
  const int a = static_cast<int>(attrib);
  if (!st().initialized) {
    count("coredump_before_init");  // the real driver crashes here (driver 580.159.04)
    return fail(CUDA_ERROR_NOT_INITIALIZED);
  }
  coredump_values* values = coredump_target(global);
  if (values == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  if (a < CU_COREDUMP_ENABLE_ON_EXCEPTION || a >= CU_COREDUMP_MAX || size == nullptr || value == nullptr ||
      (!global && (a == CU_COREDUMP_ENABLE_USER_TRIGGER || a == CU_COREDUMP_PIPE))) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  std::string bytes;
  if (coredump_string(a)) {
    const auto* text = static_cast<const char*>(value);
    if (*size == 0 || *size > 1024 || std::memchr(text, '\0', *size) == nullptr) {
      return fail(CUDA_ERROR_INVALID_VALUE);
    }
    bytes = text;
  } else {
    if (*size != (*values)[a].size()) {
      return fail(CUDA_ERROR_INVALID_VALUE);  // e.g. an int's size for a bool
    }
    bytes.assign(static_cast<const char*>(value), *size);
  }
  if (coredumps().fail_set == a) {
    coredumps().fail_set = 0;
    return fail(CUDA_ERROR_NOT_PERMITTED);
  }
  (*values)[a] = bytes;
  count(global ? "coredump_set_global" : "coredump_set_context");
  note(std::string(global ? "coredump set global " : "coredump set context ") + std::to_string(a) + " " +
       (coredump_string(a) ? bytes : std::to_string(static_cast<int>(static_cast<unsigned char>(bytes[0])))));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCoredumpGetAttributeGlobal(CUcoredumpSettings attrib, void* value, std::size_t* size) {
  FAKE_ENTER();
  return coredump_get(true, attrib, value, size);
}
CUresult CUDAAPI fake_cuCoredumpGetAttribute(CUcoredumpSettings attrib, void* value, std::size_t* size) {
  FAKE_ENTER();
  return coredump_get(false, attrib, value, size);
}
CUresult CUDAAPI fake_cuCoredumpSetAttributeGlobal(CUcoredumpSettings attrib, void* value, std::size_t* size) {
  FAKE_ENTER();
  return coredump_set(true, attrib, value, size);
}
CUresult CUDAAPI fake_cuCoredumpSetAttribute(CUcoredumpSettings attrib, void* value, std::size_t* size) {
  FAKE_ENTER();
  return coredump_set(false, attrib, value, size);
}

// --- issue 34 part 2 and part 9: the driver's log callbacks, profiler control ------------------------
// Like the real driver (580.159.04), a failed call logs a line through every registered callback, on the
// calling thread, before it returns ("Returning <code> (<name>) from <entry point>"); fake_cuda_emit_log
// logs any line (the warnings of successful calls). cuProfilerStart/Stop count and note the context.

struct log_callbacks_t {
  std::mutex mutex;
#if CUDA_VERSION >= 12090
  std::vector<std::pair<CUlogsCallback, void*>> registered;
#endif
  long long next_handle = 1;
};

log_callbacks_t& log_callbacks() {
  static auto* l = [] {
    entry_scope scope;  // the fake's own allocation
    return new log_callbacks_t;
  }();
  return *l;
}

// Calls every registered callback with the line, on this thread.
void emit_log(const std::string& line) noexcept {
#if CUDA_VERSION >= 12090
  try {
    std::vector<std::pair<CUlogsCallback, void*>> callbacks;
    {
      std::lock_guard<std::mutex> lock(log_callbacks().mutex);
      callbacks = log_callbacks().registered;
    }
    std::string text = line + "\n";  // the real driver's lines may end with a newline
    for (auto& [fn, data] : callbacks) {
      if (fn != nullptr) {
        fn(data, CU_LOG_LEVEL_ERROR, text.data(), text.size());
      }
    }
  } catch (...) {
  }
#else
  (void)line;
#endif
}

void log_failure(CUresult r) noexcept {
  try {
    const char* api = entered_api != nullptr ? entered_api + 5 : "an entry point";  // without "fake_"
    emit_log("Returning " + std::to_string(static_cast<int>(r)) + " (CUDA_ERROR_FAKE) from " + api);
  } catch (...) {
  }
}

#if CUDA_VERSION >= 12090
CUresult CUDAAPI fake_cuLogsRegisterCallback(CUlogsCallback fn, void* data, CUlogsCallbackHandle* handle) {
  entry_scope scope;  // what it allocates is the fake's (the failure sweep's host allocations)
  if (fn == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(log_callbacks().mutex);
  try {
    log_callbacks().registered.emplace_back(fn, data);
  } catch (...) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  count("log_callbacks_registered");
  if (handle != nullptr) {
    *handle = reinterpret_cast<CUlogsCallbackHandle>(log_callbacks().registered.size());
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuLogsUnregisterCallback(CUlogsCallbackHandle handle) {
  entry_scope scope;
  std::lock_guard<std::mutex> lock(log_callbacks().mutex);
  auto& all = log_callbacks().registered;
  const auto index = reinterpret_cast<std::size_t>(handle);
  if (index == 0 || index > all.size() || all[index - 1].first == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  all[index - 1].first = nullptr;  // handles stay unique: the slot is kept, empty
  return CUDA_SUCCESS;
}
#endif

CUresult CUDAAPI fake_cuProfilerStart() {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  count("profiler_starts");
  note("cuProfilerStart " + hex(current()));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuProfilerStop() {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  count("profiler_stops");
  note("cuProfilerStop " + hex(current()));
  return CUDA_SUCCESS;
}

// --- issue 34 part 5: NVML as a library component --------------------------------------------------
// Device d's UUID: byte 0 is 0xc0 + d, byte i is i. tests/fake_nvml/fake_nvml.cpp gives its GPUs the
// same UUIDs (in another order), so that cudrv::system matches them.
CUresult CUDAAPI fake_cuDeviceGetUuid(CUuuid* uuid, CUdevice d) {
  FAKE_ENTER_ALWAYS();
  if (d < 0 || d >= static_cast<int>(st().devices.size())) {
    return fail(CUDA_ERROR_INVALID_DEVICE);
  }
  for (int i = 0; i < 16; ++i) {
    uuid->bytes[i] = static_cast<char>(i);
  }
  uuid->bytes[0] = static_cast<char>(0xc0 + d);
  return CUDA_SUCCESS;
}

// Device 0 at bus 0x9a, device 1 at bus 0x1b, device d >= 2 at 0x40 + 0x10 * (d - 2) (where
// tests/fake_nvml/fake_nvml.cpp puts the same GPUs).
CUresult CUDAAPI fake_cuDeviceGetPCIBusId(char* id, int len, CUdevice d) {
  FAKE_ENTER_ALWAYS();
  if (d < 0 || d >= static_cast<int>(st().devices.size()) || len <= 0) {
    return fail(d < 0 || d >= static_cast<int>(st().devices.size()) ? CUDA_ERROR_INVALID_DEVICE
                                                                    : CUDA_ERROR_INVALID_VALUE);
  }
  // Devices from 2 on (issue 36: topology) where the stand-in NVML puts its GPUs of index 2 on.
  std::snprintf(id, static_cast<std::size_t>(len), "0000:%02x:00.0",
                d == 1   ? 0x1b
                : d == 0 ? 0x9a
                         : 0x40 + 0x10 * (d - 2));
  return CUDA_SUCCESS;
}

// --- issue 34 part 1: every launch attribute -------------------------------------------------------
// Context limits (the persisting-L2 limit is kept per context, at most an H100's 32,768,000 bytes; the
// others read 0), the reset of persisting lines (counted: persisting_l2_resets), and a kernel node's
// attribute read back from what the last kernel node was given (a device-updatable node gets a handle).
std::map<CUcontext, std::size_t>& persisting_l2_limits() {
  static std::map<CUcontext, std::size_t> limits;
  return limits;
}

CUresult CUDAAPI fake_cuCtxGetLimit(std::size_t* value, CUlimit which) {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  *value = which == CU_LIMIT_PERSISTING_L2_CACHE_SIZE ? persisting_l2_limits()[current()] : 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCtxSetLimit(CUlimit which, std::size_t value) {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  if (which == CU_LIMIT_PERSISTING_L2_CACHE_SIZE) {
    if (value > 32768000) {
      return fail(CUDA_ERROR_INVALID_VALUE);
    }
    persisting_l2_limits()[current()] = value;
    count("persisting_l2_limit_sets");
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCtxResetPersistingL2Cache() {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  count("persisting_l2_resets");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuGraphKernelNodeGetAttribute(CUgraphNode n, CUkernelNodeAttrID id, CUkernelNodeAttrValue* out) {
  FAKE_ENTER();
  const fake_graph_node* node = known_node(n);
  if (node == nullptr || node->type != CU_GRAPH_NODE_TYPE_KERNEL) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  *out = {};
  for (const CUlaunchAttribute& a : launch_records()["cuGraphKernelNodeSetAttribute"].attributes) {
    if (a.id == id) {
      *out = a.value;
    }
  }
  if (id == CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE && out->deviceUpdatableKernelNode.deviceUpdatable != 0) {
    out->deviceUpdatableKernelNode.devNode = reinterpret_cast<CUgraphDeviceNode>(0xde0000);
  }
  return CUDA_SUCCESS;
}

// --- issue 34 parts 7 and 8: managed batches, range attributes, async notifications -------------------
// The batch entry points check what cuda.h documents (a created stream, flags 0, location entries starting
// at 0, increasing, below the count, no more than the ranges) and that each range lies in one live managed
// allocation; a discard overwrites the bytes with 0xDD (what a read of a discarded range may give). The log
// records the arrays cudrv passed. Notifications: registered callbacks run on a thread of the fake when
// fake_cuda_deliver_async_notification asks; (un)registering from there is CUDA_ERROR_NOT_PERMITTED.

thread_local bool on_notification_thread = false;

struct notification_registration {
  int device;
  CUasyncCallback fn;
  void* user;
  int id;
};
std::vector<notification_registration>& registrations() {
  static auto* r = new std::vector<notification_registration>;
  return *r;
}

// Checks and logs a managed batch; "" when it is refused (the CUresult is in status).
std::string managed_batch_line(const char* what, CUdeviceptr* ptrs, std::size_t* sizes, std::size_t n,
                               CUmemLocation* locs, std::size_t* idxs, std::size_t num_locs, unsigned long long flags,
                               CUstream h, CUresult& status) {
  status = CUDA_ERROR_INVALID_VALUE;
  if (h == nullptr || h == CU_STREAM_LEGACY || !usable_stream(h) || flags != 0 || n == 0) {
    return {};
  }
  std::string line = std::string(what) + " n=" + std::to_string(n);
  if (locs != nullptr) {
    if (num_locs == 0 || num_locs > n || idxs[0] != 0) {
      return {};
    }
    line += " locs=";
    for (std::size_t k = 0; k < num_locs; ++k) {
      if ((k > 0 && idxs[k] <= idxs[k - 1]) || idxs[k] >= n) {
        return {};
      }
      line += (k > 0 ? "," : "") + describe_location(locs[k]) + "@" + std::to_string(idxs[k]);
    }
  }
  line += " ranges=";
  for (std::size_t i = 0; i < n; ++i) {
    if (sizes[i] == 0 || managed_start(ptrs[i], sizes[i]) == 0) {
      return {};
    }
    line += (i > 0 ? "," : "") + hex(reinterpret_cast<void*>(ptrs[i])) + "+" + std::to_string(sizes[i]);
  }
  status = CUDA_SUCCESS;
  return line;
}

// Applies a managed batch: discards poison the bytes, prefetches record the last location.
void apply_managed_batch(CUdeviceptr* ptrs, std::size_t* sizes, std::size_t n, CUmemLocation* locs, std::size_t* idxs,
                         std::size_t num_locs, bool discard) {
  std::size_t k = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (discard) {
      std::memset(reinterpret_cast<void*>(ptrs[i]), 0xDD, sizes[i]);
    }
    if (locs != nullptr) {
      while (k + 1 < num_locs && idxs[k + 1] <= i) {
        ++k;
      }
      managed_state()[managed_start(ptrs[i], sizes[i])].last_prefetch = locs[k];
    }
  }
}

CUresult CUDAAPI fake_cuMemPrefetchBatchAsync(CUdeviceptr* ptrs, std::size_t* sizes, std::size_t n, CUmemLocation* locs,
                                              std::size_t* idxs, std::size_t num_locs, unsigned long long flags,
                                              CUstream h) {
  FAKE_ENTER();
  count("prefetch_batches");
  CUresult status = CUDA_SUCCESS;
  const std::string line = managed_batch_line("prefetch_batch", ptrs, sizes, n, locs, idxs, num_locs, flags, h, status);
  if (status != CUDA_SUCCESS) {
    return fail(status);
  }
  apply_managed_batch(ptrs, sizes, n, locs, idxs, num_locs, false);
  note(line);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemDiscardBatchAsync(CUdeviceptr* ptrs, std::size_t* sizes, std::size_t n,
                                             unsigned long long flags, CUstream h) {
  FAKE_ENTER();
  count("discard_batches");
  CUresult status = CUDA_SUCCESS;
  const std::string line = managed_batch_line("discard_batch", ptrs, sizes, n, nullptr, nullptr, 0, flags, h, status);
  if (status != CUDA_SUCCESS) {
    return fail(status);
  }
  apply_managed_batch(ptrs, sizes, n, nullptr, nullptr, 0, true);
  note(line);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemDiscardAndPrefetchBatchAsync(CUdeviceptr* ptrs, std::size_t* sizes, std::size_t n,
                                                        CUmemLocation* locs, std::size_t* idxs, std::size_t num_locs,
                                                        unsigned long long flags, CUstream h) {
  FAKE_ENTER();
  count("discard_and_prefetch_batches");
  CUresult status = CUDA_SUCCESS;
  const std::string line =
      managed_batch_line("discard_and_prefetch_batch", ptrs, sizes, n, locs, idxs, num_locs, flags, h, status);
  if (status != CUDA_SUCCESS) {
    return fail(status);
  }
  apply_managed_batch(ptrs, sizes, n, locs, idxs, num_locs, true);
  note(line);
  return CUDA_SUCCESS;
}

void write_location_type(const CUmemLocation& l, void* out, std::size_t size) {
  const int t = static_cast<int>(l.type);
  std::memcpy(out, &t, std::min(size, sizeof t));
}

CUresult CUDAAPI fake_cuMemRangeGetAttributes(void** data, std::size_t* data_sizes, CUmem_range_attribute* attrs,
                                              std::size_t num, CUdeviceptr p, std::size_t n) {
  FAKE_ENTER();
  count("range_attribute_queries");
  const CUdeviceptr start = managed_start(p, n);
  if (start == 0 || n == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  const managed_range_state m = managed_state()[start];
  for (std::size_t i = 0; i < num; ++i) {
    switch (attrs[i]) {
      case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: *static_cast<int*>(data[i]) = m.read_mostly; break;
      case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
        write_location_type(m.preferred, data[i], data_sizes[i]);
        break;
      case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
        write_location_type(m.last_prefetch, data[i], data_sizes[i]);
        break;
      case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID: *static_cast<int*>(data[i]) = m.preferred.id; break;
      case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID: *static_cast<int*>(data[i]) = m.last_prefetch.id; break;
      case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
        if (data_sizes[i] == 0 || data_sizes[i] % 4 != 0) {
          return fail(CUDA_ERROR_INVALID_VALUE);
        }
        int* out = static_cast<int*>(data[i]);
        const std::size_t slots = data_sizes[i] / 4;
        std::size_t k = 0;
        for (int d : m.accessed_by) {
          if (k < slots) {
            out[k++] = d;
          }
        }
        for (; k < slots; ++k) {
          out[k] = CU_DEVICE_INVALID;
        }
        break;
      }
      default: return fail(CUDA_ERROR_INVALID_VALUE);
    }
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDeviceRegisterAsyncNotification(CUdevice d, CUasyncCallback fn, void* user,
                                                        CUasyncCallbackHandle* handle) {
  FAKE_ENTER();
  if (on_notification_thread) {
    return fail(CUDA_ERROR_NOT_PERMITTED);
  }
  if (d < 0 || d >= static_cast<int>(st().devices.size())) {
    return fail(CUDA_ERROR_INVALID_DEVICE);
  }
  if (fn == nullptr || handle == nullptr) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  static int next = 1;
  const int id = next++;
  registrations().push_back({d, fn, user, id});
  *handle = reinterpret_cast<CUasyncCallbackHandle>(static_cast<std::uintptr_t>(0xA5000 + id));
  count("notification_registrations");
  note("async_register device " + std::to_string(d) + " handle " + hex(*handle));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDeviceUnregisterAsyncNotification(CUdevice d, CUasyncCallbackHandle handle) {
  FAKE_ENTER();
  if (on_notification_thread) {
    return fail(CUDA_ERROR_NOT_PERMITTED);
  }
  auto& r = registrations();
  for (auto it = r.begin(); it != r.end(); ++it) {
    if (it->device == d &&
        reinterpret_cast<CUasyncCallbackHandle>(static_cast<std::uintptr_t>(0xA5000 + it->id)) == handle) {
      r.erase(it);
      count("notification_unregistrations");
      note("async_unregister device " + std::to_string(d) + " handle " + hex(handle));
      return CUDA_SUCCESS;
    }
  }
  return fail(CUDA_ERROR_INVALID_VALUE);
}

// --- issue 34 part 6: graphs (node switches, executable flags, capture into an existing graph) --------

// An accepted instantiation: its graph, its flags, and the nodes disabled in it.
struct fake_graph_exec {
  int* graph;
  cuuint64_t flags;
  std::set<CUgraphNode> disabled;
};
bool accepting_instantiations = false;
std::vector<std::unique_ptr<fake_graph_exec>>& graph_execs() {
  static std::vector<std::unique_ptr<fake_graph_exec>> execs;
  return execs;
}
fake_graph_exec* known_exec(CUgraphExec e) {
  for (const auto& x : graph_execs()) {
    if (x.get() == reinterpret_cast<fake_graph_exec*>(e)) {
      return x.get();
    }
  }
  return nullptr;
}

bool accept_instantiation(CUgraphExec* exec, CUgraph g, const CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  if (!accepting_instantiations) {
    return false;
  }
  graph_execs().push_back(std::make_unique<fake_graph_exec>(fake_graph_exec{reinterpret_cast<int*>(g), p->flags, {}}));
  *exec = reinterpret_cast<CUgraphExec>(graph_execs().back().get());
  count("graph_instantiations");
  if ((p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) != 0) {
    count("device_graph_instantiations");
  }
  return true;
}

CUresult CUDAAPI fake_cuGraphExecDestroy(CUgraphExec e) {
  FAKE_ENTER_ALWAYS();
  const auto before = graph_execs().size();
  std::erase_if(graph_execs(), [e](const auto& x) { return x.get() == reinterpret_cast<fake_graph_exec*>(e); });
  return graph_execs().size() < before ? CUDA_SUCCESS : fail(CUDA_ERROR_INVALID_VALUE);
}

CUresult CUDAAPI fake_cuGraphExecGetFlags(CUgraphExec e, cuuint64_t* flags) {
  FAKE_ENTER();
  const fake_graph_exec* x = known_exec(e);
  if (x == nullptr) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  *flags = x->flags;
  return CUDA_SUCCESS;
}

// As the driver documents: a node of the executable's graph, of a kind it switches (kernel, memcpy,
// memset); anything else is CUDA_ERROR_INVALID_VALUE.
fake_graph_exec* switchable(CUgraphExec e, CUgraphNode n) {
  fake_graph_exec* x = known_exec(e);
  const fake_graph_node* node = known_node(n);
  if (x == nullptr || node == nullptr || node->graph != x->graph) {
    return nullptr;
  }
  const bool kind = node->type == CU_GRAPH_NODE_TYPE_KERNEL || node->type == CU_GRAPH_NODE_TYPE_MEMCPY ||
                    node->type == CU_GRAPH_NODE_TYPE_MEMSET;
  return kind ? x : nullptr;
}

CUresult CUDAAPI fake_cuGraphNodeSetEnabled(CUgraphExec e, CUgraphNode n, unsigned enabled) {
  FAKE_ENTER();
  fake_graph_exec* x = switchable(e, n);
  if (x == nullptr) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  count("node_switches");
  if (enabled != 0) {
    x->disabled.erase(n);
  } else {
    x->disabled.insert(n);
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuGraphNodeGetEnabled(CUgraphExec e, CUgraphNode n, unsigned* enabled) {
  FAKE_ENTER();
  fake_graph_exec* x = switchable(e, n);
  if (x == nullptr) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  *enabled = x->disabled.count(n) == 0 ? 1U : 0U;
  return CUDA_SUCCESS;
}

// A capture into an existing graph: the fake captures no work; it records what it was given (the
// dependencies, checked to be nodes of that graph, and their edge data) and marks the stream capturing.
// A destroyed stream's capture is forgotten (fake_cuStreamDestroy), as its handle may be reused.
std::map<CUstream, CUgraph> captures_to_graph;
void forget_capture(CUstream h) {
  captures_to_graph.erase(h);
  if (capturing_stream == h) {
    capturing_stream = nullptr;
  }
}

CUresult CUDAAPI fake_cuStreamBeginCaptureToGraph(CUstream h, CUgraph g, const CUgraphNode* deps,
                                                  const CUgraphEdgeData* edges, std::size_t count_deps,
                                                  CUstreamCaptureMode) {
  FAKE_ENTER();
  if (!usable_stream(h) || st().graphs.count(g) == 0 || captures_to_graph.count(h) != 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  for (std::size_t i = 0; i < count_deps; ++i) {
    const fake_graph_node* node = known_node(deps[i]);
    if (node == nullptr || node->graph != reinterpret_cast<int*>(g)) {
      return fail(CUDA_ERROR_INVALID_VALUE);
    }
  }
  count("captures_to_graph");
  count("capture_dependencies", static_cast<long long>(count_deps));
  for (std::size_t i = 0; edges != nullptr && i < count_deps; ++i) {
    count("capture_edges");
    if (edges[i].type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC) {
      count("capture_programmatic_edges");
    }
  }
  captures_to_graph[h] = g;
  capturing_stream = h;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuStreamEndCapture(CUstream h, CUgraph* g) {
  FAKE_ENTER();
  const auto found = captures_to_graph.find(h);
  if (found == captures_to_graph.end()) {
    return fail(CUDA_ERROR_ILLEGAL_STATE);
  }
  *g = found->second;
  captures_to_graph.erase(found);
  if (capturing_stream == h) {
    capturing_stream = nullptr;
  }
  count("captures_ended");
  return CUDA_SUCCESS;
}

// --- cuGetProcAddress -----------------------------------------------------------------------------

struct symbol {
  const char* name;
  void* fn;
};

#define FAKE_SYMBOL(name) \
  { #name, reinterpret_cast < void*>(&fake_##name) }
const symbol symbols[] = {
    FAKE_SYMBOL(cuInit),
    FAKE_SYMBOL(cuDriverGetVersion),
    FAKE_SYMBOL(cuGetErrorName),
    FAKE_SYMBOL(cuGetErrorString),
    FAKE_SYMBOL(cuDeviceGetCount),
    FAKE_SYMBOL(cuDeviceGet),
    FAKE_SYMBOL(cuDeviceGetName),
    FAKE_SYMBOL(cuDeviceTotalMem),
    FAKE_SYMBOL(cuDeviceGetAttribute),
    FAKE_SYMBOL(cuDeviceGetDefaultMemPool),
    FAKE_SYMBOL(cuMemPoolGetAttribute),
    FAKE_SYMBOL(cuMemPoolSetAttribute),
    FAKE_SYMBOL(cuDevicePrimaryCtxRetain),
    FAKE_SYMBOL(cuDevicePrimaryCtxRelease),
    FAKE_SYMBOL(cuDevicePrimaryCtxGetState),
    FAKE_SYMBOL(cuCtxCreate),
    FAKE_SYMBOL(cuCtxDestroy),
    FAKE_SYMBOL(cuCtxGetCurrent),
    FAKE_SYMBOL(cuCtxSetCurrent),
    FAKE_SYMBOL(cuCtxPopCurrent),
    FAKE_SYMBOL(cuCtxGetDevice),
    FAKE_SYMBOL(cuCtxGetId),
    FAKE_SYMBOL(cuCtxSynchronize),
    FAKE_SYMBOL(cuMemGetInfo),
    FAKE_SYMBOL(cuStreamCreateWithPriority),
    FAKE_SYMBOL(cuStreamDestroy),
    FAKE_SYMBOL(cuStreamSynchronize),
    FAKE_SYMBOL(cuStreamQuery),
    FAKE_SYMBOL(cuStreamGetCtx),
    FAKE_SYMBOL(cuStreamGetId),
    FAKE_SYMBOL(cuStreamWaitEvent),
    FAKE_SYMBOL(cuStreamGetCaptureInfo),
    FAKE_SYMBOL(cuLaunchHostFunc),
    FAKE_SYMBOL(cuEventCreate),
    FAKE_SYMBOL(cuEventDestroy),
    FAKE_SYMBOL(cuEventRecord),
    FAKE_SYMBOL(cuMemAlloc),
    FAKE_SYMBOL(cuMemFree),
    FAKE_SYMBOL(cuMemAllocAsync),
    FAKE_SYMBOL(cuMemFreeAsync),
    FAKE_SYMBOL(cuMemcpy),
    FAKE_SYMBOL(cuMemcpyAsync),
    FAKE_SYMBOL(cuPointerGetAttributes),
    FAKE_SYMBOL(cuMemGetAddressRange),
    FAKE_SYMBOL(cuLibraryLoadData),
    FAKE_SYMBOL(cuLibraryUnload),
    FAKE_SYMBOL(cuLibraryGetKernel),
    FAKE_SYMBOL(cuLibraryGetKernelCount),
    FAKE_SYMBOL(cuLibraryEnumerateKernels),
    FAKE_SYMBOL(cuLibraryGetModule),
    FAKE_SYMBOL(cuKernelGetFunction),
    FAKE_SYMBOL(cuFuncLoad),
    FAKE_SYMBOL(cuKernelGetName),
    FAKE_SYMBOL(cuKernelGetParamInfo),
    FAKE_SYMBOL(cuKernelGetAttribute),
    FAKE_SYMBOL(cuLibraryGetGlobal),
    FAKE_SYMBOL(cuLaunchKernel),
    FAKE_SYMBOL(cuGraphCreate),
    FAKE_SYMBOL(cuGraphDestroy),
    FAKE_SYMBOL(cuGraphAddEmptyNode),
    FAKE_SYMBOL(cuGraphNodeGetType),
    FAKE_SYMBOL(cuGraphGetNodes),
    FAKE_SYMBOL(cuGraphInstantiateWithParams),
    FAKE_SYMBOL(cuGraphConditionalHandleCreate),
    FAKE_SYMBOL(cuGraphAddNode),
    // launch attributes: the extended launch, kernel nodes, cluster occupancy (issue 32)
    FAKE_SYMBOL(cuLaunchKernelEx),
    FAKE_SYMBOL(cuGraphAddKernelNode),
    FAKE_SYMBOL(cuGraphKernelNodeSetAttribute),
    FAKE_SYMBOL(cuGraphDestroyNode),
    FAKE_SYMBOL(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags),
    FAKE_SYMBOL(cuOccupancyMaxActiveClusters),
    FAKE_SYMBOL(cuOccupancyMaxPotentialClusterSize),
    // IPC (issue 17)
    FAKE_SYMBOL(cuMemPoolCreate),
    FAKE_SYMBOL(cuMemPoolDestroy),
    FAKE_SYMBOL(cuMemAllocFromPoolAsync),
    FAKE_SYMBOL(cuMemPoolExportToShareableHandle),
    FAKE_SYMBOL(cuMemPoolImportFromShareableHandle),
    FAKE_SYMBOL(cuMemPoolExportPointer),
    FAKE_SYMBOL(cuMemPoolImportPointer),
    FAKE_SYMBOL(cuIpcGetMemHandle),
    FAKE_SYMBOL(cuIpcOpenMemHandle),
    FAKE_SYMBOL(cuIpcCloseMemHandle),
    FAKE_SYMBOL(cuMemcpyBatchAsync),
    FAKE_SYMBOL(cuMemcpy3DBatchAsync),
    FAKE_SYMBOL(cuMemcpy2DAsync),
    FAKE_SYMBOL(cuMemcpy3DAsync),
    FAKE_SYMBOL(cuStreamWaitValue32),
    FAKE_SYMBOL(cuStreamWaitValue64),
    FAKE_SYMBOL(cuStreamWriteValue32),
    FAKE_SYMBOL(cuStreamWriteValue64),
    FAKE_SYMBOL(cuStreamBatchMemOp),
    FAKE_SYMBOL(cuGraphAddBatchMemOpNode),
    FAKE_SYMBOL(cuStreamIsCapturing),
    FAKE_SYMBOL(cuMemGetAllocationGranularity),
    FAKE_SYMBOL(cuMemAddressReserve),
    FAKE_SYMBOL(cuMemAddressFree),
    FAKE_SYMBOL(cuMemCreate),
    FAKE_SYMBOL(cuMemRelease),
    FAKE_SYMBOL(cuMemMap),
    FAKE_SYMBOL(cuMemUnmap),
    FAKE_SYMBOL(cuMemSetAccess),
    FAKE_SYMBOL(cuMemGetAccess),
    FAKE_SYMBOL(cuMemGetAllocationPropertiesFromHandle),
    FAKE_SYMBOL(cuMemExportToShareableHandle),
    FAKE_SYMBOL(cuMemImportFromShareableHandle),
    FAKE_SYMBOL(cuMemcpyDtoD),
    // arrays, textures, surfaces
    FAKE_SYMBOL(cuArray3DCreate),
    FAKE_SYMBOL(cuArray3DGetDescriptor),
    FAKE_SYMBOL(cuArrayDestroy),
    FAKE_SYMBOL(cuMipmappedArrayCreate),
    FAKE_SYMBOL(cuMipmappedArrayGetLevel),
    FAKE_SYMBOL(cuMipmappedArrayDestroy),
    FAKE_SYMBOL(cuTexObjectCreate),
    FAKE_SYMBOL(cuTexObjectDestroy),
    FAKE_SYMBOL(cuSurfObjectCreate),
    FAKE_SYMBOL(cuSurfObjectDestroy),
    // pools of every kind, host and managed allocations, graph memory (create, destroy, allocate: above)
    FAKE_SYMBOL(cuDeviceGetMemPool),
    FAKE_SYMBOL(cuMemPoolSetAccess),
    FAKE_SYMBOL(cuMemPoolGetAccess),
    FAKE_SYMBOL(cuMemHostAlloc),
    FAKE_SYMBOL(cuMemFreeHost),
    FAKE_SYMBOL(cuMemAllocManaged),
    FAKE_SYMBOL(cuDeviceGetGraphMemAttribute),
    FAKE_SYMBOL(cuDeviceSetGraphMemAttribute),
    FAKE_SYMBOL(cuDeviceGraphMemTrim),
    FAKE_SYMBOL(cuMemPrefetchAsync),
    FAKE_SYMBOL(cuMemAdvise),
    // events waited on (the stress program); sticky faults and out of memory (issue 19)
    FAKE_SYMBOL(cuEventQuery),
    FAKE_SYMBOL(cuEventSynchronize),
    FAKE_SYMBOL(cuDevicePrimaryCtxReset),
    FAKE_SYMBOL(cuMemPoolTrimTo),
    // fills, timing, stream queries (the failure sweep's scenarios)
    FAKE_SYMBOL(cuMemsetD8),
    FAKE_SYMBOL(cuMemsetD16),
    FAKE_SYMBOL(cuMemsetD32),
    FAKE_SYMBOL(cuMemsetD8Async),
    FAKE_SYMBOL(cuMemsetD16Async),
    FAKE_SYMBOL(cuMemsetD32Async),
    FAKE_SYMBOL(cuEventElapsedTime),
    FAKE_SYMBOL(cuStreamGetPriority),
    FAKE_SYMBOL(cuStreamGetFlags),
    // issue 34 part 6: graphs (node switches, executable flags, capture into an existing graph)
    FAKE_SYMBOL(cuGraphExecDestroy),
    FAKE_SYMBOL(cuGraphExecGetFlags),
    FAKE_SYMBOL(cuGraphNodeSetEnabled),
    FAKE_SYMBOL(cuGraphNodeGetEnabled),
    FAKE_SYMBOL(cuStreamBeginCaptureToGraph),
    FAKE_SYMBOL(cuStreamEndCapture),
    // issue 34 parts 7 and 8: managed batches, range attributes, async notifications
    FAKE_SYMBOL(cuMemPrefetchBatchAsync),
    FAKE_SYMBOL(cuMemDiscardBatchAsync),
    FAKE_SYMBOL(cuMemDiscardAndPrefetchBatchAsync),
    FAKE_SYMBOL(cuMemRangeGetAttributes),
    FAKE_SYMBOL(cuDeviceRegisterAsyncNotification),
    FAKE_SYMBOL(cuDeviceUnregisterAsyncNotification),
    // issue 34 part 1: every launch attribute
    FAKE_SYMBOL(cuCtxGetLimit),
    FAKE_SYMBOL(cuCtxSetLimit),
    FAKE_SYMBOL(cuCtxResetPersistingL2Cache),
    FAKE_SYMBOL(cuGraphKernelNodeGetAttribute),
    // issue 34 part 9: profiler control
    FAKE_SYMBOL(cuProfilerStart),
    FAKE_SYMBOL(cuProfilerStop),
    // issue 34 part 5: NVML as a library component
    FAKE_SYMBOL(cuDeviceGetUuid),
    FAKE_SYMBOL(cuDeviceGetPCIBusId),
};

// Whether FAKE_CUDA_HIDE names the symbol (a driver that lacks it).
bool hidden(const char* name) {
  const char* list = std::getenv("FAKE_CUDA_HIDE");
  if (list == nullptr) {
    return false;
  }
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (item == name) {
      return true;
    }
  }
  return false;
}
// Entry points that a driver older than their CUDA version lacks (FAKE_CUDA_DRIVER_VERSION).
struct versioned_symbol {
  symbol sym;
  int since;
};
#define FAKE_SINCE(name, version) \
  { FAKE_SYMBOL(name), version }
const versioned_symbol versioned_symbols[] = {
    FAKE_SINCE(cuDeviceGetDevResource, 12040),
    FAKE_SINCE(cuCtxGetDevResource, 12040),
    FAKE_SINCE(cuGreenCtxGetDevResource, 12040),
    FAKE_SINCE(cuDevSmResourceSplitByCount, 12040),
    FAKE_SINCE(cuDevResourceGenerateDesc, 12040),
    FAKE_SINCE(cuGreenCtxCreate, 12040),
    FAKE_SINCE(cuGreenCtxDestroy, 12040),
    FAKE_SINCE(cuCtxFromGreenCtx, 12040),
    FAKE_SINCE(cuGreenCtxRecordEvent, 12040),
    FAKE_SINCE(cuGreenCtxWaitEvent, 12040),
    FAKE_SINCE(cuStreamGetGreenCtx, 12040),
    FAKE_SINCE(cuGreenCtxStreamCreate, 12050),
    FAKE_SINCE(cuGreenCtxGetId, 12090),
    // issue 34 parts 3-4: checkpoint and restore, coredump settings
    FAKE_SINCE(cuCheckpointProcessGetState, 12080),
    FAKE_SINCE(cuCheckpointProcessGetRestoreThreadId, 12080),
    FAKE_SINCE(cuCheckpointProcessLock, 12080),
    FAKE_SINCE(cuCheckpointProcessCheckpoint, 12080),
    FAKE_SINCE(cuCheckpointProcessRestore, 12080),
    FAKE_SINCE(cuCheckpointProcessUnlock, 12080),
    FAKE_SINCE(cuCoredumpGetAttributeGlobal, 12010),
    FAKE_SINCE(cuCoredumpGetAttribute, 12010),
    FAKE_SINCE(cuCoredumpSetAttributeGlobal, 12010),
    FAKE_SINCE(cuCoredumpSetAttribute, 12010),
#if CUDA_VERSION >= 12090
    // issue 34 part 2: the driver's log callbacks
    FAKE_SINCE(cuLogsRegisterCallback, 12090),
    FAKE_SINCE(cuLogsUnregisterCallback, 12090),
#endif
};

}  // namespace

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char* name, void** fn, int, cuuint64_t,
                                         CUdriverProcAddressQueryResult* status) {
  entry_scope scope;  // what it allocates is the fake's (the failure sweep's host allocations)
  for (const symbol& s : symbols) {
    if (std::strcmp(s.name, name) == 0 && !hidden(name)) {
      *fn = s.fn;
      if (status != nullptr) {
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
      }
      return CUDA_SUCCESS;
    }
  }
  for (const versioned_symbol& v : versioned_symbols) {
    if (std::strcmp(v.sym.name, name) == 0 && v.since <= driver_version()) {
      *fn = v.sym.fn;
      if (status != nullptr) {
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
      }
      return CUDA_SUCCESS;
    }
  }
  *fn = nullptr;
  if (status != nullptr) {
    *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  count(std::string("unimplemented:") + name);
  return CUDA_ERROR_NOT_FOUND;
}

FAKE_EXPORT CUresult cuInit(unsigned flags) { return fake_cuInit(flags); }
FAKE_EXPORT CUresult cuDriverGetVersion(int* v) { return fake_cuDriverGetVersion(v); }
FAKE_EXPORT CUresult cuGetErrorString(CUresult r, const char** s) { return fake_cuGetErrorString(r, s); }

// --- what the tests read ----------------------------------------------------------------------------

/// The size of the live allocation that holds @p address, or 0 when none does.
FAKE_EXPORT std::size_t fake_cuda_allocation_size(CUdeviceptr address) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  if (auto it = st().live.upper_bound(address); it != st().live.begin()) {
    --it;
    if (address < it->first + it->second.size) {
      return it->second.size - static_cast<std::size_t>(address - it->first);
    }
  }
  return 0;
}

/// A counter by name ("failed_calls", "param_info_calls", "primary_retain:0", "launches", ...); 0 when
/// it never moved.
FAKE_EXPORT long long fake_cuda_counter(const char* name) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  auto it = st().counters.find(name);
  return it != st().counters.end() ? it->second : 0;
}

/// The number of live device allocations.
FAKE_EXPORT long long fake_cuda_live_allocations() {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  return static_cast<long long>(st().live.size());
}

/// The event log (one line per stream destruction and free), copied into buf; returns its length.
FAKE_EXPORT std::size_t fake_cuda_log(char* buf, std::size_t capacity) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  const std::string& log = st().log;
  if (buf != nullptr && capacity > 0) {
    const std::size_t n = std::min(capacity - 1, log.size());
    std::memcpy(buf, log.data(), n);
    buf[n] = '\0';
  }
  return log.size();
}

/// Makes cuStreamIsCapturing report the stream as capturing (null: none).
FAKE_EXPORT void fake_cuda_memops_need_current(int on) { memops_need_current.store(on != 0); }

FAKE_EXPORT void fake_cuda_set_capturing(CUstream s) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  capturing_stream = s;
}

/// Makes cuGraphNodeGetType report @p type for node @p n (an external-semaphore node, say, which the fake
/// cannot make, or a type no cuda.h names yet).
FAKE_EXPORT void fake_cuda_set_node_type(CUgraphNode n, int type) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  reinterpret_cast<fake_graph_node*>(n)->type = type;
}

/// Sets device @p d's graph memory as a graph run would (used and reserved; the high marks follow).
FAKE_EXPORT void fake_cuda_set_graph_memory(int d, unsigned long long used, unsigned long long reserved) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  auto& m = pst().graph_memory[d];
  m[CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT] = used;
  m[CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT] = reserved;
  m[CU_GRAPH_MEM_ATTR_USED_MEM_HIGH] = std::max<cuuint64_t>(m[CU_GRAPH_MEM_ATTR_USED_MEM_HIGH], used);
  m[CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH] = std::max<cuuint64_t>(m[CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH], reserved);
}

/// The number of live cuMemHostAlloc allocations.
FAKE_EXPORT long long fake_cuda_live_host_allocations() {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  return static_cast<long long>(pst().host.size());
}

/// Whether a device address is allocated.
FAKE_EXPORT int fake_cuda_is_live(CUdeviceptr p) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  return st().live.count(p) != 0 ? 1 : 0;
}

/// Virtual memory: the n-th next call of the entry point `api` fails (cuMemAddressReserve, cuMemCreate,
/// cuMemMap, cuMemSetAccess) with CUDA_ERROR_OUT_OF_MEMORY; cuDeviceGetGraphMemAttribute with
/// CUDA_ERROR_INVALID_VALUE.
FAKE_EXPORT void fake_cuda_vmm_fail(const char* api, long long nth) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  vmm().fail_in[api] = nth;
}

/// Fabric handles: every device reports them (pools and VMM), and creating a pool or an allocation
/// with them fails with CUDA_ERROR_NOT_PERMITTED (no IMEX channel), as on a single H100 machine.
FAKE_EXPORT void fake_cuda_set_fabric_without_imex(int on) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  fabric_without_imex = on != 0;
}

/// Virtual memory: the minimum and recommended allocation granularity (default 2 MiB both).
FAKE_EXPORT void fake_cuda_vmm_set_granularity(std::size_t minimum, std::size_t recommended) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  vmm().minimum = minimum;
  vmm().recommended = recommended;
}

/// Virtual memory: how many "reservations", "handles", "mappings" or "physical" allocations are live.
FAKE_EXPORT long long fake_cuda_vmm_live(const char* what) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  const std::string w = what;
  if (w == "reservations") return static_cast<long long>(vmm().reservations.size());
  if (w == "handles") return static_cast<long long>(vmm().handles.size());
  if (w == "mappings") return static_cast<long long>(vmm().mappings.size());
  if (w == "physical") return static_cast<long long>(vmm().physical.size());
  return -1;
}

// --- arrays, textures, surfaces: what the tests read ---------------------------------------------------

/// The descriptor of the last array or mipmapped array created.
FAKE_EXPORT void fake_cuda_last_array(CUDA_ARRAY3D_DESCRIPTOR* out) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  *out = arrays().last_array;
}

/// The descriptions of the last texture object created; returns whether it had a resource view.
FAKE_EXPORT int fake_cuda_last_texture(CUDA_RESOURCE_DESC* r, CUDA_TEXTURE_DESC* t, CUDA_RESOURCE_VIEW_DESC* v) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  *r = arrays().last_resource;
  *t = arrays().last_texture;
  *v = arrays().last_view;
  return arrays().last_had_view ? 1 : 0;
}

/// The parameters of the last cuMemcpy3DAsync.
FAKE_EXPORT void fake_cuda_last_copy3d(CUDA_MEMCPY3D* out) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  *out = arrays().last_copy;
}

/// The number of live arrays (not counting mipmap levels), mipmapped arrays, textures and surfaces.
FAKE_EXPORT long long fake_cuda_live_texture_objects() {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  long long n = 0;
  for (auto& a : arrays().arrays) {
    n += (a->alive && !a->level) ? 1 : 0;
  }
  for (auto& m : arrays().mipmaps) {
    n += m->alive ? 1 : 0;
  }
  return n + static_cast<long long>(arrays().textures.size() + arrays().surfaces.size());
}

// --- sticky faults and out of memory (issue 19) -------------------------------------------------------

/// Puts the fake in the state of a faulted context: every later call (but device queries, the current-
/// and primary-context calls) returns @p code until cuDevicePrimaryCtxReset.
FAKE_EXPORT void fake_cuda_make_sticky(CUresult code) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  st().sticky = code;
}

/// Makes the next @p calls allocation entry points (cuMemAlloc, cuMemAllocAsync, cuMemAllocFromPoolAsync,
/// cuMemHostAlloc, cuMemAllocManaged, cuMemCreate) return @p code.
FAKE_EXPORT void fake_cuda_fail_allocations(CUresult code, long long calls) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  st().allocation_failure = code;
  st().allocation_failures_left = calls;
}

/// The handle of device @p d's primary context while it is active, else null.
FAKE_EXPORT void* fake_cuda_primary_context(int d) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  return st().primary[static_cast<std::size_t>(d)];
}

/// The references held on device @p d's primary context.
FAKE_EXPORT int fake_cuda_primary_refs(int d) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  return st().primary_refs[static_cast<std::size_t>(d)];
}

// --- failure injection and live objects (the failure sweep, tests/failure_sweep) --------------------------

/// Arms the injection: entry-point calls are counted from now on (on every thread), and call @p k (from
/// 1) returns @p code without doing anything; @p k = 0 only counts. @p trace keeps the name of each counted
/// call (fake_cuda_trace_name). Re-arming starts a new count.
FAKE_EXPORT void fake_cuda_inject_failure(long long k, CUresult code, int trace) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  injection_t& in = injection();
  in.armed = true;
  in.calls = 0;
  in.fail_at = k;
  in.code = code;
  in.failed_api = nullptr;
  in.tracing = trace != 0;
  in.trace.clear();
}

/// Stops counting; returns the number of calls counted since the injection was armed.
FAKE_EXPORT long long fake_cuda_disarm() {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  injection().armed = false;
  return injection().calls;
}

/// The number of entry-point calls counted since the injection was armed (0 when it never was).
FAKE_EXPORT long long fake_cuda_calls() {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  return injection().calls;
}

/// The entry point the armed failure was returned by (e.g. "cuMemAlloc"), or null while it has not been.
FAKE_EXPORT const char* fake_cuda_injected_api() {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  const char* fn = injection().failed_api;
  return fn != nullptr ? fn + 5 : nullptr;  // without "fake_"
}

/// The entry point of counted call @p k (from 1) while tracing, or null.
FAKE_EXPORT const char* fake_cuda_trace_name(long long k) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  const auto& trace = injection().trace;
  return k >= 1 && k <= static_cast<long long>(trace.size()) ? trace[static_cast<std::size_t>(k - 1)] + 5 : nullptr;
}

/// Whether the calling thread is inside the fake (an entry point, cuInit, cuGetProcAddress): what it
/// allocates there is the fake's own.
FAKE_EXPORT int fake_cuda_in_entry_point() { return entry_depth > 0 ? 1 : 0; }

/// The context current on the calling thread, as the driver sees it (no entry point is counted).
FAKE_EXPORT CUcontext fake_cuda_current_context() { return current(); }

/// The driver-side objects alive now, one "kind count" line each, copied into buf as fake_cuda_log does;
/// returns the text's length. Device allocations leave out the globals of loaded libraries (which the
/// fake keeps for the process) and include IPC mappings; primary contexts count the references held on
/// them, but for those of live green contexts (counted with them).
FAKE_EXPORT std::size_t fake_cuda_live_objects(char* buf, std::size_t capacity) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  state_t& s = st();
  long long globals = 0;
  for (const auto& lib : s.libraries) {
    for (const auto& [name, address] : lib->globals) {
      globals += s.live.count(address) != 0 ? 1 : 0;
    }
  }
  long long streams = 0, created_contexts = 0, primary_refs = 0, libraries = 0, pools = 0, greens_alive = 0;
  long long arrays_alive = 0, mipmaps_alive = 0, pending = 0;
  for (const auto& str : s.streams) {
    streams += str->alive ? 1 : 0;
    pending += str->pending;
  }
  for (const auto& c : s.contexts) {
    created_contexts += (c->alive && !c->primary && c->green == nullptr) ? 1 : 0;
  }
  for (int r : s.primary_refs) {
    primary_refs += r;
  }
  for (const auto& g : greens()) {
    primary_refs -= g->alive ? 1 : 0;  // a green context's reference: counted with it
  }
  for (const auto& lib : s.libraries) {
    libraries += lib->alive ? 1 : 0;
  }
  for (const auto& [index, info] : pool_info()) {
    pools += info.alive ? 1 : 0;
  }
  for (const auto& g : greens()) {
    greens_alive += g->alive ? 1 : 0;
  }
  for (const auto& a : arrays().arrays) {
    arrays_alive += (a->alive && !a->level) ? 1 : 0;
  }
  for (const auto& m : arrays().mipmaps) {
    mipmaps_alive += m->alive ? 1 : 0;
  }
  const std::pair<const char*, long long> kinds[] = {
      {"device_allocations", static_cast<long long>(s.live.size()) - globals},
      {"host_allocations", static_cast<long long>(pst().host.size())},
      {"streams", streams},
      {"pending_host_calls", pending},
      {"events", static_cast<long long>(s.events.size())},
      {"created_contexts", created_contexts},
      {"primary_context_refs", primary_refs},
      {"libraries", libraries},
      {"pools", pools},
      {"graphs", static_cast<long long>(s.graphs.size())},
      {"arrays", arrays_alive},
      {"mipmapped_arrays", mipmaps_alive},
      {"textures", static_cast<long long>(arrays().textures.size())},
      {"surfaces", static_cast<long long>(arrays().surfaces.size())},
      {"vmm_reservations", static_cast<long long>(vmm().reservations.size())},
      {"vmm_handles", static_cast<long long>(vmm().handles.size())},
      {"vmm_mappings", static_cast<long long>(vmm().mappings.size())},
      {"green_contexts", greens_alive},  // (IPC mappings are device allocations)
  };
  std::string text;
  for (const auto& [kind, n] : kinds) {
    text += std::string(kind) + " " + std::to_string(n) + "\n";
  }
  if (buf != nullptr && capacity > 0) {
    const std::size_t n = std::min(capacity - 1, text.size());
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return text.size();
}

// --- launch attributes: what the tests read -----------------------------------------------------------

/// What the last call of @p api (cuLaunchKernelEx, cuOccupancyMaxActiveClusters,
/// cuOccupancyMaxPotentialClusterSize, or cuGraphKernelNodeSetAttribute for the last kernel node) was
/// given: its shape into @p shape (grid x, y, z, block x, y, z, dynamic shared memory) and up to
/// @p capacity launch attributes into @p out, in the order received. Returns the number of attributes,
/// -1 when @p api was never called.
FAKE_EXPORT int fake_cuda_launch_attributes(const char* api, unsigned* shape, CUlaunchAttribute* out, int capacity) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  const auto found = launch_records().find(api);
  if (found == launch_records().end()) {
    return -1;
  }
  const launch_record& r = found->second;
  std::copy(r.shape.begin(), r.shape.end(), shape);
  const int n = static_cast<int>(r.attributes.size());
  std::copy_n(r.attributes.begin(), std::min(n, capacity), out);
  return n;
}

// --- issue 34 parts 3-4: checkpoint and restore, coredump settings: what the tests set and read ---------

/// The checkpoint state of @p pid as the fake keeps it (a CUprocessState value).
FAKE_EXPORT int fake_cuda_process_state(int pid) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  return checkpoints().state[pid];
}

/// Puts @p pid in @p state, as another tool acting on the process would.
FAKE_EXPORT void fake_cuda_set_process_state(int pid, int state) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  checkpoints().state[pid] = state;
}

/// Moves @p pid to @p state right after the next cuCheckpointProcessGetState for it reports the old one (a
/// change between cudrv's check and its transition).
FAKE_EXPORT void fake_cuda_checkpoint_race(int pid, int state) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  checkpoints().race[pid] = state;
}

/// Makes a timed lock of @p pid time out (CUDA_ERROR_NOT_READY) while @p on.
FAKE_EXPORT void fake_cuda_checkpoint_busy(int pid, int on) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  if (on != 0) {
    checkpoints().busy.insert(pid);
  } else {
    checkpoints().busy.erase(pid);
  }
}

/// Makes the next set of coredump attribute @p attrib (process-wide or per context) fail with
/// CUDA_ERROR_NOT_PERMITTED.
FAKE_EXPORT void fake_cuda_coredump_fail_set(int attrib) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  coredumps().fail_set = attrib;
}

// --- issue 34 part 2: the driver's log ----------------------------------------------------------------

/// Logs @p line through every registered log callback, on the calling thread (as the driver logs a
/// warning of a successful call).
FAKE_EXPORT void fake_cuda_emit_log(const char* line) { emit_log(line); }

/// The number of log callbacks registered now.
FAKE_EXPORT int fake_cuda_log_callbacks() {
#if CUDA_VERSION >= 12090
  std::lock_guard<std::mutex> lock(log_callbacks().mutex);
  const auto& all = log_callbacks().registered;
  return static_cast<int>(std::count_if(all.begin(), all.end(), [](const auto& c) { return c.first != nullptr; }));
#else
  return 0;
#endif
}

// --- issue 34 part 1: every launch attribute: what the tests set ---------------------------------------

/// Makes every device report no L2 access-policy windows and no persisting L2 (@p on), or the defaults.
FAKE_EXPORT void fake_cuda_set_no_l2_persistence(int on) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  no_l2_persistence = on != 0;
}

// issue 34 part 8: delivers an async notification of `type` (1: over budget, with `bytes` over) to every
// callback registered for `device`, on a thread of the fake (as the driver does), and waits for them.
// Returns how many callbacks ran.
FAKE_EXPORT int fake_cuda_deliver_async_notification(int device, unsigned type, unsigned long long bytes) {
  std::vector<notification_registration> targets;
  {
    std::lock_guard<std::recursive_mutex> lock(st().mutex);
    for (const auto& r : registrations()) {
      if (r.device == device) {
        targets.push_back(r);
      }
    }
  }
  std::thread t([&] {
    on_notification_thread = true;
    for (const auto& r : targets) {
      CUasyncNotificationInfo info{};
      info.type = static_cast<CUasyncNotificationType>(type);
      info.info.overBudget.bytesOverBudget = bytes;
      r.fn(&info, r.user, reinterpret_cast<CUasyncCallbackHandle>(static_cast<std::uintptr_t>(0xA5000 + r.id)));
    }
  });
  t.join();
  return static_cast<int>(targets.size());
}

// --- issue 34 part 6: graphs --------------------------------------------------------------------------

/// Makes cuGraphInstantiateWithParams accept (on != 0) or refuse (0, the default) every instantiation.
FAKE_EXPORT void fake_cuda_accept_instantiations(int on) {
  std::lock_guard<std::recursive_mutex> lock(st().mutex);
  accepting_instantiations = on != 0;
}
