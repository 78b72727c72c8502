// cudrv-query --topo (issue 36: topology) without a GPU: the tool run against the stand-in driver and the
// stand-in NVML (tests/fake_nvml, FAKE_NVML_TOPOLOGY: NVLink bonds, PCIe levels, NVSwitch links, CPU and
// NUMA affinity), and NICs read from a fake sysfs tree (CUDRV_QUERY_SYSFS_ROOT). Label cpu.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "query.hpp"
#include "query_test_support.hpp"
#include "topo.hpp"

using query_test::run_query;

namespace {

namespace fs = std::filesystem;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A sysfs tree under a temporary directory, removed at destruction: PCI functions at their paths below
// devices/, bus/pci/devices/<id> links to them, class/infiniband/<name>/device links for NICs.
class fake_sysfs {
 public:
  fake_sysfs() {
    char name[] = "/tmp/cudrv_query_sysfs_XXXXXX";
    if (mkdtemp(name) == nullptr) throw std::runtime_error("mkdtemp failed");
    root_ = name;
    fs::create_directories(root_ / "bus" / "pci" / "devices");
  }
  fake_sysfs(const fake_sysfs&) = delete;
  fake_sysfs& operator=(const fake_sysfs&) = delete;
  ~fake_sysfs() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  // A PCI function at devices/<path> (its last part is its bus id), in NUMA node @p numa.
  void function(const std::string& path, int numa, const std::string& cpulist = "") {
    const fs::path dir = root_ / "devices" / path;
    fs::create_directories(dir);
    std::ofstream(dir / "numa_node") << numa << '\n';
    if (!cpulist.empty()) std::ofstream(dir / "local_cpulist") << cpulist << '\n';
    fs::create_symlink(fs::path("../../..") / "devices" / path, root_ / "bus" / "pci" / "devices" / dir.filename());
  }
  // An RDMA NIC named @p name on the PCI function at devices/<path>.
  void nic(const std::string& name, const std::string& path, int numa) {
    function(path, numa);
    const fs::path dir = root_ / "class" / "infiniband" / name;
    fs::create_directories(dir);
    fs::create_symlink(fs::path("../../..") / "devices" / path, dir / "device");
  }
  [[nodiscard]] std::string root() const { return root_.string(); }

 private:
  fs::path root_;
};

// The stand-in driver and NVML with four GPUs: CUDA devices 0 and 1 are NVML indexes 1 and 0 (NVML's
// order is not CUDA's), 2 and 3 are 2 and 3. NVML 0 and 1 are bonded by 4 NVLinks (PXB on PCIe), 2 and 3
// reach each other through NVSwitches (18 and 12 switch links: NV12) across host bridges (NODE), the
// rest is SYS. CPU affinity: NVML answers for 0..2; GPU 3 has neither NVML's nor sysfs's unless a test
// adds it.
std::vector<std::string> four_gpus(const std::string& sysfs_root) {
  return {std::string("CUDRV_LIBCUDA=") + CUDRV_TEST_FAKE_CUDA,
          std::string("CUDRV_LIBNVML=") + CUDRV_TEST_FAKE_NVML,
          "FAKE_CUDA_DEVICES=90,90,90,90",
          "FAKE_CUDA_UNAVAILABLE=",
          "FAKE_NVML_TOPOLOGY=X,PXB+NV4,SYS,SYS;PXB+NV4,X,SYS,SYS;SYS,SYS,X,NODE;SYS,SYS,NODE,X",
          "FAKE_NVML_NVSWITCH=0,0,18,12",
          "FAKE_NVML_CPUS=0-7,16-23;0-7,16-23;8-15;-",
          "FAKE_NVML_NUMA=0;0;1;-",
          "FAKE_NVML_GPU_NUMA=-;-;4;-",
          "CUDRV_QUERY_SYSFS_ROOT=" + sysfs_root};
}

const nlohmann::json& gpu_link(const nlohmann::json& topology, int from, int to) {
  for (const nlohmann::json& l : topology["gpu_links"]) {
    if (l["from"] == from && l["to"] == to) return l;
  }
  throw std::runtime_error("no gpu_links entry " + std::to_string(from) + "-" + std::to_string(to));
}

}  // namespace

