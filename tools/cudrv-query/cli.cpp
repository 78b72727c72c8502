// cudrv-query: the command line and the run of a view (main.cpp only calls run()). See
// docs/cudrv-query.md for the manual.
//
// Exit statuses are listed in query.hpp (exit_status), the --help footer and the manual. Every
// failure prints one line on err starting "cudrv-query: "; with --json a JSON document that says
// what went wrong is printed on out as well, also for a command line that cannot be parsed (CLI11's
// own messages are replaced by the tool's: see usage_message()).
// Nothing here exits the process: --help, --version and usage errors return their status, so that
// the fuzz target fuzz/fuzz_query_args.cpp can call parse_command_line() and run() in-process.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>
#include <cudrv/driver.hpp>
#include <cudrv/error.hpp>
#include <cudrv/version.hpp>

#include "inspect.hpp"
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
    "  --topo     the link matrix of the GPUs and RDMA NICs (nvidia-smi's X, NV#, PIX, PXB, PHB, NODE,\n"
    "             SYS), each GPU's CPU and NUMA affinity\n"
    "  --watch    sample utilization, memory, power, clocks, temperature, PCIe and NVLink traffic and\n"
    "             processes through NVML at an interval (text, JSON lines or CSV), until a bound or Ctrl-C\n"
    "  --bandwidth  nvbandwidth's copy patterns (copy engine and SM copies) and pointer-chase latency\n"
    "  --inspect FILE  the images (SASS, PTX) of a cubin, fatbin, PTX or host ELF file and each kernel's\n"
    "             resources (registers, shared, constant, local memory, launch bounds); needs no driver\n"
    "\n"
    "Only --bench and --bandwidth create CUDA contexts; the other views read attributes, which needs none.";

constexpr const char* footer_text =
    "Device selectors (-d, repeatable or comma-separated):\n"
    "  0                    a CUDA ordinal (after CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER)\n"
    "  GPU-8f3a...          a UUID or any prefix of one (also MIG-...)\n"
    "  0000:c1:00.0         a PCI bus id, as CUDA (0000:c1:00.0) or nvidia-smi (00000000:C1:00.0) writes it\n"
    "\n"
    "Exit status:\n"
    "  0  success\n"
    "  1  usage error (bad option or value, a -d that matches no device, an --inspect FILE that cannot be read)\n"
    "  2  no usable CUDA driver (libcuda.so.1 not found, or cuInit failed)\n"
    "  3  the CUDA driver sees no device\n"
    "  4  a CUDA error occurred while querying or measuring (--inspect: FILE is not a well-formed image)\n"
    "  5  the output could not be written (a full disk, a closed pipe)\n"
    "\n"
    "Environment:\n"
    "  CUDA_VISIBLE_DEVICES  selects and orders the visible devices; the ordinals printed are CUDA's\n"
    "  CUDA_DEVICE_ORDER     FASTEST_FIRST (default) or PCI_BUS_ID\n"
    "  NO_COLOR              when set and not empty, no colours (unless --color=always)\n"
    "  CUDRV_LIBCUDA         the driver library to load instead of libcuda.so.1\n"
    "  CUDRV_LIBNVML         the NVML library to load instead of libnvidia-ml.so.1\n"
    "  CUDRV_LIBNVRTC        the NVRTC library to load (see the cudrv documentation)\n"
    "  CUDRV_QUERY_SYSFS_ROOT  for tests only: read sysfs (--topo's NICs, PCI paths) here, not in /sys\n"
    "  CUDRV_QUERY_BANDWIDTH_UNGATED  for tests only: --bandwidth starts each copy as it is enqueued\n"
    "\n"
    "JSON: --json prints one document (schema_version 1, docs/cudrv-query.schema.json) for every view,\n"
    "also when the run fails (status, exit_code and error say why), a usage error included; with\n"
    "--version it prints the versions as a document. With --watch it prints JSON lines: one object per\n"
    "GPU per sample ($defs/watch_sample of the schema); a failure before the first sample is a document.\n"
    "\n"
    "Watch: samples come one --watch-interval apart on a steady clock, the first one interval after the\n"
    "start; a slot missed by a slow sample is skipped, not made up. --watch-count and --watch-duration\n"
    "(on the clock) bound them (the first reached ends the run); Ctrl-C (SIGINT) or SIGTERM ends the\n"
    "run after the sample in progress is written, with status 0 (a second one acts as without\n"
    "cudrv-query; an ignored signal stays ignored). The --watch-... options need --watch.";

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
version_info read_versions() {
  version_info v;
  v.tool = CUDRV_VERSION_STRING;
  v.library = cudrv::version_string();
  v.driver_available = cudrv::driver::available();
  v.driver_version = cudrv::driver::version();
  v.driver_library = cudrv::driver::library_path();
  if (!v.driver_available) {
    v.unavailable_reason = cudrv::driver::unavailable_reason();
  }
  return v;
}

