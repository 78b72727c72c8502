// cudrv-query on a GPU, run as a process: the JSON of every view against the schema, identity
// against nvidia-smi and against cudrv read in this process, -d with every selector kind,
// CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER, NVML present and absent, the P2P matrix, and --bench
// against the same measurements made here with raw driver calls.
#include <catch2/catch.hpp>

#include <cudaTypedefs.h>

#include <algorithm>
#include <map>
#include <sstream>

#include <cudrv/driver.hpp>
#include <cudrv/version.hpp>

#include "query.hpp"
#include "query_test_support.hpp"
#include "support/test_support.hpp"

using nlohmann::json;
using query_test::run_query;

namespace {

using cudrv::test::contains;

json query_json(const std::vector<std::string>& args, const std::vector<std::string>& set = {},
                const std::vector<std::string>& unset = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"},
                int expected_exit = 0) {
  std::vector<std::string> all = args;
  all.push_back("--json");
  auto r = run_query(all, set, unset);
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == expected_exit);
  REQUIRE_SCHEMA_VALID(r.out);
  return query_test::parse(r.out);
}

/// j[k0][k1]..., or null when a key is missing (const operator[] must not see a missing key).
json at(const json& j, std::initializer_list<const char*> path) {
  const json* p = &j;
  for (const char* k : path) {
    if (!p->is_object() || !p->contains(k)) return json();
    p = &(*p)[k];
  }
  return *p;
}

std::vector<std::string> uuids_of(const json& doc) {
  std::vector<std::string> out;
  for (const json& d : doc["devices"]) out.push_back(d["uuid"].get<std::string>());
  return out;
}

/// One nvidia-smi row; a field nvidia-smi reports as [N/A] or [Not Supported] is empty.
struct smi_gpu {
  int index = 0;
  std::string uuid, pci_bus_id, name;
  unsigned long long memory_total_mib = 0;
  std::optional<double> max_sm_mhz, max_memory_mhz, pcie_max_generation, pcie_max_width, power_limit_w;
  std::optional<bool> ecc, mig, persistence;
};

std::optional<std::vector<smi_gpu>> nvidia_smi() {
  // The name last: it is the one field that may hold a comma.
  auto r = query_test::run_process({"nvidia-smi",
                                    "--query-gpu=index,uuid,pci.bus_id,memory.total,clocks.max.sm,clocks.max.memory,"
                                    "pcie.link.gen.max,pcie.link.width.max,enforced.power.limit,ecc.mode.current,"
                                    "mig.mode.current,persistence_mode,name",
                                    "--format=csv,noheader,nounits"});
  if (r.exit_code != 0) {
    return std::nullopt;
  }
  auto number = [](const std::string& f) -> std::optional<double> {
    if (f.empty() || f[0] == '[') return std::nullopt;
    return std::stod(f);
  };
  auto mode = [](const std::string& f) -> std::optional<bool> {
    if (f == "Enabled") return true;
    if (f == "Disabled") return false;
    return std::nullopt;
  };
  std::vector<smi_gpu> out;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> f;
    std::size_t start = 0;
    while (f.size() < 12) {
      std::size_t comma = line.find(',', start);
      if (comma == std::string::npos) break;
      f.push_back(line.substr(start, comma - start));
      start = comma + 1;
    }
    f.push_back(line.substr(start));
    for (std::string& field : f) {
      field.erase(0, field.find_first_not_of(' '));
      field.erase(field.find_last_not_of(' ') + 1);
    }
    if (f.size() != 13) continue;
    smi_gpu g;
    g.index = std::stoi(f[0]);
    g.uuid = f[1];
    g.pci_bus_id = f[2];
    g.memory_total_mib = std::stoull(f[3]);
    g.max_sm_mhz = number(f[4]);
    g.max_memory_mhz = number(f[5]);
    g.pcie_max_generation = number(f[6]);
    g.pcie_max_width = number(f[7]);
    g.power_limit_w = number(f[8]);
    g.ecc = mode(f[9]);
    g.mig = mode(f[10]);
    g.persistence = mode(f[11]);
    g.name = f[12];
    out.push_back(g);
  }
  return out;
}

