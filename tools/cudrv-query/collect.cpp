// cudrv-query: collecting from the driver (through cudrv), NVML and NVRTC.
#include <cuda.h>

#include <cstdlib>
#include <exception>
#include <memory>
#include <system_error>
#include <thread>
#include <utility>

#include <cudrv/device.hpp>
#include <cudrv/driver.hpp>
#include <cudrv/error.hpp>
#include <cudrv/program.hpp>

#include "query.hpp"

namespace cudrv_query {

namespace {

device_info collect_device(const cudrv::device& dev) {
  device_info d;
  d.ordinal = dev.ordinal();
  d.name = dev.name();
  cudrv::compute_capability cc = dev.compute_capability();
  d.cc_major = cc.major;
  d.cc_minor = cc.minor;
  d.multiprocessors = dev.attribute(cudrv::device_attributes::multiprocessor_count);
  d.total_memory = dev.total_memory();  // cuDeviceTotalMem: no context (cuMemGetInfo would need one)
  d.sm_clock_khz = dev.attribute(cudrv::device_attributes::clock_rate_khz);
  d.memory_clock_khz = dev.attribute(cudrv::device_attributes::memory_clock_rate_khz);
  d.uuid = dev.uuid().to_string();
  d.pci_bus_id = dev.pci_bus_id();
  return d;
}

/// An attribute newer than the installed driver: reported as unknown, not as a failure.
bool unknown_to_driver(const cudrv::error& e) {
  return e.result() == CUDA_ERROR_INVALID_VALUE || e.result() == CUDA_ERROR_NOT_SUPPORTED;
}

std::optional<std::string> environment(const char* name) {
  if (const char* value = std::getenv(name); value != nullptr) {
    return std::string(value);
  }
  return std::nullopt;
}

/// What the second thread gathers while the first one waits in cuInit.
struct side_results {
  collect_options options;
  std::unique_ptr<nvml_session> nvml;
  std::vector<nvml_device> nvml_devices;
  library_status nvrtc;
  std::exception_ptr failure;

