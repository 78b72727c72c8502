#include "cudrv/error.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iterator>

#include "driver/driver_api.hpp"

namespace cudrv {
namespace {

struct error_row {
  int code;
  const char* name;
  const char* description;
};

constexpr error_row error_table[] = {
#include "driver/error_table.inc"
};

const error_row* find_row(CUresult code) {
  auto it = std::lower_bound(std::begin(error_table), std::end(error_table), static_cast<int>(code),
                             [](const error_row& row, int c) { return row.code < c; });
  return (it != std::end(error_table) && it->code == static_cast<int>(code)) ? it : nullptr;
}

std::string compose(const std::string& api, const std::string& name, const std::string& description,
                    const std::string& context) {
  std::string out = api + ": " + name;
  if (!description.empty()) {
    out += " (" + description + ")";
  }
  if (!context.empty()) {
    out += " [" + context + "]";
  }
  return out;
}

void default_destruction_handler(const error& e) noexcept {
  std::fprintf(stderr, "cudrv: error during destruction: %s\n", e.what());
}

std::atomic<destruction_error_handler> current_handler{&default_destruction_handler};

}  // namespace

std::string error_name(CUresult code) {
  if (const error_row* row = find_row(code)) {
    return row->name;
  }
  return "CUDA_ERROR_" + std::to_string(static_cast<int>(code));
}

std::string error_description(CUresult code) {
  if (const char* text = detail::driver_error_string(code)) {
    return text;
  }
  if (const error_row* row = find_row(code)) {
    return row->description;
  }
  return "unknown CUDA error code " + std::to_string(static_cast<int>(code));
}

error::error(error_source source, int code, std::string name, std::string description, std::string api,
             std::string context)
    : std::runtime_error(compose(api, name, description, context)),
      source_(source),
      code_(code),
      name_(std::move(name)),
      description_(std::move(description)),
      api_(std::move(api)),
      context_(std::move(context)) {}

error::error(CUresult code, std::string api, std::string context)
    : error(error_source::driver, static_cast<int>(code), error_name(code), error_description(code),
            std::move(api), std::move(context)) {}

invalid_argument_error::invalid_argument_error(std::string api, std::string message)
    : error(error_source::cudrv, CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", std::move(message),
            std::move(api), {}) {}

namespace {
std::string describe_exception(const std::exception_ptr& original) {
  try {
    if (original) {
      std::rethrow_exception(original);
    }
  } catch (const std::exception& e) {
    return std::string("a host callable threw: ") + e.what();
  } catch (...) {
    return "a host callable threw an exception that is not a std::exception";
  }
  return "a host callable failed";
}
}  // namespace

host_callback_error::host_callback_error(std::exception_ptr original, std::string stream_context)
    : error(error_source::cudrv, CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED",
            describe_exception(original), "cudrv::stream::enqueue", std::move(stream_context)),
      original_(std::move(original)) {}

namespace {
std::string context_with_log(std::string context, const std::string& log) {
  if (log.empty()) {
    return context;
  }
  if (!context.empty()) {
    context += '\n';
  }
  return context + log;
}
std::string launch_context(const std::string& kernel_name, std::string diagnosis) {
  if (kernel_name.empty()) {
    return diagnosis;
  }
  return "kernel '" + kernel_name + "': " + diagnosis;
}
}  // namespace

jit_error::jit_error(error_source source, int code, std::string name, std::string description,
                     std::string api, std::string context, std::string log)
    : error(source, code, std::move(name), std::move(description), std::move(api),
            context_with_log(std::move(context), log)),
      log_(std::move(log)) {}

invalid_image_error::invalid_image_error(std::string api, std::string message)
    : load_error(error_source::cudrv, CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", std::move(message),
                 std::move(api), {}, {}) {}

launch_error::launch_error(error_source source, CUresult code, std::string api, std::string kernel_name,
                           std::string diagnosis)
    : error(source, static_cast<int>(code), error_name(code), error_description(code), std::move(api),
            launch_context(kernel_name, std::move(diagnosis))),
      kernel_name_(std::move(kernel_name)) {}

destruction_error_handler set_destruction_error_handler(destruction_error_handler handler) noexcept {
  return current_handler.exchange(handler != nullptr ? handler : &default_destruction_handler);
}

destruction_error_handler get_destruction_error_handler() noexcept {
  return current_handler.load();
}

namespace detail {

void throw_driver_error(CUresult status, const char* api, std::string context) {
  switch (static_cast<int>(status)) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      throw out_of_memory_error(status, api, std::move(context));
    case CUDA_ERROR_NOT_SUPPORTED:
    case call_requires_newer_driver:
    case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED:
      throw not_supported_error(status, api, std::move(context));
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
      throw driver_unavailable_error(status, api, std::move(context));
    default:
      throw error(status, api, std::move(context));
  }
}

void report_destruction_error(CUresult status, const char* api) noexcept {
  if (status == CUDA_ERROR_DEINITIALIZED) {
    return;  // the driver is shutting down at process exit: nothing left to free
  }
  try {
    get_destruction_error_handler()(error(status, api, {}));
  } catch (...) {
    std::fprintf(stderr, "cudrv: error during destruction: %s failed with code %d\n", api,
                 static_cast<int>(status));
  }
}

void report_outlived_context(const char* api, const char* what) noexcept {
  try {
    get_destruction_error_handler()(error(error_source::cudrv, CUDA_ERROR_CONTEXT_IS_DESTROYED,
                                          "CUDA_ERROR_CONTEXT_IS_DESTROYED", error_description(CUDA_ERROR_CONTEXT_IS_DESTROYED),
                                          api,
                                          std::string("the ") + what + "'s context was destroyed before it, which freed it with the "
                                          "context; nothing was freed again (destroy objects before their context)"));
  } catch (...) {
    std::fprintf(stderr, "cudrv: %s: the %s's context was destroyed before it\n", api, what);
  }
}

}  // namespace detail
}  // namespace cudrv