bool same_pci(const std::string& a, const std::string& b) {
  unsigned int a0, a1, a2, a3, b0, b1, b2, b3;
  return cudrv_query::parse_pci_bus_id(a, a0, a1, a2, a3) && cudrv_query::parse_pci_bus_id(b, b0, b1, b2, b3) &&
         a0 == b0 && a1 == b1 && a2 == b2 && a3 == b3;
}

// --- the raw-driver reference of --bench -------------------------------------------------------

constexpr const char* empty_ptx = R"(
.version 6.0
.target sm_50
.address_size 64
.visible .entry raw_empty() { ret; }
)";

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// The measurements of cudrv_query::device_bench made with raw driver calls (cuMemcpyHtoDAsync,
/// cuMemcpyDtoHAsync, cuMemcpyDtoDAsync, cuLaunchKernel, cuMemcpyPeerAsync, cuEventRecord,
/// cuEventElapsedTime, cuStreamSynchronize), same sizes, counts and method. Device memory, stream
/// and events are its own; the host buffers are the device_bench's: pageable copies depend on the
/// pages (huge pages or not, where they sit), so both sides copy the same ones.
class raw_device_bench {
 public:
  raw_device_bench(cudrv_query::device_bench& tool, const cudrv_query::bench_options& o)
      : o_(o),
        dev_(tool.ordinal()),
        s_(dev_),
        start_(dev_, cudrv::event_flags::timing),
        stop_(dev_, cudrv::event_flags::timing),
        a_(dev_, o.size),
        b_(dev_, o.size),
        pinned_(tool.pinned_data()),
        pageable_(tool.pageable_data()),
        lib_(cudrv::object_code(cudrv::code_kind::ptx, empty_ptx, "raw_empty.ptx")),
        f_(lib_.get_kernel("raw_empty").native_function()) {
    hs_ = s_.native_handle();
  }

