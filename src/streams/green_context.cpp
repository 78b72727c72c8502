// Green contexts: SM resources, their splits and descriptors, green contexts and the streams in them.
#include "cudrv/green_context.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"
#include "streams/stream_support.hpp"

namespace cudrv {

using detail::check;
namespace drv = detail::drv;

namespace detail {

struct green_context_state {
  std::atomic<int> users{1};  // the owner and the streams made through it
  CUgreenCtx handle = nullptr;
  std::atomic<bool> owned{true};  // destroy the green context when the last user goes
};

namespace {

std::string describe(CUgreenCtx g) {
  char buffer[48];
  std::snprintf(buffer, sizeof(buffer), "green context %p", static_cast<void*>(g));
  return buffer;
}

void retain_green(green_context_state* s) noexcept {
  if (s != nullptr) {
    s->users.fetch_add(1, std::memory_order_relaxed);
  }
}

void release_green(green_context_state* s) noexcept {
  if (s == nullptr || s->users.fetch_sub(1, std::memory_order_acq_rel) != 1) {
    return;
  }
  if (s->owned.load(std::memory_order_acquire)) {
    CUgreenCtx h = s->handle;
    destroy_noexcept("cuGreenCtxDestroy", [h] { return drv::cuGreenCtxDestroy(h); });
  }
  delete s;
}

void release_green_callback(void* s) noexcept { release_green(static_cast<green_context_state*>(s)); }

// The rule the driver rounds a group to, for messages.
std::string split_rule(const sm_resource& r, unsigned int min_count, sm_split_flags flags) {
  const unsigned int minimum = r.min_partition_size();
  const unsigned int alignment = std::max(r.coscheduled_alignment(), 1u);
  std::string rule = "each group is rounded up to at least " + std::to_string(minimum) +
                     " SMs (min_partition_size) and to a multiple of " + std::to_string(alignment) +
                     " SMs (coscheduled_alignment)";
  if ((static_cast<unsigned int>(flags) & CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING) != 0) {
    rule += ", or less with sm_split_flags::ignore_coscheduling";
  } else {
    const unsigned int size = (std::max(min_count, minimum) + alignment - 1) / alignment * alignment;
    rule += ": " + std::to_string(size) + " SMs per group here";
  }
  return rule + "; see docs/green-contexts.md";
}

// The checks every split makes before calling the driver.
void check_split(const sm_resource& r, unsigned int min_count, const char* api) {
  if (!r) {
    throw invalid_argument_error(api, "the SM resource is empty (default-constructed, or a remainder with no SMs)");
  }
  if (r.from_split()) {
    throw invalid_argument_error(api, "the SM resource is a group or the remainder of an earlier split, which the "
                                      "driver cannot split again: make a green context of it "
                                      "(cudrv::resource_descriptor::generate, cudrv::green_context) and split that "
                                      "green context's sm_resource() (see docs/green-contexts.md)");
  }
  if (min_count > r.sm_count()) {
    throw invalid_argument_error(api, "min_count " + std::to_string(min_count) + " exceeds the " +
                                          std::to_string(r.sm_count()) + " SMs of the resource");
  }
}

void check_flags(sm_split_flags flags, const char* api) {
  constexpr unsigned int known =
      CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING | CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE;
  if ((static_cast<unsigned int>(flags) & ~known) != 0) {
    throw invalid_argument_error(api, "unknown sm_split_flags 0x" + std::to_string(static_cast<unsigned int>(flags)));
  }
}

CUcontext context_of(CUgreenCtx g) {
  CUcontext ctx = nullptr;
  check(drv::cuCtxFromGreenCtx(&ctx, g), "cuCtxFromGreenCtx", [g] { return describe(g); });
  return ctx;
}

}  // namespace
}  // namespace detail

// --- sm_resource -------------------------------------------------------------------------------------

sm_resource::sm_resource() noexcept : resource_{} { resource_.type = CU_DEV_RESOURCE_TYPE_INVALID; }

sm_resource sm_resource::of(const cudrv::device& dev) {
  sm_resource r;
  check(drv::cuDeviceGetDevResource(dev.native_handle(), &r.resource_, CU_DEV_RESOURCE_TYPE_SM),
        "cuDeviceGetDevResource", [&] { return "device " + std::to_string(dev.ordinal()); });
  return r;
}

sm_resource sm_resource::of(context_ref ctx) {
  sm_resource r;
  check(drv::cuCtxGetDevResource(detail::require_context_handle(ctx.native_handle(), "cudrv::sm_resource::of"),
                                 &r.resource_, CU_DEV_RESOURCE_TYPE_SM),
        "cuCtxGetDevResource");
  return r;
}

sm_resource sm_resource::from_native(const CUdevResource& resource) {
  if (resource.type != CU_DEV_RESOURCE_TYPE_SM) {
    throw invalid_argument_error("cudrv::sm_resource::from_native",
                                 "the resource is of type " + std::to_string(static_cast<int>(resource.type)) +
                                     ", not CU_DEV_RESOURCE_TYPE_SM");
  }
  sm_resource r;
  r.resource_ = resource;
  return r;
}

unsigned int sm_resource::sm_count() const noexcept {
  return resource_.type == CU_DEV_RESOURCE_TYPE_SM ? resource_.sm.smCount : 0;
}

unsigned int sm_resource::min_partition_size() const noexcept {
  return resource_.type == CU_DEV_RESOURCE_TYPE_SM ? resource_.sm.minSmPartitionSize : 0;
}

unsigned int sm_resource::coscheduled_alignment() const noexcept {
  return resource_.type == CU_DEV_RESOURCE_TYPE_SM ? resource_.sm.smCoscheduledAlignment : 0;
}

sm_resource::operator bool() const noexcept { return sm_count() != 0; }

unsigned int sm_resource::group_count(unsigned int min_count, sm_split_flags flags) const {
  detail::check_split(*this, min_count, "cudrv::sm_resource::group_count");
  detail::check_flags(flags, "cudrv::sm_resource::group_count");
  unsigned int groups = 0;
  check(drv::cuDevSmResourceSplitByCount(nullptr, &groups, &resource_, nullptr, static_cast<unsigned int>(flags),
                                         min_count),
        "cuDevSmResourceSplitByCount", [&] {
          return "dry run, " + std::to_string(sm_count()) + " SMs, min_count " + std::to_string(min_count) + "; " +
                 detail::split_rule(*this, min_count, flags);
        });
  return groups;
}

sm_split sm_resource::split_by_count(unsigned int min_count, unsigned int groups, sm_split_flags flags) const {
  static constexpr const char* api = "cudrv::sm_resource::split_by_count";
  detail::check_split(*this, min_count, api);
  detail::check_flags(flags, api);
  const unsigned int fit = group_count(min_count, flags);
  auto requested = [&] {
    return (groups == 0 ? std::string("a group") : std::to_string(groups) + (groups == 1 ? " group" : " groups")) +
           " of at least " + std::to_string(min_count) + " SMs from a resource of " + std::to_string(sm_count()) +
           " SMs";
  };
  if (fit == 0 || groups > fit) {
    throw invalid_argument_error(api, requested() + ": only " + std::to_string(fit) + " fit; " +
                                          detail::split_rule(*this, min_count, flags));
  }
  const unsigned int want = groups == 0 ? fit : groups;
  std::vector<CUdevResource> raw(want);
  CUdevResource rest{};
  unsigned int made = want;
  check(drv::cuDevSmResourceSplitByCount(raw.data(), &made, &resource_, &rest, static_cast<unsigned int>(flags),
                                         min_count),
        "cuDevSmResourceSplitByCount",
        [&] { return requested() + "; " + detail::split_rule(*this, min_count, flags); });
  if (made < want) {
    throw invalid_argument_error(api, requested() + ": the driver made only " + std::to_string(made) + "; " +
                                          detail::split_rule(*this, min_count, flags));
  }
  sm_split out;
  out.groups.reserve(made);
  for (unsigned int i = 0; i < made; ++i) {
    sm_resource g;
    g.resource_ = raw[i];
    g.from_split_ = true;
    out.groups.push_back(g);
  }
  out.remainder.resource_ = rest;
  out.remainder.from_split_ = true;
  if (rest.type != CU_DEV_RESOURCE_TYPE_SM) {
    out.remainder = sm_resource();  // nothing left over, as the driver may say by the type
  }
  return out;
}

// --- resource_descriptor --------------------------------------------------------------------------------

// Out of line, as the overloads from braced lists: docs/design.md, "Header cost".
resource_descriptor resource_descriptor::generate(const sm_resource& resource) {
  return generate(std::span<const sm_resource>(&resource, 1));
}

resource_descriptor resource_descriptor::generate(std::span<const sm_resource> resources) {
  static constexpr const char* api = "cudrv::resource_descriptor::generate";
  if (resources.empty()) {
    throw invalid_argument_error(api, "no resources to describe");
  }
  std::vector<CUdevResource> raw;
  raw.reserve(resources.size());
  for (std::size_t i = 0; i < resources.size(); ++i) {
    if (!resources[i]) {
      throw invalid_argument_error(api, "resource " + std::to_string(i) +
                                            " is empty (no SMs: a remainder with nothing left over?)");
    }
    raw.push_back(resources[i].native());
  }
  CUdevResourceDesc desc = nullptr;
  check(drv::cuDevResourceGenerateDesc(&desc, raw.data(), static_cast<unsigned int>(raw.size())),
        "cuDevResourceGenerateDesc", [&] {
          return std::to_string(raw.size()) + " resources (several must be the groups and remainder of one split)";
        });
  return resource_descriptor(desc);
}

// --- green_context_base ------------------------------------------------------------------------------

void green_context_base::require_handle(const char* api) const {
  if (handle_ == nullptr) [[unlikely]] {
    throw invalid_argument_error(api, "the green context is empty (a moved-from or released cudrv::green_context)");
  }
}

context_ref green_context_base::context() const {
  require_handle("cudrv::green_context::context");
  return context_ref(context_ != nullptr ? context_ : detail::context_of(handle_));
}

cudrv::device green_context_base::device() const { return context().device(); }

cudrv::sm_resource green_context_base::sm_resource() const {
  require_handle("cudrv::green_context::sm_resource");
  CUdevResource r{};
  check(drv::cuGreenCtxGetDevResource(handle_, &r, CU_DEV_RESOURCE_TYPE_SM), "cuGreenCtxGetDevResource",
        [this] { return detail::describe(handle_); });
  return cudrv::sm_resource::from_native(r);
}

stream green_context_base::create_stream(stream_options options) const {
  static constexpr const char* api = "cudrv::green_context::create_stream";
  require_handle(api);
  if (!options.non_blocking) {
    throw invalid_argument_error(api, "a stream of a green context must be non-blocking (the driver requires "
                                      "CU_STREAM_NON_BLOCKING); leave stream_options::non_blocking on");
  }
  const CUcontext ctx = context().native_handle();
  CUstream handle = nullptr;
  bool created = false;
#if CUDRV_HAS_GREEN_CONTEXT_STREAM
  try {
    check(drv::cuGreenCtxStreamCreate(&handle, handle_, CU_STREAM_NON_BLOCKING, options.priority),
          "cuGreenCtxStreamCreate",
          [&] { return detail::describe(handle_) + ", priority " + std::to_string(options.priority); });
    created = true;
  } catch (const not_supported_error& e) {
    if (e.api() != "cuGetProcAddress") {
      throw;  // the driver has the entry point and refused: not a case for the fallback
    }
  }
#endif
  if (!created) {
    // A driver of CUDA 12.4: a stream created while the green context is current belongs to it.
    detail::run_in_context(ctx, api, [&] {
      check(drv::cuStreamCreateWithPriority(&handle, CU_STREAM_NON_BLOCKING, options.priority),
            "cuStreamCreateWithPriority", [&] { return detail::describe(handle_) + " (current)"; });
    });
  }
  detail::retain_green(state_);
  return detail::adopt_stream(handle, ctx, state_ != nullptr ? &detail::release_green_callback : nullptr, state_);
}

void green_context_base::record(event_ref ev) const {
  require_handle("cudrv::green_context::record");
  if (ev.native_handle() == nullptr) [[unlikely]] {
    throw invalid_argument_error("cudrv::green_context::record", "the event is empty (a moved-from cudrv::event)");
  }
  check(drv::cuGreenCtxRecordEvent(handle_, ev.native_handle()), "cuGreenCtxRecordEvent",
        [this] { return detail::describe(handle_); });
}

event green_context_base::record(event_flags flags) const {
  require_handle("cudrv::green_context::record");
  event ev(context(), flags);
  record(ev);
  return ev;
}

void green_context_base::wait(event_ref ev) const {
  require_handle("cudrv::green_context::wait");
  if (ev.native_handle() == nullptr) [[unlikely]] {
    throw invalid_argument_error("cudrv::green_context::wait", "the event is empty (a moved-from cudrv::event)");
  }
  check(drv::cuGreenCtxWaitEvent(handle_, ev.native_handle()), "cuGreenCtxWaitEvent",
        [this] { return detail::describe(handle_); });
}

void green_context_base::synchronize() const {
  require_handle("cudrv::green_context::synchronize");
  context().synchronize();
}

unsigned long long green_context_base::id() const {
  require_handle("cudrv::green_context::id");
#if CUDRV_HAS_GREEN_CONTEXT_ID
  unsigned long long value = 0;
  check(drv::cuGreenCtxGetId(handle_, &value), "cuGreenCtxGetId", [this] { return detail::describe(handle_); });
  return value;
#else
  throw not_supported_error(error_source::cudrv, CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
                            "cuGreenCtxGetId needs CUDA 12.9 headers; cudrv was built with an older toolkit",
                            "cudrv::green_context::id", {});
#endif
}

// --- green_context -----------------------------------------------------------------------------------

green_context::green_context(const cudrv::device& dev, const cudrv::sm_resource& sms)
    : green_context(dev, std::span<const cudrv::sm_resource>(&sms, 1)) {}

green_context::green_context(const cudrv::device& dev, std::span<const cudrv::sm_resource> resources)
    : green_context(dev, resource_descriptor::generate(resources)) {}

green_context::green_context(const cudrv::device& dev, resource_descriptor desc)
    : green_context_base(nullptr, nullptr, nullptr) {
  if (desc.native_handle() == nullptr) {
    throw invalid_argument_error("cudrv::green_context", "the resource descriptor is null");
  }
  // The driver retains the primary context for each green context and releases it with it: cudrv's
  // own reference (taken once per device, as for every object made from a device) keeps it from
  // being initialised and torn down again with every green context.
  (void)dev.primary_context();
  CUgreenCtx handle = nullptr;
  check(drv::cuGreenCtxCreate(&handle, desc.native_handle(), dev.native_handle(), CU_GREEN_CTX_DEFAULT_STREAM),
        "cuGreenCtxCreate", [&] { return "device " + std::to_string(dev.ordinal()); });
  green_context adopted = from_native_handle(handle);  // destroys the handle when it throws
  *this = std::move(adopted);
}

green_context green_context::from_native_handle(CUgreenCtx handle) {
  if (handle == nullptr) {
    throw invalid_argument_error("cudrv::green_context::from_native_handle", "the handle is null");
  }
  detail::green_context_state* state = nullptr;
  CUcontext ctx = nullptr;
  try {
    state = new detail::green_context_state;
    state->handle = handle;
    ctx = detail::context_of(handle);
  } catch (...) {
    delete state;
    detail::destroy_noexcept("cuGreenCtxDestroy", [handle] { return drv::cuGreenCtxDestroy(handle); });
    throw;
  }
  return green_context(handle, ctx, state);
}

CUgreenCtx green_context::release() noexcept {
  detail::green_context_state* s = std::exchange(state_, nullptr);
  context_ = nullptr;
  CUgreenCtx h = std::exchange(handle_, nullptr);
  if (s != nullptr) {
    s->owned.store(false, std::memory_order_release);
    detail::release_green(s);
  }
  return h;
}

void green_context::reset() noexcept {
  detail::green_context_state* s = std::exchange(state_, nullptr);
  context_ = nullptr;
  handle_ = nullptr;
  detail::release_green(s);
}

green_context& green_context::operator=(green_context&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = std::exchange(other.handle_, nullptr);
    context_ = std::exchange(other.context_, nullptr);
    state_ = std::exchange(other.state_, nullptr);
  }
  return *this;
}

green_context::~green_context() { reset(); }

// --- green_context_of --------------------------------------------------------------------------------

std::optional<green_context_ref> green_context_of(stream_ref s) {
  detail::require_stream(s.native_handle(), "cudrv::green_context_of");
  CUgreenCtx g = nullptr;
  check(drv::cuStreamGetGreenCtx(s.native_handle(), &g), "cuStreamGetGreenCtx");
  if (g == nullptr) {
    return std::nullopt;
  }
  return green_context_ref(g);
}

}  // namespace cudrv
