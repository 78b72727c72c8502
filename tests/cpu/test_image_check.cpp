// The checks cudrv makes on PTX, cubin and fatbin images before the driver or nvJitLink sees them
// (object_code::validate, library, linker::add): real images from NVRTC and nvcc pass; truncated and
// corrupted ones are refused with an invalid_image_error that names the field and the numbers.
// The nvcc-made cubin and fatbins are the seeds of the fuzz target fuzz_image (fuzz/corpus/).
#include <catch2/catch.hpp>

#include <cudrv/error.hpp>
#include <cudrv/linker.hpp>
#include <cudrv/object_code.hpp>
#include <cudrv/program.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

// A seed of fuzz/corpus/fuzz_image without its kind byte.
std::string seed_image(const std::string& name) {
  std::ifstream in(std::string(CUDRV_TEST_FUZZ_CORPUS) + "/fuzz_image/" + name, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  const std::string bytes = s.str();
  REQUIRE(bytes.size() > 1);
  return bytes.substr(1);
}

const std::string& nvrtc_cubin() {
  static const std::string bytes = cudrv::program("k.cu", "extern \"C\" __global__ void k(int* p, int v) { *p = v; }")
                                       .compile(cudrv::code_kind::cubin, {.arch = "sm_90"})
                                       .code.bytes();
  return bytes;
}

const std::string& nvrtc_ptx() {
  static const std::string bytes = cudrv::program("k.cu", "extern \"C\" __global__ void k(int* p, int v) { *p = v; }")
                                       .compile(cudrv::code_kind::ptx, {.arch = "sm_90"})
                                       .code.bytes();
  return bytes;
}

// The message of the invalid_image_error that validate() throws; fails the test when it throws
// nothing or another type.
std::string refusal(cudrv::code_kind kind, const std::string& bytes) {
  auto e = catch_as<cudrv::invalid_image_error>([&] { cudrv::object_code(kind, bytes, "img").validate(); });
  REQUIRE(e.has_value());
  CHECK(e->source() == cudrv::error_source::cudrv);
  CHECK(e->result() == CUDA_ERROR_INVALID_IMAGE);
  CHECK(e->api() == "cudrv::object_code::validate");
  CHECK(contains(e->what(), "image 'img' is malformed: " + std::string(cudrv::to_string(kind)) + ": "));
  return e->what();
}

template <class T>
void poke(std::string& b, std::size_t offset, T value) {
  REQUIRE(offset + sizeof value <= b.size());
  std::memcpy(b.data() + offset, &value, sizeof value);
}

template <class T>
T peek(const std::string& b, std::size_t offset) {
  T value{};
  std::memcpy(&value, b.data() + offset, sizeof value);
  return value;
}

}  // namespace

TEST_CASE("image checks: images from NVRTC and nvcc pass", "[image_check]") {
  CHECK_NOTHROW(cudrv::object_code(cudrv::code_kind::cubin, nvrtc_cubin()).validate());
  CHECK_NOTHROW(cudrv::object_code(cudrv::code_kind::ptx, nvrtc_ptx()).validate());
  CHECK_NOTHROW(cudrv::object_code(cudrv::code_kind::cubin, seed_image("cubin_scale")).validate());
  CHECK_NOTHROW(cudrv::object_code(cudrv::code_kind::fatbin, seed_image("fatbin_scale")).validate());
  CHECK_NOTHROW(cudrv::object_code(cudrv::code_kind::fatbin, seed_image("fatbin_compressed")).validate());
  CHECK_NOTHROW(cudrv::object_code(cudrv::code_kind::ptx, seed_image("ptx_entry")).validate());
  // The other kinds are nvJitLink's to read.
  CHECK_NOTHROW(cudrv::object_code(cudrv::code_kind::ltoir, "anything").validate());
}

TEST_CASE("image checks: every truncation of a cubin or fatbin is refused", "[image_check]") {
  for (const auto& [kind, bytes] : {std::pair{cudrv::code_kind::cubin, nvrtc_cubin()},
                                    std::pair{cudrv::code_kind::cubin, seed_image("cubin_scale")},
                                    std::pair{cudrv::code_kind::fatbin, seed_image("fatbin_scale")},
                                    std::pair{cudrv::code_kind::fatbin, seed_image("fatbin_compressed")}}) {
    std::size_t accepted = 0;
    for (std::size_t keep = 0; keep < bytes.size(); ++keep) {
      try {
        cudrv::object_code(kind, bytes.substr(0, keep)).validate();
        ++accepted;
      } catch (const cudrv::invalid_image_error&) {
      }
    }
    INFO(cudrv::to_string(kind) << " of " << bytes.size() << " bytes");
    CHECK(accepted == 0);
  }
  // The message names the table, its extent and the size.
  std::string moved = nvrtc_cubin();
  const auto shnum = peek<std::uint16_t>(moved, 60);
  poke<std::uint64_t>(moved, 40, moved.size() - 10);
  CHECK(contains(refusal(cudrv::code_kind::cubin, moved),
                 "cubin: section header table at offset " + std::to_string(moved.size() - 10) + " + " +
                     std::to_string(64 * shnum) + " bytes (" + std::to_string(shnum) +
                     " entries) exceeds the image size " + std::to_string(moved.size()) + " (truncated?)"));
}

