#include "profile/profiler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <sstream>

#include "concord/occupancy.h"
#include "concord/suite.h"
#include "concord/backend_factory.h"
#include "profile/timer.h"

namespace concord::profile {
namespace {

using Clock = std::chrono::steady_clock;

double elapsed_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The streaming co-runner the cache policies are also timed beside: stream_triad of 2^28
// elements at half its occupancy on every SM, and the duration of one launch of it.
struct Pressure {
  KernelSpec spec;
  int tlp = 1;
  double seconds = 0;
};

// The first TPCs in id order, until they hold at least `sms` SMs: the SM set a partition of that
// size gives.
SmSet first_tpcs(const DeviceSpec& dev, int sms) {
  SmSet out;
  for (int t = 0; t < dev.tpc_count() && out.count() < sms; ++t) out = out | dev.sms_of_tpc(t);
  return out;
}

// Measures one kernel variant's fields on one backend.
class KernelMeasurer {
 public:
  KernelMeasurer(Backend& backend, const KernelSpec& spec, int variant, const ProfileOptions& o)
      : dev_(backend.device()), spec_(spec), v_(variant), o_(o), timer_(backend),
        caps_(backend.capabilities(spec)), occupancy_(max_resident_blocks(dev_, spec.variant(variant))) {}

  int occupancy() const { return occupancy_; }

  Result<double> on_sms(const SmSet& sms, int tlp, CachePolicy cache, BlockRange range) {
    Launch l;
    l.kernel = &spec_;
    l.variant = v_;
    l.range = range;
    l.placement.sms = sms;
    l.placement.tlp = caps_.tlp ? tlp : 0;
    l.placement.cache = cache;
    l.placement.form = caps_.persistent_form ? LaunchForm::persistent : LaunchForm::native;
    return timer_.median(l, o_.reps);
  }
  Result<double> whole(CachePolicy cache) { return on_sms(dev_.all_sms(), 0, cache, all_blocks()); }

  // Duration against SM count (full TLP, normal caching), refined near the knee.
  Result<std::vector<SmCurvePoint>> sm_curve() {
    const int step = std::max(1, dev_.sms_of_tpc(0).count());
    std::vector<SmCurvePoint> curve;
    auto measure = [&](int sms) -> Status {
      SmSet set = first_tpcs(dev_, sms);
      if (!caps_.exact_sm_sets) set = dev_.round_up_to_tpcs(set);
      auto t = on_sms(set, 0, CachePolicy::normal, all_blocks());
      if (!t) return t.status();
      curve.push_back({set.count(), *t});
      return Status::ok();
    };
    for (int sms : plan_sm_sweep(dev_.sm_count, step, o_.full)) CONCORD_RETURN_IF_ERROR(measure(sms));
    for (int sms : refine_near_knee(curve, step, 0.1, 3)) CONCORD_RETURN_IF_ERROR(measure(sms));
    std::sort(curve.begin(), curve.end(), [](const SmCurvePoint& a, const SmCurvePoint& b) { return a.sms < b.sms; });
    curve.erase(std::unique(curve.begin(), curve.end(), [](const SmCurvePoint& a, const SmCurvePoint& b) { return a.sms == b.sms; }),
                curve.end());
    return curve;
  }

  bool can_apply(CachePolicy c) const {
    return (!bypasses_l1(c) || caps_.l1_bypass) && (!evicts_l2_first(c) || caps_.l2_evict_first);
  }

  // Every cache policy the backend can apply to this kernel, on every SM; the others stay 0.
  Result<std::array<double, 4>> cache() {
    std::array<double, 4> out{};
    for (CachePolicy c : kAllCachePolicies) {
      if (!can_apply(c)) continue;
      auto t = whole(c);
      if (!t) return t.status();
      out[static_cast<size_t>(c)] = *t;
    }
    return out;
  }

