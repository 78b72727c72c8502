// pdl: programmatic dependent launch (sm_90) against plain launches, on a chain of small dependent
// kernels.
//
//   example_pdl [n [pairs]]      defaults: 1M 1000
//
// A producer kernel writes a buffer of n values; a consumer kernel reads it into an accumulator. The
// pair is launched `pairs` times back to back on one stream, in two modes:
//   plain  each kernel starts only once the previous one has completed: between the two, the GPU
//          drains the producer, then launches the consumer, which then runs its prologue.
//   PDL    the consumer is launched with cudrv::launch_config::programmatic_stream_serialization =
//          true; the producer executes griddepcontrol.launch_dependents as it starts, which lets the
//          consumer launch while the producer still runs; the consumer does its independent prologue
//          and then griddepcontrol.wait, which returns once the producer has completed and its writes
//          are visible. The consumer's launch latency and prologue overlap the producer's work.
// The kernels are the same in both modes (the two instructions do nothing without a programmatic
// launch); only the launch attribute differs. Each kernel runs one wave of 2 blocks of 256 threads per
// SM, so the consumer's blocks fit beside the producer's.
//
// Measured: the chain's GPU time per pair, with the stream held by a gate kernel (spinning on a flag
// in mapped pinned memory) while the host queues up to 250 pairs, so that the GPU never waits for the
// host and the time between the events is the GPU's alone; the same chain as the host issues it
// (host launch cost included: PDL cannot help when the GPU waits for the host); and one pair between
// two events. Expected: PDL saves the gap between producer and consumer and hides the consumer's
// prologue, 1 to 2.5 us of a pair of 5 to 10 us on an H100 at the default size: a speedup of 1.15 to
// 1.5 (target 1.1). As the host issues it, the chain is likely bound by the host's launch rate in both
// modes, so there PDL gains little.
//
// Verified in both modes: the accumulator starts random, the buffer is poisoned, and each producer
// writes values that depend on its iteration, so a consumer that read the buffer before its producer
// finished (the previous iteration's values, or the poison) would leave a wrong sum; the host checks
// every element of the accumulator after the whole chain.
//
// Exit status: 0 success, 1 usage error, 2 no CUDA driver, 3 no CUDA device, 4 CUDA or compiler
// error, 5 the accumulator differs from the host's.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "example_main.hpp"
#include "kernels/pdl.hpp"

namespace {

constexpr unsigned block_size = 256;
constexpr unsigned blocks_per_sm = 2;          // per kernel: 512 of an SM's 2048 threads
constexpr unsigned prologue_rounds = 64;       // the consumer's independent work (about 1 us)
constexpr unsigned max_pairs_per_batch = 250;  // launches queued behind one gate: well under the queue depth
constexpr unsigned long long gate_timeout_ns = 1'000'000'000ull;

// The host's copies of the device functions of kernels/pdl.hpp.
unsigned base_value(unsigned i) { return i * 0x9E3779B9u; }
unsigned step_value(unsigned i) { return (i * 0x85EBCA6Bu) | 1u; }
unsigned weight(unsigned t, unsigned rounds) {
  unsigned w = t;
  for (unsigned r = 0; r < rounds; ++r) {
    w ^= w >> 16;
    w *= 0x7FEB352Du;
    w ^= w >> 15;
    w *= 0x846CA68Bu;
    w ^= w >> 16;
  }
  return w | 1u;
}

struct kernels {
  cudrv::library lib;
  cudrv::typed_kernel<void(unsigned*, unsigned, unsigned)> produce;
  cudrv::typed_kernel<void(const unsigned*, unsigned*, unsigned, unsigned)> consume;
  cudrv::typed_kernel<void(unsigned*, unsigned long long)> gate;

  explicit kernels(const cudrv::device& dev)
      : lib(example::compile(dev, "pdl.cu", example::pdl_kernels::source, example::pdl_kernels::name_expressions)),
        produce(lib.get_kernel<void(unsigned*, unsigned, unsigned)>("produce")),
        consume(lib.get_kernel<void(const unsigned*, unsigned*, unsigned, unsigned)>("consume")),
        gate(lib.get_kernel<void(unsigned*, unsigned long long)>("gate")) {}
};

// The producer/consumer chain over one buffer and one accumulator.
struct chain {
  const kernels& k;
  cudrv::device_buffer<unsigned>& buf;
  cudrv::device_buffer<unsigned>& acc;
  unsigned n;
  cudrv::launch_config config;  // both kernels: one wave

