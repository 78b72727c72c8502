// Internal: the entry format of compile_cache (see compile_cache.cpp), exposed for its tests and the
// fuzz target fuzz/fuzz_cache_entry.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cudrv/program.hpp"

namespace cudrv::detail {

// The format version written in every entry (and part of every key).
std::uint32_t cache_format_version() noexcept;

// The payload of an entry: the kind, the code, the log and the lowered names of a compilation.
std::string encode_cache_payload(const compile_result& r);

// A whole entry file: header (magic, version, sizes), key, payload and the checksum of all before it.
std::string encode_cache_entry(std::string_view key, std::string_view payload,
                               std::uint32_t version = cache_format_version());

enum class cache_entry_status {
  hit,        // whole, valid, of this key: out holds the result
  other_key,  // whole and valid, but of another key with the same file name
  corrupt,    // truncated, altered, of another format version, or holding an image that fails its checks
};

// Checks an entry file's bytes (frame, version, checksum, payload, and the image it holds) and, when
// it is a valid entry of key, decodes it into out (the code named name). Reads nothing outside entry;
// never throws but std::bad_alloc.
cache_entry_status decode_cache_entry(std::string_view entry, std::string_view key, const std::string& name,
                                      compile_result& out);

// What the key of compiling prog with option_list (the final NVRTC options) holds of the disk: every
// path the scan looked at, found or not, or why the compilation is not cached. For the differential
// fuzz target fuzz/fuzz_cache_deps.cpp, which checks it against the paths NVRTC opens.
struct cache_disk_inputs {
  std::string refusal;             // not empty: uncacheable, and why
  std::vector<std::string> paths;  // as the scan spelled them
};
cache_disk_inputs scan_cache_disk_inputs(const program& prog, const std::vector<std::string>& option_list);

}  // namespace cudrv::detail
