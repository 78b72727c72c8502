// compile_cache: a persistent on-disk cache of NVRTC compilations.
//
// Entry file <dir>/<32 hex digits of the key's 128-bit hash>.entry, native byte order:
//   "CUDAXNVC"  u32 format version  u32 0  u64 key size  u64 payload size  key  payload  u64 checksum
// payload: u32 code kind, code bytes, log, u64 count, then count (expression, lowered name) pairs;
// every string is a u64 length and its bytes. The checksum covers everything before it.
#include "cudax/compile_cache.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string_view>
#include <utility>

#include "cudax/error.hpp"
#include "rtc_loader.hpp"

namespace cudax {
namespace {

constexpr std::uint32_t format_version = 1;
constexpr char magic[8] = {'C', 'U', 'D', 'A', 'X', 'N', 'V', 'C'};
constexpr std::size_t fixed_header = 32;  // magic, version, reserved, two sizes
constexpr std::size_t checksum_size = 8;
constexpr std::string_view entry_suffix = ".entry";
constexpr std::string_view temp_suffix = ".tmp";

// --- hashing: 64-bit multiply-fold (wyhash-style), seeded; two seeds make the 128-bit file name ---

__extension__ typedef unsigned __int128 uint128;

constexpr std::uint64_t k0 = 0xa0761d6478bd642fULL;
constexpr std::uint64_t k1 = 0xe7037ed1a0b428dbULL;
constexpr std::uint64_t k2 = 0x8ebc6af09c88c6e3ULL;
constexpr std::uint64_t k3 = 0x589965cc75374cc3ULL;
constexpr std::uint64_t name_seed_lo = 0x1d8e4e27c47d124fULL;
constexpr std::uint64_t name_seed_hi = 0x9c2b5f3a7e61d80bULL;
constexpr std::uint64_t checksum_seed = 0x5be0cd19137e2179ULL;

std::uint64_t mum(std::uint64_t a, std::uint64_t b) noexcept {
  const uint128 r = static_cast<uint128>(a) * b;
  return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
}

std::uint64_t load64(const unsigned char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::uint64_t hash64(std::string_view data, std::uint64_t seed) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t n = data.size();
  std::uint64_t h = mum(seed ^ k0, static_cast<std::uint64_t>(n) ^ k1);
  for (; n >= 16; p += 16, n -= 16) {
    h ^= mum(load64(p) ^ k1, load64(p + 8) ^ h ^ k2);
  }
  unsigned char tail[16] = {};
  if (n > 0) {
    std::memcpy(tail, p, n);
  }
  h ^= mum(load64(tail) ^ k2, load64(tail + 8) ^ h ^ k3);
  return mum(h ^ k3, h ^ k0 ^ seed);
}

std::string hex128(std::string_view data) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (std::uint64_t v : {hash64(data, name_seed_hi), hash64(data, name_seed_lo)}) {
    for (int shift = 60; shift >= 0; shift -= 4) {
      out += digits[(v >> shift) & 0xf];
    }
  }
  return out;
}

// --- serialisation -------------------------------------------------------------------------------

template <class T>
void put_int(std::string& out, T v) {
  char bytes[sizeof v];
  std::memcpy(bytes, &v, sizeof v);
  out.append(bytes, sizeof v);
}

void put(std::string& out, std::string_view s) {
  put_int<std::uint64_t>(out, s.size());
  out.append(s);
}

struct reader {
  std::string_view in;
  bool ok = true;

