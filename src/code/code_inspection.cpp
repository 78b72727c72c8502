// What device code holds, read from its bytes (<cudrv/code_inspection.hpp>).
//
// A cubin's kernels are read by code_metadata.cpp (read_cubin_resources). Here: the fatbin container
// (its entries, decompressed with liblz4 or libzstd, which are loaded at run time so that a build or a
// machine without them still reads everything else), PTX texts, and host ELF files whose .nv_fatbin /
// __nv_relfatbin sections hold fatbins. Every size and offset is checked before it is used;
// image_problem() (image_check.cpp) checks the structure of cubins, fatbins and PTX first.
#include "cudrv/code_inspection.hpp"

#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "code/code_metadata.hpp"
#include "code/image_check.hpp"
#include "cudrv/error.hpp"

namespace cudrv {
namespace {

constexpr const char* api = "cudrv::inspect";

template <class T>
T read_le(std::string_view b, std::size_t offset) noexcept {  // the caller checked the bounds
  T value{};
  std::memcpy(&value, b.data() + offset, sizeof(T));
  return value;
}

std::string demangle(const std::string& name) {
  int status = 0;
  char* text = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && text != nullptr ? std::string(text) : name;
  std::free(text);  // NOLINT(cppcoreguidelines-no-malloc): __cxa_demangle's buffer comes from malloc
  return out;
}

// --- decompression: liblz4 and libzstd, loaded on first use -----------------------------------------

struct decompressors {
  using lz4_fn = int (*)(const char*, char*, int, int);                           // LZ4_decompress_safe
  using zstd_fn = std::size_t (*)(void*, std::size_t, const void*, std::size_t);  // ZSTD_decompress
  using zstd_error_fn = unsigned (*)(std::size_t);                                // ZSTD_isError
  lz4_fn lz4 = nullptr;
  zstd_fn zstd = nullptr;
  zstd_error_fn zstd_is_error = nullptr;
};

const decompressors& libraries() {
  static const decompressors d = [] {
    decompressors out;
    if (void* lz4 = dlopen("liblz4.so.1", RTLD_NOW | RTLD_LOCAL)) {
      out.lz4 = reinterpret_cast<decompressors::lz4_fn>(dlsym(lz4, "LZ4_decompress_safe"));
    }
    if (void* zstd = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL)) {
      out.zstd = reinterpret_cast<decompressors::zstd_fn>(dlsym(zstd, "ZSTD_decompress"));
      out.zstd_is_error = reinterpret_cast<decompressors::zstd_error_fn>(dlsym(zstd, "ZSTD_isError"));
    }
    return out;  // the libraries stay loaded for the process
  }();
  return d;
}

// The decompressed bytes into out; "" or why not.
// Throws invalid_image_error when the entries decompressed so far exceed the inspect() call's budget.
std::string decompress(const std::string& method, std::string_view in, std::size_t size, std::string& out,
                       detail::inspect_budget& budget, const std::string& where) {
  // A hostile header could ask for any size: no real entry expands more than this.
  if (size > (std::size_t{1} << 30) || in.size() > (std::size_t{1} << 30) ||
      size > in.size() * 1024 + (std::size_t{1} << 20)) {
    return "its decompressed size " + std::to_string(size) + " is implausible for " + std::to_string(in.size()) +
           " compressed bytes";
  }
  if (!budget.spend(size)) {
    throw invalid_image_error(api, where + ": decompressing " + std::to_string(size) + " bytes: " + budget.exhausted());
  }
  const decompressors& d = libraries();
  out.assign(size, '\0');
  if (method == "lz4") {
    if (d.lz4 == nullptr) {
      return "compressed entry: cannot read, liblz4.so.1 not found (install liblz4-1)";
    }
    const int n = d.lz4(in.data(), out.data(), static_cast<int>(in.size()), static_cast<int>(size));
    return n == static_cast<int>(size) ? std::string() : "its LZ4 data is corrupt";
  }
  if (d.zstd == nullptr || d.zstd_is_error == nullptr) {
    return "compressed entry: cannot read, libzstd.so.1 not found (install libzstd1)";
  }
  const std::size_t n = d.zstd(out.data(), size, in.data(), in.size());
  return d.zstd_is_error(n) == 0 && n == size ? std::string() : "its zstd data is corrupt";
}

// --- PTX ---------------------------------------------------------------------------------------------

// The architecture of a PTX text: its ".target sm_90a" directive.
void read_ptx_target(std::string_view text, code_image& image) {
  const std::size_t at = text.find(".target");
  if (at == std::string_view::npos) {
    return;
  }
  std::size_t i = at + 7;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) {
    ++i;
  }
  if (text.substr(i, 3) != "sm_") {
    return;
  }
  i += 3;
  int arch = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0 && arch < 10000) {
    arch = arch * 10 + (text[i++] - '0');
  }
  image.arch = arch;
  image.arch_name = "compute_" + std::to_string(arch);
  if (i < text.size() && (text[i] == 'a' || text[i] == 'f')) {
    image.arch_name += text[i];
  }
}

