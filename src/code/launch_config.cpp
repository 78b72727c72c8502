// launch_config and dims: the refusal of an extent past 32 bits, and the checks of the launch
// attributes before the driver (code/launch_attributes.hpp).
#include "cudrv/launch_config.hpp"

#include <string>

#include "code/launch_attributes.hpp"
#include "cudrv/driver.hpp"
#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"

namespace cudrv::detail {

void throw_extent_overflow(unsigned long long value, char axis) {
  throw invalid_argument_error("cudrv::dims::checked", std::string("extent ") + axis + " = " + std::to_string(value) +
                                                           " does not fit the 32 bits of a launch extent");
}

namespace {

[[maybe_unused]] std::string dims_text(const dims& d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
}

// "launch attribute 'name': " + what, as an invalid_argument_error of api.
[[noreturn]] void refuse(const char* api, CUlaunchAttributeID id, const std::string& what) {
  throw invalid_argument_error(api, std::string("launch attribute '") + launch_attribute_name(id) + "': " + what);
}

// An attribute the driver or device lacks, or a path that does not carry it.
[[noreturn]] void refuse_unsupported(const char* api, const char* attribute, const std::string& why) {
  throw not_supported_error(error_source::cudrv, CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
                            std::string("launch attribute '") + attribute + "': " + why, api, {});
}

// The device of target, asked of the driver only when a check needs it.
CUdevice target_device(const launch_target& target, const char* api) {
  if (target.device >= 0) {
    return static_cast<CUdevice>(target.device);
  }
  CUcontext ctx = target.context;
  if (ctx == nullptr && target.node != nullptr) {
    CUDA_KERNEL_NODE_PARAMS params{};
    check(drv::cuGraphKernelNodeGetParams(target.node, &params), "cuGraphKernelNodeGetParams");
    ctx = params.ctx;
  }
  if (ctx == nullptr && (target.stream != nullptr || target.node != nullptr)) {
    if (target.stream == nullptr || target.stream == CU_STREAM_LEGACY || target.stream == CU_STREAM_PER_THREAD) {
      check(drv::cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
    } else {
      check(drv::cuStreamGetCtx(target.stream, &ctx), "cuStreamGetCtx");
    }
  }
  CUdevice dev = 0;
  run_in_context(ctx, api, [&] { check(drv::cuCtxGetDevice(&dev), "cuCtxGetDevice"); });
  return dev;
}

int device_attribute(CUdevice dev, CUdevice_attribute a) {
  int v = 0;
  check(drv::cuDeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute");
  return v;
}

void check_window(const launch_config& c, const launch_target& target, const char* api) {
  constexpr CUlaunchAttributeID id = CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;
  const access_policy_window& w = c.access_policy;
  if (w.base == nullptr || w.bytes == 0) {
    refuse(api, id,
           "the window needs both a base address and a size (base " + std::string(w.base == nullptr ? "null" : "set") +
               ", " + std::to_string(w.bytes) + " bytes)");
  }
  if (!(w.hit_ratio >= 0.0f && w.hit_ratio <= 1.0f)) {  // also refuses NaN
    refuse(api, id, "hit_ratio " + std::to_string(w.hit_ratio) + " is outside [0, 1]");
  }
  const auto known = [](access_property p) { return static_cast<int>(p) >= 0 && static_cast<int>(p) <= 2; };
  if (!known(w.hit) || !known(w.miss)) {
    refuse(api, id, "unknown access_property value");
  }
  if (w.miss == access_property::persisting) {
    refuse(api, id, "the miss property must be normal or streaming, not persisting");
  }
  const CUdevice dev = target_device(target, api);
  const int max_window = device_attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE);
  if (max_window <= 0) {
    refuse_unsupported(api, launch_attribute_name(id),
                       "device " + std::to_string(static_cast<int>(dev)) +
                           " has no L2 access-policy windows (CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE is 0)");
  }
  if (w.bytes > static_cast<std::size_t>(max_window)) {
    refuse(api, id,
           std::to_string(w.bytes) + " bytes exceed the device's maximum window of " + std::to_string(max_window) +
               " bytes (CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE)");
  }
}

void check_preferred_cluster(const launch_config& c, const char* api) {
#if CUDA_VERSION >= 12080
  constexpr CUlaunchAttributeID id = CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION;
  const dims& p = c.preferred_cluster;
  if (!c.has_cluster()) {
    refuse(api, id, "a preferred cluster (" + dims_text(p) + ") needs launch_config::cluster");
  }
  const unsigned pe[3] = {p.x, p.y, p.z};
  const unsigned ce[3] = {c.cluster.x, c.cluster.y, c.cluster.z};
  const unsigned ge[3] = {c.grid.x, c.grid.y, c.grid.z};
  const char* axes = "xyz";
  for (int i = 0; i < 3; ++i) {
    const std::string axis(1, axes[i]);
    if (pe[i] == 0 || ce[i] == 0 || pe[i] % ce[i] != 0 || (i == 2 && pe[i] != ce[i])) {
      refuse(api, id,
             "extent " + axis + " = " + std::to_string(pe[i]) + " must be " +
                 (i == 2 ? "equal to" : "a multiple (at least 1x) of") + " the cluster's " + std::to_string(ce[i]) +
                 " (preferred " + dims_text(p) + ", cluster " + dims_text(c.cluster) + ")");
    }
    if (ge[i] % pe[i] != 0) {
      refuse(api, id,
             "the grid extent " + axis + " = " + std::to_string(ge[i]) + " is not a multiple of the preferred extent " +
                 std::to_string(pe[i]));
    }
  }
#else
  (void)c;
  refuse_unsupported(api, "preferred cluster dimensions",
                     "cudrv was built with CUDA " + std::to_string(CUDA_VERSION) + ", which lacks it (CUDA 12.8)");
#endif
}

void check_event(const launch_event& e, unsigned record_flags, CUlaunchAttributeID id, const char* api) {
  if (e.native_handle() == nullptr) {
    refuse(api, id, "the event is empty (a moved-from or released cudrv::event)");
  }
  if (record_flags != 0) {
    refuse(api, id,
           "record_flags " + std::to_string(record_flags) +
               ": a launch attribute's event takes no record flags but 0 (CU_EVENT_RECORD_DEFAULT; the driver refuses "
               "CU_EVENT_RECORD_EXTERNAL)");
  }
}

void check_domains(const launch_config& c, const launch_target& target, const char* api) {
  if (c.memory_sync_domain) {
    const int d = static_cast<int>(*c.memory_sync_domain);
    if (d < 0 || d > 1) {
      refuse(api, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, "unknown memory_sync_domain value " + std::to_string(d));
    }
  }
  if (c.memory_sync_domain_map) {
    const CUdevice dev = target_device(target, api);
    const int count = device_attribute(dev, CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT);
    const unsigned ids[2] = {c.memory_sync_domain_map->default_id, c.memory_sync_domain_map->remote_id};
    for (unsigned id : ids) {
      if (count <= 0 || id >= static_cast<unsigned>(count)) {
        refuse(api, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP,
               "domain id " + std::to_string(id) + " is not below device " + std::to_string(static_cast<int>(dev)) +
                   "'s " + std::to_string(count) + " domains (CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT)");
      }
    }
  }
}

// The attributes a graph kernel node cannot carry: in a graph, these are edges.
void check_graph_path(const launch_config& c, const char* api) {
  if (c.programmatic_stream_serialization) {
    refuse_unsupported(api, "programmatic stream serialization",
                       "a stream launch attribute; in a graph it is a programmatic edge, which cudrv::graph_builder "
                       "does not make yet");
  }
  if (c.programmatic_event.event.is_named()) {
    refuse_unsupported(api, "programmatic event",
                       "a stream launch attribute; in a graph it is a programmatic edge, which cudrv::graph_builder "
                       "does not make yet");
  }
  if (c.completion_event.event.is_named()) {
    refuse_unsupported(api, "launch-completion event",
                       "a stream launch attribute; in a graph it is a launch-order edge, which cudrv::graph_builder "
                       "does not make yet");
  }
}

// A device-updatable node exists only in a graph: on a stream, the launch must be captured.
void check_device_updatable_stream(const launch_target& target, const char* api) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  check(drv::cuStreamIsCapturing(target.stream, &status), "cuStreamIsCapturing");
  if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    refuse(api, CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE,
           "makes a graph kernel node: launch into a capturing stream (cudrv::stream_capture) or a graph_builder");
  }
}

// The attributes newer than CUDA 12.0 on a driver that predates them: refused before the driver, which
// would answer a bare CUDA_ERROR_INVALID_VALUE.
void check_driver_version(const launch_config& c, launch_path path, const char* api) {
  struct since {
    bool wanted;
    const char* name;
    int version;
  };
  const since needs[] = {
      {path == stream_path && c.completion_event.event.is_named(), "launch-completion event", 12030},
      {path != occupancy_path && c.device_updatable, "device-updatable kernel node", 12040},
      {c.shared_memory_carveout.has_value(), "preferred shared-memory carveout", 12040},
      {path != occupancy_path && c.has_preferred_cluster(), "preferred cluster dimensions", 12080},
      {path != occupancy_path && c.nvlink_util_centric_scheduling, "NVLink-util-centric scheduling", 13000},
  };
  const int driver = cudrv::driver::version();
  const auto text = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  for (const since& n : needs) {
    if (n.wanted && driver > 0 && driver < n.version) {
      refuse_unsupported(api, n.name,
                         "the driver supports CUDA " + text(driver) + "; the attribute needs CUDA " + text(n.version));
    }
  }
}

}  // namespace

