// cudrv_stress: many threads using cudrv at once for a bounded time, every result checked.
//
//   cudrv_stress [--threads N] [--seconds S] [--max-ops N] [--kinds k1,k2,...] [--device D]
//                [--seed N] [--cache-dir DIR] [--verify-compiled launch|text] [--json]
//
// Each thread makes its own stream, then loops until the time is up (or the whole run reached
// --max-ops), picking an operation kind at random among those asked for:
//   stream          create a stream, record an event on it, synchronise, query both, destroy
//   event           create an event, record it on the thread's stream, make a second stream wait for
//                   it, synchronise and query it
//   alloc_default   allocate on the thread's stream from the device's current (default) pool, copy
//                   random data in and back, check it, free on the stream
//   alloc_pool      the same from one private memory_pool shared by every thread (trimmed now and then)
//   launch_typed    y = a*x + b through a typed kernel shared by the threads (random x, a, b; y poisoned)
//   launch_untyped  the same through an untyped kernel taken from the shared library by each launch
//   graph           capture (thread-local mode) a fill and the kernel on the thread's stream,
//                   instantiate, launch, check
//   graph_shared    launch one executable graph shared by every thread; the contract says launches of
//                   one graph_exec are serialised by the caller, so it is launched under a mutex
//   compile         compile one of a few kernel sources (and now and then a new one) through the
//                   compile cache shared by the threads, so hits and misses race; then load and launch
//                   the result and check it (--verify-compiled launch, the default), or only check that
//                   the PTX defines the kernel (text: for a driver that does not run kernels)
// Every operation runs in an NVTX range named after its kind, each thread's stream is named.
// The affine kernel is compiled once at start with NVRTC through the same shared compile cache.
// Every kernel's output is poisoned before it runs and checked on the host against a host reference.
//
// At the end: a table of operations per second per kind, then one JSON line (--json prints only the
// JSON line). Exit status: 0 when every operation succeeded and every result matched (also when there
// is no CUDA driver or device: the program says SKIPPED and does nothing); 1 on a usage error; 3 when
// an operation failed, a result did not match or a destruction reported an error.
#include <cudrv/cudrv.hpp>
#include <cudrv/nvtx.hpp>
#include <cudrv/rtc.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

enum kind : int {
  k_stream,
  k_event,
  k_alloc_default,
  k_alloc_pool,
  k_launch_typed,
  k_launch_untyped,
  k_graph,
  k_graph_shared,
  k_compile,
  kind_count
};

constexpr std::array<const char*, kind_count> kind_names = {"stream",     "event",        "alloc_default",
                                                            "alloc_pool", "launch_typed", "launch_untyped",
                                                            "graph",      "graph_shared", "compile"};

bool needs_affine(int k) { return k == k_launch_typed || k == k_launch_untyped || k == k_graph || k == k_graph_shared; }

struct options {
  int threads = 16;
  double seconds = 60;
  std::uint64_t max_ops = 100'000'000;
  std::vector<int> kinds;
  int device = 0;
  std::uint64_t seed = 0;
  bool seed_given = false;
  std::string cache_dir;
  bool launch_compiled = true;
  bool json_only = false;
};

void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--threads N] [--seconds S] [--max-ops N] [--kinds k1,k2,...] [--device D] [--seed N]\n"
               "          [--cache-dir DIR] [--verify-compiled launch|text] [--json]\n"
               "kinds:",
               argv0);
  for (const char* k : kind_names) {
    std::fprintf(stderr, " %s", k);
  }
  std::fprintf(stderr, "\n");
}

