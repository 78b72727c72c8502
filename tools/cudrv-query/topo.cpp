// cudrv-query --topo (issue 36: topology): collecting the matrix from NVML and sysfs, and its text.
#include "topo.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string_view>
#include <tuple>
#include <utility>

#include <cudrv/error.hpp>
#include <cudrv/system.hpp>

#include "query.hpp"

namespace cudrv_query {

namespace {

namespace fs = std::filesystem;
namespace sys = cudrv::system;

// The first line of a small sysfs file; empty when it cannot be read.
std::string read_line(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

// Where a PCI function sits: its host bridge (pci<domain>:<bus>), the bridges and itself below it, and
// its NUMA node (-1 when sysfs gives none).
struct pci_path {
  std::string host_bridge;
  std::vector<std::string> chain;
  int numa = -1;
};

std::optional<pci_path> read_pci_path(const std::string& root, const std::string& bus_id) {
  std::error_code ec;
  const fs::path link = fs::path(root) / "bus" / "pci" / "devices" / bus_id;
  const fs::path real = fs::canonical(link, ec);
  if (ec) {
    return std::nullopt;
  }
  pci_path out;
  for (const fs::path& part : real) {
    const std::string s = part.string();
    if (out.host_bridge.empty()) {
      if (s.rfind("pci", 0) == 0) {
        out.host_bridge = s;
      }
    } else {
      out.chain.push_back(s);
    }
  }
  if (out.host_bridge.empty() || out.chain.empty()) {
    return std::nullopt;
  }
  const std::string numa = read_line(link / "numa_node");
  out.numa = numa.empty() ? -1 : std::atoi(numa.c_str());
  return out;
}

// An NVML PCI location as domain, bus, device (NVLink's far end is compared with a GPU's this way).
using pci_key = std::tuple<unsigned int, unsigned int, unsigned int>;

// What NVML says of one GPU for the matrix.
struct nvml_side {
  std::optional<sys::nvml_device> handle;
  std::vector<pci_key> gpu_link_ends;  // the far end of each active NVLink to a GPU
  std::optional<pci_key> pci;
};

// Every GPU NVML sees, by PCI location (a link's far end that is none of them is no GPU).
std::vector<pci_key> every_gpu() {
  std::vector<pci_key> out;
  for (const sys::nvml_device& gpu : quietly([] { return sys::devices(); })) {
    if (std::optional<sys::pci_info> p = quietly([&] { return gpu.pci(); })) {
      out.emplace_back(p->domain, p->bus, p->device);
    }
  }
  return out;
}

// Sorts the GPU's active NVLinks: to a GPU (gpu_link_ends) or to an NVSwitch (nvswitch_links). Where
// NVML cannot say what a link reaches (an NVML without nvmlDeviceGetNvLinkRemoteDeviceType, or one
// that answers "unknown"), a far end that is no GPU NVML sees is taken for an NVSwitch.
void read_links(const sys::nvml_device& h, const std::vector<pci_key>& gpus, nvml_side& side, topo_gpu& g) {
  for (const sys::nvlink_readings& l : quietly([&] { return h.nvlinks(); })) {
    if (!l.active) {
      continue;
    }
    const std::optional<sys::nvlink_remote_device> type = quietly([&] { return h.nvlink_remote_type(l.link); });
    const bool known = type == sys::nvlink_remote_device::gpu || type == sys::nvlink_remote_device::nvswitch;
    std::optional<pci_key> end;
    if (l.remote) {
      end = pci_key{l.remote->domain, l.remote->bus, l.remote->device};
    }
    const bool to_gpu =
        known ? type == sys::nvlink_remote_device::gpu : end && std::find(gpus.begin(), gpus.end(), *end) != gpus.end();
    if (type == sys::nvlink_remote_device::nvswitch || (!known && end && !to_gpu)) {
      ++g.nvswitch_links;
    } else if (to_gpu && end) {
      side.gpu_link_ends.push_back(*end);
    }
  }
}

nvml_side read_nvml(const system_info& info, const device_info& d, const std::vector<pci_key>& gpus, topo_gpu& g) {
  nvml_side side;
  if (!info.nvml.available) {
    return side;
  }
  side.handle = quietly([&] { return std::optional(sys::nvml_device::by_uuid(d.uuid)); });
  if (side.handle && quietly([&] { return side.handle->is_mig_instance(); })) {
    side.handle = quietly([&] { return std::optional(side.handle->parent()); });  // the GPU's links and affinity
  }
  if (!side.handle) {
    return side;
  }
  const sys::nvml_device h = *side.handle;
  g.nvml_index = quietly([&] { return h.index(); });
  g.cpus = quietly([&] { return h.cpu_affinity(); });
  g.numa_nodes = quietly([&] { return h.memory_affinity(); });
  g.gpu_numa_id = quietly([&] { return h.numa_node_id(); });
  if (std::optional<sys::pci_info> p = quietly([&] { return h.pci(); })) {
    side.pci = pci_key{p->domain, p->bus, p->device};
  }
  read_links(h, gpus, side, g);
  return side;
}

// Fills what NVML did not give from sysfs: the CPU list and the NUMA node of the GPU's PCI function.
void read_sysfs_affinity(const std::string& root, topo_gpu& g) {
  const fs::path dev = fs::path(root) / "bus" / "pci" / "devices" / g.pci_bus_id;
  if (!g.cpus) {
    if (std::string list = read_line(dev / "local_cpulist"); !list.empty()) {
      g.cpus = parse_id_list(list);
    }
  }
  if (!g.numa_nodes) {
    if (std::string node = read_line(dev / "numa_node"); !node.empty() && std::atoi(node.c_str()) >= 0) {
      g.numa_nodes = std::vector<unsigned int>{static_cast<unsigned int>(std::atoi(node.c_str()))};
    }
  }
}

topo_relation gpu_pair(const std::string& root, const topo_gpu& a, const topo_gpu& b, const nvml_side& na,
                       const nvml_side& nb) {
  topo_relation r;
  if (na.handle && nb.handle) {
    if (std::optional<sys::topology_level> level =
            quietly([&] { return na.handle->topology_common_ancestor(*nb.handle); })) {
      if (std::string_view name = sys::to_string(*level); !name.empty()) {
        r.pcie = std::string(name);
      }
    }
  }
  if (!r.pcie) {
    r.pcie = sysfs_pcie_relation(root, a.pci_bus_id, b.pci_bus_id);
  }
  if (nb.pci) {
    r.nvlinks = static_cast<unsigned int>(std::count(na.gpu_link_ends.begin(), na.gpu_link_ends.end(), *nb.pci));
  }
  if (a.nvswitch_links > 0 && b.nvswitch_links > 0) {
    r.nvlinks += std::min(a.nvswitch_links, b.nvswitch_links);
    r.via_nvswitch = true;
  }
  r.name = r.nvlinks > 0 ? "NV" + std::to_string(r.nvlinks) : r.pcie.value_or("N/A");
  return r;
}

std::vector<topo_nic> read_nics(const std::string& root) {
  std::vector<topo_nic> nics;
  std::error_code ec;
  for (fs::directory_iterator it(fs::path(root) / "class" / "infiniband", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code link_ec;
    const fs::path device = fs::canonical(it->path() / "device", link_ec);
    if (!link_ec) {
      nics.push_back(topo_nic{it->path().filename().string(), device.filename().string()});
    }
  }
  std::sort(nics.begin(), nics.end(), [](const topo_nic& a, const topo_nic& b) {
    return std::tie(a.pci_bus_id, a.name) < std::tie(b.pci_bus_id, b.name);
  });
  return nics;
}

topo_relation sysfs_pair(const std::string& root, const std::string& a, const std::string& b) {
  topo_relation r;
  r.pcie = sysfs_pcie_relation(root, a, b);
  r.name = r.pcie.value_or("N/A");
  return r;
}

}  // namespace

std::string topology_info::label(std::size_t i) const {
  return i < gpus.size() ? "GPU" + std::to_string(gpus[i].ordinal) : "NIC" + std::to_string(i - gpus.size());
}

std::string sysfs_root() {
  const char* root = std::getenv("CUDRV_QUERY_SYSFS_ROOT");
  return root != nullptr && *root != '\0' ? root : "/sys";
}

std::string format_id_list(const std::vector<unsigned int>& ids) {
  std::string out;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) {
      ++j;
    }
    if (!out.empty()) {
      out.push_back(',');
    }
    out.append(std::to_string(ids[i]));
    if (j > i) {
      out.push_back('-');
      out.append(std::to_string(ids[j]));
    }
    i = j + 1;
  }
  return out.empty() ? "N/A" : out;
}

std::optional<std::vector<unsigned int>> parse_id_list(const std::string& text) {
  std::vector<unsigned int> out;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(',', at);
    const std::string range = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    const std::size_t dash = range.find('-');
    auto number = [](const std::string& digits, unsigned long& v) {
      if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) {
        return false;
      }
      v = std::stoul(digits);
      return true;
    };
    unsigned long lo = 0;
    unsigned long hi = 0;
    const bool ok = dash == std::string::npos ? number(range, lo) && number(range, hi)
                                              : number(range.substr(0, dash), lo) && number(range.substr(dash + 1), hi);
    if (!ok || hi < lo || hi - lo > (1UL << 20)) {
      return std::nullopt;
    }
    for (unsigned long v = lo; v <= hi; ++v) {
      out.push_back(static_cast<unsigned int>(v));
    }
    at = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

std::optional<std::string> sysfs_pcie_relation(const std::string& root, const std::string& a, const std::string& b) {
  const std::optional<pci_path> pa = read_pci_path(root, a);
  const std::optional<pci_path> pb = read_pci_path(root, b);
  if (!pa || !pb) {
    return std::nullopt;
  }
  if (pa->host_bridge != pb->host_bridge) {
    return pa->numa == pb->numa ? "NODE" : "SYS";
  }
  // The bridges both paths go through, below the host bridge (the endpoints themselves excluded).
  std::size_t common = 0;
  while (common + 1 < pa->chain.size() && common + 1 < pb->chain.size() && pa->chain[common] == pb->chain[common]) {
    ++common;
  }
  if (common == 0) {
    return "PHB";
  }
  // Below one switch: at most its downstream port and the endpoint on either side of the shared part.
  return pa->chain.size() - common <= 2 && pb->chain.size() - common <= 2 ? "PIX" : "PXB";
}

topology_info collect_topology(const system_info& info, const std::string& root) {
  topology_info t;
  std::vector<nvml_side> nvml;
  const std::vector<pci_key> every = info.nvml.available ? every_gpu() : std::vector<pci_key>{};
  for (const device_info& d : info.devices) {
    topo_gpu g;
    g.ordinal = d.ordinal;
    g.name = d.name;
    g.pci_bus_id = d.pci_bus_id;
    nvml.push_back(read_nvml(info, d, every, g));
    read_sysfs_affinity(root, g);
    t.gpus.push_back(std::move(g));
  }
  t.nics = read_nics(root);
  const std::size_t n = t.gpus.size() + t.nics.size();
  auto bus_id = [&](std::size_t i) {
    return i < t.gpus.size() ? t.gpus[i].pci_bus_id : t.nics[i - t.gpus.size()].pci_bus_id;
  };
  t.matrix.assign(n, std::vector<topo_relation>(n));
  // Each pair once, mirrored: the matrix is symmetric even where NVML answers the two directions apart.
  for (std::size_t i = 0; i < n; ++i) {
    t.matrix[i][i].name = "X";
    for (std::size_t j = i + 1; j < n; ++j) {
      if (j < t.gpus.size()) {
        t.matrix[i][j] = gpu_pair(root, t.gpus[i], t.gpus[j], nvml[i], nvml[j]);
      } else {
        t.matrix[i][j] = sysfs_pair(root, bus_id(i), bus_id(j));
      }
      t.matrix[j][i] = t.matrix[i][j];
    }
  }
  return t;
}

// --- text ------------------------------------------------------------------------------------------

namespace {

constexpr const char* legend[][2] = {
    {"X", "the same device"},
    {"SYS", "PCIe and the link between CPU sockets (NUMA nodes): UPI, Infinity Fabric, ..."},
    {"NODE", "PCIe and the fabric between host bridges of one NUMA node"},
    {"PHB", "PCIe through one host bridge (the CPU's root complex)"},
    {"PXB", "PCIe through several switches, below one host bridge"},
    {"PIX", "PCIe through one switch at most"},
    {"NV#", "# NVLinks bonded together (direct, or through NVSwitches)"},
};

std::string bold(const std::string& s, bool color) { return color ? "\033[1m" + s + "\033[0m" : s; }

// Left-aligned columns separated by two spaces, no trailing blanks; the first row bold.
void print_columns(std::ostream& out, const std::vector<std::vector<std::string>>& rows, bool color) {
  std::vector<std::size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()), 0);
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::string line;
    for (std::size_t c = 0; c < rows[i].size(); ++c) {
      line += rows[i][c];
      if (c + 1 < rows[i].size()) line += std::string(width[c] - rows[i][c].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << (i == 0 ? bold(line, color) : line) << '\n';
  }
}

}  // namespace

