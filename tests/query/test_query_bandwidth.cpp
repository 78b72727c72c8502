// cudrv-query --bandwidth (issue 36: bandwidth). Without a GPU ([query]): the command line, the test
// table, nvbandwidth's SM size rule, the NUMA node from a made-up sysfs, the kernels' PTX (assembled by
// ptxas when the toolkit has one), and the text and JSON of a made-up result. With a GPU
// ([query][gpu]): every test on the devices present, its figures plausible and its copies checked
// byte for byte (the tool checks every destination after every sample: a wrong byte fails the run),
// and one copy-engine test against the same copies timed here with raw driver calls.
#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include <cudrv/copy.hpp>
#include <cudrv/device.hpp>
#include <cudrv/device_buffer.hpp>
#include <cudrv/driver.hpp>
#include <cudrv/error.hpp>
#include <cudrv/event.hpp>
#include <cudrv/pinned_buffer.hpp>
#include <cudrv/stream.hpp>

#include "bandwidth.hpp"
#include "bandwidth_detail.hpp"
#include "query.hpp"
#include "query_test_support.hpp"
#include "support/test_support.hpp"

using nlohmann::json;
using query_test::no_driver;
using query_test::run_query;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// parse_command_line in-process: the command line, or the exit status with what was written.
struct parsed {
  std::variant<cudrv_query::command_line, int> result;
  std::string out, err;
};

parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "cudrv-query");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  parsed p{cudrv_query::parse_command_line(static_cast<int>(argv.size()), argv.data(), out, err), {}, {}};
  p.out = out.str();
  p.err = err.str();
  return p;
}

/// A made-up result: two devices, a host test, a bidirectional device test with three matrices, a
/// waived test and the all-to-all test nvbandwidth has not.
cudrv_query::bandwidth_results made_up_results() {
  using namespace cudrv_query;
  bandwidth_results r;
  r.options.size = std::size_t{256} << 20;
  r.options.iterations = 8;
  r.options.samples = 5;
  r.host_nodes = {{0, 1, true, true}, {1, -1, false, true}};
  bandwidth_test_result h2d;
  h2d.desc = find_bandwidth_test("host_to_device_memcpy_ce");
  h2d.matrices.push_back({"memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
                          "host_to_device_memcpy_ce",
                          {"CPU"},
                          {"0", "1"},
                          {{55.123, 54.5}}});
  r.tests.push_back(h2d);
  bandwidth_test_result bidir;
  bidir.desc = find_bandwidth_test("device_to_device_bidirectional_memcpy_read_ce");
  for (const char* k : {"_read1", "_read2", "_total"}) {
    bidir.matrices.push_back({std::string("memcpy CE GPU(row) <-> GPU(column) ") + k + " bandwidth (GB/s)",
                              std::string("device_to_device_bidirectional_memcpy_read_ce") + k,
                              {"0", "1"},
                              {"0", "1"},
                              {{std::nullopt, 370.25}, {369.75, std::nullopt}}});
  }
  r.tests.push_back(bidir);
  bandwidth_test_result waived;
  waived.desc = find_bandwidth_test("device_to_device_latency_sm");
  waived.skipped = "needs two devices";
  r.tests.push_back(waived);
  bandwidth_test_result all;
  all.desc = find_bandwidth_test("all_to_all_memcpy_write_ce");
  all.matrices.push_back({"memcpy CE GPU(row) <-> GPU(column) all to all total bandwidth (GB/s)",
                          "all_to_all_memcpy_write_ce",
                          {"all"},
                          {"total"},
                          {{1480.0}}});
  r.tests.push_back(all);
  return r;
}

cudrv_query::system_info made_up_system() {
  cudrv_query::system_info info;
  info.driver_available = true;
  info.driver_version = 13000;
  info.device_count = 2;
  for (int i = 0; i < 2; ++i) {
    cudrv_query::device_info d;
    d.ordinal = i;
    d.name = "NVIDIA H200";
    d.cc_major = 9;
    d.multiprocessors = 132;
    d.total_memory = std::size_t{143} << 30;
    d.uuid = "GPU-00000000-0000-0000-0000-00000000000" + std::to_string(i);
    d.pci_bus_id = "0000:1" + std::to_string(i) + ":00.0";
    info.devices.push_back(d);
  }
  info.bandwidth = made_up_results();
  return info;
}

}  // namespace

