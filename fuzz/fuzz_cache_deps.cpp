// libFuzzer target: the compile cache's key against what NVRTC really reads (issue 31). Differential:
// each input generates a program, named headers, headers on disk and an option list full of include
// tricks, compiles it with the real NVRTC while recording every file NVRTC looks at, and checks that
// the cache's key holds each of them.
//
// Why this is enough: the key holds, for every path the cache's scan looked at, whether a file is
// there and, when one is, its canonical path, size and digest. If every path NVRTC stats or opens is
// among them, the same key means NVRTC sees the same files, hence compiles the same bytes: a hit can
// never be stale. So one NVRTC compilation checks a program, where compiling twice around an edit
// checks only the edit made. (Paths NVRTC stats without ever reading them are exempt, each with its
// reason, below.) One input in 32 (FUZZ_CACHE_DEPS_END_TO_END=N: one in N) is also checked end to
// end: compile through a cache, edit every header on disk (and create absent ones the program may
// ask for), compile through the cache again and compare a hit, byte for byte, with a fresh
// compilation.
//
// What NVRTC looks at is recorded by interposing the C library functions libnvrtc imports for files
// (open, openat, fopen, fopen64, __xstat, __lxstat, stat, lstat, access, opendir, realpath), which the
// executable exports (-rdynamic); only paths inside the workspace count (not the toolkit or /proc).
// Paths are compared after resolving them as the kernel does (symbolic links followed, ".." taken
// physically, the rest kept as written from the first component that does not exist).
//
// Input layout (every read past the end gives zeros): see generate() below. A finding prints the
// program, the files and the options, and aborts; with FUZZ_CACHE_DEPS_KEEP_GOING set in the
// environment the findings are counted instead (the last line says how many), to measure a cache.
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <cudrv/compile_cache.hpp>
#include <cudrv/error.hpp>
#include <cudrv/program.hpp>

#include "code/compile_cache_entry.hpp"

namespace fs = std::filesystem;

// --- recording what NVRTC looks at ----------------------------------------------------------------

namespace {

std::atomic<bool> recording{false};
std::mutex recorded_mutex;
std::vector<std::string>* recorded = nullptr;  // set while recording

void note(const char* path) noexcept {
  if (!recording.load(std::memory_order_relaxed) || path == nullptr) {
    return;
  }
  try {
    std::lock_guard<std::mutex> lock(recorded_mutex);
    if (recorded != nullptr) {
      recorded->emplace_back(path);
    }
  } catch (...) {
  }
}

template <class F>
F next(const char* name) {
  static_assert(sizeof(F) == sizeof(void*));
  void* f = ::dlsym(RTLD_NEXT, name);
  if (f == nullptr) {
    std::fprintf(stderr, "fuzz_cache_deps: no next %s\n", name);
    std::abort();
  }
  F out;
  std::memcpy(&out, &f, sizeof out);
  return out;
}

}  // namespace

