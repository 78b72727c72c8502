// Every NCCL collective checked against host-computed results, for the multi-GPU suites: over MPI
// (one rank per process, tests/multigpu/test_nccl_mpi.cpp) and in one process over every local GPU
// (ncclCommInitAll, tests/multigpu/test_nccl_init_all.cpp).
//
// A test hands check_every_collective<T> the ranks this process drives (a rank_slot each: the
// communicator, its device and a stream). Every call of a collective is made for each of them inside
// one cudrv::nccl::group, then every stream is waited for; so the same code runs one rank per process
// or all ranks from one thread.
//
// Inputs are random, made from (seed, global rank, tag) alone, so every process regenerates every
// rank's inputs and computes the expected results on the host. Destinations are poisoned (every byte
// 0xA5, cuMemsetD8) before each collective: a destination NCCL leaves unwritten does not pass by
// chance, and what must stay unwritten (a reduce's destination on the other ranks) is checked to
// still hold the poison. Copies (broadcast, all_gather, send/recv) are compared bitwise; reductions
// with a tolerance of the type: exact for the integers (modular arithmetic, as the GPU does), for
// max and min, and within (n + 1) rounding errors of the element type for the float types' sums,
// products and averages (NCCL reduces in its own order, and in the element type).
#pragma once

#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudrv/cudrv.hpp>
#include <cudrv/nccl.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace cudrv::test::multigpu {

namespace nccl = cudrv::nccl;

/// One rank driven by this process.
struct rank_slot {
  nccl::communicator_ref comm;
  cudrv::device dev;
  cudrv::stream_ref stream;
};

// --- element types ------------------------------------------------------------------------------

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <class T>
inline constexpr bool is_real_v = std::is_floating_point_v<T> || is_half_v<T>;

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>)
    return "float";
  else if constexpr (std::is_same_v<T, double>)
    return "double";
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return "int32";
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return "int64";
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return "uint8";
  else if constexpr (std::is_same_v<T, __half>)
    return "half";
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return "bfloat16";
  else
    return "?";
}

template <class T>
long double to_ld(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return static_cast<long double>(__half2float(v));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return static_cast<long double>(__bfloat162float(v));
  } else {
    return static_cast<long double>(v);
  }
}

