// cudrv_failure_sweep: every failure path of the scenarios (scenarios.cpp), against the stand-in driver
// (CUDRV_LIBCUDA). For each scenario it first runs the scenario once to count the driver calls it makes
// (N_d, every entry-point call the stand-in driver counts, on any thread) and the host allocations of its
// thread (N_h, through the replaced operator new: host_allocations.cpp); then, for k = 1..N_d, it runs the
// scenario with driver call k failing with CUDA_ERROR_UNKNOWN (kind "driver"), for each k whose call is
// an allocation with CUDA_ERROR_OUT_OF_MEMORY (kind "oom"), and for k = 1..N_h with allocation k throwing
// std::bad_alloc (kind "host"). Each run is a child process of its own (fork before any cudrv call of the
// parent, which never loads the driver), so that a crash, an std::terminate or a hang is reported with
// the scenario and k that caused it, and each run starts from the same state.
//
// What each run must show (anything else is a finding, printed with scenario, kind, k and what happened):
//   - the scenario completes, or throws a cudrv::error (driver and oom kinds; an out_of_memory_error for
//     oom) or std::bad_alloc or a cudrv::error (host kind): no other exception, no std::terminate, no
//     crash, no hang;
//   - a driver failure the scenario completes in spite of went to the destruction handler, or is one of
//     the documented no-throw paths listed in documented_no_throw below;
//   - no context is left current that was not current before (unless the destruction handler was told
//     that restoring it failed);
//   - the scenario, run again unarmed in the same process, completes (a failure leaves cudrv usable), and
//     the stand-in driver's live objects are then those of a process that ran it twice unarmed, except for
//     at most as many leftovers as the destruction handler received reports (a destroy call that failed
//     leaves its object: printed as a "reported leak", not a finding); no file descriptor is left open;
//   - LeakSanitizer (in a sanitizer build) finds no host memory leaked.
//
// A self-test runs first: an injected allocation and driver failure, a crash and (with LeakSanitizer) a
// leak made on purpose must each be seen as such.
//
//   cudrv_failure_sweep                      every point of every scenario (scripts/failure-sweep.sh)
//   cudrv_failure_sweep --sample 16 --jobs 2 at most 16 points per scenario and kind, spread evenly over
//                                            it (the CI test; first_use is swept whole all the same)
//   cudrv_failure_sweep --scenario streams --kinds host --point 7 --verbose    one run, with its output
//   cudrv_failure_sweep --list
// In a sanitizer build, FAKE_CUDA_INJECTION_STACK=1 (driver kinds) or CUDRV_SWEEP_ALLOCATION_STACK=1
// (host kind) with --verbose prints the stack of the call that fails. Exit status: 0 when nothing was
// found, 1 on any finding, 2 on a usage error or a failed self-test.
#include <cudrv/cudrv.hpp>

#include <cxxabi.h>
#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <new>
#include <set>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "failure_sweep/host_allocations.hpp"
#include "failure_sweep/scenarios.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define CUDRV_SWEEP_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDRV_SWEEP_LSAN 1
#endif
#endif
#ifdef CUDRV_SWEEP_LSAN
#include <sanitizer/lsan_interface.h>
#endif

