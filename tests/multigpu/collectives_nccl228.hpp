// The collectives NCCL 2.28 added, checked against host-computed results like those of collectives.hpp,
// for the multi-GPU suites (test_nccl_mpi.cpp: one rank per process; test_nccl_init_all.cpp: every local
// GPU from one thread) and the one-rank GPU tier (tests/gpu/test_nccl.cpp):
//
//   - all_to_all; gather and scatter, out of place and in place, every root (out of place, the ranks
//     other than the root pass an empty buffer for odd roots and a poisoned full-size one for even roots,
//     which must stay poisoned); all_to_all_v with uneven counts, zero counts and offsets that leave
//     gaps and run backwards. These copy: any element type, compared bitwise, the 16-bit ones included
//     as bits (nccl::half_t, nccl::bfloat16_t).
//   - premul_sum (ncclRedOpCreatePreMulSum) with a scalar on the host or on the device, in all_reduce,
//     reduce and reduce_scatter, in place and out of place; a device scalar changed between two
//     collectives changes the result (it is read while the collective runs).
//   - group::simulate_end: estimates for a 1 MiB and a 64 MiB all_reduce, the larger one larger, and
//     nothing launched.
//
// Every destination is poisoned (every byte 0xA5) and longer than what the collective writes: the
// elements past each written block (and the gaps between blocks) are checked to still hold the poison.
#pragma once

#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>
#include <cudrv/nccl.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iomanip>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "collectives.hpp"

namespace cudrv::test::multigpu {

// --- element types as bits ----------------------------------------------------------------------

template <class T>
const char* element_name() {
  if constexpr (std::is_same_v<T, nccl::half_t>)
    return "half_t (bits)";
  else if constexpr (std::is_same_v<T, nccl::bfloat16_t>)
    return "bfloat16_t (bits)";
  else
    return type_name<T>();
}

/// @p n elements from @p seed: make_input's values for the arithmetic types and the CUDA 16-bit floats,
/// random bits for the others (nccl::half_t, nccl::bfloat16_t), which the copying collectives move as
/// they are.
template <class T>
std::vector<T> random_elements(std::size_t n, std::uint64_t seed) {
  if constexpr (std::is_arithmetic_v<T> || is_half_v<T>) {
    return make_input<T>(n, seed, values::general);
  } else {
    std::mt19937_64 gen(seed);
    std::vector<T> out(n);
    for (T& v : out) {
      unsigned char bytes[sizeof(T)];
      for (unsigned char& b : bytes) {
        b = static_cast<unsigned char>(gen());
      }
      std::memcpy(&v, bytes, sizeof(T));
    }
    return out;
  }
}

/// Every rank's elements for one call, rank r's from input_seed(seed, r, tag).
template <class T>
std::vector<std::vector<T>> every_rank_elements(int nranks, std::size_t n, std::uint64_t seed, std::uint64_t tag) {
  std::vector<std::vector<T>> all;
  for (int r = 0; r < nranks; ++r) {
    all.push_back(random_elements<T>(n, input_seed(seed, r, tag)));
  }
  return all;
}

/// An element whose every byte is the poison.
template <class T>
T poison_value() {
  T v;
  std::memset(static_cast<void*>(&v), poison_byte, sizeof(T));
  return v;
}

/// Empty when @p got and @p want are bitwise equal; otherwise how many elements differ and the first,
/// its bits in hex (for any element type).
template <class T>
std::string differs(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) {
    return "sizes differ: " + std::to_string(got.size()) + " and " + std::to_string(want.size());
  }
  std::size_t bad = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0 && bad++ == 0) {
      first = i;
    }
  }
  if (bad == 0) {
    return {};
  }
  auto hex = [](const T& v) {
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, &v, sizeof(T));
    std::ostringstream out;
    out << "0x" << std::hex << std::setfill('0');
    for (std::size_t b = sizeof(T); b-- > 0;) {
      out << std::setw(2) << static_cast<unsigned>(bytes[b]);
    }
    return out.str();
  };
  std::ostringstream out;
  out << bad << " of " << got.size() << " elements differ, the first at " << first << ": got " << hex(got[first])
      << ", expected " << hex(want[first]);
  const T p = poison_value<T>();
  if (std::memcmp(&got[first], &p, sizeof(T)) == 0) {
    out << " (still the poison: not written)";
  }
  return out.str();
}

/// Empty when the elements [from, from + count) of @p got still hold the poison.
template <class T>
std::string poisoned_range(const std::vector<T>& got, std::size_t from, std::size_t count) {
  const std::string w = written(part(got, from, count));
  return w.empty() ? w : "[" + std::to_string(from) + ", " + std::to_string(from + count) + "): " + w;
}

