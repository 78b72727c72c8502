// cudrv-query's command line, run as a process, on any machine: --help, --version, usage errors,
// and the driver-less output (text and JSON of every view, exit status 2).
#include <catch2/catch.hpp>

#include <cuda.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>
#include <streambuf>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "query.hpp"
#include "query_test_support.hpp"

using query_test::no_driver;
using query_test::run_query;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void require_one_error_line(const query_test::process_result& r) {
  INFO("stderr: " << r.err);
  REQUIRE(query_test::line_count(r.err) == 1);
  CHECK(r.err.rfind("cudrv-query: ", 0) == 0);
}

// None of CLI11's own phrases: the tool says what went wrong in its own words.
void require_no_cli11_wording(const std::string& err) {
  INFO("stderr: " << err);
  for (const char* phrase :
       {"was not expected", "were not expected", "not recognized", "Allowed values", "required", "missing", "excludes",
        "requires", "Could not convert", "Should be true/false", "not in {", "Value ", "ValidationError"}) {
    INFO(phrase);
    CHECK_FALSE(contains(err, phrase));
  }
}

}  // namespace

TEST_CASE("option --help lists the options, selectors, exit statuses and environment", "[query][cli]") {
  auto r = run_query({"--help"}, {no_driver});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  for (const char* part :
       {"--device", "--details", "--p2p", "--bench", "--json", "--color", "--bench-size", "--bench-iterations",
        "--bench-trials", "--no-progress", "--version", "GPU-", "0000:c1:00.0", "NO_COLOR", "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER", "CUDRV_LIBNVML", "schema_version"}) {
    INFO(part);
    CHECK(contains(r.out, part));
  }
  for (int status = 0; status <= 5; ++status) {
    INFO("exit status " << status);
    CHECK(contains(r.out, "\n  " + std::to_string(status) + "  "));
  }
  CHECK(run_query({"-h"}, {no_driver}).out == r.out);
}

TEST_CASE("option --version prints the tool, library, driver and toolkit versions", "[query][cli]") {
  auto r = run_query({"--version"}, {no_driver});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  const std::string toolkit = std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10);
  CHECK(r.out == std::string("cudrv-query ") + CUDRV_TEST_VERSION + "\n" +  //
                     "cudrv library: " + CUDRV_TEST_VERSION + "\n" +        //
                     "CUDA driver: not available\n" +                       //
                     "CUDA toolkit (built with): CUDA " + toolkit + "\n");
}

TEST_CASE("usage errors exit with status 1 and one line on stderr, before the driver is loaded", "[query][cli]") {
  const std::vector<std::vector<std::string>> bad = {
      {"--no-such-option"},
      {"extra-argument"},
      {"-d"},
      {"--details", "--p2p"},
      {"--p2p", "--bench"},
      {"--bench", "--details"},
      {"--bench-size", "1M"},
      {"--bench", "--bench-size", "0"},
      {"--bench", "--bench-size", "12Q"},
      {"--bench", "--bench-iterations", "0"},
      {"--bench", "--bench-trials", "-3"},
      {"--color", "purple"},
      {"--no-progress"},
      {"-d", "foo"},
      {"-d", "0,GPU-xyz"},
      {"--device", "0000:c1:00.9"},
      {"-d", ""},
      {"-d", "0,"},
      {"-d", ",0"},
      {"-d", "0,,1"},
      {"--device=0,"},
      {"--details=maybe"},
      {"--bench", "--bench-iterations", "ten"},
      {"--", "--json"},
  };
  for (const auto& args : bad) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    INFO("cudrv-query " << joined);
    // With the driver hidden: a usage error must win over "no driver" (status 1, not 2).
    auto r = run_query(args, {no_driver});
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    require_one_error_line(r);
    CHECK(contains(r.err, "--help"));
    require_no_cli11_wording(r.err);
  }
}