void read_ptx(std::string_view text, code_image& image) {
  image.kind = code_image_kind::ptx;
  read_ptx_target(text, image);
  detail::kernel_layouts layouts;
  if (!detail::read_ptx_layouts(text, layouts)) {
    image.unreadable = "the parameter list of an entry could not be parsed";
    return;
  }
  for (auto& [name, params] : layouts) {
    kernel_resources k;
    k.name = name;
    for (std::size_t i = 0; i < params.size(); ++i) {
      k.parameters.push_back({i, params[i].offset, params[i].size});
      k.parameter_bytes = params[i].offset + params[i].size;
    }
    image.kernels.push_back(std::move(k));
  }
  std::sort(image.kernels.begin(), image.kernels.end(),
            [](const kernel_resources& a, const kernel_resources& b) { return a.name < b.name; });
}

void read_sass(std::string_view bytes, code_image& image, const std::string& where, detail::inspect_budget& budget) {
  image.kind = code_image_kind::sass;
  if (std::string p = detail::image_problem(code_kind::cubin, bytes); !p.empty()) {
    throw invalid_image_error(api, where + ": " + p);
  }
  if (std::string p = detail::read_cubin_resources(bytes, image, budget); !p.empty()) {
    throw invalid_image_error(api, where + ": cubin: " + p);
  }
}

// --- fatbin ------------------------------------------------------------------------------------------

constexpr std::uint32_t fatbin_magic = 0xBA55ED50u;
constexpr std::uint64_t flag_lz4 = 0x2000;
constexpr std::uint64_t flag_zstd = 0x8000;
constexpr std::uint64_t flag_arch_specific = 0x100000;

// One entry of a fatbin: header fields at 0 (kind u16), 4 (header size u32), 8 (payload size u64),
// 16 (compressed size u32), 28 (architecture u32), 40 (flags u64), 56 (decompressed size u64).
code_image read_fatbin_entry(std::string_view entry, std::size_t header, std::string_view payload,
                             const std::string& where, detail::inspect_budget& budget) {
  code_image image;
  const auto kind = read_le<std::uint16_t>(entry, 0);
  const bool full = header >= 64;
  image.arch = full ? static_cast<int>(read_le<std::uint32_t>(entry, 28)) : 0;
  image.flags = full ? read_le<std::uint64_t>(entry, 40) : 0;
  image.stored_bytes = payload.size();
  image.bytes = payload.size();
  const std::string suffix = (image.flags & flag_arch_specific) != 0 ? "a" : "";
  image.kind = kind == 1   ? code_image_kind::ptx
               : kind == 2 ? code_image_kind::sass
               : kind == 4 ? code_image_kind::ltoir
                           : code_image_kind::unknown;
  image.arch_name = (kind == 2 ? "sm_" : "compute_") + std::to_string(image.arch) + suffix;
  std::string plain;
  std::string_view data = payload;
  if ((image.flags & (flag_lz4 | flag_zstd)) != 0) {
    image.compression = (image.flags & flag_zstd) != 0 ? "zstd" : "lz4";
    const auto stored = read_le<std::uint32_t>(entry, 16);
    if (stored != 0 && stored <= payload.size()) {
      data = payload.substr(0, stored);
      image.stored_bytes = stored;
    }
    image.bytes = static_cast<std::size_t>(read_le<std::uint64_t>(entry, 56));
    image.unreadable = decompress(image.compression, data, image.bytes, plain, budget, where);
    if (!image.unreadable.empty()) {
      return image;
    }
    data = plain;
  }
  if (kind == 2) {
    const std::string name = image.arch_name;
    read_sass(data, image, where, budget);
    image.arch_name = name;  // the fatbin's name of the entry
  } else if (kind == 1) {
    const std::string name = image.arch_name;
    read_ptx(data.substr(0, data.find('\0')), image);
    image.arch_name = name;
  }
  return image;
}

