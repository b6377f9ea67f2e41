// LiveSource: the engine's tenants, requests and launches from live processes. Registrations
// (the control socket's registry) become tenants that join; launch notices from their rings become
// submitted launches of opaque kernels the source owns (one KernelSpec per tenant, kernel id and
// shape); a goodbye makes the tenant leave, and a process that died (or broke the protocol, or
// said goodbye with launches outstanding) is dropped, its unlaunched work with it.
//
// Requests: between an LC tenant's request begin and end boundaries, its launches are one request
// whose latency runs from the begin; every other launch (BE, or LC without boundaries) is a request
// of its own.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "concord/device.h"
#include "concord/tenant_source.h"
#include "daemon/tenant_hub.h"

namespace concord::daemon {

class LiveSource final : public TenantSource {
 public:
  // `poll`: how far ahead pump() says it next has something (the backend returns sooner when a
  // tenant posts anything).
  LiveSource(TenantHub& hub, DeviceSpec device, std::chrono::microseconds poll = std::chrono::milliseconds(5))
      : hub_(hub), device_(std::move(device)), poll_(poll) {}
  std::string name() const override { return "live"; }
  Status open(TenantSink& sink) override;
  Result<Seconds> pump(TenantSink& sink) override;
  bool exhausted() const override { return false; }

  // The opaque kernel of a notice (built on first sight). Its cost is unknown, so it gets a nominal
  // SM curve that only says how many SMs its grid covers in one wave (all of them for a graph):
  // time halves with twice the SMs up to that count and stays flat beyond it. The seconds are a
  // placeholder (kOpaqueNominalSeconds at that count); what policies take from it is the demand
  // (SGDRC's LC need, Orion's SM threshold), not the duration.
  //
  // A kernel is its function and shape, whoever launches it: tenants of one program share their
  // kernels, so a tenant that leaves and comes back (a service restarted, a job's next step) adds
  // nothing. What the daemon keeps grows only with the distinct shapes the node has seen, up to
  // kMaxKernelShapes; past it every new shape is one shared kernel that fills the GPU.
  const KernelSpec* kernel_for(const ipc::LaunchNotice& notice);
  static constexpr double kOpaqueNominalSeconds = 1e-4;
  static constexpr size_t kMaxKernelShapes = 1 << 16;

 private:
  // Why the device cannot run a noticed launch (empty: it can).
  std::string unrunnable(const ipc::LaunchNotice& notice) const;
  Status join_new(TenantSink& sink);
  // What the source keeps of a tenant it joined to the engine.
  struct Joined {
    bool left = false;          // leave() or drop() called
    int64_t open_request = -1;  // the engine's open request of this tenant (-1: none)
    bool in_boundary = false;   // between a request begin and its end
    std::chrono::steady_clock::time_point begin_at;
  };
  Status take_inbox(TenantSink& sink, TenantConn& conn, Joined& j);
  Status settle(TenantSink& sink, TenantConn& conn, Joined& j);

  TenantHub& hub_;
  DeviceSpec device_;
  std::chrono::microseconds poll_;
  using KernelKey = std::tuple<uint64_t, ipc::Dim3, ipc::Dim3, uint32_t, bool>;
  std::map<KernelKey, std::unique_ptr<KernelSpec>> kernels_;  // outlive every run they were in
  std::unique_ptr<KernelSpec> overflow_;
  std::map<uint64_t, Joined> joined_;  // by the hub's id
};

}  // namespace concord::daemon