TEST_CASE("image checks: corrupted cubin headers are refused, each with its field", "[image_check]") {
  const std::string& good = nvrtc_cubin();
  auto with = [&](auto&& edit) {
    std::string b = good;
    edit(b);
    return refusal(cudrv::code_kind::cubin, b);
  };
  CHECK(contains(refusal(cudrv::code_kind::cubin, std::string(100, 'x')), "not an ELF file"));
  CHECK(contains(refusal(cudrv::code_kind::cubin, good.substr(0, 40)), "40 bytes, fewer than the 64 of an ELF64"));
  CHECK(contains(with([](std::string& b) { b[4] = 1; }), "ELF class 1 is not ELFCLASS64"));
  CHECK(contains(with([](std::string& b) { b[5] = 2; }), "not little-endian"));
  CHECK(contains(with([](std::string& b) { b[6] = 0; }), "identification version 0"));
  CHECK(contains(with([](std::string& b) { poke<std::uint16_t>(b, 18, 62); }), "ELF machine 62 is not EM_CUDA (190)"));
  CHECK(contains(with([](std::string& b) { poke<std::uint16_t>(b, 52, 16); }), "ELF header size 16"));
  CHECK(contains(with([](std::string& b) { poke<std::uint16_t>(b, 58, 8); }), "section header table entry size 8"));
  CHECK(contains(with([](std::string& b) { poke<std::uint16_t>(b, 54, 0xffff); }), "program header table entry size"));
  // An offset that wraps around when the table size is added.
  CHECK(contains(with([](std::string& b) { poke<std::uint64_t>(b, 40, ~std::uint64_t{0} - 16); }),
                 "section header table at offset 18446744073709551599"));
  CHECK(contains(with([](std::string& b) { poke<std::uint16_t>(b, 56, 0xffff); }), "program header table"));
  CHECK(contains(with([](std::string& b) { poke<std::uint16_t>(b, 62, peek<std::uint16_t>(b, 60)); }),
                 "section name table index"));
  // A section whose data lies past the end (its size field, in the section header of section 1).
  CHECK(contains(with([](std::string& b) {
                   poke<std::uint64_t>(b, peek<std::uint64_t>(b, 40) + 64 + 32, std::uint64_t{1} << 40);
                 }),
                 "cubin: section 1 (type 3) at offset"));
  // A segment likewise (p_filesz of segment 0).
  CHECK(contains(with([](std::string& b) {
                   poke<std::uint64_t>(b, peek<std::uint64_t>(b, 32) + 32, std::uint64_t{1} << 40);
                 }),
                 "cubin: segment 0 at offset"));
  // Extended section numbering with a count in section 0 that cannot fit.
  CHECK(contains(with([](std::string& b) {
                   poke<std::uint16_t>(b, 60, 0);
                   poke<std::uint64_t>(b, peek<std::uint64_t>(b, 40) + 32, std::uint64_t{1} << 60);
                 }),
                 "sections of 64 bytes cannot fit"));
}

