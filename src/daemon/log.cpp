#include "daemon/log.h"

#include <spdlog/sinks/stdout_sinks.h>

namespace concord::daemon {

void log_event(spdlog::level::level_enum level, const std::string& event, const nlohmann::json& fields) {
  std::shared_ptr<spdlog::logger> logger = spdlog::get("concordd");
  if (!logger) logger = spdlog::default_logger();
  if (!logger->should_log(level)) return;
  nlohmann::json line = fields.is_object() ? fields : nlohmann::json::object();
  line["event"] = event;
  // The pattern writes {"time":..,"level":.., then the message's members without their braces.
  std::string body = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  logger->log(level, "{}", body.substr(1, body.size() - 2));
}

void install_json_logger(spdlog::level::level_enum level) {
  auto logger = std::make_shared<spdlog::logger>("concordd", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%f%z","level":"%l",%v})");
  logger->set_level(level);
  logger->flush_on(spdlog::level::info);
  spdlog::drop("concordd");
  spdlog::register_logger(logger);
}

}  // namespace concord::daemon