/// What the value of each option is, for the messages of a missing or a bad value.
struct value_hint {
  std::string_view option;  ///< the long name, as CLI11 names it in its errors
  const char* value;        ///< what to give
};
constexpr value_hint value_hints[] = {
    {"--device", "an ordinal (0), a UUID or its prefix (GPU-8f3a) or a PCI bus id (0000:c1:00.0)"},
    {"--color", "auto, always or never"},
    {"--bench-size", "a size in bytes, optionally with a unit K, M, G or T (powers of 1024), e.g. 64M"},
    {"--bench-iterations", "a whole number from 1 to 100000"},
    {"--bench-trials", "a whole number from 1 to 1000"},
    // issue 36: watch
    {"--watch-interval", "seconds from 0.05 to 86400, e.g. 0.5"},
    {"--watch-count", "a whole number from 1 to 1000000000"},
    {"--watch-duration", "seconds from 0.05 to 2678400 (31 days)"},
    {"--watch-format", "text, jsonl or csv[,noheader][,nounits]"},
    {"--watch-query", "comma-separated field names, e.g. index,utilization.gpu,memory.used"},
    // issue 36: bandwidth
    {"--bandwidth-size", "a size in bytes, optionally with a unit K, M, G or T (powers of 1024), e.g. 512M"},
    {"--bandwidth-iterations", "a whole number from 1 to 100000"},
    {"--bandwidth-samples", "a whole number from 1 to 1000"},
    {"--bandwidth-tests", "test names separated by commas (--help lists them)"},
    {"--inspect", "the path of a cubin, fatbin, PTX or host ELF file"},  // issue 36: inspect
};

/// What to give to @p option (a long name), or nullptr for a flag.
const char* value_hint_for(std::string_view option) {
  for (const value_hint& h : value_hints) {
    if (h.option == option) {
      return h.value;
    }
  }
  return nullptr;
}

/// The first option CLI11 names in its message ("--color: …", "Could not convert: --details = …"),
/// or empty.
std::string_view option_named_in(std::string_view message) {
  for (std::size_t at = 0; at + 1 < message.size(); ++at) {
    const bool word_start = at == 0 || message[at - 1] == ' ';
    const auto next = static_cast<unsigned char>(message[at + 1]);
    if (word_start && message[at] == '-' && (next == '-' || std::isalpha(next) != 0)) {
      const std::size_t end = message.find_first_of(" :,=", at);
      return message.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    }
  }
  return {};
}

/// Arguments CLI11 left over (allow_extras): an unknown option or a positional argument.
std::string unexpected_arguments_message(const std::vector<std::string>& rest) {
  const std::string& first = rest.front();
  std::string message = first.size() > 1 && first[0] == '-'
                            ? "unknown option '" + first.substr(0, first.find('=')) + "'"
                            : "unexpected argument '" + first + "': cudrv-query takes no positional arguments";
  if (rest.size() > 1) {
    message +=
        " (and " + std::to_string(rest.size() - 1) + " more unexpected argument" + (rest.size() > 2 ? "s" : "") + ")";
  }
  return message;
}