TEST_CASE("image checks: corrupted fatbins are refused, each with its field", "[image_check]") {
  const std::string good = seed_image("fatbin_scale");
  auto with = [&](auto&& edit) {
    std::string b = good;
    edit(b);
    return refusal(cudrv::code_kind::fatbin, b);
  };
  CHECK(contains(refusal(cudrv::code_kind::fatbin, std::string(64, '\0')), "fatbin magic 0xBA55ED50"));
  CHECK(contains(refusal(cudrv::code_kind::fatbin, good.substr(0, 12)), "12 bytes, fewer than the 16"));
  CHECK(contains(with([](std::string& b) { poke<std::uint16_t>(b, 6, 8); }), "header size 8 is below the 16"));
  CHECK(contains(with([](std::string& b) { poke<std::uint64_t>(b, 8, 1 << 20); }),
                 "fatbin: header of 16 bytes + body of 1048576 bytes exceeds the image size " +
                     std::to_string(good.size())));
  // The first entry: its header size, then its payload size.
  CHECK(contains(with([](std::string& b) { poke<std::uint32_t>(b, 16 + 4, 4); }),
                 "entry 0 at offset 16 has a header size of 4"));
  CHECK(contains(with([](std::string& b) { poke<std::uint64_t>(b, 16 + 8, std::uint64_t{1} << 62); }),
                 "fatbin: entry 0 at offset 16: header of"));
  // Junk after the entries, inside the announced body.
  CHECK(contains(with([](std::string& b) {
                   b += "junk";
                   poke<std::uint64_t>(b, 8, peek<std::uint64_t>(b, 8) + 4);
                 }),
                 "4 bytes left in the body for its 16-byte header"));
  // Zero padding there is fine.
  std::string padded = good + std::string(8, '\0');
  poke<std::uint64_t>(padded, 8, peek<std::uint64_t>(padded, 8) + 8);
  CHECK_NOTHROW(cudrv::object_code(cudrv::code_kind::fatbin, padded).validate());
  // The cubin inside the fatbin is checked too: its machine, in its ELF header.
  const std::size_t elf = good.find("\x7f"
                                    "ELF");
  REQUIRE(elf != std::string::npos);
  CHECK(contains(with([&](std::string& b) { poke<std::uint16_t>(b, elf + 18, 62); }),
                 "fatbin: entry 0 at offset 16: cubin: ELF machine 62"));
}

TEST_CASE("image checks: PTX must be text that starts with .version", "[image_check]") {
  const std::string& ptx = nvrtc_ptx();
  CHECK(contains(refusal(cudrv::code_kind::ptx, std::string("abc\0def", 7)), "NUL byte at offset 3"));
  CHECK_NOTHROW(cudrv::object_code(cudrv::code_kind::ptx, ptx + std::string(3, '\0')).validate());  // padding
  CHECK(contains(refusal(cudrv::code_kind::ptx, nvrtc_cubin()), "is it a binary image?"));
  CHECK(
      contains(refusal(cudrv::code_kind::ptx, ptx.substr(0, 10) + "\x01" + ptx.substr(10)), "byte 0x01 at offset 10"));
  CHECK(contains(refusal(cudrv::code_kind::ptx, "// only a comment\n"), "holds no PTX"));
  CHECK(contains(refusal(cudrv::code_kind::ptx, ".target sm_90\n.version 8.0\n"), "does not start with a .version"));
  CHECK(contains(refusal(cudrv::code_kind::ptx, "/* not closed .version 8.0"), "is not closed"));
  CHECK(contains(refusal(cudrv::code_kind::ptx, ".versionX 8.0"), "does not start with a .version"));
  CHECK_NOTHROW(cudrv::object_code(cudrv::code_kind::ptx, "/* a */ // b\n\t.version 8.0\n").validate());
}

TEST_CASE("image checks: random corruption never crashes and never passes a cut image", "[image_check]") {
  std::mt19937 rng(1234);
  for (const auto& [kind, bytes] : {std::pair{cudrv::code_kind::cubin, nvrtc_cubin()},
                                    std::pair{cudrv::code_kind::fatbin, seed_image("fatbin_scale")},
                                    std::pair{cudrv::code_kind::ptx, nvrtc_ptx()}}) {
    for (int i = 0; i < 2000; ++i) {
      std::string b = bytes;
      const int flips = 1 + static_cast<int>(rng() % 8);
      for (int f = 0; f < flips; ++f) {
        b[rng() % b.size()] ^= static_cast<char>(1u << (rng() % 8));
      }
      try {
        cudrv::object_code(kind, b).validate();
      } catch (const cudrv::invalid_image_error& e) {
        CHECK(contains(e.what(), std::string(cudrv::to_string(kind)) + ": "));
      }
    }
  }
}

TEST_CASE("image checks: linker::add refuses a malformed input before nvJitLink sees it", "[image_check][linker]") {
  cudrv::linker l({.arch = "sm_90"});
  const std::string cut = nvrtc_cubin().substr(0, nvrtc_cubin().size() / 2);
  auto e = catch_as<cudrv::invalid_image_error>(
      [&] { l.add(cudrv::object_code(cudrv::code_kind::cubin, cut, "half.cubin")); });
  REQUIRE(e.has_value());
  CHECK(e->api() == "cudrv::linker::add");
  CHECK(contains(e->what(),
                 "input 'half.cubin' (cubin, " + std::to_string(cut.size()) + " bytes) is malformed: cubin: "));
  // The linker is still usable: a whole input is added and linked.
  l.add(cudrv::object_code(cudrv::code_kind::cubin, nvrtc_cubin(), "whole.cubin"));
  const cudrv::object_code out = l.link();
  CHECK_NOTHROW(out.validate());
}
