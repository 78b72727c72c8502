// program: run-time compilation with NVRTC.
#include "cudrv/program.hpp"

#include <cctype>
#include <utility>

#include "code/rtc_loader.hpp"
#include "cudrv/error.hpp"

namespace cudrv {
namespace {

constexpr const char* options_api = "cudrv::compile_options::to_nvrtc_options";

bool is_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s.front())) != 0) {
    return false;
  }
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_') {
      return false;
    }
  }
  return true;
}

// "NAME", "NAME=VALUE" or "NAME(args)=VALUE": the macro's name must be an identifier.
bool valid_define(std::string_view d) { return is_identifier(d.substr(0, d.find_first_of("=("))); }

bool valid_standard(std::string_view s) {
  return s.size() == 5 && s.starts_with("c++") && std::isdigit(static_cast<unsigned char>(s[3])) != 0 &&
         std::isdigit(static_cast<unsigned char>(s[4])) != 0;
}

std::string describe(const std::string& name, code_kind target) {
  return "program '" + name + "' (" + std::string(to_string(target)) + ")";
}

// Owns one nvrtcProgram: destroyed on every path, exceptions included.
class nvrtc_program {
 public:
  explicit nvrtc_program(const detail::nvrtc_api& api) : api_(api) {}
  nvrtc_program(const nvrtc_program&) = delete;
  nvrtc_program& operator=(const nvrtc_program&) = delete;
  ~nvrtc_program() {
    if (handle_ != nullptr) {
      api_.nvrtcDestroyProgram(&handle_);  // only fails for an invalid handle
    }
  }
  nvrtcProgram* out() noexcept { return &handle_; }
  nvrtcProgram get() const noexcept { return handle_; }

 private:
  const detail::nvrtc_api& api_;
  nvrtcProgram handle_ = nullptr;
};

// Reads a sized NVRTC output (log, PTX, cubin, LTO-IR) into a string; text loses its terminating NUL.
template <class SizeFn, class GetFn>
std::string read_output(nvrtcProgram prog, SizeFn size_fn, GetFn get_fn, const char* size_api, const char* get_api,
                        const std::string& context, bool text) {
  std::size_t size = 0;
  if (nvrtcResult s = size_fn(prog, &size); s != NVRTC_SUCCESS) {
    detail::throw_nvrtc_error(s, size_api, context);
  }
  std::string out(size, '\0');
  if (size > 0) {
    if (nvrtcResult s = get_fn(prog, out.data()); s != NVRTC_SUCCESS) {
      detail::throw_nvrtc_error(s, get_api, context);
    }
  }
  if (text) {
    out.resize(std::char_traits<char>::length(out.c_str()));  // up to the terminating NUL
  }
  return out;
}

// Precompiled headers need NVRTC 12.8 or newer.
void require_pch(const detail::nvrtc_api& api, const char* what) {
  if (api.nvrtcGetPCHCreateStatus == nullptr || api.nvrtcGetPCHHeapSizeRequired == nullptr ||
      api.nvrtcGetPCHHeapSize == nullptr || api.nvrtcSetPCHHeapSize == nullptr) {
    const int v = detail::nvrtc_version_number();
    throw not_supported_error(error_source::nvrtc, static_cast<int>(CUDA_ERROR_NOT_SUPPORTED),
                              "CUDA_ERROR_NOT_SUPPORTED",
                              "precompiled headers need NVRTC 12.8 or newer; the loaded NVRTC is " +
                                  std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10),
                              what, {});
  }
}

}  // namespace

