#include "model.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <new>

namespace standin {
namespace {

uint64_t env_u64(const char* name, uint64_t fallback, uint64_t lo, uint64_t hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (end == v || *end != '\0' || n < lo || n > hi) {
    std::fprintf(stderr, "concord-standin: %s='%s': must be an integer in [%llu, %llu]; using %llu\n", name, v,
                 static_cast<unsigned long long>(lo), static_cast<unsigned long long>(hi),
                 static_cast<unsigned long long>(fallback));
    return fallback;
  }
  return n;
}

Driver* make_driver() {
  auto* d = new Driver();  // never freed: see model.h
  const int devices = static_cast<int>(env_u64("CONCORD_STANDIN_DEVICES", 1, 1, 8));
  const int sms = static_cast<int>(env_u64("CONCORD_STANDIN_SMS", 132, 2, kMaxSms));
  const uint64_t memory_mb = env_u64("CONCORD_STANDIN_MEMORY_MB", 81559, 1, 1u << 24);
  for (int i = 0; i < devices; ++i) {
    auto dev = std::make_unique<Device>();
    dev->ordinal = i;
    dev->name = "Concord stand-in GPU (H100-like)";
    char bus[32];
    std::snprintf(bus, sizeof bus, "0000:%02X:00.0", 0x19 + 0x10 * i);
    dev->bus_id = bus;
    dev->sms = sms;
    dev->memory = static_cast<size_t>(memory_mb) << 20;
    dev->threads_used.assign(static_cast<size_t>(sms), 0);
    dev->blocks_used.assign(static_cast<size_t>(sms), 0);
    dev->regs_used.assign(static_cast<size_t>(sms), 0);
    dev->smem_used.assign(static_cast<size_t>(sms), 0);
    d->devices.push_back(std::move(dev));
  }
  if (const char* path = std::getenv("CONCORD_STANDIN_RECORD"); path && *path) {
    d->record_fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (d->record_fd < 0) std::fprintf(stderr, "concord-standin: cannot open the record %s\n", path);
  }
  if (const char* t = std::getenv("CONCORD_STANDIN_THROW"); t && *t) {
    std::string spec = t;
    if (const size_t colon = spec.find(":after="); colon != std::string::npos) {
      d->throw_after = std::strtoull(spec.c_str() + colon + 7, nullptr, 10);
      spec.resize(colon);
    }
    d->throw_in = spec;
  }
  return d;
}

thread_local std::vector<Context*> t_stack;
thread_local CUstreamCaptureMode t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

// --- the scheduler ---------------------------------------------------------------------------

int round_up(int v, int unit) { return (v + unit - 1) / unit * unit; }

struct BlockNeeds {
  int threads = 0, regs = 0, smem = 0;
};
BlockNeeds needs_of(const Device& d, const KernelSpec& k, int threads, int dynamic_smem) {
  BlockNeeds n;
  const int warps = (threads + 31) / 32;
  n.threads = warps * 32;
  n.regs = round_up(k.regs * 32, 256) * warps;  // registers are allocated per warp, 256 at a time
  n.smem = round_up(k.static_smem + dynamic_smem, 128) + d.reserved_smem_per_block;
  return n;
}

bool fits(const Device& d, int sm, const BlockNeeds& n) {
  const auto i = static_cast<size_t>(sm);
  return d.blocks_used[i] + 1 <= d.blocks_per_sm && d.threads_used[i] + n.threads <= d.threads_per_sm &&
         d.regs_used[i] + n.regs <= d.regs_per_sm && d.smem_used[i] + n.smem <= d.smem_per_sm;
}

void take(Device& d, int sm, const BlockNeeds& n, int sign) {
  const auto i = static_cast<size_t>(sm);
  d.blocks_used[i] += sign;
  d.threads_used[i] += sign * n.threads;
  d.regs_used[i] += sign * n.regs;
  d.smem_used[i] += sign * n.smem;
}

BlockNeeds needs_of(const Device& d, const Run& r) {
  return needs_of(d, *r.spec, static_cast<int>(r.block.count()), static_cast<int>(r.dynamic_smem));
}

std::string sm_list(const SmMask& m) {
  std::string out;
  for (int i = 0; i < kMaxSms; ++i) {
    if (m.test(static_cast<size_t>(i))) out += (out.empty() ? "" : ",") + std::to_string(i);
  }
  return out;
}

void record_kernel(const Run& r) {
  const Stream& s = *r.stream;
  std::string line = "{\"record\":\"kernel\",\"pid\":" + std::to_string(::getpid()) + ",\"seq\":" + std::to_string(r.seq) +
                     ",\"kernel\":\"" + json_escape(r.spec->name) + "\",\"handle\":\"" + r.handle + "\",\"api\":\"" + r.api +
                     "\",\"device\":" + std::to_string(r.ctx->device->ordinal) + ",\"context\":" + std::to_string(r.ctx->id) +
                     ",\"green\":" + (r.ctx->green ? "true" : "false") + ",\"context_sms\":" + std::to_string(r.ctx->sms.count()) +
                     ",\"stream\":" + std::to_string(s.id) + ",\"legacy\":" + (s.legacy ? "true" : "false") +
                     ",\"per_thread\":" + (s.per_thread ? "true" : "false") + ",\"stream_priority\":" + std::to_string(s.priority) +
                     ",\"priority\":" + std::to_string(r.priority) +
                     ",\"priority_attribute\":" + (r.priority_attribute ? "true" : "false") +
                     ",\"cooperative\":" + (r.cooperative ? "true" : "false") + ",\"grid\":[" + std::to_string(r.grid.x) + "," +
                     std::to_string(r.grid.y) + "," + std::to_string(r.grid.z) + "],\"block\":[" + std::to_string(r.block.x) + "," +
                     std::to_string(r.block.y) + "," + std::to_string(r.block.z) +
                     "],\"dynamic_smem\":" + std::to_string(r.dynamic_smem) + ",\"blocks_per_sm_limit\":" +
                     std::to_string(r.limit_per_sm) + ",\"peak_blocks_per_sm\":" + std::to_string(r.peak_per_sm) +
                     ",\"sms_used\":[" + sm_list(r.used) + "],\"tag\":" + std::to_string(r.spec->tag ? r.spec->tag(BlockCtx{r, {}, 0, 0, 0}) : 0) +
                     ",\"graph\":" + std::to_string(r.graph) + ",\"graph_launch\":" + std::to_string(r.graph_launch) +
                     ",\"queued_ns\":" + std::to_string(r.queued_ns) + ",\"ready_ns\":" + std::to_string(r.ready_ns) +
                     ",\"start_ns\":" + std::to_string(r.start_ns) + ",\"end_ns\":" + std::to_string(r.end_ns) + "}";
  record_line(line);
}

void release_stream_if_drained(Stream* s) {
  if (!s->destroyed || !s->ops.empty()) return;
  Device& d = *s->ctx->device;
  std::erase(d.streams, s);
  driver().free_streams.push_back(s);
}

void event_released(Event* e) {
  // A destroyed event's handle goes back for reuse once no queued operation names it.
  if (--e->pending == 0 && e->destroyed) driver().free_events.push_back(e);
}

void finish_head(Stream* s) {
  Op& op = s->ops.front();
  if (op.event) event_released(op.event);
  s->ops.pop_front();
  s->head_started = false;
  ++s->completed;
  release_stream_if_drained(s);
}

bool retire_blocks(Device& d, uint64_t now) {
  bool changed = false;
  while (!d.running.empty() && d.running.top().at <= now) {
    Device::BlockEnd e = d.running.top();
    d.running.pop();
    take(d, e.sm, needs_of(d, *e.run), -1);
    Run& r = *e.run;
    --r.resident[static_cast<size_t>(e.sm)];
    if (++r.done == r.grid.count()) {
      r.end_ns = now;
      record_kernel(r);
      finish_head(r.stream);
    }
    changed = true;
  }
  return changed;
}

// Whether the head of `s` may start by the legacy stream's rule: a legacy-stream operation waits
// for what blocking streams of its context queued before it, and theirs for the legacy stream's.
bool legacy_order_allows(const Stream* s, uint64_t seq) {
  const Context* c = s->ctx;
  if (s->legacy) {
    for (const Stream* t : c->device->streams) {
      if (t != s && t->ctx == c && t->blocking() && !t->ops.empty() && t->ops.front().seq < seq) return false;
    }
    return true;
  }
  if (s->blocking() && c->legacy && !c->legacy->ops.empty() && c->legacy->ops.front().seq < seq) return false;
  return true;
}

void run_memory_op(const Op& op) {
  Driver& dr = driver();
  switch (op.type) {
    case Op::Type::copy:
      std::memmove(op.dst, op.src, op.bytes);
      break;
    case Op::Type::set: {
      auto* p = static_cast<uint8_t*>(op.dst);
      for (size_t i = 0; i < op.bytes; ++i) {
        std::memcpy(p + i * static_cast<size_t>(op.width), &op.value, static_cast<size_t>(op.width));
      }
      break;
    }
    case Op::Type::free_memory: {
      auto it = dr.allocations.find(reinterpret_cast<uintptr_t>(op.dst));
      if (it != dr.allocations.end()) {
        it->second.device->used_memory -= it->second.bytes;
        std::free(op.dst);
        dr.allocations.erase(it);
      }
      break;
    }
    default:
      break;
  }
}

bool advance_streams(Device& d, uint64_t now) {
  bool changed = false;
  for (bool progress = true; progress;) {
    progress = false;
    // A copy: finishing a head may release the stream (and erase it from the list).
    const std::vector<Stream*> streams = d.streams;
    for (Stream* s : streams) {
      while (!s->ops.empty() && !s->head_started) {
        Op& op = s->ops.front();
        if (!legacy_order_allows(s, op.seq)) break;
        if (op.type == Op::Type::kernel) {
          op.run->ready_ns = now;
          d.ready.push_back(op.run);
          s->head_started = true;
          progress = true;
          break;
        }
        if (op.type == Op::Type::wait && op.event->reached < op.generation) break;
        if (op.type == Op::Type::record) {
          op.event->reached = std::max(op.event->reached, op.generation);
          op.event->reached_ns = now;
        }
        run_memory_op(op);
        finish_head(s);  // a destroyed stream drained here goes to the free list (its memory stays)
        progress = changed = true;
      }
    }
  }
  return changed;
}

bool place_blocks(Device& d, uint64_t now) {
  if (d.ready.empty()) return false;
  std::stable_sort(d.ready.begin(), d.ready.end(), [](const RunPtr& a, const RunPtr& b) {
    if (a->priority != b->priority) return a->priority < b->priority;  // a lower number is a higher priority
    if (a->ready_ns != b->ready_ns) return a->ready_ns < b->ready_ns;
    return a->seq < b->seq;
  });
  bool changed = false;
  for (const RunPtr& rp : d.ready) {
    Run& r = *rp;
    const BlockNeeds n = needs_of(d, r);
    const uint64_t total = r.grid.count();
    if (r.cooperative && r.placed == 0) {
      // Every block resident at once, or none yet.
      uint64_t room = 0;
      for (int sm = 0; sm < d.sms; ++sm) {
        if (!r.ctx->sms.test(static_cast<size_t>(sm))) continue;
        int k = 0;
        while (d.blocks_used[static_cast<size_t>(sm)] + k + 1 <= d.blocks_per_sm &&
               d.threads_used[static_cast<size_t>(sm)] + (k + 1) * n.threads <= d.threads_per_sm &&
               d.regs_used[static_cast<size_t>(sm)] + (k + 1) * n.regs <= d.regs_per_sm &&
               d.smem_used[static_cast<size_t>(sm)] + (k + 1) * n.smem <= d.smem_per_sm) {
          ++k;
        }
        room += static_cast<uint64_t>(k);
      }
      if (room < total) continue;
    }
    uint64_t block_ns = 0;
    for (bool placed_one = true; placed_one && r.placed < total;) {
      placed_one = false;
      for (int step = 0; step < d.sms && r.placed < total; ++step) {
        const int sm = (d.cursor + step) % d.sms;
        if (!r.ctx->sms.test(static_cast<size_t>(sm)) || !fits(d, sm, n)) continue;
        take(d, sm, n, +1);
        const uint64_t linear = r.placed++;
        const int on_sm = ++r.resident[static_cast<size_t>(sm)];
        r.peak_per_sm = std::max(r.peak_per_sm, on_sm);
        r.used.set(static_cast<size_t>(sm));
        const Dim3 idx{static_cast<unsigned>(linear % r.grid.x), static_cast<unsigned>((linear / r.grid.x) % r.grid.y),
                       static_cast<unsigned>(linear / (uint64_t{r.grid.x} * r.grid.y))};
        const BlockCtx ctx{r, idx, linear, sm, on_sm};
        if (r.start_ns == 0) {
          r.start_ns = now;
          block_ns = r.spec->block_ns ? r.spec->block_ns(ctx) : 0;
        } else if (block_ns == 0 && r.spec->block_ns) {
          block_ns = r.spec->block_ns(ctx);
        }
        if (r.spec->body) r.spec->body(ctx);
        d.running.push(Device::BlockEnd{now + block_ns, rp, sm});
        placed_one = changed = true;
      }
    }
    d.cursor = (d.cursor + 1) % d.sms;
  }
  std::erase_if(d.ready, [](const RunPtr& r) { return r->placed == r->grid.count(); });
  return changed;
}

void scheduler_loop(Device* dp) {
  Device& d = *dp;
  Driver& dr = driver();
  std::unique_lock<std::mutex> lock(dr.mu);
  for (;;) {
    const uint64_t now = now_ns();
    bool changed = retire_blocks(d, now);
    changed |= advance_streams(d, now);
    changed |= place_blocks(d, now);
    if (changed) dr.host.notify_all();
    if (!d.running.empty() && d.running.top().at <= now_ns()) continue;
    if (changed) continue;  // a placement may have made a stream's next operation ready
    if (d.running.empty()) {
      d.wake.wait(lock);
    } else {
      d.wake.wait_until(lock, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(d.running.top().at)));
    }
  }
}

}  // namespace

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Driver& driver() {
  static Driver* d = make_driver();
  return *d;
}