template <class T>
T from_ld(long double v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

/// The machine epsilon of a float type (the distance from 1 to the next value).
template <class T>
long double epsilon() {
  if constexpr (std::is_same_v<T, __half>)
    return std::ldexp(1.0L, -10);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return std::ldexp(1.0L, -7);
  else
    return static_cast<long double>(std::numeric_limits<T>::epsilon());
}

/// The smallest positive (subnormal) value of a float type: the absolute slack of a comparison.
template <class T>
long double tiniest() {
  if constexpr (std::is_same_v<T, __half>)
    return std::ldexp(1.0L, -24);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return std::ldexp(1.0L, -133);
  else
    return static_cast<long double>(std::numeric_limits<T>::denorm_min());
}

inline const char* op_name(nccl::reduction op) {
  switch (op) {
    case nccl::reduction::sum: return "sum";
    case nccl::reduction::prod: return "prod";
    case nccl::reduction::max: return "max";
    case nccl::reduction::min: return "min";
    case nccl::reduction::avg: return "avg";
  }
  return "?";
}

/// NCCL's built-in reductions; every one applies to every element type.
inline constexpr nccl::reduction all_reductions[] = {nccl::reduction::sum, nccl::reduction::prod, nccl::reduction::max,
                                                     nccl::reduction::min, nccl::reduction::avg};

// --- inputs -------------------------------------------------------------------------------------

inline std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// The seed of one rank's input to one collective call: the same in every process.
inline std::uint64_t input_seed(std::uint64_t seed, int rank, std::uint64_t tag) {
  return splitmix(splitmix(seed ^ splitmix(tag)) + static_cast<std::uint64_t>(rank) + 1);
}

/// A tag from small integers (collective, size, operation, root, in place...).
inline std::uint64_t tag_of(std::initializer_list<std::uint64_t> parts) {
  std::uint64_t t = 0x5eed;
  for (std::uint64_t p : parts) {
    t = splitmix(t ^ p);
  }
  return t;
}

/// What the values are for: sums and the rest (small, so no integer sum overflows and float sums
/// stay well inside the type), or products (magnitudes near 1, so a product of many stays finite).
enum class values { general, product };

inline values values_for(nccl::reduction op) { return op == nccl::reduction::prod ? values::product : values::general; }

/// @p n random elements of T from @p seed: reals in [-4, 4) (or with magnitudes in [0.5, 2) for
/// products) rounded to T; integers in [-1000, 1000] ([-3, 3]), uint8 in [0, 31] ([0, 3]).
template <class T>
std::vector<T> make_input(std::size_t n, std::uint64_t seed, values kind) {
  std::mt19937_64 gen(seed);
  std::vector<T> out(n);
  if constexpr (is_real_v<T>) {
    std::uniform_real_distribution<double> general(-4.0, 4.0);
    std::uniform_real_distribution<double> magnitude(0.5, 2.0);
    for (auto& v : out) {
      if (kind == values::general) {
        v = from_ld<T>(general(gen));
      } else {
        const double m = magnitude(gen);
        v = from_ld<T>((gen() & 1) != 0 ? -m : m);
      }
    }
  } else {
    const bool small = kind == values::product;
    const long long lo = std::is_unsigned_v<T> ? 0 : (small ? -3 : -1000);
    const long long hi = std::is_unsigned_v<T> ? (small ? 3 : 31) : (small ? 3 : 1000);
    std::uniform_int_distribution<long long> dist(lo, hi);
    for (auto& v : out) {
      v = static_cast<T>(dist(gen));
    }
  }
  return out;
}

/// Every rank's input of one collective call, rank r's made from input_seed(seed, r, tag).
template <class T>
std::vector<std::vector<T>> every_input(int nranks, std::size_t n, std::uint64_t seed, std::uint64_t tag, values kind) {
  std::vector<std::vector<T>> all;
  all.reserve(static_cast<std::size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    all.push_back(make_input<T>(n, input_seed(seed, r, tag), kind));
  }
  return all;
}

// --- expected results ---------------------------------------------------------------------------

/// Expected values with the slack allowed for each.
struct expected {
  std::vector<long double> value;
  std::vector<long double> tolerance;
};

/// The elementwise reduction of every rank's input, as NCCL should compute it.
template <class T>
expected reference(const std::vector<std::vector<T>>& inputs, nccl::reduction op) {
  const std::size_t n = inputs.front().size();
  const auto nranks = static_cast<long double>(inputs.size());
  expected out{std::vector<long double>(n), std::vector<long double>(n, 0.0L)};
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (is_real_v<T>) {
      long double acc = to_ld(inputs[0][i]);
      long double mag = std::fabs(acc);
      for (std::size_t r = 1; r < inputs.size(); ++r) {
        const long double x = to_ld(inputs[r][i]);
        switch (op) {
          case nccl::reduction::sum:
          case nccl::reduction::avg:
            acc += x;
            mag += std::fabs(x);
            break;
          case nccl::reduction::prod:
            acc *= x;
            mag *= std::fabs(x);
            break;
          case nccl::reduction::max: acc = std::max(acc, x); break;
          case nccl::reduction::min: acc = std::min(acc, x); break;
        }
      }
      const long double eps = epsilon<T>();
      switch (op) {
        case nccl::reduction::sum:
        case nccl::reduction::prod:
          out.value[i] = acc;
          out.tolerance[i] = (nranks + 1) * eps * mag + tiniest<T>();
          break;
        case nccl::reduction::avg:  // NCCL multiplies by 1/n (rounded), then sums
          out.value[i] = acc / nranks;
          out.tolerance[i] = (nranks + 2) * eps * mag / nranks + tiniest<T>();
          break;
        case nccl::reduction::max:
        case nccl::reduction::min:
          out.value[i] = acc;  // one of the inputs: exact
          break;
      }
    } else {
      // Integers: modular arithmetic in the type's width, as on the GPU.
      using U = std::make_unsigned_t<T>;
      std::uint64_t acc = static_cast<std::uint64_t>(static_cast<U>(inputs[0][i]));
      T best = inputs[0][i];
      for (std::size_t r = 1; r < inputs.size(); ++r) {
        const T x = inputs[r][i];
        const auto ux = static_cast<std::uint64_t>(static_cast<U>(x));
        switch (op) {
          case nccl::reduction::sum:
          case nccl::reduction::avg: acc += ux; break;
          case nccl::reduction::prod: acc *= ux; break;
          case nccl::reduction::max: best = std::max(best, x); break;
          case nccl::reduction::min: best = std::min(best, x); break;
        }
      }
      const T wrapped = static_cast<T>(static_cast<U>(acc));
      switch (op) {
        case nccl::reduction::sum:
        case nccl::reduction::prod: out.value[i] = static_cast<long double>(wrapped); break;
        case nccl::reduction::max:
        case nccl::reduction::min: out.value[i] = static_cast<long double>(best); break;
        case nccl::reduction::avg:
          // NCCL divides the sum by n with an integer division (it truncates); either rounding of
          // the exact quotient passes: |got - sum / n| <= (n - 1) / n.
          out.value[i] = static_cast<long double>(wrapped) / nranks;
          out.tolerance[i] = (nranks - 1) / nranks;
          break;
      }
    }
  }
  return out;
}

