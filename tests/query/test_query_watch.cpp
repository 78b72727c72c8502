// cudrv-query --watch (issue 36: watch) against the stand-in driver and the stand-in NVML
// (tests/fake_nvml): NVML's index 0 ("Fake H100", every reading) is CUDA's device 1, NVML's index 1
// (every optional reading NOT_SUPPORTED) is CUDA's device 0. The stand-in's NVLink counters advance
// 4096 KiB sent and 1024 KiB received per 0.5 s of its own clock at every reading, so the rates are
// 8 MiB/s and 2 MiB/s whatever the interval. Label cpu: no GPU needed.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <cudrv/system.hpp>

#include "query.hpp"
#include "query_test_support.hpp"
#include "watch.hpp"

using query_test::run_query;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    start = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

// --- without a driver: the pieces --------------------------------------------------------------------

TEST_CASE("watch: --watch-query names, nvidia-smi's aliases, and the formats' defaults", "[query][watch]") {
  using cudrv_query::watch_field;
  std::vector<std::string> names;
  std::string error;
  auto fields =
      cudrv_query::parse_watch_query(" index, clocks.current.sm ,clocks_throttle_reasons.active", names, error);
  REQUIRE(fields);
  CHECK(*fields ==
        std::vector<watch_field>{watch_field::index, watch_field::clocks_sm, watch_field::clocks_event_reasons});
  CHECK(names == std::vector<std::string>{"index", "clocks.current.sm", "clocks_throttle_reasons.active"});
  CHECK_FALSE(cudrv_query::parse_watch_query("index,,uuid", names, error));
  CHECK(contains(error, "an empty field name"));
  CHECK_FALSE(cudrv_query::parse_watch_query("utilization.gpu,fan.speed", names, error));
  CHECK(contains(error, "'fan.speed' is not a field"));
  for (const cudrv_query::watch_field_info& f : cudrv_query::watch_fields()) {
    CHECK(contains(error, f.name));                                                // every valid name is listed
    CHECK(&cudrv_query::watch_fields()[static_cast<std::size_t>(f.field)] == &f);  // the table is in enum order
  }

  cudrv_query::watch_options o;
  CHECK(cudrv_query::parse_watch_format("csv,nounits,noheader", o).empty());
  CHECK(o.format == cudrv_query::watch_format::csv);
  CHECK_FALSE(o.header);
  CHECK_FALSE(o.units);
  CHECK_FALSE(cudrv_query::parse_watch_format("csv,noheaders", o).empty());
  CHECK_FALSE(cudrv_query::parse_watch_format("json", o).empty());
  CHECK_FALSE(cudrv_query::parse_watch_format("csv,", o).empty());

  // The bounds: a count, a duration (whole intervals, at least one sample), the first reached.
  cudrv_query::watch_options b;
  b.interval_s = 0.25;
  CHECK(cudrv_query::watch_sample_limit(b) == 0);
  b.duration_s = 1.0;
  CHECK(cudrv_query::watch_sample_limit(b) == 4);
  b.duration_s = 0.1;
  CHECK(cudrv_query::watch_sample_limit(b) == 1);
  b.duration_s = 10;
  b.count = 7;
  CHECK(cudrv_query::watch_sample_limit(b) == 7);
}

