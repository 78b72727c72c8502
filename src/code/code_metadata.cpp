// Kernel parameter layouts read from the images themselves (see code_metadata.hpp).
#include "code/code_metadata.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <optional>
#include <unordered_set>

namespace cudrv::detail {
namespace {

template <class T>
std::optional<T> read_le(std::string_view b, std::size_t offset) {
  if (offset > b.size() || sizeof(T) > b.size() - offset) {
    return std::nullopt;
  }
  T value{};
  std::memcpy(&value, b.data() + offset, sizeof(T));
  return value;
}

// A layout is believable when the ordinals cover 0..n-1 once each and the parameters follow each
// other without overlapping.
bool plausible(const std::vector<std::optional<kernel_param>>& by_ordinal) {
  std::size_t end = 0;
  for (const auto& p : by_ordinal) {
    if (!p || p->size == 0 || p->offset < end) {
      return false;
    }
    end = p->offset + p->size;
  }
  return true;
}

// EIATTR records of one .nv.info.<kernel> section: [format u8][attribute u8] then, by format,
// 2 bytes of padding (no value), a 1- or 2-byte value in 2 bytes, or a u16 size and that many bytes.
constexpr std::uint8_t eifmt_nval = 1;
constexpr std::uint8_t eifmt_bval = 2;
constexpr std::uint8_t eifmt_hval = 3;
constexpr std::uint8_t eifmt_sval = 4;
constexpr std::uint8_t eiattr_kparam_info = 0x17;     // index u32, ordinal u16, offset u16, flags u32 (size: bits 18+)
constexpr std::uint8_t eiattr_kparam_info_v2 = 0x45;  // index u32, ordinal u16, offset u16, size u32 (large parameters)

// One record: for the 2-byte formats value is those 2 bytes, for EIFMT_SVAL its payload.
struct info_record {
  std::uint8_t format;
  std::uint8_t attribute;
  std::string_view value;
};

// Calls f on every record of a .nv.info-format section; false when a record does not fit or has an
// unknown format.
template <class F>
bool for_each_record(std::string_view sec, F&& f) {
  std::size_t o = 0;
  while (o < sec.size()) {
    if (sec.size() - o < 4) {
      return false;
    }
    const auto format = static_cast<std::uint8_t>(sec[o]);
    const auto attribute = static_cast<std::uint8_t>(sec[o + 1]);
    if (format == eifmt_nval || format == eifmt_bval || format == eifmt_hval) {
      f(info_record{format, attribute, sec.substr(o + 2, 2)});
      o += 4;
      continue;
    }
    if (format != eifmt_sval) {
      return false;
    }
    const std::size_t size = *read_le<std::uint16_t>(sec, o + 2);
    if (size > sec.size() - o - 4) {
      return false;
    }
    f(info_record{format, attribute, sec.substr(o + 4, size)});
    o += 4 + size;
  }
  return true;
}

bool read_info_section(std::string_view sec, std::vector<kernel_param>& out) {
  std::vector<std::optional<kernel_param>> by_ordinal;
  bool consistent = true;
  const bool readable = for_each_record(sec, [&](const info_record& r) {
    if (r.format != eifmt_sval || (r.attribute != eiattr_kparam_info && r.attribute != eiattr_kparam_info_v2) ||
        r.value.size() < 12 || !consistent) {
      return;
    }
    const std::size_t ordinal = *read_le<std::uint16_t>(r.value, 4);
    const std::size_t offset = *read_le<std::uint16_t>(r.value, 6);
    const std::uint32_t word = *read_le<std::uint32_t>(r.value, 8);
    const std::size_t bytes = r.attribute == eiattr_kparam_info ? (word >> 18) : word;
    if (ordinal > 4096) {
      consistent = false;  // kernel parameters are at most 32764 bytes: no such ordinal exists
      return;
    }
    if (by_ordinal.size() <= ordinal) {
      by_ordinal.resize(ordinal + 1);
    }
    if (by_ordinal[ordinal]) {
      consistent = false;  // described twice
      return;
    }
    by_ordinal[ordinal] = kernel_param{offset, bytes};
  });
  if (!readable || !consistent) {
    return false;
  }
  if (!plausible(by_ordinal)) {
    return false;
  }
  out.clear();
  for (const auto& p : by_ordinal) {
    out.push_back(*p);
  }
  return true;
}

// --- PTX --------------------------------------------------------------------------------------------

// The text with comments replaced by spaces (strings do not occur where parameters are declared).
std::string strip_comments(std::string_view text) {
  std::string out(text);
  for (std::size_t i = 0; i + 1 < out.size(); ++i) {
    if (out[i] == '/' && out[i + 1] == '/') {
      while (i < out.size() && out[i] != '\n') {
        out[i++] = ' ';
      }
    } else if (out[i] == '/' && out[i + 1] == '*') {
      std::size_t end = out.find("*/", i + 2);
      end = end == std::string::npos ? out.size() : end + 2;
      std::fill(out.begin() + static_cast<std::ptrdiff_t>(i), out.begin() + static_cast<std::ptrdiff_t>(end), ' ');
      i = end - 1;
    }
  }
  return out;
}

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '$' || c == '.' || c == '%';
}

// Splits a declaration into tokens: words (".param", ".u64", names), numbers, and the single
// characters '[', ']'.
std::vector<std::string_view> tokens(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    if (std::isspace(static_cast<unsigned char>(s[i])) != 0) {
      ++i;
    } else if (s[i] == '[' || s[i] == ']') {
      out.push_back(s.substr(i, 1));
      ++i;
    } else {
      std::size_t j = i;
      while (j < s.size() && is_name_char(s[j])) {
        ++j;
      }
      if (j == i) {
        out.push_back(s.substr(i, 1));  // something unexpected: the parser refuses it
        ++i;
      } else {
        out.push_back(s.substr(i, j - i));
        i = j;
      }
    }
  }
  return out;
}

