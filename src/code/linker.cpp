// linker: run-time linking with nvJitLink.
#include "cudrv/linker.hpp"

#include <cstdint>
#include <utility>

#include "code/image_check.hpp"
#include "code/rtc_loader.hpp"
#include "cudrv/error.hpp"

namespace cudrv {
namespace {

constexpr const char* options_api = "cudrv::link_options::to_nvjitlink_options";

nvJitLinkHandle native(void* handle) noexcept { return static_cast<nvJitLinkHandle>(handle); }

nvJitLinkInputType input_type(code_kind kind) noexcept {
  switch (kind) {
    case code_kind::ptx: return NVJITLINK_INPUT_PTX;
    case code_kind::cubin: return NVJITLINK_INPUT_CUBIN;
    case code_kind::fatbin: return NVJITLINK_INPUT_FATBIN;
    case code_kind::ltoir: return NVJITLINK_INPUT_LTOIR;
    case code_kind::object: return NVJITLINK_INPUT_OBJECT;
    case code_kind::library: return NVJITLINK_INPUT_LIBRARY;
  }
  return NVJITLINK_INPUT_NONE;
}

template <class SizeFn, class GetFn>
std::string read_log(nvJitLinkHandle handle, SizeFn size_fn, GetFn get_fn) noexcept {
  try {
    std::size_t size = 0;
    if (handle == nullptr || size_fn(handle, &size) != NVJITLINK_SUCCESS || size == 0) {
      return {};
    }
    std::string log(size, '\0');
    if (get_fn(handle, log.data()) != NVJITLINK_SUCCESS) {
      return {};
    }
    log.resize(std::char_traits<char>::length(log.c_str()));
    return log;
  } catch (...) {
    return {};  // out of memory for the log: the error is reported without it
  }
}

// The error log, or the info log when the error log is empty.
std::string failure_log(nvJitLinkHandle handle) {
  const detail::nvjitlink_api& api = detail::nvjitlink();
  std::string log = read_log(handle, api.nvJitLinkGetErrorLogSize, api.nvJitLinkGetErrorLog);
  return log.empty() ? read_log(handle, api.nvJitLinkGetInfoLogSize, api.nvJitLinkGetInfoLog) : log;
}

void destroy(void*& handle) noexcept {
  if (handle == nullptr) {
    return;
  }
  auto h = native(handle);
  handle = nullptr;
  try {
    if (nvJitLinkResult s = detail::nvjitlink().nvJitLinkDestroy(&h); s != NVJITLINK_SUCCESS) {
      get_destruction_error_handler()(error(error_source::nvjitlink, static_cast<int>(s),
                                            detail::nvjitlink_result_name(static_cast<int>(s)),
                                            "nvJitLink could not destroy a handle", "nvJitLinkDestroy", {}));
    }
  } catch (...) {
    // nvjitlink() cannot throw here: the handle exists, so the library was loaded.
  }
}

}  // namespace

std::vector<std::string> link_options::to_nvjitlink_options() const {
  if (output != code_kind::cubin && output != code_kind::ptx) {
    throw invalid_argument_error(options_api, "nvJitLink cannot produce " + std::string(to_string(output)) +
                                                  ": set output to code_kind::cubin or code_kind::ptx");
  }
  if (output == code_kind::ptx && !link_time_optimization) {
    throw invalid_argument_error(options_api, "nvJitLink emits PTX only from a link-time-optimised link: set "
                                              "link_time_optimization and add LTO-IR inputs, or link to a cubin");
  }
  if (optimization_level && *optimization_level != 0 && *optimization_level != 3) {
    // nvJitLink (13.0) accepts only -O0 and -O3 and answers anything else with UNRECOGNIZED_OPTION.
    throw invalid_argument_error(options_api,
                                 "optimization_level must be 0 or 3 (nvJitLink accepts -O0 and -O3), not " +
                                     std::to_string(*optimization_level));
  }
  if (max_registers && *max_registers <= 0) {
    throw invalid_argument_error(options_api, "max_registers must be positive, not " + std::to_string(*max_registers));
  }
  std::vector<std::string> out;
  out.reserve(12 + extra_options.size());
  out.push_back("-arch=sm_" + detail::resolve_arch(arch, options_api, "link_options::arch"));
  if (link_time_optimization) {
    out.emplace_back("-lto");
  }
  if (output == code_kind::ptx) {
    out.emplace_back("-ptx");
  }
  if (optimization_level) {
    out.push_back("-O" + std::to_string(*optimization_level));
  }
  if (debug) {
    out.emplace_back("-g");
  }
  if (line_info) {
    out.emplace_back("-lineinfo");
  }
  detail::append_math_options(out, ftz, prec_div, prec_sqrt, "-fma", fmad, max_registers);
  if (verbose) {
    out.emplace_back("-verbose");
  }
  out.insert(out.end(), extra_options.begin(), extra_options.end());
  return out;
}

linker::linker(const link_options& options) : output_(options.output), lto_(options.link_time_optimization) {
  const std::vector<std::string> option_list = options.to_nvjitlink_options();
  target_ = option_list.front().substr(6);  // after "-arch="
  const detail::nvjitlink_api& api = detail::nvjitlink();
  std::vector<const char*> ptrs;
  ptrs.reserve(option_list.size());
  for (const auto& o : option_list) {
    ptrs.push_back(o.c_str());
  }
  nvJitLinkHandle h = nullptr;
  const nvJitLinkResult status = api.nvJitLinkCreate(&h, static_cast<std::uint32_t>(ptrs.size()), ptrs.data());
  handle_ = h;  // nvJitLink may hand out a handle (holding the error log) even when it fails
  if (status != NVJITLINK_SUCCESS) {
    std::string log = failure_log(h);
    destroy(handle_);
    detail::throw_nvjitlink_error(status, "nvJitLinkCreate", "options: " + detail::join(option_list, " "),
                                  std::move(log));
  }
}

linker::linker(linker&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      output_(other.output_),
      lto_(other.lto_),
      linked_(other.linked_),
      target_(std::move(other.target_)),
      inputs_(std::move(other.inputs_)) {}

linker& linker::operator=(linker&& other) noexcept {
  if (this != &other) {
    destroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    output_ = other.output_;
    lto_ = other.lto_;
    linked_ = other.linked_;
    target_ = std::move(other.target_);
    inputs_ = std::move(other.inputs_);
  }
  return *this;
}

linker::~linker() { destroy(handle_); }

linker& linker::add(const object_code& code) {
  constexpr const char* api_name = "cudrv::linker::add";
  if (handle_ == nullptr) {
    throw invalid_argument_error(api_name, "the linker is empty (moved from)");
  }
  std::string name = code.name().empty() ? "input " + std::to_string(inputs_.size() + 1) : code.name();
  const std::string what =
      "'" + name + "' (" + std::string(to_string(code.kind())) + ", " + std::to_string(code.size()) + " bytes)";
  if (linked_) {
    throw invalid_argument_error(api_name, "cannot add " + what + ": link() was already called");
  }
  if (code.empty()) {
    throw invalid_argument_error(api_name, "input " + what + " is empty");
  }
  if (code.kind() == code_kind::ltoir && !lto_) {
    throw invalid_argument_error(api_name,
                                 "input " + what + " is LTO-IR, which needs link_options::link_time_optimization");
  }
  if (std::string problem = detail::image_problem(code.kind(), code.bytes()); !problem.empty()) {
    throw invalid_image_error(api_name, "input " + what + " is malformed: " + problem);
  }
  const detail::nvjitlink_api& api = detail::nvjitlink();
  if (nvJitLinkResult s =
          api.nvJitLinkAddData(native(handle_), input_type(code.kind()), code.data(), code.size(), name.c_str());
      s != NVJITLINK_SUCCESS) {
    detail::throw_nvjitlink_error(s, "nvJitLinkAddData", "adding input " + what + " for " + target_,
                                  failure_log(native(handle_)));
  }
  inputs_.push_back(std::move(name));
  return *this;
}

linker& linker::add_file(const std::string& path) { return add(object_code::from_file(path)); }

linker& linker::add_file(const std::string& path, code_kind kind) { return add(object_code::from_file(path, kind)); }

object_code linker::link() {
  constexpr const char* api_name = "cudrv::linker::link";
  if (handle_ == nullptr) {
    throw invalid_argument_error(api_name, "the linker is empty (moved from)");
  }
  if (linked_) {
    throw invalid_argument_error(api_name, "link() was already called on this linker; make a new one to link again");
  }
  if (inputs_.empty()) {
    throw invalid_argument_error(api_name, "there is nothing to link: add inputs first");
  }
  linked_ = true;
  const detail::nvjitlink_api& api = detail::nvjitlink();
  const auto h = native(handle_);
  const std::string context =
      "linking " + detail::join(inputs_) + " for " + target_ + " into " + std::string(to_string(output_));
  if (nvJitLinkResult s = api.nvJitLinkComplete(h); s != NVJITLINK_SUCCESS) {
    detail::throw_nvjitlink_error(s, "nvJitLinkComplete", context, failure_log(h));
  }
  const bool ptx = output_ == code_kind::ptx;
  std::size_t size = 0;
  if (nvJitLinkResult s = ptx ? api.nvJitLinkGetLinkedPtxSize(h, &size) : api.nvJitLinkGetLinkedCubinSize(h, &size);
      s != NVJITLINK_SUCCESS) {
    detail::throw_nvjitlink_error(s, ptx ? "nvJitLinkGetLinkedPtxSize" : "nvJitLinkGetLinkedCubinSize", context,
                                  failure_log(h));
  }
  std::string bytes(size, '\0');
  if (nvJitLinkResult s =
          ptx ? api.nvJitLinkGetLinkedPtx(h, bytes.data()) : api.nvJitLinkGetLinkedCubin(h, bytes.data());
      s != NVJITLINK_SUCCESS) {
    detail::throw_nvjitlink_error(s, ptx ? "nvJitLinkGetLinkedPtx" : "nvJitLinkGetLinkedCubin", context,
                                  failure_log(h));
  }
  if (ptx) {
    bytes.resize(std::char_traits<char>::length(bytes.c_str()));
  }
  return object_code(output_, std::move(bytes), ptx ? "linked.ptx" : "linked.cubin");
}

std::string linker::info_log() const {
  if (handle_ == nullptr) {
    throw invalid_argument_error("cudrv::linker::info_log", "the linker is empty (moved from)");
  }
  const detail::nvjitlink_api& api = detail::nvjitlink();
  return read_log(native(handle_), api.nvJitLinkGetInfoLogSize, api.nvJitLinkGetInfoLog);
}

std::string linker::error_log() const {
  if (handle_ == nullptr) {
    throw invalid_argument_error("cudrv::linker::error_log", "the linker is empty (moved from)");
  }
  const detail::nvjitlink_api& api = detail::nvjitlink();
  return read_log(native(handle_), api.nvJitLinkGetErrorLogSize, api.nvJitLinkGetErrorLog);
}

int nvjitlink_version() {
  const detail::nvjitlink_api& api = detail::nvjitlink();
  if (api.nvJitLinkVersion == nullptr) {
    throw library_unavailable_error(error_source::nvjitlink, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND,
                                    error_name(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND),
                                    "the loaded nvJitLink has no nvJitLinkVersion: it is older than 12.3", "dlsym",
                                    "nvJitLink");
  }
  unsigned int major = 0;
  unsigned int minor = 0;
  if (nvJitLinkResult s = api.nvJitLinkVersion(&major, &minor); s != NVJITLINK_SUCCESS) {
    detail::throw_nvjitlink_error(s, "nvJitLinkVersion", {}, {});
  }
  return static_cast<int>(major * 1000 + minor * 10);
}

}  // namespace cudrv
