// The one translation of a launch_config into the driver's launch attributes (CUlaunchAttribute) and
// launch configuration (CUlaunchConfig), shared by the stream launch (execution/launch.cpp), the graph
// kernel node (execution/graph.cpp) and the occupancy queries (code/kernel.cpp).
//
// Adding a launch attribute is one line in for_each_launch_attribute (with its field in
// <cudrv/launch_config.hpp>): the array bound, the three paths and the names in error messages follow.
// Everything here is inline: a stream launch fills the attributes straight into an array on its stack.
#pragma once

#include <cuda.h>

#include "cudrv/launch_config.hpp"

namespace cudrv::detail {

// Calls visit(wanted, id, name, write) once for every launch attribute cudrv knows, in the order they
// reach the driver, whether config asks for it or not: wanted says whether it does, id is the driver's
// CUlaunchAttributeID, name says what it is in error messages, and write(CUlaunchAttributeValue&) fills
// the value from config (call it only when wanted).
template <class Visit>
constexpr void for_each_launch_attribute(const launch_config& config, Visit&& visit) {
  visit(config.has_cluster(), CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, "cluster dimensions",
        [&config](CUlaunchAttributeValue& v) {
          v.clusterDim.x = config.cluster.x;
          v.clusterDim.y = config.cluster.y;
          v.clusterDim.z = config.cluster.z;
        });
  visit(config.cooperative, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, "cooperative",
        [](CUlaunchAttributeValue& v) { v.cooperative = 1; });
  visit(config.programmatic_stream_serialization, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
        "programmatic stream serialization",
        [](CUlaunchAttributeValue& v) { v.programmaticStreamSerializationAllowed = 1; });
  visit(config.priority.has_value(), CU_LAUNCH_ATTRIBUTE_PRIORITY, "priority",
        [&config](CUlaunchAttributeValue& v) { v.priority = *config.priority; });
}

// The most attributes one launch_config becomes: every attribute for_each_launch_attribute knows.
inline constexpr unsigned max_launch_attributes = [] {
  unsigned n = 0;
  for_each_launch_attribute(launch_config{}, [&n](bool, CUlaunchAttributeID, const char*, const auto&) { ++n; });
  return n;
}();

// Room for a launch_config's attributes (on the caller's stack).
using launch_attribute_array = CUlaunchAttribute[max_launch_attributes];

// Writes the attributes config asks for into out, in the driver's order; returns how many.
inline unsigned write_launch_attributes(const launch_config& config, launch_attribute_array& out) noexcept {
  unsigned n = 0;
  for_each_launch_attribute(config, [&](bool wanted, CUlaunchAttributeID id, const char*, const auto& write) {
    if (wanted) {
      out[n] = {};
      out[n].id = id;
      write(out[n].value);
      ++n;
    }
  });
  return n;
}

// The CUlaunchConfig of config: grid, block, dynamic shared memory (which the caller has checked fits 32
// bits) and its attributes, written into attrs, which must outlive the result. No stream (hStream null).
inline CUlaunchConfig native_launch_config(const launch_config& config, launch_attribute_array& attrs) noexcept {
  CUlaunchConfig out{};
  out.gridDimX = config.grid.x;
  out.gridDimY = config.grid.y;
  out.gridDimZ = config.grid.z;
  out.blockDimX = config.block.x;
  out.blockDimY = config.block.y;
  out.blockDimZ = config.block.z;
  out.sharedMemBytes = static_cast<unsigned>(config.dynamic_shared_memory);
  out.attrs = attrs;
  out.numAttrs = write_launch_attributes(config, attrs);
  return out;
}

// What attribute id is in error messages ("cluster dimensions", "priority", ...), or "launch attribute".
constexpr const char* launch_attribute_name(CUlaunchAttributeID id) noexcept {
  const char* name = "launch attribute";
  for_each_launch_attribute(launch_config{}, [&](bool, CUlaunchAttributeID known, const char* n, const auto&) {
    if (known == id) {
      name = n;
    }
  });
  return name;
}

}  // namespace cudrv::detail
