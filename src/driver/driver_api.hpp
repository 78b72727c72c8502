// Internal: the driver entry points cudrv calls, resolved lazily through cuGetProcAddress.
//
// Layering: drv::cuXxx(...) is the raw entry point (returns CUresult, resolves on first use and
// throws only when the entry point cannot be resolved); check() turns a CUresult into an exception;
// the public types in include/cudrv are built on both.
#pragma once

#include <cuda.h>
#include <cudaProfilerTypedefs.h>  // PFN_cuProfilerStart/Stop (issue 34 part 9)
#include <cudaTypedefs.h>

#include <atomic>
#include <string>
#include <type_traits>

#include "cudrv/context.hpp"
#include "cudrv/error.hpp"

// X(name, api_version): the PFN typedef PFN_<name>_v<api_version> of cudaTypedefs.h gives the type.
// The version is the ABI cudrv was written against; cuGetProcAddress hands back the matching symbol.
#define CUDRV_DRIVER_ENTRY_POINTS(X)                            \
  X(cuDriverGetVersion, 2020)                                   \
  X(cuGetErrorName, 6000)                                       \
  X(cuGetErrorString, 6000)                                     \
  X(cuDeviceGet, 2000)                                          \
  X(cuDeviceGetCount, 2000)                                     \
  X(cuDeviceGetName, 2000)                                      \
  X(cuDeviceGetUuid, 11040)                                     \
  X(cuDeviceGetPCIBusId, 4010)                                  \
  X(cuDeviceTotalMem, 3020)                                     \
  X(cuDeviceGetAttribute, 2000)                                 \
  X(cuDeviceCanAccessPeer, 4000)                                \
  X(cuDeviceGetP2PAttribute, 8000)                              \
  X(cuDeviceGetDefaultMemPool, 11020)                           \
  X(cuDeviceGetMemPool, 11020)                                  \
  X(cuDeviceSetMemPool, 11020)                                  \
  X(cuDeviceGetGraphMemAttribute, 11040)                        \
  X(cuDeviceSetGraphMemAttribute, 11040)                        \
  X(cuDeviceGraphMemTrim, 11040)                                \
  X(cuDevicePrimaryCtxRetain, 7000)                             \
  X(cuDevicePrimaryCtxRelease, 11000)                           \
  X(cuDevicePrimaryCtxGetState, 7000)                           \
  X(cuDevicePrimaryCtxSetFlags, 11000)                          \
  X(cuDevicePrimaryCtxReset, 11000)                             \
  X(cuCtxCreate, 3020)                                          \
  X(cuCtxDestroy, 4000)                                         \
  X(cuCtxGetCurrent, 4000)                                      \
  X(cuCtxGetId, 12000)                                          \
  X(cuCtxSetCurrent, 4000)                                      \
  X(cuCtxPopCurrent, 4000)                                      \
  X(cuCtxGetDevice, 2000)                                       \
  X(cuCtxGetFlags, 7000)                                        \
  X(cuCtxSynchronize, 2000)                                     \
  X(cuCtxGetStreamPriorityRange, 5050)                          \
  X(cuCtxEnablePeerAccess, 4000)                                \
  X(cuCtxDisablePeerAccess, 4000)                               \
  X(cuCtxGetLimit, 3010)                                        \
  X(cuCtxSetLimit, 3010)                                        \
  X(cuMemGetInfo, 3020)                                         \
  X(cuStreamCreateWithPriority, 5050)                           \
  X(cuStreamDestroy, 4000)                                      \
  X(cuStreamSynchronize, 2000)                                  \
  X(cuStreamQuery, 2000)                                        \
  X(cuStreamWaitEvent, 3020)                                    \
  X(cuStreamGetCtx, 9020)                                       \
  X(cuStreamGetFlags, 5050)                                     \
  X(cuStreamGetPriority, 5050)                                  \
  X(cuStreamGetId, 12000)                                       \
  X(cuLaunchHostFunc, 10000)                                    \
  X(cuEventCreate, 2000)                                        \
  X(cuEventDestroy, 4000)                                       \
  X(cuEventRecord, 2000)                                        \
  X(cuEventSynchronize, 2000)                                   \
  X(cuEventQuery, 2000)                                         \
  X(cuEventElapsedTime, 2000)                                   \
  X(cuIpcGetEventHandle, 4010)                                  \
  X(cuIpcOpenEventHandle, 4010)                                 \
  X(cuIpcGetMemHandle, 4010)                                    \
  X(cuIpcOpenMemHandle, 11000)                                  \
  X(cuIpcCloseMemHandle, 4010)                                  \
  X(cuMemPoolExportToShareableHandle, 11020)                    \
  X(cuMemPoolImportFromShareableHandle, 11020)                  \
  X(cuMemPoolExportPointer, 11020)                              \
  X(cuMemPoolImportPointer, 11020)                              \
  X(cuMemAlloc, 3020)                                           \
  X(cuMemAllocPitch, 3020)                                      \
  X(cuMemFree, 3020)                                            \
  X(cuMemAllocAsync, 11020)                                     \
  X(cuMemAllocFromPoolAsync, 11020)                             \
  X(cuMemFreeAsync, 11020)                                      \
  X(cuMemHostAlloc, 2020)                                       \
  X(cuMemFreeHost, 2000)                                        \
  X(cuMemHostGetDevicePointer, 3020)                            \
  X(cuMemHostRegister, 6050)                                    \
  X(cuMemHostUnregister, 4000)                                  \
  X(cuMemAllocManaged, 6000)                                    \
  X(cuStreamAttachMemAsync, 6000)                               \
  X(cuMemPoolCreate, 11020)                                     \
  X(cuMemPoolDestroy, 11020)                                    \
  X(cuMemPoolTrimTo, 11020)                                     \
  X(cuMemPoolSetAttribute, 11020)                               \
  X(cuMemPoolGetAttribute, 11020)                               \
  X(cuMemPoolSetAccess, 11020)                                  \
  X(cuMemPoolGetAccess, 11020)                                  \
  X(cuMemcpy, 4000)                                             \
  X(cuMemcpyAsync, 4000)                                        \
  X(cuMemcpyPeer, 4000)                                         \
  X(cuMemcpyPeerAsync, 4000)                                    \
  X(cuMemcpy2DUnaligned, 3020)                                  \
  X(cuMemcpy2DAsync, 3020)                                      \
  X(cuMemcpy3D, 3020)                                           \
  X(cuMemcpy3DAsync, 3020)                                      \
  X(cuMemcpy3DPeer, 4000)                                       \
  X(cuMemcpy3DPeerAsync, 4000)                                  \
  X(cuMemsetD8, 3020)                                           \
  X(cuMemsetD16, 3020)                                          \
  X(cuMemsetD32, 3020)                                          \
  X(cuMemsetD8Async, 3020)                                      \
  X(cuMemsetD16Async, 3020)                                     \
  X(cuMemsetD32Async, 3020)                                     \
  X(cuMemsetD2D8Async, 3020)                                    \
  X(cuMemsetD2D16Async, 3020)                                   \
  X(cuMemsetD2D32Async, 3020)                                   \
  X(cuPointerGetAttributes, 7000)                               \
  X(cuMemGetAddressRange, 3020)                                 \
  X(cuMemcpyHtoD, 3020)                                         \
  X(cuMemcpyDtoH, 3020)                                         \
  X(cuLibraryLoadData, 12000)                                   \
  X(cuLibraryUnload, 12000)                                     \
  X(cuLibraryGetKernel, 12000)                                  \
  X(cuLibraryGetModule, 12000)                                  \
  X(cuLibraryGetGlobal, 12000)                                  \
  X(cuLibraryGetManaged, 12000)                                 \
  X(cuKernelGetFunction, 12000)                                 \
  X(cuKernelGetAttribute, 12000)                                \
  X(cuKernelSetAttribute, 12000)                                \
  X(cuKernelSetCacheConfig, 12000)                              \
  X(cuLaunchKernel, 4000)                                       \
  X(cuLaunchKernelEx, 11060)                                    \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, 7000) \
  X(cuOccupancyMaxPotentialBlockSizeWithFlags, 7000)            \
  X(cuOccupancyAvailableDynamicSMemPerBlock, 10020)             \
  X(cuOccupancyMaxPotentialClusterSize, 11070)                  \
  X(cuOccupancyMaxActiveClusters, 11070)                        \
  X(cuTensorMapEncodeTiled, 12000)                              \
  X(cuTensorMapEncodeIm2col, 12000)                             \
  X(cuTensorMapReplaceAddress, 12000)                           \
  CUDRV_DRIVER_ENTRY_POINTS_VMM(X)                              \
  X(cuArray3DCreate, 3020)                                      \
  X(cuArray3DGetDescriptor, 3020)                               \
  X(cuArrayDestroy, 2000)                                       \
  X(cuMipmappedArrayCreate, 5000)                               \
  X(cuMipmappedArrayGetLevel, 5000)                             \
  X(cuMipmappedArrayDestroy, 5000)                              \
  X(cuTexObjectCreate, 5000)                                    \
  X(cuTexObjectDestroy, 5000)                                   \
  X(cuSurfObjectCreate, 5000)                                   \
  X(cuSurfObjectDestroy, 5000)                                  \
  CUDRV_DRIVER_ENTRY_POINTS_12020(X)                            \
  CUDRV_DRIVER_ENTRY_POINTS_12040(X)                            \
  CUDRV_DRIVER_ENTRY_POINTS_12050(X)                            \
  X(cuStreamWaitValue32, 11070)                                 \
  X(cuStreamWaitValue64, 11070)                                 \
  X(cuStreamWriteValue32, 11070)                                \
  X(cuStreamWriteValue64, 11070)                                \
  X(cuStreamBatchMemOp, 11070)                                  \
  X(cuGraphAddBatchMemOpNode, 11070)                            \
  CUDRV_DRIVER_ENTRY_POINTS_12080(X)                            \
  CUDRV_DRIVER_ENTRY_POINTS_GREEN(X)                            \
  CUDRV_DRIVER_ENTRY_POINTS_PROCESS(X)                          \
  CUDRV_DRIVER_ENTRY_POINTS_I34_LOGS(X)                         \
  /* issue 34 part 1: every launch attribute */                 \
  X(cuGraphKernelNodeGetAttribute, 11000)                       \
  X(cuCtxResetPersistingL2Cache, 11000)                         \
  CUDRV_DRIVER_ENTRY_POINTS_ISSUE34_MEM(X)                      \
  CUDRV_DRIVER_ENTRY_POINTS_ISSUE34_GRAPHS(X)