TEST_CASE("watch: a sample's CSV, JSON line and text follow nvidia-smi's conventions", "[query][watch]") {
  cudrv_query::watch_sample s;
  s.sample = 3;
  s.timestamp = "2026/11/28 20:10:00.123";
  s.time_of_day = "20:10:00";
  s.ordinal = 1;
  s.index = 0;
  s.utilization_gpu = 97;
  s.memory_used_bytes = (1234ULL << 20) + 5;  // whole MiB, rounded down as nvidia-smi does
  s.power_draw_w = 456.789;
  s.clocks_event_reasons = 0x5;
  s.nvlink_tx_bytes_per_s = 1.5 * 1024 * 1024;
  cudrv_query::watch_options o;
  o.format = cudrv_query::watch_format::csv;
  std::string error;
  o.fields = *cudrv_query::parse_watch_query(
      "timestamp,index,utilization.gpu,memory.used,power.draw,temperature.gpu,clocks_event_reasons.active,nvlink.tx",
      o.names, error);
  CHECK(cudrv_query::watch_csv_header(o) ==
        "timestamp, index, utilization.gpu [%], memory.used [MiB], power.draw [W], temperature.gpu, "
        "clocks_event_reasons.active, nvlink.tx [MiB/s]\n");
  CHECK(cudrv_query::watch_csv_line(s, o) ==
        "2026/11/28 20:10:00.123, 0, 97 %, 1234 MiB, 456.79 W, [N/A], 0x0000000000000005, 1.5 MiB/s\n");
  o.units = false;
  CHECK(cudrv_query::watch_csv_line(s, o) ==
        "2026/11/28 20:10:00.123, 0, 97, 1234, 456.79, [N/A], 0x0000000000000005, 1.5\n");

  const nlohmann::json j = query_test::parse(cudrv_query::watch_json_line(s, o));
  CHECK(j["view"] == "watch");
  CHECK(j["sample"] == 3);
  CHECK(j["ordinal"] == 1);
  CHECK(j["memory.used"] == 1234);
  CHECK(j["power.draw"] == 456.79);
  CHECK(j["temperature.gpu"].is_null());
  CHECK(j["nvlink.tx"] == 1.5);
  CHECK_FALSE(j.contains("uuid"));  // only the fields asked for

  const std::string header = cudrv_query::watch_text_header(o);
  REQUIRE(query_test::line_count(header) == 2);
  CHECK(header.rfind("#", 0) == 0);
  const std::string line = cudrv_query::watch_text_lines(s, o);
  CHECK(contains(line, "20:10:00"));
  CHECK(contains(line, "456.79"));
  CHECK(contains(line, " - "));                    // no temperature
  CHECK(contains(line, "gpu_idle,sw_power_cap"));  // the reasons by name
}

TEST_CASE("watch: an NVLink rate needs comparable readings: same counters, same links, time and counts that advance",
          "[query][watch]") {
  using origin = cudrv::system::nvlink_traffic::origin;
  cudrv::system::nvlink_traffic a;
  a.tx_bytes = 10'000'000;
  a.rx_bytes = 20'000'000;
  a.timestamp_us = 1'000'000;
  a.source = origin::per_link_sum;
  a.links = 0b11;
  cudrv::system::nvlink_traffic b = a;
  b.tx_bytes += 3'000'000;
  b.rx_bytes += 1'000'000;
  b.timestamp_us += 500'000;
  const std::optional<cudrv_query::watch_rates> r = cudrv_query::watch_nvlink_rate(a, b);
  REQUIRE(r);
  CHECK(r->tx_bytes_per_s == 6'000'000.0);
  CHECK(r->rx_bytes_per_s == 2'000'000.0);

  // A link that dropped out of the sum (or came back): its whole counter would show as a spike.
  cudrv::system::nvlink_traffic dropped = b;
  dropped.links = 0b01;
  dropped.tx_bytes -= 9'000'000;
  CHECK_FALSE(cudrv_query::watch_nvlink_rate(a, dropped));
  cudrv::system::nvlink_traffic back = b;
  back.links = 0b111;
  back.tx_bytes += 1'000'000'000'000ULL;
  CHECK_FALSE(cudrv_query::watch_nvlink_rate(a, back));
  // Another source of counters.
  cudrv::system::nvlink_traffic other = b;
  other.source = origin::throughput_all_links;
  CHECK_FALSE(cudrv_query::watch_nvlink_rate(a, other));
  // Counters that fell (a driver reload): no rate, never a negative or a wrapped one.
  cudrv::system::nvlink_traffic fell = b;
  fell.tx_bytes = 5;
  CHECK_FALSE(cudrv_query::watch_nvlink_rate(a, fell));
  fell = b;
  fell.rx_bytes = a.rx_bytes - 1;
  CHECK_FALSE(cudrv_query::watch_nvlink_rate(a, fell));
  // NVML's timestamp that did not advance, or went back.
  cudrv::system::nvlink_traffic stuck = b;
  stuck.timestamp_us = a.timestamp_us;
  CHECK_FALSE(cudrv_query::watch_nvlink_rate(a, stuck));
  stuck.timestamp_us = a.timestamp_us - 1;
  CHECK_FALSE(cudrv_query::watch_nvlink_rate(a, stuck));
  // Counters that did not move: a rate of 0.
  cudrv::system::nvlink_traffic idle = a;
  idle.timestamp_us += 1'000'000;
  REQUIRE(cudrv_query::watch_nvlink_rate(a, idle));
  CHECK(cudrv_query::watch_nvlink_rate(a, idle)->tx_bytes_per_s == 0.0);
}

