// A stand-in for libnccl.so.2 that needs no GPU, loaded by cudrv through CUDRV_LIBNCCL in the CPU
// tier (tests/fake_driver/test_fake_nccl_api.cpp). Built twice: cudrv_test_fake_nccl reports NCCL
// 2.28.9 and exports every function cudrv resolves; cudrv_test_fake_nccl_old (FAKE_NCCL_OLD) reports
// 2.18.5 and exports only the functions NCCL 2.18 had, so cudrv's calls of newer ones must be refused.
//
// Communicators are plain heap objects; nothing touches a device. Every call is appended to a log the
// test reads (fake_nccl_log), and the behaviour of non-blocking communicators is set by the test
// (fake_nccl_set): "pending" is how many ncclCommGetAsyncError polls answer ncclInProgress after a
// call on a non-blocking communicator (-1: for ever).
#include <nccl.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace {

struct fake_comm {
  int rank = 0;
  int nranks = 1;
  bool blocking = true;
  long pending = 0;  // polls still answering ncclInProgress; -1: for ever
  ncclResult_t async = ncclSuccess;
  // As NCCL does for a non-blocking parent, a split's or shrink's new communicator is written to
  // *out only when the parent's job ends (its last in-progress poll).
  ncclComm_t* out = nullptr;
  ncclComm_t made = nullptr;
  // The same for a window registered on a non-blocking communicator.
  ncclWindow_t* window_out = nullptr;
  ncclWindow_t window_made = nullptr;
  // Registrations and windows not deregistered: NCCL frees them with the communicator.
  std::vector<int*> registered;
};

std::mutex mutex;
std::string log_text;
long pending_polls = 3;  // fake_nccl_set("pending", n)
int group_depth = 0;
bool group_in_progress = false;
int next_op = ncclNumOps;

void note(const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex);
  log_text += line;
  log_text += '\n';
}

fake_comm* as(ncclComm_t c) { return reinterpret_cast<fake_comm*>(c); }

ncclComm_t make(int rank, int nranks, const ncclConfig_t* config) {
  auto* c = new fake_comm;
  c->rank = rank;
  c->nranks = nranks;
  c->blocking = config == nullptr || config->blocking == NCCL_CONFIG_UNDEF_INT || config->blocking != 0;
  return reinterpret_cast<ncclComm_t>(c);
}

// A call on c: a non-blocking communicator is busy for a while afterwards (outside a group; inside one,
// the group's end is).
ncclResult_t started(ncclComm_t c) {
  if (as(c)->blocking) {
    return ncclSuccess;
  }
  if (group_depth > 0) {
    group_in_progress = true;
    as(c)->pending = pending_polls;
    return ncclSuccess;
  }
  as(c)->pending = pending_polls;
  return pending_polls == 0 ? ncclSuccess : ncclInProgress;
}

// A split or shrink of parent making child: written at once for a blocking parent, when the parent's
// job ends for a non-blocking one (the call itself answers ncclSuccess, as NCCL does).
ncclResult_t made_by(ncclComm_t parent, ncclComm_t child, ncclComm_t* out) {
  if (as(parent)->blocking) {
    *out = child;
    return ncclSuccess;
  }
  as(parent)->pending = pending_polls;
  as(parent)->out = out;
  as(parent)->made = child;
  return ncclSuccess;
}

// A communicator's end: a child it never handed over goes with it.
void forget(ncclComm_t comm) {
  if (as(comm)->out != nullptr) {
    delete as(as(comm)->made);
  }
  for (int* handle : as(comm)->registered) {  // a window not handed over yet is among them
    delete handle;
  }
  delete as(comm);
}

std::string hex(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

}  // namespace

// --- for the tests ---------------------------------------------------------------------------------
FAKE_API const char* fake_nccl_log() {
  static std::string copy;
  std::lock_guard<std::mutex> lock(mutex);
  copy = log_text;
  return copy.c_str();
}
FAKE_API void fake_nccl_clear() {
  std::lock_guard<std::mutex> lock(mutex);
  log_text.clear();
}
FAKE_API void fake_nccl_set(const char* key, long value) {
  if (std::strcmp(key, "pending") == 0) {
    pending_polls = value;
  }
}
// Ends what a communicator is busy with: its next poll answers its asynchronous state.
FAKE_API void fake_nccl_settle(ncclComm_t c) { as(c)->pending = 0; }
// Sets the asynchronous error a communicator reports (for the fault paths).
FAKE_API void fake_nccl_set_async(ncclComm_t c, int result) { as(c)->async = static_cast<ncclResult_t>(result); }

