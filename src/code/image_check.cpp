// Structural checks of device-code images before the driver sees them.
//
// The driver and nvJitLink trust the offsets and sizes written in an image: a truncated or corrupted
// cubin made cuLibraryLoadData hang or crash (driver 580). These checks read only the headers: the
// ELF64 file header, program and section header tables of a cubin; the header and the entry headers
// of a fatbin (and the cubins stored uncompressed in it); the start of a PTX text. They accept every
// image NVRTC, nvcc and nvJitLink produce and refuse, with a message naming the field and the numbers,
// an image whose declared extents do not fit in the bytes given.
#include "code/image_check.hpp"

#include <cstdint>
#include <cstring>

namespace cudrv::detail {
namespace {

template <class T>
T read_le(std::string_view b, std::size_t offset) noexcept {  // the caller checked the bounds
  T value{};
  std::memcpy(&value, b.data() + offset, sizeof(T));
  return value;
}

bool fits(std::uint64_t offset, std::uint64_t bytes, std::uint64_t size) noexcept {
  return offset <= size && bytes <= size - offset;
}

std::string extent(std::uint64_t offset, std::uint64_t bytes) {
  return "at offset " + std::to_string(offset) + " + " + std::to_string(bytes) + " bytes";
}

std::string hex_byte(unsigned char c) {
  static constexpr char digits[] = "0123456789abcdef";
  const char text[] = {'0', 'x', digits[c >> 4], digits[c & 15]};
  return std::string(text, sizeof text);
}

// --- PTX ---------------------------------------------------------------------------------------------

std::string ptx_problem(std::string_view b) {
  // The driver reads PTX up to its first NUL: bytes after it must be NUL padding, or the text was cut
  // short by binary data.
  const std::size_t nul = b.find('\0');
  const std::string_view text = b.substr(0, nul);
  if (nul != std::string_view::npos && b.find_first_not_of('\0', nul) != std::string_view::npos) {
    return "ptx: a NUL byte at offset " + std::to_string(nul) + " ends the text before its " +
           std::to_string(b.size()) + " bytes: is it a binary image?";
  }
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\v' && c != '\f' && c != '\r') || c == 0x7f) {
      return "ptx: byte " + hex_byte(c) + " at offset " + std::to_string(i) + " is not text: is it a binary image?";
    }
  }
  // Every PTX module starts with .version (after white space and comments).
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r') {
      ++i;
    } else if (text.substr(i, 2) == "//") {
      const std::size_t end = text.find('\n', i);
      i = end == std::string_view::npos ? text.size() : end + 1;
    } else if (text.substr(i, 2) == "/*") {
      const std::size_t end = text.find("*/", i + 2);
      if (end == std::string_view::npos) {
        return "ptx: the comment at offset " + std::to_string(i) + " is not closed (truncated?)";
      }
      i = end + 2;
    } else {
      break;
    }
  }
  const std::string_view directive = ".version";
  if (text.substr(i, directive.size()) != directive ||
      (i + directive.size() < text.size() && text[i + directive.size()] != ' ' && text[i + directive.size()] != '\t')) {
    return i == text.size() ? "ptx: the text holds no PTX (no .version directive; it is empty or only comments)"
                            : "ptx: the text does not start with a .version directive (after comments and white "
                              "space), as every PTX module does";
  }
  return {};
}

// --- cubin (ELF64) -------------------------------------------------------------------------------

constexpr std::size_t elf64_header = 64;
constexpr std::size_t elf64_phdr = 56;
constexpr std::size_t elf64_shdr = 64;
constexpr std::size_t max_entry_size = 4096;  // header table entries: far above any ELF64 writer's
constexpr std::uint16_t em_cuda = 190;
constexpr std::uint32_t sht_null = 0;
constexpr std::uint32_t sht_nobits = 8;
constexpr std::uint16_t shn_xindex = 0xffff;

// One header table (program or section): entry size and where it lies.
std::string table_problem(const char* what, std::uint64_t offset, std::uint64_t entry_size, std::uint64_t count,
                          std::size_t min_entry, std::uint64_t size) {
  if (count == 0) {
    return {};
  }
  if (entry_size < min_entry || entry_size > max_entry_size) {
    return std::string("cubin: ") + what + " entry size " + std::to_string(entry_size) + " is not between " +
           std::to_string(min_entry) + " and " + std::to_string(max_entry_size);
  }
  if (!fits(offset, entry_size * count, size)) {
    return std::string("cubin: ") + what + " " + extent(offset, entry_size * count) + " (" + std::to_string(count) +
           " entries) exceeds the image size " + std::to_string(size) + " (truncated?)";
  }
  return {};
}