std::optional<options> parse(int argc, char** argv) {
  options o;
  auto number = [&](int& i, auto& out) -> bool {
    if (i + 1 >= argc) {
      return false;
    }
    char* end = nullptr;
    const char* text = argv[++i];
    if constexpr (std::is_same_v<std::remove_reference_t<decltype(out)>, double>) {
      out = std::strtod(text, &end);
    } else {
      out = static_cast<std::remove_reference_t<decltype(out)>>(std::strtoull(text, &end, 10));
    }
    return end != text && *end == '\0';
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    bool ok = true;
    if (a == "--threads") {
      ok = number(i, o.threads) && o.threads > 0 && o.threads <= 1024;
    } else if (a == "--seconds") {
      ok = number(i, o.seconds) && o.seconds > 0;
    } else if (a == "--max-ops") {
      ok = number(i, o.max_ops) && o.max_ops > 0;
    } else if (a == "--device") {
      ok = number(i, o.device) && o.device >= 0;
    } else if (a == "--seed") {
      ok = number(i, o.seed);
      o.seed_given = true;
    } else if (a == "--cache-dir" && i + 1 < argc) {
      o.cache_dir = argv[++i];
    } else if (a == "--verify-compiled" && i + 1 < argc) {
      const std::string v = argv[++i];
      ok = v == "launch" || v == "text";
      o.launch_compiled = v == "launch";
    } else if (a == "--json") {
      o.json_only = true;
    } else if (a == "--kinds" && i + 1 < argc) {
      std::stringstream in(argv[++i]);
      for (std::string item; ok && std::getline(in, item, ',');) {
        auto found = std::find_if(kind_names.begin(), kind_names.end(), [&](const char* n) { return item == n; });
        if (found == kind_names.end()) {
          std::fprintf(stderr, "unknown kind '%s'\n", item.c_str());
          ok = false;
        } else if (std::find(o.kinds.begin(), o.kinds.end(), found - kind_names.begin()) == o.kinds.end()) {
          o.kinds.push_back(static_cast<int>(found - kind_names.begin()));
        }
      }
      ok = ok && !o.kinds.empty();
    } else {
      ok = false;
    }
    if (!ok) {
      usage(argv[0]);
      return std::nullopt;
    }
  }
  if (o.kinds.empty()) {
    for (int k = 0; k < kind_count; ++k) {
      o.kinds.push_back(k);
    }
  }
  if (!o.seed_given) {
    o.seed = (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  }
  return o;
}

// --- what the threads share ---------------------------------------------------------------------------

constexpr const char* affine_source = R"(
extern "C" __global__ void affine(const unsigned* x, unsigned* y, unsigned a, unsigned b, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = a * x[i] + b;
  }
}
)";

using affine_signature = void(const unsigned*, unsigned*, unsigned, unsigned, unsigned);

constexpr unsigned poison = 0xdeadbeefu;
constexpr unsigned block = 256;
constexpr std::size_t shared_n = 4099;  // the shared graph's problem size
constexpr unsigned shared_a = 2654435761u;
constexpr unsigned shared_b = 40503u;
constexpr int hot_variants = 6;  // compile sources every thread comes back to (hits after the first)

cudrv::launch_config config_for(std::size_t n) {
  return {.grid = static_cast<unsigned>((n + block - 1) / block), .block = block};
}

// The constant the compile kind's variant v adds.
unsigned variant_constant(std::uint64_t v) { return static_cast<unsigned>(v) * 2246822519u + 374761393u; }

std::string variant_name(std::uint64_t v) { return "add_v" + std::to_string(v); }

std::string variant_source(std::uint64_t v) {
  return "extern \"C\" __global__ void " + variant_name(v) +
         "(unsigned* y, unsigned n) {\n"
         "  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i < n) {\n    y[i] += " +
         std::to_string(variant_constant(v)) + "u;\n  }\n}\n";
}

