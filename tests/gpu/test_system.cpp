// GPU tier: <cudrv/system.hpp> against nvidia-smi on the same machine. Each GPU's fields are read with
// `nvidia-smi --query-gpu=... --format=csv,noheader,nounits -i <index>` (bounded by `timeout`) and
// compared with the library's: exactly for the static ones, within bounds for those that move. Skipped,
// visibly, where nvidia-smi is absent.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <cudrv/system.hpp>

#include "support/test_support.hpp"

namespace sys = cudrv::system;

namespace {

// The output of a shell command, or nothing when it fails; nvidia-smi gets 60 s at most.
std::optional<std::string> run(const std::string& command) {
  FILE* p = popen(("timeout 60 " + command + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) {
    return std::nullopt;
  }
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof(buf), p)) {
    out.append(buf, n);
  }
  const int status = pclose(p);
  if (status != 0) {
    return std::nullopt;
  }
  return out;
}

bool have_nvidia_smi() { return std::system("command -v nvidia-smi >/dev/null 2>&1") == 0 && run("nvidia-smi -L"); }

std::string trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \n"));
  s.erase(s.find_last_not_of(" \n") + 1);
  return s;
}

// The comma-separated fields of nvidia-smi's one line for GPU @p index; the last field (the name) may
// hold commas and takes the rest of the line.
std::vector<std::string> smi_fields(unsigned int index, const std::string& fields, std::size_t count) {
  const std::optional<std::string> out =
      run("nvidia-smi --query-gpu=" + fields + " --format=csv,noheader,nounits -i " + std::to_string(index));
  REQUIRE(out);
  const std::string line = trim(out->substr(0, out->find('\n')));
  std::vector<std::string> f;
  std::size_t start = 0;
  while (f.size() + 1 < count) {
    const std::size_t comma = line.find(',', start);
    REQUIRE(comma != std::string::npos);
    f.push_back(trim(line.substr(start, comma - start)));
    start = comma + 1;
  }
  f.push_back(trim(line.substr(start)));
  return f;
}

bool reported(const std::string& field) { return !field.empty() && field[0] != '[' && field != "N/A"; }

std::optional<bool> enabled(const std::string& field) {
  if (field == "Enabled") return true;
  if (field == "Disabled") return false;
  return std::nullopt;
}

}  // namespace

TEST_CASE("system: versions and device count agree with nvidia-smi and the CUDA driver", "[gpu][system]") {
  CUDRV_REQUIRE_GPU();
  if (!have_nvidia_smi()) {
    WARN("SKIPPED: nvidia-smi is not available here");
    return;
  }
  REQUIRE(sys::available());  // nvidia-smi works, so NVML does
  const std::optional<std::string> version = run("nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0");
  REQUIRE(version);
  CHECK(sys::driver_version() == trim(version->substr(0, version->find('\n'))));
  CHECK(sys::cuda_driver_version() == cudrv::driver::version());
  CHECK(sys::nvml_version().find(sys::driver_version()) != std::string::npos);  // "13.580.159.04"
  const std::optional<std::string> indexes = run("nvidia-smi --query-gpu=index --format=csv,noheader");
  REQUIRE(indexes);
  unsigned int rows = 0;
  for (char c : *indexes) rows += c == '\n' ? 1 : 0;
  CHECK(sys::device_count() == rows);
  CHECK(sys::devices().size() == rows);
}