// --- NCCL 2.18 --------------------------------------------------------------------------------------
FAKE_API ncclResult_t ncclGetVersion(int* version) {
#ifdef FAKE_NCCL_OLD
  *version = 21805;
#else
  *version = NCCL_VERSION_CODE;
#endif
  return ncclSuccess;
}
FAKE_API ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id->internal, 0x5a, sizeof id->internal);
  return ncclSuccess;
}
FAKE_API ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId, int rank,
                                             ncclConfig_t* config) {
  *comm = make(rank, nranks, config);
  note("ncclCommInitRankConfig " + std::to_string(rank) + "/" + std::to_string(nranks) +
       (as(*comm)->blocking ? " blocking" : " nonblocking"));
  return started(*comm);
}
FAKE_API ncclResult_t ncclCommInitAll(ncclComm_t* comms, int n, const int*) {
  for (int i = 0; i < n; ++i) {
    comms[i] = make(i, n, nullptr);
  }
  note("ncclCommInitAll " + std::to_string(n));
  return ncclSuccess;
}
FAKE_API ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  note("ncclCommFinalize");
  return started(comm);
}
FAKE_API ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  note("ncclCommDestroy");
  forget(comm);
  return ncclSuccess;
}
FAKE_API ncclResult_t ncclCommAbort(ncclComm_t comm) {
  note("ncclCommAbort");
  forget(comm);
  return ncclSuccess;
}
FAKE_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  note("ncclCommSplit " + std::to_string(color) + " " + std::to_string(key));
  ncclComm_t child = color == NCCL_SPLIT_NOCOLOR ? nullptr : make(0, 1, config);
  if (child != nullptr && config == nullptr) {
    as(child)->blocking = as(comm)->blocking;
  }
  return made_by(comm, child, newcomm);
}
FAKE_API const char* ncclGetErrorString(ncclResult_t) { return "fake NCCL error"; }
FAKE_API const char* ncclGetLastError(ncclComm_t) { return "fake NCCL's last error"; }
FAKE_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async) {
  fake_comm* c = as(comm);
  if (c->pending != 0) {
    if (c->pending > 0) {
      --c->pending;
    }
    *async = ncclInProgress;
    return ncclSuccess;
  }
  if (c->out != nullptr) {  // the job ends: the new communicator is written now
    *c->out = c->made;
    c->out = nullptr;
  }
  if (c->window_out != nullptr) {
    *c->window_out = c->window_made;
    c->window_out = nullptr;
  }
  *async = c->async;
  return ncclSuccess;
}

FAKE_API ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  *count = as(comm)->nranks;
  return ncclSuccess;
}
FAKE_API ncclResult_t ncclCommCuDevice(const ncclComm_t, int* device) {
  *device = 1;
  return ncclSuccess;
}
FAKE_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  *rank = as(comm)->rank;
  return ncclSuccess;
}
FAKE_API ncclResult_t ncclAllReduce(const void* s, void* r, size_t count, ncclDataType_t type, ncclRedOp_t op,
                                    ncclComm_t comm, cudaStream_t) {
  note("ncclAllReduce " + hex(s) + " " + hex(r) + " " + std::to_string(count) + " type " + std::to_string(type) +
       " op " + std::to_string(op));
  return started(comm);
}
FAKE_API ncclResult_t ncclBroadcast(const void*, void*, size_t count, ncclDataType_t, int root, ncclComm_t comm,
                                    cudaStream_t) {
  note("ncclBroadcast " + std::to_string(count) + " root " + std::to_string(root));
  return started(comm);
}
FAKE_API ncclResult_t ncclReduce(const void*, void*, size_t count, ncclDataType_t, ncclRedOp_t op, int root,
                                 ncclComm_t comm, cudaStream_t) {
  note("ncclReduce " + std::to_string(count) + " op " + std::to_string(op) + " root " + std::to_string(root));
  return started(comm);
}
FAKE_API ncclResult_t ncclAllGather(const void*, void*, size_t count, ncclDataType_t, ncclComm_t comm, cudaStream_t) {
  note("ncclAllGather " + std::to_string(count));
  return started(comm);
}
FAKE_API ncclResult_t ncclReduceScatter(const void*, void*, size_t count, ncclDataType_t, ncclRedOp_t op,
                                        ncclComm_t comm, cudaStream_t) {
  note("ncclReduceScatter " + std::to_string(count) + " op " + std::to_string(op));
  return started(comm);
}
FAKE_API ncclResult_t ncclSend(const void* s, size_t count, ncclDataType_t, int peer, ncclComm_t comm, cudaStream_t) {
  note("ncclSend " + hex(s) + " " + std::to_string(count) + " to " + std::to_string(peer));
  return started(comm);
}
FAKE_API ncclResult_t ncclRecv(void* r, size_t count, ncclDataType_t, int peer, ncclComm_t comm, cudaStream_t) {
  note("ncclRecv " + hex(r) + " " + std::to_string(count) + " from " + std::to_string(peer));
  return started(comm);
}
FAKE_API ncclResult_t ncclGroupStart() {
  ++group_depth;
  note("ncclGroupStart");
  return ncclSuccess;
}
FAKE_API ncclResult_t ncclGroupEnd() {
  if (group_depth == 0) {
    return ncclInvalidUsage;
  }
  note("ncclGroupEnd");
  if (--group_depth == 0 && group_in_progress) {
    group_in_progress = false;
    return ncclInProgress;
  }
  return ncclSuccess;
}
FAKE_API ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t type,
                                               ncclScalarResidence_t residence, ncclComm_t) {
  *op = static_cast<ncclRedOp_t>(next_op++);
  std::string value = residence == ncclScalarHostImmediate && type == ncclFloat32
                          ? std::to_string(*static_cast<const float*>(scalar))
                          : hex(scalar);
  note("ncclRedOpCreatePreMulSum " + std::to_string(*op) + " type " + std::to_string(type) +
       (residence == ncclScalarDevice ? " device " : " host ") + value);
  return ncclSuccess;
}
FAKE_API ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t) {
  note("ncclRedOpDestroy " + std::to_string(op));
  return ncclSuccess;
}