// The ELF identification and file header of a cubin: magic, size, class, data encoding, version,
// machine and header size.
std::string cubin_header_problem(std::string_view b) {
  const std::uint64_t size = b.size();
  if (size < 4 || b.substr(0, 4) != std::string_view("\x7f"
                                                     "ELF",
                                                     4)) {
    return "cubin: it does not start with the ELF magic 0x7f 'E' 'L' 'F': it is not an ELF file";
  }
  if (size < elf64_header) {
    return "cubin: the image has " + std::to_string(size) + " bytes, fewer than the " + std::to_string(elf64_header) +
           " of an ELF64 file header (truncated?)";
  }
  if (b[4] != 2) {
    return "cubin: ELF class " + std::to_string(static_cast<unsigned char>(b[4])) +
           " is not ELFCLASS64 (2): it is not a 64-bit ELF file";
  }
  if (b[5] != 1) {
    return "cubin: ELF data encoding " + std::to_string(static_cast<unsigned char>(b[5])) +
           " is not little-endian (ELFDATA2LSB = 1)";
  }
  if (b[6] != 1) {
    return "cubin: ELF identification version " + std::to_string(static_cast<unsigned char>(b[6])) +
           " is not EV_CURRENT (1)";
  }
  const auto machine = read_le<std::uint16_t>(b, 18);
  if (machine != em_cuda) {
    return "cubin: ELF machine " + std::to_string(machine) + " is not EM_CUDA (190): not a CUDA cubin";
  }
  const auto ehsize = read_le<std::uint16_t>(b, 52);
  if (ehsize < elf64_header || ehsize > size) {
    return "cubin: ELF header size " + std::to_string(ehsize) + " is not between " + std::to_string(elf64_header) +
           " and the image size " + std::to_string(size);
  }
  return {};
}

// A segment of the program header table (which fits the image) whose bytes exceed the image.
std::string segments_problem(std::string_view b, std::uint64_t phoff, std::uint64_t phentsize, std::uint64_t phnum) {
  const std::uint64_t size = b.size();
  for (std::uint64_t i = 0; i < phnum; ++i) {
    const std::uint64_t h = phoff + i * phentsize;
    const auto offset = read_le<std::uint64_t>(b, h + 8);
    const auto file_size = read_le<std::uint64_t>(b, h + 32);
    if (!fits(offset, file_size, size)) {
      return "cubin: segment " + std::to_string(i) + " " + extent(offset, file_size) + " exceeds the image size " +
             std::to_string(size) + " (truncated?)";
    }
  }
  return {};
}

// A section of the section header table (which fits the image) whose bytes exceed the image; null and
// NOBITS sections have none, nor section 0 under extended numbering.
std::string sections_problem(std::string_view b, std::uint64_t shoff, std::uint64_t shentsize, std::uint64_t shnum) {
  const std::uint64_t size = b.size();
  for (std::uint64_t i = 0; i < shnum; ++i) {
    const std::uint64_t h = shoff + i * shentsize;
    const auto type = read_le<std::uint32_t>(b, h + 4);
    const auto offset = read_le<std::uint64_t>(b, h + 24);
    const auto bytes = read_le<std::uint64_t>(b, h + 32);
    if (i == 0 && read_le<std::uint16_t>(b, 60) == 0) {
      continue;  // the extended-numbering section 0: its size is the section count
    }
    if (type != sht_null && type != sht_nobits && !fits(offset, bytes, size)) {
      return "cubin: section " + std::to_string(i) + " (type " + std::to_string(type) + ") " + extent(offset, bytes) +
             " exceeds the image size " + std::to_string(size) + " (truncated?)";
    }
  }
  return {};
}

std::string cubin_problem(std::string_view b) {
  if (std::string p = cubin_header_problem(b); !p.empty()) {
    return p;
  }
  const std::uint64_t size = b.size();
  const auto phoff = read_le<std::uint64_t>(b, 32);
  const auto shoff = read_le<std::uint64_t>(b, 40);
  const std::uint64_t phentsize = read_le<std::uint16_t>(b, 54);
  const std::uint64_t phnum = read_le<std::uint16_t>(b, 56);
  const std::uint64_t shentsize = read_le<std::uint16_t>(b, 58);
  std::uint64_t shnum = read_le<std::uint16_t>(b, 60);
  std::uint64_t shstrndx = read_le<std::uint16_t>(b, 62);
  if (std::string p = table_problem("program header table", phoff, phentsize, phnum, elf64_phdr, size); !p.empty()) {
    return p;
  }
  if (shnum == 0 && shoff != 0) {
    // Extended numbering: section 0 holds the count (sh_size) and the name table index (sh_link).
    if (std::string p = table_problem("section header table", shoff, shentsize, 1, elf64_shdr, size); !p.empty()) {
      return p;
    }
    shnum = read_le<std::uint64_t>(b, shoff + 32);
    if (shnum == 0) {
      return "cubin: the section header table at offset " + std::to_string(shoff) + " holds no section";
    }
  }
  if (shnum > size / elf64_shdr) {
    return "cubin: " + std::to_string(shnum) + " sections of " + std::to_string(shentsize) +
           " bytes cannot fit in the image size " + std::to_string(size) + " (truncated?)";
  }
  if (std::string p = table_problem("section header table", shoff, shentsize, shnum, elf64_shdr, size); !p.empty()) {
    return p;
  }
  if (shnum > 0 && shstrndx == shn_xindex) {
    shstrndx = read_le<std::uint32_t>(b, shoff + 40);  // section 0's sh_link
  }
  if (shnum > 0 && shstrndx >= shnum) {
    return "cubin: the section name table index " + std::to_string(shstrndx) + " is not below the section count " +
           std::to_string(shnum);
  }
  if (std::string p = segments_problem(b, phoff, phentsize, phnum); !p.empty()) {
    return p;
  }
  return sections_problem(b, shoff, shentsize, shnum);
}