  double h2d_pinned_gbps() {
    return gbps(timed(o_.iterations, [&] { check(htod(a_.data(), pinned_, o_.size, hs_)); }));
  }
  double d2h_pinned_gbps() {
    return gbps(timed(o_.iterations, [&] { check(dtoh(pinned_, a_.data(), o_.size, hs_)); }));
  }
  double h2d_pageable_gbps() {
    return gbps(timed(o_.iterations, [&] { check(htod(a_.data(), pageable_, o_.size, hs_)); }));
  }
  double d2h_pageable_gbps() {
    return gbps(timed(o_.iterations, [&] { check(dtoh(pageable_, a_.data(), o_.size, hs_)); }));
  }
  double d2d_copy_gbps() {
    return gbps(timed(o_.iterations, [&] { check(dtod(b_.data(), a_.data(), o_.size, hs_)); }));
  }
  double launch_us() {
    return 1e6 * timed(o_.iterations * 100, [&] { launch_one(); });
  }
  double launch_sync_us() {
    std::vector<double> trips;
    launch_one();
    check(st_sync(hs_));
    for (int t = 0; t < cudrv_query::round_trips_for(o_); ++t) {
      auto t0 = std::chrono::steady_clock::now();
      launch_one();
      check(st_sync(hs_));
      trips.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    return median(trips);
  }
  double p2p_gbps(raw_device_bench& dst) {
    if (dev_.can_access_peer(dst.dev_) && dst.dev_.can_access_peer(dev_)) {
      dev_.enable_peer_access(dst.dev_);
      dst.dev_.enable_peer_access(dev_);
    }
    CUcontext cs = dev_.primary_context().native_handle(), cd = dst.dev_.primary_context().native_handle();
    return gbps(timed(o_.iterations, [&] { check(peer(dst.a_.data(), cd, a_.data(), cs, o_.size, hs_)); }));
  }

 private:
  static void check(CUresult r) {
    if (r != CUDA_SUCCESS) throw cudrv::error(r, "raw driver call");
  }
  template <class F>
  static F entry(const char* name, int version) {
    return reinterpret_cast<F>(cudrv::driver::get_entry_point(name, version));
  }
  void launch_one() { check(launch(f_, 1, 1, 1, 1, 1, 1, 0, hs_, nullptr, nullptr)); }
  double gbps(double seconds) const { return static_cast<double>(o_.size) / seconds / 1e9; }
  template <class Op>
  double timed(int ops, Op&& op) {
    op();
    check(st_sync(hs_));
    std::vector<double> per;
    for (int t = 0; t < o_.trials; ++t) {
      check(record(start_.native_handle(), hs_));
      for (int i = 0; i < ops; ++i) op();
      check(record(stop_.native_handle(), hs_));
      check(ev_sync(stop_.native_handle()));
      float ms = 0;
      check(elapsed(&ms, start_.native_handle(), stop_.native_handle()));
      per.push_back(ms * 1e-3 / ops);
    }
    return median(per);
  }

  PFN_cuMemcpyHtoDAsync_v3020 htod = entry<PFN_cuMemcpyHtoDAsync_v3020>("cuMemcpyHtoDAsync", 3020);
  PFN_cuMemcpyDtoHAsync_v3020 dtoh = entry<PFN_cuMemcpyDtoHAsync_v3020>("cuMemcpyDtoHAsync", 3020);
  PFN_cuMemcpyDtoDAsync_v3020 dtod = entry<PFN_cuMemcpyDtoDAsync_v3020>("cuMemcpyDtoDAsync", 3020);
  PFN_cuMemcpyPeerAsync_v4000 peer = entry<PFN_cuMemcpyPeerAsync_v4000>("cuMemcpyPeerAsync", 4000);
  PFN_cuLaunchKernel_v4000 launch = entry<PFN_cuLaunchKernel_v4000>("cuLaunchKernel", 4000);
  PFN_cuEventRecord_v2000 record = entry<PFN_cuEventRecord_v2000>("cuEventRecord", 2000);
  PFN_cuEventSynchronize_v2000 ev_sync = entry<PFN_cuEventSynchronize_v2000>("cuEventSynchronize", 2000);
  PFN_cuEventElapsedTime_v2000 elapsed = entry<PFN_cuEventElapsedTime_v2000>("cuEventElapsedTime", 2000);
  PFN_cuStreamSynchronize_v2000 st_sync = entry<PFN_cuStreamSynchronize_v2000>("cuStreamSynchronize", 2000);

  cudrv_query::bench_options o_;
  cudrv::device dev_;
  cudrv::stream s_;
  cudrv::event start_, stop_;
  cudrv::device_buffer<std::byte> a_, b_;
  std::byte* pinned_;
  std::byte* pageable_;
  cudrv::library lib_;
  CUfunction f_;
  CUstream hs_ = nullptr;
};

}  // namespace

TEST_CASE("the JSON of every view validates and matches cudrv", "[query][gpu]") {
  CUDRV_REQUIRE_GPU();
  const int count = cudrv::device_count();
  for (std::vector<std::string> args :
       {std::vector<std::string>{},
        {"--details"},
        {"--p2p"},
        {"--bench", "--bench-size", "4M", "--bench-iterations", "2", "--bench-trials", "2", "--no-progress"}}) {
    INFO((args.empty() ? "summary" : args[0]));
    json doc = query_json(args);
    CHECK(doc["status"] == "ok");
    CHECK(doc["driver"]["cuda_version"] == cudrv::driver::version());
    REQUIRE(doc["device_count"] == count);
    REQUIRE(doc["devices"].size() == static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
      cudrv::device dev(i);
      const json& d = doc["devices"][i];
      CHECK(d["ordinal"] == i);
      CHECK(d["name"] == dev.name());
      CHECK(d["uuid"] == dev.uuid().to_string());
      CHECK(d["pci_bus_id"] == dev.pci_bus_id());
      CHECK(d["compute_capability"]["major"] == dev.compute_capability().major);
      CHECK(d["compute_capability"]["minor"] == dev.compute_capability().minor);
      CHECK(d["arch"] == dev.arch());
      CHECK(d["multiprocessors"] == dev.attribute(cudrv::device_attributes::multiprocessor_count));
      CHECK(d["memory"]["total_bytes"] == dev.total_memory());
      CHECK(d["clocks_khz"]["sm"] == dev.attribute(cudrv::device_attributes::clock_rate_khz));
    }
  }
}