  // Enqueues `pairs` producer/consumer pairs, the producers numbered from `first`.
  void enqueue(cudrv::stream_ref s, bool pdl, unsigned first, unsigned pairs) const {
    cudrv::launch_config dependent = config;
    dependent.programmatic_stream_serialization = pdl;  // may start before the producer completes
    for (unsigned p = 0; p < pairs; ++p) {
      cudrv::launch(s, config, k.produce, buf.get(), n, first + p);
      cudrv::launch(s, dependent, k.consume, buf.get(), acc.get(), n, prologue_rounds);
    }
  }
};

// Times work on the GPU alone: a gate kernel holds the stream until the host has queued the work
// between two timed events, so the host's launch overhead stays out of the time.
class gated_timer {
 public:
  gated_timer(const cudrv::device& dev, const kernels& k)
      : k_(k),
        flags_(dev, 2, cudrv::pinned_flags::portable | cudrv::pinned_flags::mapped),
        start_(dev, cudrv::event_flags::timing),
        stop_(dev, cudrv::event_flags::timing) {}

  template <class Work>
  double time_ms(cudrv::stream_ref s, Work&& work) {
    std::atomic_ref<unsigned> go(flags_[0]), gave_up(flags_[1]);
    go.store(0);
    gave_up.store(0);
    cudrv::launch(s, {.grid = 1, .block = 1}, k_.gate, flags_.device_view().get(), gate_timeout_ns);
    start_.record(s);
    work(s);
    stop_.record(s);
    go.store(1, std::memory_order_release);  // the GPU may start now
    stop_.synchronize();
    timed_out_ = timed_out_ || gave_up.load() != 0;
    return cudrv::elapsed_time(start_, stop_).count();
  }

  // Whether a gate gave up waiting (the host could not queue the work in time: the times include it).
  [[nodiscard]] bool timed_out() const { return timed_out_; }

