// The MPI helper (<cudrv/mpi.hpp>): the optional component cudrv::mpi, built into its own library
// (cudrv_mpi), which links MPI. libcudrv never contains this file (see the top-level CMakeLists.txt).
//
// Every helper that calls MPI on a communicator first sets MPI_ERRORS_RETURN on it and restores the
// caller's handler afterwards (errors_return below), so that a failure becomes an mpi_error instead
// of MPI's default abort. The MPI functions that take no communicator (MPI_Initialized,
// MPI_Error_class, ...) report on MPI_COMM_WORLD's or MPI_COMM_SELF's handler, which is left alone.
#include "cudrv/mpi.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions: MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support
#endif

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <string_view>
#include <utility>

namespace cudrv {

namespace {

// MPI's error classes, by name. MPI_T_ERR_* are the tools interface's, which cudrv does not call.
struct error_class_name {
  int value;
  const char* name;
};

#define CUDRV_MPI_CLASS(c) \
  error_class_name { c, #c }
constexpr std::array error_classes{
    CUDRV_MPI_CLASS(MPI_SUCCESS),
    CUDRV_MPI_CLASS(MPI_ERR_BUFFER),
    CUDRV_MPI_CLASS(MPI_ERR_COUNT),
    CUDRV_MPI_CLASS(MPI_ERR_TYPE),
    CUDRV_MPI_CLASS(MPI_ERR_TAG),
    CUDRV_MPI_CLASS(MPI_ERR_COMM),
    CUDRV_MPI_CLASS(MPI_ERR_RANK),
    CUDRV_MPI_CLASS(MPI_ERR_REQUEST),
    CUDRV_MPI_CLASS(MPI_ERR_ROOT),
    CUDRV_MPI_CLASS(MPI_ERR_GROUP),
    CUDRV_MPI_CLASS(MPI_ERR_OP),
    CUDRV_MPI_CLASS(MPI_ERR_TOPOLOGY),
    CUDRV_MPI_CLASS(MPI_ERR_DIMS),
    CUDRV_MPI_CLASS(MPI_ERR_ARG),
    CUDRV_MPI_CLASS(MPI_ERR_UNKNOWN),
    CUDRV_MPI_CLASS(MPI_ERR_TRUNCATE),
    CUDRV_MPI_CLASS(MPI_ERR_OTHER),
    CUDRV_MPI_CLASS(MPI_ERR_INTERN),
    CUDRV_MPI_CLASS(MPI_ERR_IN_STATUS),
    CUDRV_MPI_CLASS(MPI_ERR_PENDING),
    CUDRV_MPI_CLASS(MPI_ERR_ACCESS),
    CUDRV_MPI_CLASS(MPI_ERR_AMODE),
    CUDRV_MPI_CLASS(MPI_ERR_ASSERT),
    CUDRV_MPI_CLASS(MPI_ERR_BAD_FILE),
    CUDRV_MPI_CLASS(MPI_ERR_BASE),
    CUDRV_MPI_CLASS(MPI_ERR_CONVERSION),
    CUDRV_MPI_CLASS(MPI_ERR_DISP),
    CUDRV_MPI_CLASS(MPI_ERR_DUP_DATAREP),
    CUDRV_MPI_CLASS(MPI_ERR_FILE_EXISTS),
    CUDRV_MPI_CLASS(MPI_ERR_FILE_IN_USE),
    CUDRV_MPI_CLASS(MPI_ERR_FILE),
    CUDRV_MPI_CLASS(MPI_ERR_INFO_KEY),
    CUDRV_MPI_CLASS(MPI_ERR_INFO_NOKEY),
    CUDRV_MPI_CLASS(MPI_ERR_INFO_VALUE),
    CUDRV_MPI_CLASS(MPI_ERR_INFO),
    CUDRV_MPI_CLASS(MPI_ERR_IO),
    CUDRV_MPI_CLASS(MPI_ERR_KEYVAL),
    CUDRV_MPI_CLASS(MPI_ERR_LOCKTYPE),
    CUDRV_MPI_CLASS(MPI_ERR_NAME),
    CUDRV_MPI_CLASS(MPI_ERR_NO_MEM),
    CUDRV_MPI_CLASS(MPI_ERR_NOT_SAME),
    CUDRV_MPI_CLASS(MPI_ERR_NO_SPACE),
    CUDRV_MPI_CLASS(MPI_ERR_NO_SUCH_FILE),
    CUDRV_MPI_CLASS(MPI_ERR_PORT),
    CUDRV_MPI_CLASS(MPI_ERR_QUOTA),
    CUDRV_MPI_CLASS(MPI_ERR_READ_ONLY),
    CUDRV_MPI_CLASS(MPI_ERR_RMA_CONFLICT),
    CUDRV_MPI_CLASS(MPI_ERR_RMA_SYNC),
    CUDRV_MPI_CLASS(MPI_ERR_RMA_RANGE),
    CUDRV_MPI_CLASS(MPI_ERR_RMA_ATTACH),
    CUDRV_MPI_CLASS(MPI_ERR_RMA_SHARED),
    CUDRV_MPI_CLASS(MPI_ERR_RMA_FLAVOR),
    CUDRV_MPI_CLASS(MPI_ERR_SERVICE),
    CUDRV_MPI_CLASS(MPI_ERR_SIZE),
    CUDRV_MPI_CLASS(MPI_ERR_SPAWN),
    CUDRV_MPI_CLASS(MPI_ERR_UNSUPPORTED_DATAREP),
    CUDRV_MPI_CLASS(MPI_ERR_UNSUPPORTED_OPERATION),
    CUDRV_MPI_CLASS(MPI_ERR_WIN),
// MPI-4's classes, where the MPI has them.
#ifdef MPI_ERR_PROC_ABORTED
    CUDRV_MPI_CLASS(MPI_ERR_PROC_ABORTED),
#endif
#ifdef MPI_ERR_VALUE_TOO_LARGE
    CUDRV_MPI_CLASS(MPI_ERR_VALUE_TOO_LARGE),
#endif
#ifdef MPI_ERR_SESSION
    CUDRV_MPI_CLASS(MPI_ERR_SESSION),
#endif
#ifdef MPI_ERR_ERRHANDLER
    CUDRV_MPI_CLASS(MPI_ERR_ERRHANDLER),
#endif
};
#undef CUDRV_MPI_CLASS

// Whether MPI calls may be made now: after MPI_Init and before MPI_Finalize. MPI_Initialized and
// MPI_Finalized may be called at any time.
bool mpi_running() noexcept {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

// MPI_ERRORS_RETURN on MPI_COMM_WORLD and MPI_COMM_SELF while an error code is looked up: a code that
// is not MPI's (MPI_Error_class refuses it) is reported on one of them (which one depends on the MPI
// version), and must not abort the job while an exception is being built. Never throws.
class quiet_lookup {
 public:
  quiet_lookup() noexcept {
    for (std::size_t i = 0; i < comms_.size(); ++i) {
      saved_[i] = MPI_Comm_get_errhandler(comms_[i], &previous_[i]) == MPI_SUCCESS &&
                  MPI_Comm_set_errhandler(comms_[i], MPI_ERRORS_RETURN) == MPI_SUCCESS;
    }
  }
  quiet_lookup(const quiet_lookup&) = delete;
  quiet_lookup& operator=(const quiet_lookup&) = delete;
  ~quiet_lookup() {
    for (std::size_t i = 0; i < comms_.size(); ++i) {
      if (saved_[i]) {
        MPI_Comm_set_errhandler(comms_[i], previous_[i]);
      }
      if (previous_[i] != MPI_ERRHANDLER_NULL) {
        MPI_Errhandler_free(&previous_[i]);
      }
    }
  }

 private:
  std::array<MPI_Comm, 2> comms_{MPI_COMM_WORLD, MPI_COMM_SELF};
  std::array<MPI_Errhandler, 2> previous_{MPI_ERRHANDLER_NULL, MPI_ERRHANDLER_NULL};
  std::array<bool, 2> saved_{false, false};
};

int error_class_of(int code) noexcept {
  int cls = code;
  if (mpi_running()) {
    quiet_lookup quiet;
    if (MPI_Error_class(code, &cls) != MPI_SUCCESS) {
      cls = code;
    }
  }
  return cls;
}

std::string class_name(int cls) {
  for (const auto& c : error_classes) {
    if (c.value == cls) {
      return c.name;
    }
  }
  return "MPI error class " + std::to_string(cls);
}

std::string error_string(int code) {
  if (mpi_running()) {
    quiet_lookup quiet;
    char text[MPI_MAX_ERROR_STRING + 1] = {};
    int length = 0;
    if (MPI_Error_string(code, text, &length) == MPI_SUCCESS) {
      return std::string(text, static_cast<std::size_t>(std::clamp(length, 0, MPI_MAX_ERROR_STRING)));
    }
  }
  return "MPI error code " + std::to_string(code);
}

// An error of the helper itself, not of an MPI call (MPI not running, the launcher disagreeing).
[[noreturn]] void throw_helper_error(const char* api, std::string description, std::string context) {
  throw error(error_source::mpi, MPI_ERR_OTHER, "MPI_ERR_OTHER", std::move(description), api, std::move(context));
}

void require_running(const char* api) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized != 0) {
    throw_helper_error(api, "MPI has been finalized", "no MPI call may be made after MPI_Finalize");
  }
  if (initialized == 0) {
    throw_helper_error(api, "MPI is not initialized", "make a cudrv::mpi::environment (or call MPI_Init_thread) first");
  }
}

void require_comm(MPI_Comm comm, const char* api) {
  if (comm == MPI_COMM_NULL) {
    throw invalid_argument_error(api, "the communicator is MPI_COMM_NULL");
  }
}

// MPI_ERRORS_RETURN on a communicator while a helper calls MPI on it; the caller's handler is put back
// at the end of the scope. MPI_Comm_get_errhandler returns a new reference, freed here.
class errors_return {
 public:
  explicit errors_return(MPI_Comm comm) : comm_(comm) {
    int rc = MPI_Comm_get_errhandler(comm_, &previous_);
    if (rc != MPI_SUCCESS) {
      throw mpi_error(rc, "MPI_Comm_get_errhandler");
    }
    rc = MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) {
      MPI_Errhandler_free(&previous_);
      throw mpi_error(rc, "MPI_Comm_set_errhandler");
    }
  }
  errors_return(const errors_return&) = delete;
  errors_return& operator=(const errors_return&) = delete;
  ~errors_return() {
    MPI_Comm_set_errhandler(comm_, previous_);
    MPI_Errhandler_free(&previous_);
  }

