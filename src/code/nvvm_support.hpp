// Internal: what nvvm_program::compile and compile_cache share (issue 34 part 9, NVVM IR): the
// inputs of one libNVVM compilation, prepared once so that the cache keys exactly what is compiled.
#pragma once

#include <string>
#include <vector>

#include "cudrv/nvvm_program.hpp"

namespace cudrv::detail {

struct nvvm_inputs {
  std::vector<std::string> options;  // the final libNVVM option list (architecture resolved)
  std::string libdevice_path;        // empty: libdevice not linked
  std::string libdevice;             // its bytes, read once
  bool verify = true;                // nvvmVerifyProgram before nvvmCompileProgram
};

// Checks options for target, resolves the architecture and, with options.libdevice, reads libdevice.
// Throws invalid_argument_error (api names the caller) or library_unavailable_error.
nvvm_inputs prepare_nvvm(const nvvm_options& options, code_kind target);

// Compiles prog with the prepared inputs: adds the modules (and libdevice, lazily), verifies when
// asked, compiles. Throws compile_error (source nvvm) with libNVVM's log.
compile_result compile_nvvm(const nvvm_program& prog, code_kind target, const nvvm_inputs& in);

}  // namespace cudrv::detail
