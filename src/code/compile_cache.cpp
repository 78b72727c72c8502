// compile_cache: a persistent on-disk cache of NVRTC compilations.
//
// Entry file <dir>/<32 hex digits of the key's 128-bit hash>.entry, native byte order:
//   "CUDRVNVC"  u32 format version  u32 0  u64 key size  u64 payload size  key  payload  u64 checksum
// payload: u32 code kind, code bytes, log, u64 count, then count (expression, lowered name) pairs;
// every string is a u64 length and its bytes. The checksum covers everything before it.
#include "cudrv/compile_cache.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <optional>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

#include "code/compile_cache_entry.hpp"
#include "code/image_check.hpp"
#include "code/nvvm_support.hpp"
#include "code/rtc_loader.hpp"
#include "code/toolkit_headers.hpp"
#include "cudrv/error.hpp"

namespace cudrv {
namespace {

// 2: headers found on disk are part of the key. 3: the library became cudrv (new magic, tag and default
// directory); an entry of an older format has another file name, so it is never read, only left alone.
constexpr std::uint32_t format_version = 3;
constexpr char magic[8] = {'C', 'U', 'D', 'R', 'V', 'N', 'V', 'C'};
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
  put(key, "cudrv nvrtc compile cache");
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

}  // namespace

namespace detail {

std::uint32_t cache_format_version() noexcept { return format_version; }

std::string encode_cache_payload(const compile_result& r) {
  std::string payload;
  put_int<std::uint32_t>(payload, static_cast<std::uint32_t>(r.code.kind()));
  put(payload, r.code.bytes());
  put(payload, r.log);
  put_int<std::uint64_t>(payload, r.lowered_names.size());
  for (const auto& [expr, lowered] : r.lowered_names) {
    put(payload, expr);
    put(payload, lowered);
  }
  return payload;
}

std::string encode_cache_entry(std::string_view key, std::string_view payload, std::uint32_t version) {
  std::string entry;
  entry.reserve(fixed_header + key.size() + payload.size() + checksum_size);
  entry.append(magic, sizeof magic);
  put_int<std::uint32_t>(entry, version);
  put_int<std::uint32_t>(entry, 0);
  put_int<std::uint64_t>(entry, key.size());
  put_int<std::uint64_t>(entry, payload.size());
  entry += key;
  entry += payload;
  put_int<std::uint64_t>(entry, hash64(entry, checksum_seed));
  return entry;
}

// Checks an entry's frame and checksum and, when its key is ours, decodes its payload.
cache_entry_status decode_cache_entry(std::string_view entry, std::string_view key, const std::string& name,
                                      compile_result& out) {
  if (entry.size() < fixed_header + checksum_size ||
      entry.substr(0, sizeof magic) != std::string_view(magic, sizeof magic)) {
    return cache_entry_status::corrupt;
  }
  reader header{entry.substr(sizeof magic, fixed_header - sizeof magic)};
  const auto version = header.get_int<std::uint32_t>();
  (void)header.get_int<std::uint32_t>();
  const auto key_size = header.get_int<std::uint64_t>();
  const auto payload_size = header.get_int<std::uint64_t>();
  const std::size_t body = entry.size() - fixed_header - checksum_size;
  if (version != format_version || key_size > body || payload_size != body - key_size) {
    return cache_entry_status::corrupt;
  }
  reader tail{entry.substr(entry.size() - checksum_size)};
  if (tail.get_int<std::uint64_t>() != hash64(entry.substr(0, entry.size() - checksum_size), checksum_seed)) {
    return cache_entry_status::corrupt;
  }
  if (entry.substr(fixed_header, key_size) != key) {
    return cache_entry_status::other_key;  // another key with the same hash: never a wrong result
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
    return cache_entry_status::corrupt;
  }
  // An entry is loaded by the driver as it is: one whose image fails the checks made before loading
  // (written by a buggy or foreign writer that got the checksum right) is corrupt, never a hit.
  if (!image_problem(static_cast<code_kind>(kind), code).empty()) {
    return cache_entry_status::corrupt;
  }
  r.code = object_code(static_cast<code_kind>(kind), std::string(code), name);
  out = std::move(r);
  return cache_entry_status::hit;
}

}  // namespace detail

namespace {

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

// The largest entry file a lookup reads: the file's size is checked before anything is allocated,
// so a huge (or huge and sparse) file in the directory costs one fstat.
constexpr std::uint64_t max_entry_size = std::uint64_t{1} << 30;

enum class read_status {
  ok,           // out holds the file's bytes (fewer if it shrank while read)
  not_opened,   // absent or unreadable
  not_regular,  // a directory, FIFO, socket, device, or a symbolic link where none is followed: never read
  too_large,    // larger than the bound: never read
};

// Reads the regular file at path (relative to dir_fd) whole, opened without blocking (a FIFO put in
// place of a file cannot stall the caller) and, unless follow, without following a final symbolic
// link. st receives the identity of what was opened; the size is checked before allocating.
read_status read_file(int dir_fd, const char* path, bool follow, std::uint64_t max_size, std::string& out,
                      struct stat& st) {
  if (!follow) {
    // Not even opened unless it is a regular file: opening a device can do something.
    if (::fstatat(dir_fd, path, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return read_status::not_opened;
    }
    if (!S_ISREG(st.st_mode)) {
      return read_status::not_regular;  // a symbolic link, FIFO, socket, device or directory
    }
  }
  file_descriptor fd(::openat(dir_fd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW)));
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) {
    return read_status::not_opened;
  }
  if (!S_ISREG(st.st_mode)) {
    return read_status::not_regular;
  }
  if (st.st_size < 0 || static_cast<std::uint64_t>(st.st_size) > max_size) {
    return read_status::too_large;
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
  return read_status::ok;
}

// Removes the entry name in dir_fd only if it is still the file that was read (another process may
// have replaced it with a valid entry in the meantime).
void remove_if_same(int dir_fd, const char* name, const struct stat& read_st) noexcept {
  struct stat now {};
  if (::fstatat(dir_fd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == read_st.st_dev &&
      now.st_ino == read_st.st_ino) {
    ::unlinkat(dir_fd, name, 0);
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

// Why a directory or an entry, as fstat describes it, cannot be trusted: another user owns it, or
// its group or others may write it (so another user could have put or changed what it holds).
// Empty when it is the effective user's and writable by nobody else.
std::string untrusted_because(const struct stat& st) {
  if (st.st_uid != ::geteuid()) {
    return "it is owned by uid " + std::to_string(st.st_uid) + ", not by this process's user (uid " +
           std::to_string(::geteuid()) + ")";
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return std::string("its group or others may write it (mode ") + mode + ")";
  }
  return {};
}

// The cache directory, opened: entries are then opened relative to the descriptor, so the directory
// checked is the one used even if the path is changed meanwhile.
struct opened_directory {
  int fd = -1;          // >= 0: opened and trusted
  std::string refusal;  // not empty: opened but not trusted (why)
};

opened_directory open_directory(const std::string& path) {
  opened_directory d;
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return d;  // absent (created by the first store) or unusable (a store fails)
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return d;
  }
  d.refusal = untrusted_because(st);
  if (!d.refusal.empty()) {
    ::close(fd);
    return d;
  }
  d.fd = fd;
  return d;
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

bool is_hex(std::string_view s) { return s.find_first_not_of("0123456789abcdef") == std::string_view::npos; }

// <32 hex>.entry, or .<32 hex>.<...>.tmp
bool is_cache_file(std::string_view name) {
  if (name.size() == 32 + entry_suffix.size() && name.ends_with(entry_suffix)) {
    return is_hex(name.substr(0, 32));
  }
  return name.size() > 34 + temp_suffix.size() && name.front() == '.' && name[33] == '.' &&
         name.ends_with(temp_suffix) && is_hex(name.substr(1, 32));
}

// Temporary files older than this are left over by a process that died while storing (a live writer
// renames its file within the time of one write and fsync).
constexpr long stale_temp_seconds = 600;

// Removes the leftover temporary files of crashed writers. They are never read (only *.entry files
// are), so this only reclaims their space.
void remove_stale_temporaries(int dir_fd) noexcept {
  const int fd = ::dup(dir_fd);
  DIR* dir = fd >= 0 ? ::fdopendir(fd) : nullptr;
  if (dir == nullptr) {
    if (fd >= 0) {
      ::close(fd);
    }
    return;
  }
  const std::time_t now = std::time(nullptr);
  while (const dirent* e = ::readdir(dir)) {
    const std::string_view name = e->d_name;
    struct stat st {};
    if (name.ends_with(temp_suffix) && is_cache_file(name) &&
        ::fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
        now - st.st_mtime > stale_temp_seconds) {
      ::unlinkat(dir_fd, e->d_name, 0);
    }
  }
  ::closedir(dir);
}

enum class cache_lookup { absent, hit, corrupt };

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
  std::atomic<std::uint64_t> untrusted_directory{0};
  std::atomic<std::uint64_t> temp_counter{0};
  std::atomic<bool> swept{false};   // leftover temporary files removed (by the first store)
  std::atomic<bool> warned{false};  // the untrusted directory reported on stderr

  // Tells, once per cache, that the directory is not used and why.
  void warn_untrusted(const std::string& why) noexcept {
    if (!warned.exchange(true)) {
      std::fprintf(stderr, "cudrv: compile_cache: not using %s, because %s; compiling without the cache\n",
                   directory.c_str(), why.c_str());
    }
  }

  // The lookup and store both compilers share: the entry of key when the directory holds one, else
  // compile()'s result, stored when still_valid() says the inputs did not change while it ran. The
  // miss is counted here; compile's exceptions pass through (errors are never stored).
  compile_result serve(const std::string& key, const std::string& program_name,
                       const std::function<compile_result()>& compile, const std::function<bool()>& still_valid);

  // Writes the entry through a unique temporary file renamed over the final name, in the directory
  // dir_fd (created first when it is -1; a directory that turns out untrusted is not written).
  bool store(int dir_fd, const std::string& hex, std::string_view key, const compile_result& result) noexcept {
    try {
      const std::string entry = detail::encode_cache_entry(key, detail::encode_cache_payload(result));
      opened_directory created;
      if (dir_fd < 0) {
        if (!make_directories(directory)) {
          return false;
        }
        created = open_directory(directory);
        if (!created.refusal.empty()) {
          warn_untrusted(created.refusal);  // replaced between the lookup and now: a store failure
        }
        if (created.fd < 0) {
          return false;
        }
        dir_fd = created.fd;
      }
      const file_descriptor created_fd(created.fd);
      if (!swept.exchange(true)) {
        remove_stale_temporaries(dir_fd);
      }
      const std::string temp = "." + hex + "." + std::to_string(::getpid()) + "." +
                               std::to_string(temp_counter.fetch_add(1)) + "." + std::to_string(process_nonce()) +
                               std::string(temp_suffix);
      const std::string name = hex + std::string(entry_suffix);
      file_descriptor fd(::openat(dir_fd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (fd.get() < 0) {
        return false;
      }
      const bool written = write_all(fd.get(), entry) && ::fsync(fd.get()) == 0 && fd.close();
      if (!written || ::renameat(dir_fd, temp.c_str(), dir_fd, name.c_str()) != 0) {
        ::unlinkat(dir_fd, temp.c_str(), 0);
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
    throw invalid_argument_error("cudrv::compile_cache", "the directory is empty; use compile_cache::disabled() "
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

// NOLINTNEXTLINE(bugprone-unhandled-self-assignment): counting other's reference first makes self-assignment safe
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
  if (const std::string off = env("CUDRV_DISABLE_CACHE"); !off.empty() && off != "0") {
    return disabled();
  }
  if (std::string dir = env("CUDRV_CACHE_DIR"); !dir.empty()) {
    return compile_cache(std::move(dir));
  }
  if (const std::string xdg = env("XDG_CACHE_HOME"); xdg.starts_with('/')) {
    return compile_cache(xdg + "/cudrv/nvrtc");
  }
  if (const std::string home = env("HOME"); !home.empty()) {
    return compile_cache(home + "/.cache/cudrv/nvrtc");
  }
  return disabled();
}

bool compile_cache::enabled() const noexcept { return !state_->directory.empty(); }

const std::string& compile_cache::directory() const noexcept { return state_->directory; }

namespace {

// --- headers NVRTC may read from disk ----------------------------------------------------------------
// NVRTC finds `#include "x.h"` among the program's named headers, in the directory of the program's
// name (relative to the current directory; unless -no-source-include), in the current directory and
// in every include path, and a header found on disk includes others relative to its own directory.
// The key must hold every file that could be read, so that an edit, a new file that shadows another
// or a removed one never serves an entry compiled from other inputs. The scan is a superset: every
// include directive of every text (the source, named headers, headers found), in every branch of
// #if, is looked for in every directory that could be searched; each candidate's absence, or its path,
// size and a 128-bit digest of its contents, goes into the key. Includes the scan cannot resolve (a
// macro, `#include HEADER`) make the compilation uncacheable.

struct disk_scan {
  std::vector<std::string> search_dirs;   // program dir, ".", include paths (in that order)
  std::vector<std::string> toolkit_dirs;  // those of search_dirs that are the toolkit's header directories
  std::vector<std::string> pre_includes;
  const program* prog = nullptr;
  std::string key;                        // what was found, appended to the cache key
  std::string refusal;                    // why the compilation cannot be cached; empty when it can
  std::vector<std::string> seen_files;    // canonical paths scanned, each with the directory it was opened through
  std::vector<std::string> seen_headers;  // named headers scanned
  std::vector<std::string>* looked_at = nullptr;  // when set, every path looked at (for the fuzz target)
  std::size_t bytes = 0;
  std::size_t depth = 0;  // headers (named or on disk) being scanned, one inside the other
  static constexpr std::size_t max_depth = 200;
  static constexpr std::size_t max_files = 4096;
  static constexpr std::size_t max_bytes = std::size_t{256} << 20;
};

std::string directory_of(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) {
    return ".";
  }
  return slash == 0 ? std::string("/") : std::string(path.substr(0, slash));
}

bool has(const std::vector<std::string>& v, std::string_view x) {
  for (const auto& e : v) {
    if (e == x) {
      return true;
    }
  }
  return false;
}

void scan_text(disk_scan& scan, std::string_view text, const std::string& own_dir);

// Puts the state of the file at path into the key (absent, not a regular file, unreadable, or its
// canonical path, size and digest) and scans a header found there for its own includes.
void key_file(disk_scan& scan, const std::string& path) {
  put(scan.key, path);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    put_int<std::uint32_t>(scan.key, 0);  // absent (a file created there later changes the key)
    return;
  }
  if (!S_ISREG(st.st_mode)) {
    put_int<std::uint32_t>(scan.key, 1);  // a directory or device: not a header NVRTC reads
    return;
  }
  char* real = ::realpath(path.c_str(), nullptr);
  const std::string canonical = real != nullptr ? real : path;
  std::free(real);
  std::string contents;
  struct stat read_st {};
  // The size is bounded before reading: a huge (or sparse) file is never allocated.
  const std::uint64_t budget = disk_scan::max_bytes - std::min(scan.bytes, disk_scan::max_bytes);
  const read_status status = read_file(AT_FDCWD, path.c_str(), true, budget, contents, read_st);
  if (status == read_status::not_regular) {
    put_int<std::uint32_t>(scan.key, 1);  // replaced by a directory or device since the stat
    return;
  }
  if (status == read_status::not_opened) {
    put_int<std::uint32_t>(scan.key, 2);  // unreadable, for NVRTC too
    return;
  }
  scan.bytes += contents.size();
  if (status == read_status::too_large || scan.seen_files.size() >= disk_scan::max_files ||
      scan.bytes > disk_scan::max_bytes) {
    scan.refusal = "it may read more than " + std::to_string(disk_scan::max_files) + " headers or " +
                   std::to_string(disk_scan::max_bytes >> 20) + " MiB from disk";
    return;
  }
  put_int<std::uint32_t>(scan.key, 3);
  put(scan.key, canonical);
  put_int<std::uint64_t>(scan.key, contents.size());
  put_int<std::uint64_t>(scan.key, hash64(contents, name_seed_hi));
  put_int<std::uint64_t>(scan.key, hash64(contents, name_seed_lo));
  // A header's includes are looked for from the directory it was opened through (a link's, not its
  // target's), so one file reached through two directories is scanned from each; the directories are
  // compared canonically (sub/../sub and sub are one), so a header including itself ends.
  const std::string own_dir = directory_of(path);
  char* real_dir = ::realpath(own_dir.c_str(), nullptr);
  std::string seen = canonical + '\n' + (real_dir != nullptr ? real_dir : own_dir);
  std::free(real_dir);
  if (!has(scan.seen_files, seen)) {
    scan.seen_files.push_back(std::move(seen));
    if (++scan.depth > disk_scan::max_depth) {
      scan.refusal = "its includes nest deeper than " + std::to_string(disk_scan::max_depth);
      return;
    }
    scan_text(scan, contents, own_dir);
    --scan.depth;
  }
}

void scan_include(disk_scan& scan, std::string_view name, const std::string& own_dir) {
  if (!scan.refusal.empty() || name.empty()) {
    return;
  }
  put(scan.key, "include");
  put(scan.key, name);
  for (const auto& h : scan.prog->headers()) {
    if (h.name == name && !has(scan.seen_headers, h.name)) {
      scan.seen_headers.push_back(h.name);
      if (++scan.depth > disk_scan::max_depth) {
        scan.refusal = "its includes nest deeper than " + std::to_string(disk_scan::max_depth);
        return;
      }
      scan_text(scan, h.source, directory_of(h.name));
      --scan.depth;
    }
  }
  std::vector<std::string> candidates;
  std::vector<std::string> toolkit_candidates;  // found under the toolkit's directories: keyed by its identity
  if (name.front() == '/') {
    // NVRTC opens an absolute name as it is and, when it is not there, still joins it to the
    // directories it searches ("./" + "/abs/x.h", measured for a pre-include).
    candidates.emplace_back(name);
  }
  {
    std::vector<std::string> dirs;
    if (!own_dir.empty()) {
      dirs.push_back(own_dir);
    }
    for (const auto& d : scan.search_dirs) {
      if (!has(dirs, d)) {
        dirs.push_back(d);
      }
    }
    for (const auto& d : dirs) {
      std::string candidate = d;
      if (candidate.back() != '/') {
        candidate += '/';
      }
      candidate.append(name);
      (has(scan.toolkit_dirs, d) ? toolkit_candidates : candidates).push_back(std::move(candidate));
    }
  }
  if (scan.looked_at != nullptr) {
    scan.looked_at->insert(scan.looked_at->end(), toolkit_candidates.begin(), toolkit_candidates.end());
    scan.looked_at->insert(scan.looked_at->end(), candidates.begin(), candidates.end());
  }
  for (const auto& path : toolkit_candidates) {
    // The toolkit's headers are neither read nor followed: the key holds the toolkit's identity
    // (toolkit_identity) and whether this name exists there.
    put(scan.key, path);
    struct stat st {};
    put_int<std::uint32_t>(scan.key, ::stat(path.c_str(), &st) == 0 ? 4 : 0);
  }
  for (const auto& path : candidates) {
    key_file(scan, path);
    if (!scan.refusal.empty()) {
      return;
    }
  }
}

// Blanks inside a line: what may stand between '#', the directive's name and its operand.
bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Translation phase 2: every backslash-newline removed (a newline being "\n", "\r\n" or a lone "\r",
// so that the scan joins at least every line NVRTC joins).
std::string splice_lines(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && (text[i + 1] == '\n' || text[i + 1] == '\r')) {
      i += text[i + 1] == '\r' && i + 2 < text.size() && text[i + 2] == '\n' ? 2 : 1;
      continue;
    }
    out += text[i];
  }
  return out;
}

// The index of the first character at or after i that is neither a blank nor inside a comment (a
// block comment may span lines: it is one blank). A line comment ends the line, so the end of the
// text or of the line is returned. With newlines, line ends are skipped too.
std::size_t skip_blanks(std::string_view t, std::size_t i, bool newlines) {
  while (i < t.size()) {
    if (is_blank(t[i]) || (newlines && t[i] == '\n')) {
      ++i;
    } else if (t.compare(i, 2, "/*") == 0) {
      const std::size_t close = t.find("*/", i + 2);
      i = close == std::string_view::npos ? t.size() : close + 2;
    } else if (t.compare(i, 2, "//") == 0 && !newlines) {
      const std::size_t nl = t.find('\n', i);
      return nl == std::string_view::npos ? t.size() : nl;
    } else if (t.compare(i, 2, "//") == 0) {
      const std::size_t nl = t.find('\n', i);
      i = nl == std::string_view::npos ? t.size() : nl + 1;
    } else {
      break;
    }
  }
  return i;
}

// The header name at t[i]: "name" or <name>, closed on the same line; nullopt (and a refusal naming
// what) when it is anything else, such as a macro.
std::optional<std::string_view> header_name(disk_scan& scan, std::string_view t, std::size_t i, std::string_view what) {
  const char open = i < t.size() ? t[i] : '\0';
  const char close = open == '"' ? '"' : open == '<' ? '>' : '\0';
  if (close != '\0') {
    const std::size_t end = t.find_first_of(close == '"' ? std::string_view("\"\n") : std::string_view(">\n"), i + 1);
    if (end != std::string_view::npos && t[end] == close) {
      return t.substr(i + 1, end - i - 1);
    }
  }
  const std::size_t line_end = std::min(t.find('\n', i), t.size());
  scan.refusal = "an include whose header the cache cannot tell before compiling (" + std::string(what) + " " +
                 std::string(t.substr(i, std::min<std::size_t>(line_end - i, 60))) + ")";
  return std::nullopt;
}

// The identifier that ends at t[end] (exclusive), skipping blanks, comments and '(' before it.
std::string_view identifier_before(std::string_view t, std::size_t end) {
  while (end > 0 && (is_blank(t[end - 1]) || t[end - 1] == '\n' || t[end - 1] == '(')) {
    --end;
  }
  std::size_t begin = end;
  while (begin > 0 && is_identifier_char(t[begin - 1])) {
    --begin;
  }
  return t.substr(begin, end - begin);
}

// Every include the text may make, as a superset of what NVRTC's preprocessor does: the scan needs
// no line structure, comments or #if, so it cannot miss a directive for reading them differently.
// After the lines are spliced, every '#' (or its digraph "%:" or trigraph "??=") followed, on the same
// line and past blanks and comments, by include, include_next or import is an include, wherever it
// stands (after a comment, in a skipped branch, even in a comment or a string, which only adds a
// candidate); its operand must be a header name, or the compilation is not cached. Every
// __has_include and __has_include_next followed by '(' is a candidate too; one that is not (a macro
// defined as __has_include, say) is refused unless it is the operand of defined, #ifdef or #ifndef.
void scan_text(disk_scan& scan, std::string_view text, const std::string& own_dir) {
  const std::string spliced = splice_lines(text);
  const std::string_view t = spliced;
  for (std::size_t i = 0; i < t.size() && scan.refusal.empty(); ++i) {
    std::size_t after = 0;
    if (t[i] == '#') {
      after = i + 1;
    } else if (t.compare(i, 2, "%:") == 0) {
      after = i + 2;
    } else if (t.compare(i, 3, "?\?=") == 0) {
      after = i + 3;
    } else {
      continue;
    }
    const std::size_t word = skip_blanks(t, after, false);
    std::size_t word_end = word;
    while (word_end < t.size() && is_identifier_char(t[word_end])) {
      ++word_end;
    }
    const std::string_view directive = t.substr(word, word_end - word);
    if (directive == "include" || directive == "include_next" || directive == "import") {
      if (const auto name = header_name(scan, t, skip_blanks(t, word_end, false), "#" + std::string(directive))) {
        scan_include(scan, *name, own_dir);
      }
    }
  }
  constexpr std::string_view probe = "__has_include";
  for (std::size_t at = 0; scan.refusal.empty() && (at = t.find(probe, at)) != std::string_view::npos;) {
    const std::size_t begin = at;
    at += probe.size();
    if (t.compare(at, 5, "_next") == 0) {
      at += 5;
    }
    if ((begin > 0 && is_identifier_char(t[begin - 1])) || (at < t.size() && is_identifier_char(t[at]))) {
      continue;  // part of another identifier
    }
    const std::size_t paren = skip_blanks(t, at, true);
    if (paren < t.size() && t[paren] == '(') {
      if (const auto name = header_name(scan, t, skip_blanks(t, paren + 1, true), t.substr(begin, at - begin))) {
        scan_include(scan, *name, own_dir);
      }
      continue;
    }
    const std::string_view before = identifier_before(t, begin);
    if (before != "defined" && before != "ifdef" && before != "ifndef" && before != "elifdef" && before != "elifndef") {
      scan.refusal = "__has_include used other than as __has_include(header) or as the operand of defined";
    }
  }
}

// The blanks NVRTC drops around every option (" -I<dir>\t" is -I<dir>).
constexpr std::string_view option_blanks = " \t\n\r\f\v";

std::string_view trim_option(std::string_view o) {
  const std::size_t first = o.find_first_not_of(option_blanks);
  if (first == std::string_view::npos) {
    return {};
  }
  return o.substr(first, o.find_last_not_of(option_blanks) - first + 1);
}

// The options that name files NVRTC reads or writes besides headers: explicit precompiled headers (a
// PCH named by one compilation and used by another, outside the key) and the timing reports
// (written). Such compilations are not cached. Automatic PCH (-pch and its flags) only speeds up the
// compilation in this process and is cached like any other option.
std::string_view unkeyable_option(const std::vector<std::string>& options) {
  for (const std::string& option : options) {
    const std::string_view o = trim_option(option);
    for (std::string_view flag : {"-use-pch", "--use-pch", "-create-pch", "--create-pch", "-time", "--time",
                                  "-fdevice-time-trace", "--fdevice-time-trace"}) {
      if (o.starts_with(flag)) {
        return option;
      }
    }
  }
  return {};
}

// The value of the include option o (options[i], trimmed), given after its flag as rest or, for a flag
// alone, as the next option (i then moves to it). Empty for a flag without a value, and, with
// scan.refusal set, for a value the cache cannot be sure NVRTC reads as written.
std::string_view include_option_value(disk_scan& scan, const std::vector<std::string>& options, std::size_t& i,
                                      std::string_view o, std::string_view rest, bool short_flag) {
  std::string_view value;
  if (rest.empty()) {
    if (i + 1 == options.size()) {
      return {};  // a flag without a value: nothing is searched
    }
    value = options[++i];
    if (trim_option(value) != value) {
      scan.refusal = "the option " + std::string(o) + " takes the next option, \"" + std::string(value) +
                     "\", whose blanks the cache cannot be sure NVRTC drops";
      return {};
    }
  } else if (rest.front() == '=') {
    value = rest.substr(1);
  } else if (short_flag) {
    value = rest.substr(std::min(rest.find_first_not_of(' '), rest.size()));
  } else {
    scan.refusal = "the option \"" + std::string(options[i]) + "\" starts like an include option but is none";
    return {};
  }
  const bool control =
      std::any_of(value.begin(), value.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
  if (!value.empty() &&
      (control || option_blanks.find(value.front()) != std::string_view::npos || value.front() == '=')) {
    scan.refusal =
        "the option \"" + std::string(options[i]) + "\" names a path the cache cannot be sure NVRTC reads as written";
    return {};
  }
  return value;
}

// The directories scan searches, in NVRTC's order: the source's directory (unless -no-source-include),
// ".", then the include paths given (without trailing slashes, each once); and which of them are the
// toolkit's header directories.
void add_search_dirs(disk_scan& scan, bool source_dir, std::vector<std::string> paths) {
  if (source_dir) {
    scan.search_dirs.push_back(directory_of(scan.prog->name()));
  }
  if (!has(scan.search_dirs, ".")) {
    scan.search_dirs.push_back(".");
  }
  for (auto& p : paths) {
    while (p.size() > 1 && p.back() == '/') {
      p.pop_back();
    }
    if (!p.empty() && !has(scan.search_dirs, p)) {
      scan.search_dirs.push_back(std::move(p));
    }
  }
  if (const toolkit_header_dirs* tk = detail::toolkit_headers_if_found()) {
    for (const auto& d : scan.search_dirs) {
      char* real = ::realpath(d.c_str(), nullptr);
      const std::string canonical = real != nullptr ? real : d;
      std::free(real);
      if (canonical == tk->cccl || canonical == tk->include) {
        scan.toolkit_dirs.push_back(d);
      }
    }
  }
}

// Fills scan from the final option list: include paths and pre-includes, in the order given, read as
// NVRTC 13 reads them (measured): blanks around an option are dropped; -I<dir>, -I=<dir>, -I <dir>
// (blanks after -I dropped, spaces only), --include-path=<dir>, -include=<file>, --pre-include=<file>,
// and each flag alone takes the next option as its value. A value the cache cannot be sure NVRTC reads
// as written (one that starts with a blank or '=', or holds a control character) makes the
// compilation uncacheable, as does an option that starts like one of these but is none of them.
void read_search_options(disk_scan& scan, const std::vector<std::string>& options) {
  bool source_dir = true;
  std::vector<std::string> paths;
  for (std::size_t i = 0; i < options.size() && scan.refusal.empty(); ++i) {
    const std::string_view o = trim_option(options[i]);
    if (o == "-no-source-include" || o == "--no-source-include") {
      source_dir = false;
      continue;
    }
    bool is_path = true;
    bool short_flag = false;
    std::string_view rest;
    if (o.starts_with("--include-path")) {
      rest = o.substr(14);
    } else if (o.starts_with("--pre-include")) {
      rest = o.substr(13);
      is_path = false;
    } else if (o.starts_with("-include")) {
      rest = o.substr(8);
      is_path = false;
    } else if (o.starts_with("-I")) {
      rest = o.substr(2);
      short_flag = true;
    } else {
      continue;
    }
    const std::string_view value = include_option_value(scan, options, i, o, rest, short_flag);
    if (value.empty()) {
      continue;  // nothing searched, or refused (which ends the loop)
    }
    if (is_path) {
      paths.emplace_back(value);
    } else {
      scan.pre_includes.emplace_back(value);
    }
  }
  add_search_dirs(scan, source_dir, std::move(paths));
}

// The top-level entries of the toolkit's header directories ("cub", "cuda", "thrust", "cuda_runtime.h",
// ...), read once per process.
const std::vector<std::string>& toolkit_top_names(const toolkit_header_dirs& tk) {
  static const std::vector<std::string> names = [&tk] {
    std::vector<std::string> out;
    for (const std::string& dir : {tk.cccl, tk.include}) {
      if (DIR* d = ::opendir(dir.c_str())) {
        while (const dirent* e = ::readdir(d)) {
          if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
            out.emplace_back(e->d_name);
          }
        }
        ::closedir(d);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }();
  return names;
}

// The toolkit's identity, for a compilation that searches its directories: the headers under them
// are not read, so the key holds what changes when the toolkit does (its directories, CCCL's version
// file, cuda.h). The toolkit's headers are trusted to include only one another: a directory searched
// before the toolkit's that holds one of the toolkit's top-level names (a "cuda/" folder in the
// current directory) could shadow a header CCCL includes, which the cache cannot see, so such a
// compilation is refused.
void toolkit_identity(disk_scan& scan) {
  if (scan.toolkit_dirs.empty()) {
    return;
  }
  const toolkit_header_dirs& tk = *detail::toolkit_headers_if_found();
  put(scan.key, "toolkit");
  put(scan.key, tk.cccl);
  put(scan.key, tk.include);
  put_int<std::int32_t>(scan.key, tk.cccl_version);
  for (const std::string& f : {tk.cccl, tk.include, tk.cccl + "/cuda/std/__cccl/version.h", tk.include + "/cuda.h",
                               tk.include + "/cuda_runtime_api.h"}) {
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) {
      put_int<std::int64_t>(scan.key, -1);
      continue;
    }
    put_int<std::int64_t>(scan.key, st.st_size);
    put_int<std::int64_t>(scan.key, st.st_mtim.tv_sec);
    put_int<std::int64_t>(scan.key, st.st_mtim.tv_nsec);
    put_int<std::int64_t>(scan.key, st.st_ctim.tv_sec);
    put_int<std::int64_t>(scan.key, st.st_ctim.tv_nsec);
  }
  const std::vector<std::string>& top = toolkit_top_names(tk);
  for (const auto& dir : scan.search_dirs) {
    if (has(scan.toolkit_dirs, dir)) {
      continue;
    }
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      continue;  // absent or unreadable: it shadows nothing
    }
    while (const dirent* e = ::readdir(d)) {
      if (std::binary_search(top.begin(), top.end(), std::string_view(e->d_name))) {
        scan.refusal = "the directory " + dir + ", searched too, holds \"" + e->d_name +
                       "\", a name of the toolkit's headers, which could shadow a header the toolkit's headers include";
        break;
      }
    }
    ::closedir(d);
    if (!scan.refusal.empty()) {
      return;
    }
  }
}

// The key part for the headers on disk, or a refusal (an empty key part and a reason). looked_at, when
// not null, receives every path the scan looked at.
std::string scan_disk_inputs(const program& prog, const std::vector<std::string>& option_list, std::string& refusal,
                             std::vector<std::string>* looked_at = nullptr) {
  if (const std::string_view o = unkeyable_option(option_list); !o.empty()) {
    refusal = "the option " + std::string(o) + " reads or writes files outside the key";
    return {};
  }
  disk_scan scan;
  scan.prog = &prog;
  scan.looked_at = looked_at;
  read_search_options(scan, option_list);
  if (!scan.refusal.empty()) {
    refusal = std::move(scan.refusal);
    return {};
  }
  toolkit_identity(scan);
  // NVRTC stats the program's name on disk (measured), so a file there is keyed like a header.
  put(scan.key, "program file");
  if (!prog.name().empty()) {
    if (scan.looked_at != nullptr) {
      scan.looked_at->push_back(prog.name());
    }
    key_file(scan, prog.name());
  }
  for (const auto& f : scan.pre_includes) {
    scan_include(scan, f, std::string());
  }
  scan_text(scan, prog.source(), std::string());
  refusal = std::move(scan.refusal);
  return std::move(scan.key);
}

// The entry name in dir_fd for key (of the program named program_name): a hit (its result into
// cached), absent (none, another key's, or one too large for the memory left), or corrupt (not an
// entry, or a file the cache must not trust); st is what was read, for removing it.
cache_lookup look_up_entry(int dir_fd, const std::string& name, const std::string& key, const std::string& program_name,
                           compile_result& cached, struct stat& st) {
  std::string entry;
  cache_lookup found = cache_lookup::absent;
  try {
    const read_status status = read_file(dir_fd, name.c_str(), false, max_entry_size, entry, st);
    if (status == read_status::ok && untrusted_because(st).empty()) {
      switch (detail::decode_cache_entry(entry, key, program_name, cached)) {
        case detail::cache_entry_status::hit: found = cache_lookup::hit; break;
        case detail::cache_entry_status::corrupt: found = cache_lookup::corrupt; break;
        case detail::cache_entry_status::other_key: break;
      }
    } else if (status != read_status::not_opened) {
      // Not a regular file, too large, or another user's or writable by others: never read, and
      // replaced by the store that follows.
      found = cache_lookup::corrupt;
    }
  } catch (const std::bad_alloc&) {
    found = cache_lookup::absent;  // an entry too large for the memory left: compiled instead
  }
  return found;
}

}  // namespace

namespace detail {

cache_disk_inputs scan_cache_disk_inputs(const program& prog, const std::vector<std::string>& option_list) {
  cache_disk_inputs out;
  (void)scan_disk_inputs(prog, option_list, out.refusal, &out.paths);
  return out;
}

}  // namespace detail

compile_result compile_cache::compile(const program& prog, code_kind target, const compile_options& options,
                                      const std::vector<std::string>& name_expressions) {
  state& s = *state_;
  if (!enabled()) {
    s.misses.fetch_add(1, std::memory_order_relaxed);
    return prog.compile(target, options, name_expressions);
  }
  // The final option list holds the resolved architecture, so the key never depends on the device
  // present at lookup time, and the compilation below uses exactly the options of the key.
  const std::vector<std::string> option_list = options.to_nvrtc_options(target);
  std::string key = make_key(prog, target, option_list, name_expressions);
  std::string refusal;
  const std::string disk = scan_disk_inputs(prog, option_list, refusal);
  put(key, "headers on disk");
  key += disk;
  if (!refusal.empty()) {
    s.misses.fetch_add(1, std::memory_order_relaxed);
    s.uncacheable.fetch_add(1, std::memory_order_relaxed);
    return prog.compile(target, options, name_expressions);
  }
  compile_options resolved = options;
  if (resolved.arch.empty()) {
    resolved.arch = option_list.front().substr(std::string_view("-arch=").size());
  }
  // A header edited while NVRTC ran could have been read in either version: store only when the files
  // are still those of the key.
  return s.serve(
      key, prog.name(), [&] { return prog.compile(target, resolved, name_expressions); },
      [&] {
        std::string refusal_after;
        return scan_disk_inputs(prog, option_list, refusal_after) == disk && refusal_after.empty();
      });
}

compile_result compile_cache::state::serve(const std::string& key, const std::string& program_name,
                                           const std::function<compile_result()>& compile,
                                           const std::function<bool()>& still_valid) {
  const std::string hex = hex128(key);
  const std::string name = hex + std::string(entry_suffix);
  // Only a directory of this user that nobody else may write is read or written: anything else could
  // hold entries another user made, or be changed by one.
  const opened_directory dir = open_directory(directory);
  const file_descriptor dir_fd(dir.fd);
  if (!dir.refusal.empty()) {
    untrusted_directory.fetch_add(1, std::memory_order_relaxed);
    misses.fetch_add(1, std::memory_order_relaxed);
    warn_untrusted(dir.refusal);
    return compile();
  }
  if (dir_fd.get() >= 0) {
    struct stat st {};
    compile_result cached;
    const cache_lookup found = look_up_entry(dir_fd.get(), name, key, program_name, cached, st);
    if (found == cache_lookup::hit) {
      hits.fetch_add(1, std::memory_order_relaxed);
      return cached;
    }
    if (found == cache_lookup::corrupt) {
      corrupt_entries.fetch_add(1, std::memory_order_relaxed);
      remove_if_same(dir_fd.get(), name.c_str(), st);
    }
  }
  misses.fetch_add(1, std::memory_order_relaxed);
  compile_result result = compile();
  if (!still_valid() || !store(dir_fd.get(), hex, key, result)) {
    store_failures.fetch_add(1, std::memory_order_relaxed);
  }
  return result;
}

// --- issue 34 part 9: NVVM IR ----------------------------------------------------------------------

namespace {

// The key of compiling prog with the prepared inputs: libNVVM's versions and file, the target, the
// program's name, every module's name and bytes, the final option list, whether it is verified, and
// libdevice's path, size and digest when it is linked. NVVM IR names no file, so nothing else on
// disk is read.
std::string make_nvvm_key(const nvvm_program& prog, code_kind target, const detail::nvvm_inputs& in) {
  std::string key;
  std::size_t ir_size = 0;
  for (const nvvm_module& m : prog.modules()) {
    ir_size += m.ir.size() + m.name.size() + 16;
  }
  key.reserve(512 + ir_size);
  put(key, "cudrv nvvm compile cache");
  put_int<std::uint32_t>(key, format_version);
  const nvvm_version_info v = nvvm_version();
  for (int n : {v.major, v.minor, v.ir_major, v.ir_minor, v.debug_major, v.debug_minor}) {
    put_int<std::int32_t>(key, n);
  }
  put(key, detail::nvvm_identity());
  put_int<std::uint32_t>(key, static_cast<std::uint32_t>(target));
  put(key, prog.name());
  put_int<std::uint64_t>(key, prog.modules().size());
  for (const nvvm_module& m : prog.modules()) {
    put(key, m.name);
    put(key, m.ir);
  }
  put_int<std::uint64_t>(key, in.options.size());
  for (const auto& o : in.options) {
    put(key, o);
  }
  put_int<std::uint32_t>(key, in.verify ? 1 : 0);
  put(key, in.libdevice_path);
  put_int<std::uint64_t>(key, in.libdevice.size());
  put(key, in.libdevice_path.empty() ? std::string() : hex128(in.libdevice));
  return key;
}

}  // namespace

compile_result compile_cache::compile(const nvvm_program& prog, code_kind target, const nvvm_options& options) {
  state& s = *state_;
  // The inputs are prepared once (architecture resolved, libdevice read), so the key holds exactly
  // what is compiled.
  const detail::nvvm_inputs in = detail::prepare_nvvm(options, target);
  if (!enabled()) {
    s.misses.fetch_add(1, std::memory_order_relaxed);
    return detail::compile_nvvm(prog, target, in);
  }
  return s.serve(
      make_nvvm_key(prog, target, in), prog.name(), [&] { return detail::compile_nvvm(prog, target, in); },
      [] { return true; });
}

compile_cache::statistics compile_cache::stats() const noexcept {
  const state& s = *state_;
  return {s.hits.load(std::memory_order_relaxed),
          s.misses.load(std::memory_order_relaxed),
          s.corrupt_entries.load(std::memory_order_relaxed),
          s.store_failures.load(std::memory_order_relaxed),
          s.uncacheable.load(std::memory_order_relaxed),
          s.untrusted_directory.load(std::memory_order_relaxed)};
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

}  // namespace cudrv