std::optional<std::size_t> scalar_size(std::string_view type) {
  static constexpr std::pair<std::string_view, std::size_t> sizes[] = {
      {".b8", 1},   {".u8", 1},  {".s8", 1},  {".b16", 2}, {".u16", 2},   {".s16", 2},   {".f16", 2},
      {".bf16", 2}, {".b32", 4}, {".u32", 4}, {".s32", 4}, {".f32", 4},   {".f16x2", 4}, {".bf16x2", 4},
      {".b64", 8},  {".u64", 8}, {".s64", 8}, {".f64", 8}, {".b128", 16},
  };
  for (const auto& [name, size] : sizes) {
    if (type == name) {
      return size;
    }
  }
  return std::nullopt;
}

std::optional<std::size_t> number(std::string_view s) {
  if (s.empty() || s.size() > 9) {
    return std::nullopt;
  }
  std::size_t v = 0;
  for (char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) {
      return std::nullopt;
    }
    v = v * 10 + static_cast<std::size_t>(c - '0');
  }
  return v;
}

// One parameter declaration: `.param [.align N] .type [.ptr [.space] [.align N]] name [[count]...]`.
// Returns {size, alignment}.
std::optional<std::pair<std::size_t, std::size_t>> parse_parameter(std::string_view decl) {
  const std::vector<std::string_view> t = tokens(decl);
  std::size_t i = 0;
  if (t.size() < 3 || t[i++] != ".param") {
    return std::nullopt;
  }
  std::size_t align = 0;
  if (t[i] == ".align") {
    if (i + 1 >= t.size()) {
      return std::nullopt;
    }
    auto a = number(t[i + 1]);
    if (!a || *a == 0) {
      return std::nullopt;
    }
    align = *a;
    i += 2;
  }
  if (i >= t.size()) {
    return std::nullopt;
  }
  const auto element = scalar_size(t[i++]);
  if (!element) {
    return std::nullopt;  // .texref, .samplerref, .surfref or something newer: the driver will tell
  }
  if (i < t.size() && t[i] == ".ptr") {  // the attributes of the pointee, not of the parameter
    ++i;
    if (i < t.size() && (t[i] == ".global" || t[i] == ".const" || t[i] == ".local" || t[i] == ".shared")) {
      ++i;
    }
    if (i < t.size() && t[i] == ".align") {
      i += 2;
    }
  }
  if (i >= t.size() || t[i].front() == '.' || t[i] == "[" || t[i] == "]") {
    return std::nullopt;  // the name
  }
  ++i;
  std::size_t count = 1;
  while (i < t.size()) {
    if (t[i] != "[" || i + 2 >= t.size() || t[i + 2] != "]") {
      return std::nullopt;
    }
    auto n = number(t[i + 1]);
    if (!n || *n == 0) {
      return std::nullopt;
    }
    count *= *n;
    i += 3;
  }
  return std::pair{*element * count, align != 0 ? align : *element};
}

}  // namespace

namespace {

// The section headers of a little-endian ELF64 image whose header table fits the file. Only the
// sections read are bounds-checked: others, such as the NOBITS .nv.shared.<kernel> of a kernel with
// static shared memory, have a size that no bytes of the file back.
struct elf_sections {
  std::string_view b;
  std::uint64_t shoff = 0;
  std::uint16_t shentsize = 0;
  std::uint16_t shnum = 0;

