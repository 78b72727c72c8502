// libFuzzer target: compile-cache entry files, as a crashed process, a full disk, another version of
// cudrv or a hostile user may leave them in the cache directory.
//
// Input: one mode byte and the rest. Mode 0 (even): the rest is an entry file, decoded with the key
// it holds (so that the payload is read whenever the frame and checksum are right). Mode 1 (odd): the
// rest is a payload, framed by a valid header and checksum (detail::encode_cache_entry) so that the
// payload decoder and the image checks run on every input. Invariants: decoding never reads outside
// the bytes, never throws, and a hit returns an image that passes the checks of
// object_code::validate; re-encoding a hit's result gives back the payload.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include <cudrv/program.hpp>

#include "code/compile_cache_entry.hpp"
#include "code/image_check.hpp"

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_cache_entry: %s\n", what);
  std::abort();
}

// The key stored in an entry (after the 32-byte header, its size at byte 16), or "" when the header
// does not fit: decoding with it reaches the payload of a well-framed entry.
std::string_view stored_key(std::string_view entry) {
  if (entry.size() < 32) {
    return {};
  }
  std::uint64_t key_size = 0;
  std::memcpy(&key_size, entry.data() + 16, sizeof key_size);
  return key_size <= entry.size() - 32 ? entry.substr(32, key_size) : std::string_view();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string framed;
  std::string_view entry = rest;
  std::string_view key = stored_key(rest);
  if ((data[0] & 1) != 0) {
    key = "fuzz key";
    framed = cudrv::detail::encode_cache_entry(key, rest);
    entry = framed;
  }
  cudrv::compile_result result;
  const auto status = cudrv::detail::decode_cache_entry(entry, key, "fuzz", result);
  if (status == cudrv::detail::cache_entry_status::hit) {
    if (!cudrv::detail::image_problem(result.code.kind(), result.code.bytes()).empty()) {
      fail("a hit returned an image that fails the image checks");
    }
    if ((data[0] & 1) != 0 && cudrv::detail::encode_cache_payload(result) != rest) {
      fail("a hit's result does not re-encode to its payload");
    }
  } else if ((data[0] & 1) != 0 && status == cudrv::detail::cache_entry_status::other_key) {
    fail("an entry framed with its own key decoded as another key's");
  }
  return 0;
}
