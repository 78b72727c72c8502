// cudrv-query --watch on a GPU (issue 36: watch): while a spin kernel launched through cudrv in this
// process loads device 0, `cudrv-query --watch` and `nvidia-smi --query-gpu -l 1` sample the same
// fields for the same seconds and must agree within each field's sampling tolerance; on two GPUs with
// NVLink, peer copies must show in nvlink.tx / nvlink.rx. Tags [query][gpu]: skipped without a GPU,
// and (with a message) without nvidia-smi.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <cudrv/cudrv.hpp>

#include "query_test_support.hpp"
#include "support/test_support.hpp"

namespace {

// Spins every thread until %globaltimer passes start + ns: bounded whatever the clocks do.
constexpr const char* spin_ptx = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry watch_spin(.param .u64 ns) {
  .reg .u64 %d, %t0, %t, %end;
  .reg .pred %p;
  ld.param.u64 %d, [ns];
  mov.u64 %t0, %globaltimer;
  add.u64 %end, %t0, %d;
LOOP:
  mov.u64 %t, %globaltimer;
  setp.lt.u64 %p, %t, %end;
  @%p bra LOOP;
  ret;
}
)";

// The fields both tools sample, in nvidia-smi's names.
constexpr const char* fields =
    "index,utilization.gpu,memory.used,memory.total,power.draw,clocks.sm,clocks.mem,temperature.gpu";
constexpr std::size_t field_count = 8;

// The rows of a `csv,noheader,nounits` output: each a vector of fields (numbers), [N/A] as NaN; a line
// with another number of fields (one cut short when nvidia-smi was stopped) is dropped.
std::vector<std::vector<double>> csv_rows(const std::string& text) {
  std::vector<std::vector<double>> rows;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<double> row;
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) {
      cell.erase(0, cell.find_first_not_of(' '));
      row.push_back(cell.empty() || cell[0] == '[' ? std::nan("") : std::stod(cell));
    }
    if (row.size() == field_count) rows.push_back(row);
  }
  return rows;
}

// The median of column @p c over @p rows (NaN when no row has a number there).
double median_of(const std::vector<std::vector<double>>& rows, std::size_t c) {
  std::vector<double> v;
  for (const auto& r : rows) {
    if (!std::isnan(r[c])) v.push_back(r[c]);
  }
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool nvidia_smi_present() { return query_test::run_process({"nvidia-smi", "-L"}).exit_code == 0; }

}  // namespace