// --- fatbin ------------------------------------------------------------------------------------------

// Header: magic u32, version u16, header size u16, body size u64. Each entry of the body: kind u16
// (1 PTX, 2 ELF, 4 LTO-IR), version u16, header size u32, payload size u64, ..., flags u32 at byte 40.
constexpr std::uint32_t fatbin_magic = 0xBA55ED50u;
constexpr std::size_t fatbin_header = 16;
constexpr std::size_t entry_fixed = 16;
constexpr std::size_t entry_with_flags = 44;
constexpr std::uint32_t compressed = 0x2000u | 0x8000u;  // LZ4 (older toolkits), zstd (CUDA 12.8+)

std::string fatbin_problem(std::string_view b) {
  const std::uint64_t size = b.size();
  if (size < 4 || read_le<std::uint32_t>(b, 0) != fatbin_magic) {
    return "fatbin: it does not start with the fatbin magic 0xBA55ED50";
  }
  if (size < fatbin_header) {
    return "fatbin: the image has " + std::to_string(size) + " bytes, fewer than the " + std::to_string(fatbin_header) +
           " of a fatbin header (truncated?)";
  }
  const std::uint64_t header = read_le<std::uint16_t>(b, 6);
  const auto body = read_le<std::uint64_t>(b, 8);
  if (header < fatbin_header) {
    return "fatbin: header size " + std::to_string(header) + " is below the " + std::to_string(fatbin_header) +
           " bytes of the header's fields";
  }
  if (!fits(header, body, size)) {
    return "fatbin: header of " + std::to_string(header) + " bytes + body of " + std::to_string(body) +
           " bytes exceeds the image size " + std::to_string(size) + " (truncated?)";
  }
  const std::uint64_t end = header + body;
  std::uint64_t index = 0;
  for (std::uint64_t o = header; o < end; ++index) {
    const std::uint64_t left = end - o;
    if (left < entry_fixed) {
      // Padding after the last entry is all zero.
      if (b.substr(o, left).find_first_not_of('\0') == std::string_view::npos) {
        break;
      }
      return "fatbin: entry " + std::to_string(index) + " at offset " + std::to_string(o) + " has " +
             std::to_string(left) + " bytes left in the body for its " + std::to_string(entry_fixed) +
             "-byte header (truncated?)";
    }
    const auto kind = read_le<std::uint16_t>(b, o);
    const std::uint64_t entry_header = read_le<std::uint32_t>(b, o + 4);
    const auto payload = read_le<std::uint64_t>(b, o + 8);
    if (entry_header < entry_fixed) {
      return "fatbin: entry " + std::to_string(index) + " at offset " + std::to_string(o) + " has a header size of " +
             std::to_string(entry_header) + ", below the " + std::to_string(entry_fixed) + " bytes of its fields";
    }
    if (!fits(entry_header, payload, left)) {
      return "fatbin: entry " + std::to_string(index) + " at offset " + std::to_string(o) + ": header of " +
             std::to_string(entry_header) + " bytes + payload of " + std::to_string(payload) +
             " bytes exceeds the end of the body at offset " + std::to_string(end) + " (truncated?)";
    }
    const std::string_view data = b.substr(o + entry_header, payload);
    const bool plain = entry_header >= entry_with_flags && (read_le<std::uint32_t>(b, o + 40) & compressed) == 0;
    if (kind == 2 && plain &&
        data.substr(0, 4) == std::string_view("\x7f"
                                              "ELF",
                                              4)) {
      if (std::string p = cubin_problem(data); !p.empty()) {
        return "fatbin: entry " + std::to_string(index) + " at offset " + std::to_string(o) + ": " + p;
      }
    }
    o += entry_header + payload;
  }
  return {};
}

}  // namespace

std::string image_problem(code_kind kind, std::string_view image) {
  switch (kind) {
    case code_kind::ptx: return ptx_problem(image);
    case code_kind::cubin: return cubin_problem(image);
    case code_kind::fatbin: return fatbin_problem(image);
    default: return {};
  }
}

}  // namespace cudrv::detail