// issue 34 part 6: graphs (node enable/disable, capture into an existing graph, device launch).
#define CUDRV_DRIVER_ENTRY_POINTS_ISSUE34_GRAPHS(X) \
  X(cuGraphNodeSetEnabled, 11060)                   \
  X(cuGraphNodeGetEnabled, 11060)                   \
  X(cuGraphExecGetFlags, 12000)                     \
  X(cuGraphChildGraphNodeGetGraph, 10000)           \
  X(cuStreamBeginCaptureToGraph, 12030)

// issue 34 parts 7 and 8: managed-memory batches and range attributes (<cudrv/managed_batch.hpp>,
// <cudrv/managed_range.hpp>), memory-pressure notifications (<cudrv/async_notification.hpp>). The batch
// entry points are CUDA 13.0's; without its headers cudrv prefetches with a loop of cuMemPrefetchAsync and
// refuses discards (not_supported_error).
#if CUDA_VERSION >= 13000
#define CUDRV_HAS_MANAGED_BATCH 1
#define CUDRV_DRIVER_ENTRY_POINTS_MANAGED_BATCH(X) \
  X(cuMemPrefetchBatchAsync, 13000)                \
  X(cuMemDiscardBatchAsync, 13000)                 \
  X(cuMemDiscardAndPrefetchBatchAsync, 13000)
