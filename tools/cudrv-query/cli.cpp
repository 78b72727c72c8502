// cudrv-query: the command line and the run of a view (main.cpp only calls run()). See
// docs/cudrv-query.md for the manual.
//
// Exit statuses are listed in query.hpp (exit_status), the --help footer and the manual. Every
// failure prints one line on err starting "cudrv-query: "; with --json a JSON document that says
// what went wrong is printed on out as well (except for command lines that cannot be parsed).
// Nothing here exits the process: --help, --version and usage errors return their status, so that
// the fuzz target fuzz/fuzz_query_args.cpp can call parse_command_line() and run() in-process.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <ostream>
#include <string>
#include <utility>
#include <variant>

#include <CLI/CLI.hpp>
#include <cudrv/driver.hpp>
#include <cudrv/error.hpp>
#include <cudrv/version.hpp>

#include "query.hpp"

namespace cudrv_query {

namespace {

constexpr const char* description =
    "cudrv-query: the CUDA driver, the toolkit cudrv-query was built with, and the visible devices.\n"
    "\n"
    "Views (one at a time; the default is the summary table):\n"
    "  (none)     driver, toolkit, NVRTC and NVML versions; one row per device\n"
    "  --details  every device attribute, grouped, with names and units; NVML data when present\n"
    "  --p2p      the peer-access matrix and the attributes of each link\n"
    "  --bench    copy bandwidths, launch latency and peer-to-peer bandwidth, timed with CUDA events\n"
    "\n"
    "Only --bench creates CUDA contexts; the other views read attributes, which needs none.";

constexpr const char* footer_text =
    "Device selectors (-d, repeatable or comma-separated):\n"
    "  0                    a CUDA ordinal (after CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER)\n"
    "  GPU-8f3a...          a UUID or any prefix of one (also MIG-...)\n"
    "  0000:c1:00.0         a PCI bus id, as CUDA (0000:c1:00.0) or nvidia-smi (00000000:C1:00.0) writes it\n"
    "\n"
    "Exit status:\n"
    "  0  success\n"
    "  1  usage error (bad option or value, or a -d that matches no device)\n"
    "  2  no usable CUDA driver (libcuda.so.1 not found, or cuInit failed)\n"
    "  3  the CUDA driver sees no device\n"
    "  4  a CUDA error occurred while querying or measuring\n"
    "  5  the output could not be written (a full disk, a closed pipe)\n"
    "\n"
    "Environment:\n"
    "  CUDA_VISIBLE_DEVICES  selects and orders the visible devices; the ordinals printed are CUDA's\n"
    "  CUDA_DEVICE_ORDER     FASTEST_FIRST (default) or PCI_BUS_ID\n"
    "  NO_COLOR              when set and not empty, no colours (unless --color=always)\n"
    "  CUDRV_LIBCUDA         the driver library to load instead of libcuda.so.1\n"
    "  CUDRV_LIBNVML         the NVML library to load instead of libnvidia-ml.so.1\n"
    "  CUDRV_LIBNVRTC        the NVRTC library to load (see the cudrv documentation)\n"
    "\n"
    "JSON: --json prints one document (schema_version 1, docs/cudrv-query.schema.json) for every view,\n"
    "also when the run fails (status, exit_code and error say why).";

/// The system's reason for a failed write, when errno holds one a write gives (a full disk, a pipe
/// without a reader, a closed descriptor); nullptr for anything else, which a later call may have left.
const char* write_failure_reason(int e) {
  switch (e) {
    case EPIPE:
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
    case EIO:
    case EBADF:
    case ECONNRESET: return std::strerror(e);
    default: return nullptr;
  }
}

/// Flushes @p out and returns @p status, or exit_output_error with one line on @p err when a run that
/// succeeded lost its output: a write that failed (a full disk, a pipe whose reader is gone while
/// SIGPIPE is ignored) leaves the stream failed, whether it failed in an earlier flush (CLI11 ends
/// --help and --version with std::endl) or in this one. A run that failed already keeps its status and
/// its one line.
int check_output(std::ostream& out, std::ostream& err, int status) {
  if (out.good()) {
    errno = 0;  // a failure of this flush leaves its own reason
  }
  out.flush();
  if (out.good() || status != exit_ok) {
    return status;
  }
  const char* reason = write_failure_reason(errno);
  err << "cudrv-query: the output could not be written" << (reason != nullptr ? std::string(": ") + reason : "")
      << '\n';
  err.flush();
  return exit_output_error;
}

/// Prints the outcome and returns the exit status.
int finish(std::ostream& out, std::ostream& err, const system_info& info, view v, bool json, const text_style& style,
           const failure* error) {
  if (error != nullptr && error->status != exit_ok) {
    std::string line = "cudrv-query: " + error->message;
    if (!error->valid_selectors.empty()) {
      line += "; valid selectors:";
      for (std::size_t i = 0; i < error->valid_selectors.size(); ++i) {
        line += (i == 0 ? " " : " | ") + error->valid_selectors[i];
      }
    }
    std::replace(line.begin(), line.end(), '\n', ' ');  // one line, whatever the driver said
    err << line << '\n';
  }
  if (json) {
    out << to_json(info, v, error);
  } else if (error == nullptr || error->status == exit_ok) {
    print_text(out, info, v, style);
  }
  return check_output(out, err, error != nullptr ? error->status : exit_ok);
}

// --version: the tool (its headers), the linked library, the driver's CUDA version (loading the
// driver if there is one) and the toolkit the tool was compiled with.
std::string version_text() {
  std::string out = std::string("cudrv-query ") + CUDRV_VERSION_STRING + "\n";
  out += std::string("cudrv library: ") + cudrv::version_string() + "\n";
  const int driver = cudrv::driver::version();
  out += "CUDA driver: " + (driver > 0 ? "CUDA " + format_cuda_version(driver) : std::string("not available")) + "\n";
  out += "CUDA toolkit (built with): CUDA " + format_cuda_version(CUDA_VERSION);
  return out;
}

}  // namespace

std::variant<command_line, int> parse_command_line(int argc, const char* const* argv, std::ostream& out,
                                                   std::ostream& err) {
  CLI::App app{description, "cudrv-query"};
  app.set_version_flag("--version", version_text,
                       "Print the versions of cudrv-query, the cudrv library, the driver and the toolkit, and exit");
  app.footer(footer_text);
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("cudrv-query: ") + e.what() + " (run with --help for usage)\n";
  });

  std::vector<std::string> selectors;
  bool details = false;
  bool p2p = false;
  bool bench = false;
  bool json = false;
  std::string color = "auto";
  bench_options bench_opts;
  bool no_progress = false;

  app.add_option("-d,--device", selectors, "Only these devices: ordinal, UUID (prefix) or PCI bus id")
      ->delimiter(',')
      ->type_name("SELECTOR");
  auto* details_flag = app.add_flag("--details", details, "Every attribute of each device, grouped");
  auto* p2p_flag = app.add_flag("--p2p", p2p, "The peer-access matrix and P2P attributes");
  auto* bench_flag = app.add_flag("--bench", bench, "Measure copy bandwidths and launch latency");
  details_flag->excludes(p2p_flag)->excludes(bench_flag);
  p2p_flag->excludes(bench_flag);
  app.add_flag("--json", json, "Print JSON (schema_version 1) instead of text");
  app.add_option("--color", color, "Colours in the text output: auto (a terminal, NO_COLOR unset), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  app.add_option("--bench-size", bench_opts.size, "Bytes per copy for --bench, e.g. 64M, 1G (default 64M)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 40))
      ->needs(bench_flag);
  app.add_option("--bench-iterations", bench_opts.iterations, "Copies per timed trial (x100 launches; default 10)")
      ->check(CLI::Range(1, 100000))
      ->needs(bench_flag);
  app.add_option("--bench-trials", bench_opts.trials, "Timed trials; the median is reported (default 5)")
      ->check(CLI::Range(1, 1000))
      ->needs(bench_flag);
  app.add_flag("--no-progress", no_progress, "No progress line on stderr during --bench")->needs(bench_flag);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive here too, with exit code 0.
    return app.exit(e, out, err) == 0 ? exit_ok : exit_usage;
  }
  command_line cmd;
  cmd.selectors = std::move(selectors);
  cmd.json = json;
  cmd.color = std::move(color);
  cmd.bench = bench_opts;
  cmd.bench.progress = !no_progress;
  cmd.v = details ? view::details : p2p ? view::p2p : bench ? view::bench : view::summary;
  // A selector that cannot be one is a usage error before the driver is loaded (as the other bad
  // arguments are); whether it matches a device is checked after.
  for (const std::string& text : cmd.selectors) {
    std::string problem;
    if (!parse_selector(text, problem)) {
      err << "cudrv-query: --device: " << problem << " (run with --help for usage)\n";
      return exit_usage;
    }
  }
  return cmd;
}

