// libFuzzer target: cudrv-query's command line, and what it does on a machine without a driver.
//
// Input: the arguments after the program name, each ended by a NUL byte (a last one without its NUL
// counts too). Each command line goes through cudrv_query::parse_command_line() (CLI11 and the -d
// selector checks), which must return, never exit; a parsed one is then run on the driver-less path
// (CUDRV_LIBCUDA and CUDRV_LIBNVML name files that do not exist, so nothing is loaded on any machine),
// and its selectors are matched against two made-up devices, whose every view is printed as text and
// JSON. Output goes to string streams. Invariants: the exit statuses are those of the manual, a usage
// error writes one line starting "cudrv-query: " (and on out nothing, or with --json its JSON
// document), and a driver-less run exits with status 2.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "query.hpp"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_query_args: %s\n%s\n", what, detail.c_str());
  std::abort();
}

cudrv_query::system_info two_devices() {
  cudrv_query::system_info info;
  info.driver_available = true;
  info.driver_version = 13000;
  for (int i = 0; i < 2; ++i) {
    cudrv_query::device_info d;
    d.ordinal = i;
    d.name = "Fuzz GPU " + std::to_string(i);
    d.cc_major = 9;
    d.multiprocessors = 132;
    d.total_memory = std::size_t{80} << 30;
    d.uuid = i == 0 ? "GPU-8f3a1b2c-0000-1111-2222-333344445555" : "GPU-8f3a9999-aaaa-bbbb-cccc-ddddeeeeffff";
    d.pci_bus_id = i == 0 ? "0000:c1:00.0" : "0000:41:00.0";
    info.devices.push_back(d);
  }
  info.device_count = 2;
  return info;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Never a real driver or NVML, whatever the machine has: the driver-less path is what is fuzzed.
  ::setenv("CUDRV_LIBCUDA", "/nonexistent/cudrv-fuzz/libcuda.so.1", 1);
  ::setenv("CUDRV_LIBNVML", "/nonexistent/cudrv-fuzz/libnvidia-ml.so.1", 1);
  ::setenv("CUDRV_LIBNVRTC", "/nonexistent/cudrv-fuzz/libnvrtc.so", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"cudrv-query"};
  std::string current;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(std::move(current));
      current.clear();
    } else {
      current += static_cast<char>(data[i]);
    }
  }
  if (!current.empty()) {
    args.push_back(std::move(current));
  }
  if (args.size() > 64) {
    return -1;  // not worth the time: CLI11 treats every argument alike
  }
  std::vector<const char*> argv;
  for (const auto& a : args) {
    argv.push_back(a.c_str());
  }
  argv.push_back(nullptr);

  std::ostringstream out;
  std::ostringstream err;
  const auto parsed = cudrv_query::parse_command_line(static_cast<int>(args.size()), argv.data(), out, err);
  if (const int* status = std::get_if<int>(&parsed)) {
    if (*status != cudrv_query::exit_ok && *status != cudrv_query::exit_usage) {
      fail("parse_command_line returned a status that is neither 0 nor 1", err.str());
    }
    if (*status == cudrv_query::exit_usage && err.str().rfind("cudrv-query: ", 0) != 0) {
      fail("a usage error does not start with 'cudrv-query: '", err.str());
    }
    // With --json, a usage error's document; without, nothing on out.
    const std::string o = out.str();
    if (*status == cudrv_query::exit_usage && !o.empty() &&
        (o.rfind("{\n", 0) != 0 || o.find("\"status\": \"usage_error\"") == std::string::npos)) {
      fail("a usage error printed something other than its JSON document on out", o);
    }
    return 0;
  }
  const cudrv_query::command_line& cmd = std::get<cudrv_query::command_line>(parsed);
  if (cmd.v == cudrv_query::view::inspect) {
    return 0;  // issue 36: inspect reads the file named (fuzz_inspect feeds its reader); no driver is involved
  }

  // The driver-less run: collect() finds no driver.
  std::ostringstream run_out;
  std::ostringstream run_err;
  const int status = cudrv_query::run(cmd, run_out, run_err, false);
  if (status != cudrv_query::exit_no_driver) {
    fail("a driver-less run did not exit with status 2", run_err.str());
  }

  // The same command line against two made-up devices: selection and every output.
  cudrv_query::system_info info = two_devices();
  const std::optional<cudrv_query::failure> bad = cudrv_query::select_devices(info.devices, cmd.selectors);
  if (bad && bad->status != cudrv_query::exit_usage) {
    fail("a selector that matches no device is not a usage error", bad->message);
  }
  std::ostringstream text;
  cudrv_query::print_text(text, info, cmd.v, {cmd.color == "always"});
  (void)cudrv_query::to_json(info, cmd.v, bad ? &*bad : nullptr);
  return 0;
}
