// The interception library's settings parsed from a given environment (the unit tests' way in).
#pragma once

#include <map>
#include <string>

#include "intercept/config.h"

namespace concord::intercept {

inline Result<InterceptConfig> parse(const std::map<std::string, std::string>& env) {
  return parse_config(
      [&](const char* var) -> const char* {
        auto it = env.find(var);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      "my_app");
}

}  // namespace concord::intercept
