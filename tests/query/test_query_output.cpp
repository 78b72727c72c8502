// cudrv-query without a GPU: selectors, colour choice, and the text and JSON output of every view
// for made-up devices (random values), the JSON validated against docs/cudrv-query.schema.json.
#include <catch2/catch.hpp>

#include <cuda.h>

#include <fstream>
#include <random>
#include <sstream>

#include <cudrv/version.hpp>

#include "query.hpp"
#include "query_test_support.hpp"

using namespace cudrv_query;
using nlohmann::json;

namespace {

std::string hex_string(std::mt19937& rng, int digits) {
  const char* hex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < digits; ++i) s += hex[rng() % 16];
  return s;
}

std::string random_uuid(std::mt19937& rng) {
  return "GPU-" + hex_string(rng, 8) + "-" + hex_string(rng, 4) + "-" + hex_string(rng, 4) + "-" + hex_string(rng, 4) +
         "-" + hex_string(rng, 12);
}

device_info make_device(std::mt19937& rng, int ordinal, bool with_nvml) {
  device_info d;
  d.ordinal = ordinal;
  d.name = "Test GPU " + hex_string(rng, 6);
  d.cc_major = 7 + static_cast<int>(rng() % 4);
  d.cc_minor = static_cast<int>(rng() % 10);
  d.multiprocessors = 1 + static_cast<int>(rng() % 200);
  d.total_memory = (std::size_t{1} << 30) + rng() % (std::size_t{1} << 36);
  d.sm_clock_khz = 1000000 + static_cast<int>(rng() % 1000000);
  d.memory_clock_khz = 1000000 + static_cast<int>(rng() % 2000000);
  d.uuid = random_uuid(rng);
  char pci[32];
  std::snprintf(pci, sizeof(pci), "0000:%02x:00.0", static_cast<unsigned>(rng() % 256));
  d.pci_bus_id = pci;
  if (with_nvml) {
    nvml_device n;
    n.index = static_cast<unsigned>(rng() % 8);
    n.uuid = d.uuid;
    n.memory_total_bytes = d.total_memory + rng() % (std::size_t{1} << 29);
    n.memory_free_bytes = *n.memory_total_bytes / 2;
    n.memory_used_bytes = *n.memory_total_bytes - *n.memory_free_bytes;
    n.clocks = {rng() % 2000, rng() % 2000, rng() % 3000};
    n.max_clocks = {1000 + rng() % 2000, 1000 + rng() % 2000, 1000 + rng() % 3000};
    n.temperature_c = 20 + rng() % 60;
    n.power_draw_w = 50 + (rng() % 60000) / 100.0;
    n.power_limit_w = 700.0;
    n.pcie_generation = 1 + rng() % 5;
    n.pcie_max_generation = 5;
    n.pcie_width = 16;
    n.pcie_max_width = 16;
    n.ecc_enabled = true;
    n.ecc_pending = true;
    n.mig_enabled = false;
    n.mig_pending = false;
    n.utilization_gpu_percent = rng() % 101;
    n.utilization_memory_percent = rng() % 101;
    n.performance_state = static_cast<int>(rng() % 16);
    n.persistence_mode = (rng() % 2) == 1;
    d.nvml = n;
  }
  return d;
}