namespace {

// Refuses, typed, pch options that ask for more than one mode, or flags without a mode.
void check_pch_options(const pch_options& pch) {
  if (int modes = int(pch.automatic) + int(!pch.create.empty()) + int(!pch.use.empty()); modes > 1) {
    throw invalid_argument_error(options_api, "pch asks for more than one mode (automatic, create, use): choose one");
  }
  if (!pch.enabled() && (!pch.directory.empty() || pch.messages || pch.instantiate_templates || pch.verbose)) {
    throw invalid_argument_error(options_api, "pch has a directory or flag but no mode: set pch.automatic, "
                                              "pch.create or pch.use");
  }
  if (pch.verbose && !pch.automatic) {
    throw invalid_argument_error(options_api, "pch.verbose applies to automatic PCH only: set pch.automatic");
  }
}

// Refuses, typed, what NVRTC cannot do with options for target: another target, LTO to another, an
// unknown dialect, no registers, malformed defines, empty include paths, contradictory pch options.
void check_nvrtc_options(const compile_options& o, code_kind target) {
  if (target != code_kind::ptx && target != code_kind::cubin && target != code_kind::ltoir) {
    throw invalid_argument_error(options_api,
                                 "NVRTC cannot produce " + std::string(to_string(target)) +
                                     ": compile to ptx, cubin or ltoir (link the rest with cudrv::linker)");
  }
  if (o.link_time_optimization && target != code_kind::ltoir) {
    throw invalid_argument_error(options_api, "link_time_optimization produces LTO-IR, not " +
                                                  std::string(to_string(target)) + ": compile to code_kind::ltoir");
  }
  if (!o.cpp_standard.empty() && !valid_standard(o.cpp_standard)) {
    throw invalid_argument_error(options_api, "cpp_standard \"" + o.cpp_standard +
                                                  "\" is not a C++ dialect NVRTC knows: write \"c++17\", \"c++20\" "
                                                  "(or c++03, c++11, c++14), or leave it empty for NVRTC's default");
  }
  if (o.max_registers && *o.max_registers <= 0) {
    throw invalid_argument_error(options_api,
                                 "max_registers must be positive, not " + std::to_string(*o.max_registers));
  }
  for (const auto& d : o.defines) {
    if (!valid_define(d)) {
      throw invalid_argument_error(options_api, "define \"" + d + "\" must be NAME or NAME=VALUE, NAME an identifier");
    }
  }
  for (const auto& path : o.include_paths) {
    if (path.empty()) {
      throw invalid_argument_error(options_api, "include_paths has an empty entry");
    }
  }
  check_pch_options(o.pch);
}

// The code-generation flags of o for target: dialect, relocatable code, LTO, debug information, math.
void append_code_options(std::vector<std::string>& out, const compile_options& o, code_kind target) {
  if (!o.cpp_standard.empty()) {
    out.push_back("-std=" + o.cpp_standard);
  }
  if (o.relocatable_device_code) {
    out.emplace_back("-rdc=true");
  }
  if (target == code_kind::ltoir) {
    out.emplace_back("-dlto");
  }
  if (o.line_info) {
    out.emplace_back("-lineinfo");
  }
  if (o.debug) {
    out.emplace_back("-G");
  }
  if (o.fast_math) {
    out.emplace_back("--use_fast_math");
  }
  detail::append_math_options(out, o.ftz, o.prec_div, o.prec_sqrt, "-fmad", o.fmad, o.max_registers);
}

// The precompiled-header flags of pch.
void append_pch_options(std::vector<std::string>& out, const pch_options& pch) {
  auto flag = [&out](const char* name, const std::optional<bool>& value) {
    if (value) {
      out.push_back(std::string(name) + (*value ? "=true" : "=false"));
    }
  };
  if (pch.automatic) {
    out.emplace_back("-pch");
  }
  if (!pch.create.empty()) {
    out.push_back("--create-pch=" + pch.create);
  }
  if (!pch.use.empty()) {
    out.push_back("--use-pch=" + pch.use);
  }
  if (!pch.directory.empty()) {
    out.push_back("--pch-dir=" + pch.directory);
  }
  flag("--pch-verbose", pch.verbose);
  flag("--pch-messages", pch.messages);
  flag("--instantiate-templates-in-pch", pch.instantiate_templates);
}

}  // namespace

std::vector<std::string> compile_options::to_nvrtc_options(code_kind target) const {
  check_nvrtc_options(*this, target);
  const std::string number = detail::resolve_arch(arch, options_api, "compile_options::arch");
  const std::vector<std::string> toolkit =
      toolkit_headers ? find_toolkit_headers().include_paths() : std::vector<std::string>{};

  std::vector<std::string> out;
  out.reserve(20 + defines.size() + include_paths.size() + extra_options.size());
  // LTO-IR is virtual-architecture code, like PTX (NVRTC gives identical LTO-IR for sm_NN).
  out.push_back((target == code_kind::cubin ? "-arch=sm_" : "-arch=compute_") + number);
  append_code_options(out, *this, target);
  for (const auto& d : defines) {
    out.push_back("-D" + d);
  }
  for (const auto& path : include_paths) {
    out.push_back("-I" + path);
  }
  for (const auto& path : toolkit) {
    out.push_back("-I" + path);
  }
  append_pch_options(out, pch);
  out.insert(out.end(), extra_options.begin(), extra_options.end());
  return out;
}