/// Elements [offset, offset + count) of @p e.
inline expected slice(const expected& e, std::size_t offset, std::size_t count) {
  return {std::vector<long double>(e.value.begin() + static_cast<std::ptrdiff_t>(offset),
                                   e.value.begin() + static_cast<std::ptrdiff_t>(offset + count)),
          std::vector<long double>(e.tolerance.begin() + static_cast<std::ptrdiff_t>(offset),
                                   e.tolerance.begin() + static_cast<std::ptrdiff_t>(offset + count))};
}

// --- comparisons --------------------------------------------------------------------------------

/// Empty when every element of @p got lies within its tolerance of the expected value; otherwise
/// how many do not and the first of them.
template <class T>
std::string mismatch(const std::vector<T>& got, const expected& want) {
  if (got.size() != want.value.size()) {
    return "sizes differ: " + std::to_string(got.size()) + " and " + std::to_string(want.value.size());
  }
  std::size_t bad = 0;
  std::ostringstream first;
  first.precision(10);
  for (std::size_t i = 0; i < got.size(); ++i) {
    const long double g = to_ld(got[i]);
    if (!(std::fabs(g - want.value[i]) <= want.tolerance[i])) {
      if (bad++ == 0) {
        first << "the first at " << i << ": got " << g << ", expected " << want.value[i] << " +- " << want.tolerance[i];
      }
    }
  }
  if (bad == 0) {
    return {};
  }
  return std::to_string(bad) + " of " + std::to_string(got.size()) + " elements wrong, " + first.str();
}

/// Empty when @p got and @p want are bitwise equal; otherwise what differs.
template <class T>
std::string mismatch_bits(const std::vector<T>& got, const std::vector<T>& want) {
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
  std::ostringstream out;
  out << bad << " of " << got.size() << " elements differ, the first at " << first << ": got " << to_ld(got[first])
      << ", expected " << to_ld(want[first]);
  return out.str();
}

inline constexpr std::uint8_t poison_byte = 0xA5;

/// Empty when every byte of @p got is still the poison; otherwise how many elements were written.
template <class T>
std::string written(const std::vector<T>& got) {
  std::size_t bad = 0;
  for (const T& v : got) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(&v);
    if (std::any_of(bytes, bytes + sizeof(T), [](unsigned char b) { return b != poison_byte; })) {
      ++bad;
    }
  }
  return bad == 0 ? std::string()
                  : std::to_string(bad) + " of " + std::to_string(got.size()) +
                        " elements were written where nothing should have been";
}

/// The elements [offset, offset + count) of @p v.
template <class T>
std::vector<T> part(const std::vector<T>& v, std::size_t offset, std::size_t count) {
  return std::vector<T>(v.begin() + static_cast<std::ptrdiff_t>(offset),
                        v.begin() + static_cast<std::ptrdiff_t>(offset + count));
}

