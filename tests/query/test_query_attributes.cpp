// cudrv-query's table of device attributes (tools/cudrv-query/attributes.hpp), checked against the cuda.h it is
// built with: the header's CUdevice_attribute_enum is parsed at run time from CUDRV_TEST_CUDA_H. No driver is used.
#include <catch2/catch.hpp>

#include <cctype>
#include <cstddef>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attributes.hpp"

#ifndef CUDRV_TEST_CUDA_H
#error "CUDRV_TEST_CUDA_H must name the cuda.h the table is compiled with (a string literal)"
#endif

using cudrv_query::attribute_desc;
using cudrv_query::attribute_kind;
using cudrv_query::attribute_table;
using cudrv_query::describe;
using cudrv_query::find_attribute;
using cudrv_query::group_names;

namespace {

constexpr std::string_view k_prefix = "CU_DEVICE_ATTRIBUTE_";

/// One enumerator of CUdevice_attribute_enum as written in cuda.h.
struct header_enumerator {
  std::string name;
  long long value = 0;
  std::string comment;  ///< its "/**< ... */" comment (or a "/** ... */" before it), trimmed
};

std::string trim(std::string_view text) {
  std::size_t first = 0;
  std::size_t last = text.size();
  while (first < last && std::isspace(static_cast<unsigned char>(text[first]))) ++first;
  while (last > first && std::isspace(static_cast<unsigned char>(text[last - 1]))) --last;
  return std::string(text.substr(first, last - first));
}

bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

/// Parses the enumerators of `typedef enum CUdevice_attribute_enum { ... }` in the text of cuda.h. Values may be
/// integer literals, earlier enumerators, or left out (the previous value plus one). Throws on anything else.
std::vector<header_enumerator> parse_device_attributes(const std::string& text) {
  std::size_t pos = text.find("enum CUdevice_attribute_enum");
  if (pos == std::string::npos) throw std::runtime_error("no CUdevice_attribute_enum in the header");
  pos = text.find('{', pos);
  if (pos == std::string::npos) throw std::runtime_error("no '{' after CUdevice_attribute_enum");
  ++pos;

  std::vector<header_enumerator> out;
  std::map<std::string, long long, std::less<>> known;
  std::string pending_doc;  // a "/** ... */" comment, for the enumerator after it
  long long next_value = 0;
  while (pos < text.size()) {
    const char c = text[pos];
    if (std::isspace(static_cast<unsigned char>(c)) || c == ',') {
      ++pos;
    } else if (text.compare(pos, 2, "/*") == 0) {
      const std::size_t end = text.find("*/", pos + 2);
      if (end == std::string::npos) throw std::runtime_error("unterminated comment in CUdevice_attribute_enum");
      std::string_view body(text.data() + pos + 2, end - pos - 2);
      if (body.starts_with("*<")) {
        if (out.empty()) throw std::runtime_error("a trailing comment before any enumerator");
        out.back().comment = trim(body.substr(2));
      } else if (body.starts_with('*')) {
        pending_doc = trim(body.substr(1));
      }
      pos = end + 2;
    } else if (text.compare(pos, 2, "//") == 0) {
      const std::size_t end = text.find('\n', pos);
      std::string_view body(text.data() + pos + 2, (end == std::string::npos ? text.size() : end) - pos - 2);
      if (body.starts_with("/<") && !out.empty()) out.back().comment = trim(body.substr(2));
      pos = end == std::string::npos ? text.size() : end;
    } else if (c == '}') {
      return out;
    } else if (is_identifier_char(c)) {
      std::size_t end = pos;
      while (end < text.size() && is_identifier_char(text[end])) ++end;
      header_enumerator e;
      e.name = text.substr(pos, end - pos);
      pos = end;
      while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
      if (pos < text.size() && text[pos] == '=') {
        ++pos;
        std::size_t value_end = pos;
        while (value_end < text.size() && text[value_end] != ',' && text[value_end] != '}' &&
               text.compare(value_end, 2, "/*") != 0 && text.compare(value_end, 2, "//") != 0) {
          ++value_end;
        }
        const std::string expression = trim(std::string_view(text).substr(pos, value_end - pos));
        pos = value_end;
        if (auto found = known.find(expression); found != known.end()) {
          e.value = found->second;
        } else {
          std::size_t used = 0;
          try {
            e.value = std::stoll(expression, &used, 0);
          } catch (const std::exception&) {
            used = 0;
          }
          if (used == 0 || used != expression.size()) {
            throw std::runtime_error("cannot read the value of " + e.name + ": '" + expression + "'");
          }
        }
      } else {
        e.value = next_value;
      }
      next_value = e.value + 1;
      e.comment = std::move(pending_doc);
      pending_doc.clear();
      known.emplace(e.name, e.value);
      out.push_back(std::move(e));
    } else {
      throw std::runtime_error(std::string("unexpected character '") + c + "' in CUdevice_attribute_enum");
    }
  }
  throw std::runtime_error("CUdevice_attribute_enum has no closing '}'");
}

std::vector<header_enumerator> header_attributes() {
  std::ifstream in(CUDRV_TEST_CUDA_H, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("cannot open ") + CUDRV_TEST_CUDA_H);
  std::ostringstream text;
  text << in.rdbuf();
  return parse_device_attributes(text.str());
}

/// The rule the table follows: every enumerator but CU_DEVICE_ATTRIBUTE_MAX and the deprecated ones. A deprecated
/// one says so in its comment, mostly at its start ("Deprecated, use ..."), once in the middle (GPU_OVERLAP).
bool belongs_in_table(const header_enumerator& e) {
  return e.name != "CU_DEVICE_ATTRIBUTE_MAX" && e.comment.find("Deprecated") == std::string::npos;
}

std::string lower_suffix(std::string_view enum_name) {
  std::string out(enum_name.substr(k_prefix.size()));
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

const attribute_desc& attribute(std::string_view key) {
  const attribute_desc* found = find_attribute(key);
  INFO("key " << key);
  REQUIRE(found != nullptr);
  return *found;
}

}  // namespace

TEST_CASE("the parser reads enumerators, values and comments", "[query]") {
  const std::string text = "typedef enum CUdevice_attribute_enum {\n"
                           "    CU_DEVICE_ATTRIBUTE_A = 1, /**< First, in bytes */\n"
                           "    CU_DEVICE_ATTRIBUTE_B = 0x10, /**< Deprecated, use A */\n"
                           "    /** Before C */\n"
                           "    CU_DEVICE_ATTRIBUTE_C,\n"
                           "    CU_DEVICE_ATTRIBUTE_D = CU_DEVICE_ATTRIBUTE_A /**< Alias */\n"
                           "  , CU_DEVICE_ATTRIBUTE_MAX\n"
                           "} CUdevice_attribute;\n";
  const std::vector<header_enumerator> parsed = parse_device_attributes(text);
  REQUIRE(parsed.size() == 5);
  CHECK(parsed[0].name == "CU_DEVICE_ATTRIBUTE_A");
  CHECK(parsed[0].value == 1);
  CHECK(parsed[0].comment == "First, in bytes");
  CHECK(parsed[1].value == 16);
  CHECK_FALSE(belongs_in_table(parsed[1]));
  CHECK(parsed[2].value == 17);
  CHECK(parsed[2].comment == "Before C");
  CHECK(parsed[3].value == 1);
  CHECK(parsed[3].comment == "Alias");
  CHECK(parsed[4].value == 2);
  CHECK_FALSE(belongs_in_table(parsed[4]));
}

TEST_CASE("the table holds exactly the non-deprecated attributes of cuda.h", "[query]") {
  INFO("header " << CUDRV_TEST_CUDA_H);
  const std::vector<header_enumerator> header = header_attributes();
  REQUIRE(header.size() > 100);

  std::map<std::string, long long> expected;
  for (const header_enumerator& e : header) {
    if (belongs_in_table(e)) expected.emplace(e.name, e.value);
  }
  std::map<std::string, long long> actual;
  for (const attribute_desc& a : attribute_table()) actual.emplace(a.enum_name, static_cast<long long>(a.id));

  std::vector<std::string> missing;
  std::vector<std::string> extra;
  std::vector<std::string> wrong_id;
  for (const auto& [name, value] : expected) {
    auto found = actual.find(name);
    if (found == actual.end()) {
      missing.push_back(name);
    } else if (found->second != value) {
      wrong_id.push_back(name + " (header " + std::to_string(value) + ", table " + std::to_string(found->second) + ")");
    }
  }
  for (const auto& [name, value] : actual) {
    if (!expected.contains(name)) extra.push_back(name);
  }
  INFO("missing from the table: " << join(missing));
  INFO("in the table but not (or deprecated) in the header: " << join(extra));
  INFO("ids differing from the header: " << join(wrong_id));
  REQUIRE(missing.empty());
  REQUIRE(extra.empty());
  REQUIRE(wrong_id.empty());
  REQUIRE(attribute_table().size() == expected.size());
}

TEST_CASE("units and kinds agree with the comments of cuda.h", "[query]") {
  for (const header_enumerator& e : header_attributes()) {
    if (!belongs_in_table(e)) continue;
    const attribute_desc& a = attribute(lower_suffix(e.name));
    INFO(e.name << ": " << e.comment);
    if (e.comment.find("in bytes") != std::string::npos) CHECK(std::string_view(a.unit) == "bytes");
    if (e.comment.find("in kilohertz") != std::string::npos) CHECK(std::string_view(a.unit) == "kHz");
    if (e.comment.find("in bits") != std::string::npos) CHECK(std::string_view(a.unit) == "bits");
    if (e.comment.find("bitmask") != std::string::npos) CHECK(a.kind == attribute_kind::bitmask);
    if (e.comment.find("enum") != std::string::npos && e.comment.find("bitmask") == std::string::npos) {
      CHECK(a.kind == attribute_kind::enumeration);
    }
  }
}

TEST_CASE("keys, names, groups, units and order of the table", "[query]") {
  const auto table = attribute_table();
  REQUIRE_FALSE(table.empty());

  const auto groups = group_names();
  REQUIRE_FALSE(groups.empty());
  std::map<std::string, std::size_t, std::less<>> group_index;
  for (const char* g : groups) {
    INFO("group " << g);
    const std::string_view name = g;
    REQUIRE_FALSE(name.empty());
    for (char c : name) CHECK((std::islower(static_cast<unsigned char>(c)) || c == '_'));
    REQUIRE(group_index.emplace(name, group_index.size()).second);
  }

  const std::set<std::string, std::less<>> allowed_units = {"",        "bytes",  "kHz",       "bits",
                                                            "threads", "blocks", "registers", "multiprocessors",
                                                            "engines", "texels", "elements",  "layers"};
  std::set<std::string, std::less<>> keys;
  std::set<long long> ids;
  std::vector<std::size_t> per_group(groups.size(), 0);
  std::size_t previous_group = 0;
  for (const attribute_desc& a : table) {
    INFO("attribute " << a.enum_name);
    const std::string_view enum_name = a.enum_name;
    REQUIRE(enum_name.starts_with(k_prefix));
    CHECK(a.key == lower_suffix(enum_name));
    CHECK(keys.insert(a.key).second);
    CHECK(ids.insert(static_cast<long long>(a.id)).second);

    const std::string_view name = a.name;
    REQUIRE_FALSE(name.empty());
    CHECK(name.size() <= 60);
    CHECK_FALSE(name.ends_with('.'));
    CHECK_FALSE(std::islower(static_cast<unsigned char>(name.front())));
    CHECK(name.find("  ") == std::string_view::npos);

    CHECK(allowed_units.contains(std::string_view(a.unit)));
    if (a.kind != attribute_kind::integer) CHECK(std::string_view(a.unit).empty());

    auto group = group_index.find(std::string_view(a.group));
    REQUIRE(group != group_index.end());
    CHECK(group->second >= previous_group);  // sorted by group order
    previous_group = group->second;
    ++per_group[group->second];
  }
  for (std::size_t i = 0; i < groups.size(); ++i) {
    INFO("group " << groups[i]);
    CHECK(per_group[i] > 0);
  }
}

TEST_CASE("describe names enumeration values", "[query]") {
  const attribute_desc& mode = attribute("compute_mode");
  REQUIRE(mode.kind == attribute_kind::enumeration);
  CHECK(describe(mode, CU_COMPUTEMODE_DEFAULT) == "default");
  CHECK(describe(mode, CU_COMPUTEMODE_PROHIBITED) == "prohibited");
  CHECK(describe(mode, CU_COMPUTEMODE_EXCLUSIVE_PROCESS) == "exclusive_process");
  CHECK(describe(mode, 1) == "unknown(1)");  // the former exclusive-thread mode
  CHECK(describe(mode, 7) == "unknown(7)");
  CHECK(describe(mode, -1) == "unknown(-1)");

  const attribute_desc& ordering = attribute("gpu_direct_rdma_writes_ordering");
  REQUIRE(ordering.kind == attribute_kind::enumeration);
  CHECK(describe(ordering, 0) == "none");
  CHECK(describe(ordering, 100) == "owner");
  CHECK(describe(ordering, 200) == "all_devices");
  CHECK(describe(ordering, 150) == "unknown(150)");

  const attribute_desc& numa = attribute("numa_config");
  REQUIRE(numa.kind == attribute_kind::enumeration);
  CHECK(describe(numa, 0) == "none");
  CHECK(describe(numa, 1) == "numa_node");
  CHECK(describe(numa, 2) == "unknown(2)");
}

TEST_CASE("describe lists bitmask flags", "[query]") {
  const attribute_desc& handles = attribute("mempool_supported_handle_types");
  REQUIRE(handles.kind == attribute_kind::bitmask);
  CHECK(describe(handles, 0) == "none");
  CHECK(describe(handles, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == "posix_file_descriptor");
  CHECK(describe(handles, 0x9) == "posix_file_descriptor|fabric");
  CHECK(describe(handles, 0x6) == "win32|win32_kmt");
  CHECK(describe(handles, 0x19) == "posix_file_descriptor|fabric|unknown(0x10)");
  CHECK(describe(handles, 0x300) == "unknown(0x300)");

  const attribute_desc& flush = attribute("gpu_direct_rdma_flush_writes_options");
  REQUIRE(flush.kind == attribute_kind::bitmask);
  CHECK(describe(flush, 0) == "none");
  CHECK(describe(flush, 3) == "host|memops");
  CHECK(describe(flush, 2) == "memops");

#if CUDA_VERSION >= 12080
  const attribute_desc& decompress = attribute("mem_decompress_algorithm_mask");
  REQUIRE(decompress.kind == attribute_kind::bitmask);
  CHECK(describe(decompress, 0) == "none");
  CHECK(describe(decompress, 3) == "deflate|snappy");
#if CUDA_VERSION >= 12090
  CHECK(describe(decompress, 5) == "deflate|lz4");
  CHECK(describe(decompress, 0x21) == "deflate|unknown(0x20)");
#endif
#endif
}

TEST_CASE("describe knows every enumeration and bitmask attribute, and nothing else", "[query]") {
  for (const attribute_desc& a : attribute_table()) {
    INFO("attribute " << a.key);
    switch (a.kind) {
      case attribute_kind::integer:
      case attribute_kind::boolean:
        CHECK(describe(a, 0).empty());
        CHECK(describe(a, 1).empty());
        CHECK(describe(a, 1024).empty());
        CHECK(describe(a, -1).empty());
        break;
      case attribute_kind::enumeration:
        // Each enumeration here has a value 0 with a name; an unnamed value is reported as such.
        CHECK(describe(a, 0).find("unknown") == std::string::npos);
        CHECK(describe(a, 12345) == "unknown(12345)");
        break;
      case attribute_kind::bitmask: {
        CHECK(describe(a, 0) == "none");
        const std::string bit0 = describe(a, 1);
        CHECK_FALSE(bit0.empty());
        CHECK(bit0.find("unknown") == std::string::npos);  // every mask here has a flag 1
        CHECK(describe(a, 1LL << 30) == "unknown(0x40000000)");
        break;
      }
    }
  }
  CHECK(describe(attribute("max_threads_per_block"), 1024).empty());
  CHECK(describe(attribute("ecc_enabled"), 1).empty());
}

TEST_CASE("find_attribute looks up keys exactly", "[query]") {
  const attribute_desc* threads = find_attribute("max_threads_per_block");
  REQUIRE(threads != nullptr);
  CHECK(threads->id == CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  CHECK(std::string_view(threads->enum_name) == "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK");
  CHECK(std::string_view(threads->unit) == "threads");

  CHECK(find_attribute("no_such_attribute") == nullptr);
  CHECK(find_attribute("") == nullptr);
  CHECK(find_attribute("MAX_THREADS_PER_BLOCK") == nullptr);
  CHECK(find_attribute("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK") == nullptr);
  CHECK(find_attribute("shared_memory_per_block") == nullptr);  // deprecated alias of max_shared_memory_per_block
  CHECK(find_attribute("max") == nullptr);

  for (const attribute_desc& a : attribute_table()) CHECK(find_attribute(a.key) == &a);
}
