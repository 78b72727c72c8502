#include "cudrv/error.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iterator>

#include "driver/driver_api.hpp"
#include "driver/driver_log.hpp"

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
  // After a sticky fault every object of the context fails to destroy the same way: one line says it.
  static std::atomic<bool> sticky_printed{false};
  if (e.is_sticky()) {
    if (!sticky_printed.exchange(true)) {
      std::fprintf(stderr,
                   "cudrv: error during destruction: %s (further destruction errors of sticky faults are not "
                   "printed)\n",
                   e.what());
    }
    return;
  }
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

namespace {
// What every sticky fault's message adds: the context is gone, and how to go on.
constexpr const char* sticky_note =
    " -- a sticky fault: the context this call ran in is unusable, and every later call in it fails the same "
    "way; the CUDA documentation says the process must be terminated and relaunched. To recover, destroy every "
    "cudrv object made in that context (their destructors free nothing and do not throw), then end this process "
    "and start a new one (run work that may fault in a worker process). cudrv::device::reset_primary_context() "
    "asks the driver for a reset instead, but a driver that keeps the process poisoned (580.159.04 does, after "
    "an illegal address) answers it with this error again; see the Reliability page, \"Sticky faults and "
    "recovery\"";

std::string compose_message(error_source source, int code, const std::string& api, const std::string& name,
                            const std::string& description, const std::string& context,
                            const std::vector<std::string>& driver_log) {
  std::string out = compose(api, name, description, context);
  if (source == error_source::driver && is_sticky(static_cast<CUresult>(code))) {
    out += sticky_note;
  }
  for (const std::string& line : driver_log) {  // issue 34 part 2: the driver's own explanation
    out += "\ndriver log: ";
    out += line;
  }
  return out;
}
}  // namespace

bool is_sticky(CUresult code) noexcept {
  // By value: older headers lack some of the names (CUDA_ERROR_CONTAINED, CUDA_ERROR_TENSOR_MEMORY_LEAK).
  switch (static_cast<int>(code)) {
    case 226:  // CUDA_ERROR_CONTAINED
    case 700:  // CUDA_ERROR_ILLEGAL_ADDRESS
    case 702:  // CUDA_ERROR_LAUNCH_TIMEOUT
    case 710:  // CUDA_ERROR_ASSERT
    case 714:  // CUDA_ERROR_HARDWARE_STACK_ERROR
    case 715:  // CUDA_ERROR_ILLEGAL_INSTRUCTION
    case 716:  // CUDA_ERROR_MISALIGNED_ADDRESS
    case 717:  // CUDA_ERROR_INVALID_ADDRESS_SPACE
    case 718:  // CUDA_ERROR_INVALID_PC
    case 719:  // CUDA_ERROR_LAUNCH_FAILED
    case 721:  // CUDA_ERROR_TENSOR_MEMORY_LEAK
    case 810:  // CUDA_ERROR_MPS_CLIENT_TERMINATED
    case 911:  // CUDA_ERROR_EXTERNAL_DEVICE
      return true;
    default: return false;
  }
}

bool error::is_sticky() const noexcept { return source_ == error_source::driver && cudrv::is_sticky(result()); }

error::error(error_source source, int code, std::string name, std::string description, std::string api,
             std::string context)
    : error(source, code, std::move(name), std::move(description), std::move(api), std::move(context),
            source == error_source::driver ? detail::take_driver_log() : std::vector<std::string>{}) {}

error::error(error_source source, int code, std::string name, std::string description, std::string api,
             std::string context, std::vector<std::string> driver_log)
    : std::runtime_error(compose_message(source, code, api, name, description, context, driver_log)),
      source_(source),
      code_(code),
      name_(std::move(name)),
      description_(std::move(description)),
      api_(std::move(api)),
      context_(std::move(context)),
      driver_log_(std::move(driver_log)) {}

error::error(CUresult code, std::string api, std::string context)
    : error(error_source::driver, static_cast<int>(code), error_name(code), error_description(code), std::move(api),
            std::move(context)) {}

out_of_memory_error::out_of_memory_error(CUresult code, std::string api, std::string context, const figures& numbers)
    : error(code, std::move(api), std::move(context)), figures_(numbers) {}

graph_update_error::graph_update_error(CUresult code, int reason, std::string explanation)
    : error(code, "cuGraphExecUpdate", std::move(explanation)), reason_(reason) {}

invalid_argument_error::invalid_argument_error(std::string api, std::string message)
    : error(error_source::cudrv, CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", std::move(message),
            std::move(api), {}) {}

fork_error::fork_error(std::string api, std::string context)
    : driver_unavailable_error(
          error_source::cudrv, CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED",
          "this process was forked after its parent initialised CUDA; the driver's state belongs to the parent and "
          "CUDA cannot be used in the child (exec a program that uses CUDA, or fork before the first cudrv call)",
          std::move(api), std::move(context)) {}

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
    : error(error_source::cudrv, CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", describe_exception(original),
            "cudrv::stream::enqueue", std::move(stream_context)),
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

jit_error::jit_error(error_source source, int code, std::string name, std::string description, std::string api,
                     std::string context, std::string log)
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

destruction_error_handler get_destruction_error_handler() noexcept { return current_handler.load(); }

namespace detail {

void throw_driver_error(CUresult status, const char* api, std::string context) {
  if (status == forked_child_status) {
    throw fork_error(api, std::move(context));
  }
  if (is_sticky(status)) {
    throw context_fault_error(status, api, std::move(context));
  }
  switch (static_cast<int>(status)) {
    case CUDA_ERROR_OUT_OF_MEMORY: throw out_of_memory_error(status, api, std::move(context));
    case CUDA_ERROR_NOT_SUPPORTED:
    case call_requires_newer_driver:
    case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED: throw not_supported_error(status, api, std::move(context));
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: throw driver_unavailable_error(status, api, std::move(context));
    default: throw error(status, api, std::move(context));
  }
}

void report_destruction_error(CUresult status, const char* api) noexcept {
  if (status == CUDA_ERROR_DEINITIALIZED || status == forked_child_status) {
    return;  // the driver is shutting down at process exit, or the parent's objects in a forked child
  }
  try {
    get_destruction_error_handler()(error(status, api, {}));
  } catch (...) {
    std::fprintf(stderr, "cudrv: error during destruction: %s failed with code %d\n", api, static_cast<int>(status));
  }
}

void report_outlived_context(const char* api, const char* what) noexcept {
  try {
    get_destruction_error_handler()(
        error(error_source::cudrv, CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED",
              error_description(CUDA_ERROR_CONTEXT_IS_DESTROYED), api,
              std::string("the ") + what +
                  "'s context was destroyed before it, which freed it with the "
                  "context; nothing was freed again (destroy objects before their context)"));
  } catch (...) {
    std::fprintf(stderr, "cudrv: %s: the %s's context was destroyed before it\n", api, what);
  }
}

}  // namespace detail
}  // namespace cudrv