/// Every rank's vector, one after the other.
template <class T>
std::vector<T> concat(const std::vector<std::vector<T>>& parts) {
  std::vector<T> out;
  for (const auto& p : parts) {
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

// --- device buffers -----------------------------------------------------------------------------

template <class T>
void poison(cudrv::device_span<T> d, cudrv::stream_ref s) {
  cudrv::fill(cudrv::device_span<std::uint8_t>(d.data(), d.size() * sizeof(T)), poison_byte, s);  // cuMemsetD8Async
}

/// A buffer of @p n elements on the slot's device, every byte poisoned.
template <class T>
cudrv::device_buffer<T> poisoned(const rank_slot& slot, std::size_t n) {
  cudrv::device_buffer<T> buf(slot.dev, n);
  poison(buf.view(), slot.stream);
  return buf;
}

/// A buffer holding @p host, poisoned first (so a short copy would show).
template <class T>
cudrv::device_buffer<T> upload(const rank_slot& slot, const std::vector<T>& host) {
  cudrv::device_buffer<T> buf = poisoned<T>(slot, host.size());
  cudrv::copy(buf, host, slot.stream);
  return buf;
}

template <class T>
std::vector<T> download(const rank_slot& slot, const cudrv::device_buffer<T>& buf) {
  std::vector<T> host(buf.size());
  cudrv::copy(host, buf, slot.stream);
  slot.stream.synchronize();
  return host;
}

/// Makes the call @p f(slot, index) for every slot inside one NCCL group, ends the group, and waits
/// for every communicator (a non-blocking one may still be launching) and stream.
template <class F>
void launch(std::span<const rank_slot> slots, F&& f) {
  {
    nccl::group g;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      f(slots[i], i);
    }
    g.end();
  }
  for (const rank_slot& slot : slots) {
    slot.comm.wait_ready();
    slot.stream.synchronize();
  }
}

// --- the collectives ----------------------------------------------------------------------------

/// What every check is told: the seed, the element count and the collectives' family tag.
struct call_context {
  std::uint64_t seed;
  std::size_t count;
};

template <class T>
void check_all_reduce(std::span<const rank_slot> slots, const call_context& c) {
  const int n = slots.front().comm.size();
  for (nccl::reduction op : all_reductions) {
    for (bool in_place : {false, true}) {
      INFO("all_reduce " << op_name(op) << (in_place ? " in place" : " out of place"));
      const auto inputs =
          every_input<T>(n, c.count, c.seed, tag_of({1, c.count, std::uint64_t(op), in_place}), values_for(op));
      const expected want = reference(inputs, op);
      std::vector<cudrv::device_buffer<T>> send, recv;
      for (const rank_slot& s : slots) {
        send.push_back(upload(s, inputs[static_cast<std::size_t>(s.comm.rank())]));
        if (!in_place) {
          recv.push_back(poisoned<T>(s, c.count));
        }
      }
      launch(slots, [&](const rank_slot& s, std::size_t i) {
        if (in_place) {
          s.comm.all_reduce(send[i], op, s.stream);
        } else {
          s.comm.all_reduce(send[i], recv[i], op, s.stream);
        }
      });
      for (std::size_t i = 0; i < slots.size(); ++i) {
        const int rank = slots[i].comm.rank();
        INFO("rank " << rank << " of " << n);
        CHECK(mismatch(download(slots[i], in_place ? send[i] : recv[i]), want) == "");
        if (!in_place) {  // the source is left alone
          CHECK(mismatch_bits(download(slots[i], send[i]), inputs[static_cast<std::size_t>(rank)]) == "");
        }
      }
    }
  }
}

template <class T>
void check_broadcast(std::span<const rank_slot> slots, const call_context& c) {
  const int n = slots.front().comm.size();
  for (int root = 0; root < n; ++root) {
    for (bool in_place : {false, true}) {
      INFO("broadcast from root " << root << (in_place ? " in place" : " out of place"));
      const auto inputs =
          every_input<T>(n, c.count, c.seed, tag_of({2, c.count, std::uint64_t(root), in_place}), values::general);
      std::vector<cudrv::device_buffer<T>> send, recv;
      for (const rank_slot& s : slots) {
        send.push_back(upload(s, inputs[static_cast<std::size_t>(s.comm.rank())]));  // read on the root only
        if (!in_place) {
          recv.push_back(poisoned<T>(s, c.count));
        }
      }
      launch(slots, [&](const rank_slot& s, std::size_t i) {
        if (in_place) {
          s.comm.broadcast(send[i], root, s.stream);
        } else {
          s.comm.broadcast(send[i], recv[i], root, s.stream);
        }
      });
      for (std::size_t i = 0; i < slots.size(); ++i) {
        INFO("rank " << slots[i].comm.rank() << " of " << n);
        CHECK(mismatch_bits(download(slots[i], in_place ? send[i] : recv[i]), inputs[static_cast<std::size_t>(root)]) ==
              "");
      }
    }
  }
}

template <class T>
void check_reduce(std::span<const rank_slot> slots, const call_context& c) {
  const int n = slots.front().comm.size();
  for (int root = 0; root < n; ++root) {
    // Every root with sum; the last root with every operation.
    std::vector<nccl::reduction> ops{nccl::reduction::sum};
    if (root == n - 1) {
      ops.assign(std::begin(all_reductions), std::end(all_reductions));
    }
    for (nccl::reduction op : ops) {
      for (bool in_place : {false, true}) {
        INFO("reduce " << op_name(op) << " to root " << root << (in_place ? " in place" : " out of place"));
        const auto inputs =
            every_input<T>(n, c.count, c.seed, tag_of({3, c.count, std::uint64_t(op), std::uint64_t(root), in_place}),
                           values_for(op));
        const expected want = reference(inputs, op);
        std::vector<cudrv::device_buffer<T>> send, recv;
        for (const rank_slot& s : slots) {
          send.push_back(upload(s, inputs[static_cast<std::size_t>(s.comm.rank())]));
          if (!in_place) {
            recv.push_back(poisoned<T>(s, c.count));
          }
        }
        launch(slots, [&](const rank_slot& s, std::size_t i) {
          if (in_place) {
            s.comm.reduce(send[i], op, root, s.stream);
          } else {
            s.comm.reduce(send[i], recv[i], op, root, s.stream);
          }
        });
        for (std::size_t i = 0; i < slots.size(); ++i) {
          const int rank = slots[i].comm.rank();
          INFO("rank " << rank << " of " << n);
          if (rank == root) {
            CHECK(mismatch(download(slots[i], in_place ? send[i] : recv[i]), want) == "");
          } else if (!in_place) {
            CHECK(written(download(slots[i], recv[i])) == "");  // the destination is the root's only
          }
        }
      }
    }
  }
}

template <class T>
void check_all_gather(std::span<const rank_slot> slots, const call_context& c) {
  const int n = slots.front().comm.size();
  const std::size_t total = c.count * static_cast<std::size_t>(n);
  for (bool in_place : {false, true}) {
    INFO("all_gather" << (in_place ? " in place" : " out of place"));
    const auto inputs = every_input<T>(n, c.count, c.seed, tag_of({4, c.count, in_place}), values::general);
    const std::vector<T> want = concat(inputs);
    std::vector<cudrv::device_buffer<T>> send, recv;
    for (const rank_slot& s : slots) {
      const auto rank = static_cast<std::size_t>(s.comm.rank());
      if (in_place) {  // this rank's part at its place in the whole, the rest poisoned
        cudrv::device_buffer<T> whole = poisoned<T>(s, total);
        cudrv::copy(whole.view().subspan(rank * c.count, c.count), inputs[rank], s.stream);
        recv.push_back(std::move(whole));
      } else {
        send.push_back(upload(s, inputs[rank]));
        recv.push_back(poisoned<T>(s, total));
      }
    }
    launch(slots, [&](const rank_slot& s, std::size_t i) {
      if (in_place) {
        s.comm.all_gather(recv[i], s.stream);
      } else {
        s.comm.all_gather(send[i], recv[i], s.stream);
      }
    });
    for (std::size_t i = 0; i < slots.size(); ++i) {
      INFO("rank " << slots[i].comm.rank() << " of " << n);
      CHECK(mismatch_bits(download(slots[i], recv[i]), want) == "");
    }
  }
}

template <class T>
void check_reduce_scatter(std::span<const rank_slot> slots, const call_context& c) {
  const int n = slots.front().comm.size();
  const std::size_t total = c.count * static_cast<std::size_t>(n);
  for (nccl::reduction op : all_reductions) {
    for (bool in_place : {false, true}) {
      INFO("reduce_scatter " << op_name(op) << (in_place ? " in place" : " out of place"));
      const auto inputs =
          every_input<T>(n, total, c.seed, tag_of({5, c.count, std::uint64_t(op), in_place}), values_for(op));
      const expected whole = reference(inputs, op);
      std::vector<cudrv::device_buffer<T>> send, recv;
      for (const rank_slot& s : slots) {
        send.push_back(upload(s, inputs[static_cast<std::size_t>(s.comm.rank())]));
        if (!in_place) {
          recv.push_back(poisoned<T>(s, c.count));
        }
      }
      launch(slots, [&](const rank_slot& s, std::size_t i) {
        if (in_place) {
          s.comm.reduce_scatter(send[i], op, s.stream);
        } else {
          s.comm.reduce_scatter(send[i], recv[i], op, s.stream);
        }
      });
      for (std::size_t i = 0; i < slots.size(); ++i) {
        const auto rank = static_cast<std::size_t>(slots[i].comm.rank());
        INFO("rank " << rank << " of " << n);
        const expected want = slice(whole, rank * c.count, c.count);
        if (in_place) {  // this rank's part of the result lands at its place in the buffer
          CHECK(mismatch(part(download(slots[i], send[i]), rank * c.count, c.count), want) == "");
        } else {
          CHECK(mismatch(download(slots[i], recv[i]), want) == "");
        }
      }
    }
  }
}

/// Every rank sends to the next and receives from the previous, in one group.
template <class T>
void check_send_recv_ring(std::span<const rank_slot> slots, const call_context& c) {
  const int n = slots.front().comm.size();
  INFO("send/recv ring");
  const auto inputs = every_input<T>(n, c.count, c.seed, tag_of({6, c.count}), values::general);
  std::vector<cudrv::device_buffer<T>> send, recv;
  for (const rank_slot& s : slots) {
    send.push_back(upload(s, inputs[static_cast<std::size_t>(s.comm.rank())]));
    recv.push_back(poisoned<T>(s, c.count));
  }
  launch(slots, [&](const rank_slot& s, std::size_t i) {
    const int rank = s.comm.rank();
    s.comm.send(send[i], (rank + 1) % n, s.stream);
    s.comm.recv(recv[i], (rank + n - 1) % n, s.stream);
  });
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const int rank = slots[i].comm.rank();
    INFO("rank " << rank << " of " << n);
    CHECK(mismatch_bits(download(slots[i], recv[i]), inputs[static_cast<std::size_t>((rank + n - 1) % n)]) == "");
  }
}