void print_topology(std::ostream& out, const topology_info& t, bool color) {
  const std::size_t n = t.gpus.size() + t.nics.size();
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>{""});
  for (std::size_t j = 0; j < n; ++j) rows[0].push_back(t.label(j));
  for (const char* h : {"CPU Affinity", "NUMA Affinity", "GPU NUMA ID"}) rows[0].emplace_back(h);
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::string> row{t.label(i)};
    for (std::size_t j = 0; j < n; ++j) row.push_back(t.matrix[i][j].name);
    if (i < t.gpus.size()) {
      const topo_gpu& g = t.gpus[i];
      row.push_back(g.cpus ? format_id_list(*g.cpus) : "N/A");
      row.push_back(g.numa_nodes ? format_id_list(*g.numa_nodes) : "N/A");
      row.push_back(g.gpu_numa_id ? std::to_string(*g.gpu_numa_id) : "N/A");
    }
    rows.push_back(std::move(row));
  }
  out << '\n';
  print_columns(out, rows, color);
  out << "\nLegend:\n\n";
  for (const auto& [name, meaning] : legend) {
    out << "  " << name << std::string(5 - std::string_view(name).size(), ' ') << "= " << meaning << '\n';
  }
  out << "\nGPU Legend (GPU<n> is CUDA device n; nvidia-smi numbers GPUs by NVML index):\n\n";
  for (const topo_gpu& g : t.gpus) {
    out << "  GPU" << g.ordinal << ": "
        << (g.nvml_index ? "NVML index " + std::to_string(*g.nvml_index) : std::string("NVML index N/A")) << ", "
        << g.pci_bus_id << ", " << g.name
        << (g.nvswitch_links > 0 ? ", " + std::to_string(g.nvswitch_links) + " NVLinks to NVSwitches" : "") << '\n';
  }
  if (!t.nics.empty()) {
    out << "\nNIC Legend:\n\n";
    for (std::size_t k = 0; k < t.nics.size(); ++k) {
      out << "  NIC" << k << ": " << t.nics[k].name << '\n';
    }
  }
}

}  // namespace cudrv_query
