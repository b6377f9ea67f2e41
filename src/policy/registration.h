// What a policy folder registers (src/policy/<folder>/<folder>_register.cpp): its policies by name,
// and the lease forms of those that have one. src/policy/CMakeLists.txt generates the one function
// that calls every folder's register_<folder>(); registry.cpp builds the built-in registries from it.
#pragma once

#include <string>

#include "concord/lease.h"
#include "concord/policy.h"

namespace concord::policy {

class Registrations {
 public:
  Registrations(PolicyRegistry& policies, LeasePolicyRegistry& leases) : policies_(policies), leases_(leases) {}
  // Two built-ins under one name are a build bug: std::logic_error.
  void add(const std::string& name, const std::string& summary, PolicyFactory factory);
  void add_lease(const std::string& name, LeasePolicyFactory factory);

 private:
  PolicyRegistry& policies_;
  LeasePolicyRegistry& leases_;
};

// Every folder's registrations, in the order of src/policy/CMakeLists.txt's list (generated).
void register_policy_folders(Registrations& r);

}  // namespace concord::policy
