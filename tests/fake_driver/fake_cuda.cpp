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

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// --- state ----------------------------------------------------------------------------------------

struct fake_context {
  int device = 0;
  unsigned long long id = 0;
  bool alive = false;
  bool primary = false;
};

struct fake_stream {
  fake_context* ctx = nullptr;
  unsigned long long id = 0;
  bool alive = false;
  int pending = 0;  // host functions queued and not finished
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
};

struct host_call {
  fake_stream* stream;
  CUhostFn fn;
  void* data;
};

// A graph node: a distinct handle that remembers its graph (see fake_cuGraphAddEmptyNode).
struct fake_graph_node {
  int* graph;
};

struct state_t {
  std::recursive_mutex mutex;
  std::condition_variable_any idle;
  std::vector<int> devices;  // compute capability per ordinal
  std::vector<bool> unavailable;
  std::vector<std::unique_ptr<fake_context>> contexts;
  std::vector<fake_context*> free_contexts;  // destroyed: their addresses are handed out again
  std::vector<fake_context*> primary;         // per device, null when inactive
  std::vector<int> primary_refs;
  std::vector<int> primary_retains_total;
  std::vector<std::unique_ptr<fake_stream>> streams;
  std::vector<fake_stream*> free_streams;
  std::vector<std::unique_ptr<fake_library>> libraries;
  std::vector<std::unique_ptr<fake_kernel>> kernels;
  std::map<CUdeviceptr, allocation> live;
  std::map<std::size_t, std::vector<void*>> freed;  // by size: addresses to hand out again (LIFO)
  std::vector<std::pair<CUdeviceptr, std::string>> pending_dma;  // pageable copies not landed yet
  std::deque<host_call> host_calls;
  std::thread worker;
  unsigned long long next_id = 1;
  std::vector<std::unique_ptr<fake_graph_node>> graph_nodes;  // never freed: handles stay unique
  std::map<std::string, long long> counters;
  std::string log;
  std::vector<CUmemoryPool> pools;
  std::vector<unsigned long long> pool_threshold;
  bool initialized = false;
};

state_t& st() {
  static auto* s = new state_t;
  return *s;
}

thread_local std::vector<CUcontext> ctx_stack;  // back(): the current context
thread_local bool on_callback_thread = false;