  // Each cache policy with the kernel at half its occupancy on every SM, dispatched together with
  // the first of a chain of pressure launches (each at half its own occupancy on every SM, as many
  // as last about three times the kernel's alone time), timed from the pressure's start to the
  // kernel's own end.
  Result<std::array<double, 4>> cache_pressure(const Pressure& pressure, double alone_seconds) {
    std::array<double, 4> out{};
    const int launches = std::clamp(static_cast<int>(std::ceil(3 * alone_seconds / pressure.seconds)), 1, 64);
    Launch mine;
    mine.kernel = &spec_;
    mine.variant = v_;
    mine.range = all_blocks();
    mine.placement.sms = dev_.all_sms();
    mine.placement.tlp = std::max(1, occupancy_ / 2);
    mine.placement.form = LaunchForm::persistent;
    Launch theirs;
    theirs.kernel = &pressure.spec;
    theirs.variant = pressure.spec.default_variant;
    theirs.range = {0, pressure.spec.variant(theirs.variant).logical_blocks};
    theirs.placement.sms = dev_.all_sms();
    theirs.placement.tlp = pressure.tlp;
    theirs.placement.form = LaunchForm::persistent;
    theirs.tenant = TenantId{1};
    for (CachePolicy c : kAllCachePolicies) {
      if (!can_apply(c)) continue;
      mine.placement.cache = c;
      std::vector<double> times;
      for (int r = 0; r < o_.reps + 1; ++r) {
        theirs.after = DispatchId{};
        auto first = timer_.start(theirs);
        if (!first) return first.status();
        auto kernel = timer_.start(mine);
        if (!kernel) return kernel.status();
        DispatchId prev = *first;
        for (int i = 1; i < launches; ++i) {
          theirs.after = prev;
          auto next = timer_.start(theirs);
          if (!next) return next.status();
          prev = *next;
        }
        auto done = timer_.wait_all();
        if (!done) return done.status();
        if (r > 0) times.push_back(done->at(*kernel).end - done->at(*first).start);
      }
      std::sort(times.begin(), times.end());
      out[static_cast<size_t>(c)] = times[times.size() / 2];
    }
    return out;
  }

  // Duration on every SM against TLP 1..occupancy.
  Result<std::vector<double>> tlp() {
    std::vector<double> out;
    for (int tlp = 1; tlp <= occupancy_; ++tlp) {
      auto t = on_sms(dev_.all_sms(), tlp, CachePolicy::normal, all_blocks());
      if (!t) return t.status();
      out.push_back(*t);
    }
    return out;
  }

  // Duration against logical blocks (Aker 6.3), on every SM: runs of 1/8, 1/4, 1/2 and all of the
  // logical grid.
  Result<LinearFit> linear() {
    std::vector<double> x, y;
    const int64_t blocks = all_blocks().end;
    for (double f : {0.125, 0.25, 0.5, 1.0}) {
      const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(f * static_cast<double>(blocks)));
      if (!x.empty() && static_cast<double>(n) == x.back()) continue;
      auto t = on_sms(dev_.all_sms(), 0, CachePolicy::normal, {0, n});
      if (!t) return t.status();
      x.push_back(static_cast<double>(n));
      y.push_back(*t);
    }
    return fit_linear(x, y);
  }

  // The fields this backend can measure for this kernel.
  ProfileFields measurable(bool pressure) const {
    ProfileFields f{ProfileField::sm_curve, ProfileField::cache};
    if (caps_.persistent_form && caps_.tlp) f = f | ProfileFields{ProfileField::tlp};
    if (caps_.persistent_form && caps_.tlp && pressure) f = f | ProfileFields{ProfileField::cache_pressure};
    if (caps_.split_range) f = f | ProfileFields{ProfileField::linear};
    return f;
  }

 private:
  BlockRange all_blocks() const { return {0, spec_.variant(v_).logical_blocks}; }

