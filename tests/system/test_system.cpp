// <cudrv/system.hpp> against a stand-in NVML (tests/fake_nvml/fake_nvml.cpp, through CUDRV_LIBNVML) and
// the stand-in driver (CUDRV_LIBCUDA): the mapping of every reading, NOT_SUPPORTED as an empty field,
// errors as nvml_error naming the function, UUID matching with CUDA's devices (MIG included), the
// process list's two-call protocol, and NVML's initialisation. The hidden cases ([.][no-nvml],
// [.][nvml-init-fails], [.][nvml-not-nvml]) run without a usable NVML: a typed error, never a crash.
// ctest runs each case in a process of its own (NVML is initialised once per process).
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>
#include <cudrv/system.hpp>

#include <dlfcn.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace sys = cudrv::system;

namespace {

constexpr unsigned long long gib = 1ULL << 30;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Whether a reading is there and within 1e-9 of @p expected (no Approx: the GPU machine's Catch2 v3
// spells it Catch::Approx).
bool near(const std::optional<double>& got, double expected) { return got && std::abs(*got - expected) < 1e-9; }

// A hook of the stand-in NVML that cudrv loaded (fake_nvml_*).
template <class Fn>
Fn* nvml_hook(const char* name) {
  REQUIRE(sys::available());  // cudrv loads the fake first
  const char* path = std::getenv("CUDRV_LIBNVML");
  REQUIRE(path != nullptr);
  void* lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib != nullptr);
  auto* fn = reinterpret_cast<Fn*>(dlsym(lib, name));
  dlclose(lib);  // the reference RTLD_NOLOAD took; cudrv keeps the library loaded
  REQUIRE(fn != nullptr);
  return fn;
}

long long nvml_calls(const char* function) { return nvml_hook<long long(const char*)>("fake_nvml_counter")(function); }

// Makes an NVML function fail with a code until the scope ends.
struct injected_failure {
  const char* function;
  injected_failure(const char* f, int code) : function(f) {
    nvml_hook<void(const char*, int)>("fake_nvml_fail")(f, code);
  }
  ~injected_failure() { nvml_hook<void(const char*, int)>("fake_nvml_fail")(function, 0); }
  injected_failure(const injected_failure&) = delete;
  injected_failure& operator=(const injected_failure&) = delete;
};

// The fake driver's UUID of CUDA device d (byte 0 is 0xc0 + d), or the fake MIG instance's (0xd0).
cudrv::device_uuid fake_uuid(unsigned char first) {
  cudrv::device_uuid u{};
  for (int i = 0; i < 16; ++i) {
    u.bytes[static_cast<std::size_t>(i)] = static_cast<unsigned char>(i);
  }
  u.bytes[0] = first;
  return u;
}

}  // namespace

TEST_CASE("system: versions and device count come from NVML", "[system]") {
  REQUIRE(sys::available());
  CHECK(sys::unavailable_reason().empty());
  CHECK(sys::library_path() == std::getenv("CUDRV_LIBNVML"));
  CHECK(sys::driver_version() == "999.88.77");
  CHECK(sys::nvml_version() == "13.999.88.77");
  CHECK(sys::cuda_driver_version() == 13020);
  CHECK(sys::device_count() == 2);
  const std::vector<sys::nvml_device> all = sys::devices();
  REQUIRE(all.size() == 2);
  CHECK(all[0].index() == 0u);
  CHECK(all[1].index() == 1u);
  CHECK(all[0] == sys::nvml_device::at(0));
  CHECK_FALSE(all[0] == all[1]);
  CHECK(sys::nvml_device::from_native_handle(all[1].native_handle()) == all[1]);
}

