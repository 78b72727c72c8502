// nvvm_program: run-time compilation of NVVM IR with libNVVM (issue 34 part 9).
#include "cudrv/nvvm_program.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "code/nvvm_support.hpp"
#include "code/rtc_loader.hpp"
#include "cudrv/error.hpp"

namespace cudrv {
namespace {

constexpr const char* options_api = "cudrv::nvvm_options::to_nvvm_options";

std::string describe(const std::string& name, code_kind target) {
  return "NVVM program '" + name + "' (" + std::string(to_string(target)) + ")";
}

void check_module(const std::string& program_name, const std::string& module_name, const std::string& ir) {
  if (module_name.empty()) {
    throw invalid_argument_error("cudrv::nvvm_program",
                                 "NVVM program '" + program_name + "' has a module with an empty name");
  }
  if (ir.empty()) {
    throw invalid_argument_error("cudrv::nvvm_program",
                                 "module '" + module_name + "' of NVVM program '" + program_name + "' has no IR");
  }
}

void check_nvvm_options(const nvvm_options& o, code_kind target) {
  if (target != code_kind::ptx && target != code_kind::ltoir) {
    throw invalid_argument_error(options_api, "libNVVM cannot produce " + std::string(to_string(target)) +
                                                  ": compile to ptx (for cudrv::library) or ltoir (for cudrv::linker)");
  }
  if (o.opt_level && (*o.opt_level < 0 || *o.opt_level > 3)) {
    throw invalid_argument_error(options_api, "opt_level must be 0 to 3, not " + std::to_string(*o.opt_level));
  }
}

// Owns one nvvmProgram: destroyed on every path, exceptions included.
class nvvm_handle {
 public:
  explicit nvvm_handle(const detail::nvvm_api& api, const std::string& context) : api_(api) {
    if (detail::nvvm_result s = api_.nvvmCreateProgram(&handle_); s != detail::nvvm_success) {
      detail::throw_nvvm_error(s, "nvvmCreateProgram", context);
    }
  }
  nvvm_handle(const nvvm_handle&) = delete;
  nvvm_handle& operator=(const nvvm_handle&) = delete;
  ~nvvm_handle() {
    if (handle_ != nullptr) {
      api_.nvvmDestroyProgram(&handle_);  // only fails for an invalid handle
    }
  }
  [[nodiscard]] detail::nvvm_program_handle get() const noexcept { return handle_; }

  // The program log, up to its terminating NUL; empty when it cannot be read.
  [[nodiscard]] std::string log() const {
    std::size_t size = 0;
    if (api_.nvvmGetProgramLogSize(handle_, &size) != detail::nvvm_success || size == 0) {
      return {};
    }
    std::string out(size, '\0');
    if (api_.nvvmGetProgramLog(handle_, out.data()) != detail::nvvm_success) {
      return {};
    }
    out.resize(std::char_traits<char>::length(out.c_str()));
    return out;
  }

 private:
  const detail::nvvm_api& api_;
  detail::nvvm_program_handle handle_ = nullptr;
};

// Reads the whole file at path (libdevice), or throws library_unavailable_error.
std::string read_whole_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  std::string out;
  bool ok = f != nullptr;
  if (ok) {
    char chunk[65536];
    std::size_t n = 0;
    while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) {
      out.append(chunk, n);
    }
    ok = std::ferror(f) == 0;
    std::fclose(f);
  }
  if (!ok || out.empty()) {
    throw library_unavailable_error(error_source::nvvm, static_cast<int>(CUDA_ERROR_FILE_NOT_FOUND),
                                    "CUDA_ERROR_FILE_NOT_FOUND", "libdevice " + path + " could not be read",
                                    "cudrv::nvvm_program::compile", "libdevice");
  }
  return out;
}

// Creates the libNVVM program of prog: its modules in order, then libdevice (lazily) when given.
void add_modules(const detail::nvvm_api& api, const nvvm_handle& h, const nvvm_program& prog,
                 const detail::nvvm_inputs& in, const std::string& context) {
  for (const nvvm_module& m : prog.modules()) {
    if (detail::nvvm_result s = api.nvvmAddModuleToProgram(h.get(), m.ir.data(), m.ir.size(), m.name.c_str());
        s != detail::nvvm_success) {
      detail::throw_nvvm_error(s, "nvvmAddModuleToProgram", context + ", module '" + m.name + "'", h.log());
    }
  }
  if (!in.libdevice_path.empty()) {
    if (detail::nvvm_result s =
            api.nvvmLazyAddModuleToProgram(h.get(), in.libdevice.data(), in.libdevice.size(), "libdevice.10.bc");
        s != detail::nvvm_success) {
      detail::throw_nvvm_error(s, "nvvmLazyAddModuleToProgram", context + ", libdevice " + in.libdevice_path, h.log());
    }
  }
}