/// Two devices (one with NVML data), every view's parts filled with random values.
system_info make_system(std::mt19937& rng) {
  system_info info;
  info.driver_available = true;
  info.driver_version = 13000;
  info.driver_library = "/usr/lib/x86_64-linux-gnu/libcuda.so.1";
  info.toolkit_version = 13000;
  info.nvrtc = {true, true, 13000, ""};
  info.nvml.available = true;
  info.nvml.library = "libnvidia-ml.so.1";
  info.nvml.driver_version = "580.159.04";
  info.nvml.nvml_version = "13.580.159.04";
  info.visible_devices = "0,1";
  info.devices.push_back(make_device(rng, 0, true));
  info.devices.push_back(make_device(rng, 1, false));
  info.device_count = 2;
  for (device_info& d : info.devices) {
    bool first = true;
    for (const attribute_desc& a : attribute_table()) {
      attribute_value v;
      v.desc = &a;
      if (first) {
        v.error = "CUDA_ERROR_INVALID_VALUE";  // one attribute the "driver" does not know
        first = false;
      } else {
        v.value = a.kind == attribute_kind::boolean ? static_cast<long long>(rng() % 2)
                                                    : static_cast<long long>(rng() % 100000);
      }
      d.attributes.push_back(v);
    }
  }
  for (int from = 0; from < 2; ++from) {
    p2p_link l;
    l.from = from;
    l.to = 1 - from;
    l.can_access = true;
    l.performance_rank = static_cast<int>(rng() % 3);
    l.access_supported = true;
    l.native_atomic_supported = (rng() % 2) == 1;
    l.cuda_array_access_supported = true;
    l.only_partial_native_atomic_supported = false;
    info.p2p.push_back(l);
  }
  bench_results b;
  b.options.size = 1 + rng() % (std::size_t{1} << 30);
  for (const device_info& d : info.devices) {
    bench_device r;
    r.ordinal = d.ordinal;
    r.h2d_pinned_gbps = 1 + rng() % 60;
    r.d2h_pinned_gbps = 1 + rng() % 60;
    r.h2d_pageable_gbps = 1 + rng() % 20;
    r.d2h_pageable_gbps = 1 + rng() % 20;
    r.d2d_copy_gbps = 100 + rng() % 2000;
    r.launch_us = 1 + (rng() % 1000) / 100.0;
    r.launch_sync_us = 5 + (rng() % 1000) / 100.0;
    b.devices.push_back(r);
  }
  b.p2p.push_back({0, 1, true, 100.0 + rng() % 300});
  b.p2p.push_back({1, 0, false, 10.0 + rng() % 30});
  info.bench = b;
  return info;
}