namespace {

using cudrv::sweep::scenario;

// --- what is injected ----------------------------------------------------------------------------------

enum class kind { driver, oom, host };

const char* kind_name(kind k) {
  switch (k) {
    case kind::driver: return "driver";
    case kind::oom: return "oom";
    case kind::host: return "host";
  }
  return "?";
}

// The allocation entry points, which the oom kind fails with CUDA_ERROR_OUT_OF_MEMORY.
bool is_allocation_call(const std::string& api) {
  static const std::set<std::string> allocations = {
      "cuMemAlloc",      "cuMemAllocAsync",       "cuMemAllocFromPoolAsync",
      "cuMemHostAlloc",  "cuMemAllocManaged",     "cuMemAllocPitch",
      "cuMemCreate",     "cuMemAddressReserve",   "cuMemPoolCreate",
      "cuArray3DCreate", "cuMipmappedArrayCreate"};
  return allocations.count(api) != 0;
}

// Driver failures a scenario may complete in spite of without telling the destruction handler: cudrv's
// documented no-throw paths (docs/reliability.md, "Failure injection", lists them with the reason),
// keyed by the entry point that failed and the scenario ("*": any), which is as precise as the sweep can
// tell the call site without a stack.
struct no_throw_path {
  const char* api;
  const char* scenario;
  const char* why;
};
const no_throw_path documented_no_throw[] = {
    {"cuCtxGetDevice", "*",
     "a buffer's device, read right after its allocation: when the driver cannot say, it is looked up again from "
     "the buffer's context when properties() needs it"},
    {"cuCtxGetId", "*",
     "a context token: a context whose id cannot be read is taken to live as long as the process (context_token)"},
    {"cuDeviceGetAttribute", "first_use",
     "the default pool's release threshold, set at a device's first use and after a reset of its primary context: "
     "best effort"},
    {"cuDeviceGetDefaultMemPool", "first_use", "the same"},
    {"cuMemPoolGetAttribute", "first_use", "the same"},
    {"cuMemPoolSetAttribute", "first_use", "the same"},
    {"cuDeviceGetAttribute", "primary_context_reset", "the same"},
    {"cuDeviceGetDefaultMemPool", "primary_context_reset", "the same"},
    {"cuMemPoolGetAttribute", "primary_context_reset", "the same"},
    {"cuMemPoolSetAttribute", "primary_context_reset", "the same"},
};

bool is_documented_no_throw(const std::string& api, const std::string& scenario) {
  for (const no_throw_path& p : documented_no_throw) {
    if (api == p.api && (std::strcmp(p.scenario, "*") == 0 || scenario == p.scenario)) {
      return true;
    }
  }
  return false;
}

// --- the stand-in driver's hooks ---------------------------------------------------------------------------

struct fake_hooks {
  void (*inject)(long long, CUresult, int) = nullptr;
  long long (*disarm)() = nullptr;
  const char* (*injected_api)() = nullptr;
  const char* (*trace_name)(long long) = nullptr;
  int (*in_entry_point)() = nullptr;
  CUcontext (*current_context)() = nullptr;
  std::size_t (*live_objects)(char*, std::size_t) = nullptr;

  // Loads the library CUDRV_LIBCUDA names (the one cudrv loads later) and resolves the hooks.
  bool load(std::string& why) {
    const char* path = std::getenv("CUDRV_LIBCUDA");
    if (path == nullptr || *path == '\0') {
      why = "CUDRV_LIBCUDA is not set: run with the stand-in driver (tests/fake_driver)";
      return false;
    }
    void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      why = std::string("cannot load ") + path + ": " + dlerror();
      return false;
    }
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (fn == nullptr) {
        why = std::string(path) + " has no " + name + ": it is not the stand-in driver";
      }
      return fn != nullptr;
    };
    return get(inject, "fake_cuda_inject_failure") && get(disarm, "fake_cuda_disarm") &&
           get(injected_api, "fake_cuda_injected_api") && get(trace_name, "fake_cuda_trace_name") &&
           get(in_entry_point, "fake_cuda_in_entry_point") && get(current_context, "fake_cuda_current_context") &&
           get(live_objects, "fake_cuda_live_objects");
  }
};

fake_hooks fake;

// --- the child's side ----------------------------------------------------------------------------------

constexpr int result_fd = 3;  // where a child writes its result lines