/// The tool's message for a CLI11 parse error, without the "cudrv-query: " prefix: CLI11's wording
/// ("The following argument was not expected", "… unit not recognized. Allowed values: {…}") is
/// replaced. The validators of the options write their own messages (bad values); this handles a
/// missing value, a value given to a flag, views combined and a --bench-… option without --bench.
std::string usage_message(const CLI::ParseError& e) {
  const std::string what = e.what();
  const std::string_view option = option_named_in(what);
  if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr) {
    return what;  // "--color: " + the message of a validator below
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr && !option.empty()) {
    const char* hint = value_hint_for(option);
    return std::string(option) + " needs a value" + (hint != nullptr ? std::string(": ") + hint : std::string());
  }
  if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr && !option.empty()) {
    return std::string(option) + " takes no value (give " + std::string(option) + " alone)";
  }
  if (dynamic_cast<const CLI::ExcludesError*>(&e) != nullptr) {
    if (const std::size_t at = what.find(" excludes "); at != std::string::npos) {
      return what.substr(0, at) + " and " + what.substr(at + 10) + " cannot be combined: one view at a time";
    }
  }
  if (dynamic_cast<const CLI::RequiresError*>(&e) != nullptr) {
    if (const std::size_t at = what.find(" requires "); at != std::string::npos) {
      return what.substr(0, at) + " applies to " + what.substr(at + 10) + " only: add " + what.substr(at + 10);
    }
  }
  return what;
}

/// Whether the command line asks for JSON: an argument "--json" (or "--json=" and a true value) before
/// any "--". Read from argv, not from CLI11's result, so that a command line CLI11 refuses part-way
/// still gets its document.
bool asks_for_json(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i] != nullptr ? argv[i] : "";
    if (arg == "--") {
      return false;
    }
    if (arg == "--json") {
      return true;
    }
    if (arg.rfind("--json=", 0) == 0) {  // --json=true, --json=0: a flag's value, read as CLI11 reads it
      try {
        return CLI::detail::to_flag_value(std::string(arg.substr(7))) > 0;
      } catch (const std::exception&) {
        return false;  // not a flag value: a usage error, in text
      }
    }
  }
  return false;
}

/// A validator's result: empty when @p text is a whole number in [@p min, @p max], else what is wrong.
std::string check_count(const std::string& text, long long min, long long max) {
  long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string range = "give a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  if (text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size()) {
    return "'" + text + "' is not a whole number: " + range;
  }
  if (ec == std::errc::result_out_of_range || value < min || value > max) {
    return "'" + text + "' is out of range: " + range;
  }
  return {};
}

/// A validator's result: empty when @p text is a number of seconds in [@p min, @p max] (fractions
/// allowed), else what is wrong. (issue 36: watch)
std::string check_seconds(const std::string& text, double min, double max) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  char bounds[96];
  std::snprintf(bounds, sizeof(bounds), "give seconds from %g to %g", min, max);
  const std::string range = bounds;
  const bool decimal = text.find_first_not_of("0123456789.eE+-") == std::string::npos;
  if (text.empty() || !decimal || end != text.c_str() + text.size()) {
    return "'" + text + "' is not a number of seconds: " + range;
  }
  if (errno == ERANGE || !(value >= min && value <= max)) {
    return "'" + text + "' is out of range: " + range;
  }
  return {};
}