/// The elements of a device view, on the host (waits for the slot's stream).
template <class T>
std::vector<T> fetch(const rank_slot& slot, cudrv::device_span<const T> d) {
  std::vector<T> host(d.size());
  if (!host.empty()) {
    cudrv::copy(host, d, slot.stream);
  }
  slot.stream.synchronize();
  return host;
}

/// A poisoned buffer of @p total elements with @p host copied to [at, at + host.size()).
template <class T>
cudrv::device_buffer<T> poisoned_with(const rank_slot& slot, std::size_t total, std::size_t at,
                                      const std::vector<T>& host) {
  cudrv::device_buffer<T> buf = poisoned<T>(slot, total);
  if (!host.empty()) {
    cudrv::copy(buf.view().subspan(at, host.size()), host, slot.stream);
  }
  return buf;
}

/// Elements written past each block a collective writes: they must stay poisoned.
inline constexpr std::size_t tail = 37;

inline std::uint64_t csize(std::size_t v) { return static_cast<std::uint64_t>(v); }

// --- all_to_all, gather, scatter ----------------------------------------------------------------

/// ncclAlltoAll: block j of rank i's source lands in block i of rank j's destination.
template <class T>
void check_all_to_all(std::span<const rank_slot> slots, const call_context& c) {
  const int n = slots.front().comm.size();
  const std::size_t total = c.count * static_cast<std::size_t>(n);
  INFO("all_to_all of " << c.count << " elements per pair");
  const auto inputs = every_rank_elements<T>(n, total, c.seed, tag_of({20, c.count}));
  std::vector<cudrv::device_buffer<T>> send, recv;
  for (const rank_slot& s : slots) {
    send.push_back(upload(s, inputs[static_cast<std::size_t>(s.comm.rank())]));
    recv.push_back(poisoned<T>(s, total + tail));
  }
  launch(slots, [&](const rank_slot& s, std::size_t i) {
    s.comm.all_to_all(send[i], recv[i].view().subspan(0, total), s.stream);
  });
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const auto rank = static_cast<std::size_t>(slots[i].comm.rank());
    INFO("rank " << rank << " of " << n);
    std::vector<std::vector<T>> want;
    for (const auto& in : inputs) {
      want.push_back(part(in, rank * c.count, c.count));
    }
    const std::vector<T> got = download(slots[i], recv[i]);
    CHECK(differs(part(got, 0, total), concat(want)) == "");
    CHECK(poisoned_range(got, total, tail) == "");
    CHECK(differs(download(slots[i], send[i]), inputs[rank]) == "");  // the source is left alone
  }
}

/// ncclGather to every root, out of place and in place.
template <class T>
void check_gather(std::span<const rank_slot> slots, const call_context& c) {
  const int n = slots.front().comm.size();
  const std::size_t total = c.count * static_cast<std::size_t>(n);
  for (int root = 0; root < n; ++root) {
    for (bool in_place : {false, true}) {
      // Out of place, the destination is not used away from the root: odd roots get an empty one there.
      const bool empty_elsewhere = !in_place && root % 2 == 1;
      INFO("gather to root " << root << (in_place ? " in place" : " out of place")
                             << (empty_elsewhere ? ", empty destinations elsewhere" : ""));
      const auto inputs = every_rank_elements<T>(n, c.count, c.seed, tag_of({21, c.count, csize(root), in_place}));
      std::vector<cudrv::device_buffer<T>> send, recv;
      for (const rank_slot& s : slots) {
        const auto rank = static_cast<std::size_t>(s.comm.rank());
        if (in_place) {  // this rank's part at its place in the whole, the rest poisoned
          recv.push_back(poisoned_with(s, total + tail, rank * c.count, inputs[rank]));
        } else {
          send.push_back(upload(s, inputs[rank]));
          recv.push_back(poisoned<T>(s, total + tail));
        }
      }
      launch(slots, [&](const rank_slot& s, std::size_t i) {
        if (in_place) {
          s.comm.gather(recv[i].view().subspan(0, total), root, s.stream);
        } else if (empty_elsewhere && s.comm.rank() != root) {
          s.comm.gather(send[i], cudrv::device_span<T>{}, root, s.stream);
        } else {
          s.comm.gather(send[i], recv[i].view().subspan(0, total), root, s.stream);
        }
      });
      for (std::size_t i = 0; i < slots.size(); ++i) {
        const auto rank = static_cast<std::size_t>(slots[i].comm.rank());
        INFO("rank " << rank << " of " << n);
        const std::vector<T> got = download(slots[i], recv[i]);
        if (static_cast<int>(rank) == root) {
          CHECK(differs(part(got, 0, total), concat(inputs)) == "");
          CHECK(poisoned_range(got, total, tail) == "");
        } else if (in_place) {  // only this rank's part was there, and it is still all there is
          CHECK(poisoned_range(got, 0, rank * c.count) == "");
          CHECK(differs(part(got, rank * c.count, c.count), inputs[rank]) == "");
          CHECK(poisoned_range(got, (rank + 1) * c.count, total + tail - (rank + 1) * c.count) == "");
        } else {
          CHECK(poisoned_range(got, 0, got.size()) == "");  // the destination is the root's only
        }
        if (!in_place) {
          CHECK(differs(download(slots[i], send[i]), inputs[rank]) == "");
        }
      }
    }
  }
}