void emit(const std::string& line) {
  const std::string text = line + "\n";
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(result_fd, p, left);
    if (n <= 0) {
      return;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

// One line, no allocation (for std::terminate).
void emit_raw(const char* a, const char* b) noexcept {
  (void)!::write(result_fd, a, std::strlen(a));
  (void)!::write(result_fd, b, std::strlen(b));
  (void)!::write(result_fd, "\n", 1);
}

// What the destruction handler received: a count and the first APIs, without allocating.
std::atomic<int> reports{0};
constexpr int kept_reports = 16;
char report_apis[kept_reports][64];

void count_report(const cudrv::error& e) noexcept {
  const int i = reports.fetch_add(1);
  if (i < kept_reports) {
    std::snprintf(report_apis[i], sizeof(report_apis[i]), "%s", e.api().c_str());
  }
}

[[noreturn]] void on_terminate() noexcept {
  const char* what = "no exception";
  const std::exception_ptr e = std::current_exception();  // keeps what() valid to the end
  if (e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = x.what();
    } catch (...) {
      what = "an exception that is not a std::exception";
    }
  }
  emit_raw("terminate ", what);
  std::abort();
}

std::string type_name(const std::type_info& t) {
  int status = 0;
  char* name = abi::__cxa_demangle(t.name(), nullptr, nullptr, &status);
  std::string out = status == 0 && name != nullptr ? name : t.name();
  std::free(name);
  return out;
}

std::string first_line(const char* text) {
  std::string s = text;
  if (auto nl = s.find('\n'); nl != std::string::npos) {
    s.resize(nl);
  }
  return s.size() > 300 ? s.substr(0, 300) + "..." : s;
}

// Lets what the run left behind settle before anything is measured: host callables still queued (a
// failed synchronisation returns before they ran) and cudrv's disposals of finished ones (which may
// report to the destruction handler). Unarmed; a driver that cannot be used is left alone.
void settle() noexcept {
  try {
    if (cudrv::driver::available()) {
      cudrv::device(1).synchronize();
    }
  } catch (...) {
  }
}

void disarm_all() noexcept {
  fake.disarm();
  cudrv::sweep::disarm_host_allocations();
}

struct outcome {
  std::string what;    // completed, cudrv_error, bad_alloc, other
  std::string detail;  // the exception's type and message
};

// Runs the scenario, disarming at its end however it ends.
outcome run_scenario(const scenario& s) {
  try {
    s.run();
    disarm_all();
    return {"completed", ""};
  } catch (const cudrv::error& e) {
    disarm_all();
    return {"cudrv_error", type_name(typeid(e)) + " " + e.api() + " " + e.name() + ": " + first_line(e.what())};
  } catch (const std::bad_alloc& e) {
    disarm_all();
    return {"bad_alloc", type_name(typeid(e))};
  } catch (const std::exception& e) {
    disarm_all();
    return {"other", type_name(typeid(e)) + ": " + first_line(e.what())};
  } catch (...) {
    disarm_all();
    return {"other", "an exception that is not a std::exception"};
  }
}

using live_map = std::map<std::string, long long>;

int open_descriptors() {
  int n = 0;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (const dirent* entry = ::readdir(dir)) {
      n += entry->d_name[0] != '.' ? 1 : 0;
    }
    ::closedir(dir);
    --n;  // the directory's own descriptor
  }
  return n;
}

live_map live_objects() {
  live_map out;
  std::string text(fake.live_objects(nullptr, 0) + 1, '\0');
  text.resize(fake.live_objects(text.data(), text.size()));
  std::istringstream in(text);
  std::string name;
  long long n = 0;
  while (in >> name >> n) {
    out[name] = n;
  }
  out["file_descriptors"] = open_descriptors();
  return out;
}

void emit_live(const char* tag, const live_map& live) {
  for (const auto& [name, n] : live) {
    emit(std::string(tag) + " " + name + " " + std::to_string(n));
  }
}

struct job {
  const scenario* s = nullptr;
  kind what = kind::driver;
  long long point = 0;  // 0: the counting run
};

// The child: runs one job and writes its result lines; never returns.
[[noreturn]] void child_main(const job& j, unsigned timeout_seconds) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::alarm(timeout_seconds);
  std::set_terminate(&on_terminate);
  std::string why;
  if (!fake.load(why)) {
    emit("setup_failed " + why);
    ::_exit(0);
  }
  cudrv::sweep::set_driver_probe(fake.in_entry_point);
  cudrv::set_destruction_error_handler(&count_report);
  if (!j.s->cold) {
    try {
      cudrv::sweep::warm_up();
    } catch (const std::exception& e) {
      emit(std::string("setup_failed the warm-up threw: ") + e.what());
      ::_exit(0);
    }
  }
  const CUcontext before = fake.current_context();
  const bool counting = j.point == 0;
  // Both counts run in every run, the one not injected into with nothing to fail, so that every run
  // costs the same: where a scenario's calls come from two threads, their order depends on timing.
  const long long host_point = !counting && j.what == kind::host ? j.point : 0;
  const long long driver_point = !counting && j.what != kind::host ? j.point : 0;
  fake.inject(driver_point, j.what == kind::oom ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN, 1);
  cudrv::sweep::arm_host_allocations(host_point);
  const outcome first = run_scenario(*j.s);
  const long long calls = fake.disarm();
  const long long allocations = cudrv::sweep::disarm_host_allocations();
  const char* failed_api = fake.injected_api();
  settle();
  const bool fired = j.what == kind::host ? cudrv::sweep::host_allocation_failed() : failed_api != nullptr;
  emit("outcome " + first.what);
  emit("detail " + first.detail);
  emit("calls " + std::to_string(calls));
  emit("allocations " + std::to_string(allocations));
  emit(std::string("fired ") + (fired ? "1" : "0"));
  if (failed_api != nullptr) {
    emit(std::string("failed_api ") + failed_api);
  }
  if (counting) {
    for (long long k = 1; k <= calls; ++k) {
      const char* name = fake.trace_name(k);
      emit("trace " + std::to_string(k) + " " + (name != nullptr ? name : "?"));
    }
    emit_live("live_once", live_objects());
  }
  const CUcontext after = fake.current_context();
  emit(std::string("context_left ") + (after != before ? "1" : "0"));
  if (after != before) {  // so that the second run starts as the first did
    auto set = reinterpret_cast<CUresult (*)(CUcontext)>(cudrv::driver::get_entry_point("cuCtxSetCurrent", 4000));
    set(before);
  }
  const int first_reports = reports.load();
  emit("reports " + std::to_string(first_reports));
  for (int i = 0; i < std::min(first_reports, kept_reports); ++i) {
    emit(std::string("report_api ") + report_apis[i]);
  }
  const outcome again = run_scenario(*j.s);
  settle();
  emit("rerun " + again.what + (again.detail.empty() ? "" : " " + again.detail));
  emit("rerun_reports " + std::to_string(reports.load() - first_reports));
  emit_live("live", live_objects());