TEST_CASE("system: every reading of a GPU is mapped from NVML's answer", "[system]") {
  const sys::nvml_device gpu = sys::nvml_device::at(0);
  CHECK(gpu.name() == "NVIDIA Fake H100");
  CHECK(gpu.uuid() == "GPU-c1010203-0405-0607-0809-0a0b0c0d0e0f");
  CHECK(gpu.serial() == std::optional<std::string>("1650000000001"));
  CHECK_FALSE(gpu.is_mig_instance());
  CHECK(gpu.parent() == gpu);
  const std::optional<sys::pci_info> pci = gpu.pci();
  REQUIRE(pci);
  CHECK(pci->bus_id == "00000000:1B:00.0");
  CHECK(pci->bus == 0x1bu);
  CHECK(pci->pci_device_id == 0x233010deu);
  CHECK(pci->pci_subsystem_id == 0x16c110deu);
  REQUIRE(gpu.utilization());
  CHECK(gpu.utilization()->gpu_percent == 37);
  CHECK(gpu.utilization()->memory_percent == 12);
  REQUIRE(gpu.memory());
  CHECK(gpu.memory()->total_bytes == 80 * gib);
  CHECK(gpu.memory()->free_bytes == 70 * gib);
  CHECK(gpu.memory()->used_bytes == 10 * gib);
  REQUIRE(gpu.bar1_memory());
  CHECK(gpu.bar1_memory()->total_bytes == 128 * gib);

  const sys::power_readings power = gpu.power();  // milliwatts to watts
  CHECK(near(power.draw_w, 123.456));
  CHECK(near(power.limit_w, 700.0));
  CHECK(near(power.enforced_limit_w, 690.0));
  CHECK(near(power.default_limit_w, 700.0));
  CHECK(near(power.min_limit_w, 200.0));
  CHECK(near(power.max_limit_w, 700.0));

  const sys::temperature_readings t = gpu.temperature();
  CHECK(t.gpu_c == 41u);
  CHECK(t.memory_c == 47u);  // the field NVML_FI_DEV_MEMORY_TEMP
  CHECK(t.shutdown_c == 92u);
  CHECK(t.slowdown_c == 89u);
  CHECK(t.memory_max_c == 95u);
  CHECK(t.gpu_max_c == 87u);

  const sys::clock_readings c = gpu.clocks();
  CHECK(c.current.graphics_mhz == 1755u);
  CHECK(c.current.memory_mhz == 2619u);
  CHECK(c.current.video_mhz == 1545u);
  CHECK(c.max.sm_mhz == 1980u);
  CHECK(c.max.video_mhz == 1710u);
  CHECK(c.application.graphics_mhz == 1755u);

  const sys::pcie_readings p = gpu.pcie();
  CHECK(p.generation == 4u);
  CHECK(p.max_generation == 5u);
  CHECK(p.gpu_max_generation == 5u);
  CHECK(p.width == 8u);
  CHECK(p.max_width == 16u);
  CHECK(p.tx_kib_per_s == 1234u);
  CHECK(p.rx_kib_per_s == 5678u);
  CHECK(p.replay_count == 3u);
}

TEST_CASE("system: modes, ECC, remapped rows, NVLinks and clock-event reasons", "[system]") {
  const sys::nvml_device gpu = sys::nvml_device::at(0);
  const sys::ecc_readings ecc = gpu.ecc();
  CHECK(ecc.enabled == true);
  CHECK(ecc.pending == false);
  CHECK(ecc.volatile_corrected == 7u);
  CHECK(ecc.aggregate_corrected == 70u);
  CHECK(ecc.volatile_uncorrected == 0u);
  CHECK(ecc.aggregate_uncorrected == 1u);
  CHECK_FALSE(gpu.retired_pages());  // NOT_SUPPORTED: the GPU remaps rows instead
  const std::optional<sys::remapped_rows_info> rows = gpu.remapped_rows();
  REQUIRE(rows);
  CHECK(rows->corrected == 2);
  CHECK(rows->uncorrected == 1);
  CHECK(rows->pending);
  CHECK_FALSE(rows->failure);
  CHECK(gpu.compute_mode() == sys::compute_mode::exclusive_process);
  CHECK(sys::to_string(sys::compute_mode::exclusive_process) == "Exclusive_Process");
  CHECK(sys::to_string(sys::compute_mode::shared) == "Default");
  REQUIRE(gpu.mig_mode());
  CHECK_FALSE(gpu.mig_mode()->current);
  CHECK(gpu.persistence_mode() == true);
  CHECK(gpu.performance_state() == 2);

  // Link 0 up, link 1 down, no link 2: the list stops where NVML says the link does not exist.
  const std::vector<sys::nvlink_readings> links = gpu.nvlinks();
  REQUIRE(links.size() == 2);
  CHECK(links[0].link == 0);
  CHECK(links[0].active);
  CHECK(links[0].version == 4u);
  REQUIRE(links[0].remote);
  CHECK(links[0].remote->bus_id == "00000000:2A:00.0");
  CHECK(links[0].tx_data_kib == 1000u);
  CHECK(links[0].rx_data_kib == 2000u);
  CHECK(links[0].replay_errors == 1u);
  CHECK(links[0].recovery_errors == 2u);
  CHECK(links[0].crc_flit_errors == 3u);
  CHECK(links[0].crc_data_errors == 4u);
  CHECK(links[0].ecc_data_errors == 5u);
  CHECK_FALSE(links[1].active);
  CHECK_FALSE(links[1].remote);  // a link that is down has no remote end
  CHECK(links[1].tx_data_kib == 1001u);

  const std::optional<sys::clock_event_reasons> why = gpu.clock_events();
  REQUIRE(why);
  CHECK(why->has(sys::clock_event::gpu_idle));
  CHECK(why->has(sys::clock_event::sw_power_cap));
  CHECK_FALSE(why->has(sys::clock_event::hw_slowdown));
  CHECK_FALSE(why->none());
  CHECK(why->names() == std::vector<std::string>{"gpu_idle", "sw_power_cap", "bit_40"});
  CHECK(sys::clock_event_reasons{}.none());
}

