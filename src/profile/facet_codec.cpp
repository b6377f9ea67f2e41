// The store's lookup of a facet's codec among those the policy folders register (the list itself
// is generated from the folders: builtin_facet_codecs(), src/policy/CMakeLists.txt).
#include "concord/facet_codec.h"

namespace concord {

const FacetCodec* find_facet_codec(const std::string& name) {
  for (const FacetCodec& c : builtin_facet_codecs()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

}  // namespace concord