TEST_CASE("cudrv-query --details reads every attribute the driver has", "[query][gpu]") {
  CUDRV_REQUIRE_GPU();
  json doc = query_json({"--details"});
  for (const json& d : doc["devices"]) {
    cudrv::device dev(d["ordinal"].get<int>());
    REQUIRE(d["attributes"].size() == cudrv_query::attribute_table().size());
    int known = 0;
    for (const cudrv_query::attribute_desc& a : cudrv_query::attribute_table()) {
      INFO(a.enum_name);
      const json j = at(d, {"attributes", a.key});
      REQUIRE(j.is_object());
      int value = 0;
      bool driver_knows = true;
      try {
        value = dev.attribute(a.id);
      } catch (const cudrv::error&) {
        driver_knows = false;
      }
      REQUIRE(j["value"].is_null() == !driver_knows);
      if (!driver_knows) continue;
      ++known;
      if (a.kind == cudrv_query::attribute_kind::boolean) {
        CHECK(j["value"] == (value != 0));
      } else {
        CHECK(j["value"] == value);
      }
      CHECK(j["group"] == a.group);
    }
    CHECK(known > 100);
  }
  // The text view shows each group and the NVML block when NVML is there.
  auto text = run_query({"--details", "--color", "never"});
  REQUIRE(text.exit_code == 0);
  for (const char* group : cudrv_query::group_names()) CHECK(contains(text.out, std::string("  ") + group + "\n"));
  CHECK(contains(text.out, "Max threads per block"));
  if (doc["nvml"]["available"] == true) CHECK(contains(text.out, "  nvml"));
}

TEST_CASE("cudrv-query agrees with nvidia-smi", "[query][gpu]") {
  CUDRV_REQUIRE_GPU();
  std::optional<std::vector<smi_gpu>> smi = nvidia_smi();
  if (!smi) {
    WARN("SKIPPED: nvidia-smi is not available here");
    return;
  }
  json doc = query_json({"--details"});
  REQUIRE(doc["nvml"]["available"] == true);  // nvidia-smi works, so NVML does
  CHECK(doc["driver"].contains("kernel_driver_version"));
  // The summary asks NVML for the memory figures only (start-up time); --details for everything.
  json summary = query_json({});
  for (const json& d : summary["devices"]) {
    REQUIRE(d.contains("nvml"));
    CHECK(d["nvml"].contains("memory"));
    CHECK(d["memory"].contains("free_bytes"));
    CHECK_FALSE(d["nvml"].contains("temperature_c"));
  }
  for (const json& d : doc["devices"]) {
    INFO(d["uuid"]);
    auto it = std::find_if(smi->begin(), smi->end(), [&](const smi_gpu& g) { return g.uuid == d["uuid"]; });
    REQUIRE(it != smi->end());
    CHECK(d["name"] == it->name);
    CHECK(same_pci(d["pci_bus_id"].get<std::string>(), it->pci_bus_id));
    REQUIRE(d.contains("nvml"));
    const json& n = d["nvml"];
    CHECK(n["index"] == it->index);
    // nvidia-smi's memory.total is NVML's total in MiB; CUDA's total leaves out what the driver reserves.
    CHECK(n["memory"]["total_bytes"].get<unsigned long long>() / (1024 * 1024) == it->memory_total_mib);
    CHECK(d["memory"]["total_bytes"].get<unsigned long long>() <= n["memory"]["total_bytes"].get<unsigned long long>());
    CHECK(d["memory"]["total_bytes"].get<double>() >= 0.95 * n["memory"]["total_bytes"].get<double>());
    CHECK(at(d, {"memory", "free_bytes"}) == at(n, {"memory", "free_bytes"}));
    // Every field nvidia-smi reports, cudrv-query reports with the same value.
    auto same = [&](const std::optional<double>& expected, const json& got, const char* what) {
      INFO(what);
      if (!expected) return;
      REQUIRE_FALSE(got.is_null());
      CHECK(got.get<double>() == Approx(*expected).margin(0.01));
    };
    same(it->max_sm_mhz, at(n, {"max_clocks_mhz", "sm"}), "max SM clock");
    same(it->max_memory_mhz, at(n, {"max_clocks_mhz", "memory"}), "max memory clock");
    same(it->pcie_max_generation, at(n, {"pcie", "max_generation"}), "PCIe max generation");
    same(it->pcie_max_width, at(n, {"pcie", "max_width"}), "PCIe max width");
    same(it->power_limit_w, at(n, {"power", "limit_w"}), "enforced power limit");
    if (it->ecc) CHECK(at(n, {"ecc", "enabled"}) == *it->ecc);
    if (it->mig) CHECK(at(n, {"mig", "enabled"}) == *it->mig);
    if (it->persistence) CHECK(at(n, {"persistence_mode"}) == *it->persistence);
    CHECK(n.contains("temperature_c"));
  }
}