TEST_CASE("system: a reading NVML does not support on a GPU is empty, not an error", "[system]") {
  const sys::nvml_device gpu = sys::nvml_device::at(1);  // answers NVML_ERROR_NOT_SUPPORTED
  CHECK(gpu.name() == "NVIDIA Fake L4");
  CHECK_FALSE(gpu.serial());
  CHECK_FALSE(gpu.utilization());
  CHECK_FALSE(gpu.bar1_memory());
  const sys::power_readings power = gpu.power();
  CHECK_FALSE(power.draw_w);
  CHECK_FALSE(power.limit_w);
  CHECK_FALSE(power.enforced_limit_w);
  CHECK_FALSE(power.min_limit_w);
  const sys::temperature_readings t = gpu.temperature();
  CHECK_FALSE(t.gpu_c);
  CHECK_FALSE(t.memory_c);
  CHECK_FALSE(t.slowdown_c);
  CHECK_FALSE(gpu.clocks().current.sm_mhz);
  CHECK_FALSE(gpu.clocks().max.graphics_mhz);
  CHECK_FALSE(gpu.clock_events());
  CHECK_FALSE(gpu.pcie().generation);
  CHECK_FALSE(gpu.pcie().replay_count);
  CHECK(gpu.nvlinks().empty());
  CHECK_FALSE(gpu.ecc().enabled);
  CHECK_FALSE(gpu.ecc().volatile_corrected);
  CHECK_FALSE(gpu.remapped_rows());
  CHECK_FALSE(gpu.compute_mode());
  CHECK_FALSE(gpu.persistence_mode());
  CHECK_FALSE(gpu.performance_state());  // NVML_PSTATE_UNKNOWN
  CHECK(gpu.processes().empty());
  REQUIRE(gpu.mig_mode());  // supported there: MIG on now and after a reset
  CHECK(gpu.mig_mode()->current);
  CHECK(gpu.mig_mode()->pending);

  // The same on a GPU that otherwise answers: one reading turned NOT_SUPPORTED is empty alone.
  const sys::nvml_device full = sys::nvml_device::at(0);
  injected_failure unsupported("nvmlDeviceGetTemperature", 3);
  CHECK_FALSE(full.temperature().gpu_c);
  CHECK(full.temperature().slowdown_c == 89u);
}

TEST_CASE("system: a real NVML failure is an nvml_error naming the function and NVML's text", "[system]") {
  const sys::nvml_device gpu = sys::nvml_device::at(0);
  {
    injected_failure lost("nvmlDeviceGetPowerUsage", 15);  // NVML_ERROR_GPU_IS_LOST
    try {
      (void)gpu.power();
      FAIL("power() did not throw");
    } catch (const cudrv::nvml_error& e) {
      CHECK(e.source() == cudrv::error_source::nvml);
      CHECK(e.nvml_result() == 15);
      CHECK(e.name() == "NVML_ERROR_GPU_IS_LOST");
      CHECK(e.api() == "nvmlDeviceGetPowerUsage");
      CHECK(e.description() == "GPU is lost (fake)");
      CHECK(contains(e.what(), "GPU-c1010203-0405-0607-0809-0a0b0c0d0e0f"));  // which device
    }
  }
  CHECK(near(gpu.power().draw_w, 123.456));  // the failure is not sticky in cudrv
  {
    injected_failure uninitialized("nvmlDeviceGetCount_v2", 1);
    CHECK_THROWS_AS(sys::device_count(), cudrv::nvml_error);
  }
  try {
    (void)sys::nvml_device::at(7);
    FAIL("at(7) did not throw");
  } catch (const cudrv::nvml_error& e) {
    CHECK(e.name() == "NVML_ERROR_INVALID_ARGUMENT");
    CHECK(contains(e.context(), "NVML sees 2 GPUs"));
  }
}

