// Shared by the MPI + GPU examples (example_mpi_sum, example_mpi_pi, example_heat_halo): MPI started
// through cudrv's MPI helper, one device per rank, failures that every rank agrees on (so that no rank
// waits forever in a collective the others never reach), NCCL communicators made across the ranks, and
// output from rank 0 only.
//
// Exit statuses, the same on every rank (so mpirun exits with it too): those of example_main.hpp
//   0 success, 1 usage error (too few devices for one per rank included: the message names
//   --share-devices), 2 no CUDA driver, 3 no CUDA device, 4 CUDA, compiler, MPI or NCCL error,
//   5 the result differs from the reference,
// and
//   6 NCCL cannot run this configuration: two ranks share a GPU ("NCCL needs one GPU per rank: ranks r
//     and s share device d"). Detected before NCCL is called, on every rank.
// A failure while the ranks work (after the agreed setup, e.g. a CUDA error in the middle of the
// timed loop) cannot be agreed on: the failing rank prints it and aborts every rank with MPI_Abort and
// the status.
#pragma once

#include <cudrv/mpi.hpp>
#include <cudrv/nccl.hpp>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "example_main.hpp"

namespace example::mpi {

/// The status for "NCCL needs one GPU per rank" (see above).
inline constexpr int status_nccl_shared_device = 6;

/// The ranks of the run, and where this one runs.
struct world {
  MPI_Comm comm = MPI_COMM_WORLD;
  cudrv::mpi::node_info node;
  int rank = 0;
  int size = 1;
  [[nodiscard]] bool root() const noexcept { return rank == 0; }
};

/// A failure with its status and message, thrown where the example detects it.
struct failure {
  int status;
  std::string message;
};

/// Thrown on every rank once the ranks agreed that a phase failed (the message is printed already).
struct agreed_failure {
  int status;
};

/// The status and message of the exception being handled.
inline int classify(std::exception_ptr e, std::string& message) {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const example::usage_error& x) {
    message = x.message;
    return 1;
  } catch (const failure& x) {
    message = x.message;
    return x.status;
  } catch (const agreed_failure& x) {
    message.clear();
    return x.status;
  } catch (const cudrv::driver_unavailable_error& x) {
    message = std::string("no usable CUDA driver: ") + x.what();
    return 2;
  } catch (const cudrv::library_unavailable_error& x) {
    message = x.what();
    return 4;
  } catch (const cudrv::error& x) {
    message = x.what();
    return 4;
  } catch (const std::exception& x) {
    message = std::string("error: ") + x.what();
    return 4;
  } catch (...) {
    message = "an unknown exception";
    return 4;
  }
}

/// Prints a rank's failure: "name: message", or "name: rank r: message" when there are several ranks.
inline void print_failure(const char* name, const world& w, const std::string& message) {
  if (w.size > 1) {
    std::fprintf(stderr, "%s: rank %d: %s\n", name, w.rank, message.c_str());
  } else {
    std::fprintf(stderr, "%s: %s\n", name, message.c_str());
  }
  std::fflush(stderr);
}

/// Every rank says how its part of a phase ended (0: well); when any failed, the lowest failing rank
/// prints its message (naming its rank unless every rank failed) and every rank throws agreed_failure
/// with that rank's status. Collective.
inline void agree(const char* name, const world& w, int status, const std::string& message) {
  std::vector<int> all(static_cast<std::size_t>(w.size));
  cudrv::mpi::check(MPI_Allgather(&status, 1, MPI_INT, all.data(), 1, MPI_INT, w.comm), "MPI_Allgather",
                    "agreeing on how a phase ended");
  bool every_rank = true;
  for (int st : all) {
    every_rank = every_rank && st != 0;
  }
  for (int r = 0; r < w.size; ++r) {
    if (all[static_cast<std::size_t>(r)] != 0) {
      if (r == w.rank && every_rank) {
        std::fprintf(stderr, "%s: %s\n", name, message.c_str());  // every rank failed: rank 0 speaks for all
        std::fflush(stderr);
      } else if (r == w.rank) {
        print_failure(name, w, message);
      }
      throw agreed_failure{all[static_cast<std::size_t>(r)]};
    }
  }
}

/// Runs work() on every rank and agrees on how it ended (see agree); returns what work returned.
/// Collective: every rank must call it, and work must not wait for the other ranks except in calls
/// that all of them reach. Exceptions are caught, so a rank that fails cannot leave the others waiting.
template <class Work>
auto phase(const char* name, const world& w, Work&& work) {
  using result = std::invoke_result_t<Work&>;
  int status = 0;
  std::string message;
  if constexpr (std::is_void_v<result>) {
    try {
      work();
    } catch (...) {
      status = classify(std::current_exception(), message);
    }
    agree(name, w, status, message);
  } else {
    std::optional<result> value;
    try {
      value.emplace(work());
    } catch (...) {
      status = classify(std::current_exception(), message);
    }
    agree(name, w, status, message);
    return std::move(*value);
  }
}

