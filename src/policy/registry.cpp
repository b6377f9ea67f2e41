#include "concord/lease.h"
#include "concord/policy.h"
#include "concord/suggest.h"
#include "policy/aker/aker_policy.h"
#include "policy/baymax/baymax_policy.h"
#include "policy/fedc/fedc_policy.h"
#include "policy/fedcm/fedcm_policy.h"
#include "policy/krisp/krisp_policy.h"
#include "policy/manual/manual_policy.h"
#include "policy/pbs/pbs_policy.h"
#include "policy/pbs_baselines/tlp_baselines.h"
#include "policy/orion/orion_lease.h"
#include "policy/orion/orion_policy.h"
#include "policy/priority_streams/priority_streams_lease.h"
#include "policy/priority_streams/priority_streams_policy.h"
#include "policy/raise/raise_policy.h"
#include "policy/raise_baselines/type_order_policy.h"
#include "policy/random/random_policy.h"
#include "policy/round_robin/round_robin_policy.h"
#include "policy/serial/serial_policy.h"
#include "policy/sgdrc/sgdrc_lease.h"
#include "policy/sgdrc/sgdrc_policy.h"
#include "policy/static_partition/static_partition_policy.h"
#include "policy/streams/streams_lease.h"
#include "policy/streams/streams_policy.h"
#include "policy/tacker/tacker_policy.h"

namespace concord {

Result<PolicySpec> parse_policy_spec(const std::string& spec) {
  PolicySpec out;
  const size_t colon = spec.find(':');
  out.name = spec.substr(0, colon);
  if (out.name.empty()) return Status::invalid_argument("policy spec '" + spec + "': no policy name");
  if (colon == std::string::npos) return out;
  std::string rest = spec.substr(colon + 1);
  if (rest.empty()) return Status::invalid_argument("policy spec '" + spec + "': nothing after ':'");
  while (!rest.empty()) {
    const size_t semi = rest.find(';');
    const std::string kv = rest.substr(0, semi);
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::invalid_argument("policy spec '" + spec + "': '" + kv + "' is not key=value (expected name:key=value;key=value)");
    }
    if (out.params.count(kv.substr(0, eq))) {
      return Status::invalid_argument("policy spec '" + spec + "': parameter '" + kv.substr(0, eq) + "' given twice");
    }
    out.params[kv.substr(0, eq)] = kv.substr(eq + 1);
    rest = semi == std::string::npos ? "" : rest.substr(semi + 1);
  }
  return out;
}

Status PolicyRegistry::add(const std::string& name, const std::string& summary, PolicyFactory factory) {
  if (name.empty()) return Status::invalid_argument("a policy needs a name");
  if (entries_.count(name)) return Status::already_exists("a policy named '" + name + "' is already registered");
  entries_[name] = Item{summary, std::move(factory)};
  return Status::ok();
}

Result<std::unique_ptr<Policy>> PolicyRegistry::make(const std::string& name, const PolicyParams& params) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    std::string known;
    std::vector<std::string> names;
    for (const auto& [n, item] : entries_) {
      known += (known.empty() ? "" : ", ") + n;
      names.push_back(n);
    }
    return Status::not_found("no policy named '" + name + "'" + did_you_mean(name, names) + " (known: " + known + ")");
  }
  return it->second.factory(params);
}

std::vector<PolicyRegistry::Entry> PolicyRegistry::list() const {
  std::vector<Entry> out;
  for (const auto& [n, item] : entries_) out.push_back({n, item.summary});
  return out;
}

