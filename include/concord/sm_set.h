// SmSet: a set of SM ids (up to 256), the unit every placement speaks in.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

namespace concord {

inline constexpr int kMaxSms = 256;

// Four 64-bit words: every operation is a few word operations (policies build and compare sets
// on each decision, so nothing here loops over bits one at a time).
class SmSet {
 public:
  SmSet() = default;
  static SmSet range(int first, int count);  // {first, ..., first+count-1}
  static SmSet all(int sm_count) { return range(0, sm_count); }
  static SmSet of(const std::vector<int>& ids);

  // Ids outside [0, kMaxSms) are ignored.
  void add(int sm) {
    if (sm >= 0 && sm < kMaxSms) w_[word(sm)] |= bit(sm);
  }
  void remove(int sm) {
    if (sm >= 0 && sm < kMaxSms) w_[word(sm)] &= ~bit(sm);
  }
  bool contains(int sm) const { return sm >= 0 && sm < kMaxSms && (w_[word(sm)] & bit(sm)) != 0; }
  int count() const {
    int n = 0;
    for (uint64_t w : w_) n += std::popcount(w);
    return n;
  }
  bool empty() const { return (w_[0] | w_[1] | w_[2] | w_[3]) == 0; }
  std::vector<int> ids() const;
  // Calls f(id) for each SM in the set, lowest first, without allocating.
  template <typename F>
  void for_each(F&& f) const {
    for (int k = 0; k < kWords; ++k) {
      for (uint64_t w = w_[static_cast<size_t>(k)]; w != 0; w &= w - 1) f(k * 64 + std::countr_zero(w));
    }
  }
  // Largest id + 1, or 0 when empty: a set fits a device with at least this many SMs.
  int span() const {
    for (int k = kWords - 1; k >= 0; --k) {
      if (w_[static_cast<size_t>(k)] != 0) return k * 64 + 64 - std::countl_zero(w_[static_cast<size_t>(k)]);
    }
    return 0;
  }

  SmSet operator|(const SmSet& o) const { return combine(o, [](uint64_t a, uint64_t b) { return a | b; }); }
  SmSet operator&(const SmSet& o) const { return combine(o, [](uint64_t a, uint64_t b) { return a & b; }); }
  SmSet minus(const SmSet& o) const { return combine(o, [](uint64_t a, uint64_t b) { return a & ~b; }); }
  bool operator==(const SmSet& o) const = default;
  bool intersects(const SmSet& o) const {
    return ((w_[0] & o.w_[0]) | (w_[1] & o.w_[1]) | (w_[2] & o.w_[2]) | (w_[3] & o.w_[3])) != 0;
  }
  bool is_subset_of(const SmSet& o) const { return minus(o).empty(); }
  // |this & o| without building the intersection.
  int count_and(const SmSet& o) const {
    int n = 0;
    for (size_t k = 0; k < w_.size(); ++k) n += std::popcount(w_[k] & o.w_[k]);
    return n;
  }

  // Compact text: "0-65,70,72-75".
  std::string to_string() const;
  // 64-bit words, lowest SMs first: the layout of the device control block's bitmap.
  std::vector<uint64_t> words() const { return {w_.begin(), w_.end()}; }

 private:
  static constexpr int kWords = kMaxSms / 64;
  static size_t word(int sm) { return static_cast<size_t>(sm) / 64; }
  static uint64_t bit(int sm) { return uint64_t{1} << (static_cast<unsigned>(sm) % 64); }
  template <typename Op>
  SmSet combine(const SmSet& o, Op op) const {
    SmSet r;
    for (size_t k = 0; k < w_.size(); ++k) r.w_[k] = op(w_[k], o.w_[k]);
    return r;
  }
  std::array<uint64_t, kWords> w_{};
};

}  // namespace concord