 private:
  const kernels& k_;
  cudrv::pinned_buffer<unsigned> flags_;  // [0]: go (host to GPU), [1]: the gate timed out (GPU to host)
  cudrv::event start_, stop_;
  bool timed_out_ = false;
};

// Runs the whole chain once from a random accumulator and a poisoned buffer, and checks every element.
bool verify(const chain& c, cudrv::stream_ref s, bool pdl, unsigned pairs, std::mt19937& rng, const char* what) {
  std::vector<unsigned> acc0(c.n), result(c.n);
  for (unsigned& a : acc0) {
    a = static_cast<unsigned>(rng());
  }
  cudrv::copy(c.acc, acc0, s);
  cudrv::fill(c.buf, 0xDEADBEEFu, s);
  c.enqueue(s, pdl, 0, pairs);
  cudrv::copy(result, c.acc, s);
  s.synchronize();

  // Consumer thread t = i % threads adds weight(t) * (base(i) + p * step(i)) for p = 0 .. pairs - 1.
  const unsigned threads = c.config.grid.x * c.config.block.x;
  std::vector<unsigned> weights(threads);
  for (unsigned t = 0; t < threads; ++t) {
    weights[t] = weight(t, prologue_rounds);
  }
  // 0 + 1 + ... + (pairs - 1), mod 2^32 like the GPU's unsigned arithmetic
  const auto triangle = static_cast<unsigned>(std::uint64_t{pairs} * (pairs - 1) / 2);
  std::size_t wrong = 0;
  unsigned first = 0;
  for (unsigned i = 0; i < c.n; ++i) {
    const unsigned sum = pairs * base_value(i) + triangle * step_value(i);
    if (result[i] != acc0[i] + weights[i % threads] * sum) {
      if (wrong++ == 0) {
        first = i;
      }
    }
  }
  if (wrong != 0) {
    std::printf("%s: %zu of %u accumulators WRONG; first at %u: 0x%08x, expected 0x%08x\n", what, wrong, c.n, first,
                result[first],
                acc0[first] + weights[first % threads] * (pairs * base_value(first) + triangle * step_value(first)));
    return false;
  }
  std::printf("%s: all %u accumulators match the host after %u pairs\n", what, c.n, pairs);
  return true;
}

bool run(std::size_t n_arg, std::size_t pairs_arg) {
  if (n_arg > (std::size_t{1} << 31) || pairs_arg > 1'000'000) {
    throw example::usage_error{"at most 2^31 elements and 1000000 pairs"};
  }
  const auto n = static_cast<unsigned>(n_arg);
  const auto pairs = static_cast<unsigned>(pairs_arg);

  cudrv::device dev(0);
  dev.set_current();
  if (dev.compute_capability().major < 9) {
    std::printf("pdl: programmatic dependent launch needs compute capability 9.0; %s has %s\n", dev.name().c_str(),
                dev.arch().c_str());
    return true;
  }
  const kernels k(dev);
  const unsigned sms = static_cast<unsigned>(dev.attribute(cudrv::device_attributes::multiprocessor_count));
  cudrv::stream s(dev);
  cudrv::device_buffer<unsigned> buf(dev, n), acc(dev, n);
  const chain c{k, buf, acc, n, {.grid = blocks_per_sm * sms, .block = block_size}};
  std::printf("pdl: %u elements, %u pairs; each kernel %u blocks of %u threads; consumer prologue %u hash rounds; %s\n",
              n, pairs, c.config.grid.x, block_size, prologue_rounds, dev.name().c_str());

  std::mt19937 rng(std::random_device{}());
  bool ok = verify(c, s, false, pairs, rng, "plain launches");
  ok = verify(c, s, true, pairs, rng, "programmatic dependent launch") && ok;

  // The chain on the GPU alone, in batches behind a gate, in us per pair: the median of 5 runs of each
  // mode, the modes taking turns.
  gated_timer timer(dev, k);
  auto chain_us = [&](bool pdl) {
    double ms = 0;
    for (unsigned done = 0; done < pairs; done += max_pairs_per_batch) {
      const unsigned batch = std::min(max_pairs_per_batch, pairs - done);
      ms += timer.time_ms(s, [&](cudrv::stream_ref st) { c.enqueue(st, pdl, done, batch); });
    }
    return ms * 1e3 / pairs;
  };
  chain_us(false);  // warm-up
  chain_us(true);
  std::vector<double> plain_runs, pdl_runs;
  for (int r = 0; r < 5; ++r) {
    plain_runs.push_back(chain_us(false));
    pdl_runs.push_back(chain_us(true));
  }
  const double plain_us = example::median(plain_runs);
  const double pdl_us = example::median(pdl_runs);

  // The same chain as the host issues it: the GPU may wait for the launches.
  auto issued_us = [&](bool pdl) {
    return example::time_ms(dev, s, 3, [&](cudrv::stream_ref st) { c.enqueue(st, pdl, 0, pairs); }) * 1e3 / pairs;
  };
  const double plain_issued_us = issued_us(false);
  const double pdl_issued_us = issued_us(true);

  // One pair between two events (behind a gate too), median of 51.
  auto one_pair_us = [&](bool pdl) {
    std::vector<double> runs;
    for (int r = 0; r < 51; ++r) {
      runs.push_back(1e3 * timer.time_ms(s, [&](cudrv::stream_ref st) { c.enqueue(st, pdl, 0, 1); }));
    }
    return example::median(runs);
  };
  const double plain_one_us = one_pair_us(false);
  const double pdl_one_us = one_pair_us(true);

  std::printf("chain on the GPU alone:   plain %.2f us per pair, PDL %.2f us per pair: PDL saves %.2f us per pair\n",
              plain_us, pdl_us, plain_us - pdl_us);
  std::printf("chain as the host issues: plain %.2f us per pair, PDL %.2f us per pair (host launch cost included)\n",
              plain_issued_us, pdl_issued_us);
  std::printf("one pair between events:  plain %.2f us, PDL %.2f us\n", plain_one_us, pdl_one_us);
  if (timer.timed_out()) {
    std::printf("warning: a gate timed out before the host had queued its batch (launch queue full?): the GPU-alone "
                "times include host time\n");
  }

  example::figure f{"pdl", "speedup", plain_us / pdl_us, 1.0, "plain launches", 1.1};
  f.detail = std::to_string(n) + " elements, " + std::to_string(pairs) + " pairs; us per pair " +
             std::to_string(plain_us).substr(0, 5) + " plain, " + std::to_string(pdl_us).substr(0, 5) + " PDL";
  f.seconds = pdl_us * 1e-6;
  example::report(f);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run("pdl", [&] {
    if (argc > 3) {
      throw example::usage_error{"usage: example_pdl [n [pairs]]   (defaults: 1M 1000)"};
    }
    return run(example::size_arg(argc, argv, 1, std::size_t{1} << 20, "element count"),
               example::size_arg(argc, argv, 2, 1000, "pair count"));
  });
}
