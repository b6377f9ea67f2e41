#include "intercept/counters.h"

#include <cstdio>
#include <utility>

namespace concord::intercept {

Status write_counters(const std::string& path, const char* mode, bool daemon_gone, const Counters& c, uint64_t markers,
                      uint64_t completions, uint64_t marker_queries, const MemoryCounts& memory) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return Status::io_error("cannot write CONCORD_INTERCEPT_STATS file " + path);
  const std::pair<const char*, const std::atomic<uint64_t>*> fields[] = {
      {"launches", &c.launches},
      {"passed_through", &c.passed_through},
      {"other_gpu", &c.other_gpu},
      {"captured", &c.captured},
      {"noticed", &c.noticed},
      {"leased", &c.leased},
      {"gate_waits", &c.gate_waits},
      {"cap_waits", &c.cap_waits},
      {"released", &c.released},
      {"priority_attribute", &c.priority_attribute},
      {"on_priority_stream", &c.on_priority_stream},
      {"on_green_stream", &c.on_green_stream},
      {"green_fallbacks", &c.green_fallbacks},
      {"room_asked", &c.room_asked},
      {"room_sms", &c.room_sms},
      {"room_padded", &c.room_padded},
      {"room_unpadded", &c.room_unpadded},
      {"room_fallbacks", &c.room_fallbacks},
      {"graphs", &c.graphs},
      {"tail_markers", &c.tail_markers},
      {"failed_launches", &c.failed_launches},
      {"synchronizations", &c.synchronizations},
      {"lc_raises", &c.lc_raises},
      {"streams_raised", &c.streams_raised},
      {"sm_sets_prepared", &c.sm_sets_prepared},
      {"requests_begun", &c.requests_begun},
      {"requests_ended", &c.requests_ended},
      {"allocations", &c.allocations},
      {"frees", &c.frees},
      {"reconnects", &c.reconnects},
  };
  std::fprintf(f, "{\"mode\": \"%s\", \"daemon_gone\": %s", mode, daemon_gone ? "true" : "false");
  for (const auto& [name, value] : fields) std::fprintf(f, ", \"%s\": %llu", name, static_cast<unsigned long long>(value->load()));
  std::fprintf(f, ", \"markers\": %llu, \"completions\": %llu, \"marker_queries\": %llu", static_cast<unsigned long long>(markers),
               static_cast<unsigned long long>(completions), static_cast<unsigned long long>(marker_queries));
  const auto ull = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  std::fprintf(f, ", \"live_bytes\": %llu, \"peak_bytes\": %llu, \"memory_reserved\": %llu, \"memory_refused\": %llu", ull(memory.live),
               ull(memory.peak), ull(memory.reserved), ull(memory.refused));
  if (memory.limit == kNoMemoryLimit) {
    std::fprintf(f, ", \"memory_limit\": null}\n");
  } else {
    std::fprintf(f, ", \"memory_limit\": %llu}\n", ull(memory.limit));
  }
  std::fclose(f);
  return Status::ok();
}

}  // namespace concord::intercept