/// Every rank sends a block of its own to every rank (itself included) and receives one from each,
/// all in one group: an all-to-all made of point-to-point calls.
template <class T>
void check_send_recv_pairwise(std::span<const rank_slot> slots, const call_context& c) {
  const int n = slots.front().comm.size();
  INFO("send/recv pairwise (all to all)");
  // The block rank `from` sends to rank `to`.
  auto block = [&](int from, int to) {
    return make_input<T>(c.count, input_seed(c.seed, from, tag_of({7, c.count, std::uint64_t(to)})), values::general);
  };
  std::vector<cudrv::device_buffer<T>> send, recv;
  for (const rank_slot& s : slots) {
    std::vector<std::vector<T>> mine;
    for (int to = 0; to < n; ++to) {
      mine.push_back(block(s.comm.rank(), to));
    }
    send.push_back(upload(s, concat(mine)));
    recv.push_back(poisoned<T>(s, c.count * static_cast<std::size_t>(n)));
  }
  launch(slots, [&](const rank_slot& s, std::size_t i) {
    for (int peer = 0; peer < n; ++peer) {
      const std::size_t at = static_cast<std::size_t>(peer) * c.count;
      s.comm.send(send[i].view().subspan(at, c.count), peer, s.stream);
      s.comm.recv(recv[i].view().subspan(at, c.count), peer, s.stream);
    }
  });
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const int rank = slots[i].comm.rank();
    INFO("rank " << rank << " of " << n);
    std::vector<std::vector<T>> want;
    for (int from = 0; from < n; ++from) {
      want.push_back(block(from, rank));
    }
    CHECK(mismatch_bits(download(slots[i], recv[i]), concat(want)) == "");
  }
}

