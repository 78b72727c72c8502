// An NVTX injection library that records what the process annotates, for the [nvtx] tests.
//
// NVTX (header-only since NVTX 3) forwards each annotation through a table of function pointers that
// start out pointing at a loader. The first annotation of a process reads NVTX_INJECTION64_PATH,
// dlopens that library and calls its InitializeInjectionNvtx2 with a function that hands out the
// export tables; through them the library points the entries it implements at its own functions.
// Entries left alone become no-ops. Here every entry that cudrv can reach, and a few more, appends a
// record to a global list guarded by a mutex; the tests read it through nvtx_recorder.h.
//
// Each NVTX instance (each linked module that includes the NVTX headers) initialises the library
// once, so a domain created twice under one name gets the same handle.
#define NVTX_NO_IMPL  // a tool: the types and callback ids of nvtxDetail/nvtxTypes.h, no NVTX implementation
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "nvtx_recorder.h"

#define CUDRV_RECORDER_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct stored_record {
  int kind = 0;
  const char* api = "";
  std::uint64_t domain = 0;
  std::string domain_name;
  bool has_message = false;
  std::string message;
  int message_type = NVTX_MESSAGE_UNKNOWN;
  std::uint32_t category = 0;
  int color_type = NVTX_COLOR_UNKNOWN;
  std::uint32_t color = 0;
  int payload_type = NVTX_PAYLOAD_UNKNOWN;
  std::uint64_t payload = 0;
  std::uint64_t handle = 0;
  int level = 0;
  std::uint64_t thread = 0;
};

struct recorder_state {
  std::mutex mutex;
  std::deque<stored_record> records;                  // a deque: records never move once appended
  std::map<std::uint64_t, std::string> domain_names;  // domain handle -> name
  std::map<std::string, std::uint64_t> domain_handles;
  std::map<std::uint64_t, std::string> strings;  // registered string handle -> text
  std::uint64_t next_handle = 0x1000;
  std::atomic<std::uint64_t> next_range_id{1};
  std::atomic<int> initializations{0};
};

recorder_state& state() {
  static recorder_state* s = new recorder_state;  // never destroyed: NVTX may call during exit
  return *s;
}

thread_local int push_depth = 0;

std::uint64_t as_integer(const void* p) { return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p)); }

std::string narrow(const wchar_t* text) {
  std::string out;
  for (; text != nullptr && *text != L'\0'; ++text) {
    out.push_back(*text < 128 ? static_cast<char>(*text) : '?');
  }
  return out;
}

// The caller holds the mutex.
void set_domain(stored_record& r, nvtxDomainHandle_t domain) {
  r.domain = as_integer(domain);
  if (domain != nullptr) {
    auto it = state().domain_names.find(r.domain);
    r.domain_name = it != state().domain_names.end() ? it->second : "<unknown domain>";
  }
}

// The caller holds the mutex.
void set_attributes(stored_record& r, const nvtxEventAttributes_t* attr) {
  if (attr == nullptr) {
    return;
  }
  r.category = attr->category;
  r.color_type = attr->colorType;
  r.color = attr->color;
  r.payload_type = attr->payloadType;
  static_assert(sizeof(attr->payload) == sizeof(r.payload));
  std::memcpy(&r.payload, &attr->payload, sizeof(r.payload));
  r.message_type = attr->messageType;
  switch (attr->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      r.has_message = true;
      r.message = attr->message.ascii != nullptr ? attr->message.ascii : "";
      break;
    case NVTX_MESSAGE_TYPE_UNICODE:
      r.has_message = true;
      r.message = narrow(attr->message.unicode);
      break;
    case NVTX_MESSAGE_TYPE_REGISTERED: {
      r.has_message = true;
      auto it = state().strings.find(as_integer(attr->message.registered));
      r.message = it != state().strings.end() ? it->second : "<unknown registered string>";
      break;
    }
    default: break;
  }
}

void set_text(stored_record& r, const char* text) {
  r.has_message = text != nullptr;
  r.message = text != nullptr ? text : "";
  r.message_type = text != nullptr ? NVTX_MESSAGE_TYPE_ASCII : NVTX_MESSAGE_UNKNOWN;
}

