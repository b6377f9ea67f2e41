// The policies of src/policy/pbs/ under their names (src/policy/registration.h).
#include "policy/registration.h"
#include "policy/pbs/pbs_policy.h"
#include "policy/pbs/tlp_baselines.h"

namespace concord::policy {

void register_pbs(Registrations& r) {
  r.add("pbs", "PBS: pattern-based TLP search on effective bandwidth (PBS paper, Section V); params metric=ws|fi|hs, sms=split|shared, window, warmup, tolerance, drift, trace",
        make_pbs);
  r.add("maxtlp", "PBS baseline ++maxTLP: every tenant at the most blocks per SM; param sms=split|shared", make_maxtlp);
  r.add("besttlp", "PBS baseline ++bestTLP: each tenant at its best alone TLP; params tlp.T=N, sms=split|shared",
        make_besttlp);
  r.add("dyncta", "PBS baseline ++DynCTA-like: each tenant hill-climbs its own TLP on its own progress; params sms, window, warmup, tolerance",
        make_dyncta);
  r.add("modbypass", "PBS baseline Mod+Bypass-like: dyncta plus L1 bypass for tenants that miss in L1; params sms, window, warmup, tolerance, bypass_miss",
        make_modbypass);
}

}  // namespace concord::policy