TEST_CASE("cudrv-query --version reports the driver's CUDA version when a driver is present", "[query][gpu]") {
  CUDRV_REQUIRE_GPU();
  auto r = run_query({"--version"});
  REQUIRE(r.exit_code == 0);
  const int v = cudrv::driver::version();
  REQUIRE(v > 0);
  CHECK(
      contains(r.out, "\nCUDA driver: CUDA " + std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10) + "\n"));
  CHECK(contains(r.out, std::string("\ncudrv library: ") + cudrv::version_string() + "\n"));
}

TEST_CASE("cudrv-query without NVML omits the NVML fields and still succeeds", "[query][gpu]") {
  CUDRV_REQUIRE_GPU();
  json doc = query_json({"--details"}, {"CUDRV_LIBNVML=/nonexistent/libnvidia-ml.so.1"});
  CHECK(doc["nvml"]["available"] == false);
  for (const json& d : doc["devices"]) {
    CHECK_FALSE(d.contains("nvml"));
    CHECK_FALSE(d["memory"].contains("free_bytes"));
  }
  auto text = run_query({"--color", "never"}, {"CUDRV_LIBNVML=/nonexistent/libnvidia-ml.so.1"});
  REQUIRE(text.exit_code == 0);
  CHECK(contains(text.out, "not loaded"));
  CHECK(contains(text.out, "n/a"));
}

TEST_CASE("cudrv-query -d selects by ordinal, UUID, UUID prefix and PCI bus id", "[query][gpu]") {
  CUDRV_REQUIRE_GPU();
  const int count = cudrv::device_count();
  for (int i = 0; i < count; ++i) {
    cudrv::device dev(i);
    std::string uuid = dev.uuid().to_string();
    std::string upper = uuid;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::string pci = dev.pci_bus_id();
    unsigned int dom, bus, devno, fn;
    REQUIRE(cudrv_query::parse_pci_bus_id(pci, dom, bus, devno, fn));
    char smi_pci[32];
    std::snprintf(smi_pci, sizeof(smi_pci), "%08X:%02X:%02X.%X", dom, bus, devno, fn);
    for (std::string sel : {std::to_string(i), uuid, uuid.substr(0, 13), upper, pci, std::string(smi_pci)}) {
      INFO("-d " << sel);
      json doc = query_json({"-d", sel});
      REQUIRE(doc["devices"].size() == 1);
      CHECK(doc["devices"][0]["ordinal"] == i);
      CHECK(doc["device_count"] == count);
    }
    json twice = query_json({"-d", std::to_string(i), "--device", uuid});
    CHECK(twice["devices"].size() == 1);
  }
  if (count > 1) {
    json both = query_json({"-d", "1,0"});
    REQUIRE(both["devices"].size() == 2);
    CHECK(both["devices"][0]["ordinal"] == 0);  // ordinal order, whatever the order given
  }
  // An unknown selector: status 1, the valid ones listed on stderr and in the JSON.
  auto r = run_query({"-d", std::to_string(count)}, {}, {"CUDA_VISIBLE_DEVICES"});
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CHECK(query_test::line_count(r.err) == 1);
  CHECK(contains(r.err, "no device matches --device " + std::to_string(count)));
  CHECK(contains(r.err, cudrv::device(0).uuid().to_string()));
  json bad = query_json({"-d", "GPU-ffffffff-0000"}, {}, {"CUDA_VISIBLE_DEVICES"}, 1);
  CHECK(bad["status"] == "usage_error");
  CHECK(bad["error"]["valid_selectors"].size() == static_cast<std::size_t>(count));
}

