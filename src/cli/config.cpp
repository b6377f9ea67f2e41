#include "cli/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace concord::cli {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// The longest time limit accepted (a year): longer is surely a mistake (milliseconds meant).
constexpr double kMaxSeconds = 365.0 * 24 * 3600;

Status check_one_of(const std::string& value, std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (value == a) return Status::ok();
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  return Status::invalid_argument("'" + value + "' is not one of " + list);
}

Status check_path(const std::string& value) {
  if (value.empty()) return Status::invalid_argument("empty path");
  if (std::any_of(value.begin(), value.end(), [](unsigned char c) { return c < 0x20; })) {
    return Status::invalid_argument("control characters in a path");
  }
  return Status::ok();
}

Status check_integer(const std::string& value, long long lo, long long hi) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || v < lo || v > hi) {
    return Status::invalid_argument("'" + value + "' is not an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return Status::ok();
}

// Whether `value` is acceptable for `field`; the reason when not.
Status check_field(const std::string& field, const std::string& value) {
  if (field == "backend") return check_one_of(value, {"sim", "cuda"});
  if (field == "log_level") return check_one_of(value, {"error", "warn", "info", "debug", "trace"});
  if (field == "time_limit_s") return parse_seconds(value).status();
  if (field == "cuda_sweep_pause_us") return check_integer(value, 0, 100000);
  if (field == "device") {
    if (value.empty()) return Status::invalid_argument("empty device");
    return check_path(value);  // a GPU index, a built-in name or a device file: checked where it is used
  }
  return check_path(value);  // store, cache_dir, python
}

// "~/x" with $HOME; other values as they are.
std::string expand_home(const std::string& value) {
  if (value.rfind("~/", 0) == 0 && !env("HOME").empty()) return env("HOME") + value.substr(1);
  return value;
}

const ConfigField* field_named(const std::string& name) {
  for (const ConfigField& f : config_fields()) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

std::string known_fields() {
  std::string out;
  for (const ConfigField& f : config_fields()) out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

std::string at(const std::string& path, const YAML::Mark& mark) {
  return path + ":" + std::to_string(mark.line + 1);
}

}  // namespace

const std::vector<ConfigField>& config_fields() {
  static const std::vector<ConfigField> fields = {
      {"store", "CONCORD_STORE", "the profile store (SQLite): `run --profiles`, `profile --db`"},
      {"cache_dir", "CONCORD_CACHE_DIR", "where compiled fused kernels are kept (cuda backend)"},
      {"backend", "CONCORD_BACKEND", "`run --backend`: sim or cuda"},
      {"device", "CONCORD_DEVICE", "`run --device`: a GPU index (cuda) or h100, h200, a device file (sim)"},
      {"time_limit_s", "CONCORD_TIME_LIMIT_S", "`run --time-limit`: seconds a run may take on its clock"},
      {"log_level", "CONCORD_LOG_LEVEL", "error, warn, info, debug or trace (-q, -v, -vv)"},
      {"cuda_sweep_pause_us", "CONCORD_CUDA_SWEEP_PAUSE_US",
       "the cuda backend's completion thread's pause after an empty sweep (us)"},
      {"python", "CONCORD_PYTHON", "the Python 3 with matplotlib that `concord plot` runs"},
  };
  return fields;
}

Result<double> parse_seconds(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  if (text.empty() || end != begin + text.size() || errno != 0 || !std::isfinite(v) || v <= 0 || v > kMaxSeconds) {
    return Status::invalid_argument("'" + text + "' is not a number of seconds above 0 and at most a year (" +
                                    std::to_string(static_cast<long long>(kMaxSeconds)) + ")");
  }
  return v;
}

std::string Config::default_path() {
  if (!env("XDG_CONFIG_HOME").empty()) return env("XDG_CONFIG_HOME") + "/concord/config.yaml";
  if (!env("HOME").empty()) return env("HOME") + "/.config/concord/config.yaml";
  return "";
}

Result<Config> Config::load(const std::string& explicit_path) {
  Config c;
  const std::string path = explicit_path.empty() ? default_path() : explicit_path;
  std::error_code ec;
  const bool exists = !path.empty() && std::filesystem::exists(path, ec);
  if (!explicit_path.empty() && !exists) return Status::not_found("config file " + path + " does not exist");
  if (exists) {
    if (!std::filesystem::is_regular_file(path, ec)) return Status::invalid_argument(path + ": not a regular file");
    std::ifstream in(path);
    if (!in) return Status::io_error(path + ": cannot be read");
    std::stringstream text;
    text << in.rdbuf();
    YAML::Node root;
    try {
      root = YAML::Load(text.str());
    } catch (const YAML::Exception& e) {
      return Status::parse_error(at(path, e.mark) + ": " + e.msg);
    }
    if (root.IsDefined() && !root.IsNull()) {
      if (!root.IsMap()) return Status::parse_error(at(path, root.Mark()) + ": expected fields (`name: value` lines)");
      std::set<std::string> seen;
      for (const auto& item : root) {
        const std::string name = item.first.Scalar();
        const std::string where = at(path, item.first.Mark());
        const ConfigField* field = field_named(name);
        if (field == nullptr) {
          return Status::invalid_argument(where + ": field '" + name + "': unknown (known: " + known_fields() + ")");
        }
        if (!seen.insert(name).second) return Status::invalid_argument(where + ": field '" + name + "': given twice");
        if (!item.second.IsScalar()) {
          return Status::invalid_argument(where + ": field '" + name + "': expected one value");
        }
        const std::string value = expand_home(item.second.Scalar());
        if (Status s = check_field(name, value); !s) {
          return Status::invalid_argument(where + ": field '" + name + "': " + s.message());
        }
        c.values_[name] = {value, "field '" + name + "' at " + where};
      }
    }
    c.path_ = path;
  }
  for (const ConfigField& f : config_fields()) {
    const char* v = std::getenv(f.env);
    if (v == nullptr) continue;
    const std::string value = expand_home(v);
    if (Status s = check_field(f.name, value); !s) {
      return Status::invalid_argument(std::string("environment variable ") + f.env + " (field '" + f.name +
                                      "'): " + s.message());
    }
    c.values_[f.name] = {value, f.env};
  }
  return c;
}

const Setting* Config::find(const std::string& field) const {
  const auto it = values_.find(field);
  return it == values_.end() ? nullptr : &it->second;
}

void Config::export_to_environment() const {
  for (const char* name : {"cache_dir", "cuda_sweep_pause_us"}) {
    const Setting* s = find(name);
    const ConfigField* f = field_named(name);
    if (s != nullptr && f != nullptr) setenv(f->env, s->value.c_str(), /*overwrite=*/0);
  }
}

}  // namespace concord::cli
