// cudrv-query --bandwidth: the text and the JSON of the view's results (no driver needed, so the
// tests check them on a made-up result).
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "bandwidth.hpp"
#include "bandwidth_detail.hpp"

namespace cudrv_query {

namespace {

using json = nlohmann::ordered_json;

constexpr int column_width = 10;  // nvbandwidth's

std::string pad_left(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

std::string two_decimals(double v) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.2f", v);
  return buffer;
}

/// Rounded to two decimals, as the text shows them.
double rounded(double v) { return std::round(v * 100.0) / 100.0; }

double matrix_sum(const bandwidth_matrix& m) {
  double sum = 0;
  for (const auto& row : m.values) {
    for (const std::optional<double>& v : row) {
      sum += v.value_or(0.0);
    }
  }
  return sum;
}

std::string size_text(std::size_t bytes) {
  if (bytes % (std::size_t{1} << 20) == 0) {
    return std::to_string(bytes >> 20) + " MiB";
  }
  return std::to_string(bytes) + " bytes";
}

}  // namespace

void print_bandwidth_text(std::ostream& out, const bandwidth_results& r) {
  const bandwidth_options& o = r.options;
  out << "\nBandwidth: " << size_text(o.size) << " per copy, " << o.iterations << " copies per sample, median of "
      << o.samples << " samples; GB/s = 1e9 bytes per second (nvbandwidth's method).\n";
  out << "Host buffers: page-locked, on the GPU's NUMA node:";
  for (const bandwidth_host_node& n : r.host_nodes) {
    const char* note = !n.used ? " (no host buffer)" : n.bound ? "" : " (not bound)";
    out << " GPU " << n.ordinal << " node " << (n.numa_node < 0 ? std::string("unknown") : std::to_string(n.numa_node))
        << note << (&n == &r.host_nodes.back() ? "" : ",");
  }
  out << '\n';
  for (const bandwidth_test_result& t : r.tests) {
    out << '\n' << "Running " << t.desc->name << ".\n";
    if (!t.skipped.empty()) {
      out << "Waived: " << t.skipped << ".\n";
      continue;
    }
    for (const bandwidth_matrix& m : t.matrices) {
      std::size_t label_width = 2;
      for (const std::string& l : m.row_labels) {
        label_width = std::max(label_width, l.size());
      }
      out << m.title << '\n' << std::string(label_width, ' ');
      for (const std::string& c : m.column_labels) {
        out << pad_left(c, column_width);
      }
      out << '\n';
      for (std::size_t i = 0; i < m.values.size(); ++i) {
        out << pad_left(m.row_labels[i], label_width);
        for (const std::optional<double>& v : m.values[i]) {
          out << pad_left(v ? two_decimals(*v) : "N/A", column_width);
        }
        out << '\n';
      }
      out << "\nSUM " << m.key << ' ' << two_decimals(matrix_sum(m)) << '\n';
    }
  }
}

json detail::bandwidth_to_json(const bandwidth_results& r) {
  json b;
  b["size_bytes"] = r.options.size;
  b["iterations"] = r.options.iterations;
  b["samples"] = r.options.samples;
  b["statistic"] = "median";
  b["method"] =
      "nvbandwidth's: per sample a spin kernel holds the streams while the copies are enqueued; bandwidth = bytes "
      "copied / time between CUDA events, 1e9 bytes per second; the median over the samples";
  json nodes = json::array();
  for (const bandwidth_host_node& n : r.host_nodes) {
    json j{{"ordinal", n.ordinal}, {"bound", n.bound}};
    j["numa_node"] = n.numa_node < 0 ? json(nullptr) : json(n.numa_node);
    nodes.push_back(j);
  }
  b["host_nodes"] = nodes;
  json tests = json::array();
  for (const bandwidth_test_result& t : r.tests) {
    json j;
    j["name"] = t.desc->name;
    j["nvbandwidth_name"] = t.desc->nvbandwidth_name != nullptr ? json(t.desc->nvbandwidth_name) : json(nullptr);
    j["engine"] = t.desc->engine == bandwidth_engine::ce ? "ce" : "sm";
    j["unit"] = t.desc->latency ? "ns" : "GB/s";
    j["status"] = t.skipped.empty() ? "passed" : "waived";
    if (!t.skipped.empty()) {
      j["reason"] = t.skipped;
    }
    json matrices = json::array();
    for (const bandwidth_matrix& m : t.matrices) {
      json values = json::array();
      for (const auto& row : m.values) {
        json vr = json::array();
        for (const std::optional<double>& v : row) {
          vr.push_back(v ? json(rounded(*v)) : json(nullptr));
        }
        values.push_back(vr);
      }
      matrices.push_back(json{{"key", m.key},
                              {"title", m.title},
                              {"rows", m.row_labels},
                              {"columns", m.column_labels},
                              {"values", values},
                              {"sum", rounded(matrix_sum(m))}});
    }
    j["matrices"] = matrices;
    tests.push_back(j);
  }
  b["tests"] = tests;
  return b;
}

}  // namespace cudrv_query