struct shared_state {
  const options& opt;
  cudrv::device dev;
  std::string arch;
  cudrv::compile_cache cache;
  std::optional<cudrv::memory_pool> pool;
  std::optional<cudrv::library> affine_lib;
  std::optional<cudrv::typed_kernel<affine_signature>> affine_typed;
  // The shared graph: inputs and output shared by every launch, the executable and the lock its
  // launches take (graph_exec launches must be serialised by the caller).
  std::optional<cudrv::device_buffer<unsigned>> shared_x;
  std::optional<cudrv::device_buffer<unsigned>> shared_y;
  std::vector<unsigned> shared_expected;
  std::optional<cudrv::graph_exec> shared_exec;
  std::mutex shared_exec_mutex;
  std::atomic<std::uint64_t> next_variant{1000};
  std::atomic<std::uint64_t> ops{0};
  std::chrono::steady_clock::time_point deadline;

  shared_state(const options& o, std::string cache_dir) : opt(o), dev(o.device), cache(std::move(cache_dir)) {}
};

// --- per thread -----------------------------------------------------------------------------------

struct counters {
  std::array<std::uint64_t, kind_count> ops{};
  std::array<std::uint64_t, kind_count> mismatches{};
  std::array<std::uint64_t, kind_count> errors{};
  std::vector<std::string> messages;  // the first few failures
  void fail(int k, bool error, std::string what) {
    (error ? errors : mismatches)[static_cast<std::size_t>(k)]++;
    if (messages.size() < 8) {
      messages.push_back(std::string(kind_names[static_cast<std::size_t>(k)]) + ": " + std::move(what));
    }
  }
};

struct worker {
  shared_state& sh;
  counters& c;
  std::mt19937_64 rng;
  cudrv::stream s;

  worker(shared_state& shared, counters& cnt, std::uint64_t seed, int index)
      : sh(shared), c(cnt), rng(seed), s(shared.dev) {
    cudrv::nvtx::name(s, "stress thread " + std::to_string(index));
  }

  unsigned u32() { return static_cast<unsigned>(rng()); }
  std::size_t size() { return 1 + rng() % (1u << 16); }
  std::vector<unsigned> random(std::size_t n) {
    std::vector<unsigned> v(n);
    for (auto& e : v) {
      e = u32();
    }
    return v;
  }

