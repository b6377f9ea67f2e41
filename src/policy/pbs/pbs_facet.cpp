#include "policy/pbs/pbs_facet.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

namespace concord::policy {

std::string pbs_facet_to_json(const PbsFacet& facet) {
  return nlohmann::json{{"requested_bytes_per_block", facet.requested_bytes_per_block},
                        {"l1_miss_rate", facet.l1_miss_rate},
                        {"l2_miss_rate", facet.l2_miss_rate}}
      .dump();
}

namespace {

Result<double> field(const nlohmann::json& j, const char* name) {
  if (!j.contains(name) || !j.at(name).is_number()) {
    return Status::parse_error(std::string("pbs facet: field '") + name + "': missing or not a number");
  }
  const double v = j.at(name).get<double>();
  if (!std::isfinite(v)) return Status::parse_error(std::string("pbs facet: field '") + name + "': not finite");
  return v;
}

Status check(const PbsFacet& f) {
  if (!(f.requested_bytes_per_block > 0)) {
    return Status::invalid_argument("pbs facet: requested_bytes_per_block must be > 0, is " + std::to_string(f.requested_bytes_per_block));
  }
  if (!(f.l1_miss_rate > 0 && f.l1_miss_rate <= 1)) {
    return Status::invalid_argument("pbs facet: l1_miss_rate must be in (0, 1], is " + std::to_string(f.l1_miss_rate));
  }
  if (!(f.l2_miss_rate > 0 && f.l2_miss_rate <= 1)) {
    return Status::invalid_argument("pbs facet: l2_miss_rate must be in (0, 1], is " + std::to_string(f.l2_miss_rate));
  }
  return Status::ok();
}

constexpr double kSmallestMissRate = 1e-3;

}  // namespace

Result<PbsFacet> pbs_facet_from_json(const std::string& json) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::parse_error("pbs facet: not a JSON object");
  PbsFacet f;
  auto bytes = field(j, "requested_bytes_per_block");
  if (!bytes) return bytes.status();
  auto l1 = field(j, "l1_miss_rate");
  if (!l1) return l1.status();
  auto l2 = field(j, "l2_miss_rate");
  if (!l2) return l2.status();
  f = {*bytes, *l1, *l2};
  CONCORD_RETURN_IF_ERROR(check(f));
  return f;
}

Result<PbsFacet> pbs_facet_from_ncu(const std::map<std::string, double>& metrics, int64_t logical_blocks) {
  if (logical_blocks <= 0) return Status::invalid_argument("pbs facet: logical_blocks must be > 0");
  auto get = [&](const char* name) -> Result<double> {
    auto it = metrics.find(name);
    if (it == metrics.end()) return Status::parse_error(std::string("pbs facet: Nsight Compute metric '") + name + "' missing");
    return it->second;
  };
  auto ld = get(kNcuGlobalLoadBytes);
  if (!ld) return ld.status();
  auto st = get(kNcuGlobalStoreBytes);
  if (!st) return st.status();
  auto l1 = get(kNcuL1HitRate);
  if (!l1) return l1.status();
  auto l2 = get(kNcuL2HitRate);
  if (!l2) return l2.status();
  auto miss = [](double hit_pct) { return std::clamp(1.0 - hit_pct / 100.0, kSmallestMissRate, 1.0); };
  PbsFacet f{(*ld + *st) / static_cast<double>(logical_blocks), miss(*l1), miss(*l2)};
  CONCORD_RETURN_IF_ERROR(check(f));
  return f;
}

Result<PbsFacet> pbs_facet_of(const KernelVariant& variant) {
  if (auto it = variant.facets.find(kPbsFacetName); it != variant.facets.end()) return pbs_facet_from_json(it->second);
  // A body with no memory traffic in its spec counts one byte per block: its EB is then its
  // block rate, small beside any memory-bound co-runner's, as the paper's compute-bound kernels are.
  return PbsFacet{variant.bytes_per_block > 0 ? variant.bytes_per_block : 1.0, 1, 1};
}

bool has_pbs_facet(const KernelVariant& variant) { return variant.facets.count(kPbsFacetName) > 0; }

EffectiveBandwidth effective_bandwidth(const PbsFacet& facet, double blocks_per_s) {
  EffectiveBandwidth out;
  out.cmr = facet.l1_miss_rate * facet.l2_miss_rate;
  out.bw = facet.requested_bytes_per_block * out.cmr * blocks_per_s;
  out.eb = out.bw / out.cmr;
  return out;
}

std::vector<FacetCodec> pbs_facet_codecs() {
  FacetCodec c;
  c.name = kPbsFacetName;
  c.check = [](const std::string& json) { return pbs_facet_from_json(json).status(); };
  return {c};
}

}  // namespace concord::policy