TEST_CASE("usage errors are said in the tool's words, not CLI11's", "[query][cli]") {
  const std::string hint = " (run with --help for usage)\n";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--no-such-option"}, "unknown option '--no-such-option'"},
      {{"--no-such-option=3", "--details"}, "unknown option '--no-such-option'"},
      {{"extra-argument"}, "unexpected argument 'extra-argument': cudrv-query takes no positional arguments"},
      {{"one", "two", "three"},
       "unexpected argument 'one': cudrv-query takes no positional arguments (and 2 more unexpected arguments)"},
      {{"-d"},
       "--device needs a value: an ordinal (0), a UUID or its prefix (GPU-8f3a) or a PCI bus id (0000:c1:00.0)"},
      {{"--color"}, "--color needs a value: auto, always or never"},
      {{"--color", "purple"}, "--color: 'purple' is not auto, always or never"},
      {{"--bench", "--bench-size", "12Q"},
       "--bench-size: '12Q' is not a size: give a size in bytes, optionally with a unit K, M, G or T (powers of "
       "1024), e.g. 64M"},
      {{"--bench", "--bench-size", "0"}, "--bench-size: '0' is out of range: give 1 byte to 1T"},
      {{"--bench", "--bench-size", "2T"}, "--bench-size: '2T' is out of range: give 1 byte to 1T"},
      {{"--bench", "--bench-iterations", "0"},
       "--bench-iterations: '0' is out of range: give a whole number from 1 "
       "to 100000"},
      {{"--bench", "--bench-trials", "1.5"},
       "--bench-trials: '1.5' is not a whole number: give a whole number from 1 to 1000"},
      {{"--details", "--p2p"}, "--details and --p2p cannot be combined: one view at a time"},
      {{"--bench-size", "1M"}, "--bench-size applies to --bench only: add --bench"},
      {{"--details=maybe"}, "--details takes no value (give --details alone)"},
  };
  for (const auto& [args, message] : cases) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    INFO("cudrv-query " << joined);
    auto r = run_query(args, {no_driver});
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "cudrv-query: " + message + hint);
  }
}

TEST_CASE("option --bench-size takes bytes with the units K, M, G and T, powers of 1024", "[query][cli]") {
  const std::vector<std::pair<std::string, std::size_t>> sizes = {
      {"1", 1},           {"4096", 4096},      {"64M", std::size_t{64} << 20}, {"64m", std::size_t{64} << 20},
      {"64MB", 64 << 20}, {"64MiB", 64 << 20}, {"1G", std::size_t{1} << 30},   {"1T", std::size_t{1} << 40},
      {"2k", 2048},       {"100b", 100},
  };
  for (const auto& [text, bytes] : sizes) {
    INFO("--bench-size " << text);
    const char* argv[] = {"cudrv-query", "--bench", "--bench-size", text.c_str()};
    std::ostringstream out;
    std::ostringstream err;
    auto parsed = cudrv_query::parse_command_line(4, argv, out, err);
    INFO("stderr: " << err.str());
    REQUIRE(std::holds_alternative<cudrv_query::command_line>(parsed));
    CHECK(std::get<cudrv_query::command_line>(parsed).bench.size == bytes);
  }
}

TEST_CASE("with --json a usage error also prints the JSON document that says so", "[query][cli]") {
  const std::vector<std::vector<std::string>> bad = {
      {"--json", "--no-such-option"},
      {"extra-argument", "--json"},
      {"--json", "-d"},
      {"--json", "--details", "--p2p"},
      {"--json", "--color", "purple"},
      {"--json", "-d", "0,"},
      {"--json", "--bench", "--bench-size", "12Q"},
      {"--json", "-d", "foo"},
      {"--json", "--no-progress"},
      {"--json=true", "-d", ""},
  };
  for (const auto& args : bad) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    INFO("cudrv-query " << joined);
    auto r = run_query(args, {no_driver});
    CHECK(r.exit_code == 1);
    require_one_error_line(r);
    require_no_cli11_wording(r.err);
    REQUIRE_SCHEMA_VALID(r.out);
    nlohmann::json j = query_test::parse(r.out);
    CHECK(j["schema_version"] == 1);
    CHECK(j["tool"]["name"] == "cudrv-query");
    CHECK(j["tool"]["version"] == CUDRV_TEST_VERSION);
    CHECK(j["status"] == "usage_error");
    CHECK(j["exit_code"] == 1);
    // The message is the line on stderr, without the prefix and the pointer to --help.
    const std::string line = r.err.substr(0, r.err.size() - 1);
    CHECK("cudrv-query: " + j["error"]["message"].get<std::string>() + " (run with --help for usage)" == line);
    // Nothing was run: no view, no driver, no devices.
    for (const char* key : {"view", "driver", "toolkit", "devices", "device_count", "environment"}) {
      INFO(key);
      CHECK_FALSE(j.contains(key));
    }
  }
  // The same usage error without --json prints nothing on stdout (checked above); with the --json after
  // "--" it is an argument, not the option.
  auto after = run_query({"--", "--json"}, {no_driver});
  CHECK(after.exit_code == 1);
  CHECK(after.out.empty());
  auto off = run_query({"--json=false", "--no-such-option"}, {no_driver});
  CHECK(off.exit_code == 1);
  CHECK(off.out.empty());
}