  // Where section index's header starts.
  std::size_t header(std::size_t index) const { return static_cast<std::size_t>(shoff) + index * shentsize; }
  // Section index's bytes in the file; false when they do not fit it.
  bool contents(std::size_t index, std::string_view& data) const {
    const std::size_t h = header(index);
    const auto offset = *read_le<std::uint64_t>(b, h + 24);
    const auto size = *read_le<std::uint64_t>(b, h + 32);
    if (offset > b.size() || size > b.size() - offset) {
      return false;
    }
    data = b.substr(static_cast<std::size_t>(offset), static_cast<std::size_t>(size));
    return true;
  }
};

// A NUL-terminated name at offset in a string table, or nothing when it does not fit.
std::optional<std::string_view> name_at(std::string_view table, std::size_t offset) {
  if (offset >= table.size()) {
    return std::nullopt;
  }
  const std::size_t end = table.find('\0', offset);
  if (end == std::string_view::npos) {
    return std::nullopt;
  }
  return table.substr(offset, end - offset);
}

// The kernels are the function symbols marked as entries (STO_CUDA_ENTRY in st_other). A .nv.info.<name>
// section alone does not make one: -G cubins, and relocatable units and what nvJitLink links from them,
// carry one for __device__ functions too, which the driver does not give as kernels. Adds the entries
// of every symbol table to entries (each not yet described); false for a malformed table or none.
bool read_entry_names(const elf_sections& elf, std::unordered_map<std::string, bool>& entries) {
  constexpr std::uint32_t sht_symtab = 2;
  constexpr std::uint8_t stt_func = 2;
  constexpr std::uint8_t sto_cuda_entry = 0x10;
  constexpr std::size_t symbol_size = 24;  // Elf64_Sym: name u32, info u8, other u8, shndx u16, value, size
  bool symbols_seen = false;
  for (std::size_t i = 0; i < elf.shnum; ++i) {
    if (*read_le<std::uint32_t>(elf.b, elf.header(i) + 4) != sht_symtab) {
      continue;
    }
    const auto link = *read_le<std::uint32_t>(elf.b, elf.header(i) + 40);
    std::string_view symbols;
    std::string_view strings;
    if (link >= elf.shnum || !elf.contents(i, symbols) || !elf.contents(link, strings)) {
      return false;
    }
    symbols_seen = true;
    for (std::size_t o = 0; o + symbol_size <= symbols.size(); o += symbol_size) {
      const auto info = static_cast<std::uint8_t>(symbols[o + 4]);
      const auto other = static_cast<std::uint8_t>(symbols[o + 5]);
      if ((info & 0xf) != stt_func || (other & sto_cuda_entry) == 0) {
        continue;
      }
      const auto name = name_at(strings, *read_le<std::uint32_t>(symbols, o));
      if (!name || name->empty()) {
        return false;
      }
      entries.emplace(std::string(*name), false);
    }
  }
  return symbols_seen;  // no symbol table: which functions are kernels is the driver's to say
}

// The layouts of the .nv.info.<kernel> sections of the entries (marking each entry described) into
// found; false for a malformed section or name.
bool read_entry_layouts(const elf_sections& elf, std::string_view names, std::unordered_map<std::string, bool>& entries,
                        kernel_layouts& found) {
  constexpr std::string_view prefix = ".nv.info.";
  for (std::size_t i = 0; i < elf.shnum; ++i) {
    const auto name = name_at(names, *read_le<std::uint32_t>(elf.b, elf.header(i)));
    if (!name) {
      return false;
    }
    if (!name->starts_with(prefix) || name->size() == prefix.size()) {
      continue;
    }
    auto entry = entries.find(std::string(name->substr(prefix.size())));
    if (entry == entries.end()) {
      continue;  // a __device__ function's attributes
    }
    std::string_view data;
    if (!elf.contents(i, data)) {
      return false;
    }
    std::vector<kernel_param> params;
    if (!read_info_section(data, params)) {
      return false;
    }
    entry->second = true;
    found.emplace(entry->first, std::move(params));
  }
  return true;
}

}  // namespace