const std::string& compile_result::lowered_name(std::string_view expression) const {
  for (const auto& [expr, lowered] : lowered_names) {
    if (expr == expression) {
      return lowered;
    }
  }
  std::vector<std::string> known;
  for (const auto& entry : lowered_names) {
    known.push_back("\"" + entry.first + "\"");
  }
  throw invalid_argument_error("cudrv::compile_result::lowered_name",
                               "\"" + std::string(expression) + "\" was not a name expression of this compilation (" +
                                   (known.empty() ? std::string("it had none") : "it had " + detail::join(known)) +
                                   "); pass it to compile()");
}

program::program(std::string name, std::string source, std::vector<header> headers)
    : name_(std::move(name)), source_(std::move(source)), headers_(std::move(headers)) {
  for (const auto& h : headers_) {
    if (h.name.empty()) {
      throw invalid_argument_error("cudrv::program", "program '" + name_ + "' has a header with an empty name");
    }
  }
}

namespace {

// Creates prog from the source, its name and headers, and registers the name expressions.
void create_program(const detail::nvrtc_api& api, nvrtc_program& prog, const std::string& name,
                    const std::string& source, const std::vector<header>& headers,
                    const std::vector<std::string>& name_expressions, const std::string& context) {
  std::vector<const char*> header_sources;
  std::vector<const char*> header_names;
  for (const auto& h : headers) {
    header_sources.push_back(h.source.c_str());
    header_names.push_back(h.name.c_str());
  }
  if (nvrtcResult s =
          api.nvrtcCreateProgram(prog.out(), source.c_str(), name.empty() ? nullptr : name.c_str(),
                                 static_cast<int>(headers.size()), header_sources.data(), header_names.data());
      s != NVRTC_SUCCESS) {
    detail::throw_nvrtc_error(s, "nvrtcCreateProgram", context);
  }
  for (const auto& expr : name_expressions) {
    if (nvrtcResult s = api.nvrtcAddNameExpression(prog.get(), expr.c_str()); s != NVRTC_SUCCESS) {
      detail::throw_nvrtc_error(s, "nvrtcAddNameExpression", context + ", name expression \"" + expr + "\"");
    }
  }
}

// The code NVRTC produced for target (cubin, LTO-IR or PTX).
std::string read_code(const detail::nvrtc_api& api, nvrtcProgram prog, code_kind target, const std::string& context) {
  switch (target) {
    case code_kind::cubin:
      return read_output(prog, api.nvrtcGetCUBINSize, api.nvrtcGetCUBIN, "nvrtcGetCUBINSize", "nvrtcGetCUBIN", context,
                         false);
    case code_kind::ltoir:
      return read_output(prog, api.nvrtcGetLTOIRSize, api.nvrtcGetLTOIR, "nvrtcGetLTOIRSize", "nvrtcGetLTOIR", context,
                         false);
    default:
      return read_output(prog, api.nvrtcGetPTXSize, api.nvrtcGetPTX, "nvrtcGetPTXSize", "nvrtcGetPTX", context, true);
  }
}

// The lowered name of each name expression into result (whose log goes with an error).
void read_lowered_names(const detail::nvrtc_api& api, nvrtcProgram prog,
                        const std::vector<std::string>& name_expressions, const std::string& context,
                        compile_result& result) {
  result.lowered_names.reserve(name_expressions.size());
  for (const auto& expr : name_expressions) {
    const char* lowered = nullptr;
    if (nvrtcResult s = api.nvrtcGetLoweredName(prog, expr.c_str(), &lowered); s != NVRTC_SUCCESS) {
      detail::throw_nvrtc_error(s, "nvrtcGetLoweredName", context + ", name expression \"" + expr + "\"",
                                std::move(result.log));
    }
    result.lowered_names.emplace_back(expr, lowered != nullptr ? lowered : "");
  }
}

// What became of the PCH the compilation asked for, and the heap it needed, into result.
void read_pch_outcome(const detail::nvrtc_api& api, nvrtcProgram prog, compile_result& result) {
  switch (api.nvrtcGetPCHCreateStatus(prog)) {
    case NVRTC_SUCCESS: result.pch = pch_status::created; break;
    case NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED: result.pch = pch_status::not_attempted; break;
    case NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED: result.pch = pch_status::heap_exhausted; break;
    default: result.pch = pch_status::failed; break;
  }
  if (result.pch == pch_status::created || result.pch == pch_status::heap_exhausted) {
    std::size_t required = 0;
    if (api.nvrtcGetPCHHeapSizeRequired(prog, &required) == NVRTC_SUCCESS) {
      result.pch_heap_required = required;
    }
  }
}

}  // namespace

