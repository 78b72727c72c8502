// The untyped storage of cudrv::growable_buffer: one reserved range, physical chunks mapped into it.
#include "cudrv/growable_buffer.hpp"

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cudrv/error.hpp"
#include "memory/memory_support.hpp"

namespace cudrv::detail {

namespace {

constexpr std::size_t default_chunk_bytes = std::size_t{64} << 20;

bool is_power_of_two(std::size_t v) noexcept { return v != 0 && (v & (v - 1)) == 0; }

// value rounded up to a multiple of unit, or 0 when that overflows.
std::size_t round_up(std::size_t value, std::size_t unit) noexcept {
  const std::size_t chunks = value / unit + (value % unit != 0 ? 1 : 0);
  return chunks > std::numeric_limits<std::size_t>::max() / unit ? 0 : chunks * unit;
}

}  // namespace

void throw_growable_count(const char* api, std::size_t count, const char* what, std::size_t limit) {
  throw invalid_argument_error(api, std::to_string(count) + " elements " + what + " " + std::to_string(limit));
}

struct growable_chunks {
  struct chunk {
    physical_allocation memory;
    memory_mapping mapping;  // destroyed first: unmap, then release
  };
  std::vector<chunk> chunks;
  std::vector<access_descriptor> access;
};

growable_storage::growable_storage(const device& dev, std::size_t max_bytes, const growable_buffer_options& options)
    : properties_(physical_allocation_properties::on(dev)), device_(dev.ordinal()) {
  constexpr const char* api = "cudrv::growable_buffer";
  const std::size_t minimum = allocation_granularity(properties_, granularity::minimum);
  std::size_t chunk = options.chunk_bytes;
  if (chunk == 0) {
    chunk = round_up(default_chunk_bytes, allocation_granularity(properties_, granularity::recommended));
  } else if (minimum != 0 && chunk % minimum != 0) {
    throw invalid_argument_error(api, "the chunk size " + format_bytes(chunk) +
                                          " is not a multiple of the minimum allocation granularity " +
                                          format_bytes(minimum) + " of device " + std::to_string(device_));
  }
  const std::size_t reserved = round_up(max_bytes, chunk);
  if (reserved == 0) {
    throw invalid_argument_error(api, format_bytes(max_bytes) + " cannot be rounded up to whole chunks of " +
                                          format_bytes(chunk));
  }
  std::vector<access_descriptor> access;
  access.reserve(1 + options.peers.size());
  access.push_back(access_descriptor::for_device(dev));
  for (const device& peer : options.peers) {
    if (peer != dev) {
      access.push_back(access_descriptor::for_device(peer, options.peer_access));
    }
  }
  // Chunks start on multiples of their size when it is a power of two (up to 1 GiB), which lets the
  // driver use its largest pages; otherwise on the granularity.
  std::size_t alignment = 0;
  if (is_power_of_two(chunk) && chunk <= (std::size_t{1} << 30)) {
    alignment = chunk;
  } else if (is_power_of_two(minimum)) {
    alignment = minimum;
  }
  auto* chunks = new growable_chunks{{}, std::move(access)};
  try {
    range_ = address_range(reserved, {.alignment = alignment});
  } catch (...) {
    delete chunks;
    throw;
  }
  chunks_ = chunks;
  chunk_bytes_ = chunk;
}

growable_storage::~growable_storage() { reset(); }

growable_storage::growable_storage(growable_storage&& other) noexcept
    : range_(std::move(other.range_)),
      chunks_(std::exchange(other.chunks_, nullptr)),
      chunk_count_(std::exchange(other.chunk_count_, 0)),
      properties_(other.properties_),
      chunk_bytes_(std::exchange(other.chunk_bytes_, 0)),
      device_(std::exchange(other.device_, -1)) {}

growable_storage& growable_storage::operator=(growable_storage&& other) noexcept {
  if (this != &other) {
    reset();
    range_ = std::move(other.range_);
    chunks_ = std::exchange(other.chunks_, nullptr);
    chunk_count_ = std::exchange(other.chunk_count_, 0);
    properties_ = other.properties_;
    chunk_bytes_ = std::exchange(other.chunk_bytes_, 0);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

void growable_storage::map_at_least(std::size_t bytes, const char* api) {
  if (!range_) {
    throw invalid_argument_error(api, "the buffer is empty (moved-from or reset)");
  }
  if (bytes <= mapped_bytes()) {
    return;
  }
  const std::size_t wanted = bytes / chunk_bytes_ + (bytes % chunk_bytes_ != 0 ? 1 : 0);
  std::vector<growable_chunks::chunk>& chunks = chunks_->chunks;
  const std::size_t first = chunks.size();
  chunks.reserve(wanted);  // the only step that allocates host memory: nothing is mapped yet if it throws
  try {
    for (std::size_t i = first; i < wanted; ++i) {
      physical_allocation memory(chunk_bytes_, properties_);
      memory_mapping mapping(range_, i * chunk_bytes_, memory);
      chunks.push_back(growable_chunks::chunk{std::move(memory), std::move(mapping)});
    }
    set_access(range_.address() + first * chunk_bytes_, (wanted - first) * chunk_bytes_, chunks_->access);
  } catch (...) {
    while (chunks.size() > first) {
      chunks.pop_back();  // unmap, then release: the buffer is as it was
    }
    throw;
  }
  chunk_count_ = chunks.size();
}

void growable_storage::unmap_beyond(std::size_t bytes) noexcept {
  if (chunk_bytes_ == 0) {
    return;
  }
  const std::size_t keep = bytes / chunk_bytes_ + (bytes % chunk_bytes_ != 0 ? 1 : 0);
  while (chunks_ != nullptr && chunks_->chunks.size() > keep) {
    chunks_->chunks.pop_back();  // the last chunk first: unmap, then release
  }
  chunk_count_ = chunks_ == nullptr ? 0 : chunks_->chunks.size();
}

void growable_storage::reset() noexcept {
  if (chunks_ != nullptr) {
    while (!chunks_->chunks.empty()) {
      chunks_->chunks.pop_back();
    }
    delete std::exchange(chunks_, nullptr);
  }
  chunk_count_ = 0;
  range_.reset();  // freed last, when nothing is mapped in it any more
}

}  // namespace cudrv::detail
