// SmSet: a set of SM ids (up to 256), the unit every placement speaks in.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

namespace concord {

inline constexpr int kMaxSms = 256;

class SmSet {
 public:
  SmSet() = default;
  static SmSet range(int first, int count);  // {first, ..., first+count-1}
  static SmSet all(int sm_count) { return range(0, sm_count); }
  static SmSet of(const std::vector<int>& ids);

  void add(int sm) { bits_.set(static_cast<size_t>(sm)); }
  void remove(int sm) { bits_.reset(static_cast<size_t>(sm)); }
  bool contains(int sm) const { return sm >= 0 && sm < kMaxSms && bits_.test(static_cast<size_t>(sm)); }
  int count() const { return static_cast<int>(bits_.count()); }
  bool empty() const { return bits_.none(); }
  std::vector<int> ids() const;
  // Calls f(id) for each SM in the set, lowest first, without allocating.
  template <typename F>
  void for_each(F&& f) const {
    for (size_t i = bits_._Find_first(); i < bits_.size(); i = bits_._Find_next(i)) f(static_cast<int>(i));
  }
  // Largest id + 1, or 0 when empty: a set fits a device with at least this many SMs.
  int span() const;

  SmSet operator|(const SmSet& o) const { return SmSet(bits_ | o.bits_); }
  SmSet operator&(const SmSet& o) const { return SmSet(bits_ & o.bits_); }
  SmSet minus(const SmSet& o) const { return SmSet(bits_ & ~o.bits_); }
  bool operator==(const SmSet& o) const = default;
  bool intersects(const SmSet& o) const { return (bits_ & o.bits_).any(); }
  bool is_subset_of(const SmSet& o) const { return (bits_ & ~o.bits_).none(); }

  // Compact text: "0-65,70,72-75".
  std::string to_string() const;
  // 64-bit words, lowest SMs first: the layout of the device control block's bitmap.
  std::vector<uint64_t> words() const;

 private:
  explicit SmSet(std::bitset<kMaxSms> b) : bits_(b) {}
  std::bitset<kMaxSms> bits_;
};

}  // namespace concord
