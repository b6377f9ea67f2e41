#include "policy/aker/aker_class.h"

namespace concord::policy {

const char* to_string(AkerClass c) {
  switch (c) {
    case AkerClass::tensor: return "tensor";
    case AkerClass::compute: return "compute";
    case AkerClass::memory: return "memory";
    case AkerClass::neutral: return "neutral";
  }
  return "?";
}

std::optional<AkerClass> aker_class_from_string(const std::string& s) {
  for (AkerClass c : {AkerClass::tensor, AkerClass::compute, AkerClass::memory, AkerClass::neutral}) {
    if (s == to_string(c)) return c;
  }
  return std::nullopt;
}

AkerClass aker_class(const AkerUtilisation& u, double threshold) {
  if (u.tensor) return AkerClass::tensor;
  // Memory first: a memory-prefer kernel may also keep its cores busy (5.1).
  if (u.memory > threshold) return AkerClass::memory;
  if (u.compute > threshold) return AkerClass::compute;
  return AkerClass::neutral;
}

std::optional<int> aker_pair_rank(AkerClass a, AkerClass b) {
  const bool a_tc = a == AkerClass::tensor, b_tc = b == AkerClass::tensor;
  if (a_tc && b_tc) return std::nullopt;
  if (a_tc || b_tc) return 0;
  if (a == b) return std::nullopt;
  if ((a == AkerClass::compute && b == AkerClass::memory) || (a == AkerClass::memory && b == AkerClass::compute)) return 1;
  return 2;  // one of them neutral, the other compute or memory
}

}  // namespace concord::policy
