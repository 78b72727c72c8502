// Example: enumerate the visible CUDA devices and print what cudrv knows about each one.
//
//   example_device_properties
//
// Shows: checking for the driver without exceptions (cudrv::driver), iterating over
// cudrv::devices(), identity queries (name, arch, compute capability, UUID, PCI bus id), memory
// (total needs no context; free creates the device's primary context), typed attributes whose
// result type is fixed by the tag (bool, int, std::size_t), the raw attribute overload, the stream
// priority range and the peer-access matrix.
//
// Exit status: 0 success, 2 no CUDA driver, 3 no CUDA device, 4 CUDA error.
#include <cudrv/cudrv.hpp>

#include <cstddef>
#include <cstdio>
#include <exception>
#include <string>

namespace {

std::string yes_no(bool value) { return value ? "yes" : "no"; }

std::string format_bytes(std::size_t bytes) {
  char buffer[64];
  if (bytes >= (std::size_t(1) << 30)) {
    std::snprintf(buffer, sizeof(buffer), "%.2f GiB", static_cast<double>(bytes) / double(1 << 30));
  } else if (bytes >= (std::size_t(1) << 20)) {
    std::snprintf(buffer, sizeof(buffer), "%.2f MiB", static_cast<double>(bytes) / double(1 << 20));
  } else if (bytes >= 1024) {
    std::snprintf(buffer, sizeof(buffer), "%zu KiB", bytes / 1024);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%zu bytes", bytes);
  }
  return buffer;
}

std::string cuda_version(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

void row(const char* label, const std::string& value) { std::printf("  %-38s %s\n", label, value.c_str()); }

void print_device(const cudrv::device& dev) {
  namespace attr = cudrv::device_attributes;

  std::printf("Device %d: %s\n", dev.ordinal(), dev.name().c_str());
  const cudrv::compute_capability cc = dev.compute_capability();
  row("architecture", dev.arch());
  row("compute capability", std::to_string(cc.major) + "." + std::to_string(cc.minor));
  row("UUID", dev.uuid().to_string());
  row("PCI bus id", dev.pci_bus_id());
  row("total memory", format_bytes(dev.total_memory()));
  // free_memory() runs cuMemGetInfo in the primary context, creating it on first use (~0.1 s).
  row("free memory", format_bytes(dev.free_memory()));

  // Typed attributes: the tag fixes the result type.
  const int sms = dev.attribute(attr::multiprocessor_count);  // int
  const std::size_t l2 = dev.attribute(attr::l2_cache_size);  // std::size_t
  const bool managed = dev.attribute(attr::managed_memory);   // bool
  row("multiprocessors (SMs)", std::to_string(sms));
  row("L2 cache", format_bytes(l2));
  row("shared memory per block", format_bytes(dev.attribute(attr::max_shared_memory_per_block)));
  row("shared memory per block (opt-in)", format_bytes(dev.attribute(attr::max_shared_memory_per_block_optin)));
  row("shared memory per SM", format_bytes(dev.attribute(attr::max_shared_memory_per_multiprocessor)));
  row("max threads per block", std::to_string(dev.attribute(attr::max_threads_per_block)));
  row("max threads per SM", std::to_string(dev.attribute(attr::max_threads_per_multiprocessor)));
  row("registers per block", std::to_string(dev.attribute(attr::max_registers_per_block)));
  row("warp size", std::to_string(dev.attribute(attr::warp_size)));
  row("SM clock (peak)", std::to_string(dev.attribute(attr::clock_rate_khz) / 1000) + " MHz");
  row("memory clock (peak)", std::to_string(dev.attribute(attr::memory_clock_rate_khz) / 1000) + " MHz");
  row("memory bus width", std::to_string(dev.attribute(attr::global_memory_bus_width)) + " bits");
  row("async copy engines", std::to_string(dev.attribute(attr::async_engine_count)));
  row("managed memory", yes_no(managed));
  row("concurrent managed access", yes_no(dev.attribute(attr::concurrent_managed_access)));
  row("cluster launch", yes_no(dev.attribute(attr::cluster_launch)));
  row("memory pools", yes_no(dev.attribute(attr::memory_pools_supported)));
  row("unified addressing", yes_no(dev.attribute(attr::unified_addressing)));
  row("ECC enabled", yes_no(dev.attribute(attr::ecc_enabled)));
  // An attribute without a tag: the raw overload returns the driver's int.
  row("global L1 cache (raw attribute)", yes_no(dev.attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED) != 0));

  // Needs the primary context (created above by free_memory()).
  const auto [greatest, least] = dev.stream_priority_range();
  row("stream priorities (greatest..least)", std::to_string(greatest) + " .. " + std::to_string(least));
}

void print_peer_matrix(const cudrv::device_range& devices) {
  std::printf("Peer access (row device can access column device's memory):\n");
  if (devices.size() < 2) {
    std::printf("  only one device is visible\n");
    return;
  }
  std::printf("  %6s", "");
  for (cudrv::device column : devices) {
    std::printf(" %5d", column.ordinal());
  }
  std::printf("\n");
  for (cudrv::device r : devices) {
    std::printf("  %6d", r.ordinal());
    for (cudrv::device c : devices) {
      std::printf(" %5s", r == c ? "-" : yes_no(r.can_access_peer(c)).c_str());
    }
    std::printf("\n");
  }
}

int run() {
  // No exception without a driver: ask first.
  if (!cudrv::driver::available()) {
    std::fprintf(stderr, "device_properties: no usable CUDA driver: %s\n", cudrv::driver::unavailable_reason().c_str());
    return 2;
  }
  const cudrv::device_range devices = cudrv::devices();
  if (devices.empty()) {
    std::fprintf(stderr, "device_properties: the CUDA driver (CUDA %s) sees no device\n",
                 cuda_version(cudrv::driver::version()).c_str());
    return 3;
  }
  std::printf("CUDA driver %s (%s), built with CUDA %s, %zu device(s)\n\n",
              cuda_version(cudrv::driver::version()).c_str(), cudrv::driver::library_path().c_str(),
              cuda_version(CUDA_VERSION).c_str(), devices.size());
  for (cudrv::device dev : devices) {
    print_device(dev);
    std::printf("\n");
  }
  print_peer_matrix(devices);
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const cudrv::driver_unavailable_error& e) {
    std::fprintf(stderr, "device_properties: no usable CUDA driver: %s\n", e.what());
    return 2;
  } catch (const cudrv::error& e) {
    std::fprintf(stderr, "device_properties: CUDA error: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "device_properties: error: %s\n", e.what());
  }
  return 4;
}