TEST_CASE("system: each GPU's readings agree with nvidia-smi --query-gpu", "[gpu][system]") {
  CUDRV_REQUIRE_GPU();
  if (!have_nvidia_smi()) {
    WARN("SKIPPED: nvidia-smi is not available here");
    return;
  }
  const std::string fields =
      "uuid,serial,pci.bus_id,memory.total,power.limit,enforced.power.limit,clocks.max.graphics,clocks.max.sm,"
      "clocks.max.memory,ecc.mode.current,mig.mode.current,compute_mode,persistence_mode,pcie.link.gen.max,"
      "pcie.link.width.max,temperature.gpu,power.draw,utilization.gpu,utilization.memory,name";
  for (const sys::nvml_device& gpu : sys::devices()) {
    REQUIRE(gpu.index());
    const std::vector<std::string> f = smi_fields(*gpu.index(), fields, 20);
    INFO("NVML index " << *gpu.index() << ": " << f[19]);
    // Static fields: exactly.
    CHECK(gpu.uuid() == f[0]);
    if (reported(f[1])) CHECK(gpu.serial() == std::optional<std::string>(f[1]));
    REQUIRE(gpu.pci());
    CHECK(gpu.pci()->bus_id == f[2]);
    REQUIRE(gpu.memory());
    CHECK(gpu.memory()->total_bytes / (1024 * 1024) == std::stoull(f[3]));
    const sys::power_readings power = gpu.power();
    if (reported(f[4])) CHECK(std::abs(power.limit_w.value_or(-1) - std::stod(f[4])) <= 0.01);
    if (reported(f[5])) CHECK(std::abs(power.enforced_limit_w.value_or(-1) - std::stod(f[5])) <= 0.01);
    const sys::clock_readings clocks = gpu.clocks();
    if (reported(f[6])) CHECK(clocks.max.graphics_mhz == std::optional<unsigned int>(std::stoul(f[6])));
    if (reported(f[7])) CHECK(clocks.max.sm_mhz == std::optional<unsigned int>(std::stoul(f[7])));
    if (reported(f[8])) CHECK(clocks.max.memory_mhz == std::optional<unsigned int>(std::stoul(f[8])));
    if (enabled(f[9])) CHECK(gpu.ecc().enabled == enabled(f[9]));
    if (enabled(f[10])) {
      REQUIRE(gpu.mig_mode());
      CHECK(gpu.mig_mode()->current == *enabled(f[10]));
    }
    REQUIRE(gpu.compute_mode());
    CHECK(sys::to_string(*gpu.compute_mode()) == f[11]);
    if (enabled(f[12])) CHECK(gpu.persistence_mode() == enabled(f[12]));
    const sys::pcie_readings pcie = gpu.pcie();
    if (reported(f[13])) CHECK(pcie.max_generation == std::optional<unsigned int>(std::stoul(f[13])));
    if (reported(f[14])) CHECK(pcie.max_width == std::optional<unsigned int>(std::stoul(f[14])));
    CHECK(gpu.name() == f[19]);
    // Moving fields: within bounds (read a moment apart).
    if (reported(f[15])) {
      const sys::temperature_readings t = gpu.temperature();
      REQUIRE(t.gpu_c);
      CHECK(std::abs(static_cast<int>(*t.gpu_c) - std::stoi(f[15])) <= 5);
    }
    if (reported(f[16])) {
      REQUIRE(power.draw_w);
      const double smi = std::stod(f[16]);
      CHECK(std::abs(*power.draw_w - smi) <= std::max(30.0, 0.2 * smi));
    }
    if (const std::optional<sys::utilization_rates> u = gpu.utilization()) {
      CHECK(u->gpu_percent <= 100);
      CHECK(u->memory_percent <= 100);
      if (reported(f[17])) CHECK(std::stoul(f[17]) <= 100);
      if (reported(f[18])) CHECK(std::stoul(f[18]) <= 100);
    }
    // Whatever the GPU reports of the rest, asking does not throw, and a reason's names are known.
    if (const std::optional<sys::clock_event_reasons> why = gpu.clock_events()) {
      for (const std::string& name : why->names()) CHECK(name.rfind("bit_", 0) != 0);
    }
    for (const sys::nvlink_readings& link : gpu.nvlinks()) {
      INFO("NVLink " << link.link);
      if (link.active) CHECK(link.version.value_or(1) >= 1);
    }
    (void)gpu.retired_pages();
    (void)gpu.remapped_rows();
    (void)gpu.bar1_memory();
  }
}

TEST_CASE("system: the NVML device matched to each CUDA device is the one nvidia-smi shows at its PCI bus id",
          "[gpu][system]") {
  CUDRV_REQUIRE_GPU();
  if (!have_nvidia_smi()) {
    WARN("SKIPPED: nvidia-smi is not available here");
    return;
  }
  for (cudrv::device dev : cudrv::devices()) {
    const sys::nvml_device gpu = sys::nvml_device::of(dev);
    INFO("CUDA device " << dev.ordinal() << " " << dev.uuid().to_string());
    CHECK(gpu.cuda_device() == dev.ordinal());
    if (gpu.is_mig_instance()) {
      CHECK(gpu.uuid().substr(4) == dev.uuid().to_string().substr(4));
      continue;
    }
    CHECK(gpu.uuid() == dev.uuid().to_string());
    REQUIRE(gpu.pci());
    const std::optional<std::string> at_bus =
        run("nvidia-smi --query-gpu=uuid --format=csv,noheader -i " + gpu.pci()->bus_id);
    REQUIRE(at_bus);
    CHECK(trim(*at_bus) == dev.uuid().to_string());
    CHECK(sys::nvml_device::by_pci_bus_id(dev.pci_bus_id()) == gpu);  // CUDA's short form finds it too
  }
}

TEST_CASE("system: the process list holds this process once it has device memory", "[gpu][system]") {
  CUDRV_REQUIRE_GPU();
  if (!sys::available()) {
    WARN("SKIPPED: NVML is not available here: " << sys::unavailable_reason());
    return;
  }
  const cudrv::device dev(0);
  cudrv::device_buffer<std::byte> held(dev, std::size_t{64} << 20);
  const std::vector<sys::process_info> procs = sys::nvml_device::of(dev).processes();
  const auto me = static_cast<unsigned int>(getpid());
  const auto mine = std::find_if(procs.begin(), procs.end(), [&](const sys::process_info& p) { return p.pid == me; });
  if (mine == procs.end()) {
    WARN("NVML lists " << procs.size() << " process(es) on device 0, not this one (pid " << me
                       << "): a container whose pids NVML does not report; not a failure");
    return;
  }
  CHECK(mine->kind == sys::process_kind::compute);
  if (mine->used_bytes) CHECK(*mine->used_bytes >= (std::size_t{64} << 20));
}
