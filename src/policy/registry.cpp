#include "concord/lease.h"
#include "concord/policy.h"
#include "concord/suggest.h"
#include "policy/registration.h"

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

namespace {

// The built-in registries, both filled by the policy folders' registrations.
struct Builtins {
  PolicyRegistry policies;
  LeasePolicyRegistry leases;
};

const Builtins& builtins() {
  static const Builtins b = [] {
    Builtins out;
    policy::Registrations r(out.policies, out.leases);
    policy::register_policy_folders(r);
    return out;
  }();
  return b;
}

}  // namespace

const PolicyRegistry& builtin_policies() { return builtins().policies; }

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

const LeasePolicyRegistry& builtin_lease_policies() { return builtins().leases; }

namespace policy {

void Registrations::add(const std::string& name, const std::string& summary, PolicyFactory factory) {
  if (Status s = policies_.add(name, summary, std::move(factory)); !s) throw std::logic_error(s.to_string());
}

void Registrations::add_lease(const std::string& name, LeasePolicyFactory factory) {
  if (Status s = leases_.add(name, std::move(factory)); !s) throw std::logic_error(s.to_string());
}

}  // namespace policy

}  // namespace concord
