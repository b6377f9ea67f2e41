// The daemon's structured log: one JSON object per line (time, level, event, and the event's
// fields), through spdlog's "concordd" logger (the default logger when there is none).
#pragma once

#include <string>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace concord::daemon {

// Logs {"event": event, ...fields} at `level`.
void log_event(spdlog::level::level_enum level, const std::string& event, const nlohmann::json& fields = nlohmann::json::object());
// Makes the "concordd" logger: JSON lines on stderr (journald takes them from there).
void install_json_logger(spdlog::level::level_enum level);

}  // namespace concord::daemon