TEST_CASE("cudrv-query --watch agrees with nvidia-smi --query-gpu while a kernel loads the GPU",
          "[query][gpu][watch]") {
  CUDRV_REQUIRE_GPU();
  if (!nvidia_smi_present()) {
    WARN("SKIPPED: nvidia-smi is not available here");
    return;
  }
  const cudrv::device dev(0);
  const std::string uuid = dev.uuid().to_string();
  // Memory that both tools count, and a kernel on every SM for 10 s.
  cudrv::device_buffer<std::byte> held(dev, std::size_t{2} << 30);
  cudrv::library lib(cudrv::object_code(cudrv::code_kind::ptx, spin_ptx, "watch_spin.ptx"));
  auto spin = lib.get_kernel<void(unsigned long long)>("watch_spin");
  cudrv::stream s(dev);
  const int sms = dev.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  cudrv::launch(s, {.grid = static_cast<unsigned int>(2 * sms), .block = 256}, spin, 10'000'000'000ULL);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // NVML's utilization period sees the load

  // The same seconds, side by side: nvidia-smi every second for 5.5 s, cudrv-query 5 samples 1 s apart.
  query_test::process_result smi;
  std::thread smi_thread([&] {
    smi = query_test::run_process({"timeout", "5.5", "nvidia-smi", std::string("--query-gpu=") + fields,
                                   "--format=csv,noheader,nounits", "-l", "1", "-i", uuid});
  });
  const query_test::process_result ours =
      query_test::run_query({"--watch", "--watch-format", "csv,noheader,nounits", "--watch-query", fields, "-d", uuid,
                             "--watch-interval", "1", "--watch-count", "5"});
  smi_thread.join();
  s.synchronize();  // the kernel ends by its own timer

  INFO("cudrv-query:\n" << ours.out << ours.err << "nvidia-smi:\n" << smi.out << smi.err);
  REQUIRE(ours.exit_code == 0);
  const auto a = csv_rows(ours.out);
  const auto b = csv_rows(smi.out);
  REQUIRE(a.size() == 5);
  REQUIRE(b.size() >= 3);
  CHECK(median_of(a, 0) == median_of(b, 0));  // the same GPU (NVML's index)
  CHECK(median_of(a, 1) >= 80);               // utilization.gpu: both see the kernel
  CHECK(median_of(b, 1) >= 80);
  CHECK(std::abs(median_of(a, 2) - median_of(b, 2)) <= 64);  // memory.used, MiB
  CHECK(median_of(a, 2) >= 2048);                            // with this process's 2 GiB
  CHECK(median_of(a, 3) == median_of(b, 3));                 // memory.total, exact
  const double power = median_of(b, 4);
  if (!std::isnan(power)) {
    CHECK(std::abs(median_of(a, 4) - power) <= std::max(30.0, 0.15 * power));  // power.draw, W
  }
  const double sm = median_of(b, 5);
  CHECK(std::abs(median_of(a, 5) - sm) <= std::max(45.0, 0.05 * sm));  // clocks.sm, a few bins
  CHECK(std::abs(median_of(a, 6) - median_of(b, 6)) <= 10);            // clocks.mem (HBM: fixed)
  CHECK(std::abs(median_of(a, 7) - median_of(b, 7)) <= 3);             // temperature.gpu, C
}

TEST_CASE("cudrv-query --watch sees peer copies in nvlink.tx and nvlink.rx", "[query][gpu][watch]") {
  CUDRV_REQUIRE_GPUS(2);
  const cudrv::device d0(0);
  const cudrv::device d1(1);
  if (!d0.can_access_peer(d1) || !d1.can_access_peer(d0)) {
    WARN("SKIPPED: devices 0 and 1 have no peer access");
    return;
  }
  d0.enable_peer_access(d1);
  d1.enable_peer_access(d0);
  constexpr std::size_t bytes = std::size_t{256} << 20;
  cudrv::device_buffer<std::byte> src(d0, bytes);
  cudrv::device_buffer<std::byte> dst(d1, bytes);
  cudrv::stream s(d0);

  // Copies from 0 to 1 for 5 s on one thread, counted; the watch samples in the middle.
  double copy_rate = 0;  // bytes per second
  std::thread copier([&] {
    const auto start = std::chrono::steady_clock::now();
    std::size_t copied = 0;
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
      for (int i = 0; i < 8; ++i) cudrv::copy_peer(dst, d1, src, d0, s);
      s.synchronize();
      copied += 8 * bytes;
    }
    copy_rate =
        static_cast<double>(copied) / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const query_test::process_result r =
      query_test::run_query({"--watch", "--json", "--watch-query", "nvlink.tx,nvlink.rx", "-d", "0,1",
                             "--watch-interval", "0.5", "--watch-count", "6"});
  copier.join();
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::vector<double> tx0;
  std::vector<double> rx1;
  std::istringstream lines(r.out);
  std::string line;
  bool any_null = false;
  while (std::getline(lines, line)) {
    const nlohmann::json j = query_test::parse(line);
    const nlohmann::json& v = j[j["ordinal"] == 0 ? "nvlink.tx" : "nvlink.rx"];
    if (v.is_null()) {
      any_null = true;
      continue;
    }
    (j["ordinal"] == 0 ? tx0 : rx1).push_back(v.get<double>() * 1024 * 1024);
  }
  if (any_null && tx0.empty()) {
    WARN("SKIPPED: NVML gives no NVLink data counters for these GPUs (no NVLink between them?)");
    return;
  }
  REQUIRE(tx0.size() == 6);
  REQUIRE(rx1.size() == 6);
  std::sort(tx0.begin(), tx0.end());
  std::sort(rx1.begin(), rx1.end());
  INFO("copies: " << copy_rate / 1e9 << " GB/s; watch medians: " << tx0[3] / 1e9 << " GB/s sent by 0, " << rx1[3] / 1e9
                  << " GB/s received by 1");
  // The counters see the copies: within a factor of 3 of the bytes this process copied (the watch's
  // windows and NVML's counter updates are not the copies' own; protocol bytes are not data).
  CHECK(tx0[3] >= copy_rate / 3);
  CHECK(tx0[3] <= copy_rate * 3);
  CHECK(rx1[3] >= copy_rate / 3);
  CHECK(rx1[3] <= copy_rate * 3);
}