TEST_CASE("system: devices are found by UUID and PCI bus id", "[system]") {
  const sys::nvml_device gpu = sys::nvml_device::by_uuid("GPU-c1010203-0405-0607-0809-0a0b0c0d0e0f");
  CHECK(gpu == sys::nvml_device::at(0));
  CHECK(sys::nvml_device::by_pci_bus_id("00000000:9A:00.0") == sys::nvml_device::at(1));
  CHECK(sys::nvml_device::by_pci_bus_id("0000:1b:00.0") == sys::nvml_device::at(0));
  try {
    (void)sys::nvml_device::by_uuid("GPU-00000000-0000-0000-0000-000000000000");
    FAIL("an unknown UUID was found");
  } catch (const cudrv::nvml_error& e) {
    CHECK(e.nvml_result() == 6);  // NVML_ERROR_NOT_FOUND
    CHECK(e.api() == "nvmlDeviceGetHandleByUUID");
  }
  CHECK_THROWS_AS(sys::nvml_device::by_pci_bus_id("0000:77:00.0"), cudrv::nvml_error);
}

TEST_CASE("system: CUDA devices and NVML devices are matched by UUID, in either direction", "[system]") {
  REQUIRE(cudrv::driver::available());  // the stand-in driver: two devices
  // NVML's order is not CUDA's: NVML index 0 is CUDA device 1.
  CHECK(sys::nvml_device::of(cudrv::device(1)) == sys::nvml_device::at(0));
  CHECK(sys::nvml_device::of(cudrv::device(0)) == sys::nvml_device::at(1));
  CHECK(sys::nvml_device::at(0).cuda_device() == 1);
  CHECK(sys::nvml_device::at(1).cuda_device() == 0);
  for (cudrv::device dev : cudrv::devices()) {
    CHECK(sys::nvml_device::of(dev).cuda_device() == dev.ordinal());
  }
  try {
    (void)sys::nvml_device::of(fake_uuid(0xee));
    FAIL("an unknown CUDA UUID was matched");
  } catch (const cudrv::nvml_error& e) {
    CHECK(e.nvml_result() == 6);
    CHECK(contains(e.context(), "GPU-ee010203-0405-0607-0809-0a0b0c0d0e0f"));
    CHECK(contains(e.context(), "MIG-ee010203-0405-0607-0809-0a0b0c0d0e0f"));
  }
}

TEST_CASE("system: a MIG instance is matched by its CUDA UUID and reports its own memory", "[system]") {
  // CUDA writes the instance's UUID as GPU-d0...; NVML knows it as MIG-d0....
  const sys::nvml_device mig = sys::nvml_device::of(fake_uuid(0xd0));
  CHECK(mig.is_mig_instance());
  CHECK(mig.uuid() == "MIG-d0010203-0405-0607-0809-0a0b0c0d0e0f");
  CHECK(mig.parent() == sys::nvml_device::at(1));
  CHECK_FALSE(mig.index());  // NVML_ERROR_INVALID_ARGUMENT on a MIG handle: empty
  CHECK_FALSE(mig.pci());
  CHECK_FALSE(mig.utilization());
  CHECK_FALSE(mig.mig_mode());
  REQUIRE(mig.memory());
  CHECK(mig.memory()->total_bytes == 6 * gib);  // the instance's, not the GPU's 24 GiB
  CHECK(mig.parent().memory()->total_bytes == 24 * gib);
  CHECK_FALSE(mig.cuda_device());  // the stand-in driver has no device GPU-d0...
}