TEST_CASE("bandwidth: the tests carry nvbandwidth's names, each once, and find them", "[query][bandwidth]") {
  using namespace cudrv_query;
  const auto& tests = all_bandwidth_tests();
  std::set<std::string> names;
  int without_nvbandwidth = 0;
  for (const bandwidth_test_desc& t : tests) {
    INFO(t.name);
    CHECK(names.insert(t.name).second);
    CHECK(find_bandwidth_test(t.name) == &t);
    if (t.nvbandwidth_name == nullptr) {
      ++without_nvbandwidth;
      CHECK(has(t.name, "all_to_all"));
    } else {
      CHECK(std::string(t.nvbandwidth_name) == t.name);
    }
    CHECK(has(t.name, "_sm") == (t.engine == bandwidth_engine::sm));
    CHECK(t.latency == has(t.name, "latency"));
  }
  // nvbandwidth's single-node tests (35) and the two all-to-all tests
  CHECK(tests.size() == 37);
  CHECK(without_nvbandwidth == 2);
  CHECK(find_bandwidth_test("host_to_device") == nullptr);
}

TEST_CASE("bandwidth: options are read, and are usage errors without --bandwidth", "[query][cli][bandwidth]") {
  using namespace cudrv_query;
  parsed ok =
      parse({"--bandwidth", "--bandwidth-size", "64M", "--bandwidth-iterations", "4", "--bandwidth-samples", "7",
             "--bandwidth-tests", "device_local_copy,host_to_device_memcpy_sm", "--no-progress", "-d", "1"});
  REQUIRE(std::holds_alternative<command_line>(ok.result));
  const command_line& cmd = std::get<command_line>(ok.result);
  CHECK(cmd.v == view::bandwidth);
  CHECK(std::string(view_name(cmd.v)) == "bandwidth");
  CHECK(cmd.bandwidth.size == (std::size_t{64} << 20));
  CHECK(cmd.bandwidth.iterations == 4);
  CHECK(cmd.bandwidth.samples == 7);
  CHECK(cmd.bandwidth.tests == std::vector<std::string>{"device_local_copy", "host_to_device_memcpy_sm"});
  CHECK_FALSE(cmd.bandwidth.progress);
  CHECK(cmd.selectors == std::vector<std::string>{"1"});

  parsed defaults = parse({"--bandwidth"});
  REQUIRE(std::holds_alternative<command_line>(defaults.result));
  const bandwidth_options& d = std::get<command_line>(defaults.result).bandwidth;
  CHECK(d.size == (std::size_t{512} << 20));  // nvbandwidth's defaults
  CHECK(d.iterations == 16);
  CHECK(d.samples == 3);
  CHECK(d.tests.empty());
  CHECK(d.progress);

  struct bad {
    std::vector<std::string> args;
    const char* says;
  };
  for (const bad& b : std::vector<bad>{
           {{"--bandwidth-size", "64M"}, "--bandwidth-size applies to --bandwidth only"},
           {{"--bandwidth-tests", "device_local_copy"}, "--bandwidth-tests applies to --bandwidth only"},
           {{"--bandwidth-samples", "3"}, "--bandwidth-samples applies to --bandwidth only"},
           {{"--bandwidth-iterations", "3"}, "--bandwidth-iterations applies to --bandwidth only"},
           {{"--bandwidth", "--bench"}, "cannot be combined"},
           {{"--p2p", "--bandwidth"}, "cannot be combined"},
           {{"--bandwidth", "--details"}, "cannot be combined"},
           {{"--bandwidth", "--bandwidth-tests", "host_to_device"}, "unknown test 'host_to_device'"},
           {{"--bandwidth", "--bandwidth-tests", "device_local_copy,nope"}, "unknown test 'nope'"},
           {{"--bandwidth", "--bandwidth-size", "512K"}, "below 1M"},
           {{"--bandwidth", "--bandwidth-size", "lots"}, "is not a size"},
           {{"--bandwidth", "--bandwidth-iterations", "0"}, "out of range"},
           {{"--bandwidth", "--bandwidth-samples", "x"}, "not a whole number"},
           {{"--bandwidth", "--bandwidth-samples"}, "--bandwidth-samples needs a value"},
           {{"--no-progress"}, "--no-progress applies to --bench or --bandwidth only"},
           // copy-engine tests enqueue every timed copy while the streams are held: at most 1000
           {{"--bandwidth", "--bandwidth-iterations", "1001"},
            "--bandwidth-iterations 1001 is above 1000, the most a copy-engine test takes (without "
            "--bandwidth-tests every test runs"},
           {{"--bandwidth", "--bandwidth-iterations", "5000", "--bandwidth-tests",
             "host_to_device_memcpy_sm,device_local_copy"},
            "(device_local_copy is one)"},
       }) {
    INFO(b.args.front() << " ... -> " << b.says);
    parsed p = parse(b.args);
    REQUIRE(std::holds_alternative<int>(p.result));
    CHECK(std::get<int>(p.result) == exit_usage);
    INFO("stderr: " << p.err);
    CHECK(has(p.err, b.says));
    CHECK(p.err.rfind("cudrv-query: ", 0) == 0);
    CHECK(std::count(p.err.begin(), p.err.end(), '\n') == 1);
  }
}