TEST_CASE("option --version --json prints the versions as a JSON document", "[query][cli]") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--version", "--json"}, std::vector<std::string>{"--json", "--version"}}) {
    INFO("cudrv-query " << args[0] << " " << args[1]);
    auto r = run_query(args, {no_driver});
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.empty());
    REQUIRE_SCHEMA_VALID(r.out);
    nlohmann::json j = query_test::parse(r.out);
    CHECK(j["schema_version"] == 1);
    CHECK(j["view"] == "version");
    CHECK(j["status"] == "ok");
    CHECK(j["exit_code"] == 0);
    CHECK(j["tool"]["version"] == CUDRV_TEST_VERSION);
    CHECK(j["library"]["name"] == "cudrv");
    CHECK(j["library"]["version"] == CUDRV_TEST_VERSION);
    CHECK(j["driver"]["available"] == false);
    CHECK_FALSE(j["driver"].contains("cuda_version"));
    CHECK(contains(j["driver"]["unavailable_reason"].get<std::string>(), "/nonexistent/libcuda.so.1"));
    CHECK(j["toolkit"]["cuda_version"] == CUDA_VERSION);
    CHECK(j["toolkit"]["cuda_version_string"] ==
          std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10));
    CHECK_FALSE(j.contains("devices"));
  }
}

TEST_CASE("the documents of --version and of a usage error agree with the text and with the schema", "[query][cli]") {
  cudrv_query::version_info v;
  v.tool = "1.2.3";
  v.library = "1.2.4";
  v.driver_available = true;
  v.driver_version = 13000;
  v.driver_library = "/usr/lib/libcuda.so.1";
  v.toolkit_version = 12090;
  CHECK(cudrv_query::version_text(v) ==
        "cudrv-query 1.2.3\ncudrv library: 1.2.4\nCUDA driver: CUDA 13.0\nCUDA toolkit (built with): CUDA 12.9");
  const std::string doc = cudrv_query::version_to_json(v);
  REQUIRE_SCHEMA_VALID(doc);
  nlohmann::json j = query_test::parse(doc);
  CHECK(j["tool"]["version"] == "1.2.3");
  CHECK(j["library"]["version"] == "1.2.4");
  CHECK(j["driver"] == nlohmann::json{{"available", true},
                                      {"cuda_version", 13000},
                                      {"cuda_version_string", "13.0"},
                                      {"library", "/usr/lib/libcuda.so.1"}});
  CHECK(j["toolkit"]["cuda_version_string"] == "12.9");

  const std::string error = cudrv_query::usage_error_to_json("unknown option '--x'");
  REQUIRE_SCHEMA_VALID(error);
  CHECK(query_test::parse(error)["error"]["message"] == "unknown option '--x'");
  // The schema tells the kinds apart: a usage error with a view, or a version document with devices,
  // is none of them.
  nlohmann::json wrong = query_test::parse(error);
  wrong["view"] = "summary";
  bool valid = true;
  query_test::validate(wrong.dump(), valid);
  CHECK_FALSE(valid);
  wrong = j;
  wrong["devices"] = nlohmann::json::array();
  query_test::validate(wrong.dump(), valid);
  CHECK_FALSE(valid);
}