 private:
  MPI_Comm comm_;
  MPI_Errhandler previous_ = MPI_ERRHANDLER_NULL;
};

// A communicator made by a helper, freed at the end of the scope.
class owned_comm {
 public:
  owned_comm() = default;
  owned_comm(const owned_comm&) = delete;
  owned_comm& operator=(const owned_comm&) = delete;
  ~owned_comm() {
    if (comm != MPI_COMM_NULL) {
      MPI_Comm_free(&comm);
    }
  }
  MPI_Comm comm = MPI_COMM_NULL;
};

// The launcher's variables for the node-local rank, in the order they are read.
constexpr std::array<const char*, 3> local_rank_variables{"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                                          "MV2_COMM_WORLD_LOCAL_RANK"};

// A non-negative int written with digits only, or nothing.
std::optional<int> parse_non_negative(const char* text) noexcept {
  if (text == nullptr || *text == '\0') {
    return std::nullopt;
  }
  long long value = 0;
  for (const char* p = text; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') {
      return std::nullopt;
    }
    value = value * 10 + (*p - '0');
    if (value > std::numeric_limits<int>::max()) {
      return std::nullopt;
    }
  }
  return static_cast<int>(value);
}

// The launcher's local rank and the variable that gave it; variable is null when none did.
struct launcher_value {
  int local_rank = -1;
  const char* variable = nullptr;
  explicit operator bool() const noexcept { return variable != nullptr; }
};

launcher_value launcher_local_rank_from() noexcept {
  for (const char* variable : local_rank_variables) {
    if (auto value = parse_non_negative(std::getenv(variable))) {
      return launcher_value{*value, variable};
    }
  }
  return {};
}

// Copies as much of text as fits into a fixed buffer, always terminated.
template <std::size_t N>
void copy_text(char (&out)[N], std::string_view text) noexcept {
  const std::size_t n = std::min(text.size(), N - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

}  // namespace

// --- errors ----------------------------------------------------------------------------------------

mpi_error::mpi_error(int code, std::string api, std::string context)
    : error(error_source::mpi, code, class_name(error_class_of(code)), error_string(code), std::move(api),
            std::move(context)) {}

namespace mpi {

void check(int code, const char* api, const char* context) {
  if (code != MPI_SUCCESS) {
    throw mpi_error(code, api != nullptr ? api : "", context != nullptr ? context : "");
  }
}

// --- environment -----------------------------------------------------------------------------------

namespace {

const char* thread_level_name(int level) noexcept {
  if (level == MPI_THREAD_SINGLE) return "MPI_THREAD_SINGLE";
  if (level == MPI_THREAD_FUNNELED) return "MPI_THREAD_FUNNELED";
  if (level == MPI_THREAD_SERIALIZED) return "MPI_THREAD_SERIALIZED";
  if (level == MPI_THREAD_MULTIPLE) return "MPI_THREAD_MULTIPLE";
  return "an unknown thread level";
}

std::string thread_shortfall(int required, int provided) {
  return std::string("asked for ") + thread_level_name(required) + ", MPI provides " + thread_level_name(provided);
}

// Starts MPI, or reads the thread level of an MPI already started; returns whether it started MPI.
bool start(int* argc, char*** argv, int required, int& provided) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized != 0) {
    throw mpi_error(MPI_ERR_OTHER, "cudrv::mpi::environment", "MPI has been finalized and cannot be started again");
  }
  if (initialized != 0) {
    check(MPI_Query_thread(&provided), "MPI_Query_thread");
    if (provided < required) {
      throw mpi_error(MPI_ERR_OTHER, "cudrv::mpi::environment",
                      "MPI was already started: " + thread_shortfall(required, provided));
    }
    return false;
  }
  // Errors of MPI_Init_thread go to MPI_COMM_WORLD's default handler, which aborts in most MPIs;
  // an MPI that returns gets here.
  check(MPI_Init_thread(argc, argv, required, &provided), "MPI_Init_thread");
  if (provided < required) {
    MPI_Finalize();
    throw mpi_error(MPI_ERR_OTHER, "MPI_Init_thread", thread_shortfall(required, provided));
  }
  return true;
}

}  // namespace

environment::environment(int& argc, char**& argv, int required) { owns_ = start(&argc, &argv, required, provided_); }

environment::environment(int required) { owns_ = start(nullptr, nullptr, required, provided_); }

environment::~environment() {
  if (owns_) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized == 0) {
      MPI_Finalize();
    }
  }
}