void adopt(Object* o) {
  Driver& d = driver();
  o->id = d.next_id++;
  d.live.insert(o);
}

void retire(Object* o) { driver().live.erase(o); }

std::vector<Context*>& context_stack() { return t_stack; }
Context* current() { return t_stack.empty() ? nullptr : t_stack.back(); }
void set_current(Context* c) {
  if (t_stack.empty()) {
    if (c) t_stack.push_back(c);
  } else if (c) {
    t_stack.back() = c;
  } else {
    t_stack.pop_back();
  }
}

CUstreamCaptureMode& thread_capture_mode() { return t_capture_mode; }

Stream* new_stream(Context* ctx, unsigned flags, int priority) {
  Driver& d = driver();
  Stream* s = nullptr;
  if (!d.free_streams.empty()) {
    s = d.free_streams.back();
    d.free_streams.pop_back();
    *s = Stream();
  } else {
    s = new Stream();
  }
  s->ctx = ctx;
  s->flags = flags;
  s->priority = priority;
  adopt(s);
  ctx->device->streams.push_back(s);
  return s;
}

Stream* resolve_stream(CUstream handle, bool per_thread_null) {
  if (handle == nullptr && per_thread_null) handle = CU_STREAM_PER_THREAD;
  if (handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) {
    Context* c = current();
    if (!c) return nullptr;
    if (handle == CU_STREAM_PER_THREAD) {
      Stream*& s = c->per_thread[std::this_thread::get_id()];
      if (!s) {
        s = new_stream(c, 0, 0);
        s->per_thread = true;
      }
      return s;
    }
    return c->legacy;
  }
  return as<Stream>(handle, Kind::stream);
}