void check_launch_attributes(const launch_config& c, launch_path path, const launch_target& target, const char* api) {
  if (!c.needs_extended_launch()) {
    return;  // no attribute: nothing to check (the graph builder's and occupancy queries' common case)
  }
  if (path == graph_path) {
    check_graph_path(c, api);
  }
  check_driver_version(c, path, api);
  if (c.access_policy.is_set() && path != occupancy_path) {
    check_window(c, target, api);
  }
  if (c.cluster_scheduling &&
      (static_cast<int>(*c.cluster_scheduling) < 0 || static_cast<int>(*c.cluster_scheduling) > 2)) {
    refuse(api, CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
           "unknown cluster_scheduling_policy value " + std::to_string(static_cast<int>(*c.cluster_scheduling)));
  }
  if (c.has_preferred_cluster() && path != occupancy_path) {
    check_preferred_cluster(c, api);
  }
  if (path == stream_path && c.programmatic_event.event.is_named()) {
    check_event(c.programmatic_event.event, c.programmatic_event.record_flags, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT,
                api);
  }
  if (path == stream_path && c.completion_event.event.is_named()) {
    check_event(c.completion_event.event, c.completion_event.record_flags, CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT,
                api);
  }
  if (path != occupancy_path) {
    check_domains(c, target, api);
  }
  if (c.shared_memory_carveout && *c.shared_memory_carveout > 100) {
    refuse(api, CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
           std::to_string(*c.shared_memory_carveout) +
               " is not a percentage 0..100 (shared_memory_carveout::max_l1 = 0, max_shared = 100)");
  }
#if CUDA_VERSION < 13000
  if (c.nvlink_util_centric_scheduling && path != occupancy_path) {
    refuse_unsupported(api, "NVLink-util-centric scheduling",
                       "cudrv was built with CUDA " + std::to_string(CUDA_VERSION) + ", which lacks it (CUDA 13.0)");
  }
#endif
  if (c.device_updatable && path == stream_path) {
    check_device_updatable_stream(target, api);
  }
}

}  // namespace cudrv::detail
