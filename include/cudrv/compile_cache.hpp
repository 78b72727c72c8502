/// @file compile_cache.hpp
/// @brief A persistent on-disk cache of NVRTC and libNVVM compilations: @ref cudrv::compile_cache.
///
/// Layer: code (docs/design.md, "Source layers").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cudrv/nvvm_program.hpp"
#include "cudrv/object_code.hpp"
#include "cudrv/program.hpp"

namespace cudrv {

/// @brief A persistent, process-safe cache of @ref program::compile results in a directory.
///
/// An entry is keyed by everything that decides the output: the program's name, source and headers
/// (names and contents), every header NVRTC could read from disk, the target kind, the final NVRTC
/// option list (which holds the resolved architecture, so an empty @ref compile_options::arch is
/// resolved before the lookup), the name expressions, the NVRTC version and library file (its path,
/// size and modification time, so that a toolkit update invalidates the entries) and the cache format
/// version. The key is hashed (128 bits) into the file name and also stored whole in the entry and
/// compared byte for byte on a hit, so a hash collision is a miss, never a wrong result.
///
/// Headers on disk: NVRTC looks for an include in the directory of the program's name, the current
/// directory, the include paths (@ref compile_options::include_paths, `-I`) and, from a header found
/// on disk, that header's directory. Before every lookup the cache reads the include options as NVRTC
/// reads them (blanks around an option and after `-I` dropped) and finds every include of the source,
/// the named headers and the headers found as a superset of the preprocessor's (every `#`, `%:` or
/// `??=` followed on its line by `include`, past blanks and comments, wherever it stands; every
/// `__has_include`), and puts into the key, for each directory that could be searched, and for the
/// file at the program's name, whether the file exists there and, when it does, its path, size and a
/// 128-bit digest of its contents. Editing, adding, removing or shadowing a header therefore changes
/// the key. A compilation whose includes cannot be told before compiling (`#include MACRO`), whose
/// include options the cache cannot be sure NVRTC reads as written (a path starting with a blank or
/// `=`), or that names precompiled-header files (`--use-pch`, `--create-pch`) or writes a timing file
/// (`-time`), is never cached and is counted in @ref statistics::uncacheable; automatic PCH (`-pch`)
/// is cached like any option. A header edited while NVRTC runs leaves that result unstored.
///
/// The CUDA toolkit's headers (CCCL: CUB, Thrust, `cuda/std`; and the toolkit's include directory,
/// as @ref find_toolkit_headers finds them, whether through @ref compile_options::toolkit_headers or
/// an include path naming the same directories) are not read: the key holds, for each include that
/// resolves there, the path and whether it exists, and once the toolkit's identity (its directories,
/// `CCCL_VERSION`, and the size and times of CCCL's version file, `cuda.h` and `cuda_runtime_api.h`),
/// so that a toolkit update is a miss and a hit on a CUB-using kernel reads no header. The toolkit's
/// headers are trusted to include only one another; a directory searched besides them that holds one
/// of their top-level names (a `cub/` or `cuda/` folder in the current directory) could shadow a
/// header they include, unseen, so such a compilation is not cached (counted in
/// @ref statistics::uncacheable).
///
/// An NVVM IR compilation (@ref nvvm_program) is keyed by the program's name, every module's name
/// and bytes in order, the target kind, the final libNVVM option list (architecture resolved),
/// whether it is verified, libNVVM's versions (its own, the NVVM IR and debug metadata versions) and
/// library file (path, size, modification time), the cache format version, and, with
/// @ref nvvm_options::libdevice, libdevice's path, size and a 128-bit digest of its contents (read on
/// every lookup, so a replaced libdevice is a miss). NVVM IR names no other file. Its entries share the
/// directory with NVRTC's; the keys of the two never meet.
///
/// A hit reads one small file and calls no NVRTC compilation (NVRTC is loaded once per process for
/// its version, which is part of the key). A miss compiles and stores the result; compile errors are
/// not cached. Each entry ends with a checksum: a truncated or corrupted entry is counted, removed
/// and replaced by a fresh compilation. Entries are written to a temporary file in the directory,
/// flushed to disk and renamed over the final name, so readers never see a partial entry and
/// concurrent writers of one key, threads or processes, leave one valid entry. A failure to store
/// (a read-only directory, a full disk) never fails the compilation; it is counted in
/// @ref statistics::store_failures.
///
/// Trust: whoever can write the directory chooses the code a hit returns, so on every compile the
/// directory is opened and checked: one that another user owns, or that its group or others may write,
/// is not used (the compilation goes to NVRTC, is counted in @ref statistics::untrusted_directory, and
/// the first one of a cache object is reported on stderr); entries are opened relative to it without
/// following links or blocking, and only a regular file of the user, writable by nobody else, of at
/// most 1 GiB (checked before anything is allocated) is read. The checksum finds accidents, not
/// attackers. docs/runtime-compilation.md, "What the cache trusts", says what an attacker can do.
///
/// The directory is created (mode 0700, parents included) on the first store. @ref from_environment
/// chooses it as follows:
/// - none, the cache disabled, when `CUDRV_DISABLE_CACHE` is set to anything but `""` or `"0"`;
/// - else `$CUDRV_CACHE_DIR` when it is set and not empty;
/// - else `$XDG_CACHE_HOME/cudrv/nvrtc` when `XDG_CACHE_HOME` is an absolute path;
/// - else `$HOME/.cache/cudrv/nvrtc` when `HOME` is set and not empty;
/// - else none, the cache disabled.
///
/// A cache object is thread-safe. It is a handle: copies share the directory and the statistics, and
/// a moved-from cache stays usable (moving copies).
///
/// @code
/// cudrv::compile_cache cache = cudrv::compile_cache::from_environment();
/// cudrv::program prog("saxpy.cu", source);
/// // The first run compiles and stores; later runs, in this process or another, read the entry.
/// cudrv::compile_result r = cache.compile(prog, cudrv::code_kind::cubin, {.arch = "sm_90"}, {"saxpy<float>"});
/// auto s = cache.stats();
/// std::printf("%llu hits, %llu misses\n", (unsigned long long)s.hits, (unsigned long long)s.misses);
/// @endcode
class compile_cache {
 public:
  /// @brief Counters of one cache object and its copies, since it was made.
  struct statistics {
    std::uint64_t hits = 0;             ///< Compilations answered from an entry.
    std::uint64_t misses = 0;           ///< Compilations run by NVRTC (every one, when disabled).
    std::uint64_t corrupt_entries = 0;  ///< Entries found truncated or corrupted, removed (also misses).
    std::uint64_t store_failures = 0;   ///< Results that could not be stored.
    std::uint64_t uncacheable = 0;      ///< Compilations whose inputs the key cannot hold, never cached (also misses).
    /// Compilations that bypassed the cache because its directory is another user's or writable by its
    /// group or others (also misses; the first is reported on stderr).
    std::uint64_t untrusted_directory = 0;
  };