#else
#define CUDRV_HAS_MANAGED_BATCH 0
#define CUDRV_DRIVER_ENTRY_POINTS_MANAGED_BATCH(X)
#endif
#define CUDRV_DRIVER_ENTRY_POINTS_ISSUE34_MEM(X) \
  X(cuMemRangeGetAttributes, 8000)               \
  X(cuDeviceRegisterAsyncNotification, 12040)    \
  X(cuDeviceUnregisterAsyncNotification, 12040)  \
  CUDRV_DRIVER_ENTRY_POINTS_MANAGED_BATCH(X)

// issue 34 parts 3-4: checkpoint and restore of another process (<cudrv/process_checkpoint.hpp>, CUDA 12.8;
// without CUDA 12.8 headers process_checkpoint reports not_supported_error) and GPU coredump settings
// (<cudrv/coredump.hpp>, CUDA 12.1).
#if CUDA_VERSION >= 12080
#define CUDRV_HAS_PROCESS_CHECKPOINT 1
#define CUDRV_DRIVER_ENTRY_POINTS_PROCESS_CHECKPOINT(X) \
  X(cuCheckpointProcessGetRestoreThreadId, 12080)       \
  X(cuCheckpointProcessGetState, 12080)                 \
  X(cuCheckpointProcessLock, 12080)                     \
  X(cuCheckpointProcessCheckpoint, 12080)               \
  X(cuCheckpointProcessRestore, 12080)                  \
  X(cuCheckpointProcessUnlock, 12080)