  // Returns the first index where got differs from want, as a message; empty when equal.
  static std::string compare(const std::vector<unsigned>& got, const std::vector<unsigned>& want) {
    if (got.size() != want.size()) {
      return "size " + std::to_string(got.size()) + " instead of " + std::to_string(want.size());
    }
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (got[i] != want[i]) {
        return "element " + std::to_string(i) + " of " + std::to_string(got.size()) + " is " + std::to_string(got[i]) +
               ", expected " + std::to_string(want[i]);
      }
    }
    return {};
  }

  void verify(int k, const std::vector<unsigned>& got, const std::vector<unsigned>& want) {
    if (std::string m = compare(got, want); !m.empty()) {
      c.fail(k, false, std::move(m));
    }
  }

  static std::vector<unsigned> affine_reference(const std::vector<unsigned>& x, unsigned a, unsigned b) {
    std::vector<unsigned> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      y[i] = a * x[i] + b;
    }
    return y;
  }

  void op_stream() {
    cudrv::stream t(sh.dev);
    cudrv::event e = t.record();
    t.synchronize();
    if (!t.is_done() || !e.is_done()) {
      c.fail(k_stream, false, "a synchronised stream or its event is not done");
    }
  }

  void op_event() {
    cudrv::event e(sh.dev);
    e.record(s);
    cudrv::stream other(sh.dev);
    other.wait(e);
    e.synchronize();
    other.synchronize();
    if (!e.is_done()) {
      c.fail(k_event, false, "a synchronised event is not done");
    }
  }

  void op_alloc(int k) {
    const std::size_t n = size();
    const std::vector<unsigned> in = random(n);
    std::vector<unsigned> out(n, poison);
    {
      cudrv::device_buffer<unsigned> b =
          k == k_alloc_pool ? cudrv::device_buffer<unsigned>(*sh.pool, s, n) : cudrv::device_buffer<unsigned>(s, n);
      cudrv::copy(b, in, s);
      cudrv::copy(out, b, s);
    }  // freed on s
    s.synchronize();
    verify(k, out, in);
    if (k == k_alloc_pool && rng() % 64 == 0) {
      sh.pool->trim_to(0);  // concurrent with the other threads' allocations from the pool
    }
  }

  void op_launch(int k) {
    const std::size_t n = size();
    const std::vector<unsigned> x = random(n);
    const unsigned a = u32();
    const unsigned b = u32();
    std::vector<unsigned> out(n, 0);
    cudrv::device_buffer<unsigned> dx(s, n);
    cudrv::device_buffer<unsigned> dy(s, n);
    cudrv::copy(dx, x, s);
    cudrv::fill(dy, poison, s);
    const unsigned count = static_cast<unsigned>(n);
    if (k == k_launch_typed) {
      cudrv::launch(s, config_for(n), *sh.affine_typed, dx.get(), dy.get(), a, b, count);
    } else {
      // Untyped: taken from the shared library by this thread, arguments checked against the layout.
      cudrv::kernel kern = sh.affine_lib->get_kernel("affine");
      cudrv::launch(s, config_for(n), kern, static_cast<const unsigned*>(dx.get()), dy.get(), a, b, count);
    }
    cudrv::copy(out, dy, s);
    s.synchronize();
    verify(k, out, affine_reference(x, a, b));
  }

  void op_graph() {
    const std::size_t n = size();
    const std::vector<unsigned> x = random(n);
    const unsigned a = u32();
    const unsigned b = u32();
    std::vector<unsigned> out(n, 0);
    cudrv::device_buffer<unsigned> dx(s, n);
    cudrv::device_buffer<unsigned> dy(s, n);
    cudrv::copy(dx, x, s);
    cudrv::graph g = [&] {
      // Thread-local mode: another thread's synchronous calls do not invalidate this capture.
      cudrv::stream_capture capture(s, cudrv::capture_mode::thread_local_only);
      cudrv::fill(dy, poison, s);
      cudrv::launch(s, config_for(n), *sh.affine_typed, dx.get(), dy.get(), a, b, static_cast<unsigned>(n));
      return capture.end();
    }();
    cudrv::graph_exec exec = g.instantiate(sh.dev);
    exec.launch(s);
    cudrv::copy(out, dy, s);
    s.synchronize();
    verify(k_graph, out, affine_reference(x, a, b));
  }

  void op_graph_shared() {
    std::vector<unsigned> out(shared_n, 0);
    {
      std::lock_guard lock(sh.shared_exec_mutex);
      sh.shared_exec->launch(s);  // poisons the shared output, then computes it
      cudrv::copy(out, *sh.shared_y, s);
      s.synchronize();
    }
    verify(k_graph_shared, out, sh.shared_expected);
  }

  void op_compile() {
    // Mostly a few hot sources (all threads race on their first compile, then hit), now and then a
    // new one (a miss racing the others' hits).
    const std::uint64_t v =
        rng() % 8 == 0 ? sh.next_variant.fetch_add(1, std::memory_order_relaxed) : rng() % hot_variants;
    const std::string name = variant_name(v);
    cudrv::program prog(name + ".cu", variant_source(v));
    const cudrv::code_kind target = sh.opt.launch_compiled ? cudrv::code_kind::cubin : cudrv::code_kind::ptx;
    cudrv::compile_result r = sh.cache.compile(prog, target, {.arch = sh.arch});
    if (!sh.opt.launch_compiled) {
      if (r.code.bytes().find(".entry " + name) == std::string::npos) {
        c.fail(k_compile, false, "the PTX of " + name + " does not define it");
      }
      return;
    }
    cudrv::library lib(r, sh.dev);
    auto kern = lib.get_kernel<void(unsigned*, unsigned)>(name);
    const std::size_t n = size();
    std::vector<unsigned> y = random(n);
    std::vector<unsigned> out(n, poison);
    cudrv::device_buffer<unsigned> dy(s, n);
    cudrv::copy(dy, y, s);
    cudrv::launch(s, config_for(n), kern, dy.get(), static_cast<unsigned>(n));
    cudrv::copy(out, dy, s);
    s.synchronize();
    const unsigned add = variant_constant(v);
    for (auto& e : y) {
      e += add;
    }
    verify(k_compile, out, y);
  }

  void run_one(int k) {
    switch (k) {
      case k_stream: op_stream(); break;
      case k_event: op_event(); break;
      case k_alloc_default:
      case k_alloc_pool: op_alloc(k); break;
      case k_launch_typed:
      case k_launch_untyped: op_launch(k); break;
      case k_graph: op_graph(); break;
      case k_graph_shared: op_graph_shared(); break;
      case k_compile: op_compile(); break;
      default: break;
    }
  }

  void loop() {
    const auto& kinds = sh.opt.kinds;
    while (std::chrono::steady_clock::now() < sh.deadline &&
           sh.ops.fetch_add(1, std::memory_order_relaxed) < sh.opt.max_ops) {
      const int k = kinds[static_cast<std::size_t>(rng() % kinds.size())];
      try {
        const cudrv::nvtx::range op_range{kind_names[static_cast<std::size_t>(k)]};  // NVTX from every thread
        run_one(k);
      } catch (const std::exception& e) {
        c.fail(k, true, e.what());
        // The thread's stream may hold the failed work: start again on a fresh one.
        try {
          s = cudrv::stream(sh.dev);
          cudrv::nvtx::name(s, "stress thread (replacement)");
        } catch (...) {
        }
      }
      c.ops[static_cast<std::size_t>(k)]++;
    }
  }
};

