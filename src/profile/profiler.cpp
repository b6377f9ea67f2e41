#include "profile/profiler.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <unistd.h>
#include <sys/wait.h>

#include "backend/cuda/green_contexts.h"
#include "backend/cuda/handles.h"
#include "backend/cuda/timing.h"
#include "concord/device.h"
#include "concord/suite.h"
#include "kernels/device/device_kernel.h"
#include "profile/ncu.h"
#include "profile/ncu_marker.h"

namespace concord::profile {
namespace {

using Clock = std::chrono::steady_clock;

// The NVIDIA kernel driver's version from /proc, else the CUDA driver API version.
std::string driver_version() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (in && std::getline(in, line)) {
    std::istringstream words(line);
    std::string w;
    while (words >> w) {
      if (!w.empty() && std::isdigit(static_cast<unsigned char>(w[0])) && w.find('.') != std::string::npos) return w;
    }
  }
  int v = 0;
  cudaDriverGetVersion(&v);
  return "cuda-" + std::to_string(v);
}

struct Device {
  std::string name;
  std::string driver;
  DeviceSpec peaks;
  int sm_count = 0;
  std::unique_ptr<cuda::GreenContextPool> green;
  // The streaming kernel the cache policies are also timed beside (null: not measured), its
  // stream, TLP and the duration of one launch of it at that TLP on every SM.
  std::unique_ptr<kernels::DeviceKernel> pressure;
  cuda::Stream pressure_stream;
  int pressure_tlp = 1;
  int pressure_grid = 0;  // blocks a persistent launch of it starts (its occupancy x SMs)
  double pressure_seconds = 0;
  // The first k TPC groups in probe order: the SM set a k-group partition gives.
  SmSet first_groups(int sms) const {
    SmSet out;
    for (const SmSet& g : green->groups()) {
      if (out.count() >= sms) break;
      out = out | g;
    }
    return out;
  }
};

class KernelProfiler {
 public:
  KernelProfiler(Device& dev, kernels::DeviceKernel& k, int variant, const ProfileOptions& o)
      : dev_(dev), k_(k), v_(variant), o_(o) {}

  Result<KernelProfile> run() {
    const auto t0 = Clock::now();
    CONCORD_RETURN_IF_ERROR(stream_.create());
    const KernelSpec& spec = k_.spec();
    const KernelVariant& var = spec.variant(v_);
    KernelProfile p;
    p.key = {dev_.name, dev_.driver, spec.name, var.name, spec.size};
    p.elastic = spec.elastic;
    p.logical_blocks = var.logical_blocks;
    p.flops_per_block = var.flops_per_block;
    p.bytes_per_block = var.bytes_per_block;
    p.threads_per_block = var.threads_per_block;
    p.registers_per_thread = k_.registers_per_thread(v_);
    p.shared_bytes_per_block = k_.shared_bytes(v_);
    if (spec.elastic) {
      auto occ = k_.elastic_occupancy(v_);
      if (!occ) return occ.status();
      occupancy_ = *occ;
    }
    p.blocks_per_sm = occupancy_;
    // Duration against SM count, refined near the knee.
    const int step = 2;
    for (int sms : plan_sm_sweep(dev_.sm_count, step, o_.full)) {
      auto t = at_sms(sms);
      if (!t) return t.status();
      p.sm_curve.push_back({dev_.first_groups(sms).count(), *t});
    }
    for (int sms : refine_near_knee(p.sm_curve, step, 0.1, 3)) {
      auto t = at_sms(sms);
      if (!t) return t.status();
      p.sm_curve.push_back({dev_.first_groups(sms).count(), *t});
    }
    std::sort(p.sm_curve.begin(), p.sm_curve.end(), [](auto& a, auto& b) { return a.sms < b.sms; });
    p.sm_curve.erase(std::unique(p.sm_curve.begin(), p.sm_curve.end(), [](auto& a, auto& b) { return a.sms == b.sms; }),
                     p.sm_curve.end());
    const double all = p.all_sm_seconds();
    // Cache policies on every SM.
    for (CachePolicy c : kAllCachePolicies) {
      if (c == CachePolicy::normal) {
        p.cache_seconds[0] = all;
        continue;
      }
      if (!spec.elastic && bypasses_l1(c)) continue;  // not available for library kernels
      auto t = whole(c, occupancy_, {0, var.logical_blocks});
      if (!t) return t.status();
      p.cache_seconds[static_cast<size_t>(c)] = *t;
    }
    if (spec.elastic && dev_.pressure) {
      for (CachePolicy c : kAllCachePolicies) {
        auto t = under_pressure(c, p.cache_seconds[0]);
        if (!t) return t.status();
        p.cache_pressure_seconds[static_cast<size_t>(c)] = *t;
      }
    }
    if (spec.elastic) {
      for (int tlp = 1; tlp <= occupancy_; ++tlp) {
        auto t = whole(CachePolicy::normal, tlp, {0, var.logical_blocks});
        if (!t) return t.status();
        p.tlp_seconds.push_back(*t);
      }
      // Duration against logical blocks (Aker 6.3), on every SM.
      std::vector<double> x, y;
      for (double f : {0.125, 0.25, 0.5, 1.0}) {
        const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(f * static_cast<double>(var.logical_blocks)));
        auto t = whole(CachePolicy::normal, occupancy_, {0, n});
        if (!t) return t.status();
        x.push_back(static_cast<double>(n));
        y.push_back(*t);
      }
      auto fit = fit_linear(x, y);
      if (!fit) return fit.status();
      p.linear_intercept = fit->intercept;
      p.linear_slope = fit->slope;
      p.linear_fit_error = fit->mean_relative_error;
    }
    p.demand_sms = demand_sms(p.sm_curve);
    p.demand = static_cast<double>(p.demand_sms) / dev_.sm_count;
    const double peak = spec.unit == ComputeUnit::tensor ? dev_.peaks.tensor_flops : dev_.peaks.fp32_flops;
    p.compute_utilization = var.flops_per_block * static_cast<double>(var.logical_blocks) / all / peak;
    p.memory_utilization = var.bytes_per_block * static_cast<double>(var.logical_blocks) / all / dev_.peaks.dram_bytes_per_s;
    p.aker_class = aker_class(spec.unit, p.compute_utilization, p.memory_utilization);
    p.profile_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return p;
  }