// The entries of the fatbin at the start of b (checked by image_problem()); returns its size.
std::size_t read_fatbin(std::string_view b, const std::string& container, std::vector<code_image>& out,
                        detail::inspect_budget& budget) {
  const std::size_t header = read_le<std::uint16_t>(b, 6);
  const std::size_t end = header + static_cast<std::size_t>(read_le<std::uint64_t>(b, 8));
  std::size_t index = 0;
  for (std::size_t o = header; o + 16 <= end; ++index) {
    const std::size_t entry_header = read_le<std::uint32_t>(b, o + 4);
    const auto payload = static_cast<std::size_t>(read_le<std::uint64_t>(b, o + 8));
    const std::string where = container + " entry " + std::to_string(index) + " at offset " + std::to_string(o);
    code_image image =
        read_fatbin_entry(b.substr(o, entry_header), entry_header, b.substr(o + entry_header, payload), where, budget);
    image.container = container;
    out.push_back(std::move(image));
    o += entry_header + payload;
  }
  return end;
}

void check(code_kind kind, std::string_view bytes, const std::string& where) {
  if (std::string p = detail::image_problem(kind, bytes); !p.empty()) {
    throw invalid_image_error(api, where + p);
  }
}

// The fatbins one after the other in a host section (each aligned to 8 bytes, zero padding between).
void read_fatbin_section(std::string_view data, const std::string& section, std::vector<code_image>& out,
                         detail::inspect_budget& budget) {
  std::size_t o = 0;
  while (o + 4 <= data.size()) {
    if (read_le<std::uint32_t>(data, o) != fatbin_magic) {
      if (data[o] == '\0') {
        ++o;  // padding
        continue;
      }
      throw invalid_image_error(api, "section " + section + ": no fatbin magic at offset " + std::to_string(o));
    }
    const std::string_view rest = data.substr(o);
    check(code_kind::fatbin, rest, "section " + section + " at offset " + std::to_string(o) + ": ");
    o += read_fatbin(rest, section, out, budget);
  }
}

// --- host ELF files ----------------------------------------------------------------------------------

// The section header table of a host ELF file: where it is, its entry size, the section count and the
// name table's index, with extended numbering (more than 65279 sections: e_shnum 0 and the count in
// section 0's sh_size; e_shstrndx SHN_XINDEX and the index in section 0's sh_link), as image_check.cpp
// reads cubins.
struct host_sections {
  std::uint64_t shoff = 0;
  std::uint64_t shentsize = 0;
  std::uint64_t shnum = 0;
  std::uint64_t shstrndx = 0;
};

host_sections read_host_header(std::string_view b) {
  if (b.size() < 64 || b.substr(0, 4) != std::string_view("\x7f"
                                                          "ELF",
                                                          4)) {
    throw invalid_image_error(api, "not an ELF file (no ELF magic, or fewer than 64 bytes)");
  }
  if (b[4] != 2 || b[5] != 1) {
    throw invalid_image_error(api, "not a little-endian 64-bit ELF file");
  }
  host_sections h{read_le<std::uint64_t>(b, 40), read_le<std::uint16_t>(b, 58), read_le<std::uint16_t>(b, 60),
                  read_le<std::uint16_t>(b, 62)};
  const bool first_fits = h.shentsize >= 64 && h.shoff <= b.size() && h.shentsize <= b.size() - h.shoff;
  if (h.shnum == 0 && h.shoff != 0 && first_fits) {
    h.shnum = read_le<std::uint64_t>(b, h.shoff + 32);  // extended numbering: section 0's sh_size
  }
  constexpr std::uint64_t shn_xindex = 0xffff;
  if (h.shnum != 0 && h.shstrndx == shn_xindex && first_fits) {
    h.shstrndx = read_le<std::uint32_t>(b, h.shoff + 40);  // section 0's sh_link
  }
  if (h.shnum != 0 && (h.shentsize < 64 || h.shoff > b.size() || h.shnum > (b.size() - h.shoff) / h.shentsize ||
                       h.shstrndx >= h.shnum)) {
    throw invalid_image_error(api, "the section header table at offset " + std::to_string(h.shoff) + " (" +
                                       std::to_string(h.shnum) + " entries of " + std::to_string(h.shentsize) +
                                       " bytes) or its name index " + std::to_string(h.shstrndx) +
                                       " does not fit the file of " + std::to_string(b.size()) + " bytes (truncated?)");
  }
  return h;
}

// The name of section i when it is .nv_fatbin or __nv_relfatbin (read without scanning longer names), else "".
std::string_view fatbin_section_name(std::string_view b, const host_sections& h, std::uint64_t i,
                                     std::string_view names) {
  const std::uint32_t at = read_le<std::uint32_t>(b, h.shoff + i * h.shentsize);
  constexpr std::uint32_t sht_nobits = 8;
  if (at >= names.size() || read_le<std::uint32_t>(b, h.shoff + i * h.shentsize + 4) == sht_nobits) {
    return {};
  }
  const std::string_view head = names.substr(at, 16);
  const std::string_view name = head.substr(0, head.find('\0'));
  return name == ".nv_fatbin" || name == "__nv_relfatbin" ? name : std::string_view();
}