/// A reduction of one value over the ranks (MPI_Allreduce).
template <class T>
T all_reduce(const world& w, T value, MPI_Op op) {
  cudrv::mpi::check(MPI_Allreduce(MPI_IN_PLACE, &value, 1, cudrv::mpi::datatype<T>(), op, w.comm), "MPI_Allreduce");
  return value;
}

/// The largest of each element over the ranks (for per-repetition times: a distributed step takes as
/// long as its slowest rank), then the median of those.
inline double median_of_slowest(const world& w, std::vector<double> times) {
  cudrv::mpi::check(MPI_Allreduce(MPI_IN_PLACE, times.data(), static_cast<int>(times.size()), MPI_DOUBLE, MPI_MAX,
                                  w.comm),
                    "MPI_Allreduce");
  return example::median(std::move(times));
}

/// Which device each rank uses: the device's UUID (unique across nodes too), ordinal and node.
struct placement {
  std::array<unsigned char, 16> uuid;
  int ordinal;
  int node;
};

/// Every rank's placement, in rank order (MPI_Allgather). Collective.
inline std::vector<placement> placements(const char* name, const world& w, const cudrv::device& dev) {
  const placement mine = phase(name, w, [&] { return placement{dev.uuid().bytes, dev.ordinal(), w.node.node}; });
  std::vector<placement> all(static_cast<std::size_t>(w.size));
  const int bytes = static_cast<int>(sizeof mine);
  cudrv::mpi::check(MPI_Allgather(&mine, bytes, MPI_BYTE, all.data(), bytes, MPI_BYTE, w.comm), "MPI_Allgather",
                    "gathering the ranks' devices");
  return all;
}

/// The number of distinct GPUs the ranks use.
inline int distinct_devices(const std::vector<placement>& all) {
  int distinct = 0;
  for (std::size_t s = 0; s < all.size(); ++s) {
    bool seen = false;
    for (std::size_t r = 0; r < s && !seen; ++r) {
      seen = all[r].uuid == all[s].uuid;
    }
    distinct += seen ? 0 : 1;
  }
  return distinct;
}

/// Empty when every rank has a GPU of its own; else the message of the first two ranks that share one.
inline std::string shared_device(const std::vector<placement>& all, int nodes) {
  for (std::size_t s = 0; s < all.size(); ++s) {
    for (std::size_t r = 0; r < s; ++r) {
      if (all[r].uuid == all[s].uuid) {
        return "NCCL needs one GPU per rank: ranks " + std::to_string(r) + " and " + std::to_string(s) +
               " share device " + std::to_string(all[s].ordinal) +
               (nodes > 1 ? " of node " + std::to_string(all[s].node) : std::string()) +
               " (run at most as many ranks per node as it has GPUs, or leave NCCL out)";
      }
    }
  }
  return {};
}

/// This rank's device, one per local rank (cudrv::mpi::select_device); with share, local ranks may
/// share devices (device_policy::shared). Its primary context is made current: the stream-ordered
/// copies and MPI's own CUDA calls (GPU-aware MPI) run in it. Throws failure 3 when the driver sees no
/// device, usage_error when there are more local ranks than devices and share is false.
inline cudrv::device select_device(const world& w, bool share) {
  if (cudrv::device_count() == 0) {
    throw failure{3, "the CUDA driver sees no device"};
  }
  try {
    cudrv::device dev = cudrv::mpi::select_device(w.node, share ? cudrv::mpi::device_policy::shared
                                                                : cudrv::mpi::device_policy::exclusive);
    dev.set_current();
    return dev;
  } catch (const cudrv::invalid_argument_error& e) {
    throw example::usage_error{std::string(e.what()) +
                               " (pass --share-devices to let ranks share a GPU; the NCCL paths cannot)"};
  }
}

/// For the NCCL paths: when two ranks share a device, rank 0 prints "NCCL needs one GPU per rank: ranks r
/// and s share device d" and every rank throws agreed_failure with status 6. The placements are the same
/// on every rank, so every rank decides the same without another message.
inline void refuse_shared_devices(const char* name, const world& w, const std::vector<placement>& all) {
  const std::string shared = shared_device(all, w.node.nodes);
  if (!shared.empty()) {
    if (w.root()) {
      std::fprintf(stderr, "%s: %s\n", name, shared.c_str());
      std::fflush(stderr);
    }
    throw agreed_failure{status_nccl_shared_device};
  }
}