  const DeviceSpec& dev_;
  const KernelSpec& spec_;
  int v_;
  const ProfileOptions& o_;
  Timer timer_;
  Capabilities caps_;
  int occupancy_;
};

// On the heap: a backend knows a kernel by its spec's address, which must not move.
Result<std::unique_ptr<Pressure>> make_pressure(Backend& backend, int reps) {
  auto spec = make_suite_kernel("stream_triad", int64_t{1} << 28);
  if (!spec) return spec.status();
  auto made = std::make_unique<Pressure>();
  Pressure& p = *made;
  p.spec = std::move(*spec);
  const Capabilities caps = backend.capabilities(p.spec);
  if (!caps.persistent_form || !caps.tlp) {
    return Status::unsupported("profiler: the backend cannot run stream_triad persistently with a TLP (the pressure co-runner)");
  }
  p.tlp = std::max(1, max_resident_blocks(backend.device(), p.spec.variant(p.spec.default_variant)) / 2);
  Timer timer(backend);
  Launch l;
  l.kernel = &p.spec;
  l.variant = p.spec.default_variant;
  l.range = {0, p.spec.variant(l.variant).logical_blocks};
  l.placement.sms = backend.device().all_sms();
  l.placement.tlp = p.tlp;
  l.placement.form = LaunchForm::persistent;
  l.tenant = TenantId{1};
  auto t = timer.median(l, reps);
  if (!t) return t.status();
  if (!(*t > 0)) return Status::internal("profiler: stream_triad took no time");
  p.seconds = *t;
  return made;
}

std::string format_seconds(double s) {
  std::ostringstream o;
  o.precision(1);
  o << std::fixed << (s >= 60 ? s / 60 : s) << (s >= 60 ? " min" : " s");
  return o.str();
}

struct Job {
  KernelSpec spec;
  int variant = 0;
};

Result<std::vector<Job>> plan_jobs(const ProfileOptions& options) {
  std::vector<Job> jobs;
  auto add = [&](const KernelSpec& spec) {
    for (int v = 0; v < spec.variant_count(); ++v) {
      if (options.all_variants || v == spec.default_variant) jobs.push_back({spec, v});
    }
  };
  if (!options.specs.empty()) {
    for (const KernelSpec& spec : options.specs) add(spec);
    return jobs;
  }
  for (const std::string& k : options.kernels) {
    if (std::none_of(suite_catalog().begin(), suite_catalog().end(), [&](const SuiteEntry& e) { return e.name == k; })) {
      return Status::not_found("profile: unknown kernel '" + k + "'");
    }
  }
  for (const SuiteEntry& e : suite_catalog()) {
    if (!options.kernels.empty() && std::find(options.kernels.begin(), options.kernels.end(), e.name) == options.kernels.end()) {
      continue;
    }
    const auto size_it = options.sizes.find(e.name);
    auto spec = make_suite_kernel(e.name, size_it != options.sizes.end() ? size_it->second : e.default_size);
    if (!spec) return spec.status();
    add(*spec);
  }
  return jobs;
}

}  // namespace

ProfileKey device_key(const Backend& backend) {
  ProfileKey k;
  k.gpu = backend.device().name;
  k.driver = backend.device().driver.empty() ? backend.name() : backend.device().driver;
  return k;
}

