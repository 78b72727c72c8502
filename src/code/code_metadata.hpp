// Internal: what an image says about its kernels without asking the driver.
//
// The driver answers parameter queries (cuKernelGetParamInfo) only with a context current, and finds
// the number of parameters only by failing one call past the last: compute-sanitizer reports that
// failure, and no context may be made current that the user did not name. The image cudrv loads
// itself already describes every kernel's parameters: a cubin in its `.nv.info.<kernel>` sections
// (EIATTR_KPARAM_INFO records: ordinal, offset, size), PTX in each `.entry`'s parameter list. These
// readers extract that layout; an image they cannot read (a compressed fatbin entry, an unknown
// record format) yields nothing, and the caller falls back to the driver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cudrv/code_inspection.hpp"
#include "cudrv/kernel.hpp"
#include "cudrv/object_code.hpp"

namespace cudrv::detail {

// Kernel name -> parameters, in order.
using kernel_layouts = std::unordered_map<std::string, std::vector<kernel_param>>;

// The layouts of the kernels of a cubin (ELF), from the .nv.info.<kernel> sections of its entry functions
// (function symbols with STO_CUDA_ENTRY; the sections of __device__ functions, which -G and -rdc images
// carry, are skipped). False when the image is not a readable cubin, has no symbol table, a record is
// malformed, or an entry has no .nv.info section.
bool read_cubin_layouts(std::string_view image, kernel_layouts& out);

// The layouts of the kernels of a PTX text, from each .entry's parameter list. False when a
// parameter cannot be parsed (an unknown type, say).
bool read_ptx_layouts(std::string_view text, kernel_layouts& out);

// The layouts of a fatbin's kernels, from its first uncompressed cubin entry, else its first
// uncompressed PTX entry. False when it has neither.
bool read_fatbin_layouts(std::string_view image, kernel_layouts& out);

// Dispatches on the kind (ptx, cubin, fatbin); false for other kinds. Never throws.
bool read_kernel_layouts(code_kind kind, std::string_view image, kernel_layouts& out) noexcept;

// issue 36: inspect. The work one cudrv::inspect call may do, so that a crafted file cannot make it
// grow far beyond its size: bytes decompressed, section bytes and names read, counted together against
// min(4 GiB, max(64 MiB, 64 x the input size)).
class inspect_budget {
 public:
  explicit inspect_budget(std::size_t input_size) noexcept;
  // Counts bytes; false (and nothing counted) when they would exceed the limit.
  [[nodiscard]] bool spend(std::uint64_t bytes) noexcept;
  // The limit in bytes, for messages.
  [[nodiscard]] std::uint64_t limit() const noexcept { return limit_; }
  // "the work budget of N bytes ... is exhausted", for messages.
  [[nodiscard]] std::string exhausted() const;

 private:
  std::uint64_t limit_;
  std::uint64_t spent_ = 0;
};

// The longest symbol or section name the inspector reads (a longer one makes the image malformed).
inline constexpr std::size_t max_inspect_name = std::size_t{64} << 10;

// issue 36: inspect. The resources of every kernel of a cubin (registers, shared, local and constant
// memory, stack, launch bounds, cluster dimensions) and the image's own constant banks and global
// variables, from its symbol table, .nv.info and .nv.info.<kernel> records and the sizes of its
// .nv.shared/.nv.local/.nv.constantN sections, into out (arch, arch_name, kernels, constant,
// global_bytes). Returns what is malformed ("" when the image was read); reads nothing outside image.
// The sections and names read are counted in budget; symbol tables that share bytes are refused.
std::string read_cubin_resources(std::string_view image, code_image& out, inspect_budget& budget);

}  // namespace cudrv::detail