bool read_cubin_layouts(std::string_view b, kernel_layouts& out) {
  if (b.size() < 64 ||
      b.substr(0, 4) != std::string_view("\x7f"
                                         "ELF",
                                         4) ||
      b[4] != 2 || b[5] != 1) {
    return false;  // not a little-endian ELF64
  }
  const elf_sections elf{b, *read_le<std::uint64_t>(b, 40), *read_le<std::uint16_t>(b, 58),
                         *read_le<std::uint16_t>(b, 60)};
  const auto shstrndx = *read_le<std::uint16_t>(b, 62);
  if (elf.shentsize < 64 || shstrndx >= elf.shnum || elf.shoff > b.size() ||
      std::uint64_t(elf.shentsize) * elf.shnum > b.size() - elf.shoff) {
    return false;
  }
  std::string_view names;
  if (!elf.contents(shstrndx, names)) {
    return false;
  }
  std::unordered_map<std::string, bool> entries;  // name -> its .nv.info section was read
  if (!read_entry_names(elf, entries)) {
    return false;
  }
  kernel_layouts found;
  if (!read_entry_layouts(elf, names, entries, found)) {
    return false;
  }
  for (const auto& [name, described] : entries) {
    if (!described) {
      return false;  // a kernel without its .nv.info section: its layout is the driver's to say
    }
  }
  out = std::move(found);
  return true;
}

bool read_ptx_layouts(std::string_view text, kernel_layouts& out) {
  const std::string ptx = strip_comments(text);
  kernel_layouts found;
  std::size_t pos = 0;
  while ((pos = ptx.find(".entry", pos)) != std::string::npos) {
    const bool word_start = pos == 0 || std::isspace(static_cast<unsigned char>(ptx[pos - 1])) != 0;
    pos += 6;
    if (!word_start || pos >= ptx.size() || std::isspace(static_cast<unsigned char>(ptx[pos])) == 0) {
      continue;
    }
    std::size_t n = pos;
    while (n < ptx.size() && std::isspace(static_cast<unsigned char>(ptx[n])) != 0) {
      ++n;
    }
    std::size_t e = n;
    while (e < ptx.size() && is_name_char(ptx[e])) {
      ++e;
    }
    if (e == n) {
      return false;
    }
    std::string name = ptx.substr(n, e - n);
    std::size_t p = e;
    while (p < ptx.size() && std::isspace(static_cast<unsigned char>(ptx[p])) != 0) {
      ++p;
    }
    std::vector<kernel_param> params;
    if (p < ptx.size() && ptx[p] == '(') {
      const std::size_t close = ptx.find(')', p);
      if (close == std::string::npos) {
        return false;
      }
      std::string_view list(ptx.data() + p + 1, close - p - 1);
      std::size_t offset = 0;
      while (!list.empty()) {
        const std::size_t comma = list.find(',');
        std::string_view decl = list.substr(0, comma);
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
        if (decl.find_first_not_of(" \t\r\n") == std::string_view::npos) {
          if (comma == std::string_view::npos && params.empty()) {
            break;  // "()": no parameters
          }
          return false;
        }
        auto parsed = parse_parameter(decl);
        if (!parsed) {
          return false;
        }
        const auto [size, align] = *parsed;
        offset = (offset + align - 1) / align * align;
        params.push_back({offset, size});
        offset += size;
      }
      pos = close;
    }
    found[std::move(name)] = std::move(params);
  }
  out = std::move(found);
  return true;
}

bool read_fatbin_layouts(std::string_view b, kernel_layouts& out) {
  // Header: magic u32, version u16, header size u16, size of the entries u64. Each entry: kind u16
  // (1 PTX, 2 ELF), version u16, header size u32, payload size u64, ..., flags u32 at byte 40.
  constexpr std::uint32_t magic = 0xBA55ED50u;
  constexpr std::uint32_t compressed = 0x2000u | 0x8000u;  // LZ4 (older toolkits), zstd (CUDA 12.8+)
  if (read_le<std::uint32_t>(b, 0) != magic) {
    return false;
  }
  const std::size_t header = *read_le<std::uint16_t>(b, 6);
  const std::uint64_t body = read_le<std::uint64_t>(b, 8).value_or(0);
  if (header < 16 || header > b.size() || body > b.size() - header) {
    return false;
  }
  const std::size_t end = header + static_cast<std::size_t>(body);
  std::optional<std::string_view> cubin;
  std::optional<std::string_view> ptx;
  for (std::size_t o = header; o + 48 <= end;) {
    const auto kind = *read_le<std::uint16_t>(b, o);
    const auto entry_header = *read_le<std::uint32_t>(b, o + 4);
    const auto payload = *read_le<std::uint64_t>(b, o + 8);
    const auto flags = *read_le<std::uint32_t>(b, o + 40);
    if (entry_header < 48 || entry_header > end - o || payload > end - o - entry_header) {
      return false;
    }
    const std::string_view data = b.substr(o + entry_header, static_cast<std::size_t>(payload));
    if ((flags & compressed) == 0) {
      if (kind == 2 && !cubin &&
          data.substr(0, 4) == std::string_view("\x7f"
                                                "ELF",
                                                4)) {
        cubin = data;
      } else if (kind == 1 && !ptx) {
        ptx = data.substr(0, data.find('\0'));
      }
    }
    o += entry_header + static_cast<std::size_t>(payload);
  }
  return (cubin && read_cubin_layouts(*cubin, out)) || (ptx && read_ptx_layouts(*ptx, out));
}