#ifndef FAKE_NCCL_OLD
// --- newer NCCL --------------------------------------------------------------------------------------
FAKE_API ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  note("ncclCommRegister " + hex(buff) + " " + std::to_string(size));
  auto* made = new int(1);
  as(comm)->registered.push_back(made);
  *handle = made;
  return ncclSuccess;
}
FAKE_API ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  note("ncclCommDeregister");
  std::erase(as(comm)->registered, static_cast<int*>(handle));
  delete static_cast<int*>(handle);
  return ncclSuccess;
}
FAKE_API ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  static std::uintptr_t next = 0x7e0000000000ULL;
  *ptr = reinterpret_cast<void*>(next);
  next += (size + 0x1fffff) & ~std::uintptr_t{0x1fffff};
  note("ncclMemAlloc " + std::to_string(size) + " at " + hex(*ptr));
  return ncclSuccess;
}
FAKE_API ncclResult_t ncclMemFree(void* ptr) {
  note("ncclMemFree " + hex(ptr));
  return ncclSuccess;
}
FAKE_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* info) {
  if (group_depth == 0) {
    return ncclInvalidUsage;
  }
  if (info->magic != 0x74685283 || info->size != sizeof(ncclSimInfo_t)) {
    return ncclInvalidArgument;
  }
  --group_depth;
  group_in_progress = false;
  info->estimatedTime = 42.5f;
  note("ncclGroupSimulateEnd");
  return ncclSuccess;
}
FAKE_API ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int nid, ncclUniqueId*,
                                               ncclConfig_t* config) {
  *comm = make(rank, nranks, config);
  note("ncclCommInitRankScalable " + std::to_string(rank) + "/" + std::to_string(nranks) + " ids " +
       std::to_string(nid));
  return started(*comm);
}
FAKE_API ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int flags) {
  note("ncclCommWindowRegister " + hex(buff) + " " + std::to_string(size) + " flags " + std::to_string(flags));
  auto* handle = new int(2);
  as(comm)->registered.push_back(handle);
  auto made = reinterpret_cast<ncclWindow_t>(handle);
  if (as(comm)->blocking) {
    *win = made;
    return ncclSuccess;
  }
  as(comm)->pending = pending_polls;  // as NCCL 2.28.9: ncclSuccess now, the window at the job's end
  as(comm)->window_out = win;
  as(comm)->window_made = made;
  return ncclSuccess;
}
FAKE_API ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  note("ncclCommWindowDeregister");
  std::erase(as(comm)->registered, reinterpret_cast<int*>(win));
  delete reinterpret_cast<int*>(win);
  return started(comm);
}
FAKE_API ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude, int count, ncclComm_t* newcomm,
                                     ncclConfig_t* config, int flags) {
  std::string list;
  int below = 0;
  for (int i = 0; i < count; ++i) {
    list += " " + std::to_string(exclude[i]);
    below += exclude[i] < as(comm)->rank ? 1 : 0;
  }
  note("ncclCommShrink flags " + std::to_string(flags) + " exclude" + list);
  ncclComm_t child = make(as(comm)->rank - below, as(comm)->nranks - count, config);
  if (config == nullptr) {
    as(child)->blocking = as(comm)->blocking;
  }
  return made_by(comm, child, newcomm);
}
FAKE_API ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags) {
  note("ncclCommRevoke " + std::to_string(flags));
  return started(comm);
}
FAKE_API ncclResult_t ncclAlltoAll(const void* s, void* r, size_t count, ncclDataType_t, ncclComm_t comm,
                                   cudaStream_t) {
  note("ncclAlltoAll " + hex(s) + " " + hex(r) + " " + std::to_string(count));
  return started(comm);
}
FAKE_API ncclResult_t ncclGather(const void* s, void* r, size_t count, ncclDataType_t, int root, ncclComm_t comm,
                                 cudaStream_t) {
  note("ncclGather " + hex(s) + " " + hex(r) + " " + std::to_string(count) + " root " + std::to_string(root));
  return started(comm);
}
FAKE_API ncclResult_t ncclScatter(const void* s, void* r, size_t count, ncclDataType_t, int root, ncclComm_t comm,
                                  cudaStream_t) {
  note("ncclScatter " + hex(s) + " " + hex(r) + " " + std::to_string(count) + " root " + std::to_string(root));
  return started(comm);
}
#endif