/// ncclScatter from every root, out of place and in place.
template <class T>
void check_scatter(std::span<const rank_slot> slots, const call_context& c) {
  const int n = slots.front().comm.size();
  const std::size_t total = c.count * static_cast<std::size_t>(n);
  for (int root = 0; root < n; ++root) {
    for (bool in_place : {false, true}) {
      // Out of place, the source is not used away from the root: odd roots get an empty one there.
      const bool empty_elsewhere = !in_place && root % 2 == 1;
      INFO("scatter from root " << root << (in_place ? " in place" : " out of place")
                                << (empty_elsewhere ? ", empty sources elsewhere" : ""));
      const auto inputs = every_rank_elements<T>(n, total, c.seed, tag_of({22, c.count, csize(root), in_place}));
      const std::vector<T>& whole = inputs[static_cast<std::size_t>(root)];
      std::vector<cudrv::device_buffer<T>> send, recv;
      for (const rank_slot& s : slots) {
        const bool is_root = s.comm.rank() == root;
        if (in_place) {  // the root's buffer holds every part; the others' are poisoned
          recv.push_back(is_root ? poisoned_with(s, total + tail, 0, whole) : poisoned<T>(s, total + tail));
        } else {
          // Every rank's source holds its own data; only the root's is read.
          send.push_back(upload(s, inputs[static_cast<std::size_t>(s.comm.rank())]));
          recv.push_back(poisoned<T>(s, c.count + tail));
        }
      }
      launch(slots, [&](const rank_slot& s, std::size_t i) {
        if (in_place) {
          s.comm.scatter(recv[i].view().subspan(0, total), root, s.stream);
        } else if (empty_elsewhere && s.comm.rank() != root) {
          s.comm.scatter(cudrv::device_span<const T>{}, recv[i].view().subspan(0, c.count), root, s.stream);
        } else {
          s.comm.scatter(send[i], recv[i].view().subspan(0, c.count), root, s.stream);
        }
      });
      for (std::size_t i = 0; i < slots.size(); ++i) {
        const auto rank = static_cast<std::size_t>(slots[i].comm.rank());
        INFO("rank " << rank << " of " << n);
        const std::vector<T> got = download(slots[i], recv[i]);
        const std::vector<T> mine = part(whole, rank * c.count, c.count);
        if (!in_place) {
          CHECK(differs(part(got, 0, c.count), mine) == "");
          CHECK(poisoned_range(got, c.count, tail) == "");
          CHECK(differs(download(slots[i], send[i]), inputs[rank]) == "");  // the source is left alone
        } else if (static_cast<int>(rank) == root) {
          CHECK(differs(part(got, 0, total), whole) == "");  // the root's buffer is left as it was
          CHECK(poisoned_range(got, total, tail) == "");
        } else {  // part rank() received the root's part rank(); nothing else was written
          CHECK(poisoned_range(got, 0, rank * c.count) == "");
          CHECK(differs(part(got, rank * c.count, c.count), mine) == "");
          CHECK(poisoned_range(got, (rank + 1) * c.count, total + tail - (rank + 1) * c.count) == "");
        }
      }
    }
  }
}

// --- all_to_all_v -------------------------------------------------------------------------------

/// Where the blocks of one rank lie in its source or destination: count and offset per peer, and the
/// buffer's length.
struct v_layout {
  std::vector<std::size_t> counts;
  std::vector<std::size_t> offsets;
  std::size_t total = 0;
};

/// The elements rank @p from sends to rank @p to: 0 to 3 units, zero for a quarter of the pairs
/// (never for rank 0 to itself, so that a one-rank communicator moves something).
inline std::size_t v_count(int from, int to, std::size_t unit) {
  return static_cast<std::size_t>((from + 2 * to + 1) % 4) * unit;
}