void read_host_elf(std::string_view b, std::vector<code_image>& out, detail::inspect_budget& budget) {
  const host_sections h = read_host_header(b);
  if (h.shnum == 0) {
    return;  // no sections: nothing embedded
  }
  auto section = [&](std::uint64_t i) {
    const std::uint64_t at = h.shoff + i * h.shentsize;
    const auto offset = read_le<std::uint64_t>(b, at + 24);
    const auto size = read_le<std::uint64_t>(b, at + 32);
    if (offset > b.size() || size > b.size() - offset) {
      throw invalid_image_error(api, "section " + std::to_string(i) + " at offset " + std::to_string(offset) + " + " +
                                         std::to_string(size) + " bytes exceeds the file (truncated?)");
    }
    return b.substr(offset, size);
  };
  const std::string_view names = section(h.shstrndx);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> read;  // the fatbin sections: offset, index
  for (std::uint64_t i = 0; i < h.shnum; ++i) {
    if (!fatbin_section_name(b, h, i, names).empty() && !section(i).empty()) {
      read.emplace_back(static_cast<std::uint64_t>(section(i).data() - b.data()), i);
    }
  }
  std::sort(read.begin(), read.end());
  for (std::size_t n = 0; n < read.size(); ++n) {
    const std::string_view data = section(read[n].second);
    if (n + 1 < read.size() && read[n + 1].first < read[n].first + data.size()) {
      throw invalid_image_error(api, "sections " + std::to_string(read[n].second) + " and " +
                                         std::to_string(read[n + 1].second) + " (" +
                                         std::string(fatbin_section_name(b, h, read[n].second, names)) +
                                         ") share the bytes at offset " + std::to_string(read[n + 1].first) +
                                         ": each fatbin is read once");
    }
    if (!budget.spend(data.size())) {
      throw invalid_image_error(api, "section " + std::to_string(read[n].second) + ": " + budget.exhausted());
    }
  }
  std::sort(read.begin(), read.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
  for (const auto& [offset, i] : read) {
    read_fatbin_section(section(i), std::string(fatbin_section_name(b, h, i, names)), out, budget);
  }
}

}  // namespace

const char* to_string(code_image_kind kind) noexcept {
  switch (kind) {
    case code_image_kind::sass: return "sass";
    case code_image_kind::ptx: return "ptx";
    case code_image_kind::ltoir: return "ltoir";
    case code_image_kind::unknown: break;
  }
  return "unknown";
}

code_kind detect_code_kind(std::string_view b) noexcept {
  if (b.size() >= 4 && read_le<std::uint32_t>(b, 0) == fatbin_magic) {
    return code_kind::fatbin;
  }
  if (b.substr(0, 8) == "!<arch>\n") {
    return code_kind::library;  // a static library: an archive of host objects
  }
  if (b.size() >= 20 && b.substr(0, 4) == std::string_view("\x7f"
                                                           "ELF",
                                                           4)) {
    constexpr std::uint16_t em_cuda = 190;
    return read_le<std::uint16_t>(b, 18) == em_cuda ? code_kind::cubin : code_kind::object;
  }
  return code_kind::ptx;
}

code_inspection inspect(const object_code& code) {
  code_inspection out;
  const std::string_view bytes(code.data(), code.size());
  detail::inspect_budget budget(bytes.size());
  const std::string name = code.name().empty() ? std::string("the image") : "'" + code.name() + "'";
  switch (code.kind()) {
    case code_kind::cubin: {
      code_image image;
      image.stored_bytes = image.bytes = bytes.size();
      read_sass(bytes, image, name, budget);
      out.images.push_back(std::move(image));
      break;
    }
    case code_kind::ptx: {
      check(code_kind::ptx, bytes, name + ": ");
      code_image image;
      image.stored_bytes = image.bytes = bytes.size();
      read_ptx(bytes, image);
      out.images.push_back(std::move(image));
      break;
    }
    case code_kind::fatbin:
      check(code_kind::fatbin, bytes, name + ": ");
      read_fatbin(bytes, "fatbin", out.images, budget);
      break;
    case code_kind::object: read_host_elf(bytes, out.images, budget); break;
    case code_kind::library:
      throw invalid_argument_error(api, name + " is an archive (a static library): extract its objects (ar x) and "
                                               "inspect each");
    default:
      throw invalid_argument_error(api, "cannot inspect " + std::string(to_string(code.kind())) + " code (" + name +
                                            "): give a cubin, fatbin, PTX or host ELF file (object)");
  }
  for (code_image& image : out.images) {
    for (kernel_resources& k : image.kernels) {
      k.demangled_name = demangle(k.name);
    }
  }
  return out;
}

}  // namespace cudrv