bool read_kernel_layouts(code_kind kind, std::string_view image, kernel_layouts& out) noexcept {
  try {
    switch (kind) {
      case code_kind::cubin: return read_cubin_layouts(image, out);
      case code_kind::ptx: return read_ptx_layouts(image, out);
      case code_kind::fatbin: return read_fatbin_layouts(image, out);
      default: return false;
    }
  } catch (...) {
    return false;  // out of memory: the driver is asked instead
  }
}

// --- issue 36: inspect ----------------------------------------------------------------------------

namespace {

// EIATTR attributes (of .nv.info and .nv.info.<kernel>) and EICOMPAT attributes (of .nv.compat) read
// for resources, as ptxas 13.0 writes them.
constexpr std::uint8_t eiattr_max_threads = 0x05;           // u32 x, y, z: __launch_bounds__ / .maxntid
constexpr std::uint8_t eiattr_reqntid = 0x10;               // u32 x, y, z: .reqntid
constexpr std::uint8_t eiattr_frame_size = 0x11;            // u32 symbol, u32 bytes (.nv.info)
constexpr std::uint8_t eiattr_min_stack_size = 0x12;        // u32 symbol, u32 bytes (.nv.info)
constexpr std::uint8_t eiattr_max_stack_size = 0x23;        // u32 symbol, u32 bytes (.nv.info of -rdc units)
constexpr std::uint8_t eiattr_cbank_param_size = 0x19;      // u16 bytes
constexpr std::uint8_t eiattr_maxreg_count = 0x1b;          // u16 registers
constexpr std::uint8_t eiattr_regcount = 0x2f;              // u32 symbol, u32 registers (.nv.info)
constexpr std::uint8_t eiattr_cta_per_cluster = 0x3d;       // u32 x, y, z: __cluster_dims__
constexpr std::uint8_t eiattr_explicit_cluster = 0x3e;      // no value
constexpr std::uint8_t eiattr_max_cluster_rank = 0x3f;      // u32
constexpr std::uint8_t eiattr_num_barriers = 0x4c;          // u8
constexpr std::uint8_t eicompat_accelerator_target = 0x09;  // u8: 1 for arch-specific code (sm_90a)

std::optional<dims> dims_value(std::string_view v) {
  if (v.size() < 12) {
    return std::nullopt;
  }
  return dims(*read_le<std::uint32_t>(v, 0), *read_le<std::uint32_t>(v, 4), *read_le<std::uint32_t>(v, 8));
}

// A section header's fields.
struct section_header {
  std::string_view name;
  std::uint32_t type = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint32_t link = 0;
  std::uint32_t info = 0;
};

// A name of at most max_inspect_name bytes at offset in a string table, counted in budget; nothing
// when it does not fit, is longer, or the budget is spent (budget_spent says which).
std::optional<std::string_view> bounded_name(std::string_view table, std::size_t offset, inspect_budget& budget,
                                             bool& budget_spent) {
  if (offset >= table.size()) {
    return std::nullopt;
  }
  const std::string_view rest = table.substr(offset, max_inspect_name + 1);
  const std::size_t end = rest.find('\0');
  if (end == std::string_view::npos) {
    return std::nullopt;
  }
  if (!budget.spend(end + 1)) {
    budget_spent = true;
    return std::nullopt;
  }
  return rest.substr(0, end);
}

// Every section header, each name read once; "" or the problem.
std::string read_headers(const elf_sections& elf, std::string_view names, inspect_budget& budget,
                         std::vector<section_header>& out) {
  out.reserve(elf.shnum);
  for (std::size_t i = 0; i < elf.shnum; ++i) {
    section_header h;
    bool spent = false;
    const auto at = *read_le<std::uint32_t>(elf.b, elf.header(i));
    h.name = bounded_name(names, at, budget, spent).value_or(std::string_view());
    if (spent) {
      return "section " + std::to_string(i) + "'s name: " + budget.exhausted();
    }
    h.type = *read_le<std::uint32_t>(elf.b, elf.header(i) + 4);
    h.offset = *read_le<std::uint64_t>(elf.b, elf.header(i) + 24);
    h.size = *read_le<std::uint64_t>(elf.b, elf.header(i) + 32);
    h.link = *read_le<std::uint32_t>(elf.b, elf.header(i) + 40);
    h.info = *read_le<std::uint32_t>(elf.b, elf.header(i) + 44);
    out.push_back(h);
  }
  return {};
}

// The kernels of the image: entries of its symbol tables, with their symbol indices (which the
// records of .nv.info name). Names are views of the image's bytes.
struct kernel_index {
  std::unordered_map<std::string_view, std::size_t> by_name;  // -> index in out.kernels
  std::unordered_map<std::uint32_t, std::size_t> by_symbol;   // symbol index -> index in out.kernels
  std::unordered_set<std::string_view> device_functions;      // the names in out.device_functions
};

constexpr std::uint32_t sht_symtab = 2;

// "" when no two symbol tables share bytes (a crafted image could name one table many times over).
std::string symbol_tables_overlap(const std::vector<section_header>& headers) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;  // offset, end
  for (const section_header& h : headers) {
    if (h.type == sht_symtab && h.size > 0) {
      ranges.emplace_back(h.offset, h.offset + h.size);
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) {
      return "two symbol tables share the bytes at offset " + std::to_string(ranges[i].first);
    }
  }
  return {};
}

