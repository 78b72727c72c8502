// GPU coredump settings (<cudrv/coredump.hpp>): typed reads and writes of cuCoredump[GS]etAttribute[Global]
// and the scope that restores them.
#include "cudrv/coredump.hpp"

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "driver/driver_api.hpp"

namespace cudrv {
namespace {

// CU_COREDUMP_GENERATION_FLAGS by value: CUDA 12.4 headers do not name it.
constexpr auto generation_flags_attribute = static_cast<CUcoredumpSettings>(7);
#if CUDA_VERSION >= 12050
static_assert(generation_flags_attribute == CU_COREDUMP_GENERATION_FLAGS);
static_assert(static_cast<unsigned>(coredump_flags::skip_abort) == CU_COREDUMP_SKIP_ABORT);
#endif
#if CUDA_VERSION >= 13000  // the headers cudrv's flags were written against (constant banks included)
static_assert(static_cast<unsigned>(coredump_flags::lightweight) == CU_COREDUMP_LIGHTWEIGHT_FLAGS);
#endif

// The string settings: the driver's bound (cuda.h: "up to 1023 characters") plus the terminating NUL.
constexpr std::size_t name_capacity = coredump_settings::max_name_length + 1;

const char* attribute_name(CUcoredumpSettings id) noexcept {
  switch (static_cast<int>(id)) {
    case CU_COREDUMP_ENABLE_ON_EXCEPTION: return "CU_COREDUMP_ENABLE_ON_EXCEPTION";
    case CU_COREDUMP_TRIGGER_HOST: return "CU_COREDUMP_TRIGGER_HOST";
    case CU_COREDUMP_LIGHTWEIGHT: return "CU_COREDUMP_LIGHTWEIGHT";
    case CU_COREDUMP_ENABLE_USER_TRIGGER: return "CU_COREDUMP_ENABLE_USER_TRIGGER";
    case CU_COREDUMP_FILE: return "CU_COREDUMP_FILE";
    case CU_COREDUMP_PIPE: return "CU_COREDUMP_PIPE";
    default: return "CU_COREDUMP_GENERATION_FLAGS";
  }
}

// Calls every setting of s with its attribute: f(id, member). Both reads and writes go through it, so a new
// member is one line here.
template <class Settings, class F>
void for_each_setting(Settings& s, F&& f) {
  f(CU_COREDUMP_ENABLE_ON_EXCEPTION, s.enable_on_exception);
  f(CU_COREDUMP_TRIGGER_HOST, s.trigger_host);
  f(CU_COREDUMP_LIGHTWEIGHT, s.lightweight);
  f(CU_COREDUMP_ENABLE_USER_TRIGGER, s.enable_user_trigger);
  f(CU_COREDUMP_FILE, s.file);
  f(CU_COREDUMP_PIPE, s.pipe);
  f(generation_flags_attribute, s.generation_flags);
}

bool process_wide_only(CUcoredumpSettings id) noexcept {
  return id == CU_COREDUMP_ENABLE_USER_TRIGGER || id == CU_COREDUMP_PIPE;
}

// The process-wide attributes, or those of the context current on the calling thread.
struct target {
  bool global;
  const char* get_api() const { return global ? "cuCoredumpGetAttributeGlobal" : "cuCoredumpGetAttribute"; }
  const char* set_api() const { return global ? "cuCoredumpSetAttributeGlobal" : "cuCoredumpSetAttribute"; }
  CUresult get(CUcoredumpSettings id, void* value, std::size_t* size) const {
    return global ? detail::drv::cuCoredumpGetAttributeGlobal(id, value, size)
                  : detail::drv::cuCoredumpGetAttribute(id, value, size);
  }
  CUresult set(CUcoredumpSettings id, void* value, std::size_t* size) const {
    return global ? detail::drv::cuCoredumpSetAttributeGlobal(id, value, size)
                  : detail::drv::cuCoredumpSetAttribute(id, value, size);
  }
};

template <class T>
void read_value(const target& t, CUcoredumpSettings id, std::optional<T>& out) {
  auto where = [&] { return std::string(attribute_name(id)); };
  if constexpr (std::is_same_v<T, std::string>) {
    // The size the driver expects first (cuda.h: a null value asks for it), bounded by cuda.h's limit.
    std::size_t size = 0;
    if (t.get(id, nullptr, &size) != CUDA_SUCCESS || size == 0 || size > name_capacity) {
      size = name_capacity;
    }
    std::vector<char> text(size + 1, '\0');
    detail::check(t.get(id, text.data(), &size), t.get_api(), where);
    out = std::string(text.data());  // up to the first NUL
  } else {
    // Booleans take sizeof(bool) (an int's size is CUDA_ERROR_INVALID_VALUE on 580.159.04); the flags an int.
    using stored = std::conditional_t<std::is_same_v<T, bool>, bool, int>;
    stored value{};
    std::size_t size = sizeof(value);
    detail::check(t.get(id, &value, &size), t.get_api(), where);
    out = static_cast<T>(value);
  }
}

// Whether a context exists that a process-wide switch of enable_on_exception would break: a primary
// context that is active on any device, or a context current on the calling thread (cudrv cannot see
// other threads' created contexts).
bool context_exists() {
  CUcontext current = nullptr;
  if (detail::drv::cuCtxGetCurrent(&current) == CUDA_SUCCESS && current != nullptr) {
    return true;
  }
  int count = 0;
  detail::check(detail::drv::cuDeviceGetCount(&count), "cuDeviceGetCount");
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice dev = 0;
    unsigned flags = 0;
    int active = 0;
    if (detail::drv::cuDeviceGet(&dev, ordinal) == CUDA_SUCCESS &&
        detail::drv::cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active != 0) {
      return true;
    }
  }
  return false;
}

// Driver 580.159.04 (H200): switching the process-wide enable_on_exception while a context exists (on and
// back off) makes that context refuse every later module load (cuModuleLoadData, cuLibraryGetModule:
// CUDA_ERROR_INVALID_VALUE), and so does switching a context's own setting on and back off; contexts
// created afterwards are not affected, and switching a context's setting on alone broke nothing.
// Returns whether the driver must be called: not when the value is already the wanted one.
bool may_switch_on_exception(const target& t, bool wanted) {
  bool now = false;
  std::size_t size = sizeof(now);
  detail::check(t.get(CU_COREDUMP_ENABLE_ON_EXCEPTION, &now, &size), t.get_api(),
                [] { return std::string("enable_on_exception"); });
  if (now == wanted) {
    return false;
  }
  if (!t.global) {
    // Per context, on then off again (driver 580.159.04): the context refuses every later module load.
    if (!wanted) {
      throw invalid_argument_error(t.set_api(),
                                   "a context's enable_on_exception cannot switch off once on: the driver then "
                                   "refuses every module load in that context (CUDA_ERROR_INVALID_VALUE)");
    }
    return true;
  }
  if (context_exists()) {
    throw invalid_argument_error(
        t.set_api(), std::string("the process-wide enable_on_exception cannot switch ") + (wanted ? "on" : "off") +
                         " while a context exists: the driver then refuses every module load in the existing "
                         "contexts (CUDA_ERROR_INVALID_VALUE); set it before the first context is created, or per "
                         "context (coredump::set(ctx, ...), scoped_coredump_settings(ctx, ...))");
  }
  return true;
}

template <class T>
void write_value(const target& t, CUcoredumpSettings id, const std::optional<T>& in) {
  if (!in.has_value()) {
    return;
  }
  if constexpr (std::is_same_v<T, bool>) {
    if (id == CU_COREDUMP_ENABLE_ON_EXCEPTION && !may_switch_on_exception(t, *in)) {
      return;
    }
  }
  auto where = [&] { return std::string(attribute_name(id)); };
  if constexpr (std::is_same_v<T, std::string>) {
    std::vector<char> text(in->begin(), in->end());
    text.push_back('\0');
    std::size_t size = text.size();
    detail::check(t.set(id, text.data(), &size), t.set_api(), where);
  } else {
    using stored = std::conditional_t<std::is_same_v<T, bool>, bool, int>;
    auto value = static_cast<stored>(*in);
    std::size_t size = sizeof(value);
    detail::check(t.set(id, &value, &size), t.set_api(), where);
  }
}

// Refuses, before any driver call, what cuda.h documents as invalid: a name over the bound or with a NUL
// inside, and (per context) the process-wide-only settings.
void validate(const coredump_settings& s, bool global, const char* api) {
  for_each_setting(s, [&](CUcoredumpSettings id, const auto& member) {
    if (!member.has_value()) {
      return;
    }
    if (!global && process_wide_only(id)) {
      throw invalid_argument_error(api, std::string(attribute_name(id)) +
                                            " exists only process-wide (cuda.h); use coredump::set_global or a "
                                            "process-wide scoped_coredump_settings");
    }
    if constexpr (std::is_same_v<std::decay_t<decltype(*member)>, std::string>) {
      if (member->size() > coredump_settings::max_name_length) {
        throw invalid_argument_error(api, std::string(attribute_name(id)) + " is " + std::to_string(member->size()) +
                                              " characters long; the driver takes at most " +
                                              std::to_string(coredump_settings::max_name_length));
      }
      if (member->find('\0') != std::string::npos) {
        throw invalid_argument_error(api, std::string(attribute_name(id)) + " contains a NUL character");
      }
    }
  });
}

// Runs fn(target) on the process-wide settings (ctx null) or with ctx current. Either way the driver is
// initialised first: an attribute set before cuInit crashes the driver.
template <class Fn>
void on_target(CUcontext ctx, const char* api, Fn&& fn) {
  detail::ensure_driver();
  if (ctx == nullptr) {
    fn(target{true});
    return;
  }
  detail::run_in_context(ctx, api, [&] { fn(target{false}); });
}

// Reads the members of `named` that hold a value into a settings value (the others stay empty).
coredump_settings read_named(const target& t, const coredump_settings& named) {
  coredump_settings out;
  for_each_setting(out, [&](CUcoredumpSettings id, auto& member) {
    bool wanted = false;
    for_each_setting(named, [&](CUcoredumpSettings other, const auto& m) { wanted |= other == id && m.has_value(); });
    if (wanted) {
      read_value(t, id, member);
    }
  });
  return out;
}

void write_all(const target& t, const coredump_settings& s) {
  for_each_setting(s, [&](CUcoredumpSettings id, const auto& member) { write_value(t, id, member); });
}

}  // namespace

