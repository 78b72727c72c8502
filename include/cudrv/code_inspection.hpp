/// @file code_inspection.hpp
/// @brief What device code holds, read from the bytes alone: the images of a cubin, fatbin, PTX text or
/// host ELF file, and each kernel's resources (registers, shared, constant and local memory, launch
/// bounds, cluster dimensions), as `cuobjdump -res-usage` shows them, without a driver or a toolkit.
///
/// Opt-in (not in the umbrella `<cudrv/cudrv.hpp>`): a tooling concern that most programs never include.
///
/// Layer: code (docs/design.md, "Source layers").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cudrv/kernel.hpp"
#include "cudrv/launch_config.hpp"
#include "cudrv/object_code.hpp"

namespace cudrv {

/// @brief What an image inside inspected code is.
enum class code_image_kind {
  sass,     ///< machine code (an ELF cubin) for one architecture, `sm_XX`
  ptx,      ///< PTX text for a virtual architecture, `compute_XX`
  ltoir,    ///< NVVM IR for link-time optimisation (only listed)
  unknown,  ///< a fatbin entry of a kind cudrv does not know (only listed)
};

/// @brief `"sass"`, `"ptx"`, `"ltoir"` or `"unknown"`.
[[nodiscard]] const char* to_string(code_image_kind kind) noexcept;

/// @brief The size of one constant bank a kernel (or the whole image) uses: `CONSTANT[bank]` of
/// `cuobjdump -res-usage`. Bank 0 holds the kernel's parameters and the driver's data; banks 2 and 3
/// hold `__constant__` variables and compiler constants (the numbering is the compiler's).
struct constant_bank {
  int bank = 0;           ///< the bank number
  std::size_t bytes = 0;  ///< its size in bytes
};

/// @brief The resources one kernel of a SASS image needs, as the image records them.
///
/// For a kernel of a PTX image only `name`, `demangled_name` and `parameters` are filled (PTX
/// records no resources: the JIT compiler decides them).
struct kernel_resources {
  std::string name;                          ///< the (mangled) symbol name, as the driver looks it up
  std::string demangled_name;                ///< the C++ name (`abi::__cxa_demangle`), or `name` when not mangled
  std::vector<kernel_parameter> parameters;  ///< the parameters in order (EIATTR_KPARAM_INFO / the PTX `.entry`)
  std::size_t parameter_bytes = 0;           ///< the size of the parameter buffer (EIATTR_CBANK_PARAM_SIZE)
  int registers = 0;                         ///< registers per thread (`REG`)
  std::optional<int> max_registers;  ///< the register cap the compiler was given (`-maxrregcount`, `__launch_bounds__`)
  std::size_t shared_bytes = 0;      ///< static shared memory per block (`SHARED`, the reserved system part included)
  std::size_t local_bytes = 0;       ///< fixed local memory per thread (`LOCAL`)
  std::size_t stack_bytes =
      0;  ///< the stack per thread with its callees (`STACK`; EIATTR_MIN_STACK_SIZE, else EIATTR_MAX_STACK_SIZE)
  std::size_t frame_bytes = 0;          ///< its own stack frame per thread: spills and local arrays (EIATTR_FRAME_SIZE)
  std::vector<constant_bank> constant;  ///< the constant banks it uses (`CONSTANT[n]`), by bank number
  std::size_t code_bytes = 0;           ///< the size of its machine code
  std::optional<dims> max_threads;      ///< `__launch_bounds__` / `.maxntid` (EIATTR_MAX_THREADS)
  std::optional<dims> required_threads;      ///< `.reqntid` (EIATTR_REQNTID): the block it must be launched with
  std::optional<dims> cluster_dims;          ///< `__cluster_dims__` / `.reqnctapercluster` (EIATTR_CTA_PER_CLUSTER)
  bool explicit_cluster = false;             ///< `.explicitcluster`: it must be launched with a cluster
  std::optional<unsigned> max_cluster_rank;  ///< `.maxclusterrank` (EIATTR_MAX_CLUSTER_RANK): most blocks per cluster
  int barriers = 0;                          ///< named barriers it uses (EIATTR_NUM_BARRIERS)
};

/// @brief One image: a cubin, or one entry of a fatbin, or a PTX text.
struct code_image {
  code_image_kind kind = code_image_kind::unknown;  ///< SASS, PTX, ...
  int arch = 0;                                     ///< the architecture number: 90 for sm_90 / compute_90
  std::string arch_name;         ///< `"sm_90a"`, `"compute_90"` (a suffix `a` for arch-specific code)
  std::string container;         ///< where it was found: `""` (the file itself), `"fatbin"`, `".nv_fatbin"`, ...
  std::size_t stored_bytes = 0;  ///< bytes in the file (compressed when `compressed()`)
  std::size_t bytes = 0;         ///< bytes once decompressed (`stored_bytes` when not compressed)
  std::string compression;       ///< `""`, `"lz4"` or `"zstd"`
  std::uint64_t flags = 0;       ///< the fatbin entry's flags (0 outside a fatbin)
  std::string unreadable;        ///< why the image could not be read (say, no zstd library); empty when read
  std::vector<kernel_resources> kernels;  ///< its kernels (SASS and PTX images), by name
  /// @brief SASS only: the other functions whose code is in the image (`__device__` functions not inlined,
  /// as in `-G` and `-rdc` code), by symbol name, each once; `cuobjdump -res-usage` lists them as functions too.
  std::vector<std::string> device_functions;
  std::vector<constant_bank>
      constant;                  ///< constant banks of the whole image (`__constant__` data, Common's `CONSTANT[n]`)
  std::size_t global_bytes = 0;  ///< `__device__` variables (Common's `GLOBAL`)

  /// @brief `true` when the image was compressed in the file.
  [[nodiscard]] bool compressed() const noexcept { return !compression.empty(); }
};

/// @brief Every image of inspected code, in file order.
struct code_inspection {
  std::vector<code_image> images;  ///< the images
};

/// @brief Reads the images of @p code and each kernel's resources, without a driver.
///
/// Kinds: a cubin, a fatbin (its entries; LZ4- and zstd-compressed entries are decompressed with
/// liblz4 / libzstd, loaded at run time: without them the entry is listed with @ref
/// code_image::unreadable set), PTX (its target and entries), and @ref code_kind::object for a host
/// ELF file (an object, executable or shared library) whose `.nv_fatbin` / `__nv_relfatbin` sections
/// hold fatbins (ELF extended numbering included). Every offset, size and count is checked against the
/// bytes, and the work is bounded by their size: sections that name the same bytes (fatbin sections,
/// symbol tables) and names over 64 KiB are refused, and the bytes decompressed, section bytes and
/// names read together may not exceed 64 times the input (at least 64 MiB, at most 4 GiB).
/// @throws invalid_image_error for bytes that are not a well-formed image of the kind (the message says
///   which header or record and the numbers), or that exceed the work bound
/// @throws invalid_argument_error for a kind that cannot be inspected (@ref code_kind::ltoir,
///   @ref code_kind::library)
[[nodiscard]] code_inspection inspect(const object_code& code);

/// @brief The kind of code @p bytes hold, from their first bytes: a fatbin magic, an archive
/// (@ref code_kind::library), an ELF for EM_CUDA (cubin), another ELF (@ref code_kind::object, a host
/// file), else PTX text. Nothing is validated.
[[nodiscard]] code_kind detect_code_kind(std::string_view bytes) noexcept;

}  // namespace cudrv