#else
#define CUDRV_HAS_PROCESS_CHECKPOINT 0
#define CUDRV_DRIVER_ENTRY_POINTS_PROCESS_CHECKPOINT(X)
#endif
#define CUDRV_DRIVER_ENTRY_POINTS_PROCESS(X)      \
  CUDRV_DRIVER_ENTRY_POINTS_PROCESS_CHECKPOINT(X) \
  X(cuCoredumpGetAttribute, 12010)                \
  X(cuCoredumpGetAttributeGlobal, 12010)          \
  X(cuCoredumpSetAttribute, 12010)                \
  X(cuCoredumpSetAttributeGlobal, 12010)

// issue 34 part 2 and part 9: the driver's log in errors (src/driver/driver_log.cpp) and profiler control
// (<cudrv/profiler.hpp>). cuLogsRegisterCallback/cuLogsUnregisterCallback exist from CUDA 12.9; cudrv
// resolves them while it loads the driver (driver.cpp), before any call can fail, and stores them here
// (so that a forked child gets the stubs like every other entry point). Built with older headers, cudrv
// has no driver log (CUDRV_HAS_DRIVER_LOG 0).
#if CUDA_VERSION >= 12090
#define CUDRV_HAS_DRIVER_LOG 1
#define CUDRV_DRIVER_ENTRY_POINTS_I34_DRIVER_LOG(X) \
  X(cuLogsRegisterCallback, 12090)                  \
  X(cuLogsUnregisterCallback, 12090)
#else
#define CUDRV_HAS_DRIVER_LOG 0
#define CUDRV_DRIVER_ENTRY_POINTS_I34_DRIVER_LOG(X)
#endif
#define CUDRV_DRIVER_ENTRY_POINTS_I34_LOGS(X) \
  X(cuProfilerStart, 4000)                    \
  X(cuProfilerStop, 4000)                     \
  CUDRV_DRIVER_ENTRY_POINTS_I34_DRIVER_LOG(X)

// Batched copies (<cudrv/batch_copy.hpp>): the CUDA 12.8 variants, which report the index of the
// failing copy (the CUDA 13.0 variants dropped that argument). Without CUDA 12.8 headers cudrv always
// takes the documented fallback (a loop of single copies).
#if CUDA_VERSION >= 12080
#define CUDRV_HAS_BATCH_COPY 1
#define CUDRV_DRIVER_ENTRY_POINTS_12080(X) \
  X(cuMemcpyBatchAsync, 12080)             \
  X(cuMemcpy3DBatchAsync, 12080)
#else
#define CUDRV_HAS_BATCH_COPY 0
#define CUDRV_DRIVER_ENTRY_POINTS_12080(X)
#endif

// Virtual memory management (<cudrv/virtual_memory.hpp>, <cudrv/growable_buffer.hpp>).
#define CUDRV_DRIVER_ENTRY_POINTS_VMM(X)           \
  X(cuMemAddressReserve, 10020)                    \
  X(cuMemAddressFree, 10020)                       \
  X(cuMemCreate, 10020)                            \
  X(cuMemRelease, 10020)                           \
  X(cuMemMap, 10020)                               \
  X(cuMemUnmap, 10020)                             \
  X(cuMemSetAccess, 10020)                         \
  X(cuMemGetAccess, 10020)                         \
  X(cuMemGetAllocationGranularity, 10020)          \
  X(cuMemGetAllocationPropertiesFromHandle, 10020) \
  X(cuMemExportToShareableHandle, 10020)           \
  X(cuMemImportFromShareableHandle, 10020)