namespace coredump {

coredump_settings get_global() {
  coredump_settings out;
  on_target(nullptr, "cudrv::coredump::get_global", [&](const target& t) {
    for_each_setting(out, [&](CUcoredumpSettings id, auto& member) { read_value(t, id, member); });
  });
  return out;
}

void set_global(const coredump_settings& settings) {
  validate(settings, true, "cudrv::coredump::set_global");
  on_target(nullptr, "cudrv::coredump::set_global", [&](const target& t) { write_all(t, settings); });
}

coredump_settings get(context_ref ctx) {
  constexpr const char* api = "cudrv::coredump::get";
  coredump_settings out;
  on_target(detail::require_context_handle(ctx.native_handle(), api), api, [&](const target& t) {
    for_each_setting(out, [&](CUcoredumpSettings id, auto& member) {
      if (!process_wide_only(id)) {
        read_value(t, id, member);
      }
    });
  });
  return out;
}

void set(context_ref ctx, const coredump_settings& settings) {
  constexpr const char* api = "cudrv::coredump::set";
  validate(settings, false, api);
  on_target(detail::require_context_handle(ctx.native_handle(), api), api,
            [&](const target& t) { write_all(t, settings); });
}

}  // namespace coredump

namespace {

// s with only its first n set members (in the struct's order) left set.
coredump_settings first_named(coredump_settings s, int n) {
  int seen = 0;
  for_each_setting(s, [&](CUcoredumpSettings, auto& member) {
    if (member.has_value() && seen++ >= n) {
      member.reset();
    }
  });
  return s;
}

// Sets `wanted` one setting at a time; when one fails, puts back the previous values of those set before it
// (a failure of that goes to the destruction handler) and rethrows.
void set_or_roll_back(const target& t, const coredump_settings& wanted, const coredump_settings& previous) {
  int written = 0;
  try {
    for_each_setting(wanted, [&](CUcoredumpSettings id, const auto& member) {
      if (member.has_value()) {
        write_value(t, id, member);
        ++written;
      }
    });
  } catch (...) {
    const coredump_settings undo = first_named(previous, written);
    detail::destroy_noexcept("cudrv::scoped_coredump_settings", [&] {
      write_all(t, undo);
      return CUDA_SUCCESS;
    });
    throw;
  }
}

}  // namespace

scoped_coredump_settings::scoped_coredump_settings(const coredump_settings& settings) {
  constexpr const char* api = "cudrv::scoped_coredump_settings";
  validate(settings, true, api);
  on_target(nullptr, api, [&](const target& t) {
    previous_ = read_named(t, settings);
    set_or_roll_back(t, settings, previous_);
  });
}

scoped_coredump_settings::scoped_coredump_settings(context_ref ctx, const coredump_settings& settings)
    : context_(detail::require_context_handle(ctx.native_handle(), "cudrv::scoped_coredump_settings")) {
  constexpr const char* api = "cudrv::scoped_coredump_settings";
  validate(settings, false, api);
  on_target(context_, api, [&](const target& t) {
    previous_ = read_named(t, settings);
    set_or_roll_back(t, settings, previous_);
  });
}

scoped_coredump_settings::~scoped_coredump_settings() {
  detail::destroy_noexcept("cudrv::scoped_coredump_settings", [&] {
    on_target(context_, "cudrv::scoped_coredump_settings", [&](const target& t) { write_all(t, previous_); });
    return CUDA_SUCCESS;
  });
}

}  // namespace cudrv