const PolicyRegistry& builtin_policies() {
  static const PolicyRegistry registry = [] {
    PolicyRegistry r;
    auto must = [](Status s) {
      if (!s) throw std::logic_error(s.to_string());  // two built-ins under one name: a build bug
    };
    must(r.add("serial", "one launch at a time on the whole GPU (baseline)", policy::make_serial));
    must(r.add("streams", "everything concurrent, one stream per tenant; the hardware decides (baseline)",
               policy::make_streams));
    must(r.add("priority-streams", "streams with LC tenants on a high-priority CUDA stream, BE on the lowest (baseline); param ahead",
               policy::make_priority_streams));
    must(r.add("orion", "Orion (LC baseline, as its public code behaves): LC at once on a high-priority stream; BE only when no LC request is active, or within the SM threshold with a profile unlike the LC kernel's; BE waits once its outstanding duration passes a share of the LC request's latency; params sm_threshold, dur_fraction, ahead",
               policy::make_orion));
    must(r.add("static-partition", "MPS-like: each tenant a fixed even TPC-granular share of SMs (baseline)",
               policy::make_static_partition));
    must(r.add("round-robin", "tenants take turns, one launch at a time on the whole GPU; param streams=N (baseline)",
               policy::make_round_robin));
    must(r.add("random", "seeded random order, one launch at a time on the whole GPU; param streams=N (baseline)",
               policy::make_random));
    must(r.add("fedcm", "FEDCM: collocation by Algorithm 1 and cache bypass (FEDCM paper, Section III); params sigma, gamma",
               policy::make_fedcm));
    must(r.add("fedc", "FEDCM's collocation without cache bypass (FedC); param sigma", policy::make_fedc));
    must(r.add("krisp", "KRISP as in FEDCM's evaluation: each kernel its own d x C SMs, disjoint where possible",
               policy::make_krisp));
    must(r.add("manual", "hand-written placements: params sms.T, tlp.T, cache.T, form, fuse=A+B, ratio=a:b",
               policy::make_manual));
    must(r.add("raise", "RAISE: task streams by resource-type scores and dynamic block sizes (RAISE paper, Section V); params alpha, beta, streams, dims, tie, ahead, burst",
               policy::make_raise));
    must(r.add("sq", "RAISE baseline: task streams, all tasks of one type then the next (COM, MEM, LAT); random dims; params streams, dims (random|min|mid|max)",
               policy::make_sq));
    must(r.add("rr", "RAISE baseline: task streams, types COM, MEM, LAT in turn; random dims; params streams, dims (random|min|mid|max)", policy::make_rr));
    must(r.add("rd", "RAISE baseline: task streams, random task order; random dims; params streams, dims (random|min|mid|max)", policy::make_rd));
    must(r.add("sgdrc", "SGDRC: one LC + one BE kernel, tidal SM masking of elastic BE (SGDRC paper, Sections 4, 7.1); params window, tolerance, steps, reserve, be_tlp",
               policy::make_sgdrc));
    must(r.add("aker", "Aker (Aker paper, Section 8.3): one kernel at a time; the newest LC query's kernel fused with the BE kernel of largest gain, split at the opportune ratio, when within the QoS headroom; else reorder; BE + BE fusion when no LC is ready; param idle_cap",
               policy::make_aker));
    must(r.add("tacker", "Tacker (Aker's baseline): Aker's manager with whole BE kernels fused, tensor-core + CUDA-core pairs only; param idle_cap",
               policy::make_tacker));
    must(r.add("baymax", "Baymax (Aker's baseline): one kernel at a time; a BE kernel runs before the LC kernel only if it fits every query's headroom; param idle_cap",
               policy::make_baymax));
    must(r.add("pbs", "PBS: pattern-based TLP search on effective bandwidth (PBS paper, Section V); params metric=ws|fi|hs, sms=split|shared, window, warmup, tolerance, drift, trace",
               policy::make_pbs));
    must(r.add("maxtlp", "PBS baseline ++maxTLP: every tenant at the most blocks per SM; param sms=split|shared", policy::make_maxtlp));
    must(r.add("besttlp", "PBS baseline ++bestTLP: each tenant at its best alone TLP; params tlp.T=N, sms=split|shared",
               policy::make_besttlp));
    must(r.add("dyncta", "PBS baseline ++DynCTA-like: each tenant hill-climbs its own TLP on its own progress; params sms, window, warmup, tolerance",
               policy::make_dyncta));
    must(r.add("modbypass", "PBS baseline Mod+Bypass-like: dyncta plus L1 bypass for tenants that miss in L1; params sms, window, warmup, tolerance, bypass_miss",
               policy::make_modbypass));
    return r;
  }();
  return registry;
}

const char* to_string(LeaseGate gate) {
  switch (gate) {
    case LeaseGate::open: return "open";
    case LeaseGate::closed: return "closed";
    case LeaseGate::per_launch: return "per-launch";
  }
  return "unknown";
}

const char* to_string(LcYield yield) {
  switch (yield) {
    case LcYield::run: return "run";
    case LcYield::close: return "close";
    case LcYield::cap: return "cap";
  }
  return "unknown";
}

Status LeasePolicyRegistry::add(const std::string& name, LeasePolicyFactory factory) {
  if (name.empty()) return Status::invalid_argument("a lease policy needs a name");
  if (contains(name)) return Status::already_exists("a lease policy named '" + name + "' is already registered");
  entries_.emplace_back(name, std::move(factory));
  return Status::ok();
}

bool LeasePolicyRegistry::contains(const std::string& name) const {
  for (const auto& [n, f] : entries_) {
    if (n == name) return true;
  }
  return false;
}

std::vector<std::string> LeasePolicyRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [n, f] : entries_) out.push_back(n);
  return out;
}

Result<std::unique_ptr<LeasePolicy>> LeasePolicyRegistry::make(const std::string& name, const PolicyParams& params) const {
  for (const auto& [n, factory] : entries_) {
    if (n == name) return factory(params);
  }
  std::string known;
  for (const auto& [n, f] : entries_) known += (known.empty() ? "" : ", ") + n;
  return Status::not_found("no lease policy named '" + name + "'" + did_you_mean(name, names()) + " (with a lease form: " + known + ")");
}

const LeasePolicyRegistry& builtin_lease_policies() {
  static const LeasePolicyRegistry registry = [] {
    LeasePolicyRegistry r;
    auto must = [](Status s) {
      if (!s) throw std::logic_error(s.to_string());
    };
    must(r.add("streams", policy::make_streams_lease));
    must(r.add("priority-streams", policy::make_priority_streams_lease));
    must(r.add("orion", policy::make_orion_lease));
    must(r.add("sgdrc", policy::make_sgdrc_lease));
    return r;
  }();
  return registry;
}

}  // namespace concord