#if defined(CUDRV_TEST_FAKE_NVML) && defined(CUDRV_TEST_FAKE_CUDA)

namespace {

std::vector<std::string> fakes() {
  return {std::string("CUDRV_LIBCUDA=") + CUDRV_TEST_FAKE_CUDA, std::string("CUDRV_LIBNVML=") + CUDRV_TEST_FAKE_NVML};
}

/// Starts cudrv-query @p args (after the program's path) with @p set in its environment and its stdout
/// in @p out, without waiting; @p ignored, when not 0, is a signal the child starts with ignored (an
/// ignored disposition is inherited through exec: it is ignored here for the spawn only). Returns the
/// child's pid; a failed spawn fails the test.
pid_t start_query(const std::vector<std::string>& args, const std::vector<std::string>& set,
                  const query_test::temp_file& out, int ignored = 0) {
  query_test::spawn_arrays spawn(query_test::query_argv(args), query_test::environment(set, {}));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.path().c_str(), O_WRONLY | O_TRUNC, 0);
  struct sigaction ignore {};
  struct sigaction before {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  if (ignored != 0) sigaction(ignored, &ignore, &before);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, spawn.argp[0], &actions, nullptr, spawn.argp.data(), spawn.envp.data());
  if (ignored != 0) sigaction(ignored, &before, nullptr);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(spawned == 0);
  return pid;
}

query_test::process_result watch(std::vector<std::string> args) {
  args.insert(args.begin(), "--watch");
  return run_query(args, fakes());
}

// Validates JSON lines against $defs/watch_sample.
std::string validate_lines(const std::string& text, bool& valid) {
  query_test::temp_file doc;
  {
    std::ofstream f(doc.path(), std::ios::binary);
    f << text;
  }
  const query_test::process_result r = query_test::run_process(
      {query_test::python(), CUDRV_TEST_VALIDATOR, "--lines", "watch_sample", CUDRV_TEST_SCHEMA, doc.path()});
  valid = r.exit_code == 0;
  return "validator exit " + std::to_string(r.exit_code) + ": " + r.out + r.err;
}

}  // namespace

