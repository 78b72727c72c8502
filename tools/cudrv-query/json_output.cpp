// cudrv-query: the JSON documents (described by docs/cudrv-query.schema.json).
#include <cmath>

#include <nlohmann/json.hpp>

#include <cudrv/version.hpp>

#include "bandwidth_detail.hpp"
#include "inspect.hpp"
#include "query.hpp"

namespace cudrv_query {

namespace {

using json = nlohmann::ordered_json;

double rounded(double v) { return std::round(v * 1000.0) / 1000.0; }

template <class T>
void put(json& j, const char* key, const std::optional<T>& v) {
  if (v) {
    j[key] = *v;
  }
}

json version_json(int version) {
  return json{{"cuda_version", version}, {"cuda_version_string", format_cuda_version(version)}};
}

json clocks_json(const nvml_clocks& c) {
  json j = json::object();
  put(j, "graphics", c.graphics_mhz);
  put(j, "sm", c.sm_mhz);
  put(j, "memory", c.memory_mhz);
  return j;
}

json nvml_json(const nvml_device& n) {
  json j;
  j["index"] = n.index;
  j["uuid"] = n.uuid;
  j["via_mig"] = n.via_mig;
  if (n.memory_total_bytes) {
    json m;
    m["total_bytes"] = *n.memory_total_bytes;
    put(m, "free_bytes", n.memory_free_bytes);
    put(m, "used_bytes", n.memory_used_bytes);
    j["memory"] = m;
  }
  if (json c = clocks_json(n.clocks); !c.empty()) j["clocks_mhz"] = c;
  if (json c = clocks_json(n.max_clocks); !c.empty()) j["max_clocks_mhz"] = c;
  put(j, "temperature_c", n.temperature_c);
  if (n.power_draw_w || n.power_limit_w) {
    json p = json::object();
    if (n.power_draw_w) p["draw_w"] = rounded(*n.power_draw_w);
    if (n.power_limit_w) p["limit_w"] = rounded(*n.power_limit_w);
    j["power"] = p;
  }
  if (n.pcie_generation || n.pcie_width || n.pcie_max_generation || n.pcie_max_width) {
    json p = json::object();
    put(p, "generation", n.pcie_generation);
    put(p, "max_generation", n.pcie_max_generation);
    put(p, "width", n.pcie_width);
    put(p, "max_width", n.pcie_max_width);
    j["pcie"] = p;
  }
  if (n.ecc_enabled) j["ecc"] = json{{"enabled", *n.ecc_enabled}, {"pending", n.ecc_pending.value_or(*n.ecc_enabled)}};
  if (n.mig_enabled) j["mig"] = json{{"enabled", *n.mig_enabled}, {"pending", n.mig_pending.value_or(*n.mig_enabled)}};
  if (n.utilization_gpu_percent) {
    json u;
    u["gpu"] = *n.utilization_gpu_percent;
    put(u, "memory", n.utilization_memory_percent);
    j["utilization_percent"] = u;
  }
  put(j, "performance_state", n.performance_state);
  put(j, "persistence_mode", n.persistence_mode);
  return j;
}

json attribute_json(const attribute_value& v) {
  const attribute_desc& a = *v.desc;
  json j;
  if (!v.value) {
    j["value"] = nullptr;
  } else if (a.kind == attribute_kind::boolean) {
    j["value"] = *v.value != 0;
  } else {
    j["value"] = *v.value;
  }
  j["name"] = a.name;
  j["group"] = a.group;
  if (*a.unit != '\0') j["unit"] = a.unit;
  if (v.value && (a.kind == attribute_kind::enumeration || a.kind == attribute_kind::bitmask)) {
    j["meaning"] = describe(a, *v.value);
  }
  if (!v.value) j["error"] = v.error.empty() ? std::string("not reported") : v.error;
  return j;
}

json device_json(const device_info& d, view v) {
  json j;
  j["ordinal"] = d.ordinal;
  j["name"] = d.name;
  j["uuid"] = d.uuid;
  j["pci_bus_id"] = d.pci_bus_id;
  j["compute_capability"] = json{{"major", d.cc_major}, {"minor", d.cc_minor}};
  j["arch"] = "sm_" + std::to_string(d.cc_major * 10 + d.cc_minor);
  j["multiprocessors"] = d.multiprocessors;
  json memory;
  memory["total_bytes"] = d.total_memory;
  if (d.nvml && d.nvml->memory_free_bytes) memory["free_bytes"] = *d.nvml->memory_free_bytes;
  j["memory"] = memory;
  j["clocks_khz"] = json{{"sm", d.sm_clock_khz}, {"memory", d.memory_clock_khz}};
  if (d.nvml) j["nvml"] = nvml_json(*d.nvml);
  if (v == view::details) {
    json attributes = json::object();
    for (const attribute_value& a : d.attributes) attributes[a.desc->key] = attribute_json(a);
    j["attributes"] = attributes;
  }
  return j;
}

const char* status_name(exit_status s) {
  switch (s) {
    case exit_ok: return "ok";
    case exit_usage: return "usage_error";
    case exit_no_driver: return "no_driver";
    case exit_no_device: return "no_device";
    case exit_cuda_error: return "cuda_error";
    case exit_output_error:  // never in a document: decided after the document failed to be written
      return "output_error";
  }
  return "cuda_error";
}

/// The keys every document starts with: the schema, the tool, the view (none when the command line
/// could not be parsed) and how the run ended.
json document_head(const char* view, exit_status status) {
  json doc;
  doc["schema_version"] = json_schema_version;
  doc["tool"] = json{{"name", "cudrv-query"}, {"version", CUDRV_VERSION_STRING}};
  if (view != nullptr) doc["view"] = view;
  doc["status"] = status_name(status);
  doc["exit_code"] = static_cast<int>(status);
  return doc;
}

/// The `driver` object: what was loaded (or why not) and the CUDA version it supports.
json driver_json(bool available, int version, const std::string& library, const std::string& kernel_version,
                 const std::string& unavailable_reason) {
  json driver;
  driver["available"] = available;
  if (version > 0) {
    driver["cuda_version"] = version;
    driver["cuda_version_string"] = format_cuda_version(version);
  }
  if (!library.empty()) driver["library"] = library;
  if (!kernel_version.empty()) driver["kernel_driver_version"] = kernel_version;
  if (!available) driver["unavailable_reason"] = unavailable_reason;
  return driver;
}

/// Serialised with two spaces; strings from the environment, dlerror or the driver need not be
/// UTF-8: invalid bytes become U+FFFD.
std::string serialise(const json& doc) { return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n"; }

// --- issue 36: topology ---------------------------------------------------------------------------

json id_list_json(const std::optional<std::vector<unsigned int>>& ids) {
  return ids ? json(format_id_list(*ids)) : json(nullptr);
}

/// The `topology` object of --topo --json.
json topology_json(const topology_info& t) {
  json j;
  json labels = json::array();
  json matrix = json::array();
  for (std::size_t i = 0; i < t.matrix.size(); ++i) {
    labels.push_back(t.label(i));
    json row = json::array();
    for (const topo_relation& r : t.matrix[i]) row.push_back(r.name);
    matrix.push_back(row);
  }
  j["labels"] = labels;
  j["matrix"] = matrix;
  json gpus = json::array();
  for (std::size_t i = 0; i < t.gpus.size(); ++i) {
    const topo_gpu& g = t.gpus[i];
    json e;
    e["label"] = t.label(i);
    e["ordinal"] = g.ordinal;
    e["nvml_index"] = g.nvml_index ? json(*g.nvml_index) : json(nullptr);
    e["name"] = g.name;
    e["pci_bus_id"] = g.pci_bus_id;
    e["cpu_affinity"] = id_list_json(g.cpus);
    e["numa_affinity"] = id_list_json(g.numa_nodes);
    e["numa_nodes"] = g.numa_nodes ? json(*g.numa_nodes) : json(nullptr);
    e["gpu_numa_id"] = g.gpu_numa_id ? json(*g.gpu_numa_id) : json(nullptr);
    e["nvswitch_links"] = g.nvswitch_links;
    gpus.push_back(e);
  }
  j["gpus"] = gpus;
  json nics = json::array();
  for (std::size_t k = 0; k < t.nics.size(); ++k) {
    nics.push_back(
        json{{"label", t.label(t.gpus.size() + k)}, {"name", t.nics[k].name}, {"pci_bus_id", t.nics[k].pci_bus_id}});
  }
  j["nics"] = nics;
  json links = json::array();
  for (std::size_t a = 0; a < t.gpus.size(); ++a) {
    for (std::size_t b = a + 1; b < t.gpus.size(); ++b) {
      const topo_relation& r = t.matrix[a][b];
      links.push_back(json{{"from", t.gpus[a].ordinal},
                           {"to", t.gpus[b].ordinal},
                           {"relation", r.name},
                           {"nvlinks", r.nvlinks},
                           {"via_nvswitch", r.via_nvswitch},
                           {"pcie", r.pcie ? json(*r.pcie) : json(nullptr)}});
    }
  }
  j["gpu_links"] = links;
  return j;
}

}  // namespace

std::string version_to_json(const version_info& v) {
  json doc = document_head("version", exit_ok);
  doc["tool"]["version"] = v.tool;
  doc["library"] = json{{"name", "cudrv"}, {"version", v.library}};
  doc["driver"] = driver_json(v.driver_available, v.driver_version, v.driver_library, "", v.unavailable_reason);
  doc["toolkit"] = version_json(v.toolkit_version);
  return serialise(doc);
}

std::string usage_error_to_json(const std::string& message) {
  json doc = document_head(nullptr, exit_usage);
  doc["error"] = json{{"message", message}};
  return serialise(doc);
}

std::string to_json(const system_info& info, view v, const failure* error) {
  const exit_status status = error != nullptr ? error->status : exit_ok;
  json doc = document_head(view_name(v), status);
  if (error != nullptr && status != exit_ok) {
    json e;
    e["message"] = error->message;
    if (!error->valid_selectors.empty()) e["valid_selectors"] = error->valid_selectors;
    doc["error"] = e;
  }

  doc["driver"] = driver_json(info.driver_available, info.driver_version, info.driver_library, info.nvml.driver_version,
                              info.unavailable_reason);
  doc["toolkit"] = version_json(info.toolkit_version);

  json nvrtc;
  nvrtc["built_with"] = version_json(info.toolkit_version);  // NVRTC comes with the toolkit
  if (info.nvrtc.checked) {
    json library;
    library["available"] = info.nvrtc.available;
    if (info.nvrtc.available) {
      library["version"] = info.nvrtc.version;
      library["version_string"] = format_cuda_version(info.nvrtc.version);
    } else {
      library["unavailable_reason"] = info.nvrtc.reason;
    }
    nvrtc["library"] = library;
  }
  doc["nvrtc"] = nvrtc;

  json nvml;
  nvml["available"] = info.nvml.available;
  nvml["library"] = info.nvml.library;
  if (info.nvml.available) {
    nvml["version"] = info.nvml.nvml_version;
  } else {
    nvml["unavailable_reason"] = info.nvml.reason;
  }
  doc["nvml"] = nvml;

  json env;
  env["CUDA_VISIBLE_DEVICES"] = info.visible_devices ? json(*info.visible_devices) : json(nullptr);
  env["CUDA_DEVICE_ORDER"] = info.device_order ? json(*info.device_order) : json(nullptr);
  doc["environment"] = env;

  doc["device_count"] = info.device_count;
  json devices = json::array();
  for (const device_info& d : info.devices) devices.push_back(device_json(d, v));
  doc["devices"] = devices;

  if (v == view::p2p && status == exit_ok) {
    json links = json::array();
    for (const p2p_link& l : info.p2p) {
      json j;
      j["from"] = l.from;
      j["to"] = l.to;
      j["can_access"] = l.can_access;
      put(j, "performance_rank", l.performance_rank);
      put(j, "access_supported", l.access_supported);
      put(j, "native_atomic_supported", l.native_atomic_supported);
      put(j, "only_partial_native_atomic_supported", l.only_partial_native_atomic_supported);
      put(j, "cuda_array_access_supported", l.cuda_array_access_supported);
      links.push_back(j);
    }
    doc["p2p"] = links;
  }
  if (v == view::bench && info.bench) {
    const bench_results& b = *info.bench;
    json bench;
    bench["size_bytes"] = b.options.size;
    bench["iterations"] = b.options.iterations;
    bench["trials"] = b.options.trials;
    bench["launches_per_trial"] = b.options.iterations * 100;
    bench["method"] =
        "median over trials of CUDA-event-timed batches on one stream; GB/s = 1e9 bytes per second, bytes copied "
        "counted once (d2d_read_write_gbps counts the bytes read plus the bytes written)";
    json devs = json::array();
    for (const bench_device& r : b.devices) {
      devs.push_back(json{{"ordinal", r.ordinal},
                          {"h2d_pinned_gbps", rounded(r.h2d_pinned_gbps)},
                          {"d2h_pinned_gbps", rounded(r.d2h_pinned_gbps)},
                          {"h2d_pageable_gbps", rounded(r.h2d_pageable_gbps)},
                          {"d2h_pageable_gbps", rounded(r.d2h_pageable_gbps)},
                          {"d2d_copy_gbps", rounded(r.d2d_copy_gbps)},
                          {"d2d_read_write_gbps", rounded(2 * r.d2d_copy_gbps)},
                          {"launch_us", rounded(r.launch_us)},
                          {"launch_sync_us", rounded(r.launch_sync_us)}});
    }
    bench["devices"] = devs;
    json pairs = json::array();
    for (const bench_p2p& p : b.p2p) {
      pairs.push_back(json{{"from", p.from}, {"to", p.to}, {"peer_access", p.peer_access}, {"gbps", rounded(p.gbps)}});
    }
    bench["p2p"] = pairs;
    doc["bench"] = bench;
  }
  // issue 36: topology
  if (v == view::topo && info.topology && status == exit_ok) {
    doc["topology"] = topology_json(*info.topology);
  }
  if (v == view::bandwidth && info.bandwidth) {  // issue 36: bandwidth
    doc["bandwidth"] = detail::bandwidth_to_json(*info.bandwidth);
  }
  return serialise(doc);
}

// --- issue 36: inspect ------------------------------------------------------------------------------

namespace {

json dims_json(const cudrv::dims& d) { return json::array({d.x, d.y, d.z}); }

json constants_json(const std::vector<cudrv::constant_bank>& banks) {
  json a = json::array();
  for (const cudrv::constant_bank& b : banks) {
    a.push_back(json{{"bank", b.bank}, {"bytes", b.bytes}});
  }
  return a;
}

json kernel_json(const cudrv::code_image& image, const cudrv::kernel_resources& k) {
  json j;
  j["name"] = k.name;
  j["demangled_name"] = k.demangled_name;
  json params = json::array();
  for (const cudrv::kernel_parameter& p : k.parameters) {
    params.push_back(json{{"index", p.index}, {"offset", p.offset}, {"size", p.size}});
  }
  j["parameters"] = params;
  j["parameter_bytes"] = k.parameter_bytes;
  if (image.kind != cudrv::code_image_kind::sass) {
    return j;  // PTX records no resources
  }
  j["registers"] = k.registers;
  if (k.max_registers) j["max_registers"] = *k.max_registers;
  j["shared_bytes"] = k.shared_bytes;
  j["local_bytes"] = k.local_bytes;
  j["stack_bytes"] = k.stack_bytes;
  j["frame_bytes"] = k.frame_bytes;
  j["constant"] = constants_json(k.constant);
  j["code_bytes"] = k.code_bytes;
  if (k.max_threads) j["max_threads"] = dims_json(*k.max_threads);
  if (k.required_threads) j["required_threads"] = dims_json(*k.required_threads);
  if (k.cluster_dims) j["cluster_dims"] = dims_json(*k.cluster_dims);
  j["explicit_cluster"] = k.explicit_cluster;
  if (k.max_cluster_rank) j["max_cluster_rank"] = *k.max_cluster_rank;
  j["barriers"] = k.barriers;
  return j;
}

json image_json(const cudrv::code_image& image) {
  json j;
  j["kind"] = cudrv::to_string(image.kind);
  j["arch"] = image.arch;
  j["arch_name"] = image.arch_name;
  j["container"] = image.container.empty() ? json(nullptr) : json(image.container);
  j["stored_bytes"] = image.stored_bytes;
  j["bytes"] = image.bytes;
  j["compression"] = image.compressed() ? json(image.compression) : json(nullptr);
  j["flags"] = image.flags;
  if (!image.unreadable.empty()) j["unreadable"] = image.unreadable;
  if (image.kind == cudrv::code_image_kind::sass) {
    j["global_bytes"] = image.global_bytes;
    j["constant"] = constants_json(image.constant);
    j["device_functions"] = image.device_functions;
  }
  json kernels = json::array();
  for (const cudrv::kernel_resources& k : image.kernels) {
    kernels.push_back(kernel_json(image, k));
  }
  j["kernels"] = kernels;
  return j;
}

}  // namespace

std::string inspect_to_json(const inspect_result* r, const failure* error) {
  const exit_status status = error != nullptr ? error->status : exit_ok;
  json doc = document_head(view_name(view::inspect), status);
  if (error != nullptr && status != exit_ok) {
    doc["error"] = json{{"message", error->message}};
  }
  if (r != nullptr) {
    json in;
    in["file"] = r->path;
    in["kind"] = std::string(cudrv::to_string(r->kind));
    in["size_bytes"] = r->size;
    json images = json::array();
    for (const cudrv::code_image& image : r->inspection.images) {
      images.push_back(image_json(image));
    }
    in["images"] = images;
    doc["inspect"] = in;
  }
  return serialise(doc);
}

}  // namespace cudrv_query