/// Rank @p from's source: the blocks in descending peer order (offsets run backwards), 3 unused
/// elements between blocks.
inline v_layout v_send_layout(int from, int n, std::size_t unit) {
  v_layout l{std::vector<std::size_t>(static_cast<std::size_t>(n)),
             std::vector<std::size_t>(static_cast<std::size_t>(n)), 0};
  std::size_t at = 0;
  for (int to = n - 1; to >= 0; --to) {
    l.counts[static_cast<std::size_t>(to)] = v_count(from, to, unit);
    l.offsets[static_cast<std::size_t>(to)] = at;
    at += v_count(from, to, unit) + 3;
  }
  l.total = at;
  return l;
}

/// Rank @p to's destination: 5 poisoned elements first, then the blocks in ascending peer order with 2
/// poisoned elements between them, and `tail` after the last.
inline v_layout v_recv_layout(int to, int n, std::size_t unit) {
  v_layout l{std::vector<std::size_t>(static_cast<std::size_t>(n)),
             std::vector<std::size_t>(static_cast<std::size_t>(n)), 0};
  std::size_t at = 5;
  for (int from = 0; from < n; ++from) {
    l.counts[static_cast<std::size_t>(from)] = v_count(from, to, unit);
    l.offsets[static_cast<std::size_t>(from)] = at;
    at += v_count(from, to, unit) + 2;
  }
  l.total = at + tail;
  return l;
}

/// all_to_all_v with uneven and zero counts and gaps: the destination holds each block at its offset
/// and the poison everywhere else.
template <class T>
void check_all_to_all_v(std::span<const rank_slot> slots, const call_context& c) {
  const int n = slots.front().comm.size();
  const std::size_t unit = c.count / 4 + 1;
  INFO("all_to_all_v, blocks of 0 to 3 x " << unit << " elements");
  std::vector<v_layout> send_layout, recv_layout;
  std::vector<std::vector<T>> inputs;
  for (int r = 0; r < n; ++r) {
    send_layout.push_back(v_send_layout(r, n, unit));
    recv_layout.push_back(v_recv_layout(r, n, unit));
    inputs.push_back(random_elements<T>(send_layout.back().total, input_seed(c.seed, r, tag_of({23, c.count}))));
  }
  std::vector<cudrv::device_buffer<T>> send, recv;
  for (const rank_slot& s : slots) {
    const auto rank = static_cast<std::size_t>(s.comm.rank());
    send.push_back(upload(s, inputs[rank]));
    recv.push_back(poisoned<T>(s, recv_layout[rank].total));
  }
  launch(slots, [&](const rank_slot& s, std::size_t i) {
    const auto rank = static_cast<std::size_t>(s.comm.rank());
    const v_layout& out = send_layout[rank];
    const v_layout& in = recv_layout[rank];
    s.comm.all_to_all_v(send[i], out.counts, out.offsets, recv[i], in.counts, in.offsets, s.stream);
  });
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const int rank = slots[i].comm.rank();
    const auto urank = static_cast<std::size_t>(rank);
    INFO("rank " << rank << " of " << n);
    std::vector<T> want(recv_layout[urank].total, poison_value<T>());
    for (int from = 0; from < n; ++from) {
      const auto ufrom = static_cast<std::size_t>(from);
      const std::size_t count = v_count(from, rank, unit);
      const std::size_t src = send_layout[ufrom].offsets[urank];
      const std::size_t dst = recv_layout[urank].offsets[ufrom];
      std::copy(inputs[ufrom].begin() + static_cast<std::ptrdiff_t>(src),
                inputs[ufrom].begin() + static_cast<std::ptrdiff_t>(src + count),
                want.begin() + static_cast<std::ptrdiff_t>(dst));
    }
    CHECK(differs(download(slots[i], recv[i]), want) == "");
    CHECK(differs(download(slots[i], send[i]), inputs[urank]) == "");
  }
}

/// Every copying collective NCCL 2.28 added, for T (any element type, compared bitwise).
template <class T>
void check_new_copy_collectives(std::span<const rank_slot> slots, std::uint64_t seed,
                                const std::vector<std::size_t>& counts = collective_counts()) {
  REQUIRE_FALSE(slots.empty());
  for (std::size_t count : counts) {
    INFO("element type " << element_name<T>() << ", " << count << " elements per rank, " << slots.front().comm.size()
                         << " ranks, seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays)");
    const call_context c{seed, count};
    check_all_to_all<T>(slots, c);
    check_gather<T>(slots, c);
    check_scatter<T>(slots, c);
    check_all_to_all_v<T>(slots, c);
  }
}

// --- premul_sum -----------------------------------------------------------------------------------

/// Rank r's scalar: 0.25 (r % 4 + 1), times -2 for the second variant; exact in every float type.
template <class T>
T premul_scalar(int rank, int variant) {
  return from_ld<T>(0.25L * static_cast<long double>(rank % 4 + 1) * (variant == 0 ? 1.0L : -2.0L));
}