// One symbol: a kernel (an entry), a __device__ function defined here, or nothing; "" or the problem.
std::string read_symbol(std::string_view symbols, std::size_t o, std::string_view strings, code_image& out,
                        kernel_index& index, inspect_budget& budget) {
  constexpr std::uint8_t stt_func = 2;
  constexpr std::uint8_t sto_cuda_entry = 0x10;
  const auto info = static_cast<std::uint8_t>(symbols[o + 4]);
  const auto other = static_cast<std::uint8_t>(symbols[o + 5]);
  const bool entry = (other & sto_cuda_entry) != 0;
  if ((info & 0xf) != stt_func || (!entry && *read_le<std::uint16_t>(symbols, o + 6) == 0)) {
    return {};  // not a function, or one not defined here (vprintf's, say)
  }
  bool spent = false;
  const auto name = bounded_name(strings, *read_le<std::uint32_t>(symbols, o), budget, spent);
  if (spent) {
    return "symbol names: " + budget.exhausted();
  }
  if (!name || name->empty()) {
    return "a function symbol's name is empty, does not fit its string table or is longer than " +
           std::to_string(max_inspect_name) + " bytes";
  }
  if (!entry) {
    if (index.device_functions.insert(*name).second) {
      out.device_functions.emplace_back(*name);
    }
    return {};
  }
  auto [at, fresh] = index.by_name.emplace(*name, out.kernels.size());
  if (fresh) {
    out.kernels.emplace_back();
    out.kernels.back().name = std::string(*name);
  }
  index.by_symbol[static_cast<std::uint32_t>(o / 24)] = at->second;
  return {};
}

std::string read_kernels(const elf_sections& elf, const std::vector<section_header>& headers, code_image& out,
                         kernel_index& index, inspect_budget& budget) {
  constexpr std::size_t symbol_size = 24;
  if (std::string p = symbol_tables_overlap(headers); !p.empty()) {
    return p;
  }
  for (std::size_t i = 0; i < headers.size(); ++i) {
    if (headers[i].type != sht_symtab) {
      continue;
    }
    std::string_view symbols;
    std::string_view strings;
    if (headers[i].link >= elf.shnum || !elf.contents(i, symbols) || !elf.contents(headers[i].link, strings)) {
      return "a symbol table or its string table is malformed";
    }
    if (!budget.spend(symbols.size())) {
      return "symbol tables: " + budget.exhausted();
    }
    for (std::size_t o = 0; o + symbol_size <= symbols.size(); o += symbol_size) {
      if (std::string p = read_symbol(symbols, o, strings, out, index, budget); !p.empty()) {
        return p;
      }
    }
  }
  return {};
}

// The records of .nv.info: per-function registers, frame and stack, keyed by symbol index.
bool read_global_info(std::string_view data, code_image& out, const kernel_index& index) {
  std::unordered_set<std::size_t> min_stack_seen;  // kernels whose EIATTR_MIN_STACK_SIZE was read
  return for_each_record(data, [&](const info_record& r) {
    if (r.format != eifmt_sval || r.value.size() < 8) {
      return;
    }
    const auto symbol = *read_le<std::uint32_t>(r.value, 0);
    const auto value = *read_le<std::uint32_t>(r.value, 4);
    const auto k = index.by_symbol.find(symbol);
    if (k == index.by_symbol.end()) {
      return;  // a __device__ function's
    }
    kernel_resources& kr = out.kernels[k->second];
    if (r.attribute == eiattr_regcount) {
      kr.registers = static_cast<int>(value);
    } else if (r.attribute == eiattr_frame_size) {
      kr.frame_bytes = value;
    } else if (r.attribute == eiattr_min_stack_size) {
      kr.stack_bytes = value;
      min_stack_seen.insert(k->second);
    } else if (r.attribute == eiattr_max_stack_size && min_stack_seen.count(k->second) == 0) {
      kr.stack_bytes = value;  // a relocatable unit's (-rdc): no minimum is known before linking
    }
  });
}