/// The element counts every collective is checked with: an odd small one and one large enough for
/// NCCL to split the work into many chunks (per rank; gathers and scatters hold n times as many).
/// CUDRV_TEST_NCCL_SMALL=1 keeps the small one only (for slow runs: compute-sanitizer).
inline std::vector<std::size_t> collective_counts() {
  const char* small = std::getenv("CUDRV_TEST_NCCL_SMALL");
  if (small != nullptr && std::string(small) == "1") {
    return {1031};
  }
  return {1031, (std::size_t{1} << 18) + 5};
}

/// Every collective, in place and out of place, for every operation, root and count.
template <class T>
void check_every_collective(std::span<const rank_slot> slots, std::uint64_t seed) {
  REQUIRE_FALSE(slots.empty());
  for (std::size_t count : collective_counts()) {
    INFO("element type " << type_name<T>() << ", " << count << " elements per rank, " << slots.front().comm.size()
                         << " ranks, seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays)");
    const call_context c{seed, count};
    check_all_reduce<T>(slots, c);
    check_broadcast<T>(slots, c);
    check_reduce<T>(slots, c);
    check_all_gather<T>(slots, c);
    check_reduce_scatter<T>(slots, c);
    check_send_recv_ring<T>(slots, c);
    check_send_recv_pairwise<T>(slots, c);
  }
}

}  // namespace cudrv::test::multigpu