// Bookkeeping never fails a call (the tests make allocations fail on purpose).
void count(const std::string& name, long long by = 1) noexcept {
  try {
    st().counters[name] += by;
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

// Every entry point starts here: calls from the callback thread are refused, as by the real driver.
#define FAKE_ENTER()                                        \
  std::lock_guard<std::recursive_mutex> lock_(st().mutex);  \
  if (on_callback_thread) {                                 \
    count("not_permitted");                                 \
    return CUDA_ERROR_NOT_PERMITTED;                        \
  }

CUresult fail(CUresult r) noexcept {
  count("failed_calls");
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

CUresult CUDAAPI fake_cuDriverGetVersion(int* v) {
  *v = 13000;
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
  FAKE_ENTER();
  *n = static_cast<int>(st().devices.size());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDeviceGet(CUdevice* d, int ordinal) {
  FAKE_ENTER();
  if (ordinal < 0 || ordinal >= static_cast<int>(st().devices.size())) {
    return fail(CUDA_ERROR_INVALID_DEVICE);
  }
  *d = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDeviceGetName(char* name, int len, CUdevice d) {
  FAKE_ENTER();
  std::snprintf(name, static_cast<std::size_t>(len), "Fake GPU %d (sm_%d)", d, st().devices[static_cast<std::size_t>(d)]);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDeviceTotalMem(std::size_t* bytes, CUdevice) {
  FAKE_ENTER();
  *bytes = std::size_t{16} << 30;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  FAKE_ENTER();
  if (d < 0 || d >= static_cast<int>(st().devices.size())) {
    return fail(CUDA_ERROR_INVALID_DEVICE);
  }
  const int cc = st().devices[static_cast<std::size_t>(d)];
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *v = cc / 10;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *v = cc % 10;
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      *v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *v = 100;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
      *v = st().unavailable[static_cast<std::size_t>(d)] ? CU_COMPUTEMODE_EXCLUSIVE_PROCESS : CU_COMPUTEMODE_DEFAULT;
      break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:  // pools: device 1 sits next to node 1; device 0 reports no NUMA
      *v = d == 1 ? 1 : -1;
      break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED:
      *v = 1;
      break;
    case static_cast<CUdevice_attribute>(144):  // HOST_MEMORY_POOLS_SUPPORTED: device 1 only
      *v = d == 1 ? 1 : 0;
      break;
    default:
      *v = 0;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice d) {
  FAKE_ENTER();
  *pool = st().pools[static_cast<std::size_t>(d)];
  return CUDA_SUCCESS;
}

std::size_t pool_index(CUmemoryPool p) { return static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(p) - 0x9000); }

CUresult CUDAAPI fake_cuMemPoolGetAttribute(CUmemoryPool p, CUmemPool_attribute a, void* v) {
  FAKE_ENTER();
  if (a == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) {
    *static_cast<cuuint64_t*>(v) = st().pool_threshold[pool_index(p)];
    return CUDA_SUCCESS;
  }
  return fail(CUDA_ERROR_NOT_SUPPORTED);
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
  FAKE_ENTER();
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
  FAKE_ENTER();
  state_t& s = st();
  const auto i = static_cast<std::size_t>(d);
  if (s.primary_refs[i] == 0) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  if (--s.primary_refs[i] == 0) {
    destroy_context(s.primary[i]);
    s.primary[i] = nullptr;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDevicePrimaryCtxGetState(CUdevice d, unsigned* flags, int* active) {
  FAKE_ENTER();
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
  FAKE_ENTER();
  *c = current();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCtxSetCurrent(CUcontext c) {
  FAKE_ENTER();
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
  FAKE_ENTER();
  if (ctx_stack.empty()) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  *c = ctx_stack.back();
  ctx_stack.pop_back();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCtxGetDevice(CUdevice* d) {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  *d = as_ctx(current())->device;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuCtxGetId(CUcontext c, unsigned long long* id) {
  FAKE_ENTER();
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

CUresult CUDAAPI fake_cuStreamCreateWithPriority(CUstream* out, unsigned, int) {
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
  *out = reinterpret_cast<CUstream>(str);
  count("streams_created");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuStreamDestroy(CUstream h) {
  FAKE_ENTER();
  fake_stream* str = as_stream(h);
  if (!str->alive) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  str->alive = false;
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

CUresult CUDAAPI fake_cuStreamGetId(CUstream h, unsigned long long* id) {
  FAKE_ENTER();
  if (!usable_stream(h)) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  *id = as_stream(h)->id;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuStreamWaitEvent(CUstream h, CUevent, unsigned) {
  FAKE_ENTER();
  return usable_stream(h) ? CUDA_SUCCESS : fail(CUDA_ERROR_INVALID_HANDLE);
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
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuEventDestroy(CUevent e) {
  FAKE_ENTER();
  delete reinterpret_cast<int*>(e);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuEventRecord(CUevent, CUstream h) {
  FAKE_ENTER();
  return usable_stream(h) ? CUDA_SUCCESS : fail(CUDA_ERROR_INVALID_HANDLE);
}

CUresult CUDAAPI fake_cuMemAlloc(CUdeviceptr* p, std::size_t size) {
  FAKE_ENTER();
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
  if (!usable_stream(h) || stream_context(h) == nullptr) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  return copy(dst, src, n);
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
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *static_cast<int*>(data[i]) = a != nullptr ? a->device : -2;
        break;
      case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *static_cast<CUdeviceptr*>(data[i]) = a != nullptr ? start : 0;
        break;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *static_cast<std::size_t*>(data[i]) = a != nullptr ? a->size : 0;
        break;
      case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        *static_cast<void**>(data[i]) = nullptr;
        break;
      case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *static_cast<unsigned long long*>(data[i]) = 0;
        break;
      case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *static_cast<CUmemoryPool*>(data[i]) = nullptr;
        break;
      default:
        *static_cast<int*>(data[i]) = 0;
    }
  }
  return CUDA_SUCCESS;
}

fake_library* as_lib(CUlibrary l) { return reinterpret_cast<fake_library*>(l); }
fake_kernel* as_kernel(CUkernel k) { return reinterpret_cast<fake_kernel*>(k); }

CUresult CUDAAPI fake_cuLibraryLoadData(CUlibrary* out, const void* image, CUjit_option*, void**, unsigned,
                                        CUlibraryOption*, void**, unsigned) {
  FAKE_ENTER();
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
  std::map<void*, std::size_t> host;                                  // cuMemHostAlloc
  std::map<int, std::array<cuuint64_t, 4>> graph_memory;              // by device, CUgraphMem_attribute order
};

pool_state_t& pst() {
  static auto* s = new pool_state_t;
  return *s;
}

std::string describe_location(const CUmemLocation& l) {
  return std::to_string(static_cast<int>(l.type)) + ":" + std::to_string(l.id);
}

CUresult CUDAAPI fake_cuMemPoolCreate(CUmemoryPool* out, const CUmemPoolProps* p) {
  FAKE_ENTER();
  state_t& s = st();
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
    default:
      return fail(CUDA_ERROR_INVALID_VALUE);
  }
  *out = reinterpret_cast<CUmemoryPool>(0x9000 + s.pools.size());
  s.pools.push_back(*out);
  s.pool_threshold.push_back(0);
  pst().props[*out] = *p;
  pst().alive[*out] = true;
  count("pools_created");
  note("pool_create " + hex(*out) + " type " + std::to_string(static_cast<int>(p->allocType)) + " location " +
       describe_location(p->location) + " handles " + std::to_string(static_cast<int>(p->handleTypes)) +
       " max " + std::to_string(p->maxSize));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice d) {  // the default: never changed here
  FAKE_ENTER();
  *pool = st().pools[static_cast<std::size_t>(d)];
  return CUDA_SUCCESS;
}

bool created_pool(CUmemoryPool p) { return pst().alive.count(p) != 0 && pst().alive[p]; }

CUresult CUDAAPI fake_cuMemPoolDestroy(CUmemoryPool p) {
  FAKE_ENTER();
  if (!created_pool(p)) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  pst().alive[p] = false;
  count("pools_destroyed");
  note("pool_destroy " + hex(p));
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

CUresult CUDAAPI fake_cuMemAllocFromPoolAsync(CUdeviceptr* out, std::size_t size, CUmemoryPool p, CUstream h) {
  FAKE_ENTER();
  fake_context* c = stream_context(h);
  if (!usable_stream(h) || c == nullptr) {
    return fail(CUDA_ERROR_INVALID_HANDLE);
  }
  int device = c->device;
  if (auto it = pst().props.find(p); it != pst().props.end()) {
    if (!created_pool(p)) {
      return fail(CUDA_ERROR_INVALID_VALUE);
    }
    device = it->second.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? it->second.location.id : -1;
  }
  *out = reinterpret_cast<CUdeviceptr>(allocate_bytes(size));
  st().live[*out] = {size, nullptr, device};
  count("allocations");
  count("pool_allocations");
  note("alloc_from_pool " + hex(reinterpret_cast<void*>(*out)) + " pool " + hex(p) + " on " + hex(h));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemHostAlloc(void** out, std::size_t size, unsigned flags) {
  FAKE_ENTER();
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

CUresult CUDAAPI fake_cuMemAllocManaged(CUdeviceptr* out, std::size_t size, unsigned flags) {
  FAKE_ENTER();
  if (current() == nullptr) {
    return fail(CUDA_ERROR_INVALID_CONTEXT);
  }
  *out = reinterpret_cast<CUdeviceptr>(allocate_bytes(size));
  st().live[*out] = {size, as_ctx(current()), as_ctx(current())->device};
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
  note("prefetch " + hex(reinterpret_cast<void*>(p)) + " " + std::to_string(n) + " to " + describe_location(l));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuMemAdvise(CUdeviceptr p, std::size_t n, CUmem_advise a, CUmemLocation l) {
  FAKE_ENTER();
  if (st().live.count(p) == 0) {
    return fail(CUDA_ERROR_INVALID_VALUE);
  }
  note("advise " + hex(reinterpret_cast<void*>(p)) + " " + std::to_string(n) + " " + std::to_string(static_cast<int>(a)) +
       " at " + describe_location(l));
  return CUDA_SUCCESS;
}

std::array<cuuint64_t, 4>* graph_memory_of(CUdevice d) {
  if (d < 0 || d >= static_cast<int>(st().devices.size())) {
    return nullptr;
  }
  return &pst().graph_memory[d];  // zero-initialised on first use
}

CUresult CUDAAPI fake_cuDeviceGetGraphMemAttribute(CUdevice d, CUgraphMem_attribute a, void* v) {
  FAKE_ENTER();
  auto* m = graph_memory_of(d);
  if (m == nullptr) {
    return fail(CUDA_ERROR_INVALID_DEVICE);
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
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cuGraphDestroy(CUgraph g) {
  FAKE_ENTER();
  delete reinterpret_cast<int*>(g);
  return CUDA_SUCCESS;
}

// Each node is a distinct handle that remembers its graph, so that a dependency array cudrv hands
// over can be checked: "graph_deps_seen" counts the dependencies received, "graph_bad_deps" those
// that are not nodes of the same graph.
CUresult CUDAAPI fake_cuGraphAddEmptyNode(CUgraphNode* n, CUgraph g, const CUgraphNode* deps, std::size_t count_deps) {
  FAKE_ENTER();
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
  *n = reinterpret_cast<CUgraphNode>(st().graph_nodes.back().get());
  return CUDA_SUCCESS;
}

// --- cuGetProcAddress -----------------------------------------------------------------------------

struct symbol {
  const char* name;
  void* fn;
};

#define FAKE_SYMBOL(name) {#name, reinterpret_cast<void*>(&fake_##name)}
const symbol symbols[] = {
    FAKE_SYMBOL(cuInit), FAKE_SYMBOL(cuDriverGetVersion), FAKE_SYMBOL(cuGetErrorName), FAKE_SYMBOL(cuGetErrorString),
    FAKE_SYMBOL(cuDeviceGetCount), FAKE_SYMBOL(cuDeviceGet), FAKE_SYMBOL(cuDeviceGetName),
    FAKE_SYMBOL(cuDeviceTotalMem), FAKE_SYMBOL(cuDeviceGetAttribute), FAKE_SYMBOL(cuDeviceGetDefaultMemPool),
    FAKE_SYMBOL(cuMemPoolGetAttribute), FAKE_SYMBOL(cuMemPoolSetAttribute), FAKE_SYMBOL(cuDevicePrimaryCtxRetain),
    FAKE_SYMBOL(cuDevicePrimaryCtxRelease), FAKE_SYMBOL(cuDevicePrimaryCtxGetState), FAKE_SYMBOL(cuCtxCreate),
    FAKE_SYMBOL(cuCtxDestroy), FAKE_SYMBOL(cuCtxGetCurrent), FAKE_SYMBOL(cuCtxSetCurrent), FAKE_SYMBOL(cuCtxPopCurrent),
    FAKE_SYMBOL(cuCtxGetDevice), FAKE_SYMBOL(cuCtxGetId), FAKE_SYMBOL(cuCtxSynchronize), FAKE_SYMBOL(cuMemGetInfo),
    FAKE_SYMBOL(cuStreamCreateWithPriority), FAKE_SYMBOL(cuStreamDestroy), FAKE_SYMBOL(cuStreamSynchronize),
    FAKE_SYMBOL(cuStreamQuery), FAKE_SYMBOL(cuStreamGetCtx), FAKE_SYMBOL(cuStreamGetId), FAKE_SYMBOL(cuStreamWaitEvent),
    FAKE_SYMBOL(cuStreamGetCaptureInfo), FAKE_SYMBOL(cuLaunchHostFunc), FAKE_SYMBOL(cuEventCreate),
    FAKE_SYMBOL(cuEventDestroy), FAKE_SYMBOL(cuEventRecord), FAKE_SYMBOL(cuMemAlloc), FAKE_SYMBOL(cuMemFree),
    FAKE_SYMBOL(cuMemAllocAsync), FAKE_SYMBOL(cuMemFreeAsync), FAKE_SYMBOL(cuMemcpy), FAKE_SYMBOL(cuMemcpyAsync),
    FAKE_SYMBOL(cuPointerGetAttributes), FAKE_SYMBOL(cuLibraryLoadData), FAKE_SYMBOL(cuLibraryUnload),
    FAKE_SYMBOL(cuLibraryGetKernel), FAKE_SYMBOL(cuLibraryGetKernelCount), FAKE_SYMBOL(cuLibraryEnumerateKernels),
    FAKE_SYMBOL(cuLibraryGetModule), FAKE_SYMBOL(cuKernelGetFunction), FAKE_SYMBOL(cuFuncLoad),
    FAKE_SYMBOL(cuKernelGetName), FAKE_SYMBOL(cuKernelGetParamInfo), FAKE_SYMBOL(cuKernelGetAttribute),
    FAKE_SYMBOL(cuLibraryGetGlobal), FAKE_SYMBOL(cuLaunchKernel), FAKE_SYMBOL(cuGraphCreate),
    FAKE_SYMBOL(cuGraphDestroy), FAKE_SYMBOL(cuGraphAddEmptyNode),
    // pools of every kind, host and managed allocations, graph memory
    FAKE_SYMBOL(cuMemPoolCreate), FAKE_SYMBOL(cuDeviceGetMemPool), FAKE_SYMBOL(cuMemPoolDestroy), FAKE_SYMBOL(cuMemPoolSetAccess),
    FAKE_SYMBOL(cuMemPoolGetAccess), FAKE_SYMBOL(cuMemAllocFromPoolAsync), FAKE_SYMBOL(cuMemHostAlloc),
    FAKE_SYMBOL(cuMemFreeHost), FAKE_SYMBOL(cuMemAllocManaged), FAKE_SYMBOL(cuDeviceGetGraphMemAttribute),
    FAKE_SYMBOL(cuDeviceSetGraphMemAttribute), FAKE_SYMBOL(cuDeviceGraphMemTrim), FAKE_SYMBOL(cuMemPrefetchAsync),
    FAKE_SYMBOL(cuMemAdvise),
};

}  // namespace

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char* name, void** fn, int, cuuint64_t,
                                         CUdriverProcAddressQueryResult* status) {
  for (const symbol& s : symbols) {
    if (std::strcmp(s.name, name) == 0) {
      *fn = s.fn;
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