TEST_CASE("topo: id lists are written as nvidia-smi writes CPU lists, and sysfs's lists are read", "[query][topo]") {
  using cudrv_query::format_id_list;
  using cudrv_query::parse_id_list;
  CHECK(format_id_list({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  CHECK(format_id_list({5}) == "5");
  CHECK(format_id_list({}) == "N/A");
  REQUIRE(parse_id_list("0-2,7,9-10"));
  CHECK(*parse_id_list("0-2,7,9-10") == std::vector<unsigned int>{0, 1, 2, 7, 9, 10});
  CHECK(format_id_list(*parse_id_list("0-63,128-191")) == "0-63,128-191");
  CHECK_FALSE(parse_id_list("0-x"));
  CHECK_FALSE(parse_id_list("3-1"));
  CHECK_FALSE(parse_id_list("1,,2"));
}

TEST_CASE("topo: PCIe relations from sysfs paths give nvidia-smi's names", "[query][topo]") {
  fake_sysfs sysfs;
  // Host bridge pci0000:00 (NUMA 0): a switch below root port 00:01.0 with two downstream ports, a
  // second switch below one of them; a function on root port 00:02.0. Host bridge pci0000:40 (NUMA 0)
  // and pci0000:80 (NUMA 1) hold one function each.
  sysfs.function("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", 0);
  sysfs.function("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", 0);
  sysfs.function("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:02.0/0000:05:00.0/0000:06:00.0/0000:07:00.0", 0);
  sysfs.function("pci0000:00/0000:00:02.0/0000:08:00.0", 0);
  sysfs.function("pci0000:40/0000:40:01.0/0000:41:00.0", 0);
  sysfs.function("pci0000:80/0000:80:01.0/0000:81:00.0", 1);
  using cudrv_query::sysfs_pcie_relation;
  const std::string r = sysfs.root();
  CHECK(sysfs_pcie_relation(r, "0000:03:00.0", "0000:04:00.0") == "PIX");
  CHECK(sysfs_pcie_relation(r, "0000:03:00.0", "0000:07:00.0") == "PXB");
  CHECK(sysfs_pcie_relation(r, "0000:03:00.0", "0000:08:00.0") == "PHB");
  CHECK(sysfs_pcie_relation(r, "0000:03:00.0", "0000:41:00.0") == "NODE");
  CHECK(sysfs_pcie_relation(r, "0000:03:00.0", "0000:81:00.0") == "SYS");
  CHECK(sysfs_pcie_relation(r, "0000:41:00.0", "0000:81:00.0") == "SYS");
  CHECK_FALSE(sysfs_pcie_relation(r, "0000:03:00.0", "0000:99:00.0"));
}

#if defined(CUDRV_TEST_FAKE_NVML) && defined(CUDRV_TEST_FAKE_CUDA)

TEST_CASE("topo: the matrix, NVLink bonds, NVSwitch pairs, PCIe levels and affinity, in JSON", "[query][topo]") {
  fake_sysfs sysfs;  // no NICs, no GPU functions
  const query_test::process_result r = run_query({"--topo", "--json"}, four_gpus(sysfs.root()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE_SCHEMA_VALID(r.out);
  const nlohmann::json j = query_test::parse(r.out);
  CHECK(j["view"] == "topo");
  const nlohmann::json& t = j["topology"];
  CHECK(t["labels"] == nlohmann::json::array({"GPU0", "GPU1", "GPU2", "GPU3"}));
  // CUDA 0 and 1 are NVML 1 and 0: bonded by 4 NVLinks either way round.
  const nlohmann::json expected = nlohmann::json::array({{"X", "NV4", "SYS", "SYS"},
                                                         {"NV4", "X", "SYS", "SYS"},
                                                         {"SYS", "SYS", "X", "NV12"},
                                                         {"SYS", "SYS", "NV12", "X"}});
  CHECK(t["matrix"] == expected);
  CHECK(t["gpus"][0]["nvml_index"] == 1);
  CHECK(t["gpus"][1]["nvml_index"] == 0);
  CHECK(t["gpus"][0]["pci_bus_id"] == "0000:9a:00.0");
  CHECK(t["gpus"][2]["nvswitch_links"] == 18);
  CHECK(t["gpus"][3]["nvswitch_links"] == 12);
  CHECK(t["gpus"][0]["cpu_affinity"] == "0-7,16-23");
  CHECK(t["gpus"][2]["cpu_affinity"] == "8-15");
  CHECK(t["gpus"][2]["numa_affinity"] == "1");
  CHECK(t["gpus"][2]["numa_nodes"] == nlohmann::json::array({1}));
  CHECK(t["gpus"][2]["gpu_numa_id"] == 4);
  CHECK(t["gpus"][0]["gpu_numa_id"].is_null());
  CHECK(t["gpus"][3]["cpu_affinity"].is_null());  // neither NVML nor sysfs tells
  CHECK(t["nics"].empty());
  const nlohmann::json& bonded = gpu_link(t, 0, 1);
  CHECK(bonded["nvlinks"] == 4);
  CHECK(bonded["via_nvswitch"] == false);
  CHECK(bonded["pcie"] == "PXB");  // the PCIe level is kept beside the NVLink count
  const nlohmann::json& switched = gpu_link(t, 2, 3);
  CHECK(switched["relation"] == "NV12");
  CHECK(switched["via_nvswitch"] == true);
  CHECK(switched["pcie"] == "NODE");
  const nlohmann::json& pcie_only = gpu_link(t, 0, 2);  // a pair with no NVLink
  CHECK(pcie_only["relation"] == "SYS");
  CHECK(pcie_only["nvlinks"] == 0);
  CHECK(t["gpu_links"].size() == 6);
}

TEST_CASE("topo: the text is nvidia-smi's matrix, legend and affinity columns, labelled with CUDA ordinals",
          "[query][topo]") {
  fake_sysfs sysfs;
  const query_test::process_result r = run_query({"--topo"}, four_gpus(sysfs.root()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "      GPU0  GPU1  GPU2  GPU3  CPU Affinity  NUMA Affinity  GPU NUMA ID\n"));
  CHECK(contains(r.out, "\nGPU0  X     NV4   SYS   SYS   0-7,16-23     0              N/A\n"));
  CHECK(contains(r.out, "\nGPU2  SYS   SYS   X     NV12  8-15          1              4\n"));
  CHECK(contains(r.out, "\nGPU3  SYS   SYS   NV12  X     N/A           N/A            N/A\n"));
  CHECK(contains(r.out, "  NV#  = # NVLinks bonded together (direct, or through NVSwitches)\n"));
  CHECK(contains(r.out, "  PIX  = PCIe through one switch at most\n"));
  CHECK(contains(r.out, "  GPU0: NVML index 1, 0000:9a:00.0, "));
  CHECK(contains(r.out, "  GPU3: NVML index 3, 0000:50:00.0, "));
  CHECK_FALSE(contains(r.out, "NIC Legend"));  // no NIC, no NIC legend
}

TEST_CASE("topo: where NVML cannot tell what a link reaches, a far end that is no GPU is an NVSwitch",
          "[query][topo]") {
  fake_sysfs sysfs;
  std::vector<std::string> env = four_gpus(sysfs.root());
  env.emplace_back("FAKE_NVML_NO_REMOTE_TYPE=1");
  const query_test::process_result r = run_query({"--topo", "--json"}, env);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json t = query_test::parse(r.out)["topology"];
  CHECK(t["matrix"][0][1] == "NV4");  // the far ends of these links are GPUs
  CHECK(t["matrix"][2][3] == "NV12");
  CHECK(t["gpus"][2]["nvswitch_links"] == 18);
  CHECK(t["gpus"][0]["nvswitch_links"] == 0);
}

TEST_CASE("topo: -d selects the GPUs of the matrix, NVLinks to a GPU left out are not counted", "[query][topo]") {
  fake_sysfs sysfs;
  const query_test::process_result r = run_query({"--topo", "--json", "-d", "1,2"}, four_gpus(sysfs.root()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE_SCHEMA_VALID(r.out);
  const nlohmann::json t = query_test::parse(r.out)["topology"];
  CHECK(t["labels"] == nlohmann::json::array({"GPU1", "GPU2"}));
  CHECK(t["matrix"] == nlohmann::json::array({{"X", "SYS"}, {"SYS", "X"}}));
  REQUIRE(t["gpu_links"].size() == 1);
  CHECK(t["gpu_links"][0]["from"] == 1);
  CHECK(t["gpu_links"][0]["to"] == 2);
  const query_test::process_result bad = run_query({"--topo", "-d", "7"}, four_gpus(sysfs.root()));
  CHECK(bad.exit_code == 1);
}

TEST_CASE("topo: NICs come from sysfs, each GPU-NIC relation from the PCI paths", "[query][topo]") {
  fake_sysfs sysfs;
  // GPU1 (0000:1b:00.0) and mlx5_0 below one switch; GPU0 on its own root port of the same host bridge;
  // GPU2 (0000:40:00.0) and mlx5_1 below one root port of host bridge pci0000:80, mlx5_1 behind a second
  // switch; GPU3 (0000:50:00.0) on host bridge pci0000:c0 in the same NUMA node as pci0000:80, with its
  // CPU list only in sysfs.
  sysfs.function("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:1b:00.0", 0);
  sysfs.nic("mlx5_0", "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:0c:00.0", 0);
  sysfs.function("pci0000:00/0000:00:02.0/0000:9a:00.0", 0);
  sysfs.function("pci0000:80/0000:80:01.0/0000:85:00.0/0000:86:00.0/0000:40:00.0", 1);
  sysfs.nic("mlx5_1", "pci0000:80/0000:80:01.0/0000:85:00.0/0000:86:01.0/0000:87:00.0/0000:88:00.0/0000:89:00.0", 1);
  sysfs.function("pci0000:c0/0000:c0:01.0/0000:50:00.0", 1, "24-31");
  const query_test::process_result r = run_query({"--topo", "--json"}, four_gpus(sysfs.root()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE_SCHEMA_VALID(r.out);
  const nlohmann::json t = query_test::parse(r.out)["topology"];
  CHECK(t["labels"] == nlohmann::json::array({"GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1"}));
  REQUIRE(t["nics"].size() == 2);
  CHECK(t["nics"][0]["name"] == "mlx5_0");
  CHECK(t["nics"][0]["pci_bus_id"] == "0000:0c:00.0");
  CHECK(t["nics"][1]["name"] == "mlx5_1");
  // Rows GPU0..GPU3, NIC0, NIC1; columns NIC0, NIC1.
  auto nic_columns = [&](std::size_t row) {
    return std::vector<std::string>{t["matrix"][row][4], t["matrix"][row][5]};
  };
  CHECK(nic_columns(0) == std::vector<std::string>{"PHB", "SYS"});
  CHECK(nic_columns(1) == std::vector<std::string>{"PIX", "SYS"});
  CHECK(nic_columns(2) == std::vector<std::string>{"SYS", "PXB"});
  CHECK(nic_columns(3) == std::vector<std::string>{"SYS", "NODE"});
  CHECK(nic_columns(4) == std::vector<std::string>{"X", "SYS"});
  CHECK(t["matrix"][5][1] == "SYS");
  CHECK(t["matrix"][4][1] == "PIX");  // symmetric
  // NVML has no CPU list for GPU3: sysfs's local_cpulist and numa_node stand in.
  CHECK(t["gpus"][3]["cpu_affinity"] == "24-31");
  CHECK(t["gpus"][3]["numa_affinity"] == "1");
  const query_test::process_result text = run_query({"--topo"}, four_gpus(sysfs.root()));
  CHECK(contains(text.out, "\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n"));
  CHECK(contains(text.out, "\nNIC0  PHB   PIX   SYS   SYS   X     SYS\n"));
}

TEST_CASE("topo: an NVML that answers nothing of the topology gives N/A, not an error", "[query][topo]") {
  // The stand-in's default: NVML index 1 (CUDA device 0) supports nothing, so the pair is N/A.
  fake_sysfs sysfs;
  const query_test::process_result r =
      run_query({"--topo", "--json"},
                {std::string("CUDRV_LIBCUDA=") + CUDRV_TEST_FAKE_CUDA,
                 std::string("CUDRV_LIBNVML=") + CUDRV_TEST_FAKE_NVML, "CUDRV_QUERY_SYSFS_ROOT=" + sysfs.root()},
                {"FAKE_NVML_TOPOLOGY", "FAKE_CUDA_DEVICES"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE_SCHEMA_VALID(r.out);
  const nlohmann::json t = query_test::parse(r.out)["topology"];
  CHECK(t["matrix"] == nlohmann::json::array({{"X", "N/A"}, {"N/A", "X"}}));
  CHECK(gpu_link(t, 0, 1)["pcie"].is_null());
  CHECK(t["gpus"][0]["cpu_affinity"].is_null());
  CHECK(t["gpus"][1]["cpu_affinity"] == "0-7");
}

#endif

TEST_CASE("topo: --topo is one view among the others, and fails as they do without a driver", "[query][topo]") {
  const query_test::process_result both = run_query({"--topo", "--p2p"});
  CHECK(both.exit_code == 1);
  CHECK(contains(both.err, "cannot be combined"));
  const query_test::process_result r =
      run_query({"--topo", "--json"}, {query_test::no_driver, "CUDRV_LIBNVML=/nonexistent/libnvidia-ml.so.1"});
  CHECK(r.exit_code == 2);
  REQUIRE_SCHEMA_VALID(r.out);
  const nlohmann::json j = query_test::parse(r.out);
  CHECK(j["view"] == "topo");
  CHECK(j["status"] == "no_driver");
  CHECK_FALSE(j.contains("topology"));
  const query_test::process_result help = run_query({"--help"});
  CHECK(contains(help.out, "--topo"));
  CHECK(contains(help.out, "CUDRV_QUERY_SYSFS_ROOT"));
}