TEST_CASE("cudrv-query follows CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER", "[query][gpu]") {
  CUDRV_REQUIRE_GPU();
  json all = query_json({});
  std::vector<std::string> uuids = uuids_of(all);
  const std::size_t count = uuids.size();

  // The last device alone, by UUID: it becomes ordinal 0.
  json last = query_json({}, {"CUDA_VISIBLE_DEVICES=" + uuids.back()});
  REQUIRE(last["devices"].size() == 1);
  CHECK(last["devices"][0]["ordinal"] == 0);
  CHECK(last["devices"][0]["uuid"] == uuids.back());
  CHECK(last["environment"]["CUDA_VISIBLE_DEVICES"] == uuids.back());

  // PCI bus order: ordinals sorted by bus id.
  json by_pci = query_json({}, {"CUDA_DEVICE_ORDER=PCI_BUS_ID"});
  std::vector<std::string> ids;
  for (const json& d : by_pci["devices"]) ids.push_back(d["pci_bus_id"].get<std::string>());
  CHECK(std::is_sorted(ids.begin(), ids.end()));
  CHECK(by_pci["environment"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID");

  if (count > 1) {
    // Reversed: the ordinals follow the list, and NVML data still belongs to the right GPU.
    std::string reversed;
    for (std::size_t i = count; i-- > 0;) reversed += std::to_string(i) + (i > 0 ? "," : "");
    json rev = query_json({}, {"CUDA_VISIBLE_DEVICES=" + reversed});
    std::vector<std::string> got = uuids_of(rev);
    std::vector<std::string> expected(uuids.rbegin(), uuids.rend());
    CHECK(got == expected);
    for (const json& d : rev["devices"]) {
      if (d.contains("nvml")) CHECK(d["nvml"]["uuid"] == d["uuid"]);
    }
  } else {
    WARN("one device: the reversed CUDA_VISIBLE_DEVICES order needs two (run on nvidia-h200-x2)");
  }

  // No visible device: status 3 with a valid document.
  json none = query_json({}, {"CUDA_VISIBLE_DEVICES=-1"}, {}, 3);
  CHECK(none["status"] == "no_device");
  CHECK(none["devices"].empty());
  auto text = run_query({}, {"CUDA_VISIBLE_DEVICES=-1"});
  CHECK(text.exit_code == 3);
  CHECK(query_test::line_count(text.err) == 1);
  CHECK(contains(text.err, "sees no device"));
}

TEST_CASE("cudrv-query text output: every device, colour only when asked", "[query][gpu]") {
  CUDRV_REQUIRE_GPU();
  auto plain = run_query({}, {"NO_COLOR=1"});
  REQUIRE(plain.exit_code == 0);
  CHECK(plain.err.empty());
  CHECK_FALSE(contains(plain.out, "\033["));
  for (cudrv::device dev : cudrv::devices()) {
    CHECK(contains(plain.out, dev.name()));
    CHECK(contains(plain.out, dev.uuid().to_string()));
    CHECK(contains(plain.out, dev.pci_bus_id()));
  }
  CHECK(contains(plain.out, "CUDA toolkit"));
  auto forced = run_query({"--color", "always"}, {"NO_COLOR=1"});
  CHECK(contains(forced.out, "\033["));
  auto piped = run_query({}, {}, {"NO_COLOR"});  // stdout is a file: no colour in auto mode
  CHECK_FALSE(contains(piped.out, "\033["));
}

TEST_CASE("cudrv-query --p2p reports the driver's peer matrix and link attributes", "[query][gpu]") {
  CUDRV_REQUIRE_GPU();
  const int count = cudrv::device_count();
  json doc = query_json({"--p2p"});
  REQUIRE(doc["p2p"].size() == static_cast<std::size_t>(count * (count - 1)));
  auto rank = reinterpret_cast<PFN_cuDeviceGetP2PAttribute_v8000>(
      cudrv::driver::get_entry_point("cuDeviceGetP2PAttribute", 8000));
  for (const json& l : doc["p2p"]) {
    cudrv::device a(l["from"].get<int>()), b(l["to"].get<int>());
    INFO(a.ordinal() << " -> " << b.ordinal());
    CHECK(l["can_access"] == a.can_access_peer(b));
    int value = -1;
    REQUIRE(rank(&value, CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, a.native_handle(), b.native_handle()) ==
            CUDA_SUCCESS);
    CHECK(l["performance_rank"] == value);
    REQUIRE(rank(&value, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, a.native_handle(), b.native_handle()) ==
            CUDA_SUCCESS);
    CHECK(l["native_atomic_supported"] == (value != 0));
    REQUIRE(rank(&value, CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED, a.native_handle(), b.native_handle()) ==
            CUDA_SUCCESS);
    CHECK(l["cuda_array_access_supported"] == (value != 0));
  }
  auto text = run_query({"--p2p", "--color", "never"});
  REQUIRE(text.exit_code == 0);
  if (count < 2) {
    CHECK(contains(text.out, "needs two devices"));
    WARN("one device: the P2P matrix needs two (run on nvidia-h200-x2)");
  } else {
    CHECK(contains(text.out, "Peer access"));
    CHECK(contains(text.out, "Native atomics"));
  }
}

TEST_CASE("cudrv-query --bench is within 10% of the raw driver figures", "[query][gpu][bench]") {
  CUDRV_REQUIRE_GPU();
  // The measuring code of --bench (device_bench) against the same measurements made with raw driver
  // calls, in this process, on the same device: each measurement of each side 15 times, the two
  // sides back to back, alternating which goes first; the median of the 15 ratios (the paired
  // ratio, as in benchmarks/) must be within 10% of 1. Pairing cancels the machine's drift, which
  // moves pageable copies by 30% within seconds on a shared host.
  cudrv_query::bench_options options;  // the defaults of --bench: 64 MiB, 10 iterations, 5 trials
  options.progress = false;
  const int count = cudrv::device_count();
  struct metric {
    const char* name;
    double (cudrv_query::device_bench::*tool)();
    double (raw_device_bench::*raw)();
  };
  const metric metrics[] = {
      {"h2d_pinned_gbps", &cudrv_query::device_bench::h2d_pinned_gbps, &raw_device_bench::h2d_pinned_gbps},
      {"d2h_pinned_gbps", &cudrv_query::device_bench::d2h_pinned_gbps, &raw_device_bench::d2h_pinned_gbps},
      {"h2d_pageable_gbps", &cudrv_query::device_bench::h2d_pageable_gbps, &raw_device_bench::h2d_pageable_gbps},
      {"d2h_pageable_gbps", &cudrv_query::device_bench::d2h_pageable_gbps, &raw_device_bench::d2h_pageable_gbps},
      {"d2d_copy_gbps", &cudrv_query::device_bench::d2d_copy_gbps, &raw_device_bench::d2d_copy_gbps},
      {"launch_us", &cudrv_query::device_bench::launch_us, &raw_device_bench::launch_us},
      {"launch_sync_us", &cudrv_query::device_bench::launch_sync_us, &raw_device_bench::launch_sync_us},
  };
  std::vector<cudrv_query::device_bench> tools;
  std::vector<std::unique_ptr<raw_device_bench>> raws;
  for (int i = 0; i < count; ++i) {
    tools.emplace_back(i, options);
  }
  for (int i = 0; i < count; ++i) {
    raws.push_back(std::make_unique<raw_device_bench>(tools[i], options));
  }
  constexpr int rounds = 15;
  std::map<std::string, double> raw_median;
  auto report = [&](const std::string& what, std::vector<double> t, std::vector<double> r) {
    std::vector<double> ratios;
    for (std::size_t k = 0; k < t.size(); ++k) ratios.push_back(t[k] / r[k]);
    double paired = median(ratios);
    raw_median[what] = median(r);
    std::printf("bench %-26s cudrv-query %10.3f  raw %10.3f  paired ratio %.3f (min %.3f, max %.3f)\n", what.c_str(),
                median(t), median(r), paired, *std::min_element(ratios.begin(), ratios.end()),
                *std::max_element(ratios.begin(), ratios.end()));
    INFO(what << ": paired ratio cudrv-query / raw " << paired);
    CHECK(paired == Approx(1.0).margin(0.10));
  };
  for (int i = 0; i < count; ++i) {
    for (const metric& m : metrics) {
      std::vector<double> t, r;
      for (int round = 0; round < rounds; ++round) {
        if (round % 2 == 0) {
          r.push_back((raws[i].get()->*m.raw)());
          t.push_back((tools[i].*m.tool)());
        } else {
          t.push_back((tools[i].*m.tool)());
          r.push_back((raws[i].get()->*m.raw)());
        }
      }
      report(std::to_string(i) + " " + m.name, t, r);
    }
    for (int j = 0; j < count; ++j) {
      if (i == j) continue;
      std::vector<double> t, r;
      for (int round = 0; round < rounds; ++round) {
        bool peer_access = false;
        if (round % 2 == 0) r.push_back(raws[i]->p2p_gbps(*raws[j]));
        t.push_back(tools[i].p2p_gbps(tools[j], peer_access));
        if (round % 2 == 1) r.push_back(raws[i]->p2p_gbps(*raws[j]));
        CHECK(peer_access == (cudrv::device(i).can_access_peer(cudrv::device(j)) &&
                              cudrv::device(j).can_access_peer(cudrv::device(i))));
      }
      report("p2p " + std::to_string(i) + "->" + std::to_string(j), t, r);
    }
  }
  raws.clear();
  tools.clear();

  // The command itself: the same figures in its JSON (same order of magnitude as the raw ones; a
  // separate process), read+write counted twice, the progress line on stderr.
  json doc = query_json({"--bench", "--no-progress"});
  CHECK(doc["bench"]["size_bytes"] == options.size);
  for (const json& d : doc["bench"]["devices"]) {
    std::string o = std::to_string(d["ordinal"].get<int>()) + " ";
    for (const char* k : {"h2d_pinned_gbps", "d2h_pinned_gbps", "h2d_pageable_gbps", "d2h_pageable_gbps",
                          "d2d_copy_gbps", "launch_us", "launch_sync_us"}) {
      INFO(o << k);
      double ratio = d[k].get<double>() / raw_median[o + k];
      CHECK(ratio > 0.5);
      CHECK(ratio < 2.0);
    }
    CHECK(d["d2d_read_write_gbps"].get<double>() == Approx(2 * d["d2d_copy_gbps"].get<double>()).epsilon(1e-3));
  }
  for (const json& p : doc["bench"]["p2p"]) {
    CHECK(p["peer_access"] == cudrv::device(p["from"].get<int>()).can_access_peer(cudrv::device(p["to"].get<int>())));
  }
  auto progress = run_query({"--bench", "--bench-size", "1M", "--bench-iterations", "1", "--bench-trials", "1"});
  REQUIRE(progress.exit_code == 0);
  CHECK(contains(progress.err, "cudrv-query: bench [1/"));
  CHECK(query_test::line_count(progress.err) == 7 * count + count * (count - 1));
  CHECK(contains(progress.out, "GB/s"));
}