// The records of .nv.info.<kernel>: parameters, launch bounds, cluster dimensions.
bool read_kernel_info(std::string_view data, kernel_resources& kr) {
  std::vector<kernel_param> params;
  if (!read_info_section(data, params)) {
    return false;
  }
  kr.parameters.clear();
  for (std::size_t i = 0; i < params.size(); ++i) {
    kr.parameters.push_back({i, params[i].offset, params[i].size});
  }
  return for_each_record(data, [&](const info_record& r) {
    const auto half = r.value.size() >= 2 ? *read_le<std::uint16_t>(r.value, 0) : 0;
    switch (r.attribute) {
      case eiattr_max_threads: kr.max_threads = dims_value(r.value); break;
      case eiattr_reqntid: kr.required_threads = dims_value(r.value); break;
      case eiattr_cta_per_cluster: kr.cluster_dims = dims_value(r.value); break;
      case eiattr_explicit_cluster: kr.explicit_cluster = true; break;
      case eiattr_max_cluster_rank:
        if (r.value.size() >= 4) {
          kr.max_cluster_rank = *read_le<std::uint32_t>(r.value, 0);
        }
        break;
      case eiattr_cbank_param_size: kr.parameter_bytes = half; break;
      case eiattr_maxreg_count: kr.max_registers = half; break;
      case eiattr_num_barriers: kr.barriers = half & 0xff; break;
      default: break;
    }
  });
}

// ".nv.constant3" -> bank 3 and suffix "", ".nv.constant0.k" -> bank 0 and suffix "k"; false otherwise.
bool constant_section(std::string_view name, int& bank, std::string_view& suffix) {
  constexpr std::string_view prefix = ".nv.constant";
  if (!name.starts_with(prefix) || name.size() == prefix.size() ||
      std::isdigit(static_cast<unsigned char>(name[prefix.size()])) == 0) {
    return false;
  }
  std::size_t i = prefix.size();
  bank = 0;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) != 0 && bank < 1000) {
    bank = bank * 10 + (name[i++] - '0');
  }
  if (i == name.size()) {
    suffix = {};
    return true;
  }
  if (name[i] != '.') {
    return false;
  }
  suffix = name.substr(i + 1);
  return true;
}

// Banks are added in section order and sorted once, when every section was read (sort_constants).
void add_constant(std::vector<constant_bank>& banks, int bank, std::uint64_t bytes) {
  banks.push_back({bank, static_cast<std::size_t>(bytes)});
}

void sort_constants(code_image& out) {
  const auto by_bank = [](const constant_bank& a, const constant_bank& b) { return a.bank < b.bank; };
  std::stable_sort(out.constant.begin(), out.constant.end(), by_bank);
  for (kernel_resources& k : out.kernels) {
    std::stable_sort(k.constant.begin(), k.constant.end(), by_bank);
  }
}

// The kernel a section named prefix + name belongs to, or nullptr.
kernel_resources* kernel_of(std::string_view section, std::string_view prefix, code_image& out,
                            const kernel_index& index) {
  if (!section.starts_with(prefix) || section.size() == prefix.size()) {
    return nullptr;
  }
  const auto k = index.by_name.find(section.substr(prefix.size()));
  return k == index.by_name.end() ? nullptr : &out.kernels[k->second];
}

// The sizes of the sections of each kernel and of the image.
void read_section_sizes(const section_header& h, code_image& out, const kernel_index& index) {
  int bank = 0;
  std::string_view suffix;
  if (h.name == ".nv.global" || h.name == ".nv.global.init") {
    out.global_bytes += static_cast<std::size_t>(h.size);
  } else if (constant_section(h.name, bank, suffix)) {
    if (suffix.empty()) {
      add_constant(out.constant, bank, h.size);
    } else if (const auto k = index.by_name.find(suffix); k != index.by_name.end()) {
      add_constant(out.kernels[k->second].constant, bank, h.size);
    }
  } else if (kernel_resources* k = kernel_of(h.name, ".nv.shared.", out, index)) {
    k->shared_bytes = static_cast<std::size_t>(h.size);
  } else if (kernel_resources* k = kernel_of(h.name, ".nv.local.", out, index)) {
    k->local_bytes = static_cast<std::size_t>(h.size);
  } else if (kernel_resources* k = kernel_of(h.name, ".text.", out, index)) {
    k->code_bytes = static_cast<std::size_t>(h.size);
    if (k->registers == 0) {
      k->registers = static_cast<int>(h.info >> 24);  // older images: the count is in sh_info's top byte
    }
  }
}