int run(const command_line& cmd, std::ostream& out, std::ostream& err, bool out_is_terminal) {
  const view v = cmd.v;
  const bool json = cmd.json;
  const std::vector<std::string>& selectors = cmd.selectors;
  const bench_options& bench_opts = cmd.bench;
  const char* no_color = std::getenv("NO_COLOR");
  const char* term = std::getenv("TERM");
  text_style style{
      color_wanted(cmd.color, no_color != nullptr ? no_color : "", term != nullptr ? term : "", out_is_terminal)};

  system_info info;
  read_environment(info);
  failure error;
  try {
    // The summary shows NVML's memory figures only and the NVRTC version cudrv-query was built
    // with, and asks for no more: every NVML call and loading NVRTC add to the start-up time
    // (docs/performance.md). The other views read all of it and load NVRTC.
    collect_options options;
    if (v == view::summary) {
      options.nvml = nvml_fields::memory;
      options.nvrtc = false;
    }
    info = collect(options);
    if (!info.driver_available) {
      error = {exit_no_driver, "no usable CUDA driver: " + info.unavailable_reason, {}};
      return finish(out, err, info, v, json, style, &error);
    }
    if (info.devices.empty()) {
      std::string message = "the CUDA driver (CUDA " + format_cuda_version(info.driver_version) + ") sees no device";
      if (info.visible_devices) {
        message += " (CUDA_VISIBLE_DEVICES=\"" + *info.visible_devices + "\")";
      }
      error = {exit_no_device, message, {}};
      return finish(out, err, info, v, json, style, &error);
    }
    if (std::optional<failure> bad = select_devices(info.devices, selectors)) {
      return finish(out, err, info, v, json, style, &*bad);
    }
    switch (v) {
      case view::summary: break;
      case view::details: collect_attributes(info); break;
      case view::p2p: collect_p2p(info); break;
      case view::bench: info.bench = run_bench(info, bench_opts); break;
    }
  } catch (const cudrv::error& e) {
    if (info.driver_version == 0) {  // collect() itself failed: say at least what the driver is
      info.driver_available = cudrv::driver::available();
      info.driver_version = cudrv::driver::version();
      info.driver_library = cudrv::driver::library_path();
    }
    error = {exit_cuda_error, std::string("CUDA error: ") + e.what(), {}};
    return finish(out, err, info, v, json, style, &error);
  } catch (const std::bad_alloc&) {
    error = {exit_cuda_error,
             "out of host memory" + (v == view::bench ? " (try a smaller --bench-size)" : std::string()),
             {}};
    return finish(out, err, info, v, json, style, &error);
  } catch (const std::exception& e) {
    error = {exit_cuda_error, std::string("error: ") + e.what(), {}};
    return finish(out, err, info, v, json, style, &error);
  }
  return finish(out, err, info, v, json, style, nullptr);
}

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err, bool out_is_terminal) {
  std::variant<command_line, int> parsed = parse_command_line(argc, argv, out, err);
  if (const int* status = std::get_if<int>(&parsed)) {
    return check_output(out, err, *status);  // --help and --version print on out too
  }
  return run(std::get<command_line>(parsed), out, err, out_is_terminal);
}

}  // namespace cudrv_query