TEST_CASE("bandwidth: the iteration bound holds for copy-engine tests only", "[query][cli][bandwidth]") {
  using namespace cudrv_query;
  // SM tests are one launch whatever the count: the option's own range applies
  parsed sm = parse({"--bandwidth", "--bandwidth-iterations", "100000", "--bandwidth-tests",
                     "host_to_device_memcpy_sm,host_device_latency_sm"});
  REQUIRE(std::holds_alternative<command_line>(sm.result));
  CHECK(std::get<command_line>(sm.result).bandwidth.iterations == 100000);
  parsed at_bound = parse({"--bandwidth", "--bandwidth-iterations", std::to_string(max_ce_iterations)});
  REQUIRE(std::holds_alternative<command_line>(at_bound.result));
  CHECK(std::get<command_line>(at_bound.result).bandwidth.iterations == max_ce_iterations);

  bandwidth_options o;
  o.iterations = max_ce_iterations + 1;
  o.tests = {"device_to_host_memcpy_sm"};
  CHECK(check_bandwidth_options(o).empty());
  o.tests.push_back("all_to_one_read_ce");
  CHECK(has(check_bandwidth_options(o), "(all_to_one_read_ce is one)"));
  // run_bandwidth refuses the same options itself, before it touches a driver
  CHECK_THROWS_AS(run_bandwidth({0}, {""}, o), cudrv::invalid_argument_error);
  CHECK_THROWS_WITH(run_bandwidth({0}, {""}, o), Catch::Contains("is above 1000"));
}

TEST_CASE("bandwidth: --help lists the view, its options and every test name", "[query][cli][bandwidth]") {
  auto r = run_query({"--help"}, {no_driver});
  REQUIRE(r.exit_code == 0);
  for (const char* option :
       {"--bandwidth", "--bandwidth-size", "--bandwidth-iterations", "--bandwidth-samples", "--bandwidth-tests"}) {
    INFO(option);
    CHECK(has(r.out, option));
  }
  for (const cudrv_query::bandwidth_test_desc& t : cudrv_query::all_bandwidth_tests()) {
    INFO(t.name);
    CHECK(has(r.out, std::string(" ") + t.name));
  }
}

TEST_CASE("bandwidth: without a driver it exits 2, and --json says so in a valid document", "[query][cli][bandwidth]") {
  auto text = run_query({"--bandwidth"}, {no_driver});
  CHECK(text.exit_code == 2);
  CHECK(text.out.empty());
  CHECK(has(text.err, "no usable CUDA driver"));
  auto r = run_query({"--bandwidth", "--json"}, {no_driver});
  CHECK(r.exit_code == 2);
  REQUIRE_SCHEMA_VALID(r.out);
  json j = query_test::parse(r.out);
  CHECK(j["view"] == "bandwidth");
  CHECK(j["status"] == "no_driver");
  CHECK_FALSE(j.contains("bandwidth"));
}