extern "C" {

int open(const char* path, int flags, ...) {
  static const auto real = next<int (*)(const char*, int, ...)>("open");
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = (flags & (O_CREAT | O_TMPFILE)) != 0 ? static_cast<mode_t>(va_arg(ap, unsigned)) : 0;
  va_end(ap);
  note(path);
  return real(path, flags, mode);
}

int open64(const char* path, int flags, ...) {
  static const auto real = next<int (*)(const char*, int, ...)>("open64");
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = (flags & (O_CREAT | O_TMPFILE)) != 0 ? static_cast<mode_t>(va_arg(ap, unsigned)) : 0;
  va_end(ap);
  note(path);
  return real(path, flags, mode);
}

int openat(int dir, const char* path, int flags, ...) {
  static const auto real = next<int (*)(int, const char*, int, ...)>("openat");
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = (flags & (O_CREAT | O_TMPFILE)) != 0 ? static_cast<mode_t>(va_arg(ap, unsigned)) : 0;
  va_end(ap);
  if (dir == AT_FDCWD || path[0] == '/') {
    note(path);
  }
  return real(dir, path, flags, mode);
}

FILE* fopen(const char* path, const char* mode) {
  static const auto real = next<FILE* (*)(const char*, const char*)>("fopen");
  note(path);
  return real(path, mode);
}

FILE* fopen64(const char* path, const char* mode) {
  static const auto real = next<FILE* (*)(const char*, const char*)>("fopen64");
  note(path);
  return real(path, mode);
}

// glibc's old stat entry points, which libnvrtc imports; the structure is struct stat on x86-64.
int __xstat(int, const char* path, struct stat* st) {  // NOLINT(bugprone-reserved-identifier)
  note(path);
  return ::fstatat(AT_FDCWD, path, st, 0);
}

int __lxstat(int, const char* path, struct stat* st) {  // NOLINT(bugprone-reserved-identifier)
  note(path);
  return ::fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

int stat(const char* path, struct stat* st) {
  note(path);
  return ::fstatat(AT_FDCWD, path, st, 0);
}

int lstat(const char* path, struct stat* st) {
  note(path);
  return ::fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

int access(const char* path, int how) {
  static const auto real = next<int (*)(const char*, int)>("access");
  note(path);
  return real(path, how);
}

DIR* opendir(const char* path) {
  static const auto real = next<DIR* (*)(const char*)>("opendir");
  note(path);
  return real(path);
}

char* realpath(const char* path, char* resolved) {
  static const auto real = next<char* (*)(const char*, char*)>("realpath");
  note(path);
  return real(path, resolved);
}

}  // extern "C"

namespace {

// --- the workspace --------------------------------------------------------------------------------

std::string workspace;        // absolute, no trailing slash; the current directory is <workspace>/cwd
std::string start_directory;  // the current directory between inputs

// Directories headers are put in (relative to the workspace), and the names programs include.
const char* const dirs[] = {"cwd", "cwd/a", "cwd/a/b", "inc", "inc/sub", "sp ace", "ext"};
const char* const names[] = {"h0.h",      "h1.h",     "h2.h",  "sub/h3.h", "../h4.h", "alias.h",   "dang.h",
                             "link/h1.h", "a/b/h5.h", " h6.h", "h 7.h",    "./h0.h",  "b/../h2.h", "h1.h/x.h"};

// The path as the kernel resolves it: absolute, symbolic links followed and ".." taken physically
// while the components exist; from the first that does not (or that is not a directory with more to
// come), the rest as written.
std::string resolve(const std::string& path) {
  std::string abs = path;
  if (abs.empty() || abs[0] != '/') {
    char* cwd = ::getcwd(nullptr, 0);
    abs = std::string(cwd != nullptr ? cwd : "") + "/" + path;
    std::free(cwd);
  }
  std::vector<std::string> parts;
  for (std::size_t pos = 0; pos <= abs.size();) {
    const std::size_t slash = std::min(abs.find('/', pos), abs.size());
    parts.push_back(abs.substr(pos, slash - pos));
    pos = slash + 1;
  }
  std::string done = "/";
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (p.empty() || p == ".") {
      continue;
    }
    std::string candidate = p == ".." ? fs::path(done).parent_path().string() : (done == "/" ? "/" : done + "/") + p;
    struct stat st {};
    if (::fstatat(AT_FDCWD, candidate.c_str(), &st, 0) != 0 || (i + 1 < parts.size() && !S_ISDIR(st.st_mode))) {
      std::string rest = candidate;
      for (std::size_t j = i + 1; j < parts.size(); ++j) {
        rest += "/" + parts[j];
      }
      return rest + (::fstatat(AT_FDCWD, candidate.c_str(), &st, 0) != 0 ? " (absent)" : " (not a directory)");
    }
    char* real = ::realpath(candidate.c_str(), nullptr);
    done = real != nullptr ? real : candidate;
    std::free(real);
  }
  return done;
}

// --- the generator --------------------------------------------------------------------------------

struct input {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t at = 0;
  std::uint8_t byte() { return at < size ? data[at++] : 0; }
  std::size_t pick(std::size_t n) { return byte() % n; }
};

struct generated {
  std::string program_name;
  std::string source;
  std::vector<cudrv::header> headers;
  cudrv::compile_options options;
  std::vector<std::pair<std::string, std::string>> files;  // path relative to the workspace, contents
  std::vector<std::string> absent;                         // paths a program asks for that are not there
  std::string describe() const;
};

std::string generated::describe() const {
  std::string out = "program " + program_name + ":\n" + source + "\nnamed headers:\n";
  for (const auto& h : headers) {
    out += "  [" + h.name + "]\n" + h.source + "\n";
  }
  out += "files:\n";
  for (const auto& [path, contents] : files) {
    out += "  [" + path + "]\n" + contents + "\n";
  }
  out += "options:";
  for (const auto& o : options.to_nvrtc_options(cudrv::code_kind::ptx)) {
    out += " [" + o + "]";
  }
  return out + "\n";
}

// A name as a program includes it: one of names[], or a path into the workspace.
std::string include_name(input& in) {
  if (in.pick(2) == 0) {
    return "h" + std::to_string(in.pick(3)) + ".h";  // often one that is there
  }
  const std::size_t k = in.pick(std::size(names) + 2);
  if (k == std::size(names)) {
    return workspace + "/" + dirs[in.pick(std::size(dirs))] + "/h" + std::to_string(in.pick(3)) + ".h";
  }
  if (k == std::size(names) + 1) {
    return std::string(dirs[in.pick(std::size(dirs))]) + "/h" + std::to_string(in.pick(3)) + ".h";
  }
  return names[k];
}

// Splits s at a position the input chooses with a backslash-newline.
std::string spliced(input& in, const std::string& s) {
  if (s.empty()) {
    return s;
  }
  const std::size_t at = in.pick(s.size());
  return s.substr(0, at) + (in.pick(2) == 0 ? "\\\n" : "\\\r\n") + s.substr(at);
}

// One line (or a few) of a program or header, with an include trick.
std::string line(input& in, int& macro_counter) {
  const std::string name = include_name(in);
  const std::string quoted = "\"" + name + "\"";
  const std::string angled = "<" + name + ">";
  switch (in.pick(24)) {
    case 0: return "#include " + quoted + "\n";
    case 1: return "/* generated */ #include " + quoted + "\n";
    case 2: return "#/**/include/**/" + angled + "\n";
    case 3: return "%:include " + quoted + "\n";
    case 4: return spliced(in, "#include " + quoted) + "\n";
    case 5: return "#if __has_include(" + quoted + ")\n#include " + quoted + "\n#endif\n";
    case 6: {
      const std::string macro = "HDR" + std::to_string(macro_counter++);
      return "#define " + macro + " " + quoted + "\n#include " + macro + "\n";
    }
    case 7: return "#if 0\n#include " + quoted + "\n#endif\n";
    case 8: return "// #include " + quoted + "\n";
    case 9: return "#pragma once\n";
    case 10: return "  #  include " + angled + " // trailing\n";
    case 11: return "?\?=include " + quoted + "\n";
    case 12: return "#include " + quoted + "\r\n";
    case 13: return "#line 7 \"a/b/elsewhere.cu\"\n";
    case 14: return "/* a comment\n over lines */ #include " + quoted + "\n";
    case 15:
      return "#if __has_include(" + angled + ")\n#define HAS_" + std::to_string(macro_counter++) + " 1\n#endif\n";
    case 16: return "#ifdef __has_include\n#endif\n";
    case 17: return "#define STR(x) #x\n#include STR(" + name + ")\n";
    case 18: return "/*\n#include " + quoted + "\n*/\n";
    case 19: return "#include_next " + quoted + "\n";
    case 20: return "#\\\ninclude " + quoted + "\n";
    case 21: return "# /* c */ include /* c */ " + quoted + " /* c */\n";
    case 22: return "#if __has_include_next(" + quoted + ")\n#endif\n";
    default: return "#if defined(__has_include) && __has_include(" + quoted + ")\n#include " + quoted + "\n#endif\n";
  }
}

std::string text(input& in, int& macro_counter, std::size_t max_lines) {
  std::string out;
  const std::size_t n = in.pick(max_lines + 1);
  for (std::size_t i = 0; i < n; ++i) {
    out += line(in, macro_counter);
  }
  return out;
}

// A header's contents: guarded lines and a variable holding value (so that an edit changes the PTX).
std::string header_text(input& in, int id, int value, int& macro_counter) {
  const std::string guard = "G_" + std::to_string(id);
  return "#ifndef " + guard + "\n#define " + guard + "\n" + text(in, macro_counter, 3) +
         "extern \"C\" __device__ int v_" + std::to_string(id) + " = " + std::to_string(value) + ";\n#endif\n";
}

// A directory as an option names it: absolute, relative to the current directory, through a link.
std::string dir_spelling(input& in) {
  const std::string d = dirs[in.pick(std::size(dirs))];
  switch (in.pick(6)) {
    case 0: return workspace + "/" + d;
    case 1: return "../" + d;
    case 2: return workspace + "/" + d + "/";
    case 3: return "link";
    case 4: return workspace + "/cwd/a/../../" + d;
    default: return d == "cwd" ? "." : "../" + d + "//";
  }
}

// An include option with blank and spelling tricks.
void add_option(input& in, cudrv::compile_options& o) {
  const std::string d = dir_spelling(in);
  const std::string f = workspace + "/" + dirs[in.pick(std::size(dirs))] + "/h" + std::to_string(in.pick(3)) + ".h";
  const char* blanks[] = {"", " ", "  ", "\t", "\n", "\r", "\v", "\f", " \t"};
  const std::string lead = blanks[in.pick(std::size(blanks))];
  const std::string trail = blanks[in.pick(std::size(blanks))];
  switch (in.pick(13)) {
    case 0: o.extra_options.push_back(lead + "-I" + d + trail); break;
    case 1: o.extra_options.push_back("-I" + lead + d + trail); break;
    case 2: o.extra_options.push_back(lead + "-I=" + lead + d + trail); break;
    case 3: o.extra_options.push_back(lead + "--include-path=" + d + trail); break;
    case 4:
      o.extra_options.push_back("-I" + trail);
      o.extra_options.push_back(lead + d + trail);
      break;
    case 5: o.include_paths.push_back(lead + d + trail); break;
    case 6: o.extra_options.push_back(lead + "--pre-include=" + f + trail); break;
    case 7:
      o.extra_options.push_back(lead + "-include=" + lead + "h" + std::to_string(in.pick(3)) + ".h" + trail);
      break;
    case 8: o.extra_options.push_back(lead + "-no-source-include" + trail); break;
    case 9:
      o.extra_options.push_back("--include-path" + trail);
      o.extra_options.push_back(lead + d + trail);
      break;
    case 10: o.extra_options.push_back("-I==" + d); break;
    case 11: o.extra_options.push_back("-std=c++03"); break;
    default: o.include_paths.push_back(d); break;
  }
}

generated generate(input& in) {
  generated g;
  int macro_counter = 0;
  const char* program_names[] = {"main.cu", "a/main.cu", "a/b/main.cu", "./main.cu", "link/main.cu", "../inc/main.cu"};
  const std::size_t pn = in.pick(std::size(program_names) + 1);
  g.program_name = pn < std::size(program_names) ? program_names[pn] : workspace + "/inc/sub/main.cu";
  g.source = text(in, macro_counter, 4) + "extern \"C\" __global__ void k(int* p) { *p = 1; }\n";
  for (std::size_t n = in.pick(3), i = 0; i < n; ++i) {
    g.headers.push_back({include_name(in), header_text(in, 100 + static_cast<int>(i), 7, macro_counter)});
  }
  g.options.arch = "sm_90";
  for (std::size_t n = in.pick(4), i = 0; i < n; ++i) {
    add_option(in, g.options);
  }
  // Files on disk: up to 8, each in a directory under one of a few names.
  for (std::size_t n = in.pick(9), i = 0; i < n; ++i) {
    // Half of them where a plain include from the current directory or an include path finds them.
    const bool likely = in.pick(2) == 0;
    const std::string dir = likely ? (in.pick(2) == 0 ? "cwd" : "inc") : dirs[in.pick(std::size(dirs))];
    const char* file_names[] = {"h0.h", "h1.h", "h2.h", "h4.h", " h6.h", "h 7.h", "main.cu"};
    const std::string file = file_names[likely ? in.pick(3) : in.pick(std::size(file_names))];
    g.files.emplace_back(dir + "/" + file,
                         header_text(in, static_cast<int>(i), 1000 + static_cast<int>(i), macro_counter));
  }
  // sub/h3.h and a/b/h5.h are where a quoted include from cwd or inc looks for them.
  if (in.pick(2) == 0) {
    g.files.emplace_back("inc/sub/h3.h", header_text(in, 50, 3000, macro_counter));
  }
  if (in.pick(2) == 0) {
    g.files.emplace_back("cwd/a/b/h5.h", header_text(in, 51, 3100, macro_counter));
  }
  return g;
}

// Writes the files and the links of one input: cwd/link -> ../inc (a directory), inc/alias.h ->
// sub/h3.h (a file), inc/dang.h -> nowhere.h (dangling), cwd/a/h1.h -> ../../inc/h1.h.
void lay_out(const generated& g) {
  fs::remove_all(workspace + "/cwd");
  for (const char* d : dirs) {
    fs::remove_all(workspace + "/" + d);
  }
  for (const char* d : dirs) {
    fs::create_directories(workspace + "/" + d);
  }
  for (const auto& [path, contents] : g.files) {
    if (FILE* f = std::fopen((workspace + "/" + path).c_str(), "wb")) {
      std::fwrite(contents.data(), 1, contents.size(), f);
      std::fclose(f);
    }
  }
  std::error_code ec;  // a generated file of the same name stays
  fs::create_directory_symlink("../inc", workspace + "/cwd/link", ec);
  fs::create_symlink("sub/h3.h", workspace + "/inc/alias.h", ec);
  fs::create_symlink("nowhere.h", workspace + "/inc/dang.h", ec);
  fs::create_symlink("../../inc/h1.h", workspace + "/cwd/a/h1.h", ec);
}

// Every file on disk edited (its variable's value changed), and a header created at each of a few
// absent paths the program could read.
void edit_everything(const generated& g) {
  int id = 500;
  for (const auto& [path, contents] : g.files) {
    std::string edited = contents;
    const std::size_t eq = edited.rfind(" = ");
    if (eq != std::string::npos) {
      edited.insert(eq + 3, "7");  // 1000 -> 71000
    }
    if (FILE* f = std::fopen((workspace + "/" + path).c_str(), "wb")) {
      std::fwrite(edited.data(), 1, edited.size(), f);
      std::fclose(f);
    }
  }
  for (const char* d : dirs) {
    for (const char* n : {"h0.h", "h1.h", "h2.h"}) {
      const std::string p = workspace + "/" + d + "/" + n;
      struct stat st {};
      if (::lstat(p.c_str(), &st) != 0) {
        if (FILE* f = std::fopen(p.c_str(), "wb")) {
          const std::string g = "C_" + std::to_string(id);
          const std::string t = "#ifndef " + g + "\n#define " + g + "\nextern \"C\" __device__ int created_" +
                                std::to_string(id) + " = 5;\n#endif\n";
          ++id;
          std::fwrite(t.data(), 1, t.size(), f);
          std::fclose(f);
        }
      }
    }
  }
}

std::uint64_t inputs = 0;
std::uint64_t missed_paths = 0;  // findings, counted when FUZZ_CACHE_DEPS_KEEP_GOING is set
std::uint64_t stale_hits = 0;

// Reports a finding and aborts, or, with FUZZ_CACHE_DEPS_KEEP_GOING set (to measure a defective
// cache: how many programs it gets wrong), prints the first few and goes on.
void finding(const std::string& what, const generated& g, std::uint64_t& counter) {
  static const bool keep_going = std::getenv("FUZZ_CACHE_DEPS_KEEP_GOING") != nullptr;
  if (!keep_going || missed_paths + stale_hits < 3) {
    std::fprintf(stderr, "fuzz_cache_deps: %s\n%s", what.c_str(), g.describe().c_str());
  }
  ++counter;
  if (!keep_going) {
    std::abort();
  }
}

std::uint64_t uncacheable = 0;
std::uint64_t end_to_end = 0;
std::uint64_t hits_checked = 0;

void report() {
  std::fprintf(stderr,
               "fuzz_cache_deps: %llu programs generated, %llu of them cacheable and checked against NVRTC "
               "(%llu uncacheable), %llu end to end with %llu hits compared; %llu programs with a path NVRTC looked at "
               "missing from the key, %llu stale hits\n",
               static_cast<unsigned long long>(inputs), static_cast<unsigned long long>(inputs - uncacheable),
               static_cast<unsigned long long>(uncacheable), static_cast<unsigned long long>(end_to_end),
               static_cast<unsigned long long>(hits_checked), static_cast<unsigned long long>(missed_paths),
               static_cast<unsigned long long>(stale_hits));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char pattern[] = "/tmp/cudrv-fuzz-deps-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  char* real = ::realpath(pattern, nullptr);
  workspace = real;
  std::free(real);
  fs::create_directories(workspace + "/cwd");
  // The current directory is the workspace's only while an input runs: libFuzzer's own files (the
  // logs of -jobs workers, artifacts) stay where it was started.
  char* start = ::getcwd(nullptr, 0);
  start_directory = start != nullptr ? start : "/";
  std::free(start);
  std::atexit([] {
    report();
    std::error_code ec;
    fs::remove_all(workspace, ec);
  });
  return 0;
}

namespace {

int check_one(const std::uint8_t* data, std::size_t size);

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const int rc = check_one(data, size);
  if (::chdir(start_directory.c_str()) != 0) {
    std::abort();
  }
  return rc;
}

namespace {

int check_one(const std::uint8_t* data, std::size_t size) {
  input in{data, size};
  // One input in 32 runs end to end (FUZZ_CACHE_DEPS_END_TO_END=N: one in N, 1 for all).
  static const std::size_t one_in = [] {
    const char* v = std::getenv("FUZZ_CACHE_DEPS_END_TO_END");
    const long n = v != nullptr ? std::strtol(v, nullptr, 10) : 32;
    return static_cast<std::size_t>(n >= 1 && n <= 256 ? n : 32);
  }();
  const bool full = in.pick(one_in) == 0;
  const generated g = generate(in);
  lay_out(g);
  if (::chdir((workspace + "/cwd").c_str()) != 0) {
    std::abort();
  }
  const cudrv::program prog(g.program_name, g.source, g.headers);
  // The check compiles with the front end only and without the built-in declarations NVRTC does not
  // need here: the preprocessor, which opens the headers, runs all the same, at a third of the cost.
  cudrv::compile_options quick = g.options;
  quick.extra_options.push_back("-fdevice-syntax-only");
  quick.extra_options.push_back("-minimal");
  std::vector<std::string> option_list;
  try {
    option_list = quick.to_nvrtc_options(cudrv::code_kind::ptx);
  } catch (const cudrv::invalid_argument_error&) {
    return 0;  // refused before NVRTC or the cache sees it
  }
  ++inputs;
  const cudrv::detail::cache_disk_inputs scan = cudrv::detail::scan_cache_disk_inputs(prog, option_list);
  if (!scan.refusal.empty()) {
    ++uncacheable;
    return 0;  // never cached: no hit can be stale
  }

  // What NVRTC looks at in the workspace, compiling for real.
  std::vector<std::string> seen;
  {
    std::lock_guard<std::mutex> lock(recorded_mutex);
    recorded = &seen;
  }
  recording = true;
  bool compiled = false;
  try {
    (void)prog.compile(cudrv::code_kind::ptx, quick);
    compiled = true;
  } catch (const cudrv::compile_error& e) {
    // -fdevice-syntax-only produces no PTX, which cudrv reports as NVRTC_ERROR_INVALID_OPTION.
    compiled = std::strstr(e.what(), "NVRTC_ERROR_INVALID_OPTION") != nullptr;
  }
  recording = false;
  {
    std::lock_guard<std::mutex> lock(recorded_mutex);
    recorded = nullptr;
  }
  std::set<std::string> keyed;
  std::set<std::string> keyed_directories;  // every directory above a keyed path
  for (const auto& p : scan.paths) {
    std::string r = resolve(p);
    keyed.insert(r);
    r = r.substr(0, r.find(" ("));
    for (std::size_t slash = r.rfind('/'); slash != std::string::npos && slash > 0; slash = r.rfind('/', slash - 1)) {
      keyed_directories.insert(r.substr(0, slash));
    }
  }
  for (const auto& p : seen) {
    const std::string r = resolve(p);
    struct stat st {};
    if (r.compare(0, workspace.size() + 1, workspace + "/") != 0 || keyed.count(r) != 0 ||
        keyed_directories.count(r.substr(0, r.find(" ("))) != 0 || p == "__nv_nvrtc_builtin_header.h" ||
        p == "__nv_name_map" || (::fstatat(AT_FDCWD, p.c_str(), &st, 0) == 0 && S_ISDIR(st.st_mode))) {
      // NVRTC stats its built-in header's name and "__nv_name_map" in the current directory but uses
      // neither file when one is there (measured: a planted #error in either is never seen); and it
      // stats directories (the current one, ".", a named header's, present or not), whose files it
      // then looks for, each of those checked here: what it reads there is what the key must hold.
      continue;
    }
    std::string list;
    for (const auto& k : keyed) {
      list += "  " + k + "\n";
    }
    finding("NVRTC looked at " + p + " (" + r + "), which the cache's key does not hold; the key holds:\n" + list, g,
            missed_paths);
    break;
  }

  if (full && compiled) {
    ++end_to_end;
    fs::remove_all(workspace + "/cache");
    cudrv::compile_cache cache(workspace + "/cache");
    cudrv::compile_result again;
    try {
      (void)cache.compile(prog, cudrv::code_kind::ptx, g.options);
      edit_everything(g);
      again = cache.compile(prog, cudrv::code_kind::ptx, g.options);
    } catch (const cudrv::compile_error&) {
      return 0;  // the full compilation, or the edited headers, do not compile: nothing is cached
    }
    if (cache.stats().hits == 1) {
      ++hits_checked;
      cudrv::compile_result fresh;
      try {
        fresh = prog.compile(cudrv::code_kind::ptx, g.options);
      } catch (const cudrv::compile_error& e) {
        finding(std::string("a cache hit where a fresh compilation fails: ") + e.what(), g, stale_hits);
        return 0;
      }
      if (fresh.code.bytes() != again.code.bytes() || fresh.log != again.log) {
        finding("a stale hit: the cache returned other bytes than a fresh compilation", g, stale_hits);
      }
    }
  }
  return 0;
}

}  // namespace