void append(stored_record r) {
  r.thread = static_cast<std::uint64_t>(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  state().records.push_back(std::move(r));
}

// --- the recording entry points ---------------------------------------------------------------

// Pushes and pops: the level is counted per thread, over all domains.
int push(const char* api, nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attr, const char* text) {
  std::lock_guard<std::mutex> lock(state().mutex);
  stored_record r;
  r.kind = CUDRV_NVTX_PUSH;
  r.api = api;
  set_domain(r, domain);
  if (attr != nullptr) {
    set_attributes(r, attr);
  } else {
    set_text(r, text);
  }
  r.level = push_depth++;
  const int level = r.level;
  append(std::move(r));
  return level;
}

int pop(const char* api, nvtxDomainHandle_t domain) {
  std::lock_guard<std::mutex> lock(state().mutex);
  stored_record r;
  r.kind = CUDRV_NVTX_POP;
  r.api = api;
  set_domain(r, domain);
  r.level = push_depth > 0 ? --push_depth : -1;
  const int level = r.level;
  append(std::move(r));
  return level;
}

nvtxRangeId_t start(const char* api, nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attr, const char* text) {
  std::lock_guard<std::mutex> lock(state().mutex);
  stored_record r;
  r.kind = CUDRV_NVTX_START;
  r.api = api;
  set_domain(r, domain);
  if (attr != nullptr) {
    set_attributes(r, attr);
  } else {
    set_text(r, text);
  }
  r.handle = state().next_range_id.fetch_add(1);
  const nvtxRangeId_t id = r.handle;
  append(std::move(r));
  return id;
}

void end(const char* api, nvtxDomainHandle_t domain, nvtxRangeId_t id) {
  std::lock_guard<std::mutex> lock(state().mutex);
  stored_record r;
  r.kind = CUDRV_NVTX_END;
  r.api = api;
  set_domain(r, domain);
  r.handle = id;
  append(std::move(r));
}

void mark(const char* api, nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attr, const char* text) {
  std::lock_guard<std::mutex> lock(state().mutex);
  stored_record r;
  r.kind = CUDRV_NVTX_MARK;
  r.api = api;
  set_domain(r, domain);
  if (attr != nullptr) {
    set_attributes(r, attr);
  } else {
    set_text(r, text);
  }
  append(std::move(r));
}

void name_category(const char* api, nvtxDomainHandle_t domain, std::uint32_t category, const char* text) {
  std::lock_guard<std::mutex> lock(state().mutex);
  stored_record r;
  r.kind = CUDRV_NVTX_NAME_CATEGORY;
  r.api = api;
  set_domain(r, domain);
  set_text(r, text);
  r.category = category;
  append(std::move(r));
}

void name_object(int kind, const char* api, std::uint64_t handle, const char* text) {
  std::lock_guard<std::mutex> lock(state().mutex);
  stored_record r;
  r.kind = kind;
  r.api = api;
  set_text(r, text);
  r.handle = handle;
  append(std::move(r));
}

void NVTX_API MarkEx(const nvtxEventAttributes_t* attr) { mark("nvtxMarkEx", nullptr, attr, nullptr); }
void NVTX_API MarkA(const char* text) { mark("nvtxMarkA", nullptr, nullptr, text); }
nvtxRangeId_t NVTX_API RangeStartEx(const nvtxEventAttributes_t* attr) {
  return start("nvtxRangeStartEx", nullptr, attr, nullptr);
}
nvtxRangeId_t NVTX_API RangeStartA(const char* text) { return start("nvtxRangeStartA", nullptr, nullptr, text); }
void NVTX_API RangeEnd(nvtxRangeId_t id) { end("nvtxRangeEnd", nullptr, id); }
int NVTX_API RangePushEx(const nvtxEventAttributes_t* attr) { return push("nvtxRangePushEx", nullptr, attr, nullptr); }
int NVTX_API RangePushA(const char* text) { return push("nvtxRangePushA", nullptr, nullptr, text); }
int NVTX_API RangePop() { return pop("nvtxRangePop", nullptr); }
void NVTX_API NameCategoryA(std::uint32_t category, const char* text) {
  name_category("nvtxNameCategoryA", nullptr, category, text);
}

void NVTX_API DomainMarkEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attr) {
  mark("nvtxDomainMarkEx", domain, attr, nullptr);
}
nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attr) {
  return start("nvtxDomainRangeStartEx", domain, attr, nullptr);
}
void NVTX_API DomainRangeEnd(nvtxDomainHandle_t domain, nvtxRangeId_t id) { end("nvtxDomainRangeEnd", domain, id); }
int NVTX_API DomainRangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attr) {
  return push("nvtxDomainRangePushEx", domain, attr, nullptr);
}
int NVTX_API DomainRangePop(nvtxDomainHandle_t domain) { return pop("nvtxDomainRangePop", domain); }
void NVTX_API DomainNameCategoryA(nvtxDomainHandle_t domain, std::uint32_t category, const char* text) {
  name_category("nvtxDomainNameCategoryA", domain, category, text);
}

nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t domain, const char* text) {
  std::lock_guard<std::mutex> lock(state().mutex);
  const std::uint64_t handle = state().next_handle++;
  state().strings[handle] = text != nullptr ? text : "";
  stored_record r;
  r.kind = CUDRV_NVTX_REGISTER_STRING;
  r.api = "nvtxDomainRegisterStringA";
  set_domain(r, domain);
  set_text(r, text);
  r.handle = handle;
  append(std::move(r));
  return reinterpret_cast<nvtxStringHandle_t>(static_cast<std::uintptr_t>(handle));
}

nvtxDomainHandle_t NVTX_API DomainCreateA(const char* name) {
  std::lock_guard<std::mutex> lock(state().mutex);
  const std::string text = name != nullptr ? name : "";
  auto [it, created] = state().domain_handles.try_emplace(text, 0);
  if (created) {
    it->second = state().next_handle++;
    state().domain_names[it->second] = text;
  }
  stored_record r;
  r.kind = CUDRV_NVTX_DOMAIN_CREATE;
  r.api = "nvtxDomainCreateA";
  set_text(r, text.c_str());
  r.handle = it->second;
  append(std::move(r));
  return reinterpret_cast<nvtxDomainHandle_t>(static_cast<std::uintptr_t>(it->second));
}

void NVTX_API DomainDestroy(nvtxDomainHandle_t) {}
void NVTX_API Initialize(const void*) {}

// The CUDA naming entries, with the types of nvtxTypes.h (CUdevice is an int, the others pointers).
void NVTX_API NameCuDeviceA(nvtx_CUdevice device, const char* text) {
  name_object(CUDRV_NVTX_NAME_CU_DEVICE, "nvtxNameCuDeviceA", static_cast<std::uint64_t>(device), text);
}
void NVTX_API NameCuContextA(nvtx_CUcontext context, const char* text) {
  name_object(CUDRV_NVTX_NAME_CU_CONTEXT, "nvtxNameCuContextA", as_integer(context), text);
}
void NVTX_API NameCuStreamA(nvtx_CUstream stream, const char* text) {
  name_object(CUDRV_NVTX_NAME_CU_STREAM, "nvtxNameCuStreamA", as_integer(stream), text);
}
void NVTX_API NameCuEventA(nvtx_CUevent event, const char* text) {
  name_object(CUDRV_NVTX_NAME_CU_EVENT, "nvtxNameCuEventA", as_integer(event), text);
}

// --- attaching to NVTX -------------------------------------------------------------------------

template <class F>
bool assign(NvtxFunctionTable table, unsigned int size, unsigned int id, F* fn) {
  if (table == nullptr || id >= size || table[id] == nullptr) {
    return false;
  }
  *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
  return true;
}

