#include "concord/sm_set.h"

#include <algorithm>
#include <string>

namespace concord {

SmSet SmSet::range(int first, int count) {
  const int lo = std::max(first, 0);
  const int hi = std::min(first + std::max(count, 0), kMaxSms);  // one past the last
  SmSet s;
  if (lo >= hi) return s;
  // Bits below `hi` minus bits below `lo`, word by word.
  auto below = [](int n, int k) -> uint64_t {  // bits of word k below bit n
    const int in_word = n - k * 64;
    if (in_word <= 0) return 0;
    if (in_word >= 64) return ~uint64_t{0};
    return (uint64_t{1} << in_word) - 1;
  };
  for (int k = lo / 64; k <= (hi - 1) / 64; ++k) s.w_[static_cast<size_t>(k)] = below(hi, k) & ~below(lo, k);
  return s;
}

SmSet SmSet::of(const std::vector<int>& ids) {
  SmSet s;
  for (int id : ids) {
    if (id >= 0 && id < kMaxSms) s.add(id);
  }
  return s;
}

std::vector<int> SmSet::ids() const {
  std::vector<int> out;
  out.reserve(static_cast<size_t>(count()));
  for_each([&](int sm) { out.push_back(sm); });
  return out;
}

std::string SmSet::to_string() const {
  std::string out;
  int i = 0;
  while (i < kMaxSms) {
    if (!contains(i)) {
      ++i;
      continue;
    }
    int j = i;
    while (j + 1 < kMaxSms && contains(j + 1)) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(i);
    if (j > i) out += '-' + std::to_string(j);
    i = j + 1;
  }
  return out.empty() ? "{}" : out;
}

}  // namespace concord
