// The defaults of the `concord` command: built in, overridden by a config file, overridden by
// environment variables, overridden by flags (docs/running.md, "Configuration").
//   config file: --config FILE, else $XDG_CONFIG_HOME/concord/config.yaml (XDG_CONFIG_HOME unset:
//   ~/.config); a missing default file is no error, a missing --config file is.
// Each field has one environment variable; a bad value in either place is an error naming the
// file and line (or the variable), the field and the reason.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "concord/status.h"

namespace concord::cli {

// One field's value and where it came from, for messages: "field 'device' at FILE:LINE" or the
// environment variable's name.
struct Setting {
  std::string value;
  std::string origin;
};

struct ConfigField {
  const char* name;         // in the file
  const char* env;          // the environment variable
  const char* description;  // for docs and errors
};

// Every field, in the order docs/running.md lists them.
const std::vector<ConfigField>& config_fields();

class Config {
 public:
  // Reads `path` (empty: the default location), then the environment over it. Errors name the
  // file and line or the variable, the field and the reason.
  [[nodiscard]] static Result<Config> load(const std::string& path);
  // The config file's location when no --config is given (empty when neither XDG_CONFIG_HOME
  // nor HOME is set).
  static std::string default_path();

  // The value of `field` from the environment or the file, or none (use the built-in default).
  const Setting* find(const std::string& field) const;
  // The config file that was read; empty when none was.
  const std::string& path() const { return path_; }
  // Sets the environment variables the backends read (cache_dir, cuda_sweep_pause_us) from the
  // file's values where the environment does not set them already.
  void export_to_environment() const;

 private:
  std::map<std::string, Setting> values_;
  std::string path_;
};

// A positive number of seconds (time_limit_s); the error says why not.
Result<double> parse_seconds(const std::string& text);

}  // namespace concord::cli