// --- where a rank runs -----------------------------------------------------------------------------

std::optional<int> launcher_local_rank() noexcept {
  if (const launcher_value found = launcher_local_rank_from()) {
    return found.local_rank;
  }
  return std::nullopt;
}

node_info node_local(MPI_Comm comm) {
  constexpr const char* api = "cudrv::mpi::node_local";
  require_running(api);
  require_comm(comm, api);
  errors_return guard(comm);

  node_info info;
  check(MPI_Comm_rank(comm, &info.rank), "MPI_Comm_rank");
  check(MPI_Comm_size(comm, &info.size), "MPI_Comm_size");

  // The ranks that share memory with this one; ordered by their rank in comm, so local rank 0 is the
  // node's lowest rank. The new communicator inherits MPI_ERRORS_RETURN from comm.
  owned_comm local;
  check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, info.rank, MPI_INFO_NULL, &local.comm), "MPI_Comm_split_type",
        "MPI_COMM_TYPE_SHARED");
  check(MPI_Comm_rank(local.comm, &info.local_rank), "MPI_Comm_rank", "node-local communicator");
  check(MPI_Comm_size(local.comm, &info.local_size), "MPI_Comm_size", "node-local communicator");

  // The launcher's variable is compared only on MPI_COMM_WORLD (or a communicator congruent with it):
  // it counts the ranks of the whole job on the node.
  int compared = MPI_UNEQUAL;
  check(MPI_Comm_compare(comm, MPI_COMM_WORLD, &compared), "MPI_Comm_compare");
  const bool is_world = compared == MPI_IDENT || compared == MPI_CONGRUENT;
  const launcher_value launcher = is_world ? launcher_local_rank_from() : launcher_value{};
  const bool disagrees = launcher && launcher.local_rank != info.local_rank;

  // One all-reduce counts the nodes (their leaders, local rank 0) and the ranks whose launcher
  // variable disagrees; the node index of a leader is the number of leaders before it.
  const int leader = info.local_rank == 0 ? 1 : 0;
  int mine[2] = {leader, disagrees ? 1 : 0};
  int totals[2] = {0, 0};
  check(MPI_Allreduce(mine, totals, 2, MPI_INT, MPI_SUM, comm), "MPI_Allreduce", "counting nodes");
  int leaders_before = 0;
  check(MPI_Exscan(&leader, &leaders_before, 1, MPI_INT, MPI_SUM, comm), "MPI_Exscan", "numbering nodes");
  if (info.rank == 0) {
    leaders_before = 0;  // MPI_Exscan leaves rank 0's result undefined
  }
  info.nodes = totals[0];
  info.node = leaders_before;
  check(MPI_Bcast(&info.node, 1, MPI_INT, 0, local.comm), "MPI_Bcast", "node index within the node");

  if (disagrees) {
    throw_helper_error(api, "the launcher's node-local rank disagrees with MPI's shared-memory split",
                       std::string(launcher.variable) + "=" + std::to_string(launcher.local_rank) +
                           " but MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) gives local rank " +
                           std::to_string(info.local_rank) + " of " + std::to_string(info.local_size) + " (rank " +
                           std::to_string(info.rank) + " of " + std::to_string(info.size) +
                           "): the launcher placed the ranks differently from what MPI reports; start the "
                           "job with the launcher of this MPI");
  }
  if (totals[1] != 0) {
    throw_helper_error(api, "the launcher's node-local rank disagrees with MPI's shared-memory split",
                       "on " + std::to_string(totals[1]) + " of " + std::to_string(info.size) +
                           " ranks (see their errors); this rank's " +
                           (launcher ? std::string(launcher.variable) + "=" + std::to_string(launcher.local_rank)
                                     : std::string("launcher variables (") + local_rank_variables[0] + ", " +
                                           local_rank_variables[1] + ", " + local_rank_variables[2] + ") are unset") +
                           ", local rank " + std::to_string(info.local_rank));
  }
  if (launcher) {
    info.checked_by = launcher.variable;
  }
  return info;
}