bool attach(const NvtxExportTableCallbacks* callbacks, NvtxCallbackModule module) {
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (callbacks->GetModuleFunctionTable(module, &table, &size) == 0 || table == nullptr) {
    return false;
  }
  bool ok = true;
  switch (module) {
    case NVTX_CB_MODULE_CORE:
      ok &= assign(table, size, NVTX_CBID_CORE_MarkEx, &MarkEx);
      ok &= assign(table, size, NVTX_CBID_CORE_MarkA, &MarkA);
      ok &= assign(table, size, NVTX_CBID_CORE_RangeStartEx, &RangeStartEx);
      ok &= assign(table, size, NVTX_CBID_CORE_RangeStartA, &RangeStartA);
      ok &= assign(table, size, NVTX_CBID_CORE_RangeEnd, &RangeEnd);
      ok &= assign(table, size, NVTX_CBID_CORE_RangePushEx, &RangePushEx);
      ok &= assign(table, size, NVTX_CBID_CORE_RangePushA, &RangePushA);
      ok &= assign(table, size, NVTX_CBID_CORE_RangePop, &RangePop);
      ok &= assign(table, size, NVTX_CBID_CORE_NameCategoryA, &NameCategoryA);
      break;
    case NVTX_CB_MODULE_CORE2:
      ok &= assign(table, size, NVTX_CBID_CORE2_DomainMarkEx, &DomainMarkEx);
      ok &= assign(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, &DomainRangeStartEx);
      ok &= assign(table, size, NVTX_CBID_CORE2_DomainRangeEnd, &DomainRangeEnd);
      ok &= assign(table, size, NVTX_CBID_CORE2_DomainRangePushEx, &DomainRangePushEx);
      ok &= assign(table, size, NVTX_CBID_CORE2_DomainRangePop, &DomainRangePop);
      ok &= assign(table, size, NVTX_CBID_CORE2_DomainNameCategoryA, &DomainNameCategoryA);
      ok &= assign(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, &DomainRegisterStringA);
      ok &= assign(table, size, NVTX_CBID_CORE2_DomainCreateA, &DomainCreateA);
      ok &= assign(table, size, NVTX_CBID_CORE2_DomainDestroy, &DomainDestroy);
      ok &= assign(table, size, NVTX_CBID_CORE2_Initialize, &Initialize);
      break;
    case NVTX_CB_MODULE_CUDA:
      ok &= assign(table, size, NVTX_CBID_CUDA_NameCuDeviceA, &NameCuDeviceA);
      ok &= assign(table, size, NVTX_CBID_CUDA_NameCuContextA, &NameCuContextA);
      ok &= assign(table, size, NVTX_CBID_CUDA_NameCuStreamA, &NameCuStreamA);
      ok &= assign(table, size, NVTX_CBID_CUDA_NameCuEventA, &NameCuEventA);
      break;
    default: return false;
  }
  return ok;
}

}  // namespace

// The entry point NVTX looks up in the library it loads. Returns 1 on success, 0 to be unloaded.
CUDRV_RECORDER_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  if (get_export_table == nullptr) {
    return 0;
  }
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks)) {
    return 0;
  }
  if (!attach(callbacks, NVTX_CB_MODULE_CORE) || !attach(callbacks, NVTX_CB_MODULE_CORE2) ||
      !attach(callbacks, NVTX_CB_MODULE_CUDA)) {
    return 0;
  }
  const auto* version = static_cast<const NvtxExportTableVersionInfo*>(get_export_table(NVTX_ETID_VERSIONINFO));
  if (version != nullptr && version->struct_size >= sizeof(NvtxExportTableVersionInfo) &&
      version->SetInjectionNvtxVersion != nullptr) {
    version->SetInjectionNvtxVersion(NVTX_VERSION);
  }
  state().initializations.fetch_add(1);
  return 1;
}

CUDRV_RECORDER_EXPORT size_t cudrv_nvtx_recorder_count(void) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().records.size();
}

CUDRV_RECORDER_EXPORT int cudrv_nvtx_recorder_get(size_t index, cudrv_nvtx_record* out) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (out == nullptr || index >= state().records.size()) {
    return 0;
  }
  const stored_record& r = state().records[index];
  out->kind = r.kind;
  out->api = r.api;
  out->domain = r.domain;
  out->domain_name = r.domain_name.c_str();
  out->has_message = r.has_message ? 1 : 0;
  out->message = r.message.c_str();
  out->message_type = r.message_type;
  out->category = r.category;
  out->color_type = r.color_type;
  out->color = r.color;
  out->payload_type = r.payload_type;
  out->payload = r.payload;
  out->handle = r.handle;
  out->level = r.level;
  out->thread = r.thread;
  return 1;
}

CUDRV_RECORDER_EXPORT void cudrv_nvtx_recorder_clear(void) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().records.clear();
}

CUDRV_RECORDER_EXPORT int cudrv_nvtx_recorder_initializations(void) { return state().initializations.load(); }