Result<ProfileReport> profile_kernels(ProfileStore& store, const BackendConfig& config, const ProfileOptions& options,
                                      std::ostream& progress) {
  if (options.reps < 1) return Status::invalid_argument("profile: reps must be >= 1");
  auto jobs = plan_jobs(options);
  if (!jobs) return jobs.status();
  // The backend first: without the device nothing is written.
  auto made = make_backend(config);
  if (!made) return made.status();
  std::unique_ptr<Backend> backend = std::move(*made);
  CONCORD_RETURN_IF_ERROR(backend->start_clock());
  const ProfileKey device = device_key(*backend);
  const DeviceSpec dev = backend->device();

  ProfileReport report;
  const auto t0 = Clock::now();
  double measuring_seconds = 0;
  bool backend_used = false;
  auto out_of_time = [&] { return options.max_minutes > 0 && elapsed_since(t0) > options.max_minutes * 60; };
  for (size_t i = 0; i < jobs->size(); ++i) {
    const Job& job = (*jobs)[i];
    const KernelVariant& var = job.spec.variant(job.variant);
    KernelProfile p;
    p.key = {device.gpu, device.driver, job.spec.name, var.name, job.spec.size};
    p.elastic = job.spec.elastic;
    p.logical_blocks = var.logical_blocks;
    p.flops_per_block = var.flops_per_block;
    p.bytes_per_block = var.bytes_per_block;
    p.threads_per_block = var.threads_per_block;
    p.registers_per_thread = var.registers_per_thread;
    p.shared_bytes_per_block = var.shared_bytes_per_block;
    if (backend_used) {
      // A fresh backend for each kernel measured: the last one's device memory goes first.
      backend.reset();
      auto fresh = make_backend(config);
      if (!fresh) return fresh.status();
      backend = std::move(*fresh);
      CONCORD_RETURN_IF_ERROR(backend->start_clock());
      backend_used = false;
    }
    KernelMeasurer m(*backend, job.spec, job.variant, options);
    p.blocks_per_sm = m.occupancy();
    if (p.blocks_per_sm == 0) {
      return Status::unsupported(p.key.to_string() + ": one block does not fit on an SM of " + dev.name);
    }
    auto todo = store.missing(p.key, m.measurable(options.pressure));
    if (!todo) return todo.status();
    if (todo->empty()) {
      ++report.skipped;
      continue;
    }
    if (out_of_time()) {
      report.left = static_cast<int>(jobs->size() - i);
      progress << "time budget of " << options.max_minutes << " min reached; " << report.left << " left (run again to resume)\n";
      break;
    }
    // Progress bar with an ETA from the mean time of the kernels measured so far.
    const int width = 30;
    const int filled = static_cast<int>(width * static_cast<double>(i) / static_cast<double>(jobs->size()));
    const double eta = report.measured > 0 ? measuring_seconds / report.measured * static_cast<double>(jobs->size() - i) : 0;
    progress << "[" << std::string(static_cast<size_t>(filled), '#') << std::string(static_cast<size_t>(width - filled), '.')
             << "] " << i << "/" << jobs->size() << " " << p.key.kernel << " (" << p.key.variant << ", size " << p.key.size
             << "): " << todo->to_string() << "  elapsed " << format_seconds(elapsed_since(t0))
             << (report.measured > 0 ? ", ETA " + format_seconds(eta) : "") << "\n";
    progress.flush();

    backend_used = true;
    auto stored = store.get(p.key);
    // Reference times come from this run, else from the stored profile (a damaged one gives none).
    const KernelProfile reference = stored && stored->has_value() ? **stored : KernelProfile{};
    const auto kernel_t0 = Clock::now();
    auto where = [&](const Status& s) { return Status(s.code(), p.key.to_string() + ": " + s.message()); };
    auto commit = [&](ProfileField f, Clock::time_point field_t0) -> Status {
      p.profile_seconds = elapsed_since(field_t0);
      CONCORD_RETURN_IF_ERROR(store.merge(p, {f}));
      ++report.fields;
      return Status::ok();
    };
    bool finished = true;
    std::unique_ptr<Pressure> pressure;  // lives as long as the backend may know its spec
    for (ProfileField f : kAllProfileFields) {
      if (!todo->contains(f)) continue;
      if (out_of_time()) {
        finished = false;
        break;
      }
      const auto field_t0 = Clock::now();
      switch (f) {
        case ProfileField::sm_curve: {
          auto curve = m.sm_curve();
          if (!curve) return where(curve.status());
          p.sm_curve = *curve;
          const double all = p.all_sm_seconds();
          p.demand_sms = demand_sms(p.sm_curve);
          p.demand = static_cast<double>(p.demand_sms) / dev.sm_count;
          const double peak = job.spec.unit == ComputeUnit::tensor ? dev.tensor_flops : dev.fp32_flops;
          p.compute_utilization = var.flops_per_block * static_cast<double>(var.logical_blocks) / all / peak;
          p.memory_utilization = var.bytes_per_block * static_cast<double>(var.logical_blocks) / all / dev.dram_bytes_per_s;
          break;
        }
        case ProfileField::cache: {
          auto c = m.cache();
          if (!c) return where(c.status());
          p.cache_seconds = *c;
          break;
        }
        case ProfileField::cache_pressure: {
          // The kernel's alone time on every SM sets how long the pressure lasts.
          double alone = p.cache_seconds[0] > 0 ? p.cache_seconds[0] : reference.cache_seconds[0];
          if (!(alone > 0)) {
            auto t = m.whole(CachePolicy::normal);
            if (!t) return where(t.status());
            alone = *t;
          }
          auto made = make_pressure(*backend, options.reps);
          if (!made) return where(made.status());
          pressure = std::move(*made);
          auto c = m.cache_pressure(*pressure, alone);
          if (!c) return where(c.status());
          p.cache_pressure_seconds = *c;
          break;
        }
        case ProfileField::tlp: {
          auto t = m.tlp();
          if (!t) return where(t.status());
          p.tlp_seconds = *t;
          break;
        }
        case ProfileField::linear: {
          auto fit = m.linear();
          if (!fit) return where(fit.status());
          p.linear_intercept = fit->intercept;
          p.linear_slope = fit->slope;
          p.linear_fit_error = fit->mean_relative_error;
          break;
        }
      }
      if (Status s = commit(f, field_t0); !s) return where(s);
    }
    measuring_seconds += elapsed_since(kernel_t0);
    ++report.measured;
    if (!finished) {
      report.left = static_cast<int>(jobs->size() - i);
      progress << "time budget of " << options.max_minutes << " min reached; " << report.left << " left (run again to resume)\n";
      break;
    }
  }
  report.seconds = elapsed_since(t0);
  if (report.measured > 0) CONCORD_RETURN_IF_ERROR(store.record_session(device.gpu, device.driver, report.seconds, report.measured));
  progress << "profiled " << report.measured << " (" << report.fields << " fields), skipped " << report.skipped
           << " already stored, " << report.left << " left, in " << format_seconds(report.seconds) << "\n";
  return report;
}

}  // namespace concord::profile