TEST_CASE("option -d: every comma-separated element must be a selector, an empty one anywhere refused",
          "[query][cli]") {
  for (const std::string& list : {std::string(""), std::string("0,"), std::string(",0"), std::string("0,,1"),
                                  std::string(","), std::string("GPU-8f3a,")}) {
    INFO("-d '" << list << "'");
    auto r = run_query({"-d", list}, {no_driver});
    CHECK(r.exit_code == 1);
    CHECK(r.err == "cudrv-query: --device: an empty selector in '" + list +
                       "' (selectors are separated by single commas, e.g. -d 0,1) (run with --help for usage)\n");
  }
  // An empty -d among good ones is refused too.
  auto r = run_query({"-d", "0", "-d", ""}, {no_driver});
  CHECK(r.exit_code == 1);
  CHECK(contains(r.err, "an empty selector in ''"));

  // A good list is split in order, each element kept as given; it passes the parse (without a driver the
  // run then exits 2).
  const char* argv[] = {"cudrv-query", "-d", "1,GPU-8f3a,0000:c1:00.0", "--device", "0"};
  std::ostringstream out;
  std::ostringstream err;
  auto parsed = cudrv_query::parse_command_line(5, argv, out, err);
  INFO("stderr: " << err.str());
  REQUIRE(std::holds_alternative<cudrv_query::command_line>(parsed));
  CHECK(std::get<cudrv_query::command_line>(parsed).selectors ==
        std::vector<std::string>{"1", "GPU-8f3a", "0000:c1:00.0", "0"});
  CHECK(run_query({"-d", "0,1"}, {no_driver}).exit_code == 2);
}

TEST_CASE("without a driver every view exits 2 with one line on stderr", "[query][cli]") {
  for (std::vector<std::string> args :
       {std::vector<std::string>{}, {"--details"}, {"--p2p"}, {"--bench"}, {"-d", "0"}, {"--color", "always"}}) {
    INFO(args.size());
    auto r = run_query(args, {no_driver});
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    require_one_error_line(r);
    CHECK(contains(r.err, "no usable CUDA driver"));
    CHECK(contains(r.err, "/nonexistent/libcuda.so.1"));
  }
}

TEST_CASE("without a driver --json prints a valid document that says why, for every view", "[query][cli]") {
  for (std::string v : {"summary", "details", "p2p", "bench"}) {
    INFO(v);
    std::vector<std::string> args{"--json"};
    if (v != "summary") args.push_back("--" + v);
    auto r = run_query(args, {no_driver, "CUDA_VISIBLE_DEVICES=0", "CUDRV_LIBNVML=/nonexistent/libnvidia-ml.so.1"},
                       {"CUDA_DEVICE_ORDER"});
    CHECK(r.exit_code == 2);
    require_one_error_line(r);
    REQUIRE_SCHEMA_VALID(r.out);
    nlohmann::json j = query_test::parse(r.out);
    CHECK(j["view"] == v);
    CHECK(j["status"] == "no_driver");
    CHECK(j["exit_code"] == 2);
    CHECK(j["driver"]["available"] == false);
    CHECK(contains(j["driver"]["unavailable_reason"].get<std::string>(), "/nonexistent/libcuda.so.1"));
    CHECK(contains(j["error"]["message"].get<std::string>(), "no usable CUDA driver"));
    CHECK(j["devices"].empty());
    CHECK(j["device_count"] == 0);
    CHECK(j["toolkit"]["cuda_version"] == CUDA_VERSION);
    CHECK(j["environment"]["CUDA_VISIBLE_DEVICES"] == "0");
    CHECK(j["environment"]["CUDA_DEVICE_ORDER"].is_null());
    CHECK(j["nvml"]["available"] == false);
    CHECK(contains(j["nvml"]["unavailable_reason"].get<std::string>(), "/nonexistent/libnvidia-ml.so.1"));
    CHECK_FALSE(j.contains("p2p"));
    CHECK_FALSE(j.contains("bench"));
  }
}

