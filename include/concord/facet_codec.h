// A policy's profile data in the store (its facet, e.g. RAISE's metric vector) is opaque JSON to
// the store; the folder that owns it registers a codec that checks it as the policy reads it. The
// store, the importer and attach_profiles() go through the codecs and name no policy.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "concord/status.h"

namespace concord {

struct FacetCodec {
  std::string name;  // the facet's name in the store and in KernelVariant::facets
  // Reads `json` as the policy will; an error names the field.
  std::function<Status(const std::string& json)> check;
  // Profile exports of schema v2 and older carried this facet inside each profile under this key
  // (empty: never); from_legacy turns that profile's JSON object into the facet's JSON.
  std::string legacy_field;
  std::function<Result<std::string>(const std::string& profile_json)> from_legacy;
};

// Every built-in facet's codec (generated from the policy folders that declare a facet,
// src/policy/CMakeLists.txt), in folder order.
const std::vector<FacetCodec>& builtin_facet_codecs();
// The codec of `name`, or null.
const FacetCodec* find_facet_codec(const std::string& name);

}  // namespace concord