// The records of every .nv.info section, and .nv.compat's accelerator flag; "" or the problem.
std::string read_info_sections(const elf_sections& elf, const std::vector<section_header>& headers, code_image& out,
                               const kernel_index& index, inspect_budget& budget, bool& arch_specific) {
  for (std::size_t i = 0; i < headers.size(); ++i) {
    const section_header& h = headers[i];
    const bool global = h.name == ".nv.info";
    kernel_resources* k = kernel_of(h.name, ".nv.info.", out, index);
    const bool compat = h.name == ".nv.compat";
    if (!global && k == nullptr && !compat) {
      continue;
    }
    std::string_view data;
    if (!elf.contents(i, data)) {
      return "section " + std::string(h.name) + " does not fit in the image";
    }
    if (!budget.spend(data.size())) {
      return "section " + std::string(h.name) + ": " + budget.exhausted();
    }
    bool ok = true;
    if (global) {
      ok = read_global_info(data, out, index);
    } else if (k != nullptr) {
      ok = read_kernel_info(data, *k);
    } else {
      ok = for_each_record(data, [&](const info_record& r) {
        if (r.attribute == eicompat_accelerator_target && r.format == eifmt_bval && r.value[0] == 1) {
          arch_specific = true;
        }
      });
    }
    if (!ok) {
      return "a record of section " + std::string(h.name) + " is malformed (a size past its end or an unknown format)";
    }
  }
  return {};
}

}  // namespace

inspect_budget::inspect_budget(std::size_t input_size) noexcept {
  constexpr std::uint64_t floor = std::uint64_t{64} << 20;
  constexpr std::uint64_t ceiling = std::uint64_t{4} << 30;
  const std::uint64_t scaled = input_size > ceiling / 64 ? ceiling : std::uint64_t{input_size} * 64;
  limit_ = std::min(ceiling, std::max(floor, scaled));
}

bool inspect_budget::spend(std::uint64_t bytes) noexcept {
  if (bytes > limit_ - spent_) {
    return false;
  }
  spent_ += bytes;
  return true;
}

std::string inspect_budget::exhausted() const {
  return "the work budget of " + std::to_string(limit_) +
         " bytes (decompressed, section and name bytes; min(4 GiB, max(64 MiB, 64 x the file size))) is exhausted "
         "(sections or entries that repeat the same bytes?)";
}

std::string read_cubin_resources(std::string_view b, code_image& out, inspect_budget& budget) {
  if (b.size() < 64 ||
      b.substr(0, 4) != std::string_view("\x7f"
                                         "ELF",
                                         4) ||
      b[4] != 2 || b[5] != 1) {
    return "not a little-endian ELF64 image";
  }
  const elf_sections elf{b, *read_le<std::uint64_t>(b, 40), *read_le<std::uint16_t>(b, 58),
                         *read_le<std::uint16_t>(b, 60)};
  const auto shstrndx = *read_le<std::uint16_t>(b, 62);
  std::string_view names;
  if (elf.shentsize < 64 || shstrndx >= elf.shnum || elf.shoff > b.size() ||
      std::uint64_t(elf.shentsize) * elf.shnum > b.size() - elf.shoff || !elf.contents(shstrndx, names)) {
    return "the section header table or its name table does not fit in the image";
  }
  // The architecture: e_flags bits 8-15 from ELF ABI version 8 on (CUDA 12.8+), bits 0-7 before.
  const auto flags = *read_le<std::uint32_t>(b, 48);
  out.arch = static_cast<int>(static_cast<unsigned char>(b[8]) >= 8 ? (flags >> 8) & 0xff : flags & 0xff);
  std::vector<section_header> headers;
  if (std::string p = read_headers(elf, names, budget, headers); !p.empty()) {
    return p;
  }
  kernel_index index;
  if (std::string p = read_kernels(elf, headers, out, index, budget); !p.empty()) {
    return p;
  }
  bool arch_specific = false;
  if (std::string p = read_info_sections(elf, headers, out, index, budget, arch_specific); !p.empty()) {
    return p;
  }
  for (const section_header& h : headers) {
    read_section_sizes(h, out, index);
  }
  sort_constants(out);
  out.arch_name = "sm_" + std::to_string(out.arch) + (arch_specific ? "a" : "");
  return {};
}

}  // namespace cudrv::detail