  /// @brief A cache in @p directory, which is created on the first store if needed.
  /// @throws invalid_argument_error when @p directory is empty (use @ref disabled)
  explicit compile_cache(std::string directory);

  /// @brief Another handle to the same cache: the copy shares the directory and the statistics.
  compile_cache(const compile_cache& other) noexcept;
  /// @brief Makes this a handle to @p other's cache.
  compile_cache& operator=(const compile_cache& other) noexcept;
  /// @brief Releases this handle; the shared state goes with the last one.
  ~compile_cache();

  /// @brief The cache the environment asks for (see the class description for the rules).
  [[nodiscard]] static compile_cache from_environment();

  /// @brief A cache that stores nothing: every compile calls NVRTC and counts a miss.
  [[nodiscard]] static compile_cache disabled();

  /// @brief Whether entries are read and stored.
  [[nodiscard]] bool enabled() const noexcept;
  /// @brief The directory of the entries; empty when disabled.
  [[nodiscard]] const std::string& directory() const noexcept;

  /// @brief The result of `prog.compile(target, options, name_expressions)`, from the cache when
  /// an entry exists, else compiled and stored.
  ///
  /// The result is the same as the compilation's, log and lowered names included.
  /// @throws the exceptions of @ref program::compile; never for a failure to read or store an entry
  [[nodiscard]] compile_result compile(const program& prog, code_kind target, const compile_options& options = {},
                                       const std::vector<std::string>& name_expressions = {});

  /// @brief The result of `prog.compile(target, options)` for NVVM IR, from the cache when an entry
  /// exists, else compiled by libNVVM and stored (see the class description for the key).
  ///
  /// The result is the same as the compilation's, log included. A disabled cache compiles every time.
  /// @throws the exceptions of @ref nvvm_program::compile; never for a failure to read or store an entry
  [[nodiscard]] compile_result compile(const nvvm_program& prog, code_kind target = code_kind::ptx,
                                       const nvvm_options& options = {});

  /// @brief A snapshot of the counters.
  [[nodiscard]] statistics stats() const noexcept;

  /// @brief Removes every entry (and leftover temporary file) of the directory; other files are
  /// left alone. Does nothing when disabled.
  void clear();

 private:
  struct state;
  explicit compile_cache(state* s) noexcept : state_(s) {}
  state* state_;  // shared by the copies, reference-counted (never null)
};

}  // namespace cudrv