// Runs verify_or_compile (nvvmVerifyProgram or nvvmCompileProgram) with the option list; throws with
// the log on failure, returns the log on success.
std::string run_step(const detail::nvvm_api& api, const nvvm_handle& h, const detail::nvvm_inputs& in, bool compile,
                     const std::string& context) {
  std::vector<const char*> ptrs;
  ptrs.reserve(in.options.size());
  for (const auto& o : in.options) {
    ptrs.push_back(o.c_str());
  }
  const int count = static_cast<int>(ptrs.size());
  const detail::nvvm_result s = compile ? api.nvvmCompileProgram(h.get(), count, ptrs.data())
                                        : api.nvvmVerifyProgram(h.get(), count, ptrs.data());
  std::string log = h.log();
  if (s != detail::nvvm_success) {
    detail::throw_nvvm_error(s, compile ? "nvvmCompileProgram" : "nvvmVerifyProgram",
                             context + " with options: " + detail::join(in.options, " "), std::move(log));
  }
  return log;
}

std::string append_log(std::string first, const std::string& second) {
  if (!first.empty() && !second.empty() && first.back() != '\n') {
    first += '\n';
  }
  return first + second;
}

}  // namespace

std::vector<std::string> nvvm_options::to_nvvm_options(code_kind target) const {
  check_nvvm_options(*this, target);
  const std::string number = detail::resolve_arch(arch, options_api, "nvvm_options::arch");
  std::vector<std::string> out;
  out.reserve(10 + extra_options.size());
  out.push_back("-arch=compute_" + number);
  if (opt_level) {
    out.push_back("-opt=" + std::to_string(*opt_level));
  }
  if (debug) {
    out.emplace_back("-g");
  }
  if (line_info) {
    out.emplace_back("-generate-line-info");
  }
  // fast_math fills in the unset ones with the fast choice.
  const std::pair<const char*, std::optional<bool>> flags[] = {
      {"-ftz=", fast_math ? std::optional<bool>(ftz.value_or(true)) : ftz},
      {"-prec-div=", fast_math ? std::optional<bool>(prec_div.value_or(false)) : prec_div},
      {"-prec-sqrt=", fast_math ? std::optional<bool>(prec_sqrt.value_or(false)) : prec_sqrt},
      {"-fma=", fast_math ? std::optional<bool>(fma.value_or(true)) : fma}};
  for (const auto& [name, value] : flags) {
    if (value) {
      out.push_back(std::string(name) + (*value ? "1" : "0"));
    }
  }
  if (target == code_kind::ltoir) {
    out.emplace_back("-gen-lto");
  }
  out.insert(out.end(), extra_options.begin(), extra_options.end());
  return out;
}

nvvm_program::nvvm_program(std::string name, std::string ir) : name_(std::move(name)) {
  if (name_.empty()) {
    throw invalid_argument_error("cudrv::nvvm_program", "the program's name is empty");
  }
  check_module(name_, name_, ir);
  modules_.push_back({name_, std::move(ir)});
}

nvvm_program::nvvm_program(std::string name, std::vector<nvvm_module> modules)
    : name_(std::move(name)), modules_(std::move(modules)) {
  if (name_.empty()) {
    throw invalid_argument_error("cudrv::nvvm_program", "the program's name is empty");
  }
  if (modules_.empty()) {
    throw invalid_argument_error("cudrv::nvvm_program", "NVVM program '" + name_ + "' has no module");
  }
  for (const nvvm_module& m : modules_) {
    check_module(name_, m.name, m.ir);
  }
}

nvvm_program& nvvm_program::add_module(std::string module_name, std::string ir) {
  check_module(name_, module_name, ir);
  modules_.push_back({std::move(module_name), std::move(ir)});
  return *this;
}

std::string nvvm_program::verify(const nvvm_options& options) const {
  const detail::nvvm_inputs in = detail::prepare_nvvm(options, code_kind::ptx);
  const detail::nvvm_api& api = detail::nvvm();
  const std::string context = describe(name_, code_kind::ptx);
  const nvvm_handle h(api, context);
  add_modules(api, h, *this, in, context);
  return run_step(api, h, in, false, context);
}

compile_result nvvm_program::compile(code_kind target, const nvvm_options& options) const {
  return detail::compile_nvvm(*this, target, detail::prepare_nvvm(options, target));
}