// Green contexts (<cudrv/green_context.hpp>): CUDA 12.4 (the oldest toolkit cudrv builds with), the
// stream entry point 12.5, the id 12.9. Code using the guarded ones reports not_supported_error, or
// falls back (documented there), when the toolkit is older.
#if CUDA_VERSION >= 12090
#define CUDRV_HAS_GREEN_CONTEXT_ID 1
#define CUDRV_DRIVER_ENTRY_POINTS_GREEN_12090(X) X(cuGreenCtxGetId, 12090)
#else
#define CUDRV_HAS_GREEN_CONTEXT_ID 0
#define CUDRV_DRIVER_ENTRY_POINTS_GREEN_12090(X)
#endif
#if CUDA_VERSION >= 12050
#define CUDRV_HAS_GREEN_CONTEXT_STREAM 1
#define CUDRV_DRIVER_ENTRY_POINTS_GREEN_12050(X) X(cuGreenCtxStreamCreate, 12050)
#else
#define CUDRV_HAS_GREEN_CONTEXT_STREAM 0
#define CUDRV_DRIVER_ENTRY_POINTS_GREEN_12050(X)
#endif
#define CUDRV_DRIVER_ENTRY_POINTS_GREEN(X) \
  X(cuDeviceGetDevResource, 12040)         \
  X(cuCtxGetDevResource, 12040)            \
  X(cuGreenCtxGetDevResource, 12040)       \
  X(cuDevSmResourceSplitByCount, 12040)    \
  X(cuDevResourceGenerateDesc, 12040)      \
  X(cuGreenCtxCreate, 12040)               \
  X(cuGreenCtxDestroy, 12040)              \
  X(cuCtxFromGreenCtx, 12040)              \
  X(cuGreenCtxRecordEvent, 12040)          \
  X(cuGreenCtxWaitEvent, 12040)            \
  X(cuStreamGetGreenCtx, 12040)            \
  CUDRV_DRIVER_ENTRY_POINTS_GREEN_12050(X) \
  CUDRV_DRIVER_ENTRY_POINTS_GREEN_12090(X)

#if CUDA_VERSION >= 12050
#define CUDRV_DRIVER_ENTRY_POINTS_12050(X) X(cuKernelGetLibrary, 12050)
#else
#define CUDRV_DRIVER_ENTRY_POINTS_12050(X)
#endif

#if CUDA_VERSION >= 12020
#define CUDRV_DRIVER_ENTRY_POINTS_12020(X) \
  X(cuMemPrefetchAsync, 12020)             \
  X(cuMemAdvise, 12020)
#else
#define CUDRV_DRIVER_ENTRY_POINTS_12020(X) \
  X(cuMemPrefetchAsync, 8000)              \
  X(cuMemAdvise, 8000)
#endif

// Entry points that exist only in CUDA 12.3/12.4 headers; code using them is guarded by
// CUDRV_HAS_KERNEL_INTROSPECTION and reports not_supported_error on an older toolkit.
#if CUDA_VERSION >= 12040
#define CUDRV_HAS_KERNEL_INTROSPECTION 1
#define CUDRV_DRIVER_ENTRY_POINTS_12040(X) \
  X(cuKernelGetName, 12030)                \
  X(cuKernelGetParamInfo, 12040)           \
  X(cuFuncLoad, 12040)                     \
  X(cuLibraryGetKernelCount, 12040)        \
  X(cuLibraryEnumerateKernels, 12040)      \
  X(cuGraphCreate, 10000)                  \
  X(cuGraphDestroy, 10000)                 \
  X(cuGraphClone, 10000)                   \
  X(cuGraphGetNodes, 10000)                \
  X(cuGraphGetRootNodes, 10000)            \
  X(cuGraphGetEdges, 12030)                \
  X(cuGraphAddDependencies, 12030)         \
  X(cuGraphRemoveDependencies, 12030)      \
  X(cuGraphNodeGetDependencies, 12030)     \
  X(cuGraphNodeGetDependentNodes, 12030)   \
  X(cuGraphNodeGetType, 10000)             \
  X(cuGraphAddKernelNode, 12000)           \
  X(cuGraphKernelNodeSetAttribute, 11000)  \
  X(cuGraphKernelNodeGetParams, 12000)     \
  X(cuGraphAddMemcpyNode, 10000)           \
  X(cuGraphAddMemsetNode, 10000)           \
  X(cuGraphAddHostNode, 10000)             \
  X(cuGraphAddChildGraphNode, 10000)       \
  X(cuGraphAddEmptyNode, 10000)            \
  X(cuGraphAddEventRecordNode, 11010)      \
  X(cuGraphAddEventWaitNode, 11010)        \
  X(cuGraphAddMemAllocNode, 11040)         \
  X(cuGraphAddMemFreeNode, 11040)          \
  X(cuGraphAddNode, 12030)                 \
  X(cuGraphDestroyNode, 10000)             \
  X(cuGraphConditionalHandleCreate, 12030) \
  X(cuGraphDebugDotPrint, 11030)           \
  X(cuGraphInstantiateWithParams, 12000)   \
  X(cuGraphExecDestroy, 10000)             \
  X(cuGraphLaunch, 10000)                  \
  X(cuGraphUpload, 11010)                  \
  X(cuGraphExecUpdate, 12000)              \
  X(cuGraphExecKernelNodeSetParams, 12000) \
  X(cuGraphExecMemcpyNodeSetParams, 10020) \
  X(cuGraphExecMemsetNodeSetParams, 10020) \
  X(cuUserObjectCreate, 11030)             \
  X(cuUserObjectRelease, 11030)            \
  X(cuGraphRetainUserObject, 11030)        \
  X(cuStreamBeginCapture, 10010)           \
  X(cuStreamEndCapture, 10000)             \
  X(cuStreamIsCapturing, 10000)            \
  X(cuStreamGetCaptureInfo, 12030)
