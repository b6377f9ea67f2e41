#include "daemon/device_lanes.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

namespace concord::daemon {
namespace {

// The value of a "Key: value" line of a driver information file ("" when absent).
std::string info_value(const std::string& text, const std::string& key) {
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    if (line.rfind(key + ":", 0) != 0) continue;
    const size_t b = line.find_first_not_of(" \t", key.size() + 1);
    if (b == std::string::npos) return {};
    const size_t e = line.find_last_not_of(" \t\r");
    return line.substr(b, e - b + 1);
  }
  return {};
}

bool all_hex(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isxdigit(c) != 0; });
}

}  // namespace

std::optional<std::string> normalize_bus_id(const std::string& text) {
  // domain:bus:device.function; the domain may be 4 or 8 digits (or absent: domain 0).
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const size_t dot = t.rfind('.');
  if (dot == std::string::npos) return std::nullopt;
  const std::string fn = t.substr(dot + 1);
  std::string head = t.substr(0, dot);
  std::vector<std::string> parts;
  for (size_t at = 0;;) {
    const size_t colon = head.find(':', at);
    parts.push_back(head.substr(at, colon == std::string::npos ? std::string::npos : colon - at));
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  if (parts.size() == 2) parts.insert(parts.begin(), "0");
  if (parts.size() != 3 || !all_hex(fn) || fn.size() != 1) return std::nullopt;
  for (const std::string& p : parts) {
    if (!all_hex(p) || p.size() > 8) return std::nullopt;
  }
  const unsigned long long domain = std::stoull(parts[0], nullptr, 16), bus = std::stoull(parts[1], nullptr, 16),
                           dev = std::stoull(parts[2], nullptr, 16);
  // Domains above 0xffff exist (Intel VMD's start at 0x10000): nvidia-smi writes 8 digits for them.
  if (bus > 0xff || dev > 0x1f || fn[0] > '7') return std::nullopt;
  return fmt::format("{:04x}:{:02x}:{:02x}.{}", domain, bus, dev, fn);
}

std::vector<NodeGpu> node_gpus(const std::string& driver_root, std::vector<std::string>* skipped) {
  std::vector<NodeGpu> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(driver_root + "/gpus", ec)) {
    const std::optional<std::string> bus = normalize_bus_id(e.path().filename().string());
    if (!bus) {
      if (skipped) skipped->push_back(e.path().string());
      continue;
    }
    std::ifstream in(e.path() / "information");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    out.push_back({*bus, info_value(text, "Model"), info_value(text, "GPU UUID")});
  }
  std::sort(out.begin(), out.end(), [](const NodeGpu& a, const NodeGpu& b) { return a.bus_id < b.bus_id; });
  return out;
}

DeviceSpec spec_for_model(const std::string& model, std::string* why) {
  // The built-in specs are the SXM parts (132 SMs): an H100 PCIe or NVL (114 SMs) is another GPU.
  const bool sxm_h100 = model.find("H100") != std::string::npos &&
                        (model.find("SXM") != std::string::npos || model.find("HBM3") != std::string::npos);
  const bool h200 = model.find("H200") != std::string::npos;
  const std::string name = sxm_h100 && !h200 ? "h100" : "h200";
  if (why) {
    *why = name + " (" +
           (sxm_h100 || h200 ? "the driver's model: " + model
            : model.empty()  ? std::string("no GPU the driver names; the default")
                             : "the driver's model '" + model + "' is not a built-in device (give --device-spec FILE.json); the default") +
           ")";
  }
  return *builtin_device(name);
}

Result<DeviceSpec> daemon_device(const std::string& name_or_file, std::string* chosen, const std::string& driver_root) {
  if (name_or_file == "auto") {
    const std::vector<NodeGpu> gpus = node_gpus(driver_root);
    return spec_for_model(gpus.empty() ? std::string() : gpus.front().model, chosen);
  }
  if (chosen) *chosen = name_or_file;
  Result<DeviceSpec> builtin = builtin_device(name_or_file);
  if (builtin.is_ok()) return builtin;
  if (name_or_file.find('/') != std::string::npos || name_or_file.find(".json") != std::string::npos) {
    return load_device_file(name_or_file);
  }
  return Status::not_found(fmt::format("device '{}': not auto, a built-in device (h100, h200) or a JSON file", name_or_file));
}