TEST_CASE("NVRTC: the summary gives the version built with, the other views the library's", "[query][cli]") {
  auto summary = query_test::parse(run_query({"--json"}, {no_driver}).out);
  CHECK(summary["nvrtc"]["built_with"]["cuda_version"] == CUDA_VERSION);
  CHECK_FALSE(summary["nvrtc"].contains("library"));  // not loaded: start-up time

  auto loaded = run_query({"--json", "--details"}, {no_driver});
  REQUIRE_SCHEMA_VALID(loaded.out);
  nlohmann::json j = query_test::parse(loaded.out);
  CHECK(j["nvrtc"]["library"]["available"] == true);
  CHECK(j["nvrtc"]["library"]["version"].get<int>() >= 12000);

  auto missing = run_query({"--json", "--p2p"}, {no_driver, "CUDRV_LIBNVRTC=/nonexistent/libnvrtc.so"});
  CHECK(missing.exit_code == 2);
  REQUIRE_SCHEMA_VALID(missing.out);
  j = query_test::parse(missing.out);
  CHECK(j["nvrtc"]["library"]["available"] == false);
  CHECK(contains(j["nvrtc"]["library"]["unavailable_reason"].get<std::string>(), "/nonexistent/libnvrtc.so"));
}

TEST_CASE("environment values that are not UTF-8 still give a valid JSON document", "[query][cli]") {
  auto r = run_query({"--json"}, {no_driver, "CUDA_VISIBLE_DEVICES=\xff"
                                             "0"});
  CHECK(r.exit_code == 2);
  REQUIRE_SCHEMA_VALID(r.out);
  CHECK(query_test::parse(r.out)["environment"]["CUDA_VISIBLE_DEVICES"] == "\xef\xbf\xbd"
                                                                           "0");
}

// --- lost output: exit status 5 -------------------------------------------------------------------------

TEST_CASE("output that cannot be written is exit status 5 and one line on stderr: /dev/full", "[query][cli]") {
  const int full = open("/dev/full", O_WRONLY);
  if (full < 0) {
    WARN("no /dev/full on this machine: the case checks nothing");
    return;
  }
  // Successful runs whose text is lost: --version, --help, and the JSON of a run without a driver would
  // be status 2 (a failure keeps its status and its one line: checked last).
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--version"}, {"--help"}}) {
    INFO("cudrv-query " << args.front());
    auto r = query_test::run_query_to(full, args, {no_driver});
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 5);
    require_one_error_line(r);
    CHECK(r.err == "cudrv-query: the output could not be written: No space left on device\n");
  }
  auto failed = query_test::run_query_to(full, {"--json"}, {no_driver});
  INFO("stderr: " << failed.err);
  CHECK(failed.exit_code == 2);
  require_one_error_line(failed);
  CHECK(contains(failed.err, "no usable CUDA driver"));
  close(full);
}

TEST_CASE("output into a pipe whose reader is gone, SIGPIPE ignored, is exit status 5", "[query][cli]") {
  int fds[2] = {-1, -1};
  REQUIRE(pipe(fds) == 0);
  close(fds[0]);  // no reader: every write fails with EPIPE (the child ignores SIGPIPE)
  auto r = query_test::run_query_to(fds[1], {"--version"}, {no_driver}, true);
  close(fds[1]);
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 5);
  require_one_error_line(r);
  CHECK(r.err == "cudrv-query: the output could not be written: Broken pipe\n");
}

namespace {
// A stream buffer that takes nothing: every write fails, as on a full disk.
struct refusing_buffer : std::streambuf {
  int_type overflow(int_type) override { return traits_type::eof(); }
  std::streamsize xsputn(const char*, std::streamsize) override { return 0; }
};
}  // namespace

TEST_CASE("run() in-process: a stream that refuses the output gives exit_output_error, a usage error keeps its status",
          "[query][cli]") {
  refusing_buffer refusing;
  std::ostream out(&refusing);
  std::ostringstream err;
  const char* version[] = {"cudrv-query", "--version"};
  errno = 0;  // the stream buffer sets none: the line then gives no reason
  CHECK(cudrv_query::run(2, version, out, err, false) == cudrv_query::exit_output_error);
  CHECK(err.str() == "cudrv-query: the output could not be written\n");

  // A failed run keeps its status and its one line, whether or not out took anything.
  std::ostream out2(&refusing);
  std::ostringstream err2;
  const char* bad[] = {"cudrv-query", "--no-such-option"};
  CHECK(cudrv_query::run(2, bad, out2, err2, false) == cudrv_query::exit_usage);
  INFO("stderr: " << err2.str());
  CHECK(query_test::line_count(err2.str()) == 1);
  CHECK_FALSE(contains(err2.str(), "could not be written"));
}