#ifdef CUDRV_SWEEP_LSAN
  emit(std::string("host_leaks ") + (__lsan_do_recoverable_leak_check() != 0 ? "1" : "0"));
#endif
  emit("done");
  ::_exit(0);
}

// --- the parent's side ---------------------------------------------------------------------------------

struct result {
  int status = 0;                                  // from waitpid
  std::multimap<std::string, std::string> fields;  // the child's lines, by first word
  std::string output;                              // the tail of its stdout and stderr
  [[nodiscard]] std::string get(const std::string& key, const std::string& otherwise = "") const {
    auto it = fields.find(key);
    return it != fields.end() ? it->second : otherwise;
  }
  [[nodiscard]] long long number(const std::string& key) const { return std::atoll(get(key, "0").c_str()); }
  [[nodiscard]] bool has(const std::string& key) const { return fields.count(key) != 0; }
  [[nodiscard]] std::vector<std::string> all(const std::string& key) const {
    std::vector<std::string> out;
    for (auto [it, end] = fields.equal_range(key); it != end; ++it) {
      out.push_back(it->second);
    }
    return out;
  }
  [[nodiscard]] live_map live(const std::string& key) const {
    live_map out;
    for (const std::string& line : all(key)) {
      const auto space = line.rfind(' ');
      out[line.substr(0, space)] = std::atoll(line.c_str() + space + 1);
    }
    return out;
  }
};

std::string read_all(int fd, std::size_t keep_tail) {
  std::string out;
  char buffer[65536];
  off_t offset = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buffer, sizeof(buffer), offset);
    if (n <= 0) {
      break;
    }
    out.append(buffer, static_cast<std::size_t>(n));
    offset += n;
    if (keep_tail != 0 && out.size() > 4 * keep_tail) {
      out.erase(0, out.size() - keep_tail);
    }
  }
  if (keep_tail != 0 && out.size() > keep_tail) {
    out.erase(0, out.size() - keep_tail);
  }
  return out;
}

result parse(int status, const std::string& lines, std::string output) {
  result r;
  r.status = status;
  r.output = std::move(output);
  std::istringstream in(lines);
  for (std::string line; std::getline(in, line);) {
    const auto space = line.find(' ');
    r.fields.emplace(line.substr(0, space), space == std::string::npos ? "" : line.substr(space + 1));
  }
  return r;
}