namespace detail {

nvvm_inputs prepare_nvvm(const nvvm_options& options, code_kind target) {
  nvvm_inputs in;
  in.options = options.to_nvvm_options(target);
  in.verify = options.verify;
  if (options.libdevice) {
    in.libdevice_path = find_libdevice();
    in.libdevice = read_whole_file(in.libdevice_path);
  }
  return in;
}

compile_result compile_nvvm(const nvvm_program& prog, code_kind target, const nvvm_inputs& in) {
  const nvvm_api& api = nvvm();
  const std::string context = describe(prog.name(), target);
  const nvvm_handle h(api, context);
  add_modules(api, h, prog, in, context);
  compile_result result;
  if (in.verify) {
    result.log = run_step(api, h, in, false, context);
  }
  result.log = append_log(std::move(result.log), run_step(api, h, in, true, context));
  std::size_t size = 0;
  if (nvvm_result s = api.nvvmGetCompiledResultSize(h.get(), &size); s != nvvm_success) {
    throw_nvvm_error(s, "nvvmGetCompiledResultSize", context, std::move(result.log));
  }
  std::string bytes(size, '\0');
  if (size > 0) {
    if (nvvm_result s = api.nvvmGetCompiledResult(h.get(), bytes.data()); s != nvvm_success) {
      throw_nvvm_error(s, "nvvmGetCompiledResult", context, std::move(result.log));
    }
  }
  if (target == code_kind::ptx) {
    bytes.resize(std::char_traits<char>::length(bytes.c_str()));  // up to the terminating NUL
  }
  if (bytes.empty()) {
    throw_nvvm_error(nvvm_error_compilation, "nvvmCompileProgram",
                     context + ": libNVVM produced no " + std::string(to_string(target)) +
                         " with options: " + join(in.options, " "),
                     std::move(result.log));
  }
  result.code = object_code(target, std::move(bytes), prog.name());
  return result;
}

}  // namespace detail

nvvm_version_info nvvm_version() {
  const detail::nvvm_api& api = detail::nvvm();
  nvvm_version_info v;
  if (detail::nvvm_result s = api.nvvmVersion(&v.major, &v.minor); s != detail::nvvm_success) {
    detail::throw_nvvm_error(s, "nvvmVersion", {});
  }
  if (detail::nvvm_result s = api.nvvmIRVersion(&v.ir_major, &v.ir_minor, &v.debug_major, &v.debug_minor);
      s != detail::nvvm_success) {
    detail::throw_nvvm_error(s, "nvvmIRVersion", {});
  }
  return v;
}

namespace {

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// The candidates find_libdevice tries, in order (none when $CUDRV_LIBDEVICE names the only one).
std::vector<std::string> libdevice_candidates() {
  constexpr const char* file = "libdevice.10.bc";
  std::vector<std::string> out;
  const std::string& lib = detail::nvvm_path();  // throws when libNVVM cannot be loaded
  if (const std::size_t slash = lib.rfind('/'); slash != std::string::npos) {
    const std::string dir = lib.substr(0, slash);
    out.push_back(dir + "/../libdevice/" + file);       // <toolkit>/nvvm/lib64/libnvvm.so.4
    out.push_back(dir + "/../nvvm/libdevice/" + file);  // <toolkit>/lib/libnvvm.so.4 (pip layout)
  }
  for (const char* var : {"CUDA_PATH", "CUDA_HOME"}) {
    if (const std::string root = env_or_empty(var); !root.empty()) {
      out.push_back(root + "/nvvm/libdevice/" + file);
    }
  }
  out.push_back(std::string("/usr/local/cuda/nvvm/libdevice/") + file);
  return out;
}

std::string locate_libdevice() {
  const std::string from_env = env_or_empty("CUDRV_LIBDEVICE");
  const std::vector<std::string> candidates =
      from_env.empty() ? libdevice_candidates() : std::vector<std::string>{from_env};
  for (const auto& path : candidates) {
    if (is_regular_file(path)) {
      return path;
    }
  }
  throw library_unavailable_error(
      error_source::nvvm, static_cast<int>(CUDA_ERROR_FILE_NOT_FOUND), "CUDA_ERROR_FILE_NOT_FOUND",
      "libdevice (libdevice.10.bc) was not found: tried " + detail::join(candidates, "; ") +
          (from_env.empty() ? ". Install the CUDA toolkit's NVVM component, or set CUDRV_LIBDEVICE to the file's path"
                            : ". Set CUDRV_LIBDEVICE to the path of libdevice.10.bc, or unset it to search the "
                              "default locations"),
      "cudrv::find_libdevice", "libdevice");
}

}  // namespace

const std::string& find_libdevice() {
  // A failure is not kept: the exception is thrown again, and a later call searches again.
  static const std::string path = locate_libdevice();
  return path;
}

}  // namespace cudrv
