#include "concord/memory_quota.h"

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace concord {

Result<uint64_t> parse_bytes(std::string_view text) {
  const auto bad = [&](const std::string& why) { return Status::invalid_argument(why); };
  if (text.empty()) return bad("is empty (a size: bytes, or a number with K, M, G or T)");
  size_t at = 0;
  while (at < text.size() && ((text[at] >= '0' && text[at] <= '9') || text[at] == '.')) ++at;
  const std::string number(text.substr(0, at));
  std::string_view unit = text.substr(at);
  if (number.empty() || number == "." || number.find('.') != number.rfind('.')) {
    return bad("is not a size (a number of bytes, or a number with K, M, G or T: 512M, 8G)");
  }
  int shift = 0;
  if (!unit.empty()) {
    switch (unit[0]) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      case 'T': case 't': shift = 40; break;
      case 'B': case 'b': shift = -1; break;
      default: return bad("has an unknown unit '" + std::string(unit) + "' (K, M, G or T)");
    }
    if (shift < 0) {
      shift = 0;
      if (unit.size() != 1) return bad("has an unknown unit '" + std::string(unit) + "' (K, M, G or T)");
    } else {
      const std::string_view rest = unit.substr(1);
      if (!(rest.empty() || rest == "B" || rest == "b" || rest == "iB" || rest == "ib")) {
        return bad("has an unknown unit '" + std::string(unit) + "' (K, M, G or T, optionally with iB)");
      }
    }
  }
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value)) return bad("is not a size");
  const double bytes = std::ldexp(value, shift);
  if (bytes >= std::ldexp(1.0, 63)) return bad("is over 8 EiB");
  if (bytes != std::floor(bytes)) return bad("is not a whole number of bytes");
  return static_cast<uint64_t>(bytes);
}

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1024) return bytes == 0 ? "0" : fmt::format("{} B", bytes);
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, kUnits[u]);
}

}  // namespace concord