/// The transform of --bench-size: "64M" (units K, M, G, T, any case, with an optional B or iB,
/// powers of 1024) becomes its number of bytes; a value that is not a size, or is 0 or above 1 TiB,
/// gets a message.
std::string to_size(std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])) != 0) {
    ++digits;
  }
  std::string unit;
  for (char c : text.substr(digits)) {
    unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  int shift = -1;
  for (const auto& [name, bits] :
       {std::pair<const char*, int>{"", 0}, {"b", 0}, {"k", 10}, {"m", 20}, {"g", 30}, {"t", 40}}) {
    const std::string n = name;
    if (unit == n || (!n.empty() && n != "b" && (unit == n + "b" || unit == n + "ib"))) {
      shift = bits;
    }
  }
  const char* sizes = ": give a size in bytes, optionally with a unit K, M, G or T (powers of 1024), e.g. 64M";
  unsigned long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + digits, value);
  if (digits == 0 || shift < 0) {
    return "'" + text + "' is not a size" + sizes;
  }
  constexpr unsigned long long max = 1ULL << 40;
  if (ec != std::errc() || end != text.data() + digits || value == 0 || value > (max >> shift)) {
    return "'" + text + "' is out of range: give 1 byte to 1T";
  }
  text = std::to_string(value << shift);
  return {};
}

/// The -d values, each split at its commas. Every element must be a selector: an empty one ('', '0,',
/// ',0', '0,,1') is a usage error, as is an element that cannot be one; whether it matches a device is
/// checked after the driver is loaded.
bool split_selectors(const std::vector<std::string>& values, std::vector<std::string>& selectors,
                     std::string& problem) {
  for (const std::string& value : values) {
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = value.find(',', start);
      std::string element = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (element.empty()) {
        problem =
            "--device: an empty selector in '" + value + "' (selectors are separated by single commas, e.g. -d 0,1)";
        return false;
      }
      std::string why;
      if (!parse_selector(element, why)) {
        problem = "--device: " + why;
        return false;
      }
      selectors.push_back(std::move(element));
      if (comma == std::string::npos) {
        break;
      }
      start = comma + 1;
    }
  }
  return true;
}

// issue 36: bandwidth
/// The footer's list of the --bandwidth tests, several names to a line.
std::string bandwidth_tests_footer() {
  std::string out = "\n\nBandwidth tests (--bandwidth-tests; nvbandwidth's names, see docs/cudrv-query.md):\n";
  std::string line = " ";
  for (const bandwidth_test_desc& t : all_bandwidth_tests()) {
    if (line.size() + std::char_traits<char>::length(t.name) + 1 > 100) {
      out += line + "\n";
      line = " ";
    }
    line += std::string(" ") + t.name;
  }
  return out + line;
}

/// The bandwidth view on the selected devices.
bandwidth_results run_bandwidth_view(const system_info& info, const bandwidth_options& options) {
  std::vector<int> ordinals;
  std::vector<std::string> bus_ids;
  for (const device_info& d : info.devices) {
    ordinals.push_back(d.ordinal);
    bus_ids.push_back(d.pci_bus_id);
  }
  return run_bandwidth(ordinals, bus_ids, options);
}

}  // namespace

std::string version_text(const version_info& v) {
  std::string out = "cudrv-query " + v.tool + "\n";
  out += "cudrv library: " + v.library + "\n";
  out += "CUDA driver: " +
         (v.driver_version > 0 ? "CUDA " + format_cuda_version(v.driver_version) : std::string("not available")) + "\n";
  out += "CUDA toolkit (built with): CUDA " + format_cuda_version(v.toolkit_version);
  return out;
}