  template <class T>
  T get_int() {
    T v{};
    if (in.size() < sizeof v) {
      ok = false;
      return v;
    }
    std::memcpy(&v, in.data(), sizeof v);
    in.remove_prefix(sizeof v);
    return v;
  }
  std::string_view get() {
    const auto n = get_int<std::uint64_t>();
    if (!ok || n > in.size()) {
      ok = false;
      return {};
    }
    std::string_view s = in.substr(0, n);
    in.remove_prefix(n);
    return s;
  }
};

std::string make_key(const program& prog, code_kind target, const std::vector<std::string>& options,
                     const std::vector<std::string>& name_expressions) {
  std::string key;
  key.reserve(512 + prog.source().size());
  put(key, "cudax nvrtc compile cache");
  put_int<std::uint32_t>(key, format_version);
  put_int<std::int32_t>(key, detail::nvrtc_version_number());
  put(key, detail::nvrtc_identity());
  put_int<std::uint32_t>(key, static_cast<std::uint32_t>(target));
  put(key, prog.name());
  put(key, prog.source());
  put_int<std::uint64_t>(key, prog.headers().size());
  for (const auto& h : prog.headers()) {
    put(key, h.name);
    put(key, h.source);
  }
  put_int<std::uint64_t>(key, options.size());
  for (const auto& o : options) {
    put(key, o);
  }
  put_int<std::uint64_t>(key, name_expressions.size());
  for (const auto& e : name_expressions) {
    put(key, e);
  }
  return key;
}

std::string make_entry(std::string_view key, const compile_result& r) {
  std::string payload;
  put_int<std::uint32_t>(payload, static_cast<std::uint32_t>(r.code.kind()));
  put(payload, r.code.bytes());
  put(payload, r.log);
  put_int<std::uint64_t>(payload, r.lowered_names.size());
  for (const auto& [expr, lowered] : r.lowered_names) {
    put(payload, expr);
    put(payload, lowered);
  }
  std::string entry;
  entry.reserve(fixed_header + key.size() + payload.size() + checksum_size);
  entry.append(magic, sizeof magic);
  put_int<std::uint32_t>(entry, format_version);
  put_int<std::uint32_t>(entry, 0);
  put_int<std::uint64_t>(entry, key.size());
  put_int<std::uint64_t>(entry, payload.size());
  entry += key;
  entry += payload;
  put_int<std::uint64_t>(entry, hash64(entry, checksum_seed));
  return entry;
}

enum class lookup_outcome { hit, miss, corrupt };

// Checks an entry's frame and checksum and, when its key is ours, decodes its payload.
lookup_outcome decode_entry(std::string_view entry, std::string_view key, const std::string& name,
                            compile_result& out) {
  if (entry.size() < fixed_header + checksum_size ||
      entry.substr(0, sizeof magic) != std::string_view(magic, sizeof magic)) {
    return lookup_outcome::corrupt;
  }
  reader header{entry.substr(sizeof magic, fixed_header - sizeof magic)};
  const auto version = header.get_int<std::uint32_t>();
  (void)header.get_int<std::uint32_t>();
  const auto key_size = header.get_int<std::uint64_t>();
  const auto payload_size = header.get_int<std::uint64_t>();
  const std::size_t body = entry.size() - fixed_header - checksum_size;
  if (version != format_version || key_size > body || payload_size != body - key_size) {
    return lookup_outcome::corrupt;
  }
  reader tail{entry.substr(entry.size() - checksum_size)};
  if (tail.get_int<std::uint64_t>() != hash64(entry.substr(0, entry.size() - checksum_size), checksum_seed)) {
    return lookup_outcome::corrupt;
  }
  if (entry.substr(fixed_header, key_size) != key) {
    return lookup_outcome::miss;  // another key with the same hash: never a wrong result
  }
  reader payload{entry.substr(fixed_header + key_size, payload_size)};
  const auto kind = payload.get_int<std::uint32_t>();
  const std::string_view code = payload.get();
  compile_result r;
  r.log = payload.get();
  const auto count = payload.get_int<std::uint64_t>();
  for (std::uint64_t i = 0; payload.ok && i < count; ++i) {
    std::string_view expr = payload.get();
    std::string_view lowered = payload.get();
    r.lowered_names.emplace_back(expr, lowered);
  }
  if (!payload.ok || !payload.in.empty() || kind > static_cast<std::uint32_t>(code_kind::library)) {
    return lookup_outcome::corrupt;
  }
  r.code = object_code(static_cast<code_kind>(kind), std::string(code), name);
  out = std::move(r);
  return lookup_outcome::hit;
}

// --- files ---------------------------------------------------------------------------------------

class file_descriptor {
 public:
  explicit file_descriptor(int fd) noexcept : fd_(fd) {}
  file_descriptor(const file_descriptor&) = delete;
  file_descriptor& operator=(const file_descriptor&) = delete;
  ~file_descriptor() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  [[nodiscard]] int get() const noexcept { return fd_; }
  // Closes now and reports whether close succeeded (it can report a deferred write error).
  bool close() noexcept { return ::close(std::exchange(fd_, -1)) == 0; }