  void gather() noexcept {
    try {
      nvml = std::make_unique<nvml_session>();
      nvml_devices = nvml->devices(options.nvml);
      if (options.nvrtc) {
        nvrtc.checked = true;
        try {
          nvrtc.version = cudrv::nvrtc_version();
          nvrtc.available = true;
        } catch (const cudrv::error& e) {
          nvrtc.reason = e.what();
        }
      }
    } catch (...) {
      failure = std::current_exception();
    }
  }
};

}  // namespace

const char* view_name(view v) noexcept {
  switch (v) {
    case view::summary: return "summary";
    case view::details: return "details";
    case view::p2p: return "p2p";
    case view::bench: return "bench";
    case view::topo: return "topo";
    case view::watch: return "watch";  // issue 36: watch
    case view::bandwidth: return "bandwidth";
    case view::inspect: return "inspect";  // issue 36: inspect
  }
  return "summary";
}

void read_environment(system_info& info) {
  info.visible_devices = environment("CUDA_VISIBLE_DEVICES");
  info.device_order = environment("CUDA_DEVICE_ORDER");
}

system_info collect(const collect_options& options) {
  system_info info;
  read_environment(info);

  // cuInit takes most of the run time (about 0.2 s on an H100). NVML and NVRTC are loaded on a second
  // thread meanwhile. (NVML calls and cuInit partly serialise in the kernel driver, and loading NVRTC
  // maps a large library, which is why the summary asks NVML for its memory figures only and does
  // not load NVRTC: see docs/performance.md.)
  side_results side;
  side.options = options;
  std::thread helper;
  try {
    helper = std::thread([&side] { side.gather(); });
  } catch (const std::system_error&) {
    side.gather();  // no thread to be had: do it here
  }
  struct joiner {
    std::thread& t;
    ~joiner() {
      if (t.joinable()) {
        t.join();
      }
    }
  } join_at_exit{helper};

  // None of the cudrv::driver queries throws; they load the driver on first use.
  info.driver_available = cudrv::driver::available();
  info.driver_version = cudrv::driver::version();
  info.driver_library = cudrv::driver::library_path();
  if (info.driver_available) {
    // Ordinals are CUDA's: cudrv::devices() enumerates what the driver exposes after
    // CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER.
    for (cudrv::device dev : cudrv::devices()) {
      info.devices.push_back(collect_device(dev));
    }
    info.device_count = static_cast<int>(info.devices.size());
  } else {
    info.unavailable_reason = cudrv::driver::unavailable_reason();
  }

  if (helper.joinable()) {
    helper.join();
  }
  if (side.failure) {
    std::rethrow_exception(side.failure);
  }
  info.nvrtc = side.nvrtc;
  info.nvml = side.nvml->status();
  // NVML's order is not CUDA's: match by UUID. A MIG instance's UUID is looked up on its own.
  for (device_info& d : info.devices) {
    for (const nvml_device& n : side.nvml_devices) {
      if (n.uuid == d.uuid) {
        d.nvml = n;
        break;
      }
    }
    if (!d.nvml && info.nvml.available) {
      d.nvml = side.nvml->by_uuid(d.uuid, options.nvml);
      // cudrv writes every UUID as GPU-…; NVML and nvidia-smi write a MIG instance's as MIG-….
      if (!d.nvml && d.uuid.rfind("GPU-", 0) == 0) {
        std::string mig = "MIG-" + d.uuid.substr(4);
        if (std::optional<nvml_device> n = side.nvml->by_uuid(mig, options.nvml); n && n->via_mig) {
          d.uuid = mig;
          d.nvml = n;
        }
      }
    }
  }
  return info;
}

void collect_attributes(system_info& info) {
  for (device_info& d : info.devices) {
    cudrv::device dev = cudrv::device::from_native_handle(static_cast<CUdevice>(d.ordinal));
    d.attributes.clear();
    d.attributes.reserve(attribute_table().size());
    for (const attribute_desc& a : attribute_table()) {
      attribute_value v;
      v.desc = &a;
      try {
        v.value = dev.attribute(a.id);
      } catch (const cudrv::error& e) {
        if (!unknown_to_driver(e)) {
          throw;
        }
        v.error = e.name();
      }
      d.attributes.push_back(std::move(v));
    }
  }
}

void collect_p2p(system_info& info) {
  info.p2p.clear();
  auto p2p_attribute = [](const cudrv::device& a, const cudrv::device& b,
                          CUdevice_P2PAttribute attr) -> std::optional<int> {
    try {
      return a.p2p_attribute(attr, b);
    } catch (const cudrv::error& e) {
      if (!unknown_to_driver(e)) {
        throw;
      }
      return std::nullopt;
    }
  };
  auto as_bool = [](std::optional<int> v) -> std::optional<bool> {
    return v ? std::optional<bool>(*v != 0) : std::nullopt;
  };
  for (const device_info& from : info.devices) {
    for (const device_info& to : info.devices) {
      if (from.ordinal == to.ordinal) {
        continue;
      }
      cudrv::device a = cudrv::device::from_native_handle(static_cast<CUdevice>(from.ordinal));
      cudrv::device b = cudrv::device::from_native_handle(static_cast<CUdevice>(to.ordinal));
      p2p_link link;
      link.from = from.ordinal;
      link.to = to.ordinal;
      link.can_access = a.can_access_peer(b);
      link.performance_rank = p2p_attribute(a, b, CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK);
      link.access_supported = as_bool(p2p_attribute(a, b, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED));
      link.native_atomic_supported = as_bool(p2p_attribute(a, b, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED));
      link.cuda_array_access_supported =
          as_bool(p2p_attribute(a, b, CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED));
#if CUDA_VERSION >= 13000
      link.only_partial_native_atomic_supported =
          as_bool(p2p_attribute(a, b, CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED));
#endif
      info.p2p.push_back(link);
    }
  }
}

std::string format_cuda_version(int version) {
  if (version <= 0) {
    return "unknown";
  }
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace cudrv_query