int device_ordinal(int local_rank, int local_size, int device_count, device_policy policy) {
  constexpr const char* api = "cudrv::mpi::device_ordinal";
  if (device_count < 1) {
    throw invalid_argument_error(api,
                                 "the driver sees " + std::to_string(device_count) +
                                     " devices on this node: check CUDA_VISIBLE_DEVICES and that the node has a GPU");
  }
  if (local_size < 1 || local_rank < 0 || local_rank >= local_size) {
    throw invalid_argument_error(api, "local rank " + std::to_string(local_rank) + " is not in [0, " +
                                          std::to_string(local_size) + "), the ranks of this node");
  }
  switch (policy) {
    case device_policy::exclusive:
      if (local_size > device_count) {
        throw invalid_argument_error(api,
                                     std::to_string(local_size) + " ranks share this node but the driver sees " +
                                         std::to_string(device_count) + " devices: start at most " +
                                         std::to_string(device_count) +
                                         " ranks per node (mpirun --map-by ppr:" + std::to_string(device_count) +
                                         ":node), or choose device_policy::shared to put several ranks on one device");
      }
      return local_rank;
    case device_policy::shared: return local_rank % device_count;
  }
  throw invalid_argument_error(api, "unknown device_policy " + std::to_string(static_cast<int>(policy)));
}