std::atomic<std::uint64_t> destruction_errors{0};
std::mutex destruction_message_mutex;
std::string first_destruction_message;

void count_destruction_error(const cudrv::error& e) noexcept {
  if (destruction_errors.fetch_add(1) == 0) {
    try {
      std::lock_guard lock(destruction_message_mutex);
      first_destruction_message = e.what();
    } catch (...) {
    }
  }
}

// The compile cache directory: the one given, or a fresh one removed at the end.
struct cache_directory {
  std::string path;
  bool owned = false;
  explicit cache_directory(const std::string& given) {
    if (!given.empty()) {
      path = given;
      return;
    }
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/cudrv_stress.XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("cannot create a temporary directory from " + pattern);
    }
    path = pattern;
    owned = true;
  }
  ~cache_directory() {
    if (owned) {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  }
  cache_directory(const cache_directory&) = delete;
  cache_directory& operator=(const cache_directory&) = delete;
};

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// Compiles the affine kernel through the shared cache, loads it and builds the shared graph.
void set_up_kernels(shared_state& sh) {
  cudrv::program prog("affine.cu", affine_source);
  cudrv::compile_result r = sh.cache.compile(prog, cudrv::code_kind::cubin, {.arch = sh.arch});
  sh.affine_lib.emplace(r, sh.dev);
  sh.affine_typed.emplace(sh.affine_lib->get_kernel<affine_signature>("affine"));

  std::mt19937_64 rng(sh.opt.seed ^ 0x5eedu);
  std::vector<unsigned> x(shared_n);
  for (auto& e : x) {
    e = static_cast<unsigned>(rng());
  }
  sh.shared_expected.resize(shared_n);
  for (std::size_t i = 0; i < shared_n; ++i) {
    sh.shared_expected[i] = shared_a * x[i] + shared_b;
  }
  sh.shared_x.emplace(sh.dev, shared_n);
  sh.shared_y.emplace(sh.dev, shared_n);
  cudrv::copy(*sh.shared_x, x);
  cudrv::stream setup(sh.dev);
  cudrv::graph g = [&] {
    cudrv::stream_capture capture(setup, cudrv::capture_mode::thread_local_only);
    cudrv::fill(*sh.shared_y, poison, setup);
    cudrv::launch(setup, config_for(shared_n), *sh.affine_typed, sh.shared_x->get(), sh.shared_y->get(), shared_a,
                  shared_b, static_cast<unsigned>(shared_n));
    return capture.end();
  }();
  sh.shared_exec.emplace(g.instantiate(sh.dev));
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<options> parsed = parse(argc, argv);
  if (!parsed) {
    return 1;
  }
  const options& opt = *parsed;
  auto skip = [&](const std::string& why) {
    if (!opt.json_only) {
      std::printf("cudrv_stress: SKIPPED: %s\n", why.c_str());
    }
    std::printf("{\"program\":\"cudrv_stress\",\"skipped\":true,\"reason\":%s}\n", json_string(why).c_str());
    return 0;
  };
  if (!cudrv::driver::available()) {
    return skip("no usable CUDA driver: " + cudrv::driver::unavailable_reason());
  }
  try {
    if (cudrv::device_count() <= opt.device) {
      return skip("the driver sees " + std::to_string(cudrv::device_count()) + " device(s), device " +
                  std::to_string(opt.device) + " was asked for");
    }
  } catch (const cudrv::error& e) {
    return skip(std::string("the driver sees no device: ") + e.what());
  }
  cudrv::set_destruction_error_handler(&count_destruction_error);

  std::vector<counters> per_thread(static_cast<std::size_t>(opt.threads));
  std::optional<cache_directory> cache_dir;
  std::optional<shared_state> sh;
  std::string setup_error;
  double elapsed = 0;
  try {
    cache_dir.emplace(opt.cache_dir);
    sh.emplace(opt, cache_dir->path);
    sh->arch = std::to_string(sh->dev.compute_capability().as_int());
    if (std::any_of(opt.kinds.begin(), opt.kinds.end(), needs_affine)) {
      set_up_kernels(*sh);
    }
    if (std::find(opt.kinds.begin(), opt.kinds.end(), k_alloc_pool) != opt.kinds.end()) {
      sh->pool.emplace(sh->dev);
    }
    if (!opt.json_only) {
      std::printf("cudrv_stress: %d threads x %g s on device %d (%s, sm_%s), seed %llu, compile cache %s\n",
                  opt.threads, opt.seconds, opt.device, sh->dev.name().c_str(), sh->arch.c_str(),
                  static_cast<unsigned long long>(opt.seed), cache_dir->path.c_str());
      std::fflush(stdout);
    }
    const auto start = std::chrono::steady_clock::now();
    sh->deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(opt.seconds));
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(opt.threads));
    for (int t = 0; t < opt.threads; ++t) {
      threads.emplace_back([&, t] {
        counters& c = per_thread[static_cast<std::size_t>(t)];
        try {
          worker w(*sh, c, opt.seed + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(t + 1), t);
          w.loop();
        } catch (const std::exception& e) {
          c.fail(k_stream, true, std::string("thread setup: ") + e.what());
        }
      });
    }
    for (auto& th : threads) {
      th.join();
    }
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    sh->dev.synchronize();
  } catch (const std::exception& e) {
    setup_error = e.what();
  }

  counters total;
  for (const counters& c : per_thread) {
    for (std::size_t k = 0; k < kind_count; ++k) {
      total.ops[k] += c.ops[k];
      total.mismatches[k] += c.mismatches[k];
      total.errors[k] += c.errors[k];
    }
    for (const auto& m : c.messages) {
      if (total.messages.size() < 20) {
        total.messages.push_back(m);
      }
    }
  }
  const cudrv::compile_cache::statistics cs = sh ? sh->cache.stats() : cudrv::compile_cache::statistics{};
  sh.reset();  // every cudrv object destroyed before the count of destruction errors is read
  cache_dir.reset();
  std::uint64_t ops = 0, mismatches = 0, errors = 0;
  for (std::size_t k = 0; k < kind_count; ++k) {
    ops += total.ops[k];
    mismatches += total.mismatches[k];
    errors += total.errors[k];
  }
  const std::uint64_t teardown_errors = destruction_errors.load();
  const bool pass = setup_error.empty() && mismatches == 0 && errors == 0 && teardown_errors == 0;
  const double secs = elapsed > 0 ? elapsed : 1e-9;

  if (!opt.json_only) {
    std::printf("%-15s %12s %12s %11s %8s\n", "kind", "ops", "ops/s", "mismatches", "errors");
    for (int k : opt.kinds) {
      const auto i = static_cast<std::size_t>(k);
      std::printf("%-15s %12llu %12.1f %11llu %8llu\n", kind_names[i], static_cast<unsigned long long>(total.ops[i]),
                  static_cast<double>(total.ops[i]) / secs, static_cast<unsigned long long>(total.mismatches[i]),
                  static_cast<unsigned long long>(total.errors[i]));
    }
    std::printf("%-15s %12llu %12.1f %11llu %8llu\n", "total", static_cast<unsigned long long>(ops),
                static_cast<double>(ops) / secs, static_cast<unsigned long long>(mismatches),
                static_cast<unsigned long long>(errors));
    std::printf("compile cache: %llu hits, %llu misses, %llu corrupt, %llu store failures; destruction errors: %llu\n",
                static_cast<unsigned long long>(cs.hits), static_cast<unsigned long long>(cs.misses),
                static_cast<unsigned long long>(cs.corrupt_entries), static_cast<unsigned long long>(cs.store_failures),
                static_cast<unsigned long long>(teardown_errors));
    if (!setup_error.empty()) {
      std::printf("setup failed: %s\n", setup_error.c_str());
    }
    for (const auto& m : total.messages) {
      std::printf("failure: %s\n", m.c_str());
    }
    if (teardown_errors != 0) {
      std::printf("first destruction error: %s\n", first_destruction_message.c_str());
    }
    std::printf("cudrv_stress: %s (%llu operations in %.1f s)\n", pass ? "PASS" : "FAIL",
                static_cast<unsigned long long>(ops), elapsed);
  }
  std::string json = "{\"program\":\"cudrv_stress\",\"skipped\":false,\"threads\":" + std::to_string(opt.threads) +
                     ",\"seconds\":" + std::to_string(elapsed) + ",\"seed\":" + std::to_string(opt.seed) +
                     ",\"ops\":" + std::to_string(ops) + ",\"mismatches\":" + std::to_string(mismatches) +
                     ",\"errors\":" + std::to_string(errors) +
                     ",\"destruction_errors\":" + std::to_string(teardown_errors) + ",\"kinds\":{";
  bool first = true;
  for (int k : opt.kinds) {
    const auto i = static_cast<std::size_t>(k);
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.1f", static_cast<double>(total.ops[i]) / secs);
    json += std::string(first ? "" : ",") + "\"" + kind_names[i] + "\":{\"ops\":" + std::to_string(total.ops[i]) +
            ",\"ops_per_s\":" + rate + ",\"mismatches\":" + std::to_string(total.mismatches[i]) +
            ",\"errors\":" + std::to_string(total.errors[i]) + "}";
    first = false;
  }
  json += "},\"compile_cache\":{\"hits\":" + std::to_string(cs.hits) + ",\"misses\":" + std::to_string(cs.misses) +
          ",\"corrupt\":" + std::to_string(cs.corrupt_entries) +
          ",\"store_failures\":" + std::to_string(cs.store_failures) + "},\"setup_error\":" + json_string(setup_error) +
          ",\"pass\":" + (pass ? "true" : "false") + "}";
  std::printf("%s\n", json.c_str());
  return pass ? 0 : 3;
}