// Runs the jobs, at most `parallel` children at once; the results come back in the jobs' order.
std::vector<result> run_jobs(const std::vector<job>& jobs, int parallel, unsigned timeout_seconds) {
  struct running {
    std::size_t index;
    int lines_fd;
    int output_fd;
  };
  std::vector<result> results(jobs.size());
  std::map<pid_t, running> children;
  std::size_t next = 0;
  std::fflush(stdout);
  std::fflush(stderr);
  while (next < jobs.size() || !children.empty()) {
    while (next < jobs.size() && static_cast<int>(children.size()) < parallel) {
      const int lines_fd = ::memfd_create("cudrv-sweep-result", 0);
      const int output_fd = ::memfd_create("cudrv-sweep-output", 0);
      if (lines_fd < 0 || output_fd < 0) {
        std::perror("cudrv_failure_sweep: memfd_create");
        std::exit(2);
      }
      const pid_t pid = ::fork();
      if (pid < 0) {
        std::perror("cudrv_failure_sweep: fork");
        std::exit(2);
      }
      if (pid == 0) {
        ::dup2(output_fd, 1);
        ::dup2(output_fd, 2);
        ::dup2(lines_fd, result_fd);
        ::close_range(result_fd + 1, ~0u, 0);  // the same descriptors in every child
        child_main(jobs[next], timeout_seconds);
      }
      children[pid] = {next, lines_fd, output_fd};
      ++next;
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      std::perror("cudrv_failure_sweep: waitpid");
      std::exit(2);
    }
    auto it = children.find(pid);
    if (it == children.end()) {
      continue;
    }
    const running r = it->second;
    children.erase(it);
    results[r.index] = parse(status, read_all(r.lines_fd, 0), read_all(r.output_fd, 6000));
    ::close(r.lines_fd);
    ::close(r.output_fd);
  }
  return results;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return std::string("killed by signal ") + std::to_string(sig) + " (" + strsignal(sig) + ")" +
           (sig == SIGALRM ? ": it ran past the time limit (a hang?)" : "");
  }
  if (WIFEXITED(status)) {
    return "exit status " + std::to_string(WEXITSTATUS(status));
  }
  return "status " + std::to_string(status);
}

std::string indent(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    out += "      | " + line + "\n";
  }
  return out;
}

// --- judging a run ---------------------------------------------------------------------------------------

struct verdict {
  std::vector<std::string> findings;
  std::string reported_leak;  // non-empty: leftovers the destruction handler was told of
  std::string note;           // something worth a look that is not a finding
};

std::string live_difference(const live_map& got, const live_map& want, long long* extra, bool* fewer) {
  std::string text;
  *extra = 0;
  *fewer = false;
  std::set<std::string> names;
  for (const auto& [name, n] : got) {
    names.insert(name);
  }
  for (const auto& [name, n] : want) {
    names.insert(name);
  }
  for (const std::string& name : names) {
    const long long g = got.count(name) != 0 ? got.at(name) : 0;
    const long long w = want.count(name) != 0 ? want.at(name) : 0;
    if (g == w) {
      continue;
    }
    text += (text.empty() ? "" : ", ") + name + " " + (g > w ? "+" : "") + std::to_string(g - w);
    if (g > w) {
      *extra += g - w;
    } else {
      *fewer = true;
    }
  }
  return text;
}

verdict judge(const job& j, const result& r, const live_map& reference, const std::string& expected_api) {
  verdict v;
  if (!r.has("done")) {
    std::string why = r.has("terminate") ? "std::terminate (" + r.get("terminate") + ")" : describe_status(r.status);
    if (r.has("setup_failed")) {
      why = "the run could not be set up: " + r.get("setup_failed");
    }
    v.findings.push_back("the process died: " + why + "\n" + indent(r.output));
    return v;
  }
  const std::string outcome = r.get("outcome");
  const std::string failed_api = r.get("failed_api");
  const bool fired = r.get("fired") == "1";
  if (!fired) {
    v.note = "the injection was not reached (the scenario's calls differ from the counting run's)";
  } else if (j.what != kind::host && failed_api != expected_api) {
    v.note = "call " + std::to_string(j.point) + " was " + failed_api + " here but " + expected_api +
             " in the counting run (not deterministic)";
  }
  const bool driver_kind = j.what != kind::host;
  if (outcome == "other" || (driver_kind && outcome == "bad_alloc")) {
    const std::string expected = driver_kind ? "cudrv::error" : "cudrv::error or std::bad_alloc";
    v.findings.push_back("an exception that is not a " + expected + " escaped: " + r.get("detail"));
  }
  const long long reports = r.number("reports");
  if (j.what == kind::oom && fired && outcome == "cudrv_error" &&
      r.get("detail").rfind("cudrv::out_of_memory_error", 0) != 0) {
    v.findings.push_back("an allocation refused for lack of memory came back as another error: " + r.get("detail"));
  }
  if (driver_kind && fired && outcome == "completed" && reports == 0 &&
      !is_documented_no_throw(failed_api, j.s->name)) {
    v.findings.push_back("the failure of " + failed_api +
                         " was ignored: the scenario completed and the destruction handler was told nothing");
  }
  const std::vector<std::string> report_apis = r.all("report_api");
  if (r.get("context_left") == "1") {
    const bool told = std::any_of(report_apis.begin(), report_apis.end(), [](const std::string& api) {
      return api == "cuCtxSetCurrent" || api == "cuCtxPopCurrent";
    });
    if (told) {
      v.reported_leak += "a context left current (the handler was told)";
    } else {
      v.findings.push_back("a context was left current that was not current before");
    }
  }
  const std::string rerun = r.get("rerun");
  if (rerun.rfind("completed", 0) != 0) {
    v.findings.push_back("the scenario failed when run again unarmed: " + rerun);
  }
  if (r.number("rerun_reports") != 0) {
    v.findings.push_back("the unarmed second run reported " + r.get("rerun_reports") + " destruction error(s)");
  }
  long long extra = 0;
  bool fewer = false;
  const std::string diff = live_difference(r.live("live"), reference, &extra, &fewer);
  const long long fds = [&] {
    const live_map got = r.live("live");
    auto g = got.find("file_descriptors");
    auto w = reference.find("file_descriptors");
    return (g != got.end() ? g->second : 0) - (w != reference.end() ? w->second : 0);
  }();
  if (fds > 0) {
    v.findings.push_back(std::to_string(fds) + " file descriptor(s) left open");
    extra -= fds;
  }
  if (fewer) {
    v.findings.push_back("fewer live driver objects than after unarmed runs: " + diff);
  } else if (extra > reports) {
    v.findings.push_back("driver objects leaked: " + diff + " (" + std::to_string(reports) + " destruction report(s))");
  } else if (extra > 0) {
    v.reported_leak += (v.reported_leak.empty() ? "" : "; ") + diff + " (" + std::to_string(reports) + " report(s): " +
                       [&] {
                         std::string s;
                         for (const std::string& api : report_apis) {
                           s += (s.empty() ? "" : ", ") + api;
                         }
                         return s;
                       }() +
                       ")";
  }
  if (r.get("host_leaks") == "1") {
    v.findings.push_back("LeakSanitizer found host memory leaked:\n" + indent(r.output));
  }
  return v;
}