 private:
  // Elastic kernels: exact SM sets by %smid; library kernels: the green context of the same SMs.
  Result<double> at_sms(int sms) {
    const SmSet set = dev_.first_groups(sms);
    if (k_.spec().elastic) return elastic(set, occupancy_, CachePolicy::normal, {0, k_.spec().variant(v_).logical_blocks});
    cudaStream_t s = stream_.get();
    if (set.count() < dev_.sm_count) {
      auto gs = dev_.green->stream_for(set, 1 << 20, 0);
      if (!gs) return gs.status();
      s = *gs;
    }
    const BlockRange all{0, k_.spec().variant(v_).logical_blocks};
    return cuda::time_median({s}, [] { return Status::ok(); },
                             [&] { return k_.launch_standalone(v_, all, CachePolicy::normal, s); }, o_.reps, 1);
  }

  Result<double> whole(CachePolicy c, int tlp, BlockRange range) {
    if (k_.spec().elastic) return elastic(SmSet::all(dev_.sm_count), tlp, c, range);
    return cuda::time_median({stream_.get()}, [] { return Status::ok(); },
                             [&] { return k_.launch_standalone(v_, range, c, stream_.get()); }, o_.reps, 1);
  }

  Result<double> elastic(const SmSet& set, int tlp, CachePolicy c, BlockRange range) {
    cuda::ElasticControls ctl;
    ctl.add(range, set, tlp);
    return cuda::time_median({stream_.get()}, [&] { return ctl.upload(); },
                             [&] { return k_.launch_elastic(v_, c, ctl.at(0), occupancy_ * dev_.sm_count, stream_.get()); },
                             o_.reps, 1);
  }