TEST_CASE("system: the process list follows NVML's two-call size protocol", "[system]") {
  const sys::nvml_device gpu = sys::nvml_device::at(0);
  nvml_hook<void(int, int)>("fake_nvml_grow_processes")(0, 0);  // two compute processes, a stable list
  const long long before = nvml_calls("nvmlDeviceGetComputeRunningProcesses_v3");
  std::vector<sys::process_info> procs = gpu.processes();
  CHECK(nvml_calls("nvmlDeviceGetComputeRunningProcesses_v3") - before == 2);  // the size, then the list
  REQUIRE(procs.size() == 3);
  CHECK(procs[0].pid == 4242);
  CHECK(procs[0].kind == sys::process_kind::compute);
  CHECK(procs[0].used_bytes == gib);
  CHECK_FALSE(procs[0].gpu_instance_id);  // MIG off
  CHECK(procs[1].pid == 4243);
  CHECK_FALSE(procs[1].used_bytes);  // NVML_VALUE_NOT_AVAILABLE
  CHECK(procs[2].pid == 99);
  CHECK(procs[2].kind == sys::process_kind::graphics);
  CHECK(procs[2].used_bytes == 5ULL << 20);
  CHECK(procs[2].gpu_instance_id == 1u);
  CHECK(procs[2].compute_instance_id == 0u);
}

TEST_CASE("system: a process list that grows between NVML's calls is asked for again", "[system]") {
  const sys::nvml_device gpu = sys::nvml_device::at(0);
  nvml_hook<void(int, int)>("fake_nvml_grow_processes")(10, 2);  // 2 -> 12 -> 22, then stable
  const long long start = nvml_calls("nvmlDeviceGetComputeRunningProcesses_v3");
  const std::vector<sys::process_info> procs = gpu.processes();
  CHECK(nvml_calls("nvmlDeviceGetComputeRunningProcesses_v3") - start == 3);
  REQUIRE(procs.size() == 22 + 1);
  CHECK(procs[21].pid == 4242 + 21);
  CHECK(procs[22].kind == sys::process_kind::graphics);
}

TEST_CASE("system: a process list that keeps growing gives a typed error after a bounded number of tries", "[system]") {
  const sys::nvml_device gpu = sys::nvml_device::at(0);
  nvml_hook<void(int, int)>("fake_nvml_grow_processes")(-1, 1000);  // doubles at every call
  const long long start = nvml_calls("nvmlDeviceGetComputeRunningProcesses_v3");
  try {
    (void)gpu.processes();
    FAIL("processes() did not give up");
  } catch (const cudrv::nvml_error& e) {
    CHECK(e.name() == "NVML_ERROR_INSUFFICIENT_SIZE");
    CHECK(e.api() == "nvmlDeviceGetComputeRunningProcesses_v3");
    CHECK(contains(e.context(), "kept changing"));
  }
  CHECK(nvml_calls("nvmlDeviceGetComputeRunningProcesses_v3") - start == 6);
  nvml_hook<void(int, int)>("fake_nvml_grow_processes")(0, 0);
}