TEST_CASE("bandwidth: SM copies are truncated as nvbandwidth truncates them", "[query][bandwidth]") {
  using cudrv_query::sm_copy_bytes;
  // 512 MiB on 132 SMs: 512 threads each, a whole number of 16-byte elements per thread
  const std::size_t threads = 132 * 512;
  const std::size_t want = (std::size_t{512} << 20) / 16 / threads * threads * 16;
  CHECK(sm_copy_bytes(std::size_t{512} << 20, 132) == want);
  CHECK(want < (std::size_t{512} << 20));
  CHECK(sm_copy_bytes(std::size_t{512} << 20, 128) == (std::size_t{512} << 20));  // divides evenly
  // Below 64 MiB: 1024-thread blocks of one element each, whole blocks only
  CHECK(sm_copy_bytes(std::size_t{1} << 20, 132) == (std::size_t{1} << 20));
  CHECK(sm_copy_bytes((std::size_t{1} << 20) + 100, 132) == (std::size_t{1} << 20));
  CHECK(sm_copy_bytes(16 * 1000, 132) == 16 * 1000);
}

TEST_CASE("bandwidth: the NUMA node of a GPU comes from sysfs, -1 when it does not say", "[query][bandwidth]") {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("cudrv_bw_sysfs_" + std::to_string(::getpid()));
  fs::create_directories(root / "0000:c1:00.0");
  fs::create_directories(root / "0000:41:00.0");
  std::ofstream(root / "0000:c1:00.0" / "numa_node") << "3\n";
  std::ofstream(root / "0000:41:00.0" / "numa_node") << "-1\n";
  CHECK(cudrv_query::numa_node_of("0000:C1:00.0", root.string()) == 3);  // the driver's upper case, too
  CHECK(cudrv_query::numa_node_of("0000:41:00.0", root.string()) == -1);
  CHECK(cudrv_query::numa_node_of("0000:99:00.0", root.string()) == -1);
  CHECK(cudrv_query::numa_node_of("", root.string()) == -1);
  fs::remove_all(root);
}

TEST_CASE("bandwidth: binding to a NUMA node is undone, and no node binds nothing", "[query][bandwidth]") {
  cpu_set_t before;
  REQUIRE(sched_getaffinity(0, sizeof before, &before) == 0);
  {
    cudrv_query::bind_to_node none(-1);
    CHECK_FALSE(none.bound());
    cpu_set_t now;
    REQUIRE(sched_getaffinity(0, sizeof now, &now) == 0);
    CHECK(CPU_EQUAL(&now, &before));
  }
  {
    cudrv_query::bind_to_node node0(0);  // node 0 exists wherever sysfs lists NUMA nodes
    if (node0.bound()) {
      cpu_set_t now;
      REQUIRE(sched_getaffinity(0, sizeof now, &now) == 0);
      CHECK(CPU_COUNT(&now) >= 1);
    } else {
      std::cout << "SKIPPED: binding to node 0 (this system refuses it or has no node 0)" << std::endl;
    }
  }
  cpu_set_t after;
  REQUIRE(sched_getaffinity(0, sizeof after, &after) == 0);
  CHECK(CPU_EQUAL(&after, &before));
}