/// An NCCL communicator over the ranks, one GPU each: refused with status 6 on every rank, before NCCL
/// is called, when two ranks share a device; else the unique id is made on rank 0 and broadcast
/// (cudrv::mpi::broadcast_unique_id) and every rank joins (init_rank). A failure to make the id is
/// agreed on (every rank fails with it); a failure inside NCCL's set-up on one rank stops the job with
/// MPI_Abort, since the other ranks may be waiting inside NCCL where no MPI call reaches them. Collective.
inline cudrv::nccl::communicator make_communicator(const char* name, const world& w, const cudrv::device& dev,
                                                   const std::vector<placement>& all) {
  refuse_shared_devices(name, w, all);
  int status = 0;
  std::string message;
  cudrv::nccl::unique_id id;
  try {
    id = cudrv::mpi::broadcast_unique_id(w.comm);  // fails on every rank together (no NCCL, ...)
  } catch (...) {
    status = classify(std::current_exception(), message);
  }
  agree(name, w, status, message);
  cudrv::nccl::communicator comm;
  try {
    comm = cudrv::nccl::communicator::init_rank(id, w.size, w.rank, dev);
  } catch (const cudrv::nccl_error& e) {
    // NCCL's own refusal of two ranks on one GPU (ncclInvalidUsage, "Duplicate GPU detected"), in case
    // the devices looked distinct here but are not to NCCL.
    const bool duplicate = e.nccl_result() == static_cast<int>(cudrv::nccl::result::invalid_usage);
    status = duplicate ? status_nccl_shared_device : 4;
    message = duplicate ? std::string("NCCL needs one GPU per rank: NCCL refused the communicator: ") + e.what()
                        : std::string(e.what());
  } catch (...) {
    status = classify(std::current_exception(), message);
  }
  if (status != 0) {
    // The other ranks may still be inside NCCL's set-up, waiting for this one, where no MPI call can
    // reach them: stop the whole job instead of agreeing.
    std::fprintf(stderr, "%s: rank %d: %s\n", name, w.rank, message.c_str());
    if (w.size > 1) {
      std::fprintf(stderr, "%s: rank %d stops every rank (MPI_Abort with status %d)\n", name, w.rank, status);
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, status);
    }
    throw agreed_failure{status};
  }
  return comm;
}

/// Command-line flags the MPI examples share, and their positional sizes.
struct arguments {
  std::vector<std::string> positional;
  std::vector<std::string> flags;  // "--name" or "--name=value" as given
  [[nodiscard]] bool has(const char* flag) const {
    for (const std::string& f : flags) {
      if (f == flag) return true;
    }
    return false;
  }
  /// The value of --name=value (or of "--name value", joined when parsed); empty when absent.
  [[nodiscard]] std::string value(const char* flag) const {
    const std::string prefix = std::string(flag) + "=";
    for (const std::string& f : flags) {
      if (f.rfind(prefix, 0) == 0) return f.substr(prefix.size());
    }
    return {};
  }
  /// Positional argument n as a size, or fallback.
  [[nodiscard]] std::size_t size(std::size_t n, std::size_t fallback, const char* what) const {
    return n < positional.size() ? example::parse_size(positional[n].c_str(), what) : fallback;
  }
};

/// Splits argv into flags (from `known`, each "name" or "name=" for one taking a value, given as
/// "--name=value" or "--name value") and positional arguments. Throws usage_error for an unknown flag or
/// more than `max_positional` positional arguments.
inline arguments parse(int argc, char** argv, const std::vector<std::string>& known, std::size_t max_positional,
                       const char* usage) {
  arguments a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      a.positional.push_back(arg);
      continue;
    }
    const std::string name = arg.substr(0, arg.find('='));
    bool found = false;
    for (const std::string& k : known) {
      if (k == name && arg.find('=') == std::string::npos) {
        a.flags.push_back(arg);
        found = true;
      } else if (k == name + "=") {
        if (arg.find('=') != std::string::npos) {
          a.flags.push_back(arg);
        } else if (i + 1 < argc) {
          a.flags.push_back(arg + "=" + argv[++i]);
        } else {
          throw example::usage_error{arg + " needs a value; usage: " + usage};
        }
        found = true;
      }
    }
    if (!found) {
      throw example::usage_error{"unknown option " + arg + "; usage: " + usage};
    }
  }
  if (a.positional.size() > max_positional) {
    throw example::usage_error{"too many arguments; usage: " + std::string(usage)};
  }
  return a;
}

/// main() of an MPI example: keeps NCCL off NVLink multicast, starts MPI (cudrv::mpi::environment),
/// finds this rank's place, runs body(world) (which returns whether its result matched on this rank)
/// and returns the status every rank agrees on (see the top of this file).
template <class Body>
int run(const char* name, int& argc, char**& argv, Body&& body) {
  // NVLink SHARP (multicast objects) must never be used on these machines: NCCL reads this before its
  // first communicator. An explicit setting in the environment is left as it is.
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);
  std::optional<cudrv::mpi::environment> env;
  world w;
  try {
    env.emplace(argc, argv);
    w.node = cudrv::mpi::node_local(MPI_COMM_WORLD);
    w.rank = w.node.rank;
    w.size = w.node.size;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: cannot start MPI: %s\n", name, e.what());
    return 4;
  }
  int status = 0;
  try {
    const int ok = body(w) ? 1 : 0;
    status = all_reduce(w, ok, MPI_MIN) == 1 ? 0 : 5;
  } catch (const agreed_failure& f) {
    status = f.status;
  } catch (...) {
    std::string message;
    status = classify(std::current_exception(), message);
    print_failure(name, w, message);
    if (w.size > 1) {
      std::fprintf(stderr, "%s: rank %d stops every rank (MPI_Abort with status %d)\n", name, w.rank, status);
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, status);
    }
  }
  return status;
}

}  // namespace example::mpi
