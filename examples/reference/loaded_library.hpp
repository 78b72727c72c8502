// The part the examples' vendor references share (examples/reference/cublas.hpp, cublaslt.hpp): a library
// opened with dlopen by the first of a few names, functions resolved with dlsym, and cuBLAS-family status
// codes turned into messages. Neither cudrv nor the examples link a vendor library.
#pragma once

#include <dlfcn.h>

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

namespace example::reference {

/// A library opened with dlopen (RTLD_NOW | RTLD_LOCAL), closed by close() or the destructor. Nothing
/// throws while loading: a failure leaves reason() saying why. Neither copied nor moved.
class loaded_library {
 public:
  loaded_library() = default;
  loaded_library(const loaded_library&) = delete;
  loaded_library& operator=(const loaded_library&) = delete;
  ~loaded_library() { close(); }

  /// Opens the first of @p names that loads; otherwise reason() becomes "no <what> could be loaded
  /// (<each dlerror>)" and false is returned.
  bool open(std::initializer_list<const char*> names, const char* what) {
    std::string tried;
    for (const char* name : names) {
      handle_ = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (handle_ != nullptr) {
        name_ = name;
        reason_.clear();
        return true;
      }
      const char* why = ::dlerror();
      tried += std::string(tried.empty() ? "" : "; ") + (why != nullptr ? why : name);
    }
    reason_ = std::string("no ") + what + " could be loaded (" + tried + ")";
    return false;
  }

  /// Resolves @p symbol into @p fn; when the library lacks it, reason() becomes "<name> has no <symbol>".
  template <class F>
  bool resolve(F& fn, const char* symbol) {
    fn = reinterpret_cast<F>(::dlsym(handle_, symbol));
    if (fn == nullptr) {
      reason_ = name_ + " has no " + symbol;
    }
    return fn != nullptr;
  }

  /// Resolves @p symbol into @p fn, or null, without a reason (a function the caller can do without).
  template <class F>
  void resolve_optional(F& fn, const char* symbol) const {
    fn = handle_ != nullptr ? reinterpret_cast<F>(::dlsym(handle_, symbol)) : nullptr;
  }

  /// Closes the library (idempotent).
  void close() noexcept {
    if (handle_ != nullptr) {
      ::dlclose(handle_);
      handle_ = nullptr;
    }
  }

  /// The name it was opened by, e.g. "libcublas.so.13".
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// Why loading failed (empty while nothing failed).
  [[nodiscard]] const std::string& reason() const noexcept { return reason_; }
  /// Records why a later step (a handle's creation, ...) failed.
  void set_reason(std::string why) { reason_ = std::move(why); }

 private:
  void* handle_ = nullptr;
  std::string name_;
  std::string reason_;
};

/// A cuBLAS-family status (cuBLAS and cuBLASLt share cublasStatus_t) as text: the library's own
/// string where @p status_string (cublasGetStatusString, cublasLtGetStatusString) is known, else
/// "status N".
template <class Status>
std::string describe_status(const char* (*status_string)(Status), Status s) {
  const char* text = status_string != nullptr ? status_string(s) : nullptr;
  return text != nullptr ? std::string(text) : "status " + std::to_string(static_cast<int>(s));
}

/// Throws std::runtime_error("<library>: <what> failed: <status>") unless @p s is @p success.
template <class Status>
void check_status(Status s, Status success, const char* library, const char* what,
                  const char* (*status_string)(Status)) {
  if (s != success) {
    throw std::runtime_error(std::string(library) + ": " + what + " failed: " + describe_status(status_string, s));
  }
}

}  // namespace example::reference
