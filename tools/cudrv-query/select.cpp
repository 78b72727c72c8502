// cudrv-query: the -d/--device selectors (ordinal, UUID or UUID prefix, PCI bus id).
#include <algorithm>
#include <cctype>
#include <charconv>

#include "query.hpp"

namespace cudrv_query {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool parse_hex(std::string_view s, unsigned int max_digits, unsigned int& value) {
  if (s.empty() || s.size() > max_digits) {
    return false;
  }
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, 16);
  return ec == std::errc() && end == s.data() + s.size();
}

bool starts_with_icase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && lower(s.substr(0, prefix.size())) == prefix;
}

bool matches(const selector& sel, const device_info& d) {
  switch (sel.type) {
    case selector::kind::ordinal: return d.ordinal == sel.ordinal;
    case selector::kind::uuid: return starts_with_icase(d.uuid, sel.uuid_prefix);
    case selector::kind::pci_bus_id: {
      unsigned int domain = 0, bus = 0, device = 0, function = 0;
      return parse_pci_bus_id(d.pci_bus_id, domain, bus, device, function) && domain == sel.pci_domain &&
             bus == sel.pci_bus && device == sel.pci_device && function == sel.pci_function;
    }
  }
  return false;
}

}  // namespace

bool parse_pci_bus_id(std::string_view text, unsigned int& domain, unsigned int& bus, unsigned int& device,
                      unsigned int& function) {
  // [domain:]bus:device.function, hexadecimal; CUDA writes 4 domain digits, nvidia-smi 8.
  std::size_t dot = text.rfind('.');
  if (dot == std::string_view::npos) {
    return false;
  }
  std::string_view head = text.substr(0, dot);
  std::size_t last_colon = head.rfind(':');
  if (last_colon == std::string_view::npos) {
    return false;
  }
  std::string_view before = head.substr(0, last_colon);
  std::size_t first_colon = before.rfind(':');
  domain = 0;
  if (first_colon != std::string_view::npos) {
    if (!parse_hex(before.substr(0, first_colon), 8, domain)) {
      return false;
    }
    before = before.substr(first_colon + 1);
  }
  return parse_hex(before, 2, bus) && parse_hex(head.substr(last_colon + 1), 2, device) && device < 32 &&
         parse_hex(text.substr(dot + 1), 1, function) && function < 8;
}

std::optional<selector> parse_selector(std::string_view text, std::string& error) {
  selector sel;
  sel.text = std::string(text);
  if (text.empty()) {
    error = "an empty device selector";
    return std::nullopt;
  }
  if (std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), sel.ordinal);
    if (ec != std::errc() || end != text.data() + text.size()) {
      error = "the ordinal '" + sel.text + "' is out of range";
      return std::nullopt;
    }
    sel.type = selector::kind::ordinal;
    return sel;
  }
  if (starts_with_icase(text, "gpu-") || starts_with_icase(text, "mig-")) {
    std::string_view rest = text.substr(4);
    if (rest.empty()) {
      error = "'" + sel.text + "' is not a UUID: digits must follow the prefix";
      return std::nullopt;
    }
    // Hexadecimal groups; the old MIG form is MIG-GPU-<uuid>/<gi>/<ci>.
    bool mig = starts_with_icase(text, "mig-");
    if (mig && starts_with_icase(rest, "gpu-")) {
      rest = rest.substr(4);
    }
    bool plausible = !rest.empty() && std::all_of(rest.begin(), rest.end(), [mig](unsigned char c) {
      return std::isxdigit(c) != 0 || c == '-' || (mig && c == '/');
    });
    if (!plausible) {
      error = "'" + sel.text + "' is not a UUID (GPU- or MIG- followed by hexadecimal digits and dashes)";
      return std::nullopt;
    }
    sel.type = selector::kind::uuid;
    sel.uuid_prefix = lower(text);
    return sel;
  }
  if (parse_pci_bus_id(text, sel.pci_domain, sel.pci_bus, sel.pci_device, sel.pci_function)) {
    sel.type = selector::kind::pci_bus_id;
    return sel;
  }
  error = "'" + sel.text +
          "' is not a device selector: give an ordinal (0), a UUID or its prefix (GPU-8f3a), or a PCI bus id "
          "(0000:c1:00.0)";
  return std::nullopt;
}

std::string describe_selectors(const device_info& d) {
  return std::to_string(d.ordinal) + ", " + d.uuid + ", " + d.pci_bus_id;
}

std::optional<failure> select_devices(std::vector<device_info>& devices, const std::vector<std::string>& selectors) {
  if (selectors.empty()) {
    return std::nullopt;
  }
  auto usage = [&](std::string message) {
    failure f;
    f.status = exit_usage;
    f.message = std::move(message);
    for (const device_info& d : devices) {
      f.valid_selectors.push_back(describe_selectors(d));
    }
    return f;
  };
  std::vector<bool> keep(devices.size(), false);
  for (const std::string& text : selectors) {
    std::string error;
    std::optional<selector> sel = parse_selector(text, error);
    if (!sel) {
      return usage(error);
    }
    std::vector<std::size_t> hits;
    for (std::size_t i = 0; i < devices.size(); ++i) {
      if (matches(*sel, devices[i])) {
        hits.push_back(i);
      }
    }
    if (hits.empty()) {
      return usage("no device matches --device " + text);
    }
    if (hits.size() > 1) {
      std::string which;
      for (std::size_t i : hits) {
        which += (which.empty() ? "" : ", ") + devices[i].uuid;
      }
      return usage("--device " + text + " matches " + std::to_string(hits.size()) + " devices (" + which + "); " +
                   (sel->type == selector::kind::uuid ? "give more of the UUID" : "select them by UUID"));
    }
    keep[hits.front()] = true;
  }
  std::vector<device_info> picked;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (keep[i]) {
      picked.push_back(std::move(devices[i]));
    }
  }
  devices = std::move(picked);
  return std::nullopt;
}

}  // namespace cudrv_query