/// sum over r of scalars[r] * inputs[r], with the slack of a sum of n products rounded in T.
template <class T>
expected premul_reference(const std::vector<std::vector<T>>& inputs, const std::vector<T>& scalars) {
  static_assert(is_real_v<T>, "the premultiplied-sum checks use float types");
  const std::size_t n = inputs.front().size();
  const auto nranks = static_cast<long double>(inputs.size());
  expected out{std::vector<long double>(n, 0.0L), std::vector<long double>(n, 0.0L)};
  for (std::size_t i = 0; i < n; ++i) {
    long double mag = 0.0L;
    for (std::size_t r = 0; r < inputs.size(); ++r) {
      const long double term = to_ld(scalars[r]) * to_ld(inputs[r][i]);
      out.value[i] += term;
      mag += std::fabs(term);
    }
    out.tolerance[i] = (nranks + 2) * epsilon<T>() * mag + tiniest<T>();
  }
  return out;
}

/// Where a premultiplied-sum operator's scalar lives.
enum class scalar_on { host, device };

/// The collectives a premul_sum is checked in.
enum class premul_call {
  all_reduce,
  all_reduce_in_place,
  reduce,
  reduce_in_place,
  reduce_scatter,
  reduce_scatter_in_place
};

inline const char* premul_call_name(premul_call k) {
  switch (k) {
    case premul_call::all_reduce: return "all_reduce";
    case premul_call::all_reduce_in_place: return "all_reduce in place";
    case premul_call::reduce: return "reduce to the last rank";
    case premul_call::reduce_in_place: return "reduce in place to rank 0";
    case premul_call::reduce_scatter: return "reduce_scatter";
    case premul_call::reduce_scatter_in_place: return "reduce_scatter in place";
  }
  return "?";
}

/// Each rank's operator with scalar premul_scalar(rank, variant), made outside any group; a device
/// scalar lives in @p scalars (one element per slot), which must outlive the operators' use.
template <class T>
std::vector<nccl::premul_sum<T>> make_premul_ops(std::span<const rank_slot> slots, scalar_on where, int variant,
                                                 std::vector<cudrv::device_buffer<T>>& scalars) {
  std::vector<nccl::premul_sum<T>> ops;
  scalars.clear();
  for (const rank_slot& s : slots) {
    const T a = premul_scalar<T>(s.comm.rank(), variant);
    if (where == scalar_on::host) {
      ops.emplace_back(s.comm, a);
    } else {
      scalars.push_back(upload(s, std::vector<T>{a}));
    }
  }
  if (where == scalar_on::device) {
    for (std::size_t i = 0; i < slots.size(); ++i) {
      ops.emplace_back(slots[i].comm, cudrv::device_span<const T>(scalars[i].view()));
    }
  }
  for (std::size_t i = 0; i < slots.size(); ++i) {
    CHECK(ops[i]);
    CHECK(ops[i].communicator_handle() == slots[i].comm.native_handle());
    CHECK(ops[i].native_handle() >= 5);  // past NCCL's built-in operators (ncclNumOps)
  }
  return ops;
}

