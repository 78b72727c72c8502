// The one translation of a launch_config into the driver's launch attributes (CUlaunchAttribute) and
// launch configuration (CUlaunchConfig), shared by the stream launch (execution/launch.cpp), the graph
// kernel node (execution/graph.cpp) and the occupancy queries (code/kernel.cpp).
//
// Adding a launch attribute is one visit in for_each_launch_attribute (with its field in
// <cudrv/launch_config.hpp>, and its checks in check_launch_attributes, code/launch_config.cpp): the
// array bound, the three paths and the names in error messages follow. The CPU test
// tests/cpu/test_launch_attribute_set.cpp fails for an attribute of cuda.h's CUlaunchAttributeID that no
// visit translates.
// Everything here is inline: a stream launch fills the attributes straight into an array on its stack.
#pragma once

#include <cuda.h>

#include "cudrv/launch_config.hpp"

namespace cudrv::detail {

// The paths a launch attribute reaches the driver by, as a bit set.
enum launch_path : unsigned {
  stream_path = 1,     // cuLaunchKernelEx (also into a capturing stream)
  graph_path = 2,      // cuGraphKernelNodeSetAttribute on a node graph_builder adds or kernel_node sets
  occupancy_path = 4,  // cuOccupancyMaxActiveClusters, cuOccupancyMaxPotentialClusterSize
  all_paths = stream_path | graph_path | occupancy_path,
};

// The one attribute of CUlaunchAttributeID that cudrv leaves to streams: cuda.h says it is valid for
// streams only (a stream's setting, not a launch's).
inline constexpr CUlaunchAttributeID stream_only_launch_attributes[] = {CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY};

// Calls visit(wanted, id, name, paths, write) once for every launch attribute cudrv knows, in the order
// they reach the driver, whether config asks for it or not: wanted says whether it does, id is the
// driver's CUlaunchAttributeID, name says what it is in error messages, paths (launch_path bits) which
// paths hand it to the driver, and write(CUlaunchAttributeValue&) fills the value from config (call it
// only when wanted). The device-updatable attribute comes last: a node that has it can no longer be
// removed, which a refusal of a later attribute would need.
template <class Visit>
constexpr void for_each_launch_attribute(const launch_config& config, Visit&& visit) {
  visit(config.has_cluster(), CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, "cluster dimensions", all_paths,
        [&config](CUlaunchAttributeValue& v) {
          v.clusterDim.x = config.cluster.x;
          v.clusterDim.y = config.cluster.y;
          v.clusterDim.z = config.cluster.z;
        });
  visit(config.cooperative, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, "cooperative", all_paths,
        [](CUlaunchAttributeValue& v) { v.cooperative = 1; });
  visit(config.programmatic_stream_serialization, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
        "programmatic stream serialization", stream_path | occupancy_path,
        [](CUlaunchAttributeValue& v) { v.programmaticStreamSerializationAllowed = 1; });
  visit(config.priority.has_value(), CU_LAUNCH_ATTRIBUTE_PRIORITY, "priority", all_paths,
        [&config](CUlaunchAttributeValue& v) { v.priority = *config.priority; });
  visit(config.access_policy.is_set(), CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, "access-policy window",
        stream_path | graph_path, [&config](CUlaunchAttributeValue& v) {
          const access_policy_window& w = config.access_policy;
          v.accessPolicyWindow.base_ptr = const_cast<void*>(w.base);
          v.accessPolicyWindow.num_bytes = w.bytes;
          v.accessPolicyWindow.hitRatio = w.hit_ratio;
          v.accessPolicyWindow.hitProp = static_cast<CUaccessProperty>(w.hit);
          v.accessPolicyWindow.missProp = static_cast<CUaccessProperty>(w.miss);
        });
  visit(config.cluster_scheduling.has_value(), CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
        "cluster scheduling policy", all_paths, [&config](CUlaunchAttributeValue& v) {
          v.clusterSchedulingPolicyPreference = static_cast<CUclusterSchedulingPolicy>(*config.cluster_scheduling);
        });
#if CUDA_VERSION >= 12080
  visit(config.has_preferred_cluster(), CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION, "preferred cluster dimensions",
        stream_path | graph_path, [&config](CUlaunchAttributeValue& v) {
          v.preferredClusterDim.x = config.preferred_cluster.x;
          v.preferredClusterDim.y = config.preferred_cluster.y;
          v.preferredClusterDim.z = config.preferred_cluster.z;
        });
#endif
  visit(config.programmatic_event.event.is_named(), CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT, "programmatic event",
        stream_path, [&config](CUlaunchAttributeValue& v) {
          v.programmaticEvent.event = config.programmatic_event.event.native_handle();
          v.programmaticEvent.flags = static_cast<int>(config.programmatic_event.record_flags);
          v.programmaticEvent.triggerAtBlockStart = config.programmatic_event.trigger_at_block_start ? 1 : 0;
        });
  visit(config.completion_event.event.is_named(), CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT,
        "launch-completion event", stream_path, [&config](CUlaunchAttributeValue& v) {
          v.launchCompletionEvent.event = config.completion_event.event.native_handle();
          v.launchCompletionEvent.flags = static_cast<int>(config.completion_event.record_flags);
        });
  visit(config.memory_sync_domain.has_value(), CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, "memory-sync domain",
        stream_path | graph_path, [&config](CUlaunchAttributeValue& v) {
          v.memSyncDomain = static_cast<CUlaunchMemSyncDomain>(*config.memory_sync_domain);
        });
  visit(config.memory_sync_domain_map.has_value(), CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, "memory-sync domain map",
        stream_path | graph_path, [&config](CUlaunchAttributeValue& v) {
          v.memSyncDomainMap.default_ = static_cast<unsigned char>(config.memory_sync_domain_map->default_id);
          v.memSyncDomainMap.remote = static_cast<unsigned char>(config.memory_sync_domain_map->remote_id);
        });
  visit(config.shared_memory_carveout.has_value(), CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
        "preferred shared-memory carveout", all_paths,
        [&config](CUlaunchAttributeValue& v) { v.sharedMemCarveout = *config.shared_memory_carveout; });
#if CUDA_VERSION >= 13000
  visit(config.nvlink_util_centric_scheduling, CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING,
        "NVLink-util-centric scheduling", stream_path | graph_path,
        [](CUlaunchAttributeValue& v) { v.nvlinkUtilCentricScheduling = 1; });
#endif
  visit(config.device_updatable, CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, "device-updatable kernel node",
        stream_path | graph_path, [](CUlaunchAttributeValue& v) { v.deviceUpdatableKernelNode.deviceUpdatable = 1; });
}

// The most attributes one launch_config becomes: every attribute for_each_launch_attribute knows.
inline constexpr unsigned max_launch_attributes = [] {
  unsigned n = 0;
  for_each_launch_attribute(launch_config{},
                            [&n](bool, CUlaunchAttributeID, const char*, unsigned, const auto&) { ++n; });
  return n;
}();

// Room for a launch_config's attributes (on the caller's stack).
using launch_attribute_array = CUlaunchAttribute[max_launch_attributes];

// Writes the attributes config asks for that path hands to the driver into out, in the driver's order;
// returns how many.
inline unsigned write_launch_attributes(const launch_config& config, launch_attribute_array& out,
                                        launch_path path = stream_path) noexcept {
  unsigned n = 0;
  for_each_launch_attribute(config,
                            [&](bool wanted, CUlaunchAttributeID id, const char*, unsigned paths, const auto& write) {
                              if (wanted && (paths & path) != 0) {
                                out[n] = {};
                                out[n].id = id;
                                write(out[n].value);
                                ++n;
                              }
                            });
  return n;
}

// The CUlaunchConfig of config: grid, block, dynamic shared memory (which the caller has checked fits 32
// bits) and the attributes path hands over, written into attrs, which must outlive the result. No stream
// (hStream null).
inline CUlaunchConfig native_launch_config(const launch_config& config, launch_attribute_array& attrs,
                                           launch_path path = stream_path) noexcept {
  CUlaunchConfig out{};
  out.gridDimX = config.grid.x;
  out.gridDimY = config.grid.y;
  out.gridDimZ = config.grid.z;
  out.blockDimX = config.block.x;
  out.blockDimY = config.block.y;
  out.blockDimZ = config.block.z;
  out.sharedMemBytes = static_cast<unsigned>(config.dynamic_shared_memory);
  out.attrs = attrs;
  out.numAttrs = write_launch_attributes(config, attrs, path);
  return out;
}

// What attribute id is in error messages ("cluster dimensions", "priority", ...), or "launch attribute".
constexpr const char* launch_attribute_name(CUlaunchAttributeID id) noexcept {
  const char* name = "launch attribute";
  for_each_launch_attribute(launch_config{},
                            [&](bool, CUlaunchAttributeID known, const char* n, unsigned, const auto&) {
                              if (known == id) {
                                name = n;
                              }
                            });
  return name;
}

// Where a launch goes, for the checks that need its device (window size, domain count) or its stream
// (device-updatable nodes need a capturing one): a stream, a context, a device ordinal (-1: none), or a
// kernel node (whose context the driver is asked for).
struct launch_target {
  CUstream stream = nullptr;
  CUcontext context = nullptr;
  int device = -1;
  CUgraphNode node = nullptr;
};

// Whether config sets an attribute that check_launch_attributes checks on a stream launch (the ones
// before issue 34 are checked by the driver and diagnosed): a launch with a cluster, cooperative,
// programmatic stream serialization or a priority only skips the call.
constexpr bool needs_stream_attribute_checks(const launch_config& c) noexcept {
  return c.access_policy.is_set() || c.cluster_scheduling.has_value() || c.has_preferred_cluster() ||
         c.programmatic_event.event.is_named() || c.completion_event.event.is_named() ||
         c.memory_sync_domain.has_value() || c.memory_sync_domain_map.has_value() ||
         c.shared_memory_carveout.has_value() || c.device_updatable || c.nvlink_util_centric_scheduling;
}

// The checks before the driver of the attributes config asks for, on path: values cuda.h documents a
// rule for (hit ratio in [0, 1], window size against the device's maximum, preferred cluster against
// the cluster and the grid, carveout 0..100, domain ids against the device's count, events given but
// empty, record flags), attributes path does not carry (a programmatic or launch-completion event in a
// graph node, a device-updatable node on a stream that is not capturing) and attributes this build's
// toolkit lacks. Throws invalid_argument_error or not_supported_error naming the attribute; api names the
// cudrv function. Asks the driver only for what a set attribute needs.
void check_launch_attributes(const launch_config& config, launch_path path, const launch_target& target,
                             const char* api);

}  // namespace cudrv::detail
