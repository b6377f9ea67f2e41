// Outputs and logical blocks on the GPU, through the CUDA backend and through the engine: every
// launch's output against its kernel's CPU reference, every logical block run exactly as often as
// launches asked for it (counted per block in device memory by the kernel's own audit, not by the
// backend's progress counter, which is capped at the range), and on an SM of its dispatch's set
// (from %smid), in every launch form, after preempt and resume, resize, a TLP change and fusion.
// The tests assert outputs, counts and the order of events, never durations.
//
// With CONCORD_TEST_STUB_KERNEL=<kernel> (kernels/device/device_kernel.h) that kernel's body does
// nothing while its blocks are still handed out and counted: these tests must then fail on its
// output (scripts/gpu_stub_check.sh).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "concord/engine.h"
#include "concord/policy.h"
#include "concord/spec_source.h"
#include "concord/suite.h"
#include "concord/backend_factory.h"
#include "gpu_test_support.h"
#include "kernels/device/device_kernel.h"
#include "kernels/device/fusion_compiler.h"

namespace concord {
namespace {

using testing::kReferenceCases;

std::unique_ptr<cuda::CudaBackend> make_backend() {
  auto b = cuda::CudaBackend::create(0, 5);
  EXPECT_TRUE(b.is_ok()) << b.status().to_string();
  return b.is_ok() ? std::move(*b) : nullptr;
}

KernelSpec reference_kernel(const std::string& name, int64_t size = 0) {
  auto k = make_suite_kernel(name, size > 0 ? size : kReferenceCases.at(name).first);
  EXPECT_TRUE(k.is_ok()) << name << ": " << k.status().to_string();
  return k.is_ok() ? *k : KernelSpec{};
}

double tolerance_of(const std::string& name) { return kReferenceCases.at(name).second; }

// The output of `k` against its CPU reference: empty when it matches, else what is wrong.
std::string output_mismatch(const kernels::DeviceKernel& k, double tolerance) {
  auto err = k.check(13);
  if (!err.is_ok()) return "check failed: " + err.status().to_string();
  if (*err > tolerance) return "relative error " + std::to_string(*err) + " against the CPU reference (at most " + std::to_string(tolerance) + ")";
  return "";
}

// The audit of `k` against the runs expected per logical block (blocks beyond `expected` must not
// have run), and, where `allowed` is given for a block, its SM: empty when all hold, else the
// first few blocks that do not.
std::string audit_mismatch(const kernels::DeviceKernel& k, const std::vector<uint32_t>& expected,
                           const std::function<const SmSet*(int64_t)>& allowed = nullptr) {
  auto audit = k.block_runs();
  if (!audit.is_ok()) return "audit: " + audit.status().to_string();
  std::string out;
  int reported = 0;
  for (size_t b = 0; b < audit->runs.size() && reported < 5; ++b) {
    const uint32_t want = b < expected.size() ? expected[b] : 0;
    if (audit->runs[b] != want) {
      out += " block " + std::to_string(b) + " ran " + std::to_string(audit->runs[b]) + " times, not " + std::to_string(want) + ";";
      ++reported;
      continue;
    }
    const SmSet* set = allowed && want > 0 ? allowed(static_cast<int64_t>(b)) : nullptr;
    if (set && !set->contains(static_cast<int>(audit->sm[b]))) {
      out += " block " + std::to_string(b) + " ran on SM " + std::to_string(audit->sm[b]) + ", outside " + set->to_string() + ";";
      ++reported;
    }
  }
  return out;
}

// Clears `k`'s output (NaN) and zeroes its audit, waiting for both.
Status reset_kernel(kernels::DeviceKernel& k) {
  CONCORD_RETURN_IF_ERROR(k.poison_output(nullptr));
  CONCORD_RETURN_IF_ERROR(k.audit_block_runs());
  CONCORD_CUDA(cudaDeviceSynchronize());
  return Status::ok();
}

// Every completion still to come, added to those `seen` before (wait_for_progress may have seen
// one already).
Result<std::vector<Completion>> drain(Backend& b, std::vector<Completion> seen = {}) {
  while (b.running() > 0) {
    auto c = b.advance(b.now() + 1.0);
    if (!c) return c.status();
    seen.insert(seen.end(), c->begin(), c->end());
  }
  return seen;
}

// Waits (bounded by a count of short waits, not by a duration) until `id` has finished more than
// `above` logical blocks; false if it ended first (its completion then goes to `seen`) or never
// got there.
bool wait_for_progress(Backend& b, DispatchId id, std::vector<Completion>& seen, int64_t above = 0) {
  for (int i = 0; i < 20000; ++i) {
    auto p = b.progress(id);
    if (!p.is_ok()) return false;
    if ((*p)[0] > above) return true;
    auto ended = b.advance(b.now() + 0.0002);
    if (!ended.is_ok()) return false;
    seen.insert(seen.end(), ended->begin(), ended->end());
    if (!ended->empty()) return false;
  }
  return false;
}

DispatchRequest one_part(DispatchId id, TenantId tenant, const KernelSpec& k, BlockRange range, const Placement& p) {
  DispatchRequest r;
  r.id = id;
  r.parts.push_back(DispatchPart{LaunchId{id.value}, tenant, &k, k.default_variant, range, 1});
  r.placement = p;
  return r;
}

BlockRange whole_grid(const KernelSpec& k) { return {0, k.variant(k.default_variant).logical_blocks}; }
std::vector<uint32_t> once(const KernelSpec& k) { return std::vector<uint32_t>(static_cast<size_t>(whole_grid(k).size()), 1u); }

// ---- Through the backend

// Every elastic suite kernel in each launch form: native on the whole GPU and on a green context,
// persistent on an odd-numbered SM set at one block per SM and on every SM with its cache policy
// at "both" where it has one, and the green-context and every-SM forms with the L2 persisting window. Each run's output matches the reference, each logical block ran
// once, on an SM of the form's set.
TEST(BackendOutputs, EveryFormMatchesTheReferenceOnItsSmsAndRunsEachBlockOnce) {
  auto b = make_backend();
  ASSERT_TRUE(b);
  const int sms = b->device().sm_count;
  SmSet odd;
  for (int s = 1; s < sms; s += 2) odd.add(s);
  const SmSet context = b->green_contexts().cover(SmSet::range(0, sms / 3));
  struct Form {
    std::string name;
    Placement placement;
    SmSet ran_on;  // where every block must have run
  };
  std::vector<Form> forms(6);
  forms[0].name = "native, whole GPU";
  forms[0].placement.sms = b->device().all_sms();
  forms[1].name = "native, green context";
  forms[1].placement.sms = context;
  forms[2].name = "persistent, odd SMs, TLP 1";
  forms[2].placement.sms = odd;
  forms[2].placement.form = LaunchForm::persistent;
  forms[2].placement.tlp = 1;
  forms[3].name = "persistent, every SM";
  forms[3].placement.sms = b->device().all_sms();
  forms[3].placement.form = LaunchForm::persistent;
  // The L2 persisting window (the backend's access-policy window over the kernel's buffers).
  forms[4] = forms[1];
  forms[4].name = "native, green context, L2 persisting";
  forms[4].placement.l2_persist = true;
  forms[5] = forms[3];
  forms[5].name = "persistent, every SM, L2 persisting";
  forms[5].placement.l2_persist = true;
  for (Form& f : forms) f.ran_on = f.placement.sms;

  std::vector<KernelSpec> kernels;
  for (const SuiteEntry& e : suite_catalog()) {
    if (e.elastic && testing::selected(e.name)) kernels.push_back(reference_kernel(e.name));
  }
  ASSERT_FALSE(kernels.empty());
  for (size_t i = 0; i < kernels.size(); ++i) ASSERT_OK(b->prepare_tenant(TenantId{static_cast<int64_t>(i)}, {&kernels[i]}));
  ASSERT_OK(b->start_clock());
  int64_t next_id = 0;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const KernelSpec& spec = kernels[i];
    auto k = b->prepared_kernel(spec);
    ASSERT_TRUE(k.is_ok()) << k.status().to_string();
    const Capabilities caps = b->capabilities(spec);
    for (Form f : forms) {
      SCOPED_TRACE(spec.name + ", " + f.name);
      if (f.placement.form == LaunchForm::persistent && caps.l1_bypass && caps.l2_evict_first && f.placement.tlp == 0 &&
          !f.placement.l2_persist) {
        f.placement.cache = CachePolicy::both;
      }
      ASSERT_OK(reset_kernel(**k));
      const DispatchRequest r = one_part(DispatchId{next_id++}, TenantId{static_cast<int64_t>(i)}, spec, whole_grid(spec), f.placement);
      ASSERT_OK(b->dispatch(r));
      auto done = drain(*b);
      ASSERT_TRUE(done.is_ok()) << done.status().to_string();
      ASSERT_EQ(done->size(), 1u);
      EXPECT_TRUE(done->front().error.is_ok()) << done->front().error.to_string();
      EXPECT_FALSE(done->front().preempted);
      EXPECT_EQ(done->front().blocks_done[0], r.parts[0].range.size());
      EXPECT_EQ(output_mismatch(**k, tolerance_of(spec.name)), "");
      EXPECT_EQ(audit_mismatch(**k, once(spec), [&](int64_t) { return &f.ran_on; }), "");
    }
  }
}

// A long persistent launch on 4 SMs at one block per SM, preempted once it has finished a logical
// block, then its unfinished suffix dispatched on every SM, as the engine gives it back: the two
// dispatches together run every block once, the first only on its 4 SMs, and the output matches.
TEST(BackendOutputs, PreemptedThenResumedRunsEveryBlockOnce) {
  auto b = make_backend();
  ASSERT_TRUE(b);
  const KernelSpec spec = reference_kernel("fma_loop", 1 << 24);  // tens of ms on 4 SMs at TLP 1
  ASSERT_OK(b->prepare_tenant(TenantId{0}, {&spec}));
  ASSERT_OK(b->start_clock());
  auto k = b->prepared_kernel(spec);
  ASSERT_TRUE(k.is_ok());
  ASSERT_OK(reset_kernel(**k));
  Placement few;
  few.sms = SmSet::range(0, 4);
  few.form = LaunchForm::persistent;
  few.tlp = 1;
  const BlockRange grid = whole_grid(spec);
  ASSERT_OK(b->dispatch(one_part(DispatchId{0}, TenantId{0}, spec, grid, few)));
  std::vector<Completion> seen;
  ASSERT_TRUE(wait_for_progress(*b, DispatchId{0}, seen)) << "the launch never finished a logical block";
  ASSERT_OK(b->preempt(DispatchId{0}));
  auto first = drain(*b, seen);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  ASSERT_EQ(first->size(), 1u);
  ASSERT_TRUE(first->front().preempted);
  const int64_t done = first->front().blocks_done[0];
  ASSERT_GT(done, 0);
  ASSERT_LT(done, grid.size());
  Placement all;
  all.sms = b->device().all_sms();
  all.form = LaunchForm::persistent;
  ASSERT_OK(b->dispatch(one_part(DispatchId{1}, TenantId{0}, spec, {done, grid.end}, all)));
  auto second = drain(*b);
  ASSERT_TRUE(second.is_ok()) << second.status().to_string();
  ASSERT_EQ(second->size(), 1u);
  EXPECT_FALSE(second->front().preempted);
  EXPECT_EQ(second->front().blocks_done[0], grid.end - done);
  EXPECT_GE(second->front().start, first->front().end - 1e-6) << "the resumed launch started before the preempted one ended";
  EXPECT_EQ(output_mismatch(**k, tolerance_of("fma_loop")), "");
  EXPECT_EQ(audit_mismatch(**k, once(spec), [&](int64_t block) { return block < done ? &few.sms : &all.sms; }), "");
}

// A persistent launch grown, shrunk and moved, its TLP raised, then given every SM while it runs:
// it finishes without preemption, every block once, and its output matches.
TEST(BackendOutputs, ResizedAndRetunedLaunchRunsEveryBlockOnce) {
  auto b = make_backend();
  ASSERT_TRUE(b);
  const KernelSpec spec = reference_kernel("fma_loop", 1 << 26);  // tens of ms on 8 SMs at TLP 1
  ASSERT_OK(b->prepare_tenant(TenantId{0}, {&spec}));
  ASSERT_OK(b->start_clock());
  auto k = b->prepared_kernel(spec);
  ASSERT_TRUE(k.is_ok());
  ASSERT_OK(reset_kernel(**k));
  Placement p;
  p.sms = SmSet::range(0, 8);
  p.form = LaunchForm::persistent;
  p.tlp = 1;
  const DispatchId id{0};
  ASSERT_OK(b->dispatch(one_part(id, TenantId{0}, spec, whole_grid(spec), p)));
  // Each change once the launch has made progress since the one before.
  const std::vector<std::function<Status()>> changes = {
      [&] { return b->set_sm_set(id, SmSet::range(0, 32)); },  // grow: a second launch on the same control block
      [&] { return b->set_sm_set(id, SmSet::range(16, 8)); },  // shrink to SMs the grown launch holds
      [&] { return b->set_tlp(id, 0, SmSet(), 0); },           // raise the TLP: a third launch fills the new slots
      [&] { return b->set_sm_set(id, b->device().all_sms()); },  // finish on every SM
  };
  std::vector<Completion> seen;
  size_t applied = 0;
  for (const auto& change : changes) {
    auto progress = b->progress(id);
    ASSERT_TRUE(progress.is_ok()) << progress.status().to_string();
    if (!wait_for_progress(*b, id, seen, (*progress)[0])) break;  // it ended: nothing left to change
    ASSERT_OK(change());
    ++applied;
  }
  EXPECT_EQ(applied, changes.size()) << "the launch ended before every change was made: lengthen it";
  auto done = drain(*b, seen);
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  ASSERT_EQ(done->size(), 1u);
  EXPECT_FALSE(done->front().preempted);
  EXPECT_EQ(done->front().blocks_done[0], whole_grid(spec).size());
  EXPECT_EQ(output_mismatch(**k, tolerance_of("fma_loop")), "");
  EXPECT_EQ(audit_mismatch(**k, once(spec)), "");
}

// Fused dispatches of two bodies at 1:1 and 2:1, on every SM and on half of them: both outputs
// match their references, each part ran each of its blocks once, on the dispatch's SMs.
TEST(BackendOutputs, FusedPairMatchesBothReferencesAndRunsEachBlockOnce) {
  auto b = make_backend();
  ASSERT_TRUE(b);
  ASSERT_OK(kernels::FusionCompiler::shared().available());
  const KernelSpec a = reference_kernel("hotspot");
  const KernelSpec c = reference_kernel("stream_triad");
  ASSERT_OK(b->prepare_tenant(TenantId{0}, {&a}));
  ASSERT_OK(b->prepare_tenant(TenantId{1}, {&c}));
  ASSERT_OK(b->start_clock());
  auto ka = b->prepared_kernel(a);
  auto kc = b->prepared_kernel(c);
  ASSERT_TRUE(ka.is_ok() && kc.is_ok());
  int64_t next_id = 0;
  for (const SmSet& sms : {b->device().all_sms(), SmSet::range(0, b->device().sm_count / 2)}) {
    for (const auto& [pa, pc] : std::vector<std::pair<int, int>>{{1, 1}, {2, 1}}) {
      SCOPED_TRACE(std::to_string(sms.count()) + " SMs, " + std::to_string(pa) + ":" + std::to_string(pc));
      ASSERT_OK(reset_kernel(**ka));
      ASSERT_OK(reset_kernel(**kc));
      Placement p;
      p.sms = sms;
      p.form = LaunchForm::persistent;
      DispatchRequest r = one_part(DispatchId{next_id}, TenantId{0}, a, whole_grid(a), p);
      r.parts[0].parts_per_block = pa;
      r.parts.push_back(DispatchPart{LaunchId{next_id + 1}, TenantId{1}, &c, c.default_variant, whole_grid(c), pc});
      next_id += 2;
      ASSERT_OK(b->can_implement(r));
      ASSERT_OK(b->dispatch(r));
      auto done = drain(*b);
      ASSERT_TRUE(done.is_ok()) << done.status().to_string();
      ASSERT_EQ(done->size(), 1u);
      EXPECT_FALSE(done->front().preempted);
      EXPECT_EQ(done->front().blocks_done, (PartList<int64_t>{whole_grid(a).size(), whole_grid(c).size()}));
      EXPECT_EQ(output_mismatch(**ka, tolerance_of("hotspot")), "");
      EXPECT_EQ(output_mismatch(**kc, tolerance_of("stream_triad")), "");
      EXPECT_EQ(audit_mismatch(**ka, once(a), [&](int64_t) { return &sms; }), "");
      EXPECT_EQ(audit_mismatch(**kc, once(c), [&](int64_t) { return &sms; }), "");
    }
  }
}

// ---- Through the engine

// A workload whose every step is its own kernel instance, with what the checks need to find them.
struct CheckedWorkload {
  Workload workload;
  // The tenant and step of each step kernel, and the step a launch ran (by tenant and index
  // within its request).
  struct Step {
    size_t tenant, step;
  };
  std::vector<Step> steps;
  const KernelSpec& kernel(const Step& s) const { return workload.tenants[s.tenant].steps[s.step].kernel; }
  size_t step_of(const LaunchRecord& l) const {
    const TenantSpec& t = workload.tenants[static_cast<size_t>(l.tenant.value)];
    int64_t index = l.index;
    for (size_t s = 0; s < t.steps.size(); ++s) {
      if (index < t.steps[s].count) return s;
      index -= t.steps[s].count;
    }
    return t.steps.size();
  }
};

CheckedWorkload checked_workload(const std::vector<std::pair<std::string, std::vector<std::pair<KernelSpec, int>>>>& tenants,
                                 int requests) {
  CheckedWorkload c;
  c.workload.name = "gpu-outputs";
  for (const auto& [name, steps] : tenants) {
    TenantSpec t;
    t.name = name;
    t.requests = requests;
    for (const auto& [kernel, count] : steps) {
      c.steps.push_back({c.workload.tenants.size(), t.steps.size()});
      t.steps.push_back(KernelStep{kernel, count});
    }
    c.workload.tenants.push_back(std::move(t));
  }
  return c;
}

// Runs `w` under `policy` on a fresh backend with every step kernel poisoned and audited from the
// clock's start (after the backend prepared them and the policy's warm-up launches), then checks
// each step: output against the reference, and each logical block run once per launch of the step
// that covered it, on an SM of the dispatch that ran it (its last run, where dispatches were
// (its last run). `moved`: tenants whose launches change SMs while they run (not checked for SMs).
void run_and_check(const CheckedWorkload& w, Policy& policy, const std::vector<TenantId>& moved = {},
                   const std::function<void(const RunRecord&)>& more = nullptr) {
  auto b = make_backend();
  ASSERT_TRUE(b);
  EngineOptions o;
  o.before_clock = [&]() -> Status {
    for (const auto& s : w.steps) {
      auto k = b->prepared_kernel(w.kernel(s));
      if (!k) return k.status();
      CONCORD_RETURN_IF_ERROR(reset_kernel(**k));
    }
    return Status::ok();
  };
  auto run = run_workload(w.workload, *b, policy, o);
  ASSERT_TRUE(run.is_ok()) << policy.name() << ": " << run.status().to_string();
  // Per step: runs expected per block, and each block's SM set in its step's last launch.
  std::vector<std::vector<uint32_t>> expected(w.steps.size());
  std::vector<std::map<int64_t, const SmSet*>> last_set(w.steps.size());
  std::vector<int64_t> last_launch(w.steps.size(), -1);
  std::map<int64_t, std::vector<std::pair<const DispatchRecord*, size_t>>> dispatches_of;  // launch -> (dispatch, part)
  for (const DispatchRecord& d : run->dispatches) {
    for (size_t part = 0; part < d.launches.size(); ++part) dispatches_of[d.launches[part].value].push_back({&d, part});
  }
  std::vector<SmSet> covers;  // native partial sets as the green contexts run them
  covers.reserve(run->dispatches.size());
  std::map<const DispatchRecord*, const SmSet*> ran_on;
  for (const DispatchRecord& d : run->dispatches) {
    const bool native_part = d.placement.form == LaunchForm::native && d.placement.sms.count() < b->device().sm_count;
    covers.push_back(native_part ? b->green_contexts().cover(d.placement.sms) : d.placement.sms);
    ran_on[&d] = &covers.back();
  }
  for (const LaunchRecord& l : run->launches) {
    const size_t tenant = static_cast<size_t>(l.tenant.value);
    const size_t step_in_tenant = w.step_of(l);
    size_t step = w.steps.size();
    for (size_t s = 0; s < w.steps.size(); ++s) {
      if (w.steps[s].tenant == tenant && w.steps[s].step == step_in_tenant) step = s;
    }
    ASSERT_LT(step, w.steps.size()) << "launch " << l.id.value << " matches no step";
    auto& e = expected[step];
    if (e.size() < static_cast<size_t>(l.logical_blocks)) e.resize(static_cast<size_t>(l.logical_blocks), 0);
    for (int64_t blk = 0; blk < l.logical_blocks; ++blk) ++e[static_cast<size_t>(blk)];
    // Launches of one step are stream-ordered in their tenant: the latest launch ran last.
    if (l.id.value > last_launch[step]) {
      last_launch[step] = l.id.value;
      last_set[step].clear();
      if (std::find(moved.begin(), moved.end(), l.tenant) != moved.end()) continue;
      for (const auto& [d, part] : dispatches_of[l.id.value]) {
        for (int64_t blk = d->ranges[part].begin; blk < d->ranges[part].begin + d->blocks_done[part]; ++blk) {
          last_set[step][blk] = ran_on[d];
        }
      }
    }
  }
  for (size_t s = 0; s < w.steps.size(); ++s) {
    const KernelSpec& spec = w.kernel(w.steps[s]);
    SCOPED_TRACE(policy.name() + ": tenant '" + w.workload.tenants[w.steps[s].tenant].name + "' step " +
                 std::to_string(w.steps[s].step) + " (" + spec.name + ")");
    auto k = b->prepared_kernel(spec);
    ASSERT_TRUE(k.is_ok());
    EXPECT_EQ(output_mismatch(**k, tolerance_of(spec.name)), "");
    const auto& sets = last_set[s];
    EXPECT_EQ(audit_mismatch(**k, expected[s], [&](int64_t blk) -> const SmSet* {
                auto it = sets.find(blk);
                return it == sets.end() ? nullptr : it->second;
              }),
              "");
  }
  if (more) more(*run);
}

CheckedWorkload three_tenants() {
  return checked_workload({{"a", {{reference_kernel("stream_triad"), 1}, {reference_kernel("hotspot"), 1}}},
                           {"b", {{reference_kernel("matmul"), 2}}},
                           {"c", {{reference_kernel("fma_loop"), 1}, {reference_kernel("vector_add"), 1}}}},
                          2);
}

// Every registered policy with its defaults: whatever it decides (SM sets, green contexts, TLP
// caps, variants, streams queued ahead), every step's output matches and every block ran once per
// launch, on its dispatch's SMs.
TEST(EngineOutputs, EveryPolicyLeavesCorrectOutputsAndRunsEachBlockOncePerLaunch) {
  const CheckedWorkload w = three_tenants();
  for (const auto& entry : builtin_policies().list()) {
    SCOPED_TRACE(entry.name);
    auto p = builtin_policies().make(entry.name, {});
    ASSERT_TRUE(p.is_ok()) << p.status().to_string();
    run_and_check(w, **p);
  }
}

// Hand placements through `manual`: native launches on green contexts of chosen SMs, persistent
// launches on odd SMs at TLP 1 and with a cache policy, and a fused pair.
TEST(EngineOutputs, ManualPlacementsConfineEveryBlockToTheirSms) {
  const int sms = testing::sm_count();
  std::string odd;
  for (int s = 1; s < std::min(sms, 64); s += 2) odd += (odd.empty() ? "" : ",") + std::to_string(s);
  const std::string first_third = "0-" + std::to_string(sms / 3 - 1);
  const std::string last_third = std::to_string(2 * sms / 3) + "-" + std::to_string(sms - 1);
  const std::vector<PolicyParams> cases = {
      {{"sms.0", first_third}, {"sms.1", last_third}, {"sms.2", "0-" + std::to_string(sms - 1)}},
      {{"form", "persistent"}, {"sms.0", odd}, {"tlp.0", "1"}, {"sms.1", last_third}, {"cache.1", "l2-evict-first"}},
      {{"form", "persistent"}, {"fuse", "0+1"}, {"ratio", "2:1"}, {"sms.0", first_third}, {"sms.2", last_third}},
  };
  const CheckedWorkload w = checked_workload({{"a", {{reference_kernel("stream_triad"), 2}}},
                                              {"b", {{reference_kernel("hotspot"), 1}, {reference_kernel("srad"), 1}}},
                                              {"c", {{reference_kernel("sgemm"), 1}}}},
                                             2);
  for (const PolicyParams& params : cases) {
    std::string shown;
    for (const auto& [key, value] : params) shown += key + "=" + value + " ";
    SCOPED_TRACE(shown);
    auto p = builtin_policies().make("manual", params);
    ASSERT_TRUE(p.is_ok()) << p.status().to_string();
    run_and_check(w, **p, {}, [&](const RunRecord& run) {
      if (params.count("fuse") == 0) return;
      int fused = 0;
      for (const DispatchRecord& d : run.dispatches) fused += d.launches.size() == 2;
      EXPECT_GT(fused, 0) << "no launch ran fused";
    });
  }
}

// A policy that exercises the engine's run-time controls on the GPU: tenant 0's long launch starts
// on 4 SMs at TLP 1 and is preempted once it has made progress, its rest then dispatched on every
// SM; tenant 1's long launch starts on 4 other SMs at TLP 1, grows to 36 SMs, has its TLP raised
// and then runs to its end; tenants 2 and 3 start fused (1:1) beside them.
class ControlsPolicy final : public Policy {
 public:
  std::string name() const override { return "gpu-controls"; }
  Status on_ready(SchedContext& ctx, LaunchId) override { return step(ctx); }
  Status on_complete(SchedContext& ctx, const Completion& c) override {
    if (c.dispatch == first_long_) preempted_done_ = true;
    return step(ctx);
  }
  Status on_tick(SchedContext& ctx) override { return step(ctx); }