// --- sampling and the command line ---------------------------------------------------------------------------

// k = 1..n, or at most `limit` of them spread evenly (the first and the last included).
std::vector<long long> points(long long n, long long limit) {
  std::vector<long long> out;
  if (limit <= 0 || n <= limit) {
    for (long long k = 1; k <= n; ++k) {
      out.push_back(k);
    }
    return out;
  }
  for (long long i = 0; i < limit; ++i) {
    const long long k = 1 + (limit == 1 ? 0 : i * (n - 1) / (limit - 1));
    if (out.empty() || out.back() != k) {
      out.push_back(k);
    }
  }
  return out;
}

struct options {
  long long sample = 0;  // 0: every point
  int parallel = 1;
  unsigned timeout = 60;
  std::set<std::string> scenarios;
  std::set<kind> kinds = {kind::driver, kind::oom, kind::host};
  long long only_point = 0;
  bool verbose = false;
  bool list = false;
};

constexpr const char* usage_text =
    "usage: cudrv_failure_sweep [--sample N] [--jobs N] [--timeout S] [--scenario NAME]...\n"
    "                           [--kinds driver,oom,host] [--point K] [--verbose] [--list]\n"
    "  --sample N     at most N points per scenario and kind, spread evenly (default: every point)\n"
    "  --jobs N       runs at once (default 1)\n"
    "  --timeout S    seconds a run may take before it counts as a hang (default 60)\n"
    "  --scenario N   only this scenario (repeatable; --list names them)\n"
    "  --kinds K,...  driver (CUDA_ERROR_UNKNOWN), oom (CUDA_ERROR_OUT_OF_MEMORY at allocations), host\n"
    "                 (std::bad_alloc); default all three\n"
    "  --point K      only call or allocation K\n"
    "  --verbose      every run's outcome, with its output\n";

[[noreturn]] void usage(const char* message) {
  std::fprintf(stderr, "cudrv_failure_sweep: %s\n%s", message, usage_text);
  std::exit(2);
}

