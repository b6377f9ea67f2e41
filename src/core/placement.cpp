#include "concord/placement.h"

#include <sstream>

namespace concord {

const char* to_string(LaunchForm f) { return f == LaunchForm::native ? "native" : "persistent"; }

std::string Placement::to_string() const {
  std::ostringstream o;
  o << "sms=" << sms.count() << " tlp=" << tlp << " cache=" << concord::to_string(cache)
    << " form=" << concord::to_string(form);
  if (tight_tlp > 0) o << " tight-tlp=" << tight_tlp << " on " << tight_sms.count() << " sms";
  if (variant >= 0) o << " variant=" << variant;
  if (range) o << " range=[" << range->begin << "," << range->end << ")";
  if (fusion) o << " fused-with=" << fusion->partner.value << " ratio=" << fusion->self_parts << ":" << fusion->partner_parts
                 << " partner-variant=" << fusion->partner_variant;
  if (priority != 0) o << " priority=" << priority;
  if (l2_persist) o << " l2-persist";
  return o.str();
}

}  // namespace concord