Result<std::vector<DeviceLane>> choose_lanes(const std::string& devices, const std::string& spec_name,
                                             const std::string& driver_root, std::vector<std::string>* notes) {
  std::vector<std::string> skipped;
  const std::vector<NodeGpu> gpus = node_gpus(driver_root, &skipped);
  if (notes) {
    for (const std::string& s : skipped) notes->push_back(s + ": not a PCI bus id, skipped");
  }
  std::optional<DeviceSpec> fixed;
  if (spec_name != "auto") {
    Result<DeviceSpec> s = daemon_device(spec_name);
    if (!s.is_ok()) return Status(s.status().code(), "--device-spec: " + s.status().message());
    fixed = *s;
  }
  std::vector<size_t> picked;
  if (devices == "all") {
    for (size_t i = 0; i < gpus.size(); ++i) picked.push_back(i);
  } else {
    if (devices.empty()) return Status::invalid_argument("--devices: empty (give all, indices or PCI bus ids)");
    std::set<size_t> seen;
    for (size_t at = 0; at <= devices.size();) {
      const size_t comma = std::min(devices.find(',', at), devices.size());
      const std::string entry = devices.substr(at, comma - at);
      at = comma + 1;
      std::optional<size_t> index;
      if (!entry.empty() && std::all_of(entry.begin(), entry.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
        const unsigned long i = entry.size() > 6 ? gpus.size() : std::stoul(entry);
        if (i >= gpus.size()) {
          return Status::invalid_argument(fmt::format("--devices: '{}': the driver lists {} GPU(s) (indices 0-{})", entry, gpus.size(),
                                                      gpus.empty() ? 0 : gpus.size() - 1));
        }
        index = i;
      } else if (const std::optional<std::string> bus = normalize_bus_id(entry)) {
        for (size_t i = 0; i < gpus.size(); ++i) {
          if (gpus[i].bus_id == *bus) index = i;
        }
        if (!index) return Status::invalid_argument(fmt::format("--devices: '{}': no GPU the driver lists has this PCI bus id", entry));
      } else {
        return Status::invalid_argument(fmt::format("--devices: '{}': not an index or a PCI bus id (dddd:bb:dd.f)", entry));
      }
      if (!seen.insert(*index).second) return Status::invalid_argument(fmt::format("--devices: '{}': named twice", entry));
      picked.push_back(*index);
    }
  }
  std::vector<DeviceLane> lanes;
  for (size_t i : picked) {
    DeviceLane lane{std::to_string(i), gpus[i].bus_id, gpus[i].model, {}};
    std::string why;
    lane.spec = fixed ? *fixed : spec_for_model(gpus[i].model, &why);
    if (fixed) why = spec_name;
    if (notes) notes->push_back(fmt::format("GPU {} ({} {}): {}", lane.label, lane.bus_id, lane.model, why));
    lanes.push_back(std::move(lane));
  }
  if (lanes.empty()) {
    // No GPU listed (a machine without the driver, or a test): one lane for every tenant.
    std::string why;
    DeviceLane lane{"0", "", "", fixed ? *fixed : spec_for_model("", &why)};
    if (fixed) why = spec_name;
    if (notes) notes->push_back("one device, the driver lists no GPU: " + why);
    lanes.push_back(std::move(lane));
  }
  return lanes;
}

Result<size_t> lane_for(const std::vector<DeviceLane>& lanes, const std::string& bus_id) {
  const std::optional<std::string> bus = normalize_bus_id(bus_id);
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (bus && lanes[i].bus_id == *bus) return i;
  }
  if (lanes.size() == 1 && (lanes[0].bus_id.empty() || bus_id.empty())) return size_t{0};
  std::string managed;
  for (const DeviceLane& l : lanes) managed += (managed.empty() ? "" : ", ") + l.label + " (" + l.bus_id + ")";
  if (bus_id.empty()) {
    return Status::failed_precondition(fmt::format(
        "the tenant could not tell which GPU it launches on, and this daemon manages {}: {}", lanes.size(), managed));
  }
  return Status::failed_precondition(fmt::format("GPU {} is not one this daemon manages ({})", bus_id, managed));
}

}  // namespace concord::daemon
