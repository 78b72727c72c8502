// cudrv-query --topo (issue 36: topology): the link matrix between the selected GPUs and the RDMA NICs,
// with nvidia-smi's names (X, NV#, PIX, PXB, PHB, NODE, SYS), and each GPU's CPU and NUMA affinity.
//
// GPU pairs come from NVML (<cudrv/system.hpp>): NV# counts the active NVLinks that bond the pair (a
// GPU's links whose far end is the other GPU, plus, where both GPUs have links to NVSwitches, the smaller
// of their two counts of switch links: nvidia-smi's NV18 on an NVSwitch system); otherwise the PCIe level
// of nvmlDeviceGetTopologyCommonAncestor. NICs (NVML lists none) are read from sysfs
// (<root>/class/infiniband), and every relation that involves one is computed from the PCI paths in
// sysfs (<root>/bus/pci/devices/<bus id>), as is a GPU pair NVML cannot answer for. The sysfs root is
// /sys, or CUDRV_QUERY_SYSFS_ROOT (for tests only).
#pragma once

#include <cstddef>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace cudrv_query {

struct system_info;

/// One GPU of the topology view.
struct topo_gpu {
  int ordinal = 0;                                      ///< CUDA's ordinal (the matrix says GPU<ordinal>)
  std::optional<unsigned int> nvml_index;               ///< NVML's index (nvidia-smi's GPU<index>)
  std::string name;                                     ///< product name
  std::string pci_bus_id;                               ///< as CUDA writes it, e.g. 0000:18:00.0
  std::optional<std::vector<unsigned int>> cpus;        ///< CPU affinity (NVML, else sysfs local_cpulist)
  std::optional<std::vector<unsigned int>> numa_nodes;  ///< NUMA affinity (NVML, else sysfs numa_node)
  std::optional<unsigned int> gpu_numa_id;              ///< the GPU memory's own NUMA node (coherent systems)
  unsigned int nvswitch_links = 0;                      ///< active NVLinks to an NVSwitch
};

/// One RDMA NIC (an entry of <sysfs>/class/infiniband).
struct topo_nic {
  std::string name;        ///< e.g. mlx5_0
  std::string pci_bus_id;  ///< its PCI function, e.g. 0000:0c:00.0
};

/// How two endpoints of the matrix are connected.
struct topo_relation {
  std::string name;                 ///< X, NV<n>, PIX, PXB, PHB, NODE, SYS, or N/A when unknown
  unsigned int nvlinks = 0;         ///< the n of NV<n> (GPU pairs only)
  bool via_nvswitch = false;        ///< some of those links reach the other GPU through NVSwitches
  std::optional<std::string> pcie;  ///< the PCIe level (PIX ... SYS) whether or not NVLink bonds the pair
};

/// The content of the topology view.
struct topology_info {
  std::vector<topo_gpu> gpus;                      ///< the selected GPUs, in CUDA order
  std::vector<topo_nic> nics;                      ///< the NICs, by PCI bus id
  std::vector<std::vector<topo_relation>> matrix;  ///< square over gpus then nics
  /// @brief "GPU<ordinal>" for i < gpus.size(), else "NIC<i - gpus.size()>".
  [[nodiscard]] std::string label(std::size_t i) const;
};

/// The sysfs root: $CUDRV_QUERY_SYSFS_ROOT when set and not empty (for tests), else "/sys".
[[nodiscard]] std::string sysfs_root();

/// Reads the topology of the selected devices of @p info (NVML through cudrv::system, sysfs under
/// @p root). Never throws for what NVML or sysfs do not give: that is N/A.
[[nodiscard]] topology_info collect_topology(const system_info& info, const std::string& root);

/// "0-63,128-191" from ascending numbers, as nvidia-smi writes CPU lists; "N/A" for none.
[[nodiscard]] std::string format_id_list(const std::vector<unsigned int>& ids);

/// The numbers of a list such as "0-63,128-191" (sysfs's cpulist format); empty on a malformed list.
[[nodiscard]] std::optional<std::vector<unsigned int>> parse_id_list(const std::string& text);

/// The PCIe relation of two PCI functions from their paths under @p root (<root>/bus/pci/devices/<id>):
/// PIX (both below one switch), PXB (below one root port, several switches), PHB (one host bridge),
/// NODE (different host bridges, the same NUMA node), SYS (different NUMA nodes); empty when sysfs
/// lacks either.
[[nodiscard]] std::optional<std::string> sysfs_pcie_relation(const std::string& root, const std::string& a,
                                                             const std::string& b);

/// The text of --topo: the matrix, the legend, the GPU legend (ordinal to NVML index) and the NIC legend.
void print_topology(std::ostream& out, const topology_info& t, bool color);

}  // namespace cudrv_query