/// One collective with a premultiplied sum, checked on the host.
template <class T>
void check_premul_call(std::span<const rank_slot> slots, const call_context& c, scalar_on where, premul_call k) {
  const int n = slots.front().comm.size();
  const auto un = static_cast<std::size_t>(n);
  const bool scatter = k == premul_call::reduce_scatter || k == premul_call::reduce_scatter_in_place;
  const int root = k == premul_call::reduce ? n - 1 : 0;
  const std::size_t len = scatter ? c.count * un : c.count;
  INFO("premul_sum with the scalar on the " << (where == scalar_on::host ? "host" : "device") << ", "
                                            << premul_call_name(k));
  const auto inputs =
      every_input<T>(n, len, c.seed, tag_of({24, c.count, std::uint64_t(where), std::uint64_t(k)}), values::general);
  std::vector<T> scalars;
  for (int r = 0; r < n; ++r) {
    scalars.push_back(premul_scalar<T>(r, 0));
  }
  const expected whole = premul_reference(inputs, scalars);
  std::vector<cudrv::device_buffer<T>> device_scalars;
  const std::vector<nccl::premul_sum<T>> ops = make_premul_ops(slots, where, 0, device_scalars);
  std::vector<cudrv::device_buffer<T>> send, recv;
  for (const rank_slot& s : slots) {
    send.push_back(upload(s, inputs[static_cast<std::size_t>(s.comm.rank())]));
    recv.push_back(poisoned<T>(s, (scatter ? c.count : len) + tail));
  }
  launch(slots, [&](const rank_slot& s, std::size_t i) {
    auto out = recv[i].view().subspan(0, scatter ? c.count : len);
    switch (k) {
      case premul_call::all_reduce: s.comm.all_reduce(send[i], out, ops[i], s.stream); break;
      case premul_call::all_reduce_in_place: s.comm.all_reduce(send[i], ops[i], s.stream); break;
      case premul_call::reduce: s.comm.reduce(send[i], out, ops[i], root, s.stream); break;
      case premul_call::reduce_in_place: s.comm.reduce(send[i], ops[i], root, s.stream); break;
      case premul_call::reduce_scatter: s.comm.reduce_scatter(send[i], out, ops[i], s.stream); break;
      case premul_call::reduce_scatter_in_place: s.comm.reduce_scatter(send[i], ops[i], s.stream); break;
    }
  });
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const int rank = slots[i].comm.rank();
    const auto urank = static_cast<std::size_t>(rank);
    INFO("rank " << rank << " of " << n);
    const std::vector<T> got = download(slots[i], recv[i]);
    const std::vector<T> in = download(slots[i], send[i]);
    switch (k) {
      case premul_call::all_reduce:
        CHECK(mismatch(part(got, 0, len), whole) == "");
        CHECK(poisoned_range(got, len, tail) == "");
        break;
      case premul_call::all_reduce_in_place: CHECK(mismatch(in, whole) == ""); break;
      case premul_call::reduce:
        if (rank == root) {
          CHECK(mismatch(part(got, 0, len), whole) == "");
          CHECK(poisoned_range(got, len, tail) == "");
        } else {
          CHECK(poisoned_range(got, 0, got.size()) == "");
        }
        break;
      case premul_call::reduce_in_place:
        if (rank == root) {
          CHECK(mismatch(in, whole) == "");
        }
        break;
      case premul_call::reduce_scatter:
        CHECK(mismatch(part(got, 0, c.count), slice(whole, urank * c.count, c.count)) == "");
        CHECK(poisoned_range(got, c.count, tail) == "");
        break;
      case premul_call::reduce_scatter_in_place:
        CHECK(mismatch(part(in, urank * c.count, c.count), slice(whole, urank * c.count, c.count)) == "");
        break;
    }
  }
}

/// A device scalar is read while each collective runs: the same operator, its scalar overwritten on
/// the stream between two all_reduces, gives sum a_r x_r and then sum b_r x_r.
template <class T>
void check_premul_device_scalar_changes(std::span<const rank_slot> slots, const call_context& c) {
  const int n = slots.front().comm.size();
  INFO("premul_sum with a device scalar changed between two all_reduces");
  const auto inputs = every_input<T>(n, c.count, c.seed, tag_of({25, c.count}), values::general);
  std::vector<T> first, second;
  for (int r = 0; r < n; ++r) {
    first.push_back(premul_scalar<T>(r, 0));
    second.push_back(premul_scalar<T>(r, 1));
  }
  std::vector<cudrv::device_buffer<T>> device_scalars;
  const std::vector<nccl::premul_sum<T>> ops = make_premul_ops(slots, scalar_on::device, 0, device_scalars);
  std::vector<cudrv::device_buffer<T>> send, out1, out2;
  for (const rank_slot& s : slots) {
    send.push_back(upload(s, inputs[static_cast<std::size_t>(s.comm.rank())]));
    out1.push_back(poisoned<T>(s, c.count));
    out2.push_back(poisoned<T>(s, c.count));
  }
  launch(slots, [&](const rank_slot& s, std::size_t i) { s.comm.all_reduce(send[i], out1[i], ops[i], s.stream); });
  for (std::size_t i = 0; i < slots.size(); ++i) {  // ordered after the first all_reduce on the same stream
    cudrv::copy(device_scalars[i], std::vector<T>{second[static_cast<std::size_t>(slots[i].comm.rank())]},
                slots[i].stream);
  }
  launch(slots, [&](const rank_slot& s, std::size_t i) { s.comm.all_reduce(send[i], out2[i], ops[i], s.stream); });
  for (std::size_t i = 0; i < slots.size(); ++i) {
    INFO("rank " << slots[i].comm.rank() << " of " << n);
    const std::vector<T> got1 = download(slots[i], out1[i]);
    const std::vector<T> got2 = download(slots[i], out2[i]);
    CHECK(mismatch(got1, premul_reference(inputs, first)) == "");
    CHECK(mismatch(got2, premul_reference(inputs, second)) == "");
    CHECK(differs(got1, got2) != "");  // the second scalar changed the result
  }
}