options parse_options(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage(("missing value after " + a).c_str());
      }
      return argv[++i];
    };
    if (a == "--sample") {
      o.sample = std::atoll(value().c_str());
    } else if (a == "--jobs") {
      o.parallel = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--timeout") {
      o.timeout = static_cast<unsigned>(std::max(1, std::atoi(value().c_str())));
    } else if (a == "--scenario") {
      o.scenarios.insert(value());
    } else if (a == "--kinds") {
      o.kinds.clear();
      std::istringstream in(value());
      for (std::string k; std::getline(in, k, ',');) {
        if (k == "driver") {
          o.kinds.insert(kind::driver);
        } else if (k == "oom") {
          o.kinds.insert(kind::oom);
        } else if (k == "host") {
          o.kinds.insert(kind::host);
        } else {
          usage(("unknown kind " + k).c_str());
        }
      }
    } else if (a == "--point") {
      o.only_point = std::atoll(value().c_str());
    } else if (a == "--verbose") {
      o.verbose = true;
    } else if (a == "--list") {
      o.list = true;
    } else if (a == "--help") {
      std::printf("%s", usage_text);
      std::exit(0);
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  for (const std::string& name : o.scenarios) {
    const auto all = cudrv::sweep::scenarios();
    if (std::none_of(all.begin(), all.end(), [&](const scenario& s) { return name == s.name; })) {
      usage(("unknown scenario " + name + " (--list names them)").c_str());
    }
  }
  return o;
}

// --- self-test: the harness sees what it must see ---------------------------------------------------------

int* volatile leaked = nullptr;
void leaks_on_purpose() {
  leaked = new int[4];
  leaked = nullptr;  // the only pointer to it is gone
}
void aborts_on_purpose() { std::abort(); }
int* volatile allocated = nullptr;
void allocates_once() {
  allocated = new int(1);  // through a volatile: the optimiser may not elide the allocation
  delete allocated;
}
void makes_one_driver_call() { (void)cudrv::device_count(); }

bool self_test(unsigned timeout) {
  const scenario leak{"self-test: leak", &leaks_on_purpose, true, false};
  const scenario crash{"self-test: abort", &aborts_on_purpose, true, false};
  const scenario alloc{"self-test: allocation", &allocates_once, true, false};
  const scenario call{"self-test: driver call", &makes_one_driver_call, true, false};
  const std::vector<job> jobs = {{&alloc, kind::host, 1},
                                 {&call, kind::driver, 1},
                                 {&crash, kind::driver, 1},
                                 {&leak, kind::host, 0}};
  const std::vector<result> r = run_jobs(jobs, 1, timeout);
  bool ok = true;
  auto expect = [&](bool condition, const char* what, const result& got) {
    if (!condition) {
      std::printf("self-test FAILED: %s\n%s", what, indent(got.output).c_str());
      ok = false;
    }
  };
  expect(r[0].get("outcome") == "bad_alloc" && r[0].get("fired") == "1", "host allocation 1 throws std::bad_alloc",
         r[0]);
  expect(r[0].get("rerun") == "completed", "the unarmed second run completes", r[0]);
  expect(r[1].get("outcome").rfind("cudrv_error", 0) == 0 && r[1].get("failed_api") == "cuDeviceGetCount",
         "driver call 1 (cuDeviceGetCount) fails with a cudrv::error", r[1]);
  expect(!r[2].has("done") && WIFSIGNALED(r[2].status) && WTERMSIG(r[2].status) == SIGABRT,
         "a crashing run is seen as one", r[2]);
#ifdef CUDRV_SWEEP_LSAN
  expect(r[3].get("host_leaks") == "1", "LeakSanitizer reports a leak through the replaced operator new", r[3]);
#endif
  return ok;
}

// --- the sweep -------------------------------------------------------------------------------------------------

