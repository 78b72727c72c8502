// The launch attributes cudrv translates (src/code/launch_attributes.hpp, for_each_launch_attribute)
// against the CUlaunchAttributeID of the cuda.h cudrv is built with: every attribute of the enum but
// IGNORE and the stream-only ones (stream_only_launch_attributes) is translated, so a new toolkit's
// attribute fails this test with its name. Needs cudrv's internals (a static cudrv).
#include <catch2/catch.hpp>

#if defined(CUDRV_TEST_INTERNALS)

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <cudrv/event.hpp>
#include <cudrv/launch_config.hpp>

#include "code/launch_attributes.hpp"

namespace {

// CU_LAUNCH_ATTRIBUTE_<name> = <value> of the enum CUlaunchAttributeID in cuda.h, without the entries
// under an #if (CU_LAUNCH_ATTRIBUTE_MAX, the driver's own).
std::map<std::string, int> enum_in_cuda_h() {
  std::ifstream in(CUDRV_TEST_CUDA_H);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const std::string header = text.str();
  const auto begin = header.find("typedef enum CUlaunchAttributeID_enum {");
  const auto end = header.find("} CUlaunchAttributeID;", begin);
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  std::istringstream body(header.substr(begin, end - begin));
  const std::regex entry(R"(^\s*,?\s*CU_LAUNCH_ATTRIBUTE_([A-Z0-9_]+)\s*=\s*([0-9]+))");
  std::map<std::string, int> out;
  int nested_if = 0;
  for (std::string line; std::getline(body, line);) {
    if (line.rfind("#if", 0) == 0) {
      ++nested_if;
    } else if (line.rfind("#endif", 0) == 0) {
      --nested_if;
    }
    std::smatch m;
    if (nested_if == 0 && std::regex_search(line, m, entry)) {
      out["CU_LAUNCH_ATTRIBUTE_" + m[1].str()] = std::stoi(m[2].str());
    }
  }
  return out;
}

}  // namespace

TEST_CASE("launch attributes: every CUlaunchAttributeID of cuda.h is translated, but IGNORE and the stream-only ones",
          "[launch-attributes]") {
  const std::map<std::string, int> in_header = enum_in_cuda_h();
  REQUIRE(in_header.size() >= 15);  // CUDA 13.0 has 16 (IGNORE included)
  REQUIRE(in_header.count("CU_LAUNCH_ATTRIBUTE_IGNORE") == 1);

  std::map<int, std::string> translated;  // id -> the name error messages use
  std::set<std::string> names;
  unsigned visits = 0;
  cudrv::detail::for_each_launch_attribute(cudrv::launch_config{}, [&](bool wanted, CUlaunchAttributeID id,
                                                                       const char* name, unsigned paths, const auto&) {
    CHECK_FALSE(wanted);  // a default launch_config sets no attribute
    CHECK(paths != 0);
    translated[static_cast<int>(id)] = name;
    names.insert(name);
    ++visits;
  });
  CHECK(visits == translated.size());        // each id once
  CHECK(names.size() == translated.size());  // each name once
  CHECK(visits == cudrv::detail::max_launch_attributes);
  std::set<int> stream_only;
  for (CUlaunchAttributeID id : cudrv::detail::stream_only_launch_attributes) {
    stream_only.insert(static_cast<int>(id));
  }

  for (const auto& [name, value] : in_header) {
    INFO(name << " = " << value);
    if (name == "CU_LAUNCH_ATTRIBUTE_IGNORE") {
      CHECK(translated.count(value) == 0);
    } else if (stream_only.count(value) != 0) {
      CHECK(translated.count(value) == 0);  // documented as stream-only: no launch carries it
    } else {
      CHECK(translated.count(value) == 1);  // a new toolkit's attribute fails here, with its name
    }
  }
  // And nothing is translated that cuda.h lacks.
  std::set<int> values;
  for (const auto& entry : in_header) {
    values.insert(entry.second);
  }
  for (const auto& [value, name] : translated) {
    INFO(name);
    CHECK(values.count(value) == 1);
  }
}

TEST_CASE("launch attributes: a default launch_config sets none, each field alone needs the extended launch",
          "[launch-attributes]") {
  CHECK_FALSE(cudrv::launch_config{}.needs_extended_launch());
  CHECK_FALSE(cudrv::launch_config{.grid = 4, .block = 32, .dynamic_shared_memory = 128}.needs_extended_launch());
  int dummy = 0;
  const cudrv::launch_config one_each[] = {
      {.cluster = 2},
      {.cooperative = true},
      {.programmatic_stream_serialization = true},
      {.priority = 0},
      {.access_policy = {.base = &dummy, .bytes = 4}},
      {.cluster_scheduling = cudrv::cluster_scheduling_policy::default_policy},
      {.preferred_cluster = 2},
      {.programmatic_event = {.event = cudrv::launch_event{cudrv::event_ref::from_native_handle(nullptr)}}},
      {.completion_event = {.event = cudrv::launch_event{cudrv::event_ref::from_native_handle(nullptr)}}},
      {.memory_sync_domain = cudrv::memory_sync_domain::default_domain},
      {.memory_sync_domain_map = cudrv::memory_sync_domain_map{}},
      {.shared_memory_carveout = cudrv::shared_memory_carveout::max_l1},
      {.device_updatable = true},
      {.nvlink_util_centric_scheduling = true},
  };
  for (const cudrv::launch_config& c : one_each) {
    CHECK(c.needs_extended_launch());
    unsigned set = 0;
    cudrv::detail::for_each_launch_attribute(c, [&](bool wanted, CUlaunchAttributeID, const char*, unsigned,
                                                    const auto&) { set += wanted ? 1 : 0; });
    CHECK(set == 1);
  }
}

#endif