/// Every premultiplied-sum check for T (a float type). One rank: counts up to 2^18 only (see
/// test_nccl.cpp: NCCL 2.28's one-rank PreMulSum path, which ncclAvg also takes, leaves the elements
/// past the last multiple of 2^18 unwritten out of place).
template <class T>
void check_premul_sum(std::span<const rank_slot> slots, std::uint64_t seed,
                      const std::vector<std::size_t>& counts = collective_counts()) {
  REQUIRE_FALSE(slots.empty());
  for (std::size_t count : counts) {
    if (slots.front().comm.size() == 1 && count > (std::size_t{1} << 18)) {
      continue;
    }
    INFO("element type " << type_name<T>() << ", " << count << " elements per rank, " << slots.front().comm.size()
                         << " ranks, seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays)");
    const call_context c{seed, count};
    for (scalar_on where : {scalar_on::host, scalar_on::device}) {
      for (premul_call k :
           {premul_call::all_reduce, premul_call::all_reduce_in_place, premul_call::reduce,
            premul_call::reduce_in_place, premul_call::reduce_scatter, premul_call::reduce_scatter_in_place}) {
        check_premul_call<T>(slots, c, where, k);
      }
    }
    check_premul_device_scalar_changes<T>(slots, c);
  }
}

// --- group::simulate_end ---------------------------------------------------------------------------

/// A group of one all_reduce per slot, ended with simulate_end: NCCL's estimate, nothing launched.
inline float simulate_all_reduce(std::span<const rank_slot> slots, std::vector<cudrv::device_buffer<float>>& send,
                                 std::vector<cudrv::device_buffer<float>>& recv) {
  nccl::group g;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    slots[i].comm.all_reduce(send[i], recv[i], nccl::reduction::sum, slots[i].stream);
  }
  const float estimate = g.simulate_end();
  CHECK_FALSE(g.is_open());
  return estimate;
}

/// simulate_end for a 1 MiB and a 64 MiB all_reduce (needs 2 ranks or more: NCCL runs a one-rank
/// collective at once, group or not): both estimates positive, the larger one larger, the destinations
/// still poisoned; then a real all_reduce on the same buffers is right.
inline void check_simulate_end(std::span<const rank_slot> slots, std::uint64_t seed) {
  const int n = slots.front().comm.size();
  constexpr std::size_t small = (std::size_t{1} << 20) / sizeof(float);
  constexpr std::size_t large = (std::size_t{64} << 20) / sizeof(float);
  const auto inputs = every_input<float>(n, small, seed, tag_of({26}), values::general);
  std::vector<cudrv::device_buffer<float>> send_small, recv_small, send_large, recv_large;
  for (const rank_slot& s : slots) {
    send_small.push_back(upload(s, inputs[static_cast<std::size_t>(s.comm.rank())]));
    recv_small.push_back(poisoned<float>(s, small));
    send_large.push_back(poisoned<float>(s, large));
    recv_large.push_back(poisoned<float>(s, large));
    s.stream.synchronize();
  }
  const float t_small = simulate_all_reduce(slots, send_small, recv_small);
  const float t_large = simulate_all_reduce(slots, send_large, recv_large);
  INFO("estimates: " << t_small << " us for 1 MiB, " << t_large << " us for 64 MiB, " << n << " ranks");
  CHECK(t_small > 0.0f);
  CHECK(t_large > t_small);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    INFO("rank " << slots[i].comm.rank() << " of " << n);
    slots[i].comm.wait_ready();
    CHECK(written(download(slots[i], recv_small[i])) == "");  // nothing was launched
    CHECK(written(download(slots[i], recv_large[i])) == "");
  }
  launch(slots, [&](const rank_slot& s, std::size_t i) {
    s.comm.all_reduce(send_small[i], recv_small[i], nccl::reduction::sum, s.stream);
  });
  const expected want = reference(inputs, nccl::reduction::sum);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    INFO("rank " << slots[i].comm.rank() << " of " << n << ", the all_reduce launched after the simulations");
    CHECK(mismatch(download(slots[i], recv_small[i]), want) == "");
  }
}

// --- nccl::buffer and windows ---------------------------------------------------------------------

/// Whether NCCL must hand back a window: NCCL answers a registration with success and no window where
/// it has no symmetric memory (GPUs without peer mappings, NCCL_P2P_DISABLE=1 as in the socket-transport
/// runs, and possibly a one-rank communicator); required on the GPU machines' NVLink runs otherwise.
/// CUDRV_TEST_NCCL_WINDOWS=0 or 1 overrides.
inline bool windows_required(int nranks) {
  if (const char* force = std::getenv("CUDRV_TEST_NCCL_WINDOWS")) {
    return std::string(force) == "1";
  }
  const char* p2p_off = std::getenv("NCCL_P2P_DISABLE");
  return nranks > 1 && (p2p_off == nullptr || std::string(p2p_off) != "1");
}

