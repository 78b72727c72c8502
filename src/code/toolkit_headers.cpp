// toolkit_headers: finding the CUDA toolkit's header directories (CCCL and the toolkit's include/)
// for run-time compilation.
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "code/rtc_loader.hpp"
#include "code/toolkit_headers.hpp"
#include "cudrv/error.hpp"
#include "cudrv/program.hpp"

#ifndef CUDRV_BUILD_TOOLKIT_INCLUDE
#define CUDRV_BUILD_TOOLKIT_INCLUDE ""
#endif

namespace cudrv {
namespace {

constexpr const char* version_file = "cuda/std/__cccl/version.h";

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string canonical(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  std::string out = real != nullptr ? real : path;
  std::free(real);
  return out;
}

std::string parent(std::string path) {
  while (path.size() > 1 && path.back() == '/') {
    path.pop_back();
  }
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) {
    return ".";
  }
  return slash == 0 ? std::string("/") : path.substr(0, slash);
}

// CCCL_VERSION from cuda/std/__cccl/version.h ("#define CCCL_VERSION 3000001"); 0 when absent.
int read_cccl_version(const std::string& cccl_dir) {
  std::ifstream in(cccl_dir + "/" + version_file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string directive;
    std::string name;
    long value = 0;
    if (words >> directive >> name >> value && directive == "#define" && name == "CCCL_VERSION") {
      return static_cast<int>(value);
    }
  }
  return 0;
}

struct search_outcome {
  toolkit_header_dirs dirs;
  std::string failure;  // empty when found
};

// The toolkit's headers under one include directory: include/cccl (CUDA 13) or include (CUDA 12).
bool try_include_dir(const std::string& include, const char* found_by, toolkit_header_dirs& out,
                     std::vector<std::string>& tried) {
  if (include.empty()) {
    return false;
  }
  for (const std::string& cccl : {include + "/cccl", include}) {
    tried.push_back(cccl);
    if (is_file(cccl + "/" + version_file)) {
      out.include = canonical(include);
      out.cccl = canonical(cccl);
      out.cccl_version = read_cccl_version(out.cccl);
      out.found_by = found_by;
      return true;
    }
  }
  return false;
}

search_outcome search() {
  search_outcome r;
  std::vector<std::string> tried;
  for (const char* var : {"CUDA_PATH", "CUDA_HOME"}) {
    if (const char* root = std::getenv(var); root != nullptr && *root != '\0') {
      if (try_include_dir(std::string(root) + "/include", var, r.dirs, tried)) {
        return r;
      }
    }
  }
  std::string nvrtc_file;
  try {
    nvrtc_file = canonical(detail::nvrtc_path());
  } catch (const error&) {
    // NVRTC not loadable: the other places may still hold the headers.
  }
  if (!nvrtc_file.empty()) {
    // <root>/lib64/libnvrtc.so.13, <root>/targets/<triple>/lib/libnvrtc.so.13: <lib>/../include.
    if (try_include_dir(parent(parent(nvrtc_file)) + "/include", "NVRTC", r.dirs, tried)) {
      return r;
    }
  }
  if (try_include_dir(CUDRV_BUILD_TOOLKIT_INCLUDE, "build", r.dirs, tried)) {
    return r;
  }
  r.failure = "the CUDA toolkit's CCCL headers (" + std::string(version_file) + ") were not found: tried " +
              detail::join(tried) +
              ". Set CUDA_PATH to the toolkit's root (the directory holding include/), or add the directory "
              "holding cub/ and cuda/std/ to compile_options::include_paths";
  return r;
}

}  // namespace

std::vector<std::string> toolkit_header_dirs::include_paths() const {
  if (cccl == include) {
    return {cccl};
  }
  return {cccl, include};
}

const toolkit_header_dirs& find_toolkit_headers() {
  static const search_outcome outcome = search();
  if (!outcome.failure.empty()) {
    throw library_unavailable_error(error_source::nvrtc, static_cast<int>(CUDA_ERROR_FILE_NOT_FOUND),
                                    "CUDA_ERROR_FILE_NOT_FOUND", outcome.failure, "cudrv::find_toolkit_headers", {});
  }
  return outcome.dirs;
}

namespace detail {

const toolkit_header_dirs* toolkit_headers_if_found() noexcept {
  try {
    return &find_toolkit_headers();
  } catch (...) {
    return nullptr;
  }
}

}  // namespace detail
}  // namespace cudrv