TEST_CASE("watch: the text table has a header and one line per GPU per sample", "[query][watch]") {
  const query_test::process_result r = watch({"--watch-count", "3", "--watch-interval", "0.05"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(lines.size() == 2 + 3 * 2);  // the header (names, units) once, then 3 samples of 2 GPUs
  CHECK(contains(lines[0], "time"));
  CHECK(contains(lines[0], "nvl_tx"));
  CHECK(contains(lines[1], "MiB/s"));
  for (std::size_t i = 2; i < lines.size(); i += 2) {
    // CUDA device 0 (NVML's index 1) supports no optional reading: '-', memory only.
    CHECK(contains(lines[i], "4096"));
    CHECK(contains(lines[i], " - "));
    // CUDA device 1: every reading, the NVLink rates from the stand-in's counters.
    for (const char* part : {"  37", "  12", "9728", "123.46", "  41", "  47", "1755", "2619", "1.2", "5.5", "8.0",
                             "2.0", "gpu_idle,sw_power_cap,bit_40"}) {
      CHECK(contains(lines[i + 1], part));
    }
  }
}

TEST_CASE("watch: JSON lines are valid against the schema, one per GPU per sample", "[query][watch]") {
  const query_test::process_result r =
      watch({"--json", "--watch-count", "2", "--watch-interval", "0.05", "--watch-processes"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  bool valid = false;
  INFO(validate_lines(r.out, valid));
  REQUIRE(valid);
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(lines.size() == 4);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const nlohmann::json j = query_test::parse(lines[i]);
    CHECK(j["sample"] == static_cast<int>(i / 2 + 1));
    CHECK(j["ordinal"] == static_cast<int>(i % 2));
    if (j["ordinal"] == 1) {
      CHECK(j["index"] == 0);
      CHECK(j["name"] == "NVIDIA Fake H100");  // NVML's name, as nvidia-smi prints it
      CHECK(j["nvlink.tx"] == 8.0);            // 4096 KiB per 0.5 s of NVML's clock
      CHECK(j["nvlink.rx"] == 2.0);
      CHECK(j["pcie.tx"] == 1.2);  // 1234 KiB/s
      CHECK(j["memory.total"] == 81920);
      CHECK(j["memory.used"] == 9728);  // nvmlDeviceGetMemoryInfo_v2: the 512 MiB reserved apart
      CHECK(j["memory.reserved"] == 512);
      CHECK(j["pstate"] == "P2");
      CHECK(j["clocks_event_reasons.active"] == "0x0000010000000005");
      REQUIRE(j["processes"].size() == 3);  // two compute, one graphics
      CHECK(j["processes"][0]["pid"] == 4242);
      CHECK(j["processes"][0]["used_memory_mib"] == 1024);
      CHECK(j["processes"][1]["used_memory_mib"].is_null());  // NVML cannot tell
      CHECK(j["processes.count"] == 3);
    } else {
      CHECK(j["index"] == 1);
      CHECK(j["utilization.gpu"].is_null());
      CHECK(j["nvlink.tx"].is_null());
      CHECK(j["memory.used"] == 4096);  // no _v2 there: nvmlDeviceGetMemoryInfo's figure
      CHECK(j["memory.reserved"].is_null());
    }
  }
  // --watch-format jsonl is the same output without --json.
  const query_test::process_result same = watch({"--watch-format", "jsonl", "--watch-count", "1", "--watch-interval",
                                                 "0.05", "--watch-query", "index,nvlink.rx"});
  REQUIRE(same.exit_code == 0);
  const nlohmann::json first = query_test::parse(lines_of(same.out).at(1));
  CHECK(first.size() == 6);  // schema_version, view, sample, ordinal and the two fields
  CHECK(first["nvlink.rx"] == 2.0);
}

TEST_CASE("watch: CSV with chosen fields, units and [N/A], as nvidia-smi writes it", "[query][watch]") {
  const std::vector<std::string> query = {"--watch-format",
                                          "csv",
                                          "--watch-count",
                                          "2",
                                          "--watch-interval",
                                          "0.05",
                                          "--query",
                                          "index,utilization.gpu,memory.used,clocks.current.sm,temperature.gpu,"
                                          "power.draw,nvlink.tx,processes.count"};
  query_test::process_result r = watch(query);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(lines.size() == 1 + 2 * 2);
  CHECK(lines[0] ==
        "index, utilization.gpu [%], memory.used [MiB], clocks.current.sm [MHz], temperature.gpu, power.draw [W], "
        "nvlink.tx [MiB/s], processes.count");
  CHECK(lines[1] == "1, [N/A], 4096 MiB, [N/A], [N/A], [N/A], [N/A], 0");
  CHECK(lines[2] == "0, 37 %, 9728 MiB, 1755 MHz, 41, 123.46 W, 8.0 MiB/s, 3");
  CHECK(lines[3] == lines[1]);
  CHECK(lines[4] == lines[2]);

  std::vector<std::string> bare = query;
  bare[1] = "csv,noheader,nounits";
  r = watch(bare);
  REQUIRE(r.exit_code == 0);
  lines = lines_of(r.out);
  REQUIRE(lines.size() == 4);
  CHECK(lines[1] == "0, 37, 9728, 1755, 41, 123.46, 8.0, 3");
}

TEST_CASE("watch: -d selects the GPUs sampled", "[query][watch]") {
  for (const char* selector : {"1", "GPU-c1"}) {
    const query_test::process_result r =
        watch({"--json", "--watch-count", "2", "--watch-interval", "0.05", "-d", selector, "--watch-query", "index"});
    INFO(selector << ": " << r.err);
    REQUIRE(r.exit_code == 0);
    const std::vector<std::string> lines = lines_of(r.out);
    REQUIRE(lines.size() == 2);
    for (const std::string& line : lines) {
      CHECK(query_test::parse(line)["ordinal"] == 1);
    }
  }
  const query_test::process_result none = watch({"--watch-count", "1", "-d", "7"});
  CHECK(none.exit_code == 1);
  CHECK(contains(none.err, "valid selectors"));
}

TEST_CASE("watch: --watch-count and --watch-duration bound the samples, due on a steady schedule", "[query][watch]") {
  auto samples = [](const query_test::process_result& r) {
    std::vector<double> elapsed;
    for (const std::string& line : lines_of(r.out)) elapsed.push_back(query_test::parse(line)["elapsed"]);
    return elapsed;
  };
  const auto start = std::chrono::steady_clock::now();
  query_test::process_result r =
      watch({"--json", "--watch-duration", "0.3", "--watch-interval", "0.05", "-d", "0", "--query", "elapsed"});
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(r.exit_code == 0);
  std::vector<double> elapsed = samples(r);
  // Whole intervals within the duration (fewer where a slot was missed on a loaded machine).
  REQUIRE(elapsed.size() >= 2);
  REQUIRE(elapsed.size() <= 6);
  for (std::size_t k = 0; k < elapsed.size(); ++k) {
    CHECK(elapsed[k] >= 0.05 * static_cast<double>(k + 1) - 1e-3);  // never before it is due
  }
  CHECK(took >= 0.3 - 1e-3);
  r = watch({"--json", "--watch-duration", "10", "--watch-count", "3", "--watch-interval", "0.05", "-d", "0", "--query",
             "elapsed"});
  REQUIRE(r.exit_code == 0);
  CHECK(samples(r).size() == 3);  // the count came first
  r = watch({"--json", "--watch-duration", "0.05", "--watch-count", "9", "--watch-interval", "1", "-d", "0"});
  REQUIRE(r.exit_code == 0);
  CHECK(samples(r).size() == 1);  // a duration below the interval still gives one sample
}

TEST_CASE("watch: SIGINT ends an unbounded watch cleanly with the last sample written", "[query][watch]") {
  query_test::temp_file out;
  const pid_t pid = start_query({"--watch", "--json", "--watch-interval", "0.05"}, fakes(), out);
  // Wait (bounded) until samples are coming, then interrupt.
  for (int i = 0; i < 200 && query_test::line_count(out.read()) < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const std::string text = out.read();
  REQUIRE_FALSE(text.empty());
  CHECK(text.back() == '\n');  // no half line
  const std::vector<std::string> lines = lines_of(text);
  CHECK(lines.size() % 2 == 0);  // whole samples: both GPUs of each
  for (const std::string& line : lines) {
    CHECK(query_test::parse(line)["view"] == "watch");
  }
}

TEST_CASE("watch: bad options are usage errors that say what to give", "[query][watch]") {
  struct bad {
    std::vector<std::string> args;
    const char* says;
  };
  const bad cases[] = {
      {{"--watch", "--query", "utilization.gpu,gpu.fan"}, "'gpu.fan' is not a field; valid fields: timestamp,"},
      {{"--watch", "--watch-query", ""}, "an empty field name"},
      {{"--watch-interval", "1"}, "--watch-interval applies to --watch only"},
      {{"--watch-query", "index"}, "applies to --watch only"},
      {{"--watch", "--details"}, "cannot be combined"},
      {{"--watch", "--watch-interval", "0.01"}, "out of range: give seconds from 0.05 to 86400"},
      {{"--watch", "--watch-interval", "0x10"}, "not a number of seconds"},
      {{"--watch", "--watch-interval", "nan"}, "not a number of seconds"},
      {{"--watch", "--watch-duration", "0"}, "out of range"},
      {{"--watch", "--watch-count", "0"}, "out of range"},
      {{"--watch", "--watch-format", "xml"}, "is not text, jsonl or csv"},
      {{"--watch", "--json", "--watch-format", "csv"}, "--json prints JSON lines with --watch"},
      {{"--watch", "--watch-format", "csv", "--watch-processes"}, "processes.count"},
  };
  for (const bad& b : cases) {
    const query_test::process_result r = run_query(b.args, fakes());
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, b.says));
    if (std::find(b.args.begin(), b.args.end(), "--json") != b.args.end()) {
      REQUIRE_SCHEMA_VALID(r.out);  // the usage-error document
      CHECK(query_test::parse(r.out)["status"] == "usage_error");
    } else {
      CHECK(r.out.empty());
    }
  }
}

TEST_CASE("watch: without NVML the run fails with status 4, as a document with --json", "[query][watch]") {
  const query_test::process_result r =
      run_query({"--watch", "--json", "--watch-count", "1"},
                {std::string("CUDRV_LIBCUDA=") + CUDRV_TEST_FAKE_CUDA, "CUDRV_LIBNVML=/nonexistent/libnvidia-ml.so.1"});
  CHECK(r.exit_code == 4);
  CHECK(contains(r.err, "--watch reads NVML, which is not usable"));
  REQUIRE_SCHEMA_VALID(r.out);
  const nlohmann::json j = query_test::parse(r.out);
  CHECK(j["view"] == "watch");
  CHECK(j["status"] == "cuda_error");
}

// --- review fixes (issue 36: watch) -------------------------------------------------------------------

namespace {

// The elapsed seconds of each JSON line.
std::vector<double> elapsed_of(const std::string& out) {
  std::vector<double> elapsed;
  for (const std::string& line : lines_of(out)) elapsed.push_back(query_test::parse(line)["elapsed"]);
  return elapsed;
}

}  // namespace

TEST_CASE("watch: a SIGINT ignored on entry (nohup, a background job) stays ignored", "[query][watch]") {
  query_test::temp_file out;
  const pid_t pid = start_query({"--watch", "--json", "--watch-interval", "0.05", "-d", "0"}, fakes(), out, SIGINT);
  for (int i = 0; i < 200 && query_test::line_count(out.read()) < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  kill(pid, SIGINT);
  const int at_interrupt = query_test::line_count(out.read());
  // Still sampling well after the SIGINT (bounded wait): it was not turned into a stop.
  for (int i = 0; i < 400 && query_test::line_count(out.read()) < at_interrupt + 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  CHECK(query_test::line_count(out.read()) >= at_interrupt + 4);
  kill(pid, SIGTERM);  // not ignored: ends the watch cleanly
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("watch: a second SIGINT acts as without cudrv-query's handler: by default it ends the process",
          "[query][watch]") {
  query_test::temp_file out;
  const pid_t pid =
      start_query({"--watch", "--json", "--watch-interval", "0.05", "-d", "1", "--query", "elapsed,nvlink.tx"},
                  {fakes()[0], fakes()[1], "FAKE_NVML_STALL=3:3000"}, out);
  // The first sample is written; the second one's NVLink reading then takes 3 s (the stand-in's stall).
  for (int i = 0; i < 200 && query_test::line_count(out.read()) < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(pid, SIGINT);  // asks for a stop once the sample is written...
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  kill(pid, SIGINT);  // ...and the second one does what SIGINT did before: SIG_DFL ends the process
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGINT);
  CHECK(query_test::line_count(out.read()) == 1);  // the stalled sample was never written
}

TEST_CASE("watch: slots missed during a slow sample are skipped, not made up in a burst", "[query][watch]") {
  // The stand-in's 3rd field query (the 2nd sample's NVLink reading; the 1st is the baseline) takes
  // 0.4 s more: 7 slots of 0.05 s pass during it.
  const query_test::process_result r = run_query({"--watch", "--json", "--watch-count", "6", "--watch-interval", "0.05",
                                                  "-d", "1", "--query", "elapsed,nvlink.tx"},
                                                 {fakes()[0], fakes()[1], "FAKE_NVML_STALL=3:400"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<double> elapsed = elapsed_of(r.out);
  REQUIRE(elapsed.size() == 6);
  bool stalled = false;
  for (std::size_t k = 1; k < elapsed.size(); ++k) {
    INFO("sample " << k + 1 << " at " << elapsed[k] << " s, the one before at " << elapsed[k - 1] << " s");
    // Samples keep to the slots of the start (k intervals in): never two in one slot. A sample that
    // starts late in its slot (a loaded or instrumented machine) may come less than an interval before
    // the next slot's, so the gap itself is not bounded below.
    const auto slot = [](double t) { return std::floor(t / 0.05 + 1e-6); };
    CHECK(slot(elapsed[k]) > slot(elapsed[k - 1]));
    stalled = stalled || elapsed[k] - elapsed[k - 1] >= 0.35;
  }
  CHECK(stalled);  // the slow sample happened
  for (const std::string& line : lines_of(r.out)) {
    CHECK(query_test::parse(line)["nvlink.tx"] == 8.0);  // the rates are NVML's, whatever the wait
  }
}

TEST_CASE("watch: --watch-duration stops on the clock, not after a number of samples", "[query][watch]") {
  // The 2nd sample takes 0.6 s: past the 0.3 s duration, so no sample follows it.
  const query_test::process_result r = run_query({"--watch", "--json", "--watch-duration", "0.3", "--watch-interval",
                                                  "0.05", "-d", "1", "--query", "elapsed,nvlink.tx"},
                                                 {fakes()[0], fakes()[1], "FAKE_NVML_STALL=3:600"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<double> elapsed = elapsed_of(r.out);
  REQUIRE_FALSE(elapsed.empty());
  CHECK(elapsed.size() <= 2);                       // 6 slots fit in the duration, but the clock ran past it
  for (double e : elapsed) CHECK(e <= 0.3 + 0.25);  // every sample started within the duration (with slack)
}

TEST_CASE("watch: a GPU without NVLink is not asked for its NVLink counters at every sample", "[query][watch]") {
  query_test::temp_file counts;
  // CUDA device 0 is the stand-in's index 1, which supports no NVLink reading.
  const query_test::process_result r = run_query({"--watch", "--json", "--watch-count", "5", "--watch-interval", "0.05",
                                                  "-d", "0", "--query", "nvlink.tx"},
                                                 {fakes()[0], fakes()[1], "FAKE_NVML_COUNTS=" + counts.path()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(lines.size() == 5);
  for (const std::string& line : lines) CHECK(query_test::parse(line)["nvlink.tx"].is_null());
  std::map<std::string, long long> calls;
  std::istringstream in(counts.read());
  std::string name;
  long long n = 0;
  while (in >> name >> n) calls[name] = n;
  INFO(counts.read());
  REQUIRE(calls.count("nvmlShutdown") == 1);  // the counts were written
  // The first reading only: two field queries (every link: throughput, then bytes) and a state query
  // per link (NVML_NVLINK_MAX_LINKS); not again for the 5 samples.
  CHECK(calls["nvmlDeviceGetFieldValues"] == 2);
  CHECK(calls["nvmlDeviceGetNvLinkState"] == 18);
}

#endif

TEST_CASE("watch: --help lists the watch options", "[query][watch]") {
  const query_test::process_result r = run_query({"--help"}, {query_test::no_driver});
  REQUIRE(r.exit_code == 0);
  for (const char* part : {"--watch ", "--watch-interval", "--watch-count", "--watch-duration", "--watch-format",
                           "--watch-query", "--query", "--watch-processes", "JSON lines", "SIGINT"}) {
    INFO(part);
    CHECK(contains(r.out, part));
  }
}

TEST_CASE("watch: without a driver --json prints the document of the watch view", "[query][watch]") {
  const query_test::process_result r = run_query({"--watch", "--json", "--watch-count", "1"}, {query_test::no_driver});
  CHECK(r.exit_code == 2);
  REQUIRE_SCHEMA_VALID(r.out);
  const nlohmann::json j = query_test::parse(r.out);
  CHECK(j["view"] == "watch");
  CHECK(j["status"] == "no_driver");
}
