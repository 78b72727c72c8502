// Run-time loading of NVRTC and nvJitLink, their errors, and the architecture helpers.
#include "code/rtc_loader.hpp"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdlib>
#include <iterator>
#include <utility>

#include "cudrv/device.hpp"
#include "cudrv/driver.hpp"
#include "driver/driver_api.hpp"

namespace cudrv::detail {
namespace {

constexpr int header_major = CUDA_VERSION / 1000;
constexpr int header_minor = CUDA_VERSION % 1000 / 10;

// One library to load: how to name it in messages, its file name and the variable overriding it.
struct library_spec {
  const char* title;    // "NVRTC"
  const char* stem;     // "libnvrtc.so"
  const char* env_var;  // "CUDRV_LIBNVRTC"
  error_source source;
  int soname_major = 0;             // the soname's number; 0: the CUDA major version of the headers
  const char* extra_dir = nullptr;  // a toolkit directory tried before lib64 and lib (with a '/')
};

constexpr library_spec nvrtc_spec{"NVRTC", "libnvrtc.so", "CUDRV_LIBNVRTC", error_source::nvrtc};
constexpr library_spec nvjitlink_spec{"nvJitLink", "libnvJitLink.so", "CUDRV_LIBNVJITLINK", error_source::nvjitlink};

// The result of a load: the function table, or why there is none (thrown on every use).
template <class Api>
struct library_state {
  Api api;
  bool loaded = false;
  CUresult code = CUDA_SUCCESS;  // CUDA_ERROR_FILE_NOT_FOUND or CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND
  std::string call;              // "dlopen" or "dlsym"
  std::string reason;
  std::string identity;  // the loaded file: path, size and modification time
  std::string path;      // the loaded file
};

std::string dl_error() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

// Opens the library: only $env_var when it is set, else the soname of the headers' CUDA major
// version, then the toolkit's usual library directories.
template <class Api>
void* open_library(const library_spec& spec, library_state<Api>& s, std::string& path) {
  const std::string soname =
      std::string(spec.stem) + "." + std::to_string(spec.soname_major != 0 ? spec.soname_major : header_major);
  std::vector<std::string> candidates;
  const char* env = std::getenv(spec.env_var);
  const bool from_env = env != nullptr && *env != '\0';
  if (from_env) {
    candidates.emplace_back(env);
  } else {
    candidates = {soname, "/usr/local/cuda/lib64/" + soname, "/usr/local/cuda/lib/" + soname};
    if (spec.extra_dir != nullptr) {
      candidates.insert(candidates.begin() + 1, spec.extra_dir + soname);
    }
  }
  std::string tried;
  for (const auto& name : candidates) {
    if (void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      path = name;
      if (link_map* map = nullptr;
          dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr && *map->l_name != '\0') {
        path = map->l_name;
      }
      return lib;
    }
    tried += (tried.empty() ? "" : "; ") + name + " (" + dl_error() + ")";
  }
  s.code = CUDA_ERROR_FILE_NOT_FOUND;
  s.call = "dlopen";
  s.reason = std::string(spec.title) + " could not be loaded: tried " + tried + ". ";
  if (from_env) {
    s.reason += std::string("Set ") + spec.env_var + " to the full path of " + soname +
                (spec.soname_major != 0 ? std::string() : " (CUDA " + std::to_string(header_major) + ")") +
                ", or unset it to search the default locations";
  } else {
    s.reason += std::string("Install the CUDA toolkit's ") + spec.title + " (" + soname +
                "), add its directory to LD_LIBRARY_PATH, or set " + spec.env_var + " to its full path";
  }
  return nullptr;
}

template <class Api, class Resolve>
library_state<Api>* load(const library_spec& spec, Resolve&& resolve_all) {
  auto* s = new library_state<Api>;  // intentionally never destroyed, like the driver's state
  std::string path;
  void* lib = open_library(spec, *s, path);
  if (lib == nullptr) {
    return s;
  }
  std::string missing;
  resolve_all(lib, s->api, missing);
  if (!missing.empty()) {
    s->code = CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
    s->call = "dlsym";
    s->reason = path + " lacks " + missing + ": it is older than the CUDA " + std::to_string(header_major) + "." +
                std::to_string(header_minor) + " headers cudrv was built with; set " + spec.env_var +
                " to the path of a newer " + spec.stem + "." + std::to_string(header_major);
    dlclose(lib);
    s->api = Api{};
    return s;
  }
  struct stat st {};
  s->identity = path;
  s->path = path;
  if (::stat(path.c_str(), &st) == 0) {
    s->identity += " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
                   std::to_string(st.st_mtim.tv_nsec);
  }
  s->loaded = true;
  return s;
}

template <class Api>
const Api& checked(const library_spec& spec, const library_state<Api>& s) {
  if (!s.loaded) [[unlikely]] {
    throw library_unavailable_error(spec.source, static_cast<int>(s.code), error_name(s.code), s.reason, s.call,
                                    spec.title);
  }
  return s.api;
}

template <class Fn>
void resolve_one(void* lib, const std::string& symbol, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(dlsym(lib, symbol.c_str()));
  if (fn == nullptr) {
    missing += (missing.empty() ? "" : ", ") + symbol;
  }
}

const char* nvrtc_description(nvrtcResult status) {
  switch (status) {
    case NVRTC_ERROR_OUT_OF_MEMORY: return "NVRTC ran out of host memory";
    case NVRTC_ERROR_INVALID_OPTION: return "an option is unknown or has an invalid value";
    case NVRTC_ERROR_COMPILATION: return "the program does not compile";
    case NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID:
      return "a name expression does not name a __global__ function or __device__ variable";
    case NVRTC_ERROR_BUILTIN_OPERATION_FAILURE:
      return "NVRTC's builtins failed (is libnvrtc-builtins next to libnvrtc?)";
    default: return "NVRTC call failed";
  }
}

// nvJitLinkResult names and descriptions by value: the enumerators are only ever appended, and
// older headers lack the newer ones.
struct nvjitlink_row {
  const char* name;
  const char* description;
};
constexpr nvjitlink_row nvjitlink_rows[] = {
    {"NVJITLINK_SUCCESS", "success"},
    {"NVJITLINK_ERROR_UNRECOGNIZED_OPTION", "unrecognized option"},
    {"NVJITLINK_ERROR_MISSING_ARCH", "option -arch=sm_NN not specified"},
    {"NVJITLINK_ERROR_INVALID_INPUT", "invalid input"},
    {"NVJITLINK_ERROR_PTX_COMPILE", "PTX compilation failed"},
    {"NVJITLINK_ERROR_NVVM_COMPILE", "NVVM compilation failed"},
    {"NVJITLINK_ERROR_INTERNAL", "internal error"},
    {"NVJITLINK_ERROR_THREADPOOL", "thread pool error"},
    {"NVJITLINK_ERROR_UNRECOGNIZED_INPUT", "unrecognized input"},
    {"NVJITLINK_ERROR_FINALIZE", "finalizer error"},
    {"NVJITLINK_ERROR_NULL_INPUT", "null input"},
    {"NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS", "incompatible options"},
    {"NVJITLINK_ERROR_INCORRECT_INPUT_TYPE", "the input does not match its declared type"},
    {"NVJITLINK_ERROR_ARCH_MISMATCH", "architecture mismatch"},
    {"NVJITLINK_ERROR_OUTDATED_LIBRARY", "outdated library"},
    {"NVJITLINK_ERROR_MISSING_FATBIN", "missing fatbin"},
    {"NVJITLINK_ERROR_UNRECOGNIZED_ARCH", "unrecognized -arch value"},
    {"NVJITLINK_ERROR_UNSUPPORTED_ARCH", "unsupported -arch value"},
    {"NVJITLINK_ERROR_LTO_NOT_ENABLED", "the input requires -lto"},
};

std::string default_arch(const char* api, const char* field) {
  auto refuse = [&](const std::string& why) -> invalid_argument_error {
    return invalid_argument_error(api, std::string(field) +
                                           " is empty, so cudrv looked for the current device's "
                                           "architecture, but " +
                                           why + "; set " + field + ", e.g. \"sm_90\"");
  };
  if (!driver::available()) {
    throw refuse("no CUDA driver is usable (" + driver::unavailable_reason() + ")");
  }
  try {
    CUcontext ctx = nullptr;
    check(drv::cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
    if (ctx != nullptr) {
      CUdevice dev = 0;
      check(drv::cuCtxGetDevice(&dev), "cuCtxGetDevice");
      return std::to_string(device::from_native_handle(dev).compute_capability().as_int());
    }
    // No context current: every visible device must agree, else the choice would be a guess (device
    // 0's architecture, which code for another device would not run on).
    const int count = device_count();
    if (count == 0) {
      throw refuse("the driver sees no device");
    }
    const int first = device(0).compute_capability().as_int();
    for (int i = 1; i < count; ++i) {
      if (const int other = device(i).compute_capability().as_int(); other != first) {
        throw refuse("no context is current and the visible devices differ (device 0 is " + std::to_string(first) +
                     ", device " + std::to_string(i) + " is " + std::to_string(other) + ")");
      }
    }
    return std::to_string(first);
  } catch (const invalid_argument_error&) {
    throw;
  } catch (const error& e) {
    throw refuse(std::string("querying the device failed: ") + e.what());
  }
}

const library_state<nvrtc_api>& nvrtc_state() {
  static const library_state<nvrtc_api>* s = load<nvrtc_api>(nvrtc_spec, [](void* lib, nvrtc_api& api,
                                                                            std::string& missing) {
#define CUDRV_RESOLVE(name) resolve_one(lib, #name, api.name, missing);
    CUDRV_NVRTC_FUNCTIONS(CUDRV_RESOLVE)
#undef CUDRV_RESOLVE
    // Optional (NVRTC 12.8+): the precompiled-header calls.
    api.nvrtcGetPCHCreateStatus =
        reinterpret_cast<decltype(api.nvrtcGetPCHCreateStatus)>(dlsym(lib, "nvrtcGetPCHCreateStatus"));
    api.nvrtcGetPCHHeapSizeRequired =
        reinterpret_cast<decltype(api.nvrtcGetPCHHeapSizeRequired)>(dlsym(lib, "nvrtcGetPCHHeapSizeRequired"));
    api.nvrtcGetPCHHeapSize = reinterpret_cast<decltype(api.nvrtcGetPCHHeapSize)>(dlsym(lib, "nvrtcGetPCHHeapSize"));
    api.nvrtcSetPCHHeapSize = reinterpret_cast<decltype(api.nvrtcSetPCHHeapSize)>(dlsym(lib, "nvrtcSetPCHHeapSize"));
  });
  return *s;
}

}  // namespace

const nvrtc_api& nvrtc() { return checked(nvrtc_spec, nvrtc_state()); }

const std::string& nvrtc_identity() {
  (void)nvrtc();  // throws when NVRTC is unavailable
  return nvrtc_state().identity;
}

const std::string& nvrtc_path() {
  (void)nvrtc();
  return nvrtc_state().path;
}

const nvjitlink_api& nvjitlink() {
  static const library_state<nvjitlink_api>* s =
      load<nvjitlink_api>(nvjitlink_spec, [](void* lib, nvjitlink_api& api, std::string& missing) {
        // "_13_0": the CUDA version of the header, which versions the extern symbols.
        std::string suffix = "_";
        suffix.append(std::to_string(header_major)).append("_").append(std::to_string(header_minor));
#define CUDRV_RESOLVE(name) resolve_one(lib, std::string("__" #name) + suffix, api.name, missing);
        CUDRV_NVJITLINK_FUNCTIONS(CUDRV_RESOLVE)
#undef CUDRV_RESOLVE
        api.nvJitLinkVersion =
            reinterpret_cast<decltype(api.nvJitLinkVersion)>(dlsym(lib, "nvJitLinkVersion"));  // optional
      });
  return checked(nvjitlink_spec, *s);
}

int nvrtc_version_number() {
  static const int version = [] {
    const nvrtc_api& api = nvrtc();
    int major = 0;
    int minor = 0;
    if (nvrtcResult status = api.nvrtcVersion(&major, &minor); status != NVRTC_SUCCESS) {
      throw_nvrtc_error(status, "nvrtcVersion", {});
    }
    return major * 1000 + minor * 10;
  }();
  return version;
}

void throw_nvrtc_error(nvrtcResult status, const char* api, std::string context, std::string log) {
  const char* name = nvrtc().nvrtcGetErrorString(status);
  throw compile_error(error_source::nvrtc, static_cast<int>(status),
                      name != nullptr ? name : "NVRTC_ERROR_" + std::to_string(static_cast<int>(status)),
                      nvrtc_description(status), api, std::move(context), std::move(log));
}

std::string nvjitlink_result_name(int status) {
  if (status >= 0 && static_cast<std::size_t>(status) < std::size(nvjitlink_rows)) {
    return nvjitlink_rows[status].name;
  }
  return "NVJITLINK_ERROR_" + std::to_string(status);
}

void throw_nvjitlink_error(nvJitLinkResult status, const char* api, std::string context, std::string log) {
  const int code = static_cast<int>(status);
  const bool known = code >= 0 && static_cast<std::size_t>(code) < std::size(nvjitlink_rows);
  throw link_error(error_source::nvjitlink, code, nvjitlink_result_name(code),
                   known ? nvjitlink_rows[code].description : "nvJitLink call failed", api, std::move(context),
                   std::move(log));
}

std::string resolve_arch(std::string_view spelling, const char* api, const char* field) {
  if (spelling.empty()) {
    return default_arch(api, field);
  }
  std::string_view rest = spelling;
  for (std::string_view prefix : {"sm_", "compute_", "lto_"}) {
    if (rest.starts_with(prefix)) {
      rest.remove_prefix(prefix.size());
      break;
    }
  }
  std::size_t digits = 0;
  while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits])) != 0) {
    ++digits;
  }
  const std::string_view suffix = rest.substr(digits);
  if (digits < 2 || digits > 3 || rest.front() == '0' || !(suffix.empty() || suffix == "a" || suffix == "f")) {
    throw invalid_argument_error(api, std::string(field) + " \"" + std::string(spelling) +
                                          "\" is not an architecture: write sm_NN, compute_NN or NN, with an optional "
                                          "'a' or 'f' suffix (\"sm_90\", \"compute_90a\", \"100f\"), or leave it "
                                          "empty for the current device");
  }
  return std::string(rest);
}