struct totals {
  long long points[3] = {0, 0, 0};
  long long findings = 0;
  long long reported = 0;
  long long notes = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const options opt = parse_options(argc, argv);
  if (opt.list) {
    for (const scenario& s : cudrv::sweep::scenarios()) {
      std::printf("%s\n", s.name);
    }
    return 0;
  }
  if (const char* path = std::getenv("CUDRV_LIBCUDA"); path == nullptr || *path == '\0') {
    usage("CUDRV_LIBCUDA must name the stand-in driver (libcudrv_test_fake_cuda.so of the build tree)");
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const auto start = std::chrono::steady_clock::now();
  if (!self_test(opt.timeout)) {
    return 2;
  }
#ifdef CUDRV_SWEEP_LSAN
  std::printf("cudrv_failure_sweep: LeakSanitizer checks every run\n");
#else
  std::printf("cudrv_failure_sweep: no LeakSanitizer in this build: host leaks are not checked\n");
#endif
  totals all;
  int scenario_count = 0;
  for (const scenario& s : cudrv::sweep::scenarios()) {
    if (!opt.scenarios.empty() && opt.scenarios.count(s.name) == 0) {
      continue;
    }
    ++scenario_count;
    const auto scenario_start = std::chrono::steady_clock::now();
    const result counted = run_jobs({job{&s, kind::driver, 0}}, 1, opt.timeout)[0];
    const live_map reference = counted.live("live");
    if (!counted.has("done") || counted.get("outcome") != "completed" || counted.get("rerun") != "completed" ||
        counted.get("host_leaks") == "1" || counted.number("reports") != 0 || counted.live("live_once") != reference) {
      std::printf(
          "FINDING %s: the scenario does not run cleanly unarmed: outcome %s %s, second run %s, %s "
          "destruction report(s), live objects after one run and after two: %s\n%s",
          s.name, counted.get("outcome", describe_status(counted.status)).c_str(), counted.get("detail").c_str(),
          counted.get("rerun").c_str(), counted.get("reports", "?").c_str(),
          [&] {
            long long extra = 0;
            bool fewer = false;
            return live_difference(reference, counted.live("live_once"), &extra, &fewer);
          }()
              .c_str(),
          indent(counted.output).c_str());
      ++all.findings;
      continue;
    }
    const long long n_driver = counted.number("calls");
    const long long n_host = counted.number("allocations");
    std::map<long long, std::string> trace;
    for (const std::string& line : counted.all("trace")) {
      const auto space = line.find(' ');
      trace[std::atoll(line.c_str())] = line.substr(space + 1);
    }
    std::vector<job> jobs;
    for (kind k : {kind::driver, kind::oom, kind::host}) {
      if (opt.kinds.count(k) == 0) {
        continue;
      }
      std::vector<long long> candidates;
      if (k == kind::oom) {
        for (long long p = 1; p <= n_driver; ++p) {
          if (is_allocation_call(trace[p])) {
            candidates.push_back(p);
          }
        }
      } else {
        for (long long p = 1; p <= (k == kind::host ? n_host : n_driver); ++p) {
          candidates.push_back(p);
        }
      }
      for (long long index : points(static_cast<long long>(candidates.size()), s.whole ? 0 : opt.sample)) {
        const long long p = candidates[static_cast<std::size_t>(index - 1)];
        if (opt.only_point == 0 || opt.only_point == p) {
          jobs.push_back({&s, k, p});
        }
      }
    }
    const std::vector<result> results = run_jobs(jobs, opt.parallel, opt.timeout);
    long long run[3] = {0, 0, 0};
    long long findings = 0;
    long long reported = 0;
    long long notes = 0;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const job& j = jobs[i];
      ++run[static_cast<int>(j.what)];
      const std::string api = j.what == kind::host ? "" : trace[j.point];
      const verdict v = judge(j, results[i], reference, api);
      const std::string where = std::string(s.name) + " " + kind_name(j.what) + " k=" + std::to_string(j.point) +
                                (api.empty() ? "" : " (" + api + ")");
      for (const std::string& f : v.findings) {
        std::printf("FINDING %s: %s\n", where.c_str(), f.c_str());
        ++findings;
      }
      if (!v.reported_leak.empty()) {
        ++reported;
        std::printf("reported leak %s: %s\n", where.c_str(), v.reported_leak.c_str());
      }
      if (!v.note.empty()) {
        ++notes;
        std::printf("note %s: %s\n", where.c_str(), v.note.c_str());
      }
      if (opt.verbose) {
        std::printf("  %s: %s %s; second run %s\n", where.c_str(), results[i].get("outcome", "(died)").c_str(),
                    results[i].get("detail").c_str(), results[i].get("rerun").c_str());
        if (!results[i].output.empty()) {
          std::printf("%s", indent(results[i].output).c_str());
        }
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - scenario_start).count();
    std::printf("scenario %-24s driver calls %4lld, host allocations %5lld; points run: %lld driver, %lld oom, "
                "%lld host; findings %lld, reported leaks %lld (%.1f s)\n",
                s.name, n_driver, n_host, run[0], run[1], run[2], findings, reported, seconds);
    for (int k = 0; k < 3; ++k) {
      all.points[k] += run[k];
    }
    all.findings += findings;
    all.reported += reported;
    all.notes += notes;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("failure sweep: %d scenarios, %lld injection points (%lld driver, %lld oom, %lld host), %lld findings, "
              "%lld reported leaks, %lld notes, %.1f s%s\n",
              scenario_count, all.points[0] + all.points[1] + all.points[2], all.points[0], all.points[1],
              all.points[2], all.findings, all.reported, all.notes, seconds,
              opt.sample > 0
                  ? (" (sampled: at most " + std::to_string(opt.sample) + " points per scenario and kind)").c_str()
                  : "");
  return all.findings == 0 ? 0 : 1;
}