TEST_CASE("bandwidth: the kernels' PTX has every entry and assembles for sm_90", "[query][bandwidth]") {
  const std::string ptx = cudrv_query::detail::bandwidth_kernels_ptx();
  for (const char* entry :
       {"cudrv_bw_spin", "cudrv_bw_copy(", "cudrv_bw_copy_small", "cudrv_bw_copy_split", "cudrv_bw_chase"}) {
    INFO(entry);
    CHECK(has(ptx, std::string(".visible .entry ") + entry));
  }
  // the spin kernel says when it gave up waiting: its third parameter, written on the timeout only
  CHECK(has(ptx, "cudrv_bw_spin(.param .u64 flag, .param .u64 timeout, .param .u64 timed_out)"));
  const std::string spin =
      ptx.substr(ptx.find("cudrv_bw_spin"), ptx.find("cudrv_bw_copy_small") - ptx.find("cudrv_bw_spin"));
  CHECK(spin.find("st.volatile.u32 [%out]") > spin.find("@%p2 bra SPIN"));
  CHECK(spin.find("st.volatile.u32 [%out]") < spin.find("DONE:"));
  // twelve loads in flight in the striding copy's main loop, as nvbandwidth's kernel has
  CHECK(std::count(ptx.begin(), ptx.end(), '\n') > 100);
  std::string ptxas;
  for (const char* candidate : {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"}) {
    if (::access(candidate, X_OK) == 0) ptxas = candidate;
  }
  if (ptxas.empty()) {
    std::cout << "SKIPPED: the PTX assembly check (no ptxas in /usr/local/cuda/bin)" << std::endl;
    return;
  }
  const std::string base =
      (std::filesystem::temp_directory_path() / ("cudrv_bw_" + std::to_string(::getpid()))).string();
  std::ofstream(base + ".ptx") << ptx;
  auto r = query_test::run_process({ptxas, "-arch=sm_90", base + ".ptx", "-o", base + ".cubin"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  std::filesystem::remove(base + ".ptx");
  std::filesystem::remove(base + ".cubin");
}

TEST_CASE("bandwidth: the JSON of a made-up result validates and carries its figures", "[query][bandwidth]") {
  const cudrv_query::system_info info = made_up_system();
  const std::string text = cudrv_query::to_json(info, cudrv_query::view::bandwidth, nullptr);
  REQUIRE_SCHEMA_VALID(text);
  json j = query_test::parse(text);
  CHECK(j["view"] == "bandwidth");
  const json& b = j["bandwidth"];
  CHECK(b["size_bytes"] == (std::size_t{256} << 20));
  CHECK(b["iterations"] == 8);
  CHECK(b["samples"] == 5);
  CHECK(b["statistic"] == "median");
  REQUIRE(b["host_nodes"].size() == 2);
  CHECK(b["host_nodes"][0]["numa_node"] == 1);
  CHECK(b["host_nodes"][0]["bound"] == true);
  CHECK(b["host_nodes"][1]["numa_node"].is_null());
  REQUIRE(b["tests"].size() == 4);
  const json& h2d = b["tests"][0];
  CHECK(h2d["name"] == "host_to_device_memcpy_ce");
  CHECK(h2d["nvbandwidth_name"] == "host_to_device_memcpy_ce");
  CHECK(h2d["engine"] == "ce");
  CHECK(h2d["unit"] == "GB/s");
  CHECK(h2d["status"] == "passed");
  CHECK(h2d["matrices"][0]["rows"] == json{"CPU"});
  CHECK(h2d["matrices"][0]["values"][0][0] == 55.12);  // two decimals, as the text
  CHECK(h2d["matrices"][0]["sum"].get<double>() == Approx(109.62).margin(0.006));
  const json& bidir = b["tests"][1];
  REQUIRE(bidir["matrices"].size() == 3);
  CHECK(bidir["matrices"][2]["key"] == "device_to_device_bidirectional_memcpy_read_ce_total");
  CHECK(bidir["matrices"][0]["values"][0][0].is_null());
  CHECK(bidir["matrices"][0]["values"][1][0] == 369.75);
  const json& waived = b["tests"][2];
  CHECK(waived["status"] == "waived");
  CHECK(waived["reason"] == "needs two devices");
  CHECK(waived["unit"] == "ns");
  CHECK(waived["matrices"].empty());
  CHECK(b["tests"][3]["nvbandwidth_name"].is_null());
  CHECK(b["tests"][3]["engine"] == "ce");

  // a successful bandwidth document must carry its results
  json without = j;
  without.erase("bandwidth");
  bool valid = true;
  const std::string report = query_test::validate(without.dump(), valid);
  INFO(report);
  CHECK_FALSE(valid);
}

TEST_CASE("bandwidth: the text of a made-up result is nvbandwidth's layout", "[query][bandwidth]") {
  std::ostringstream out;
  cudrv_query::print_bandwidth_text(out, made_up_results());
  const std::string t = out.str();
  INFO(t);
  CHECK(has(t, "256 MiB per copy, 8 copies per sample, median of 5 samples"));
  CHECK(has(t, "GPU 0 node 1, GPU 1 node unknown (not bound)"));
  CHECK(has(t, "Running host_to_device_memcpy_ce.\n"
               "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n"
               "            0         1\n"
               "CPU     55.12     54.50\n"
               "\n"
               "SUM host_to_device_memcpy_ce 109.62\n"));
  CHECK(has(t, "memcpy CE GPU(row) <-> GPU(column) _total bandwidth (GB/s)\n"
               "           0         1\n"
               " 0       N/A    370.25\n"
               " 1    369.75       N/A\n"
               "\n"
               "SUM device_to_device_bidirectional_memcpy_read_ce_total 740.00\n"));
  CHECK(has(t, "Running device_to_device_latency_sm.\nWaived: needs two devices.\n"));
  CHECK(has(t, "        total\nall   1480.00\n"));
}

#if defined(CUDRV_TEST_FAKE_CUDA)
TEST_CASE("bandwidth: against the stand-in driver the CE copies land, are checked and timed", "[query][bandwidth]") {
  // The stand-in driver copies for real (cuMemcpyAsync is a memcpy), runs no kernel and puts every
  // pair of events 0.5 ms apart: so a CE test's figure is bytes x iterations / 0.5 ms, its copies pass
  // the byte check, and an SM test, whose kernel never ran, fails the check with exit status 4.
  const std::vector<std::string> fake{std::string("CUDRV_LIBCUDA=") + CUDRV_TEST_FAKE_CUDA, "FAKE_CUDA_DEVICES=90",
                                      "FAKE_CUDA_UNAVAILABLE=", "CUDRV_LIBNVML=/nonexistent/libnvidia-ml.so.1"};
  auto r = run_query({"--bandwidth", "--json", "--no-progress", "--bandwidth-size", "1M", "--bandwidth-iterations", "2",
                      "--bandwidth-samples", "3", "--bandwidth-tests",
                      "host_to_device_memcpy_ce,device_to_host_bidirectional_memcpy_ce,all_to_host_memcpy_ce,"
                      "device_local_copy,device_to_device_memcpy_write_ce"},
                     fake, {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE_SCHEMA_VALID(r.out);
  json doc = query_test::parse(r.out);
  const json& tests = doc["bandwidth"]["tests"];
  REQUIRE(tests.size() == 5);
  const double want = (1 << 20) * 2.0 / 0.5e-3 / 1e9;  // GB/s
  for (const json& t : tests) {
    INFO(t["name"]);
    if (t["name"] == "device_to_device_memcpy_write_ce") {
      CHECK(t["status"] == "waived");  // one device
      CHECK(t["reason"] == "needs two devices");
      continue;
    }
    CHECK(t["status"] == "passed");
    REQUIRE(t["matrices"].size() == 1);
    REQUIRE(t["matrices"][0]["values"].size() == 1);
    REQUIRE(t["matrices"][0]["values"][0].size() == 1);
    CHECK(t["matrices"][0]["values"][0][0].get<double>() == Approx(want).margin(0.006));
  }

  auto sm = run_query({"--bandwidth", "--no-progress", "--bandwidth-size", "1M", "--bandwidth-iterations", "1",
                       "--bandwidth-samples", "1", "--bandwidth-tests", "host_to_device_memcpy_sm"},
                      fake, {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"});
  INFO("stderr: " << sm.err);
  CHECK(sm.exit_code == cudrv_query::exit_cuda_error);
  // a cudrv::error that names the test, the cell, the copy and the byte's offset
  CHECK(has(sm.err, "CUDA_ERROR_UNKNOWN"));
  CHECK(has(sm.err, "bandwidth check of host_to_device_memcpy_sm (row CPU, column 0), copy 0 (device 0): byte 0 is "
                    "0xee, the copy should have left 0x21"));
}
#endif

// --- with a GPU ------------------------------------------------------------------------------------

namespace {

/// What the tool's JSON gives for one test.
const json* test_named(const json& doc, const std::string& name) {
  for (const json& t : doc["bandwidth"]["tests"]) {
    if (t["name"] == name) return &t;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("bandwidth: every test runs, its copies check out and its figures are plausible", "[query][gpu][bandwidth]") {
  CUDRV_REQUIRE_GPU();
  // 64 MiB (the striding SM kernel's smallest size), 2 samples of 2 copies: every copy's destination
  // is poisoned before and checked byte for byte after each sample by the tool (a wrong byte is
  // exit status 4), so a passing run is a verified one.
  auto r = run_query({"--bandwidth", "--json", "--bandwidth-size", "64M", "--bandwidth-iterations", "2",
                      "--bandwidth-samples", "2"},
                     {}, {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE_SCHEMA_VALID(r.out);
  json doc = query_test::parse(r.out);
  const int count = cudrv::device_count();
  bool any_peers = false;
  for (int a = 0; a < count; ++a) {
    for (int b = 0; b < count; ++b)
      any_peers = any_peers || (a != b && cudrv::device(a).can_access_peer(cudrv::device(b)));
  }
  REQUIRE(doc["bandwidth"]["tests"].size() == cudrv_query::all_bandwidth_tests().size());
  for (const json& t : doc["bandwidth"]["tests"]) {
    const std::string name = t["name"];
    INFO(name);
    const cudrv_query::bandwidth_test_desc* desc = cudrv_query::find_bandwidth_test(name);
    REQUIRE(desc != nullptr);
    CHECK(t["status"] == ((desc->needs_peers && !any_peers) ? "waived" : "passed"));
    for (const json& m : t["matrices"]) {
      INFO(m["key"]);
      int measured = 0;
      for (std::size_t row = 0; row < m["values"].size(); ++row) {
        for (std::size_t col = 0; col < m["values"][row].size(); ++col) {
          const json& v = m["values"][row][col];
          if (v.is_null()) continue;
          ++measured;
          const double x = v.get<double>();
          if (desc->latency) {
            CHECK(x > 50);      // ns: no memory answers a dependent load in under 50 ns
            CHECK(x < 100000);  // nor takes 0.1 ms
          } else {
            CHECK(x > 0.5);    // GB/s: slower than any PCIe link of the last decade
            CHECK(x < 20000);  // faster than any HBM
          }
        }
      }
      CHECK(measured > 0);
    }
  }
  // Device-local copies beat host copies on any discrete GPU.
  const json* local = test_named(doc, "device_local_copy");
  const json* h2d = test_named(doc, "host_to_device_memcpy_ce");
  REQUIRE(local != nullptr);
  REQUIRE(h2d != nullptr);
  CHECK((*local)["matrices"][0]["values"][0][0].get<double>() > (*h2d)["matrices"][0]["values"][0][0].get<double>());
}

TEST_CASE("bandwidth: the progress goes to stderr, one line per test, and text to stdout", "[query][gpu][bandwidth]") {
  CUDRV_REQUIRE_GPU();
  auto r =
      run_query({"--bandwidth", "--bandwidth-size", "1M", "--bandwidth-iterations", "1", "--bandwidth-samples", "1",
                 "--bandwidth-tests", "host_to_device_memcpy_ce,device_to_host_memcpy_sm,host_device_latency_sm"});
  REQUIRE(r.exit_code == 0);
  CHECK(query_test::line_count(r.err) == 3);
  CHECK(has(r.err, "cudrv-query: bandwidth [1/3] host_to_device_memcpy_ce"));
  CHECK(has(r.out, "Running device_to_host_memcpy_sm."));
  CHECK(has(r.out, "memory latency SM CPU(row) <-> GPU(column) (ns)"));
  auto quiet = run_query({"--bandwidth", "--no-progress", "--bandwidth-size", "1M", "--bandwidth-iterations", "1",
                          "--bandwidth-samples", "1", "--bandwidth-tests", "device_local_copy"});
  REQUIRE(quiet.exit_code == 0);
  CHECK(quiet.err.empty());
}

TEST_CASE("bandwidth: a CE test is within 10% of the same copies timed with raw driver calls",
          "[query][gpu][bandwidth]") {
  CUDRV_REQUIRE_GPU();
  // host_to_device_memcpy_ce on device 0 (in this process) against 16 cuMemcpyAsync copies of the
  // same size between page-locked host memory and device memory, timed with events on one stream;
  // seven rounds alternating which goes first, the median of the paired ratios.
  cudrv_query::bandwidth_options o;
  o.size = std::size_t{256} << 20;
  o.iterations = 16;
  o.samples = 3;
  o.tests = {"host_to_device_memcpy_ce"};
  o.progress = false;
  cudrv::device dev(0);
  cudrv::stream s(dev);
  cudrv::event start(dev, cudrv::event_flags::timing);
  cudrv::event stop(dev, cudrv::event_flags::timing);
  // The host buffer on the GPU's NUMA node, as the tool places its own.
  std::optional<cudrv::pinned_buffer<std::byte>> pinned;
  {
    cudrv_query::bind_to_node bind(cudrv_query::numa_node_of(dev.pci_bus_id(), "/sys/bus/pci/devices"));
    pinned.emplace(dev, o.size);
  }
  cudrv::pinned_buffer<std::byte>& host = *pinned;
  cudrv::device_buffer<std::byte> device(dev, o.size);
  std::memset(host.data(), 0x5A, o.size);
  auto raw = [&] {
    cudrv::copy(device, host, s);  // warm-up
    s.record(start);
    for (int i = 0; i < o.iterations; ++i) cudrv::copy(device, host, s);
    s.record(stop);
    stop.synchronize();
    return static_cast<double>(o.size) * o.iterations / (cudrv::elapsed_time(start, stop).count() * 1e-3) * 1e-9;
  };
  auto tool = [&] {
    cudrv_query::bandwidth_results r = cudrv_query::run_bandwidth({0}, {dev.pci_bus_id()}, o);
    REQUIRE(r.tests.size() == 1);
    REQUIRE(r.tests[0].matrices.size() == 1);
    return r.tests[0].matrices[0].values[0][0].value();
  };
  std::vector<double> ratios;
  for (int round = 0; round < 7; ++round) {
    double t = 0;
    double w = 0;
    if (round % 2 == 0) {
      w = raw();
      t = tool();
    } else {
      t = tool();
      w = raw();
    }
    ratios.push_back(t / w);
  }
  // The raw copy landed: the device holds the host's bytes (poison first, then one more copy).
  cudrv::fill(device, std::byte{0xEE});
  cudrv::copy(device, host, s);
  s.synchronize();
  std::vector<std::byte> back(o.size);
  cudrv::copy(back, device);
  CHECK(std::all_of(back.begin(), back.end(), [](std::byte b) { return b == std::byte{0x5A}; }));
  std::sort(ratios.begin(), ratios.end());
  const double paired = ratios[ratios.size() / 2];
  std::printf("bandwidth host_to_device_memcpy_ce / raw cuMemcpyAsync: paired ratio %.3f (min %.3f, max %.3f)\n",
              paired, ratios.front(), ratios.back());
  CHECK(paired == Approx(1.0).margin(0.10));
}

TEST_CASE("bandwidth: peer tests on two or more GPUs fill every pair with peer access", "[query][gpu][bandwidth]") {
  CUDRV_REQUIRE_GPUS(2);
  auto r = run_query({"--bandwidth", "--json", "--no-progress", "--bandwidth-size", "64M", "--bandwidth-iterations",
                      "2", "--bandwidth-samples", "1", "--bandwidth-tests",
                      "device_to_device_memcpy_write_ce,device_to_device_memcpy_read_sm,"
                      "device_to_device_bidirectional_memcpy_write_ce,device_to_device_latency_sm,all_to_one_write_ce,"
                      "all_to_all_memcpy_write_sm"},
                     {}, {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE_SCHEMA_VALID(r.out);
  json doc = query_test::parse(r.out);
  const int count = cudrv::device_count();
  for (const char* name : {"device_to_device_memcpy_write_ce", "device_to_device_memcpy_read_sm",
                           "device_to_device_bidirectional_memcpy_write_ce", "device_to_device_latency_sm"}) {
    INFO(name);
    const json* t = test_named(doc, name);
    REQUIRE(t != nullptr);
    for (const json& m : (*t)["matrices"]) {
      REQUIRE(m["values"].size() == static_cast<std::size_t>(count));
      for (int a = 0; a < count; ++a) {
        for (int b = 0; b < count; ++b) {
          INFO(a << " -> " << b);
          const bool expect = a != b && cudrv::device(a).can_access_peer(cudrv::device(b));
          CHECK(m["values"][a][b].is_null() == !expect);
        }
      }
    }
  }
  // Two copies at once over one pair move more than one: the bidirectional total beats either side.
  const json* bidir = test_named(doc, "device_to_device_bidirectional_memcpy_write_ce");
  if (cudrv::device(0).can_access_peer(cudrv::device(1))) {
    const double total = (*bidir)["matrices"][2]["values"][0][1].get<double>();
    CHECK(total > (*bidir)["matrices"][0]["values"][0][1].get<double>());
    CHECK(total == Approx((*bidir)["matrices"][0]["values"][0][1].get<double>() +
                          (*bidir)["matrices"][1]["values"][0][1].get<double>())
                       .margin(0.02));
  }
}
