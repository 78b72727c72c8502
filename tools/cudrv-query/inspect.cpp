// cudrv-query --inspect FILE (issue 36: inspect): reading the file and its text output. The JSON
// document is written by json_output.cpp (inspect_to_json), next to the other documents.
#include "inspect.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>

#include <cudrv/error.hpp>

namespace cudrv_query {

namespace {

std::string bold(const text_style& s, const std::string& text) { return s.color ? "\033[1m" + text + "\033[0m" : text; }
std::string heading(const text_style& s, const std::string& text) {
  return s.color ? "\033[1;36m" + text + "\033[0m" : text;
}

// A name from the file as the terminal may show it: control characters (ESC, CR, ...), DEL, the C1
// controls (U+0080-U+009F in UTF-8) and backslash become \xHH / \\, so that a crafted name cannot
// move the cursor or restyle the terminal. The JSON document escapes them itself.
std::string printable(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  auto hex = [&out](unsigned char c) {
    static constexpr char digits[] = "0123456789abcdef";
    out += "\\x";
    out += digits[c >> 4];
    out += digits[c & 0xf];
  };
  for (std::size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c == 0xc2 && i + 1 < name.size() && static_cast<unsigned char>(name[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(name[i + 1]) <= 0x9f) {
      hex(c);
      hex(static_cast<unsigned char>(name[++i]));
    } else if (c < 0x20 || c == 0x7f) {
      hex(c);
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string dims_text(const cudrv::dims& d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
}

std::string constants_text(const std::vector<cudrv::constant_bank>& banks) {
  std::string out;
  for (const cudrv::constant_bank& b : banks) {
    out += " CONSTANT[" + std::to_string(b.bank) + "]:" + std::to_string(b.bytes);
  }
  return out;
}

std::string parameters_text(const cudrv::kernel_resources& k) {
  std::string out = std::to_string(k.parameters.size()) + (k.parameters.size() == 1 ? " parameter" : " parameters");
  out += " (" + std::to_string(k.parameter_bytes) + " bytes)";
  for (std::size_t i = 0; i < k.parameters.size(); ++i) {
    out += (i == 0 ? ": " : ", ") + std::to_string(k.parameters[i].size) + " B at " +
           std::to_string(k.parameters[i].offset);
  }
  return out;
}

// The launch limits a kernel carries, or "".
std::string limits_text(const cudrv::kernel_resources& k) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
  if (k.max_threads) add("max threads " + dims_text(*k.max_threads));
  if (k.required_threads) add("required block " + dims_text(*k.required_threads));
  if (k.max_registers && *k.max_registers < 255) {  // 255: no cap given
    add("register cap " + std::to_string(*k.max_registers));
  }
  if (k.cluster_dims) add("cluster " + dims_text(*k.cluster_dims));
  if (k.explicit_cluster) add("explicit cluster");
  if (k.max_cluster_rank) add("max cluster size " + std::to_string(*k.max_cluster_rank));
  if (k.barriers > 0) add(std::to_string(k.barriers) + " named barrier" + (k.barriers == 1 ? "" : "s"));
  return out;
}

void print_kernel(std::ostream& out, const cudrv::code_image& image, const cudrv::kernel_resources& k,
                  const text_style& style) {
  out << "  " << bold(style, "Function " + printable(k.demangled_name));
  if (k.demangled_name != k.name) {
    out << " (" << printable(k.name) << ")";
  }
  out << '\n';
  if (image.kind == cudrv::code_image_kind::sass) {
    out << "    REG:" << k.registers << " STACK:" << k.stack_bytes << " SHARED:" << k.shared_bytes
        << " LOCAL:" << k.local_bytes << constants_text(k.constant) << '\n';
  }
  out << "    " << parameters_text(k) << '\n';
  if (image.kind == cudrv::code_image_kind::sass) {
    std::string line =
        "code " + std::to_string(k.code_bytes) + " bytes, own frame " + std::to_string(k.frame_bytes) + " bytes";
    if (const std::string limits = limits_text(k); !limits.empty()) {
      line += "; " + limits;
    }
    out << "    " << line << '\n';
  }
}

void print_image(std::ostream& out, std::size_t index, const cudrv::code_image& image, const text_style& style) {
  std::string title = "Image " + std::to_string(index + 1) + ": " + cudrv::to_string(image.kind) + " " +
                      (image.arch_name.empty() ? std::string("(no architecture)") : image.arch_name);
  out << '\n' << heading(style, title);
  if (!image.container.empty()) {
    out << " in " << printable(image.container);
  }
  out << ", " << image.bytes << " bytes";
  if (image.compressed()) {
    out << " (" << image.compression << "-compressed to " << image.stored_bytes << ")";
  }
  if (image.flags != 0) {
    char flags[32];
    std::snprintf(flags, sizeof flags, "0x%llx", static_cast<unsigned long long>(image.flags));
    out << ", flags " << flags;
  }
  out << '\n';
  if (!image.unreadable.empty()) {
    out << "  cannot read: " << printable(image.unreadable) << '\n';
    return;
  }
  if (image.kind == cudrv::code_image_kind::sass) {
    out << "  Common: GLOBAL:" << image.global_bytes << constants_text(image.constant) << '\n';
  }
  for (const cudrv::kernel_resources& k : image.kernels) {
    print_kernel(out, image, k, style);
  }
  if (!image.device_functions.empty()) {
    out << "  Device functions:";
    for (const std::string& f : image.device_functions) {
      out << ' ' << printable(f);
    }
    out << '\n';
  }
}

// What went wrong, without the API's name and the code: cudrv's own errors keep their message as the
// description.
std::string reason(const cudrv::error& e) { return e.description().empty() ? std::string(e.what()) : e.description(); }

}  // namespace

inspect_result inspect_file(const std::string& path) {
  // A device or a pipe (/dev/zero, a FIFO) would be read without end: only regular files are read.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    throw cudrv::invalid_argument_error("cudrv-query --inspect", "'" + path + "' is not a regular file");
  }
  inspect_result r;
  r.path = path;
  // Read once, the kind told by the bytes, and moved into the one object_code (a 2 GB library is held once).
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw cudrv::invalid_argument_error("cudrv-query --inspect",
                                        "cannot open '" + path + "': " + std::strerror(errno != 0 ? errno : ENOENT));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    throw cudrv::invalid_argument_error("cudrv-query --inspect", "cannot read '" + path + "'");
  }
  std::string bytes = std::move(buffer).str();
  r.kind = cudrv::detect_code_kind(bytes);
  r.size = bytes.size();
  r.inspection = cudrv::inspect(cudrv::object_code(r.kind, std::move(bytes), path));
  return r;
}

void print_inspect_text(std::ostream& out, const inspect_result& r, const text_style& style) {
  const auto& images = r.inspection.images;
  out << bold(style, printable(r.path)) << ": " << cudrv::to_string(r.kind) << ", " << r.size << " bytes, "
      << images.size() << (images.size() == 1 ? " image" : " images");
  const auto count = [&images](cudrv::code_image_kind kind) {
    return std::count_if(images.begin(), images.end(), [kind](const cudrv::code_image& i) { return i.kind == kind; });
  };
  const auto sass = count(cudrv::code_image_kind::sass);
  const auto ptx = count(cudrv::code_image_kind::ptx);
  const auto other = static_cast<std::ptrdiff_t>(images.size()) - sass - ptx;
  out << " (" << sass << " SASS, " << ptx << " PTX";
  if (other > 0) {
    out << ", " << other << " other";
  }
  out << ")\n";
  for (std::size_t i = 0; i < images.size(); ++i) {
    print_image(out, i, images[i], style);
  }
}

int run_inspect(const command_line& cmd, std::ostream& out, std::ostream& err, const text_style& style) {
  failure error;
  inspect_result r;
  try {
    r = inspect_file(cmd.inspect_file);
  } catch (const cudrv::invalid_argument_error& e) {  // cannot open or read FILE: a bad value of --inspect
    error = {exit_usage, "--inspect: " + reason(e), {}};
  } catch (const cudrv::error& e) {  // malformed
    error = {exit_cuda_error, "--inspect: " + reason(e) + " (" + e.name() + ")", {}};
  } catch (const std::bad_alloc&) {
    error = {exit_cuda_error, "--inspect: out of host memory reading '" + cmd.inspect_file + "'", {}};
  }
  if (error.status != exit_ok) {
    std::string line = "cudrv-query: " + error.message;
    std::replace(line.begin(), line.end(), '\n', ' ');
    err << line << '\n';
    if (cmd.json) {
      out << inspect_to_json(nullptr, &error);
    }
    return error.status;
  }
  if (cmd.json) {
    out << inspect_to_json(&r, nullptr);
  } else {
    print_inspect_text(out, r, style);
  }
  return exit_ok;
}

}  // namespace cudrv_query