void append_math_options(std::vector<std::string>& out, const std::optional<bool>& ftz,
                         const std::optional<bool>& prec_div, const std::optional<bool>& prec_sqrt,
                         const char* fma_option, const std::optional<bool>& fma,
                         const std::optional<int>& max_registers) {
  const std::pair<const char*, const std::optional<bool>&> flags[] = {{"-ftz", ftz},
                                                                      {"-prec-div", prec_div},
                                                                      {"-prec-sqrt", prec_sqrt},
                                                                      {fma_option, fma}};
  for (const auto& [name, value] : flags) {
    if (value) {
      out.push_back(std::string(name) + (*value ? "=true" : "=false"));
    }
  }
  if (max_registers) {
    out.push_back("-maxrregcount=" + std::to_string(*max_registers));
  }
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) {
      out += separator;
    }
    out += item;
  }
  return out;
}

// --- issue 34 part 9: NVVM IR (libNVVM) ------------------------------------------------------------

namespace {

// libNVVM's soname number is its own (4 in CUDA 12 and 13), not CUDA's; a standard toolkit keeps it in
// nvvm/lib64, pip-installed ones next to the other libraries.
constexpr library_spec nvvm_spec{
    "libNVVM", "libnvvm.so", "CUDRV_LIBNVVM", error_source::nvvm, 4, "/usr/local/cuda/nvvm/lib64/"};

const library_state<nvvm_api>& nvvm_state() {
  static const library_state<nvvm_api>* s =
      load<nvvm_api>(nvvm_spec, [](void* lib, nvvm_api& api, std::string& missing) {
#define CUDRV_RESOLVE(name) resolve_one(lib, #name, api.name, missing);
        CUDRV_RESOLVE(nvvmGetErrorString)
        CUDRV_RESOLVE(nvvmVersion)
        CUDRV_RESOLVE(nvvmIRVersion)
        CUDRV_RESOLVE(nvvmCreateProgram)
        CUDRV_RESOLVE(nvvmDestroyProgram)
        CUDRV_RESOLVE(nvvmAddModuleToProgram)
        CUDRV_RESOLVE(nvvmLazyAddModuleToProgram)
        CUDRV_RESOLVE(nvvmCompileProgram)
        CUDRV_RESOLVE(nvvmVerifyProgram)
        CUDRV_RESOLVE(nvvmGetCompiledResultSize)
        CUDRV_RESOLVE(nvvmGetCompiledResult)
        CUDRV_RESOLVE(nvvmGetProgramLogSize)
        CUDRV_RESOLVE(nvvmGetProgramLog)
#undef CUDRV_RESOLVE
      });
  return *s;
}

const char* nvvm_description(nvvm_result status) {
  switch (status) {
    case nvvm_error_out_of_memory: return "libNVVM ran out of host memory";
    case nvvm_error_ir_version_mismatch: return "the IR's NVVM IR version is not one this libNVVM reads";
    case nvvm_error_invalid_input: return "a module is not NVVM IR (text or bitcode)";
    case nvvm_error_invalid_ir: return "the IR breaks the NVVM IR rules";
    case nvvm_error_invalid_option: return "an option is unknown or has an invalid value";
    case nvvm_error_no_module_in_program: return "the program has no module";
    case nvvm_error_compilation: return "the program does not compile";
    default: return "libNVVM call failed";
  }
}

}  // namespace

const nvvm_api& nvvm() { return checked(nvvm_spec, nvvm_state()); }

const std::string& nvvm_identity() {
  (void)nvvm();  // throws when libNVVM is unavailable
  return nvvm_state().identity;
}

const std::string& nvvm_path() {
  (void)nvvm();
  return nvvm_state().path;
}

void throw_nvvm_error(nvvm_result status, const char* api, std::string context, std::string log) {
  const char* name = nvvm().nvvmGetErrorString(status);
  throw compile_error(error_source::nvvm, static_cast<int>(status),
                      name != nullptr ? name : "NVVM_ERROR_" + std::to_string(static_cast<int>(status)),
                      nvvm_description(status), api, std::move(context), std::move(log));
}

}  // namespace cudrv::detail
