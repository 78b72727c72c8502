/// @file cudrv.hpp
/// @brief The umbrella header: includes the public cudrv headers of the library target `cudrv::cudrv`
/// (`<cudrv/device_attributes.hpp>` through `<cudrv/device.hpp>`), except these opt-in ones:
/// - `<cudrv/rtc.hpp>`: run-time compilation (`<cudrv/program.hpp>` for NVRTC, `<cudrv/nvvm_program.hpp>`
///   for libNVVM, `<cudrv/linker.hpp>` for nvJitLink, `<cudrv/compile_cache.hpp>`); their option and
///   result types (with the socket below) add about a sixth to what cudrv's declarations cost and would
///   put the umbrella above the standard-header floor, in every program, also those that only load code
///   built ahead of time.
/// - `<cudrv/unix_socket.hpp>`: the Unix-domain socket that carries file descriptors between
///   processes (for the shareable handles of `<cudrv/ipc.hpp>`); a POSIX transport, not a CUDA concept.
/// - `<cudrv/nvtx.hpp>`: built on the toolkit's `<nvtx3/nvtx3.hpp>`, which costs about 0.1 s per
///   translation unit; include it where you annotate.
/// - `<cudrv/nccl.hpp>` and `<cudrv/mpi.hpp>`: the scale-out layer (docs/scale-out.md); mpi.hpp needs
///   `<mpi.h>` and the `cudrv::mpi` component.
/// - `<cudrv/dlpack.hpp>`: needs DLPack's `<dlpack/dlpack.h>` (the `cudrv::dlpack` target).
/// - `<cudrv/cccl.hpp>`: needs CCCL's headers (the `cudrv::cccl` target).
/// - `<cudrv/process_checkpoint.hpp>` and `<cudrv/coredump.hpp>`: process-level
///   tooling (checkpointing another process, GPU core dump settings) that most programs never use.
/// - `<cudrv/system.hpp>`: NVML (loaded at run time) for monitoring: versions, power, clocks,
///   temperatures, ECC, processes; a management concern most programs never include.
/// - `<cudrv/code_inspection.hpp>` (issue 36: inspect): the images and kernel resources of device code
///   read from its bytes (what `cudrv-query --inspect` shows); tooling that most programs never include.
///
/// Every translation unit that includes it pays for it, so it includes no heavy standard header (the CPU
/// test cudrv_umbrella_header_cost checks that); benchmarks/header_cost.sh compares its cost with the
/// standard headers a CUDA host file includes anyway (docs/design.md, "Header cost").
///
/// Layer: execution (docs/design.md, "Source layers").
#pragma once

#include "cudrv/array.hpp"
#include "cudrv/async_notification.hpp"
#include "cudrv/batch_copy.hpp"
#include "cudrv/builtin_memory_resources.hpp"
#include "cudrv/context.hpp"
#include "cudrv/copy.hpp"
#include "cudrv/device.hpp"
#include "cudrv/device_buffer.hpp"
#include "cudrv/driver.hpp"
#include "cudrv/error.hpp"
#include "cudrv/event.hpp"
#include "cudrv/file_descriptor.hpp"
#include "cudrv/graph.hpp"
#include "cudrv/graph_exec.hpp"
#include "cudrv/green_context.hpp"
#include "cudrv/growable_buffer.hpp"
#include "cudrv/host_accessible_pool_buffer.hpp"
#include "cudrv/host_registration.hpp"
#include "cudrv/ipc.hpp"
#include "cudrv/kernel.hpp"
#include "cudrv/launch.hpp"
#include "cudrv/launch_config.hpp"
#include "cudrv/library.hpp"
#include "cudrv/managed_batch.hpp"
#include "cudrv/managed_buffer.hpp"
#include "cudrv/managed_range.hpp"
#include "cudrv/memory_location.hpp"
#include "cudrv/memory_pool.hpp"
#include "cudrv/memory_resource.hpp"
#include "cudrv/object_code.hpp"
#include "cudrv/persisting_l2.hpp"
#include "cudrv/pinned_buffer.hpp"
#include "cudrv/pitched_buffer.hpp"
#include "cudrv/pointer_attributes.hpp"
#include "cudrv/profiler.hpp"
#include "cudrv/resource_buffer.hpp"
#include "cudrv/span.hpp"
#include "cudrv/stream.hpp"
#include "cudrv/stream_capture.hpp"
#include "cudrv/stream_memory_ops.hpp"
#include "cudrv/tensor_map.hpp"
#include "cudrv/texture.hpp"
#include "cudrv/version.hpp"
#include "cudrv/virtual_memory.hpp"