TEST_CASE("system: NVML is initialised once, lazily, from many threads, and coexists with the application's own",
          "[system]") {
  // Each case runs in its own process: these threads are the first to use NVML. Then cudrv's exit-time
  // nvmlShutdown is registered after this check, which therefore runs after it and sees NVML balanced.
  if (dlopen(std::getenv("CUDRV_LIBNVML"), RTLD_NOW | RTLD_NOLOAD) == nullptr) {
    std::atexit([] {
      void* lib = dlopen(std::getenv("CUDRV_LIBNVML"), RTLD_NOW | RTLD_NOLOAD);
      auto* count = lib != nullptr ? reinterpret_cast<int (*)()>(dlsym(lib, "fake_nvml_init_count")) : nullptr;
      if (count == nullptr || count() != 0) {
        std::fputs("cudrv did not shut NVML down at exit\n", stderr);
        std::_Exit(3);
      }
    });
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&failures] {
      try {
        if (!sys::available() || sys::devices().size() != 2 || sys::nvml_device::at(0).name().empty()) {
          ++failures;
        }
      } catch (...) {
        ++failures;
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  CHECK(failures == 0);
  CHECK(nvml_calls("nvmlInit_v2") == 1);
  CHECK(nvml_hook<int()>("fake_nvml_init_count")() == 1);
  // The application initialises and shuts NVML down itself: NVML counts, cudrv's reference stays.
  auto* init = nvml_hook<int()>("nvmlInit_v2");
  auto* shutdown = nvml_hook<int()>("nvmlShutdown");
  REQUIRE(init() == 0);
  REQUIRE(shutdown() == 0);
  CHECK(nvml_hook<int()>("fake_nvml_init_count")() == 1);
  CHECK(sys::device_count() == 2);
  CHECK(nvml_calls("nvmlShutdown") == 1);  // cudrv's own runs at exit
}

TEST_CASE("system: without NVML every call is a library_unavailable_error and available() says why", "[.][no-nvml]") {
  CHECK_FALSE(sys::available());
  CHECK(contains(sys::unavailable_reason(), "/nonexistent/libnvidia-ml.so.1"));
  CHECK(sys::library_path() == "/nonexistent/libnvidia-ml.so.1");
  try {
    (void)sys::driver_version();
    FAIL("driver_version() did not throw");
  } catch (const cudrv::library_unavailable_error& e) {
    CHECK(e.source() == cudrv::error_source::nvml);
    CHECK(e.api() == "dlopen");
    CHECK(e.name() == "NVML_ERROR_LIBRARY_NOT_FOUND");
    CHECK(contains(e.what(), "CUDRV_LIBNVML"));
  }
  CHECK_THROWS_AS(sys::device_count(), cudrv::library_unavailable_error);
  CHECK_THROWS_AS(sys::devices(), cudrv::library_unavailable_error);
  CHECK_THROWS_AS(sys::nvml_device::at(0), cudrv::library_unavailable_error);
  CHECK_THROWS_AS(sys::nvml_device::of(fake_uuid(0xc0)), cudrv::library_unavailable_error);
  CHECK_FALSE(sys::available());  // asked again: the same answer, no crash
}

TEST_CASE("system: an NVML whose nvmlInit_v2 fails gives its code and text", "[.][nvml-init-fails]") {
  CHECK_FALSE(sys::available());
  CHECK(contains(sys::unavailable_reason(), "nvmlInit_v2 failed: Driver Not Loaded (fake) (9)"));
  try {
    (void)sys::device_count();
    FAIL("device_count() did not throw");
  } catch (const cudrv::nvml_error& e) {
    CHECK(e.nvml_result() == 9);
    CHECK(e.name() == "NVML_ERROR_DRIVER_NOT_LOADED");
    CHECK(e.api() == "nvmlInit_v2");
  }
}

TEST_CASE("system: a library that is not NVML is refused, naming what it lacks", "[.][nvml-not-nvml]") {
  CHECK_FALSE(sys::available());
  CHECK(contains(sys::unavailable_reason(), "lacks nvmlInit_v2"));
  try {
    (void)sys::nvml_version();
    FAIL("nvml_version() did not throw");
  } catch (const cudrv::library_unavailable_error& e) {
    CHECK(e.source() == cudrv::error_source::nvml);
    CHECK(e.api() == "dlsym");
  }
}

// --- issue 36: topology --------------------------------------------------------------------------------
// The stand-in NVML's default topology (tests/fake_nvml/fake_nvml.cpp, FAKE_NVML_TOPOLOGY unset): index 0
// has CPUs 0-7 and NUMA node 0, its NVLink 0 reaches a GPU; index 1 supports none of it. The configured
// topologies (more GPUs, NVLink bonds, NVSwitches) are exercised through cudrv-query (tests/query).

TEST_CASE("system: topology readings: CPU and NUMA affinity, GPU NUMA node, NVLink far end, levels",
          "[system][topology]") {
  const sys::nvml_device full = sys::nvml_device::at(0);
  const sys::nvml_device bare = sys::nvml_device::at(1);
  const std::optional<std::vector<unsigned int>> cpus = full.cpu_affinity();
  REQUIRE(cpus);
  CHECK(*cpus == std::vector<unsigned int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(nvml_calls("nvmlDeviceGetCpuAffinityWithinScope") >= 1);  // the node-scoped query where NVML has it
  REQUIRE(full.memory_affinity());
  CHECK(*full.memory_affinity() == std::vector<unsigned int>{0});
  CHECK_FALSE(full.numa_node_id());  // the GPU memory is no NUMA node here: empty, not an error
  CHECK(full.nvlink_remote_type(0) == sys::nvlink_remote_device::gpu);
  CHECK_FALSE(full.nvlink_remote_type(1));  // a link that is down
  CHECK_FALSE(full.nvlink_remote_type(17));
  // NOT_SUPPORTED on index 1, INVALID_ARGUMENT on the MIG instance: empty.
  CHECK_FALSE(bare.cpu_affinity());
  CHECK_FALSE(bare.memory_affinity());
  CHECK_FALSE(full.topology_common_ancestor(bare));
  const sys::nvml_device mig = sys::nvml_device::of(fake_uuid(0xd0));
  REQUIRE(mig.is_mig_instance());
  CHECK_FALSE(mig.cpu_affinity());
  CHECK_FALSE(mig.topology_common_ancestor(full));
  // Levels by nvidia-smi's names.
  CHECK(sys::to_string(sys::topology_level::internal) == "PIX");
  CHECK(sys::to_string(sys::topology_level::single) == "PIX");
  CHECK(sys::to_string(sys::topology_level::multiple) == "PXB");
  CHECK(sys::to_string(sys::topology_level::host_bridge) == "PHB");
  CHECK(sys::to_string(sys::topology_level::node) == "NODE");
  CHECK(sys::to_string(sys::topology_level::system) == "SYS");
  CHECK(sys::to_string(static_cast<sys::topology_level>(60)).empty());
}

TEST_CASE("system: a topology query NVML fails for real is an nvml_error naming the function", "[system][topology]") {
  const sys::nvml_device gpu = sys::nvml_device::at(0);
  {
    injected_failure lost("nvmlDeviceGetCpuAffinityWithinScope", 15);  // NVML_ERROR_GPU_IS_LOST
    try {
      (void)gpu.cpu_affinity();
      FAIL("cpu_affinity() did not throw");
    } catch (const cudrv::nvml_error& e) {
      CHECK(e.api() == "nvmlDeviceGetCpuAffinityWithinScope");
      CHECK(e.name() == "NVML_ERROR_GPU_IS_LOST");
    }
  }
  {
    injected_failure denied("nvmlDeviceGetTopologyCommonAncestor", 4);  // NVML_ERROR_NO_PERMISSION
    CHECK_THROWS_AS(gpu.topology_common_ancestor(sys::nvml_device::at(1)), cudrv::nvml_error);
  }
  REQUIRE(gpu.cpu_affinity());  // not sticky
}

// --- issue 36: watch --------------------------------------------------------------------------------

TEST_CASE("system: NVLink data counters over every link give a rate between two readings", "[system]") {
  const sys::nvml_device gpu = sys::nvml_device::at(0);
  const std::optional<sys::nvlink_traffic> a = gpu.nvlink_traffic();
  const std::optional<sys::nvlink_traffic> b = gpu.nvlink_traffic();
  REQUIRE(a);
  REQUIRE(b);
  // The stand-in advances its clock 0.5 s and its counters 4096 KiB (sent) and 1024 KiB (received) per
  // reading: KiB become bytes, and the timestamps are NVML's.
  REQUIRE(b->timestamp_us - a->timestamp_us == 500'000);
  CHECK(b->tx_bytes - a->tx_bytes == 4096ULL * 1024);
  CHECK(b->rx_bytes - a->rx_bytes == 1024ULL * 1024);
  CHECK(a->tx_bytes % 1024 == 0);
  const double tx_per_s = static_cast<double>(b->tx_bytes - a->tx_bytes) * 1e6 / 500'000.0;
  CHECK(tx_per_s == 8.0 * 1024 * 1024);
  // No NVLink counters (NOT_SUPPORTED, or INVALID_ARGUMENT for a MIG instance): empty, not an error.
  CHECK_FALSE(sys::nvml_device::at(1).nvlink_traffic());
  const sys::nvml_device mig = sys::nvml_device::by_uuid("MIG-d0010203-0405-0607-0809-0a0b0c0d0e0f");
  REQUIRE(mig.is_mig_instance());
  CHECK_FALSE(mig.nvlink_traffic());
  // A real failure is an nvml_error naming the function.
  injected_failure lost("nvmlDeviceGetFieldValues", 15);  // NVML_ERROR_GPU_IS_LOST
  try {
    (void)gpu.nvlink_traffic();
    FAIL("no error");
  } catch (const cudrv::nvml_error& e) {
    CHECK(e.api() == "nvmlDeviceGetFieldValues");
    CHECK(e.nvml_result() == 15);
  }
}

TEST_CASE("system: memory with the driver's reservation apart, as nvidia-smi reports it", "[system]") {
  const std::optional<sys::memory_breakdown> m = sys::nvml_device::at(0).memory_breakdown();
  REQUIRE(m);
  CHECK(m->total_bytes == 80 * gib);
  CHECK(m->reserved_bytes == 512ULL << 20);
  CHECK(m->used_bytes == 10 * gib - (512ULL << 20));  // memory() counts the reservation as used
  CHECK(m->free_bytes == 70 * gib);
  CHECK(sys::nvml_device::at(0).memory()->used_bytes == m->used_bytes + m->reserved_bytes);
  CHECK_FALSE(sys::nvml_device::at(1).memory_breakdown());  // NOT_SUPPORTED: empty, memory() still answers
  CHECK(sys::nvml_device::at(1).memory());
}

// issue 36: watch (review fixes): counters NVML cannot give, counters too large, and the per-link sum.
namespace {
/// The stand-in NVML's every-link counters (fake_nvml_watch_counters): set(mode, tx, rx) while it lives,
/// back to the stand-in's normal answers when it goes.
struct watch_counters_override {
  void (*set)(int, unsigned long long, unsigned long long) =
      nvml_hook<void(int, unsigned long long, unsigned long long)>("fake_nvml_watch_counters");
  watch_counters_override() = default;
  watch_counters_override(const watch_counters_override&) = delete;
  watch_counters_override& operator=(const watch_counters_override&) = delete;
  ~watch_counters_override() { set(0, 0, 0); }
  void operator()(int mode, unsigned long long tx, unsigned long long rx) const { set(mode, tx, rx); }
};
}  // namespace

TEST_CASE("system: NVLink counters NVML gives as not available, or too large in bytes, are no reading", "[system]") {
  const sys::nvml_device gpu = sys::nvml_device::at(0);
  const watch_counters_override counters;
  constexpr unsigned long long not_available = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE_ulonglong
  // Such an answer for every link at once is no answer: cudrv goes on to the links' own counters (the
  // stand-in's link 0: 1000 KiB sent, 2000 KiB received), never a value of all ones or a wrapped one.
  auto is_link_sum = [](const std::optional<sys::nvlink_traffic>& t) {
    return t && t->source == sys::nvlink_traffic::origin::per_link_sum && t->links == 1U &&
           t->tx_bytes == 1000ULL * 1024 && t->rx_bytes == 2000ULL * 1024;
  };
  counters(1, not_available, 5);
  CHECK(is_link_sum(gpu.nvlink_traffic()));
  counters(1, 5, not_available);
  CHECK(is_link_sum(gpu.nvlink_traffic()));
  counters(1, not_available / 1024 + 1, 5);  // KiB: the bytes would wrap past 64 bits
  CHECK(is_link_sum(gpu.nvlink_traffic()));
  counters(1, not_available / 1024, 7);  // the largest count of KiB that fits
  const std::optional<sys::nvlink_traffic> big = gpu.nvlink_traffic();
  REQUIRE(big);
  CHECK(big->tx_bytes == (not_available / 1024) * 1024);
  CHECK(big->rx_bytes == 7 * 1024);
  CHECK(big->source == sys::nvlink_traffic::origin::throughput_all_links);
  CHECK(big->links == 0);
}

TEST_CASE("system: without the every-link counters, the active links' own counters are summed and named", "[system]") {
  const sys::nvml_device gpu = sys::nvml_device::at(0);
  const watch_counters_override counters;
  const std::optional<sys::nvlink_traffic> all = gpu.nvlink_traffic();
  REQUIRE(all);
  CHECK(all->source == sys::nvlink_traffic::origin::throughput_all_links);
  counters(2, 0, 0);  // every link at once: NOT_SUPPORTED
  const long long states = nvml_calls("nvmlDeviceGetNvLinkState");
  const std::optional<sys::nvlink_traffic> sum = gpu.nvlink_traffic();
  REQUIRE(sum);
  // The stand-in's link 0 is up (1000 KiB sent, 2000 KiB received), link 1 down, the rest absent.
  CHECK(sum->source == sys::nvlink_traffic::origin::per_link_sum);
  CHECK(sum->links == 1U);
  CHECK(sum->tx_bytes == 1000ULL * 1024);
  CHECK(sum->rx_bytes == 2000ULL * 1024);
  CHECK(nvml_calls("nvmlDeviceGetNvLinkState") - states == 18);  // NVML_NVLINK_MAX_LINKS
}
