#include "concord/sm_set.h"

#include <algorithm>
#include <string>

namespace concord {

SmSet SmSet::range(int first, int count) {
  // Whole-word masks rather than one bit at a time: all_sms() is on every decision's path.
  const int lo = std::max(first, 0);
  const int hi = std::min(first + std::max(count, 0), kMaxSms);  // one past the last
  if (lo >= hi) return SmSet();
  std::bitset<kMaxSms> b;
  b.set();
  b >>= static_cast<size_t>(kMaxSms - (hi - lo));
  b <<= static_cast<size_t>(lo);
  return SmSet(b);
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
  out.reserve(bits_.count());
  for_each([&](int sm) { out.push_back(sm); });
  return out;
}

int SmSet::span() const {
  for (int i = kMaxSms - 1; i >= 0; --i) {
    if (bits_.test(static_cast<size_t>(i))) return i + 1;
  }
  return 0;
}

std::string SmSet::to_string() const {
  std::string out;
  int i = 0;
  while (i < kMaxSms) {
    if (!bits_.test(static_cast<size_t>(i))) {
      ++i;
      continue;
    }
    int j = i;
    while (j + 1 < kMaxSms && bits_.test(static_cast<size_t>(j + 1))) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(i);
    if (j > i) out += '-' + std::to_string(j);
    i = j + 1;
  }
  return out.empty() ? "{}" : out;
}

std::vector<uint64_t> SmSet::words() const {
  std::vector<uint64_t> w(kMaxSms / 64, 0);
  for_each([&](int i) { w[static_cast<size_t>(i / 64)] |= uint64_t{1} << (i % 64); });
  return w;
}

}  // namespace concord
