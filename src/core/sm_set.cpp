#include "concord/sm_set.h"

#include <string>

namespace concord {

SmSet SmSet::range(int first, int count) {
  SmSet s;
  for (int i = first; i < first + count && i < kMaxSms; ++i) {
    if (i >= 0) s.add(i);
  }
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
  out.reserve(bits_.count());
  for (int i = 0; i < kMaxSms; ++i) {
    if (bits_.test(static_cast<size_t>(i))) out.push_back(i);
  }
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
  for (int i = 0; i < kMaxSms; ++i) {
    if (bits_.test(static_cast<size_t>(i))) w[static_cast<size_t>(i / 64)] |= uint64_t{1} << (i % 64);
  }
  return w;
}

}  // namespace concord