compile_result program::compile(code_kind target, const compile_options& options,
                                const std::vector<std::string>& name_expressions) const {
  const std::vector<std::string> option_list = options.to_nvrtc_options(target);
  const detail::nvrtc_api& api = detail::nvrtc();
  const std::string context = describe(name_, target);
  if (options.pch.enabled()) {
    require_pch(api, "cudrv::program::compile");
  }
  nvrtc_program prog(api);
  create_program(api, prog, name_, source_, headers_, name_expressions, context);

  std::vector<const char*> option_ptrs;
  option_ptrs.reserve(option_list.size());
  for (const auto& o : option_list) {
    option_ptrs.push_back(o.c_str());
  }
  const nvrtcResult status =
      api.nvrtcCompileProgram(prog.get(), static_cast<int>(option_ptrs.size()), option_ptrs.data());
  compile_result result;
  result.log = read_output(prog.get(), api.nvrtcGetProgramLogSize, api.nvrtcGetProgramLog, "nvrtcGetProgramLogSize",
                           "nvrtcGetProgramLog", context, true);
  if (status != NVRTC_SUCCESS) {
    detail::throw_nvrtc_error(status, "nvrtcCompileProgram",
                              context + " with options: " + detail::join(option_list, " "), std::move(result.log));
  }
  std::string bytes = read_code(api, prog.get(), target, context);
  if (bytes.empty()) {
    // An extra option (-dlto, another -arch) changed what NVRTC produced.
    detail::throw_nvrtc_error(NVRTC_ERROR_INVALID_OPTION, "nvrtcCompileProgram",
                              context + ": NVRTC produced no " + std::string(to_string(target)) +
                                  " with options: " + detail::join(option_list, " "),
                              std::move(result.log));
  }
  read_lowered_names(api, prog.get(), name_expressions, context, result);
  if (options.pch.enabled()) {
    read_pch_outcome(api, prog.get(), result);
  }
  result.code = object_code(target, std::move(bytes), name_);
  return result;
}

std::size_t nvrtc_pch_heap_size() {
  const detail::nvrtc_api& api = detail::nvrtc();
  require_pch(api, "cudrv::nvrtc_pch_heap_size");
  std::size_t size = 0;
  if (nvrtcResult s = api.nvrtcGetPCHHeapSize(&size); s != NVRTC_SUCCESS) {
    detail::throw_nvrtc_error(s, "nvrtcGetPCHHeapSize", {});
  }
  return size;
}

void set_nvrtc_pch_heap_size(std::size_t bytes) {
  const detail::nvrtc_api& api = detail::nvrtc();
  require_pch(api, "cudrv::set_nvrtc_pch_heap_size");
  if (nvrtcResult s = api.nvrtcSetPCHHeapSize(bytes); s != NVRTC_SUCCESS) {
    detail::throw_nvrtc_error(s, "nvrtcSetPCHHeapSize", std::to_string(bytes) + " bytes");
  }
}

int nvrtc_version() { return detail::nvrtc_version_number(); }

std::vector<int> nvrtc_supported_archs() {
  const detail::nvrtc_api& api = detail::nvrtc();
  int count = 0;
  if (nvrtcResult s = api.nvrtcGetNumSupportedArchs(&count); s != NVRTC_SUCCESS) {
    detail::throw_nvrtc_error(s, "nvrtcGetNumSupportedArchs", {});
  }
  std::vector<int> archs(static_cast<std::size_t>(count));
  if (count > 0) {
    if (nvrtcResult s = api.nvrtcGetSupportedArchs(archs.data()); s != NVRTC_SUCCESS) {
      detail::throw_nvrtc_error(s, "nvrtcGetSupportedArchs", {});
    }
  }
  return archs;
}

}  // namespace cudrv