 private:
  int fd_;
};

// Reads a whole file; false when it cannot be opened or read. st receives its identity.
bool read_file(const std::string& path, std::string& out, struct stat& st) {
  file_descriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return false;
  }
  out.resize(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd.get(), out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      out.resize(done);  // the file shrank under us: decoding finds it truncated
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// Removes the file at path only if it is still the one that was read (another process may have
// replaced it with a valid entry in the meantime).
void remove_if_same(const std::string& path, const struct stat& read_st) noexcept {
  struct stat now {};
  if (::stat(path.c_str(), &now) == 0 && now.st_dev == read_st.st_dev && now.st_ino == read_st.st_ino) {
    ::unlink(path.c_str());
  }
}

// mkdir -p with mode 0700 for the directories it creates.
bool make_directories(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    return S_ISDIR(st.st_mode);
  }
  for (std::size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos == dir.size() || dir[pos] == '/') {
      const std::string prefix = dir.substr(0, pos);
      if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
        return false;
      }
    }
  }
  return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::uint64_t process_nonce() {
  static const std::uint64_t nonce = [] {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }();
  return nonce;
}

bool is_hex(std::string_view s) {
  return s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// <32 hex>.entry, or .<32 hex>.<...>.tmp
bool is_cache_file(std::string_view name) {
  if (name.size() == 32 + entry_suffix.size() && name.ends_with(entry_suffix)) {
    return is_hex(name.substr(0, 32));
  }
  return name.size() > 34 + temp_suffix.size() && name.front() == '.' && name[33] == '.' &&
         name.ends_with(temp_suffix) && is_hex(name.substr(1, 32));
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

}  // namespace

struct compile_cache::state {
  std::atomic<std::size_t> references{1};
  std::string directory;  // empty: disabled
  std::atomic<std::uint64_t> hits{0};
  std::atomic<std::uint64_t> misses{0};
  std::atomic<std::uint64_t> corrupt_entries{0};
  std::atomic<std::uint64_t> store_failures{0};
  std::atomic<std::uint64_t> uncacheable{0};
  std::atomic<std::uint64_t> temp_counter{0};

  // Writes the entry through a unique temporary file renamed over the final name.
  bool store(const std::string& hex, const std::string& path, std::string_view key,
             const compile_result& result) noexcept {
    try {
      const std::string entry = make_entry(key, result);
      if (!make_directories(directory)) {
        return false;
      }
      const std::string temp = directory + "/." + hex + "." + std::to_string(::getpid()) + "." +
                               std::to_string(temp_counter.fetch_add(1)) + "." + std::to_string(process_nonce()) +
                               std::string(temp_suffix);
      file_descriptor fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
      if (fd.get() < 0) {
        return false;
      }
      const bool written = write_all(fd.get(), entry) && ::fsync(fd.get()) == 0 && fd.close();
      if (!written || ::rename(temp.c_str(), path.c_str()) != 0) {
        ::unlink(temp.c_str());
        return false;
      }
      return true;
    } catch (...) {
      return false;  // out of memory building the entry or a path
    }
  }
};

compile_cache::compile_cache(std::string directory) : state_(nullptr) {
  if (directory.empty()) {
    throw invalid_argument_error("cudax::compile_cache", "the directory is empty; use compile_cache::disabled() "
                                                         "for a cache that stores nothing");
  }
  while (directory.size() > 1 && directory.back() == '/') {
    directory.pop_back();
  }
  state_ = new state;
  state_->directory = std::move(directory);
}

compile_cache::compile_cache(const compile_cache& other) noexcept : state_(other.state_) {
  state_->references.fetch_add(1, std::memory_order_relaxed);
}

compile_cache& compile_cache::operator=(const compile_cache& other) noexcept {
  other.state_->references.fetch_add(1, std::memory_order_relaxed);  // first: other may be *this
  state* old = std::exchange(state_, other.state_);
  if (old->references.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete old;
  }
  return *this;
}

compile_cache::~compile_cache() {
  if (state_->references.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete state_;
  }
}

compile_cache compile_cache::disabled() { return compile_cache(new state); }

compile_cache compile_cache::from_environment() {
  if (const std::string off = env("CUDAX_DISABLE_CACHE"); !off.empty() && off != "0") {
    return disabled();
  }
  if (std::string dir = env("CUDAX_CACHE_DIR"); !dir.empty()) {
    return compile_cache(std::move(dir));
  }
  if (const std::string xdg = env("XDG_CACHE_HOME"); xdg.starts_with('/')) {
    return compile_cache(xdg + "/cudax/nvrtc");
  }
  if (const std::string home = env("HOME"); !home.empty()) {
    return compile_cache(home + "/.cache/cudax/nvrtc");
  }
  return disabled();
}

bool compile_cache::enabled() const noexcept { return !state_->directory.empty(); }

const std::string& compile_cache::directory() const noexcept { return state_->directory; }

namespace {
// Whether NVRTC may read headers from the file system: include paths, or a raw option that adds
// one or pre-includes a file.
bool reads_headers_from_disk(const compile_options& options) {
  if (!options.include_paths.empty()) {
    return true;
  }
  for (const auto& o : options.extra_options) {
    for (std::string_view flag : {"-I", "--include-path", "-include", "--pre-include"}) {
      if (std::string_view(o).substr(0, flag.size()) == flag) {
        return true;
      }
    }
  }
  return false;
}
}  // namespace

compile_result compile_cache::compile(const program& prog, code_kind target, const compile_options& options,
                                      const std::vector<std::string>& name_expressions) {
  state& s = *state_;
  if (!enabled()) {
    s.misses.fetch_add(1, std::memory_order_relaxed);
    return prog.compile(target, options, name_expressions);
  }
  if (reads_headers_from_disk(options)) {
    // The key holds the program's named headers, not files found through include paths, which
    // may change between runs: such compilations are never cached.
    s.misses.fetch_add(1, std::memory_order_relaxed);
    s.uncacheable.fetch_add(1, std::memory_order_relaxed);
    return prog.compile(target, options, name_expressions);
  }
  // The final option list holds the resolved architecture, so the key never depends on the device
  // present at lookup time, and the compilation below uses exactly the options of the key.
  const std::vector<std::string> option_list = options.to_nvrtc_options(target);
  const std::string key = make_key(prog, target, option_list, name_expressions);
  const std::string hex = hex128(key);
  const std::string path = s.directory + "/" + hex + std::string(entry_suffix);

  std::string entry;
  struct stat st {};
  if (read_file(path, entry, st)) {
    compile_result cached;
    switch (decode_entry(entry, key, prog.name(), cached)) {
      case lookup_outcome::hit:
        s.hits.fetch_add(1, std::memory_order_relaxed);
        return cached;
      case lookup_outcome::corrupt:
        s.corrupt_entries.fetch_add(1, std::memory_order_relaxed);
        remove_if_same(path, st);
        break;
      case lookup_outcome::miss:
        break;
    }
  }
  s.misses.fetch_add(1, std::memory_order_relaxed);
  compile_options resolved = options;
  if (resolved.arch.empty()) {
    resolved.arch = option_list.front().substr(std::string_view("-arch=").size());
  }
  compile_result result = prog.compile(target, resolved, name_expressions);
  if (!s.store(hex, path, key, result)) {
    s.store_failures.fetch_add(1, std::memory_order_relaxed);
  }
  return result;
}

compile_cache::statistics compile_cache::stats() const noexcept {
  const state& s = *state_;
  return {s.hits.load(std::memory_order_relaxed), s.misses.load(std::memory_order_relaxed),
          s.corrupt_entries.load(std::memory_order_relaxed), s.store_failures.load(std::memory_order_relaxed),
          s.uncacheable.load(std::memory_order_relaxed)};
}

void compile_cache::clear() {
  if (!enabled()) {
    return;
  }
  DIR* dir = ::opendir(state_->directory.c_str());
  if (dir == nullptr) {
    return;
  }
  while (const dirent* e = ::readdir(dir)) {
    if (is_cache_file(e->d_name)) {
      ::unlinkat(::dirfd(dir), e->d_name, 0);
    }
  }
  ::closedir(dir);
}

}  // namespace cudax