std::string text_of(const system_info& info, view v, bool color) {
  std::ostringstream out;
  print_text(out, info, v, text_style{color});
  return out.str();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("selectors are classified as ordinals, UUIDs and PCI bus ids", "[query]") {
  std::string error;
  auto o = parse_selector("12", error);
  REQUIRE(o);
  CHECK(o->type == selector::kind::ordinal);
  CHECK(o->ordinal == 12);

  for (std::string u : {"GPU-8f3a", "gpu-8F3A", "MIG-1a2b-3c", "MIG-GPU-8f3a0000/1/0"}) {
    INFO(u);
    auto s = parse_selector(u, error);
    REQUIRE(s);
    CHECK(s->type == selector::kind::uuid);
  }

  struct pci_case {
    const char* text;
    unsigned int domain, bus, device, function;
  };
  for (pci_case c : {pci_case{"0000:c1:00.0", 0, 0xc1, 0, 0}, pci_case{"00000000:C1:00.0", 0, 0xc1, 0, 0},
                     pci_case{"0001:1b:1f.7", 1, 0x1b, 0x1f, 7}, pci_case{"c1:00.0", 0, 0xc1, 0, 0}}) {
    INFO(c.text);
    auto s = parse_selector(c.text, error);
    REQUIRE(s);
    CHECK(s->type == selector::kind::pci_bus_id);
    CHECK(s->pci_domain == c.domain);
    CHECK(s->pci_bus == c.bus);
    CHECK(s->pci_device == c.device);
    CHECK(s->pci_function == c.function);
  }

  for (std::string bad :
       {"", "-1", "99999999999999999999", "abc", "GPU-", "GPU-8f3a!", "GPU-zz", "MIG-", "MIG-GPU-", "GPU-8f3a/1",
        "0000:c1:00.8", "0000:c1:20.0", "0000:1c1:00.0", "000000000:c1:00.0", "c1-00.0"}) {
    INFO("'" << bad << "'");
    error.clear();
    CHECK_FALSE(parse_selector(bad, error));
    CHECK_FALSE(error.empty());
  }
}

TEST_CASE("select_devices keeps the matching devices in ordinal order and names the valid selectors", "[query]") {
  std::mt19937 rng(Catch::rngSeed());
  std::vector<device_info> all;
  for (int i = 0; i < 4; ++i) all.push_back(make_device(rng, i, false));
  all[3].uuid = all[2].uuid.substr(0, 12) + "ffff-ffff-ffffffffffff";  // shares a 12-character prefix with #2
  all[1].pci_bus_id = "0000:c1:00.0";

  auto pick = [&](std::vector<std::string> selectors, std::vector<int> expected) {
    std::vector<device_info> devices = all;
    std::optional<failure> f = select_devices(devices, selectors);
    REQUIRE_FALSE(f);
    std::vector<int> got;
    for (const device_info& d : devices) got.push_back(d.ordinal);
    CHECK(got == expected);
  };
  pick({}, {0, 1, 2, 3});
  pick({"2"}, {2});
  pick({"3", "0"}, {0, 3});
  pick({"1", "1", all[1].uuid}, {1});
  pick({all[0].uuid.substr(0, 10)}, {0});
  std::string upper = all[2].uuid;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  pick({upper}, {2});
  pick({"00000000:C1:00.0"}, {1});
  pick({"c1:00.0", "0"}, {0, 1});

  auto refuse = [&](std::vector<std::string> selectors, const std::string& message_part) {
    std::vector<device_info> devices = all;
    std::optional<failure> f = select_devices(devices, selectors);
    REQUIRE(f);
    CHECK(f->status == exit_usage);
    INFO(f->message);
    CHECK(contains(f->message, message_part));
    REQUIRE(f->valid_selectors.size() == all.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
      CHECK(contains(f->valid_selectors[i], all[i].uuid));
      CHECK(contains(f->valid_selectors[i], all[i].pci_bus_id));
    }
    CHECK(devices.size() == all.size());  // untouched on failure
  };
  refuse({"4"}, "no device matches --device 4");
  refuse({"0", "GPU-00000000-0000-0000-0000-000000000000"}, "no device matches");
  refuse({"0000:ee:00.0"}, "no device matches");
  refuse({all[2].uuid.substr(0, 12)}, "matches 2 devices");
  refuse({"banana"}, "is not a device selector");
}

TEST_CASE("colour follows --color, NO_COLOR, TERM and the terminal", "[query]") {
  CHECK(color_wanted("auto", "", "xterm", true));
  CHECK_FALSE(color_wanted("auto", "", "xterm", false));
  CHECK_FALSE(color_wanted("auto", "1", "xterm", true));
  CHECK_FALSE(color_wanted("auto", "", "dumb", true));
  CHECK(color_wanted("auto", "", "", true));  // NO_COLOR set but empty does not count
  CHECK(color_wanted("always", "1", "dumb", false));
  CHECK_FALSE(color_wanted("never", "", "xterm", true));
}

TEST_CASE("numbers are formatted with their units", "[query]") {
  CHECK(format_cuda_version(13000) == "13.0");
  CHECK(format_cuda_version(12090) == "12.9");
  CHECK(format_cuda_version(0) == "unknown");
  CHECK(format_memory(100) == "100 B");
  CHECK(format_memory(48 * 1024) == "48 KiB");
  CHECK(format_memory(std::size_t{512} << 20) == "512 MiB");
  CHECK(format_memory((std::size_t{79} << 30) + (std::size_t{600} << 20)) == "79.6 GiB");
}

TEST_CASE("the schema names cudrv-query and the documents name the tool and its version", "[query]") {
  std::ifstream in(CUDRV_TEST_SCHEMA);
  REQUIRE(in.good());
  const json schema = json::parse(in);
  CHECK(schema["$id"] == "cudrv-query.schema.json");  // relative: resolvable by old and new validators
  CHECK(schema["title"] == "cudrv-query --json");
  CHECK(schema["properties"]["tool"]["properties"]["name"]["const"] == "cudrv-query");
  std::mt19937 rng(Catch::rngSeed());
  const json j = query_test::parse(to_json(make_system(rng), view::summary, nullptr));
  CHECK(j["tool"]["name"] == "cudrv-query");
  CHECK(j["tool"]["version"] == cudrv::version_string());
}

TEST_CASE("the JSON of every view validates against the schema and carries the collected values", "[query]") {
  std::mt19937 rng(Catch::rngSeed());
  system_info info = make_system(rng);
  for (view v : {view::summary, view::details, view::p2p, view::bench}) {
    INFO(view_name(v));
    std::string text = to_json(info, v, nullptr);
    REQUIRE_SCHEMA_VALID(text);
    json j = query_test::parse(text);
    CHECK(j["schema_version"] == json_schema_version);
    CHECK(j["view"] == view_name(v));
    CHECK(j["status"] == "ok");
    CHECK(j["exit_code"] == 0);
    REQUIRE(j["devices"].size() == info.devices.size());
    for (std::size_t i = 0; i < info.devices.size(); ++i) {
      const device_info& d = info.devices[i];
      const json& jd = j["devices"][i];
      CHECK(jd["ordinal"] == d.ordinal);
      CHECK(jd["name"] == d.name);
      CHECK(jd["uuid"] == d.uuid);
      CHECK(jd["pci_bus_id"] == d.pci_bus_id);
      CHECK(jd["compute_capability"]["major"] == d.cc_major);
      CHECK(jd["multiprocessors"] == d.multiprocessors);
      CHECK(jd["memory"]["total_bytes"] == d.total_memory);
      CHECK(jd.contains("nvml") == d.nvml.has_value());
      CHECK(jd["memory"].contains("free_bytes") == d.nvml.has_value());
      if (d.nvml) {
        CHECK(jd["nvml"]["memory"]["total_bytes"] == *d.nvml->memory_total_bytes);
        CHECK(jd["nvml"]["max_clocks_mhz"]["sm"] == *d.nvml->max_clocks.sm_mhz);
        CHECK(jd["nvml"]["temperature_c"] == *d.nvml->temperature_c);
        CHECK(jd["nvml"]["pcie"]["generation"] == *d.nvml->pcie_generation);
      }
      CHECK(jd.contains("attributes") == (v == view::details));
      if (v == view::details) {
        REQUIRE(jd["attributes"].size() == attribute_table().size());
        for (const attribute_value& a : d.attributes) {
          const json& ja = jd["attributes"][a.desc->key];
          if (a.value) {
            if (a.desc->kind == attribute_kind::boolean) {
              CHECK(ja["value"] == (*a.value != 0));
            } else {
              CHECK(ja["value"] == *a.value);
            }
          } else {
            CHECK(ja["value"].is_null());
            CHECK(ja["error"] == a.error);
          }
        }
      }
    }
    CHECK(j.contains("p2p") == (v == view::p2p));
    CHECK(j.contains("bench") == (v == view::bench));
    if (v == view::p2p) {
      REQUIRE(j["p2p"].size() == 2);
      CHECK(j["p2p"][0]["performance_rank"] == *info.p2p[0].performance_rank);
    }
    if (v == view::bench) {
      CHECK(j["bench"]["size_bytes"] == info.bench->options.size);
      CHECK(j["bench"]["devices"][1]["d2d_copy_gbps"] == Approx(info.bench->devices[1].d2d_copy_gbps));
      CHECK(j["bench"]["devices"][1]["d2d_read_write_gbps"] == Approx(2 * info.bench->devices[1].d2d_copy_gbps));
      CHECK(j["bench"]["p2p"][1]["peer_access"] == false);
    }
  }
}

TEST_CASE("failures are JSON documents that say why", "[query]") {
  std::mt19937 rng(Catch::rngSeed());
  system_info info = make_system(rng);
  failure usage{exit_usage, "no device matches --device 9", {"0, GPU-a, 0000:01:00.0", "1, GPU-b, 0000:02:00.0"}};
  std::string text = to_json(info, view::summary, &usage);
  REQUIRE_SCHEMA_VALID(text);
  json j = query_test::parse(text);
  CHECK(j["status"] == "usage_error");
  CHECK(j["exit_code"] == 1);
  CHECK(j["error"]["message"] == usage.message);
  CHECK(j["error"]["valid_selectors"].size() == 2);

  failure cuda{exit_cuda_error, "CUDA error: out of memory", {}};
  info.bench.reset();
  text = to_json(info, view::bench, &cuda);
  REQUIRE_SCHEMA_VALID(text);
  CHECK(query_test::parse(text)["status"] == "cuda_error");

  // A run whose device queries failed: nothing but the environment and the failure is known.
  system_info nothing;
  read_environment(nothing);
  text = to_json(nothing, view::details, &cuda);
  REQUIRE_SCHEMA_VALID(text);
  CHECK(query_test::parse(text)["toolkit"]["cuda_version"] == CUDA_VERSION);

  // Tiny bench sizes round rates to 0; still a valid document.
  system_info tiny = make_system(rng);
  tiny.bench->devices[0].h2d_pageable_gbps = 0.0001;
  tiny.bench->devices[0].launch_us = 0;
  REQUIRE_SCHEMA_VALID(to_json(tiny, view::bench, nullptr));

  // Strings that are not UTF-8 (an environment variable, a dlerror text) do not break the document.
  tiny.visible_devices = std::string("\xff\xfe"
                                     "0");
  tiny.nvml.reason = "bad \xc3";
  text = to_json(tiny, view::summary, nullptr);
  REQUIRE_SCHEMA_VALID(text);
  CHECK(query_test::parse(text)["environment"]["CUDA_VISIBLE_DEVICES"] == "\xef\xbf\xbd\xef\xbf\xbd"
                                                                          "0");

  // The schema itself refuses what cudrv-query must never print.
  json bad = query_test::parse(to_json(info, view::summary, nullptr));
  bad["devices"][0]["surprise"] = 1;
  bool valid = true;
  (void)query_test::validate(bad.dump(), valid);
  CHECK_FALSE(valid);
  bad = query_test::parse(to_json(info, view::summary, nullptr));
  bad["status"] = "no_driver";  // without an error object and with exit_code 0
  (void)query_test::validate(bad.dump(), valid);
  CHECK_FALSE(valid);
}

TEST_CASE("the text of every view shows the collected values, coloured only on request", "[query]") {
  std::mt19937 rng(Catch::rngSeed());
  system_info info = make_system(rng);
  for (view v : {view::summary, view::details, view::p2p, view::bench}) {
    INFO(view_name(v));
    std::string plain = text_of(info, v, false);
    std::string colored = text_of(info, v, true);
    CHECK_FALSE(contains(plain, "\033["));
    CHECK(contains(colored, "\033["));
    CHECK(contains(plain, "CUDA driver"));
    CHECK(contains(plain, "580.159.04"));
    if (v != view::bench) {
      for (const device_info& d : info.devices) {
        CHECK(contains(plain, d.name));
        CHECK(contains(plain, d.uuid));
        CHECK(contains(plain, d.pci_bus_id));
      }
    }
  }
  std::string summary = text_of(info, view::summary, false);
  CHECK(contains(summary, format_memory(info.devices[0].total_memory)));
  CHECK(contains(summary, format_memory(*info.devices[0].nvml->memory_free_bytes)));
  CHECK(contains(summary, "n/a"));  // the device without NVML has no free-memory figure
  for (const device_info& d : info.devices) {
    CHECK(contains(summary, std::to_string(d.sm_clock_khz / 1000) + "/" + std::to_string(d.memory_clock_khz / 1000)));
  }

  std::string details = text_of(info, view::details, false);
  for (const char* group : group_names()) CHECK(contains(details, group));
  CHECK(contains(details, "unknown (CUDA_ERROR_INVALID_VALUE)"));
  CHECK(contains(details, "Total global memory"));
  CHECK(contains(details, std::to_string(info.devices[1].total_memory) + " bytes"));
  CHECK(contains(details, "Temperature"));

  std::string bench = text_of(info, view::bench, false);
  char expected[64];
  std::snprintf(expected, sizeof(expected), "%.1f GB/s", info.bench->devices[0].h2d_pinned_gbps);
  CHECK(contains(bench, expected));
  CHECK(contains(bench, "read + written"));
  CHECK(contains(bench, "*"));  // the staged pair is marked

  info.devices.resize(1);
  CHECK(contains(text_of(info, view::p2p, false), "needs two devices"));
}
