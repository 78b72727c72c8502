// cudrv-query --topo on a GPU machine (issue 36: topology): the matrix and the affinity columns against
// `nvidia-smi topo -m` on the same machine. nvidia-smi labels GPUs by NVML index, cudrv-query by CUDA
// ordinal: the pairs are matched through gpus[].nvml_index, the NICs through their names.
#include <catch2/catch.hpp>

#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <cudrv/driver.hpp>

#include "query_test_support.hpp"
#include "support/test_support.hpp"

using nlohmann::json;
using query_test::run_query;

namespace {

/// What `nvidia-smi topo -m` prints: the labels of the matrix, its cells, the affinity columns of each
/// GPU row, and the NIC legend (NIC<k> -> name).
struct smi_topology {
  std::vector<std::string> labels;
  std::map<std::string, std::vector<std::string>> rows;  // label -> its cells, then its other columns
  std::map<std::string, std::string> nic_names;
};

std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string f;
  while (std::getline(in, f, '\t')) {
    const std::size_t b = f.find_first_not_of(' ');
    const std::size_t e = f.find_last_not_of(' ');
    if (b != std::string::npos) out.push_back(f.substr(b, e - b + 1));
  }
  return out;
}

std::optional<smi_topology> nvidia_smi_topology(std::string& why) {
  const query_test::process_result r = query_test::run_process({"nvidia-smi", "topo", "-m"});
  if (r.exit_code != 0) {
    why = "nvidia-smi topo -m failed or is missing (exit " + std::to_string(r.exit_code) + "): " + r.err;
    return std::nullopt;
  }
  smi_topology t;
  // nvidia-smi may underline or embolden the header with ANSI escapes, even into a pipe.
  const std::string text = std::regex_replace(r.out, std::regex("\x1b\\[[0-9;]*m"), "");
  const std::regex label("^(GPU|NIC)[0-9]+$");
  const std::regex legend("^\\s*(NIC[0-9]+): (\\S+)\\s*$");
  std::stringstream in(text);
  std::string line;
  bool header_seen = false;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, legend)) {
      t.nic_names[m[1]] = m[2];
      continue;
    }
    const std::vector<std::string> f = fields(line);
    if (f.empty()) continue;
    if (!header_seen && (line[0] == '\t' || line[0] == ' ') && std::regex_match(f[0], label)) {
      for (const std::string& h : f) {
        if (std::regex_match(h, label)) t.labels.push_back(h);
      }
      header_seen = true;
    } else if (header_seen && std::regex_match(f[0], label) && f.size() > t.labels.size()) {
      t.rows[f[0]] = std::vector<std::string>(f.begin() + 1, f.end());
    }
  }
  if (t.labels.empty()) {
    why = "no matrix in nvidia-smi topo -m's output:\n" + r.out;
    return std::nullopt;
  }
  return t;
}

}  // namespace

TEST_CASE("cudrv-query --topo gives nvidia-smi topo -m's matrix and affinity", "[query][gpu][topo]") {
  CUDRV_REQUIRE_GPU();
  std::string why;
  const std::optional<smi_topology> smi = nvidia_smi_topology(why);
  if (!smi) {
    WARN("SKIPPED: " << why);
    return;
  }
  const query_test::process_result r =
      run_query({"--topo", "--json"}, {}, {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDRV_QUERY_SYSFS_ROOT"});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE_SCHEMA_VALID(r.out);
  const json t = query_test::parse(r.out)["topology"];
  // nvidia-smi's label -> the index of cudrv-query's row: GPU<k> is NVML index k; NIC<k> by name.
  std::map<std::string, std::size_t> ours;
  for (std::size_t i = 0; i < t["gpus"].size(); ++i) {
    const json& g = t["gpus"][i];
    REQUIRE_FALSE(g["nvml_index"].is_null());
    ours["GPU" + std::to_string(g["nvml_index"].get<unsigned int>())] = i;
  }
  for (std::size_t k = 0; k < t["nics"].size(); ++k) {
    for (const auto& [smi_label, name] : smi->nic_names) {
      if (name == t["nics"][k]["name"]) ours[smi_label] = t["gpus"].size() + k;
    }
  }
  // Every GPU and NIC nvidia-smi shows, cudrv-query shows, and no more.
  CHECK(ours.size() == smi->labels.size());
  CHECK(t["labels"].size() == smi->labels.size());
  int gpus = 0;
  for (const std::string& a : smi->labels) {
    INFO("nvidia-smi row " << a);
    REQUIRE(ours.count(a) == 1);
    REQUIRE(smi->rows.count(a) == 1);
    const std::vector<std::string>& row = smi->rows.at(a);
    for (std::size_t j = 0; j < smi->labels.size(); ++j) {
      const std::string& b = smi->labels[j];
      INFO("column " << b);
      REQUIRE(ours.count(b) == 1);
      CHECK(t["matrix"][ours[a]][ours[b]] == row[j]);
    }
    if (a.rfind("GPU", 0) == 0 && row.size() >= smi->labels.size() + 3) {
      ++gpus;
      const json& g = t["gpus"][ours[a]];
      const std::size_t n = smi->labels.size();
      auto or_na = [](const json& v) { return v.is_null() ? std::string("N/A") : v.get<std::string>(); };
      CHECK(or_na(g["cpu_affinity"]) == row[n]);
      CHECK(or_na(g["numa_affinity"]) == row[n + 1]);
      CHECK((g["gpu_numa_id"].is_null() ? std::string("N/A") : std::to_string(g["gpu_numa_id"].get<int>())) ==
            row[n + 2]);
    }
  }
  CHECK(gpus == static_cast<int>(t["gpus"].size()));
  if (t["gpus"].size() < 2) {
    WARN("one GPU: the link matrix needs two (run on 2 or 4 GPUs)");
  }
  // The NV# of a pair is the count the JSON gives for it.
  for (const json& l : t["gpu_links"]) {
    if (l["nvlinks"].get<unsigned int>() > 0) {
      CHECK(l["relation"] == "NV" + std::to_string(l["nvlinks"].get<unsigned int>()));
    } else {
      CHECK(l["relation"] == l["pcie"]);
    }
  }
  const query_test::process_result text = run_query({"--topo", "--color", "never"});
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("NV#  = # NVLinks bonded together (direct, or through NVSwitches)") != std::string::npos);
  CHECK(text.out.find("CPU Affinity") != std::string::npos);
}
