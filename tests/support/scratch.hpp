// Scratch state for the tests that touch the file system and the environment: a temporary directory,
// the working directory and an environment variable, each restored at scope exit.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>

namespace cudrv::test {

/// A new directory under the temporary directory (`<prefix>-XXXXXX`, from mkdtemp), removed with its
/// content at scope exit.
struct temp_dir {
  std::filesystem::path path;
  explicit temp_dir(const std::string& prefix = "cudrv-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed for " + pattern);
    }
    path = pattern;
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  [[nodiscard]] std::string str() const { return path.string(); }
};

/// Runs the scope in another working directory (NVRTC resolves relative names against it).
class cwd_guard {
 public:
  explicit cwd_guard(const std::filesystem::path& dir) : old_(std::filesystem::current_path()) {
    std::filesystem::current_path(dir);
  }
  cwd_guard(const cwd_guard&) = delete;
  cwd_guard& operator=(const cwd_guard&) = delete;
  ~cwd_guard() {
    std::error_code ec;
    std::filesystem::current_path(old_, ec);
  }

 private:
  std::filesystem::path old_;
};

/// Sets (or unsets, for nullopt) an environment variable for the scope.
class env_guard {
 public:
  env_guard(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
    }
    set(value);
  }
  env_guard(const env_guard&) = delete;
  env_guard& operator=(const env_guard&) = delete;
  ~env_guard() { set(old_); }

 private:
  void set(const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name_, value->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace cudrv::test