  // The kernel at half its occupancy on every SM, started right after the pressure kernel (half
  // of its occupancy on every SM, launched again as often as needed to last about three times the
  // kernel's alone time), timed from the pressure's start to the kernel's own end.
  Result<double> under_pressure(CachePolicy c, double alone_seconds) {
    kernels::DeviceKernel& pk = *dev_.pressure;
    const int pv = pk.spec().default_variant;
    const int64_t their_blocks = pk.spec().variant(pv).logical_blocks;
    const int64_t my_blocks = k_.spec().variant(v_).logical_blocks;
    const SmSet all = SmSet::all(dev_.sm_count);
    const int launches = std::clamp(static_cast<int>(std::ceil(3 * alone_seconds / dev_.pressure_seconds)), 1, 64);
    cuda::ElasticControls ctl;
    ctl.add({0, my_blocks}, all, std::max(1, occupancy_ / 2));
    for (int i = 0; i < launches; ++i) ctl.add({0, their_blocks}, all, dev_.pressure_tlp);
    cuda::Event start, end;
    CONCORD_RETURN_IF_ERROR(start.create());
    CONCORD_RETURN_IF_ERROR(end.create());
    cudaStream_t mine = stream_.get(), theirs = dev_.pressure_stream.get();
    std::vector<double> times;
    for (int r = 0; r < o_.reps + 1; ++r) {
      CONCORD_RETURN_IF_ERROR(ctl.upload());
      CONCORD_CUDA(cudaDeviceSynchronize());
      CONCORD_CUDA(cudaEventRecord(start.get(), theirs));
      for (int i = 0; i < launches; ++i) {
        CONCORD_RETURN_IF_ERROR(pk.launch_elastic(pv, CachePolicy::normal, ctl.at(static_cast<size_t>(1 + i)), dev_.pressure_grid, theirs));
      }
      CONCORD_CUDA(cudaStreamWaitEvent(mine, start.get(), 0));
      CONCORD_RETURN_IF_ERROR(k_.launch_elastic(v_, c, ctl.at(0), occupancy_ * dev_.sm_count, mine));
      CONCORD_CUDA(cudaEventRecord(end.get(), mine));
      CONCORD_CUDA(cudaDeviceSynchronize());
      float ms = 0;
      CONCORD_CUDA(cudaEventElapsedTime(&ms, start.get(), end.get()));
      if (r > 0) times.push_back(ms * 1e-3);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }

  Device& dev_;
  kernels::DeviceKernel& k_;
  int v_;
  const ProfileOptions& o_;
  int occupancy_ = 0;
  cuda::Stream stream_;
};

std::string format_seconds(double s) {
  std::ostringstream o;
  o.precision(1);
  o << std::fixed << (s >= 60 ? s / 60 : s) << (s >= 60 ? " min" : " s");
  return o.str();
}

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io_error(path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

Status run_ncu_worker(const std::string& jobs_file) {
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  auto text = read_text(jobs_file);
  if (!text) return text.status();
  auto jobs = ncu_jobs_from_text(*text, jobs_file);
  if (!jobs) return jobs.status();
  cuda::Stream stream;
  CONCORD_RETURN_IF_ERROR(stream.create());
  for (size_t i = 0; i < jobs->size(); ++i) {
    const NcuJob& job = (*jobs)[i];
    const std::string where = jobs_file + ": job " + std::to_string(i) + " (" + job.kernel + " " + job.variant + ")";
    auto spec = make_suite_kernel_with_variant(job.kernel, job.size, job.variant);
    if (!spec) return Status(spec.status().code(), where + ": " + spec.status().message());
    auto v = spec->find_variant(job.variant);
    if (!v) return Status::not_found(where + ": no such variant");
    CONCORD_CUDA(launch_ncu_marker(true, static_cast<int>(i), stream.get()));
    auto kernel = kernels::make_device_kernel(*spec);
    if (!kernel) return Status(kernel.status().code(), where + ": " + kernel.status().message());
    CONCORD_RETURN_IF_ERROR((*kernel)->prepare(7));
    const BlockRange all{0, spec->variant(*v).logical_blocks};
    // A library's first call sets itself up (handles, plans): warm it up outside the measurement.
    if (!spec->elastic) CONCORD_RETURN_IF_ERROR((*kernel)->launch_standalone(*v, all, CachePolicy::normal, stream.get()));
    CONCORD_CUDA(cudaStreamSynchronize(stream.get()));
    CONCORD_CUDA(cudaDeviceSynchronize());
    CONCORD_CUDA(launch_ncu_marker(false, static_cast<int>(i), stream.get()));
    CONCORD_RETURN_IF_ERROR((*kernel)->launch_standalone(*v, all, CachePolicy::normal, stream.get()));
    CONCORD_CUDA(cudaStreamSynchronize(stream.get()));
  }
  return Status::ok();
}

Result<int> profile_raise(ProfileStore& store, const std::vector<NcuJob>& jobs, const NcuOptions& options,
                          std::ostream& progress) {
  std::string gpu = options.gpu, driver = options.driver;
  if (gpu.empty() || driver.empty()) {
    cudaDeviceProp prop{};
    CONCORD_CUDA(cudaGetDeviceProperties(&prop, 0));
    if (gpu.empty()) gpu = prop.name;
    if (driver.empty()) driver = driver_version();
  }
  std::vector<std::string> csvs = options.from_csv;
  if (csvs.empty()) {
    if (options.passes < 1) return Status::invalid_argument("profile raise: passes must be >= 1");
    const std::string jobs_file = options.work_dir + "/ncu_jobs.txt";
    {
      std::ofstream out(jobs_file);
      out << ncu_jobs_to_text(jobs);
      if (!out) return Status::io_error(jobs_file + ": cannot write the job list");
    }
    std::string self = options.self;
    if (self.empty()) {
      char buf[4096];
      const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
      if (n <= 0) return Status::io_error("cannot find this program's path (/proc/self/exe)");
      self.assign(buf, static_cast<size_t>(n));
    }
    std::string metrics;
    for (const std::string& m : ncu_metric_names()) metrics += (metrics.empty() ? "" : ",") + m;
    for (int pass = 1; pass <= options.passes; ++pass) {
      const std::string csv = options.work_dir + "/ncu_raise" + (pass > 1 ? "-" + std::to_string(pass) : "") + ".csv";
      // --clock-control none: the clocks stay as they are (the machine's rules); --page raw: one
      // CSV row per launch; --print-units base: durations in ns whatever their size.
      const std::string cmd = shell_quote(options.ncu) + " --clock-control none --target-processes all --csv --page raw" +
                              " --print-units base --metrics " + metrics + " --log-file " + shell_quote(csv) + " " +
                              shell_quote(self) + " profile raise-worker --jobs " + shell_quote(jobs_file);
      progress << "running (pass " << pass << " of " << options.passes << "): " << cmd << "\n";
      progress.flush();
      const auto t0 = Clock::now();
      const int rc = std::system(cmd.c_str());
      if (rc != 0) {
        return Status::internal("ncu exited with status " + std::to_string(WIFEXITED(rc) ? WEXITSTATUS(rc) : rc) +
                                " (see " + csv + "); is ncu on the PATH (--ncu) and are the GPU's counters readable?");
      }
      progress << "ncu profiled " << jobs.size() << " jobs in "
               << format_seconds(std::chrono::duration<double>(Clock::now() - t0).count()) << "\n";
      csvs.push_back(csv);
    }
  }
  std::vector<NcuPass> passes;
  for (const std::string& csv : csvs) {
    auto text = read_text(csv);
    if (!text) return text.status();
    auto launches = parse_ncu_csv(*text, csv);
    if (!launches) return launches.status();
    auto per_job = split_at_markers(*launches, jobs.size(), csv);
    if (!per_job) return per_job.status();
    passes.push_back(std::move(*per_job));
  }
  std::string source = csvs.front();  // errors name the CSVs the passes came from
  for (size_t i = 1; i < csvs.size(); ++i) source += ", " + csvs[i];
  return store_raise_results(store, gpu, driver, jobs, passes, source);
}

Result<ProfileReport> profile_kernels(ProfileStore& store, const ProfileOptions& options, std::ostream& progress) {
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  Device dev;
  cudaDeviceProp prop{};
  CONCORD_CUDA(cudaGetDeviceProperties(&prop, 0));
  dev.name = prop.name;
  dev.driver = driver_version();
  dev.sm_count = prop.multiProcessorCount;
  dev.peaks = dev.name.find("H200") != std::string::npos ? h200_spec() : h100_sxm_spec();
  auto green = cuda::GreenContextPool::create(0);
  if (!green) return green.status();
  dev.green = std::move(*green);

  // The streaming kernel for the cache policies' pressure timing (3.2 GB of arrays), made when
  // the first elastic kernel is measured (not when every kernel is already stored).
  auto make_pressure = [&]() -> Status {
    auto spec = make_suite_kernel("stream_triad", int64_t{1} << 28);
    if (!spec) return spec.status();
    auto k = kernels::make_device_kernel(*spec);
    if (!k) return k.status();
    CONCORD_RETURN_IF_ERROR((*k)->prepare(11));
    auto occ = (*k)->elastic_occupancy(spec->default_variant);
    if (!occ) return occ.status();
    dev.pressure_tlp = std::max(1, *occ / 2);
    dev.pressure_grid = *occ * dev.sm_count;
    CONCORD_RETURN_IF_ERROR(dev.pressure_stream.create());
    cuda::ElasticControls ctl;
    ctl.add({0, spec->variant(spec->default_variant).logical_blocks}, SmSet::all(dev.sm_count), dev.pressure_tlp);
    kernels::DeviceKernel* raw = k->get();
    auto t = cuda::time_median({dev.pressure_stream.get()}, [&] { return ctl.upload(); },
                               [&] {
                                 return raw->launch_elastic(spec->default_variant, CachePolicy::normal, ctl.at(0),
                                                            dev.pressure_grid, dev.pressure_stream.get());
                               },
                               3, 1);
    if (!t) return t.status();
    dev.pressure_seconds = *t;
    dev.pressure = std::move(*k);
    return Status::ok();
  };

  // What to measure, in suite order.
  struct Job {
    KernelSpec spec;
    int variant;
  };
  std::vector<Job> jobs;
  for (const KernelSpec& spec : options.specs) {
    for (int v = 0; v < spec.variant_count(); ++v) {
      if (options.all_variants || v == spec.default_variant) jobs.push_back({spec, v});
    }
  }
  for (const SuiteEntry& e : suite_catalog()) {
    if (!options.specs.empty()) break;
    if (!options.kernels.empty() && std::find(options.kernels.begin(), options.kernels.end(), e.name) == options.kernels.end()) {
      continue;
    }
    const auto size_it = options.sizes.find(e.name);
    auto spec = make_suite_kernel(e.name, size_it != options.sizes.end() ? size_it->second : e.default_size);
    if (!spec) return spec.status();
    for (int v = 0; v < spec->variant_count(); ++v) {
      if (options.all_variants || v == spec->default_variant) jobs.push_back({*spec, v});
    }
  }
  for (const std::string& k : options.kernels) {
    if (std::none_of(suite_catalog().begin(), suite_catalog().end(), [&](const SuiteEntry& e) { return e.name == k; })) {
      return Status::not_found("profile: unknown kernel '" + k + "'");
    }
  }

  ProfileReport report;
  const auto t0 = Clock::now();
  double measured_seconds = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& job = jobs[i];
    const ProfileKey key{dev.name, dev.driver, job.spec.name, job.spec.variant(job.variant).name, job.spec.size};
    auto have = store.get(key);
    if (!have) return have.status();
    if (have->has_value()) {
      ++report.skipped;
      continue;
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    if (options.max_minutes > 0 && elapsed > options.max_minutes * 60) {
      report.left = static_cast<int>(jobs.size() - i);
      progress << "time budget of " << options.max_minutes << " min reached; " << report.left
               << " left (run again to resume)\n";
      break;
    }
    // Progress bar with an ETA from the mean time of the kernels measured so far.
    const int done = report.measured + report.skipped;
    const int width = 30;
    const int filled = static_cast<int>(width * static_cast<double>(i) / static_cast<double>(jobs.size()));
    const double eta = report.measured > 0 ? measured_seconds / report.measured * static_cast<double>(jobs.size() - i) : 0;
    progress << "[" << std::string(static_cast<size_t>(filled), '#') << std::string(static_cast<size_t>(width - filled), '.')
             << "] " << done << "/" << jobs.size() << " " << key.kernel << " (" << key.variant << ", size " << key.size
             << ")  elapsed " << format_seconds(elapsed) << (report.measured > 0 ? ", ETA " + format_seconds(eta) : "") << "\n";
    progress.flush();
    if (options.pressure && job.spec.elastic && !dev.pressure) CONCORD_RETURN_IF_ERROR(make_pressure());
    auto kernel = kernels::make_device_kernel(job.spec);
    if (!kernel) return kernel.status();
    CONCORD_RETURN_IF_ERROR((*kernel)->prepare(7));
    CONCORD_CUDA(cudaDeviceSynchronize());
    KernelProfiler profiler(dev, **kernel, job.variant, options);
    auto p = profiler.run();
    if (!p) return Status(p.status().code(), key.to_string() + ": " + p.status().message());
    CONCORD_RETURN_IF_ERROR(store.put(*p));
    measured_seconds += p->profile_seconds;
    ++report.measured;
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (report.measured > 0) CONCORD_RETURN_IF_ERROR(store.record_session(dev.name, dev.driver, report.seconds, report.measured));
  progress << "profiled " << report.measured << ", skipped " << report.skipped << " already stored, " << report.left
           << " left, in " << format_seconds(report.seconds) << "\n";
  return report;
}

}  // namespace concord::profile