#else
#define CUDRV_HAS_KERNEL_INTROSPECTION 0
#define CUDRV_DRIVER_ENTRY_POINTS_12040(X)
#endif

namespace cudrv::detail {

// CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER (36), by value: CUDA 12.0/12.1 headers do not name it.
inline constexpr CUresult call_requires_newer_driver = static_cast<CUresult>(36);

// The status the entry points return in a child process forked after the parent initialised CUDA
// (driver.cpp swaps every entry point for a stub returning it): no CUresult has this value.
// throw_driver_error turns it into fork_error; report_destruction_error ignores it, so the destructors
// of objects inherited from the parent do nothing in the child.
inline constexpr CUresult forked_child_status = static_cast<CUresult>(0x7f0f0c01);

// Whether this process is a child forked after CUDA was initialised (see forked_child_status).
bool in_forked_child() noexcept;

// Whether ctx is a primary context that cudrv retains for the rest of the process (device.cpp):
// such a context cannot be destroyed while the process runs, except by device::reset_primary_context.
// Never throws; no driver call.
bool is_retained_primary_context(CUcontext ctx) noexcept;

// The device of a primary context cudrv retains (-1 for any other context), and how many times
// device::reset_primary_context reset it (its generation). Never throws; no driver call.
int retained_primary_context_device(CUcontext ctx) noexcept;
unsigned primary_context_generation(int device) noexcept;

// Tokens of the primary contexts cudrv retains carry this bit, the device and the context's reset
// generation instead of a driver id (the driver's ids are counters that never reach it): checking them
// needs no driver call, and a reset by device::reset_primary_context makes them dead.
inline constexpr unsigned long long primary_token_bit = 1ull << 63;
constexpr unsigned long long primary_token(int device, unsigned generation) noexcept {
  return primary_token_bit | (static_cast<unsigned long long>(static_cast<unsigned>(device)) << 32) | generation;
}

// The token of dev's primary context (retained on first use, as device::primary_context does), made
// from the device's slot directly: what context_token::of(dev.primary_context().native_handle())
// returns, without looking the handle up among the retained contexts. The creation paths from a device use it.
context_token primary_context_token(const cudrv::device& dev);

// Loads the driver and runs cuInit once; throws driver_unavailable_error when that failed.
void ensure_driver();

// Resolves one entry point (after ensure_driver); throws not_supported_error naming the function
// and the driver version it needs when the installed driver lacks it.
void* resolve_entry_point(const char* symbol, int api_version);

// The driver's description of a code, once the driver is loaded; nullptr before or without it.
const char* driver_error_string(CUresult code) noexcept;

// Whether a failed call's status says nothing about the call itself: a sticky fault of an earlier kernel
// (the context is unusable) or a forked child. Such a status is thrown as itself (context_fault_error,
// fork_error) through throw_driver_error, never diagnosed as the call's own failure.
inline bool is_context_lost(CUresult status) noexcept {
  return status == forked_child_status || cudrv::is_sticky(status);
}

// Throws the cudrv::error subtype that matches a failed driver call.
[[noreturn]] void throw_driver_error(CUresult status, const char* api, std::string context);

// Checked call: throws the matching cudrv::error subtype when status is not CUDA_SUCCESS.
inline void check(CUresult status, const char* api) {
  if (status != CUDA_SUCCESS) [[unlikely]] {
    throw_driver_error(status, api, {});
  }
}

// Checked call whose context string is built only on failure.
template <class ContextFn>
inline void check(CUresult status, const char* api, ContextFn&& context) {
  if (status != CUDA_SUCCESS) [[unlikely]] {
    throw_driver_error(status, api, context());
  }
}

// Reports a failure met in a destructor to the destruction handler; never throws.
void report_destruction_error(CUresult status, const char* api) noexcept;

// Tells the destruction handler that an object (what: "event", "stream", "buffer") outlived its
// context, so that its destruction was skipped: the driver destroyed it with the context, and the
// handle or address may belong to something else by now. Never throws.
void report_outlived_context(const char* api, const char* what) noexcept;

// Runs a destroy call and reports its failure (or an exception from resolving it) to the handler.
template <class Fn>
inline void destroy_noexcept(const char* api, Fn&& fn) noexcept {
  try {
    CUresult status = fn();
    if (status != CUDA_SUCCESS) [[unlikely]] {
      report_destruction_error(status, api);
    }
  } catch (const fork_error&) {
    // a forked child: the parent's object is left alone
  } catch (const error& e) {
    get_destruction_error_handler()(e);
  } catch (...) {
    report_destruction_error(CUDA_ERROR_UNKNOWN, api);
  }
}

// ctx, or throws invalid_argument_error naming api when it is null (a moved-from owner).
inline CUcontext require_context_handle(CUcontext ctx, const char* api) {
  if (ctx == nullptr) [[unlikely]] {
    throw invalid_argument_error(api, "the context is empty (a moved-from or released cudrv::context)");
  }
  return ctx;
}

// Runs fn() with ctx current (api names the caller in the error for an empty context), switching (and switching back)
// only when another context is current. The fast path, ctx already current, costs one cuCtxGetCurrent. Used on creation
// paths.
template <class Fn>
inline void run_in_context(CUcontext ctx, const char* api, Fn&& fn);

namespace drv {

template <class Pfn>
struct entry_point {
  std::atomic<Pfn> fn{nullptr};
  const char* symbol;
  int version;
  Pfn get() {
    Pfn p = fn.load(std::memory_order_acquire);
    if (p == nullptr) [[unlikely]] {
      p = reinterpret_cast<Pfn>(resolve_entry_point(symbol, version));
      fn.store(p, std::memory_order_release);
    }
    return p;
  }
};

// The names below may be macros of cuda.h (cuMemAlloc -> cuMemAlloc_v2); the stringised symbol and
// the PFN typedef use the base name, the function the (possibly renamed) token. Both stay consistent.
#define CUDRV_DECLARE_ENTRY(name, ver)                                         \
  inline entry_point<PFN_##name##_v##ver> name##_entry{{nullptr}, #name, ver}; \
  template <class... Args>                                                     \
  inline CUresult name(Args... args) {                                         \
    return name##_entry.get()(args...);                                        \
  }
CUDRV_DRIVER_ENTRY_POINTS(CUDRV_DECLARE_ENTRY)
#undef CUDRV_DECLARE_ENTRY

}  // namespace drv

// The slow path of run_in_context: runs fn(data) under a context_guard for ctx.
void switch_context_and_run(CUcontext ctx, void (*fn)(void*), void* data);

template <class Fn>
inline void run_in_context(CUcontext ctx, const char* api, Fn&& fn) {
  if (ctx == nullptr) [[unlikely]] {
    throw invalid_argument_error(api, "the context is empty (a moved-from or released cudrv::context)");
  }
  CUcontext current = nullptr;
  check(drv::cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current == ctx) [[likely]] {
    fn();
    return;
  }
  switch_context_and_run(
      ctx, [](void* data) { (*static_cast<std::remove_reference_t<Fn>*>(data))(); }, static_cast<void*>(&fn));
}
}  // namespace cudrv::detail