/// Registers an nccl::buffer of every slot as a symmetric window (collective: @p at_once(n, f) must run
/// f(i) for every slot at the same time), then all_reduces (sum) through the windows and through plain
/// device_buffers holding the same inputs: both equal the host reference, and each other bitwise for
/// integers. Then deregisters (collectively too) and checks that the memory still works unregistered.
template <class T, class AtOnce>
void check_window_all_reduce(std::span<const rank_slot> slots, std::uint64_t seed, std::size_t count,
                             AtOnce&& at_once) {
  const int n = slots.front().comm.size();
  INFO("all_reduce of " << count << " elements of " << type_name<T>() << " through symmetric windows, " << n
                        << " ranks, seed " << seed);
  std::vector<nccl::buffer<T>> memory;
  for (const rank_slot& s : slots) {
    memory.emplace_back(s.dev, count);
  }
  std::vector<nccl::window> windows(slots.size());
  at_once(slots.size(), [&](std::size_t i) { windows[i] = nccl::window(slots[i].comm, memory[i]); });
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (windows_required(n)) {
      CHECK(windows[i]);
      CHECK(windows[i].native_handle() != nullptr);
      CHECK(windows[i].communicator_handle() == slots[i].comm.native_handle());
    } else if (!windows[i]) {
      WARN("NOTE: NCCL gave no window (symmetric memory unavailable with NCCL_P2P_DISABLE=1 or on one rank); "
           "the all_reduce results are still checked");
    }
  }
  const auto inputs = every_input<T>(n, count, seed, tag_of({27, count}), values::general);
  const expected want = reference(inputs, nccl::reduction::sum);
  std::vector<cudrv::device_buffer<T>> plain;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const std::vector<T>& mine = inputs[static_cast<std::size_t>(slots[i].comm.rank())];
    plain.push_back(upload(slots[i], mine));
    cudrv::copy(memory[i].view(), mine, slots[i].stream);
  }
  launch(slots, [&](const rank_slot& s, std::size_t i) {
    s.comm.all_reduce(memory[i], nccl::reduction::sum, s.stream);
    s.comm.all_reduce(plain[i], nccl::reduction::sum, s.stream);
  });
  for (std::size_t i = 0; i < slots.size(); ++i) {
    INFO("rank " << slots[i].comm.rank() << " of " << n);
    const std::vector<T> through_window = fetch<T>(slots[i], std::as_const(memory[i]).view());
    const std::vector<T> through_plain = download(slots[i], plain[i]);
    CHECK(mismatch(through_window, want) == "");
    CHECK(mismatch(through_plain, want) == "");
    if constexpr (!is_real_v<T>) {
      CHECK(differs(through_window, through_plain) == "");
    }
  }
  at_once(slots.size(), [&](std::size_t i) { windows[i].reset(); });
  for (std::size_t i = 0; i < slots.size(); ++i) {
    CHECK_FALSE(windows[i]);
    cudrv::copy(memory[i].view(), inputs[static_cast<std::size_t>(slots[i].comm.rank())], slots[i].stream);
  }
  launch(slots,
         [&](const rank_slot& s, std::size_t i) { s.comm.all_reduce(memory[i], nccl::reduction::sum, s.stream); });
  for (std::size_t i = 0; i < slots.size(); ++i) {
    INFO("rank " << slots[i].comm.rank() << " of " << n << ", after deregistration");
    CHECK(mismatch(fetch<T>(slots[i], std::as_const(memory[i]).view()), want) == "");
  }
}

/// Runs f(0) for the one slot of this process (the MPI suite: the other ranks run it in their process).
struct this_rank_only {
  template <class F>
  void operator()(std::size_t n, F&& f) const {
    REQUIRE(n == 1);
    f(std::size_t{0});
  }
};

// --- helpers for calls every rank of this process must make at once ---------------------------------

/// Runs f(i) for i in [0, n) on n threads at once (collective NCCL calls of several ranks driven by
/// one process: shrink, window registration); rethrows the first exception once all have joined.
/// Catch's assertions are not thread-safe: f records, the caller checks.
template <class F>
void on_threads(std::size_t n, F&& f) {
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        f(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  for (const std::exception_ptr& e : errors) {
    if (e) {
      std::rethrow_exception(e);
    }
  }
}

/// on_threads as a callable, for check_window_all_reduce in one process over several ranks.
struct every_rank_on_its_thread {
  template <class F>
  void operator()(std::size_t n, F&& f) const {
    on_threads(n, std::forward<F>(f));
  }
};

}  // namespace cudrv::test::multigpu