void destroy_stream(Stream* s) {
  retire(s);
  s->destroyed = true;
  release_stream_if_drained(s);
}

CUresult enqueue(Stream* s, Op op) {
  Driver& d = driver();
  if (s->capture) {
    Capture& c = *s->capture;
    if (c.invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    GraphNode n;
    n.type = op.type;
    n.run = op.run;
    n.event = op.event;
    n.dst = op.dst;
    n.src = op.src;
    n.bytes = op.bytes;
    n.value = op.value;
    n.width = op.width;
    if (op.type == Op::Type::wait) {
      if (!op.event->captured) {
        c.invalidated = true;
        return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
      }
      return CUDA_SUCCESS;  // a capture is one chain here: what it waits for is already before it
    }
    if (op.type == Op::Type::record) op.event->captured = true;
    c.graph->nodes.push_back(std::move(n));
    return CUDA_SUCCESS;
  }
  if (op.type == Op::Type::record) op.event->captured = false;
  if (s->legacy) {
    // The legacy stream joins every blocking stream's work: while one of them captures (in a mode
    // that is not relaxed) that would join the capture.
    for (Stream* t : s->ctx->device->streams) {
      if (t->ctx == s->ctx && t->blocking() && t->capture && t->capture->mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
        t->capture->invalidated = true;
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
      }
    }
  }
  op.seq = d.next_seq++;
  if (op.event) ++op.event->pending;
  s->ops.push_back(std::move(op));
  ++s->enqueued;
  s->ctx->device->wake.notify_one();
  return CUDA_SUCCESS;
}

void wait_stream(std::unique_lock<std::mutex>& lock, Stream* s) {
  const uint64_t target = s->enqueued;
  driver().host.wait(lock, [&] { return s->completed >= target; });
}

void wait_context(std::unique_lock<std::mutex>& lock, Context* c) {
  std::vector<std::pair<Stream*, uint64_t>> targets;
  for (Stream* s : c->device->streams) {
    if (s->ctx == c) targets.emplace_back(s, s->enqueued);
  }
  driver().host.wait(lock, [&] {
    return std::all_of(targets.begin(), targets.end(), [](const auto& t) { return t.first->completed >= t.second; });
  });
}

int blocks_that_fit(const Device& d, const KernelSpec& k, int threads, int dynamic_smem) {
  if (threads <= 0) return 0;
  const BlockNeeds n = needs_of(d, k, threads, dynamic_smem);
  int blocks = d.blocks_per_sm;
  blocks = std::min(blocks, d.threads_per_sm / n.threads);
  if (n.regs > 0) blocks = std::min(blocks, d.regs_per_sm / n.regs);
  blocks = std::min(blocks, d.smem_per_sm / n.smem);
  return std::max(blocks, 0);
}

bool unsafe_forbidden() {
  Driver& d = driver();
  if (t_capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return false;
  bool forbidden = false;
  const auto me = std::this_thread::get_id();
  for (auto& dev : d.devices) {
    for (Stream* s : dev->streams) {
      if (!s->capture || s->capture->invalidated) continue;
      const Capture& c = *s->capture;
      const bool applies = c.mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
                           (c.mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && c.thread == me);
      if (applies) {
        s->capture->invalidated = true;
        forbidden = true;
      }
    }
  }
  return forbidden;
}

void start_device(Device& d) {
  if (d.scheduler.joinable()) return;
  d.scheduler = std::thread(scheduler_loop, &d);
  d.scheduler.detach();
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

void record_line(const std::string& json) {
  const int fd = driver().record_fd;
  if (fd < 0) return;
  const std::string line = json + "\n";
  // One write per line (O_APPEND): lines of several threads and processes never interleave.
  (void)!::write(fd, line.data(), line.size());
}

void record_error(const char* call, CUresult r, const std::string& detail) {
  record_line("{\"record\":\"error\",\"pid\":" + std::to_string(::getpid()) + ",\"call\":\"" + call +
              "\",\"result\":" + std::to_string(static_cast<int>(r)) + ",\"detail\":\"" + json_escape(detail) + "\",\"at_ns\":" +
              std::to_string(now_ns()) + "}");
}

void maybe_throw(const char* call) {
  Driver& d = driver();
  if (d.throw_in.empty() || d.throw_in != call) return;
  uint64_t n = 0;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    n = ++d.throw_calls;
  }
  if (n > d.throw_after) throw std::bad_alloc();
}

}  // namespace standin