  DispatchId first_long_, grown_, fused_;
  LaunchId long_launch_, grown_launch_;
  bool preempted_ = false, preempted_done_ = false, grew_ = false, retuned_ = false;

 private:
  Status step(SchedContext& ctx) {
    const std::vector<ReadyLaunch> ready(ctx.ready().begin(), ctx.ready().end());
    auto waiting = [&](int64_t tenant) -> const ReadyLaunch* {
      for (const ReadyLaunch& r : ready) {
        if (r.tenant.value == tenant && !r.has_running_dispatch) return &r;
      }
      return nullptr;
    };
    Placement few;
    few.form = LaunchForm::persistent;
    few.tlp = 1;
    if (const ReadyLaunch* r = waiting(0); r && !first_long_.valid()) {
      few.sms = SmSet::range(0, 4);
      auto d = ctx.dispatch(r->id, few);
      if (!d) return d.status();
      first_long_ = *d;
      long_launch_ = r->id;
    } else if (r && preempted_done_) {
      // The unfinished suffix the engine gave back, on every SM.
      Placement all;
      all.sms = ctx.device().all_sms();
      all.form = LaunchForm::persistent;
      CONCORD_RETURN_IF_ERROR(ctx.dispatch(r->id, all).status());
    }
    if (const ReadyLaunch* r = waiting(1); r && !grown_.valid()) {
      few.sms = SmSet::range(4, 4);
      auto d = ctx.dispatch(r->id, few);
      if (!d) return d.status();
      grown_ = *d;
      grown_launch_ = r->id;
    }
    const ReadyLaunch* a = waiting(2);
    const ReadyLaunch* b = waiting(3);
    if (a && b && !fused_.valid()) {
      Placement p;
      p.sms = ctx.device().all_sms();
      p.form = LaunchForm::persistent;
      p.fusion = Fusion{b->id, {}, 1, 1};
      auto d = ctx.dispatch(a->id, p);
      if (!d) return d.status();
      fused_ = *d;
    }
    // Run-time controls once each launch has finished a logical block.
    auto progressed = [&](DispatchId id) {
      auto running = std::any_of(ctx.running().begin(), ctx.running().end(), [&](const RunningDispatch& d) { return d.id == id; });
      if (!running) return false;
      auto p = ctx.progress(id);
      return p.is_ok() && (*p)[0] > 0;
    };
    if (first_long_.valid() && !preempted_ && progressed(first_long_)) {
      CONCORD_RETURN_IF_ERROR(ctx.preempt(first_long_));
      preempted_ = true;
    }
    if (grown_.valid() && !grew_ && progressed(grown_)) {
      CONCORD_RETURN_IF_ERROR(ctx.resize(grown_, SmSet::range(4, 36)));
      grew_ = true;
    } else if (grew_ && !retuned_ && progressed(grown_)) {
      CONCORD_RETURN_IF_ERROR(ctx.set_tlp(grown_, 0));
      retuned_ = true;
    }
    if (!preempted_ || !grew_ || !retuned_) {
      if (++polls_ > 100000) return Status::internal("gpu-controls: the long launches never made progress");
      ctx.request_tick(ctx.now() + 0.0002);
    }
    return Status::ok();
  }
  int polls_ = 0;
};

TEST(EngineOutputs, PreemptResumeResizeTlpAndFusionKeepOutputsAndRunEachBlockOnce) {
  const CheckedWorkload w = checked_workload({{"long", {{reference_kernel("fma_loop", 1 << 24), 1}}},
                                              {"grown", {{reference_kernel("fma_loop", 1 << 24), 1}}},
                                              {"fused-a", {{reference_kernel("hotspot"), 1}}},
                                              {"fused-b", {{reference_kernel("stream_triad"), 1}}}},
                                             1);
  ControlsPolicy policy;
  // The grown launch's blocks may run on any SM it was given over time: not checked for SMs.
  run_and_check(w, policy, {TenantId{1}}, [&](const RunRecord& run) {
    EXPECT_TRUE(policy.preempted_);
    EXPECT_TRUE(policy.grew_);
    EXPECT_TRUE(policy.retuned_);
    std::vector<const DispatchRecord*> long_dispatches, grown, fused;
    for (const DispatchRecord& d : run.dispatches) {
      if (d.launches.size() == 2) fused.push_back(&d);
      else if (d.launches[0] == policy.long_launch_) long_dispatches.push_back(&d);
      else if (d.launches[0] == policy.grown_launch_) grown.push_back(&d);
    }
    // Preempted, then resumed exactly where it stopped, after it stopped.
    ASSERT_EQ(long_dispatches.size(), 2u);
    const DispatchRecord& first = *long_dispatches[0];
    const DispatchRecord& rest = *long_dispatches[1];
    EXPECT_TRUE(first.preempted);
    EXPECT_GT(first.blocks_done[0], 0);
    EXPECT_LT(first.blocks_done[0], first.ranges[0].size());
    EXPECT_EQ(rest.ranges[0].begin, first.ranges[0].begin + first.blocks_done[0]);
    EXPECT_EQ(rest.ranges[0].end, first.ranges[0].end);
    EXPECT_FALSE(rest.preempted);
    EXPECT_EQ(rest.blocks_done[0], rest.ranges[0].size());
    EXPECT_GE(rest.start, first.end - 1e-6) << "the rest started before the preempted dispatch ended";
    // Resized and retuned while it ran, never preempted.
    ASSERT_EQ(grown.size(), 1u);
    EXPECT_FALSE(grown[0]->preempted);
    EXPECT_EQ(grown[0]->blocks_done[0], grown[0]->ranges[0].size());
    ASSERT_EQ(fused.size(), 1u);
    EXPECT_EQ(fused[0]->blocks_done, (PartList<int64_t>{fused[0]->ranges[0].size(), fused[0]->ranges[1].size()}));
  });
}

}  // namespace
}  // namespace concord