cudrv::device select_device(const node_info& node, device_policy policy) {
  // cuDeviceGetCount and cuDeviceGet only: no context is created or made current.
  const int count = cudrv::device_count();
  return cudrv::device(device_ordinal(node.local_rank, node.local_size, count, policy));
}

// --- the NCCL unique id ----------------------------------------------------------------------------
// Built with the NCCL layer only (CMake: CUDRV_NCCL_LAYER): nccl::unique_id::generate is part of it.
#if CUDRV_NCCL_LAYER

namespace {

// What the root sends: the id, or why it could not make one. Plain bytes, one MPI_Bcast.
struct unique_id_packet {
  std::int32_t ok;
  std::int32_t code;
  char name[64];
  char message[768];
  char bytes[sizeof(nccl::unique_id::bytes)];
};
static_assert(std::is_trivially_copyable_v<unique_id_packet>);

}  // namespace

nccl::unique_id broadcast_unique_id(MPI_Comm comm, int root) {
  constexpr const char* api = "cudrv::mpi::broadcast_unique_id";
  require_running(api);
  require_comm(comm, api);
  errors_return guard(comm);
  int rank = 0;
  int size = 0;
  check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  if (root < 0 || root >= size) {
    throw invalid_argument_error(api, "root " + std::to_string(root) + " is not a rank of the communicator (0 to " +
                                          std::to_string(size - 1) + ")");
  }

  unique_id_packet packet{};
  nccl::unique_id id;
  std::exception_ptr failure;
  if (rank == root) {
    // The root never leaves before the broadcast: the others wait in it.
    try {
      id = nccl::unique_id::generate();
      packet.ok = 1;
      std::memcpy(packet.bytes, id.bytes.data(), sizeof(packet.bytes));
    } catch (const error& e) {
      failure = std::current_exception();
      packet.code = e.code();
      copy_text(packet.name, e.name());
      copy_text(packet.message, e.what());
    } catch (const std::exception& e) {
      failure = std::current_exception();
      copy_text(packet.name, "std::exception");
      copy_text(packet.message, e.what());
    } catch (...) {
      failure = std::current_exception();
      copy_text(packet.name, "unknown exception");
      copy_text(packet.message, "an exception that is not a std::exception");
    }
  }
  check(MPI_Bcast(&packet, static_cast<int>(sizeof(packet)), MPI_BYTE, root, comm), "MPI_Bcast", "the NCCL unique id");
  if (failure) {
    std::rethrow_exception(failure);
  }
  if (packet.ok == 0) {
    throw error(error_source::nccl, packet.code, packet.name,
                "rank " + std::to_string(root) + " could not make the NCCL unique id: " + packet.message, api,
                "rank " + std::to_string(rank) + " of " + std::to_string(size));
  }
  std::memcpy(id.bytes.data(), packet.bytes, sizeof(packet.bytes));
  return id;
}

#endif  // CUDRV_NCCL_LAYER

// --- GPU-aware MPI ---------------------------------------------------------------------------------

gpu_awareness gpu_aware() noexcept {
  if (const char* forced = std::getenv("CUDRV_MPI_GPU_AWARE")) {
    if (std::strcmp(forced, "1") == 0) return gpu_awareness::yes;
    if (std::strcmp(forced, "0") == 0) return gpu_awareness::no;
  }
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  // Open MPI: the run-time answer is the one that counts (the library may be another build than the
  // headers); it is known once MPI is running.
  if (mpi_running()) {
    return MPIX_Query_cuda_support() == 1 ? gpu_awareness::yes : gpu_awareness::no;
  }
#if MPIX_CUDA_AWARE_SUPPORT
  return gpu_awareness::unknown;
#else
  return gpu_awareness::no;
#endif
#else
  return gpu_awareness::unknown;
#endif
}

const char* to_string(gpu_awareness a) noexcept {
  switch (a) {
    case gpu_awareness::yes: return "yes";
    case gpu_awareness::no: return "no";
    case gpu_awareness::unknown: return "unknown";
  }
  return "unknown";
}

}  // namespace mpi
}  // namespace cudrv