std::variant<command_line, int> parse_command_line(int argc, const char* const* argv, std::ostream& out,
                                                   std::ostream& err) {
  const bool json_wanted = asks_for_json(argc, argv);
  // Every usage error: one line on err, and with --json the document that says so on out.
  auto usage_error = [&](std::string message) {
    std::replace(message.begin(), message.end(), '\n', ' ');
    err << "cudrv-query: " << message << " (run with --help for usage)\n";
    if (json_wanted) {
      out << usage_error_to_json(message);
    }
    return static_cast<int>(exit_usage);
  };

  CLI::App app{description, "cudrv-query"};
  // The text is printed when CallForVersion is caught below, as JSON with --json.
  app.set_version_flag(
      "--version", [] { return std::string(); },
      "Print the versions of cudrv-query, the cudrv library, the driver and the toolkit (JSON with --json), and exit");
  app.footer(footer_text);
  app.allow_extras();  // unknown arguments are reported below, in the tool's words

  std::vector<std::string> device_values;
  bool details = false;
  bool p2p = false;
  bool bench = false;
  bool json = false;
  std::string color = "auto";
  bench_options bench_opts;
  bool no_progress = false;

  app.add_option("-d,--device", device_values, "Only these devices: ordinal, UUID (prefix) or PCI bus id")
      ->type_name("SELECTOR[,SELECTOR...]");
  auto* details_flag = app.add_flag("--details", details, "Every attribute of each device, grouped");
  auto* p2p_flag = app.add_flag("--p2p", p2p, "The peer-access matrix and P2P attributes");
  auto* bench_flag = app.add_flag("--bench", bench, "Measure copy bandwidths and launch latency");
  details_flag->excludes(p2p_flag)->excludes(bench_flag);
  p2p_flag->excludes(bench_flag);
  // issue 36: topology
  bool topo = false;
  auto* topo_flag = app.add_flag("--topo", topo, "The link matrix of the GPUs and NICs, CPU and NUMA affinity");
  topo_flag->excludes(details_flag)->excludes(p2p_flag)->excludes(bench_flag);
  // issue 36: inspect
  std::string inspect_file;
  auto* inspect_opt =
      app.add_option("--inspect", inspect_file, "The images and kernel resources of a cubin, fatbin, PTX or ELF file")
          ->type_name("FILE")
          ->excludes(details_flag)
          ->excludes(p2p_flag)
          ->excludes(bench_flag);
  app.add_flag("--json", json, "Print JSON (schema_version 1) instead of text, also for failures");
  app.add_option("--color", color, "Colours in the text output: auto (a terminal, NO_COLOR unset), always, never")
      ->type_name("WHEN")
      ->check(CLI::Validator(
          [](const std::string& v) {
            return v == "auto" || v == "always" || v == "never" ? std::string()
                                                                : "'" + v + "' is not auto, always or never";
          },
          ""));
  app.add_option("--bench-size", bench_opts.size, "Bytes per copy for --bench, e.g. 64M, 1G (default 64M)")
      ->type_name("BYTES")
      ->transform(CLI::Validator(to_size, ""))
      ->needs(bench_flag);
  app.add_option("--bench-iterations", bench_opts.iterations, "Copies per timed trial (x100 launches; default 10)")
      ->type_name("N")
      ->check(CLI::Validator([](const std::string& v) { return check_count(v, 1, 100000); }, ""))
      ->needs(bench_flag);
  app.add_option("--bench-trials", bench_opts.trials, "Timed trials; the median is reported (default 5)")
      ->type_name("N")
      ->check(CLI::Validator([](const std::string& v) { return check_count(v, 1, 1000); }, ""))
      ->needs(bench_flag);
  app.add_flag("--no-progress", no_progress, "No progress line on stderr during --bench or --bandwidth");
  // issue 36: watch
  bool watch = false;
  std::string watch_format_text;
  std::string watch_query;
  watch_options watch_opts;
  auto* watch_flag =
      app.add_flag("--watch", watch, "Sample the GPUs through NVML at an interval (until a bound or Ctrl-C)");
  watch_flag->excludes(details_flag)->excludes(p2p_flag)->excludes(bench_flag)->excludes(topo_flag);
  app.add_option("--watch-interval", watch_opts.interval_s, "Seconds between samples, fractions allowed (default 1)")
      ->type_name("SECONDS")
      ->check(CLI::Validator([](const std::string& v) { return check_seconds(v, 0.05, 86400); }, ""))
      ->needs(watch_flag);
  app.add_option("--watch-count", watch_opts.count, "Stop after N samples (default: no bound)")
      ->type_name("N")
      ->check(CLI::Validator([](const std::string& v) { return check_count(v, 1, 1000000000); }, ""))
      ->needs(watch_flag);
  app.add_option("--watch-duration", watch_opts.duration_s,
                 "Stop after this many seconds: no sample is due past them (default: no bound)")
      ->type_name("SECONDS")
      ->check(CLI::Validator([](const std::string& v) { return check_seconds(v, 0.05, 2678400); }, ""))
      ->needs(watch_flag);
  app.add_option("--watch-format", watch_format_text,
                 "text (default), jsonl (one JSON object per GPU per sample), or csv[,noheader][,nounits]")
      ->type_name("FORMAT")
      ->check(CLI::Validator(
          [](const std::string& v) {
            watch_options scratch;
            return parse_watch_format(v, scratch);
          },
          ""))
      ->needs(watch_flag);
  std::string field_names;
  for (const watch_field_info& f : watch_fields()) {
    field_names += (field_names.empty() ? "" : ", ") + std::string(f.name);
  }
  app.add_option("--watch-query,--query", watch_query,
                 "The fields to show, comma-separated, nvidia-smi's --query-gpu names where it has one: " + field_names)
      ->type_name("FIELDS")
      ->needs(watch_flag);
  app.add_flag("--watch-processes", watch_opts.processes, "Each GPU's processes too (pid, name, memory)")
      ->needs(watch_flag);
  // issue 36: bandwidth
  bool bandwidth = false;
  bandwidth_options bandwidth_opts;
  auto* bandwidth_flag =
      app.add_flag("--bandwidth", bandwidth, "Measure nvbandwidth's copy patterns and pointer-chase latency");
  for (CLI::Option* other : {details_flag, p2p_flag, bench_flag, topo_flag, watch_flag}) {
    other->excludes(bandwidth_flag);
  }
  for (CLI::Option* other : {topo_flag, watch_flag, bandwidth_flag}) {  // the views of issue 36 with --inspect
    other->excludes(inspect_opt);
  }
  app.add_option("--bandwidth-size", bandwidth_opts.size,
                 "Bytes per copy for --bandwidth (default 512M, as nvbandwidth)")
      ->type_name("BYTES")
      ->transform(CLI::Validator(
          [](std::string& v) {
            const std::string original = v;
            std::string problem = to_size(v);
            if (problem.empty() && std::stoull(v) < (1ULL << 20)) {
              problem = "'" + original + "' is below 1M, the smallest size nvbandwidth measures";
            }
            return problem;
          },
          ""))
      ->needs(bandwidth_flag);
  app.add_option("--bandwidth-iterations", bandwidth_opts.iterations,
                 "Timed copies per sample (default 16; at most 1000 with CE tests)")
      ->type_name("N")
      ->check(CLI::Validator([](const std::string& v) { return check_count(v, 1, 100000); }, ""))
      ->needs(bandwidth_flag);
  app.add_option("--bandwidth-samples", bandwidth_opts.samples,
                 "Samples per figure; the median is reported (default 3)")
      ->type_name("N")
      ->check(CLI::Validator([](const std::string& v) { return check_count(v, 1, 1000); }, ""))
      ->needs(bandwidth_flag);
  app.add_option("--bandwidth-tests", bandwidth_opts.tests, "Only these tests (names below; default: all)")
      ->type_name("NAME[,NAME...]")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](const std::string& v) {
            std::vector<std::string> names;
            return parse_bandwidth_tests(v, names);
          },
          ""))
      ->needs(bandwidth_flag);
  app.footer(std::string(footer_text) + bandwidth_tests_footer());

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForVersion&) {
    const version_info versions = read_versions();
    out << (json_wanted ? version_to_json(versions) : version_text(versions) + "\n");
    return exit_ok;
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e, out, err) == 0 ? exit_ok : exit_usage;
  } catch (const CLI::ParseError& e) {
    return usage_error(usage_message(e));
  }
  if (!app.remaining().empty()) {
    return usage_error(unexpected_arguments_message(app.remaining()));
  }
  command_line cmd;
  // A selector that cannot be one is a usage error before the driver is loaded (as the other bad
  // arguments are); whether it matches a device is checked after.
  std::string problem;
  if (!split_selectors(device_values, cmd.selectors, problem)) {
    return usage_error(problem);
  }
  if (app.count("--inspect") > 0 && !cmd.selectors.empty()) {  // issue 36: inspect
    return usage_error("--device does not apply to --inspect, which reads a file and no device");
  }
  cmd.inspect_file = std::move(inspect_file);
  cmd.json = json;
  cmd.color = std::move(color);
  cmd.bench = bench_opts;
  cmd.bench.progress = !no_progress;
  cmd.v = details ? view::details : p2p ? view::p2p : bench ? view::bench : view::summary;
  if (topo) cmd.v = view::topo;  // issue 36: topology
  if (watch) {                   // issue 36: watch
    cmd.v = view::watch;
    if (!watch_format_text.empty()) {
      (void)parse_watch_format(watch_format_text, watch_opts);  // checked by its validator
    }
    if (json && !watch_format_text.empty() && watch_opts.format != watch_format::jsonl) {
      return usage_error("--json prints JSON lines with --watch: leave out --watch-format " + watch_format_text +
                         " or give --watch-format jsonl");
    }
    if (json) {
      watch_opts.format = watch_format::jsonl;
    }
    if (watch_opts.processes && watch_opts.format == watch_format::csv) {
      return usage_error("--watch-processes adds lines to the text and a list to JSON lines; CSV has one line per GPU: "
                         "use the field processes.count");
    }
    if (!watch_query.empty() || app.count("--watch-query") > 0) {
      std::string why;
      std::optional<std::vector<watch_field>> fields = parse_watch_query(watch_query, watch_opts.names, why);
      if (!fields) {
        return usage_error(why);
      }
      watch_opts.fields = std::move(*fields);
    }
    cmd.watch = std::move(watch_opts);
  }
  if (no_progress && !bench && !bandwidth) {
    return usage_error("--no-progress applies to --bench or --bandwidth only: add one of them");
  }
  // issue 36: bandwidth
  if (bandwidth) {
    cmd.v = view::bandwidth;
    cmd.bandwidth = bandwidth_opts;
    cmd.bandwidth.progress = !no_progress;
    if (const std::string problem = check_bandwidth_options(cmd.bandwidth); !problem.empty()) {
      return usage_error(problem);
    }
  }
  if (app.count("--inspect") > 0) {  // issue 36: inspect
    cmd.v = view::inspect;
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

  if (v == view::inspect) {  // issue 36: inspect: reads a file, loads no driver
    return check_output(out, err, run_inspect(cmd, out, err, style));
  }
  system_info info;
  read_environment(info);
  failure error;
  try {
    // The summary shows NVML's memory figures only and the NVRTC version cudrv-query was built
    // with, and asks for no more: every NVML call and loading NVRTC add to the start-up time
    // (docs/performance.md). The other views read all of it and load NVRTC.
    collect_options options;
    if (v == view::summary || v == view::watch) {  // watch reads NVML itself, at every sample
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
      case view::topo: info.topology = collect_topology(info, sysfs_root()); break;  // issue 36: topology
      case view::watch:                                                              // issue 36: watch
        if (!info.nvml.available) {
          error = {exit_cuda_error, "--watch reads NVML, which is not usable: " + info.nvml.reason, {}};
          return finish(out, err, info, v, json, style, &error);
        }
        return check_output(out, err, run_watch(info, cmd.watch, out));
      case view::bandwidth: info.bandwidth = run_bandwidth_view(info, cmd.bandwidth); break;  // issue 36: bandwidth
      case view::inspect: break;  // issue 36: inspect: handled above
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
             "out of host memory" + (v == view::bench       ? std::string(" (try a smaller --bench-size)")
                                     : v == view::bandwidth ? std::string(" (try a smaller --bandwidth-size)")
                                                            : std::string()),
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
