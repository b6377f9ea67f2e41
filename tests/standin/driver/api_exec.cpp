// The stand-in's entry points for modules and libraries of its kernels, function attributes,
// streams, events, kernel launches, stream capture and graphs.
#include <algorithm>
#include <cstring>
#include <optional>
#include <thread>

#include "api.h"

namespace standin {
namespace {

// The catalogue's kernels an image names: every ".entry NAME" (a PTX image, as the interception
// library loads its probe), or "standin:NAME,NAME" (the test programs' stand-in images).
std::set<std::string> entries_of(const void* image, CUresult* r) {
  std::set<std::string> out;
  *r = CUDA_SUCCESS;
  if (!image) {
    *r = CUDA_ERROR_INVALID_VALUE;
    return out;
  }
  const std::string text(static_cast<const char*>(image), strnlen(static_cast<const char*>(image), 1 << 20));
  auto add = [&](const std::string& name) {
    if (find_kernel(name)) out.insert(name);
  };
  if (text.rfind("standin:", 0) == 0) {
    size_t at = 8;
    while (at <= text.size()) {
      const size_t comma = text.find(',', at);
      add(text.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  } else {
    for (size_t at = text.find(".entry "); at != std::string::npos; at = text.find(".entry ", at + 7)) {
      size_t b = at + 7;
      while (b < text.size() && text[b] == ' ') ++b;
      size_t e = b;
      while (e < text.size() && (std::isalnum(static_cast<unsigned char>(text[e])) || text[e] == '_')) ++e;
      add(text.substr(b, e - b));
    }
  }
  if (out.empty()) *r = CUDA_ERROR_INVALID_IMAGE;
  return out;
}

int default_max_dynamic(const Device& d, const KernelSpec& k) { return d.smem_per_block - k.static_smem; }

int max_dynamic_of(const Function& f) {
  if (f.max_dynamic >= 0) return f.max_dynamic;
  const Device& d = *f.ctx->device;
  if (f.parent) {
    if (auto it = f.parent->max_dynamic.find(d.ordinal); it != f.parent->max_dynamic.end()) return it->second;
  }
  return default_max_dynamic(d, *f.spec);
}

Function* function_in(Kernel& k, Context* ctx) {
  Function*& f = k.functions[ctx];
  if (!f) {
    f = new Function();
    f->spec = k.spec;
    f->ctx = ctx;
    f->parent = &k;
    adopt(f);
  }
  return f;
}

CUresult function_attribute(const char* call, int* value, CUfunction_attribute attr, const KernelSpec& spec, int max_dynamic) {
  if (!value) return fail(call, CUDA_ERROR_INVALID_VALUE);
  switch (attr) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = spec.max_threads; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *value = spec.static_smem; break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *value = 0; break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *value = 0; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *value = spec.regs; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: *value = 90; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *value = 90; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *value = max_dynamic; break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *value = -1; break;
    default:
      return fail(call, CUDA_ERROR_INVALID_VALUE, "attribute " + std::to_string(static_cast<int>(attr)) + " is not modelled");
  }
  return CUDA_SUCCESS;
}

// The largest dynamic shared memory a function may be given: the opt-in limit less its static.
CUresult check_max_dynamic(const char* call, const Device& d, const KernelSpec& spec, int value) {
  if (value < 0 || value > d.smem_per_block_optin - spec.static_smem) {
    return fail(call, CUDA_ERROR_INVALID_VALUE,
                "maximum dynamic shared memory " + std::to_string(value) + " over the limit " +
                    std::to_string(d.smem_per_block_optin - spec.static_smem));
  }
  return CUDA_SUCCESS;
}

// One kernel launch, as every launch entry point makes it.
struct LaunchRequest {
  const char* api = "";
  CUfunction f = nullptr;
  Dim3 grid, block;
  unsigned shared = 0;
  CUstream stream = nullptr;
  bool per_thread = false;
  void** params = nullptr;
  void** extra = nullptr;
  std::optional<int> priority;
  bool cooperative = false;
};

// The parameters of a launch, copied (the program may reuse its own at once).
CUresult copy_params(const LaunchRequest& q, const KernelSpec& spec, Run& r) {
  r.params.resize(spec.params.size());
  if (q.params) {
    for (size_t i = 0; i < spec.params.size(); ++i) {
      if (!q.params[i]) return fail(q.api, CUDA_ERROR_INVALID_VALUE, "parameter " + std::to_string(i) + " is null");
      r.params[i].assign(static_cast<const uint8_t*>(q.params[i]), static_cast<const uint8_t*>(q.params[i]) + spec.params[i]);
    }
    return CUDA_SUCCESS;
  }
  if (q.extra) {
    // CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE: the parameters packed at their natural alignment.
    const uint8_t* buffer = nullptr;
    size_t size = 0;
    for (size_t i = 0; q.extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (q.extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = static_cast<const uint8_t*>(q.extra[i + 1]);
      if (q.extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *static_cast<const size_t*>(q.extra[i + 1]);
    }
    size_t at = 0;
    for (size_t i = 0; i < spec.params.size(); ++i) {
      const size_t n = spec.params[i];
      at = (at + n - 1) / n * n;
      if (!buffer || at + n > size) return fail(q.api, CUDA_ERROR_INVALID_VALUE, "the parameter buffer is too small");
      r.params[i].assign(buffer + at, buffer + at + n);
      at += n;
    }
    return CUDA_SUCCESS;
  }
  if (!spec.params.empty()) return fail(q.api, CUDA_ERROR_INVALID_VALUE, "no parameters");
  return CUDA_SUCCESS;
}

CUresult launch(const LaunchRequest& q) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(q.api);
  Stream* s = resolve_stream(q.stream, q.per_thread);
  if (!s) return fail(q.api, CUDA_ERROR_INVALID_HANDLE, "stream");
  Context* ctx = s->ctx;
  const KernelSpec* spec = nullptr;
  int max_dynamic = 0;
  std::string handle;
  if (Function* fn = as<Function>(q.f, Kind::function)) {
    // A function belongs to the context of its module (or of the kernel's copy it is).
    if (fn->ctx != ctx) {
      return fail(q.api, CUDA_ERROR_INVALID_HANDLE,
                  "a function of context " + std::to_string(fn->ctx->id) + " launched on a stream of context " + std::to_string(ctx->id));
    }
    spec = fn->spec;
    max_dynamic = max_dynamic_of(*fn);
    handle = "function";
  } else if (Kernel* k = as<Kernel>(q.f, Kind::kernel)) {
    spec = k->spec;
    max_dynamic = max_dynamic_of(*function_in(*k, ctx));
    handle = "kernel";
  } else {
    return fail(q.api, CUDA_ERROR_INVALID_HANDLE, "function");
  }
  const Device& d = *ctx->device;
  if (q.grid.x == 0 || q.grid.y == 0 || q.grid.z == 0 || q.grid.y > 65535 || q.grid.z > 65535 || q.grid.x > 2147483647u) {
    return fail(q.api, CUDA_ERROR_INVALID_VALUE, "grid");
  }
  const uint64_t threads = q.block.count();
  if (q.block.x == 0 || q.block.y == 0 || q.block.z == 0 || q.block.x > 1024 || q.block.y > 1024 || q.block.z > 64 ||
      threads > static_cast<uint64_t>(spec->max_threads)) {
    return fail(q.api, CUDA_ERROR_INVALID_VALUE, "block");
  }
  if (static_cast<int>(q.shared) > max_dynamic) {
    return fail(q.api, CUDA_ERROR_INVALID_VALUE,
                "dynamic shared memory " + std::to_string(q.shared) + " over the function's maximum " + std::to_string(max_dynamic));
  }
  const int per_sm = blocks_that_fit(d, *spec, static_cast<int>(threads), static_cast<int>(q.shared));
  if (per_sm == 0) return fail(q.api, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "one block does not fit on an SM");
  if (q.cooperative && q.grid.count() > static_cast<uint64_t>(per_sm) * ctx->sms.count()) {
    return fail(q.api, CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
                std::to_string(q.grid.count()) + " blocks, at most " + std::to_string(per_sm * ctx->sms.count()) + " resident");
  }
  auto run = std::make_shared<Run>();
  if (CUresult r = copy_params(q, *spec, *run); r != CUDA_SUCCESS) return r;
  run->spec = spec;
  run->handle = handle;
  run->api = q.api;
  run->ctx = ctx;
  run->stream = s;
  run->grid = q.grid;
  run->block = q.block;
  run->dynamic_smem = q.shared;
  run->priority = q.priority ? std::clamp(*q.priority, -5, 0) : s->priority;
  run->priority_attribute = q.priority.has_value();
  run->cooperative = q.cooperative;
  run->limit_per_sm = per_sm;
  run->resident.assign(static_cast<size_t>(d.sms), 0);
  run->queued_ns = now_ns();
  run->seq = driver().next_run++;
  Op op;
  op.type = Op::Type::kernel;
  op.run = run;
  if (CUresult r = enqueue(s, std::move(op)); r != CUDA_SUCCESS) return fail(q.api, r, "into a capture");
  return CUDA_SUCCESS;
}

CUresult launch_ex(const char* api, const CUlaunchConfig* config, CUfunction f, void** params, void** extra, bool per_thread) {
  if (!config) return fail(api, CUDA_ERROR_INVALID_VALUE, "no config");
  LaunchRequest q;
  q.api = api;
  q.f = f;
  q.grid = {config->gridDimX, config->gridDimY, config->gridDimZ};
  q.block = {config->blockDimX, config->blockDimY, config->blockDimZ};
  q.shared = config->sharedMemBytes;
  q.stream = config->hStream;
  q.per_thread = per_thread;
  q.params = params;
  q.extra = extra;
  if (config->numAttrs > 0 && !config->attrs) return fail(api, CUDA_ERROR_INVALID_VALUE, "attributes");
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute& a = config->attrs[i];
    switch (a.id) {
      case CU_LAUNCH_ATTRIBUTE_PRIORITY: q.priority = a.value.priority; break;
      case CU_LAUNCH_ATTRIBUTE_COOPERATIVE: q.cooperative = a.value.cooperative != 0; break;
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: break;  // accepted; clusters are not modelled
      default:
        return fail(api, CUDA_ERROR_NOT_SUPPORTED, "launch attribute " + std::to_string(static_cast<int>(a.id)) + " is not modelled");
    }
  }
  return launch(q);
}

void record_stream(const Stream& s) {
  record_line("{\"record\":\"stream\",\"pid\":" + std::to_string(::getpid()) + ",\"stream\":" + std::to_string(s.id) +
              ",\"context\":" + std::to_string(s.ctx->id) + ",\"green\":" + (s.ctx->green ? "true" : "false") +
              ",\"priority\":" + std::to_string(s.priority) + ",\"flags\":" + std::to_string(s.flags) + "}");
}

CUresult stream_create(const char* call, CUstream* out, unsigned flags, int priority) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(call);
  if (!out) return fail(call, CUDA_ERROR_INVALID_VALUE);
  if ((flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) != 0) return fail(call, CUDA_ERROR_INVALID_VALUE, "flags");
  Context* c = current();
  if (!c) return fail(call, CUDA_ERROR_INVALID_CONTEXT, "no current context");
  Stream* s = new_stream(c, flags, std::clamp(priority, -5, 0));
  record_stream(*s);
  *out = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}

CUresult stream_destroy(const char* call, CUstream stream) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(call);
  Stream* s = as<Stream>(stream, Kind::stream);
  if (!s || s->legacy || s->per_thread) return fail(call, CUDA_ERROR_INVALID_HANDLE);
  if (s->capture) return fail(call, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the stream is capturing");
  destroy_stream(s);
  return CUDA_SUCCESS;
}

// A capture in progress on `s` forbids synchronising with it (and ends invalidated).
CUresult not_while_capturing(const char* call, Stream* s) {
  if (s->capture) {
    s->capture->invalidated = true;
    return fail(call, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the stream is capturing");
  }
  return CUDA_SUCCESS;
}

CUresult stream_synchronize(const char* call, CUstream stream, bool per_thread) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(call);
  Stream* s = resolve_stream(stream, per_thread);
  if (!s) return fail(call, CUDA_ERROR_INVALID_HANDLE);
  if (CUresult r = not_while_capturing(call, s); r != CUDA_SUCCESS) return r;
  if (s->legacy && unsafe_forbidden()) return fail(call, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the legacy stream during a capture");
  if (s->legacy) {
    // The legacy stream waits for its context's blocking streams, as a legacy-stream operation does.
    wait_context(lock, s->ctx);
  } else {
    wait_stream(lock, s);
  }
  return CUDA_SUCCESS;
}

CUresult stream_query(const char* call, CUstream stream, bool per_thread) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(call);
  Stream* s = resolve_stream(stream, per_thread);
  if (!s) return fail(call, CUDA_ERROR_INVALID_HANDLE);
  if (CUresult r = not_while_capturing(call, s); r != CUDA_SUCCESS) return r;
  return s->completed >= s->enqueued ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

// A field of a stream (its priority, flags, context, id): `get` reads it under the driver's lock.
template <typename T, typename Get>
CUresult stream_field(const char* call, CUstream stream, T* out, bool per_thread, Get get) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(call);
  Stream* s = resolve_stream(stream, per_thread);
  if (!s || !out) return fail(call, CUDA_ERROR_INVALID_HANDLE);
  *out = get(*s);
  return CUDA_SUCCESS;
}

CUresult stream_priority(const char* call, CUstream stream, int* priority, bool per_thread) {
  maybe_throw("cuStreamGetPriority");
  return stream_field(call, stream, priority, per_thread, [](const Stream& s) { return s.priority; });
}
CUresult stream_flags(const char* call, CUstream stream, unsigned* flags, bool per_thread) {
  return stream_field(call, stream, flags, per_thread, [](const Stream& s) { return s.flags; });
}
CUresult stream_ctx(const char* call, CUstream stream, CUcontext* ctx, bool per_thread) {
  return stream_field(call, stream, ctx, per_thread, [](const Stream& s) { return reinterpret_cast<CUcontext>(s.ctx); });
}
CUresult stream_id(const char* call, CUstream stream, unsigned long long* id, bool per_thread) {
  return stream_field(call, stream, id, per_thread, [](const Stream& s) { return static_cast<unsigned long long>(s.id); });
}

CUresult stream_wait_event(const char* call, CUstream stream, CUevent event, unsigned flags, bool per_thread) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(call);
  Stream* s = resolve_stream(stream, per_thread);
  Event* e = as<Event>(event, Kind::event);
  if (!s || !e) return fail(call, CUDA_ERROR_INVALID_HANDLE, !s ? "stream" : "event");
  if (flags != 0 && flags != CU_EVENT_WAIT_DEFAULT) return fail(call, CUDA_ERROR_INVALID_VALUE, "flags");
  if (e->ctx->device != s->ctx->device) return fail(call, CUDA_ERROR_INVALID_HANDLE, "an event of another device");
  if (e->recorded == 0) return CUDA_SUCCESS;  // never recorded: nothing to wait for
  Op op;
  op.type = Op::Type::wait;
  op.event = e;
  op.generation = e->recorded;
  if (CUresult r = enqueue(s, std::move(op)); r != CUDA_SUCCESS) return fail(call, r);
  return CUDA_SUCCESS;
}

CUresult event_record(const char* call, CUevent event, CUstream stream, bool per_thread) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(call);
  Stream* s = resolve_stream(stream, per_thread);
  Event* e = as<Event>(event, Kind::event);
  if (!s || !e) return fail(call, CUDA_ERROR_INVALID_HANDLE, !s ? "stream" : "event");
  // An event lives in its context's device: a record on another device's stream is refused.
  if (e->ctx->device != s->ctx->device) return fail(call, CUDA_ERROR_INVALID_HANDLE, "an event of another device");
  Op op;
  op.type = Op::Type::record;
  op.event = e;
  op.generation = s->capture ? e->recorded : ++e->recorded;
  if (CUresult r = enqueue(s, std::move(op)); r != CUDA_SUCCESS) return fail(call, r);
  return CUDA_SUCCESS;
}

CUresult begin_capture(const char* call, CUstream stream, CUstreamCaptureMode mode, bool per_thread, Graph* into) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(call);
  Stream* s = resolve_stream(stream, per_thread);
  if (!s) return fail(call, CUDA_ERROR_INVALID_HANDLE);
  if (s->legacy) return fail(call, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the legacy stream cannot be captured");
  if (s->capture) return fail(call, CUDA_ERROR_ILLEGAL_STATE, "already capturing");
  s->capture = std::make_unique<Capture>();
  s->capture->mode = mode;
  s->capture->thread = std::this_thread::get_id();
  s->capture->id = driver().next_capture++;
  if (into) {
    s->capture->graph = into;
  } else {
    s->capture->graph = new Graph();
    adopt(s->capture->graph);
  }
  return CUDA_SUCCESS;
}

CUresult end_capture(const char* call, CUstream stream, CUgraph* graph, bool per_thread) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(call);
  Stream* s = resolve_stream(stream, per_thread);
  if (!s || !graph) return fail(call, CUDA_ERROR_INVALID_HANDLE);
  if (!s->capture) return fail(call, CUDA_ERROR_ILLEGAL_STATE, "not capturing");
  if (s->capture->mode != CU_STREAM_CAPTURE_MODE_RELAXED && s->capture->thread != std::this_thread::get_id()) {
    return fail(call, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
  }
  std::unique_ptr<Capture> c = std::move(s->capture);
  if (c->invalidated) {
    *graph = nullptr;
    return fail(call, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "capture " + std::to_string(c->id));
  }
  *graph = reinterpret_cast<CUgraph>(c->graph);
  return CUDA_SUCCESS;
}

CUresult is_capturing(const char* call, CUstream stream, CUstreamCaptureStatus* status, bool per_thread) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(call);
  Stream* s = resolve_stream(stream, per_thread);
  if (!s || !status) return fail(call, CUDA_ERROR_INVALID_HANDLE);
  if (s->legacy) {
    // Asking of the legacy stream while a blocking stream of its context captures would join it.
    for (Stream* t : s->ctx->device->streams) {
      if (t->ctx == s->ctx && t->blocking() && t->capture && t->capture->mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
        t->capture->invalidated = true;
        return fail(call, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
      }
    }
  }
  *status = !s->capture ? CU_STREAM_CAPTURE_STATUS_NONE
                        : (s->capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE);
  return CUDA_SUCCESS;
}

CUresult graph_launch(const char* call, CUgraphExec exec, CUstream stream, bool per_thread) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(call);
  GraphExec* g = as<GraphExec>(exec, Kind::graph_exec);
  Stream* s = resolve_stream(stream, per_thread);
  if (!g || !s) return fail(call, CUDA_ERROR_INVALID_HANDLE, !g ? "graph" : "stream");
  const uint64_t launch_no = ++g->launches;
  for (const GraphNode& n : g->nodes) {
    Op op;
    op.type = n.type;
    op.event = n.event;
    op.dst = n.dst;
    op.src = n.src;
    op.bytes = n.bytes;
    op.value = n.value;
    op.width = n.width;
    if (n.type == Op::Type::record && n.event) op.generation = ++n.event->recorded;
    if (n.run) {
      auto run = std::make_shared<Run>(*n.run);
      run->ctx = s->ctx;
      run->stream = s;
      run->priority = run->priority_attribute ? run->priority : s->priority;
      run->graph = g->id;
      run->graph_launch = launch_no;
      run->queued_ns = now_ns();
      run->seq = driver().next_run++;
      run->resident.assign(static_cast<size_t>(s->ctx->device->sms), 0);
      op.run = run;
    }
    if (CUresult r = enqueue(s, std::move(op)); r != CUDA_SUCCESS) return fail(call, r);
  }
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace standin

using namespace standin;

// ---- modules, libraries, functions ---------------------------------------------------------

STANDIN_API CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuModuleLoadData");
  Context* c = current();
  if (!c) return fail("cuModuleLoadData", CUDA_ERROR_INVALID_CONTEXT, "no current context");
  if (!module) return fail("cuModuleLoadData", CUDA_ERROR_INVALID_VALUE);
  CUresult r = CUDA_SUCCESS;
  std::set<std::string> entries = entries_of(image, &r);
  if (r != CUDA_SUCCESS) return fail("cuModuleLoadData", r, "no kernel of the stand-in's catalogue in the image");
  auto* m = new Module();
  m->ctx = c;
  m->entries = std::move(entries);
  adopt(m);
  *module = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuModuleLoadData, "cuModuleLoadData", 2000, false);

STANDIN_API CUresult cuModuleUnload(CUmodule module) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuModuleUnload");
  Module* m = as<Module>(module, Kind::module);
  if (!m) return fail("cuModuleUnload", CUDA_ERROR_INVALID_HANDLE);
  for (auto& [name, f] : m->functions) retire(f);
  retire(m);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuModuleUnload, "cuModuleUnload", 2000, false);

STANDIN_API CUresult cuModuleGetFunction(CUfunction* fn, CUmodule module, const char* name) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuModuleGetFunction");
  Module* m = as<Module>(module, Kind::module);
  if (!m || !fn || !name) return fail("cuModuleGetFunction", CUDA_ERROR_INVALID_HANDLE);
  if (!m->entries.contains(name)) return fail("cuModuleGetFunction", CUDA_ERROR_NOT_FOUND, name);
  Function*& f = m->functions[name];
  if (!f) {
    f = new Function();
    f->spec = find_kernel(name);
    f->ctx = m->ctx;
    adopt(f);
  }
  *fn = reinterpret_cast<CUfunction>(f);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuModuleGetFunction, "cuModuleGetFunction", 2000, false);

STANDIN_API CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option*, void**, unsigned, CUlibraryOption*,
                                       void**, unsigned) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuLibraryLoadData");
  if (!library) return fail("cuLibraryLoadData", CUDA_ERROR_INVALID_VALUE);
  CUresult r = CUDA_SUCCESS;
  std::set<std::string> entries = entries_of(code, &r);
  if (r != CUDA_SUCCESS) return fail("cuLibraryLoadData", r, "no kernel of the stand-in's catalogue in the image");
  auto* l = new Library();
  l->entries = std::move(entries);
  adopt(l);
  *library = reinterpret_cast<CUlibrary>(l);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuLibraryLoadData, "cuLibraryLoadData", 12000, false);

STANDIN_API CUresult cuLibraryUnload(CUlibrary library) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuLibraryUnload");
  Library* l = as<Library>(library, Kind::library);
  if (!l) return fail("cuLibraryUnload", CUDA_ERROR_INVALID_HANDLE);
  for (auto& [name, k] : l->kernels) {
    for (auto& [ctx, f] : k->functions) retire(f);
    retire(k);
  }
  retire(l);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuLibraryUnload, "cuLibraryUnload", 12000, false);

STANDIN_API CUresult cuLibraryGetKernel(CUkernel* kernel, CUlibrary library, const char* name) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuLibraryGetKernel");
  Library* l = as<Library>(library, Kind::library);
  if (!l || !kernel || !name) return fail("cuLibraryGetKernel", CUDA_ERROR_INVALID_HANDLE);
  if (!l->entries.contains(name)) return fail("cuLibraryGetKernel", CUDA_ERROR_NOT_FOUND, name);
  Kernel*& k = l->kernels[name];
  if (!k) {
    k = new Kernel();
    k->spec = find_kernel(name);
    adopt(k);
  }
  *kernel = reinterpret_cast<CUkernel>(k);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuLibraryGetKernel, "cuLibraryGetKernel", 12000, false);

STANDIN_API CUresult cuKernelGetFunction(CUfunction* fn, CUkernel kernel) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuKernelGetFunction");
  Kernel* k = as<Kernel>(kernel, Kind::kernel);
  if (!k || !fn) return fail("cuKernelGetFunction", CUDA_ERROR_INVALID_HANDLE);
  Context* c = current();
  if (!c) return fail("cuKernelGetFunction", CUDA_ERROR_INVALID_CONTEXT, "no current context");
  *fn = reinterpret_cast<CUfunction>(function_in(*k, c));
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuKernelGetFunction, "cuKernelGetFunction", 12000, false);

STANDIN_API CUresult cuFuncGetName(const char** name, CUfunction fn) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuFuncGetName");
  Function* f = as<Function>(fn, Kind::function);
  if (!f || !name) return fail("cuFuncGetName", CUDA_ERROR_INVALID_HANDLE);
  *name = f->spec->name.c_str();
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuFuncGetName, "cuFuncGetName", 12030, false);

STANDIN_API CUresult cuKernelGetName(const char** name, CUkernel kernel) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuKernelGetName");
  Kernel* k = as<Kernel>(kernel, Kind::kernel);
  if (!k || !name) return fail("cuKernelGetName", CUDA_ERROR_INVALID_HANDLE);
  *name = k->spec->name.c_str();
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuKernelGetName, "cuKernelGetName", 12030, false);

STANDIN_API CUresult cuFuncGetAttribute(int* value, CUfunction_attribute attr, CUfunction fn) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuFuncGetAttribute");
  Function* f = as<Function>(fn, Kind::function);
  if (!f) return fail("cuFuncGetAttribute", CUDA_ERROR_INVALID_HANDLE);
  return function_attribute("cuFuncGetAttribute", value, attr, *f->spec, max_dynamic_of(*f));
}
STANDIN_PROC(cuFuncGetAttribute, "cuFuncGetAttribute", 2020, false);

STANDIN_API CUresult cuFuncSetAttribute(CUfunction fn, CUfunction_attribute attr, int value) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuFuncSetAttribute");
  Function* f = as<Function>(fn, Kind::function);
  if (!f) return fail("cuFuncSetAttribute", CUDA_ERROR_INVALID_HANDLE);
  if (attr == CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT) return CUDA_SUCCESS;
  if (attr != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    return fail("cuFuncSetAttribute", CUDA_ERROR_INVALID_VALUE, "attribute " + std::to_string(static_cast<int>(attr)));
  }
  if (CUresult r = check_max_dynamic("cuFuncSetAttribute", *f->ctx->device, *f->spec, value); r != CUDA_SUCCESS) return r;
  f->max_dynamic = value;
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuFuncSetAttribute, "cuFuncSetAttribute", 9000, false);

STANDIN_API CUresult cuKernelGetAttribute(int* value, CUfunction_attribute attr, CUkernel kernel, CUdevice dev) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuKernelGetAttribute");
  Kernel* k = as<Kernel>(kernel, Kind::kernel);
  Device* d = device_of(dev);
  if (!k || !d) return fail("cuKernelGetAttribute", CUDA_ERROR_INVALID_HANDLE);
  const auto it = k->max_dynamic.find(d->ordinal);
  return function_attribute("cuKernelGetAttribute", value, attr, *k->spec,
                            it != k->max_dynamic.end() ? it->second : default_max_dynamic(*d, *k->spec));
}
STANDIN_PROC(cuKernelGetAttribute, "cuKernelGetAttribute", 12000, false);

STANDIN_API CUresult cuKernelSetAttribute(CUfunction_attribute attr, int value, CUkernel kernel, CUdevice dev) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuKernelSetAttribute");
  Kernel* k = as<Kernel>(kernel, Kind::kernel);
  Device* d = device_of(dev);
  if (!k || !d) return fail("cuKernelSetAttribute", CUDA_ERROR_INVALID_HANDLE);
  if (attr == CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT) return CUDA_SUCCESS;
  if (attr != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    return fail("cuKernelSetAttribute", CUDA_ERROR_INVALID_VALUE, "attribute " + std::to_string(static_cast<int>(attr)));
  }
  if (CUresult r = check_max_dynamic("cuKernelSetAttribute", *d, *k->spec, value); r != CUDA_SUCCESS) return r;
  k->max_dynamic[d->ordinal] = value;  // device-wide: its functions in every context
  for (auto& [ctx, f] : k->functions) {
    if (ctx->device == d) f->max_dynamic = -1;
  }
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuKernelSetAttribute, "cuKernelSetAttribute", 12000, false);

// ---- launches ------------------------------------------------------------------------------

namespace {
CUresult launch_kernel(const char* api, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                       unsigned bz, unsigned shared, CUstream stream, void** params, void** extra, bool per_thread,
                       bool cooperative) {
  LaunchRequest q;
  q.api = api;
  q.f = f;
  q.grid = {gx, gy, gz};
  q.block = {bx, by, bz};
  q.shared = shared;
  q.stream = stream;
  q.per_thread = per_thread;
  q.params = params;
  q.extra = extra;
  q.cooperative = cooperative;
  return launch(q);
}
}  // namespace

STANDIN_API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                    unsigned shared, CUstream stream, void** params, void** extra) {
  return launch_kernel("cuLaunchKernel", f, gx, gy, gz, bx, by, bz, shared, stream, params, extra, false, false);
}
STANDIN_PROC(cuLaunchKernel, "cuLaunchKernel", 4000, false);

STANDIN_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                         unsigned bz, unsigned shared, CUstream stream, void** params, void** extra) {
  return launch_kernel("cuLaunchKernel_ptsz", f, gx, gy, gz, bx, by, bz, shared, stream, params, extra, true, false);
}
STANDIN_PROC(cuLaunchKernel_ptsz, "cuLaunchKernel", 7000, true);

STANDIN_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                               unsigned bz, unsigned shared, CUstream stream, void** params) {
  return launch_kernel("cuLaunchCooperativeKernel", f, gx, gy, gz, bx, by, bz, shared, stream, params, nullptr, false, true);
}
STANDIN_PROC(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel", 9000, false);

STANDIN_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                                    unsigned by, unsigned bz, unsigned shared, CUstream stream, void** params) {
  return launch_kernel("cuLaunchCooperativeKernel_ptsz", f, gx, gy, gz, bx, by, bz, shared, stream, params, nullptr, true, true);
}
STANDIN_PROC(cuLaunchCooperativeKernel_ptsz, "cuLaunchCooperativeKernel", 9000, true);

STANDIN_API CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return launch_ex("cuLaunchKernelEx", config, f, params, extra, false);
}
STANDIN_PROC(cuLaunchKernelEx, "cuLaunchKernelEx", 11060, false);

STANDIN_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return launch_ex("cuLaunchKernelEx_ptsz", config, f, params, extra, true);
}
STANDIN_PROC(cuLaunchKernelEx_ptsz, "cuLaunchKernelEx", 11060, true);

// ---- streams -------------------------------------------------------------------------------

STANDIN_API CUresult cuStreamCreate(CUstream* stream, unsigned flags) {
  return stream_create("cuStreamCreate", stream, flags, 0);
}
STANDIN_PROC(cuStreamCreate, "cuStreamCreate", 2000, false);

STANDIN_API CUresult cuStreamCreateWithPriority(CUstream* stream, unsigned flags, int priority) {
  return stream_create("cuStreamCreateWithPriority", stream, flags, priority);
}
STANDIN_PROC(cuStreamCreateWithPriority, "cuStreamCreateWithPriority", 5050, false);

STANDIN_API CUresult cuStreamDestroy(CUstream stream) { return stream_destroy("cuStreamDestroy", stream); }
STANDIN_PROC(cuStreamDestroy, "cuStreamDestroy", 2000, false);
STANDIN_API CUresult cuStreamDestroy_v2(CUstream stream) { return stream_destroy("cuStreamDestroy_v2", stream); }
STANDIN_PROC(cuStreamDestroy_v2, "cuStreamDestroy", 4000, false);

STANDIN_API CUresult cuStreamSynchronize(CUstream stream) { return stream_synchronize("cuStreamSynchronize", stream, false); }
STANDIN_PROC(cuStreamSynchronize, "cuStreamSynchronize", 2000, false);
STANDIN_API CUresult cuStreamSynchronize_ptsz(CUstream stream) {
  return stream_synchronize("cuStreamSynchronize_ptsz", stream, true);
}
STANDIN_PROC(cuStreamSynchronize_ptsz, "cuStreamSynchronize", 7000, true);

STANDIN_API CUresult cuStreamQuery(CUstream stream) { return stream_query("cuStreamQuery", stream, false); }
STANDIN_PROC(cuStreamQuery, "cuStreamQuery", 2000, false);
STANDIN_API CUresult cuStreamQuery_ptsz(CUstream stream) { return stream_query("cuStreamQuery_ptsz", stream, true); }
STANDIN_PROC(cuStreamQuery_ptsz, "cuStreamQuery", 7000, true);

STANDIN_API CUresult cuStreamGetPriority(CUstream stream, int* priority) {
  return stream_priority("cuStreamGetPriority", stream, priority, false);
}
STANDIN_PROC(cuStreamGetPriority, "cuStreamGetPriority", 5050, false);
STANDIN_API CUresult cuStreamGetPriority_ptsz(CUstream stream, int* priority) {
  return stream_priority("cuStreamGetPriority_ptsz", stream, priority, true);
}
STANDIN_PROC(cuStreamGetPriority_ptsz, "cuStreamGetPriority", 7000, true);

STANDIN_API CUresult cuStreamGetFlags(CUstream stream, unsigned* flags) { return stream_flags("cuStreamGetFlags", stream, flags, false); }
STANDIN_PROC(cuStreamGetFlags, "cuStreamGetFlags", 5050, false);
STANDIN_API CUresult cuStreamGetFlags_ptsz(CUstream stream, unsigned* flags) {
  return stream_flags("cuStreamGetFlags_ptsz", stream, flags, true);
}
STANDIN_PROC(cuStreamGetFlags_ptsz, "cuStreamGetFlags", 7000, true);

STANDIN_API CUresult cuStreamGetCtx(CUstream stream, CUcontext* ctx) { return stream_ctx("cuStreamGetCtx", stream, ctx, false); }
STANDIN_PROC(cuStreamGetCtx, "cuStreamGetCtx", 9020, false);
STANDIN_API CUresult cuStreamGetCtx_ptsz(CUstream stream, CUcontext* ctx) { return stream_ctx("cuStreamGetCtx_ptsz", stream, ctx, true); }
STANDIN_PROC(cuStreamGetCtx_ptsz, "cuStreamGetCtx", 9020, true);

STANDIN_API CUresult cuStreamGetId(CUstream stream, unsigned long long* id) { return stream_id("cuStreamGetId", stream, id, false); }
STANDIN_PROC(cuStreamGetId, "cuStreamGetId", 12000, false);
STANDIN_API CUresult cuStreamGetId_ptsz(CUstream stream, unsigned long long* id) {
  return stream_id("cuStreamGetId_ptsz", stream, id, true);
}
STANDIN_PROC(cuStreamGetId_ptsz, "cuStreamGetId", 12000, true);

STANDIN_API CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned flags) {
  return stream_wait_event("cuStreamWaitEvent", stream, event, flags, false);
}
STANDIN_PROC(cuStreamWaitEvent, "cuStreamWaitEvent", 3020, false);
STANDIN_API CUresult cuStreamWaitEvent_ptsz(CUstream stream, CUevent event, unsigned flags) {
  return stream_wait_event("cuStreamWaitEvent_ptsz", stream, event, flags, true);
}
STANDIN_PROC(cuStreamWaitEvent_ptsz, "cuStreamWaitEvent", 7000, true);

// ---- events --------------------------------------------------------------------------------

STANDIN_API CUresult cuEventCreate(CUevent* event, unsigned flags) {
  maybe_throw("cuEventCreate");
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuEventCreate");
  if (!event) return fail("cuEventCreate", CUDA_ERROR_INVALID_VALUE);
  Context* c = current();
  if (!c) return fail("cuEventCreate", CUDA_ERROR_INVALID_CONTEXT, "no current context");
  Driver& d = driver();
  Event* e = nullptr;
  if (!d.free_events.empty()) {
    e = d.free_events.back();
    d.free_events.pop_back();
    *e = Event();
  } else {
    e = new Event();
  }
  e->ctx = c;
  e->flags = flags;
  adopt(e);
  *event = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuEventCreate, "cuEventCreate", 2000, false);

namespace {
CUresult event_destroy(const char* call, CUevent event) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(call);
  Event* e = as<Event>(event, Kind::event);
  if (!e) return fail(call, CUDA_ERROR_INVALID_HANDLE);
  retire(e);
  e->destroyed = true;
  if (e->pending == 0) driver().free_events.push_back(e);
  return CUDA_SUCCESS;
}
}  // namespace

STANDIN_API CUresult cuEventDestroy(CUevent event) { return event_destroy("cuEventDestroy", event); }
STANDIN_PROC(cuEventDestroy, "cuEventDestroy", 2000, false);
STANDIN_API CUresult cuEventDestroy_v2(CUevent event) { return event_destroy("cuEventDestroy_v2", event); }
STANDIN_PROC(cuEventDestroy_v2, "cuEventDestroy", 4000, false);

STANDIN_API CUresult cuEventRecord(CUevent event, CUstream stream) {
  maybe_throw("cuEventRecord");
  return event_record("cuEventRecord", event, stream, false);
}
STANDIN_PROC(cuEventRecord, "cuEventRecord", 2000, false);
STANDIN_API CUresult cuEventRecord_ptsz(CUevent event, CUstream stream) {
  maybe_throw("cuEventRecord");
  return event_record("cuEventRecord_ptsz", event, stream, true);
}
STANDIN_PROC(cuEventRecord_ptsz, "cuEventRecord", 7000, true);

STANDIN_API CUresult cuEventRecordWithFlags(CUevent event, CUstream stream, unsigned flags) {
  (void)flags;
  return event_record("cuEventRecordWithFlags", event, stream, false);
}
STANDIN_PROC(cuEventRecordWithFlags, "cuEventRecordWithFlags", 11010, false);
STANDIN_API CUresult cuEventRecordWithFlags_ptsz(CUevent event, CUstream stream, unsigned flags) {
  (void)flags;
  return event_record("cuEventRecordWithFlags_ptsz", event, stream, true);
}
STANDIN_PROC(cuEventRecordWithFlags_ptsz, "cuEventRecordWithFlags", 11010, true);

STANDIN_API CUresult cuEventQuery(CUevent event) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuEventQuery");
  Event* e = as<Event>(event, Kind::event);
  if (!e) return fail("cuEventQuery", CUDA_ERROR_INVALID_HANDLE);
  if (e->captured) return fail("cuEventQuery", CUDA_ERROR_CAPTURED_EVENT, "the event was last recorded into a capture");
  return e->reached >= e->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
STANDIN_PROC(cuEventQuery, "cuEventQuery", 2000, false);

STANDIN_API CUresult cuEventSynchronize(CUevent event) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuEventSynchronize");
  Event* e = as<Event>(event, Kind::event);
  if (!e) return fail("cuEventSynchronize", CUDA_ERROR_INVALID_HANDLE);
  if (e->captured) return fail("cuEventSynchronize", CUDA_ERROR_CAPTURED_EVENT);
  const uint64_t target = e->recorded;
  driver().host.wait(lock, [&] { return e->reached >= target; });
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuEventSynchronize, "cuEventSynchronize", 2000, false);

namespace {
CUresult elapsed(const char* call, float* ms, CUevent start, CUevent end) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT(call);
  Event* a = as<Event>(start, Kind::event);
  Event* b = as<Event>(end, Kind::event);
  if (!a || !b || !ms) return fail(call, CUDA_ERROR_INVALID_HANDLE);
  if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return fail(call, CUDA_ERROR_INVALID_HANDLE, "timing disabled");
  if (a->reached < a->recorded || b->reached < b->recorded) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>((static_cast<double>(b->reached_ns) - static_cast<double>(a->reached_ns)) / 1e6);
  return CUDA_SUCCESS;
}
}  // namespace

STANDIN_API CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) { return elapsed("cuEventElapsedTime", ms, start, end); }
STANDIN_PROC(cuEventElapsedTime, "cuEventElapsedTime", 2000, false);
STANDIN_API CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  return elapsed("cuEventElapsedTime_v2", ms, start, end);
}
STANDIN_PROC(cuEventElapsedTime_v2, "cuEventElapsedTime", 12080, false);

// ---- capture and graphs --------------------------------------------------------------------

STANDIN_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (!mode) return fail("cuThreadExchangeStreamCaptureMode", CUDA_ERROR_INVALID_VALUE);
  std::swap(*mode, thread_capture_mode());
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode", 10010, false);

STANDIN_API CUresult cuStreamBeginCapture(CUstream stream) {
  return begin_capture("cuStreamBeginCapture", stream, CU_STREAM_CAPTURE_MODE_GLOBAL, false, nullptr);
}
STANDIN_PROC(cuStreamBeginCapture, "cuStreamBeginCapture", 10000, false);
STANDIN_API CUresult cuStreamBeginCapture_ptsz(CUstream stream) {
  return begin_capture("cuStreamBeginCapture_ptsz", stream, CU_STREAM_CAPTURE_MODE_GLOBAL, true, nullptr);
}
STANDIN_PROC(cuStreamBeginCapture_ptsz, "cuStreamBeginCapture", 10000, true);
STANDIN_API CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode) {
  return begin_capture("cuStreamBeginCapture_v2", stream, mode, false, nullptr);
}
STANDIN_PROC(cuStreamBeginCapture_v2, "cuStreamBeginCapture", 10010, false);
STANDIN_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode) {
  return begin_capture("cuStreamBeginCapture_v2_ptsz", stream, mode, true, nullptr);
}
STANDIN_PROC(cuStreamBeginCapture_v2_ptsz, "cuStreamBeginCapture", 10010, true);

namespace {
CUresult begin_to_graph(const char* call, CUstream stream, CUgraph graph, size_t deps, CUstreamCaptureMode mode, bool per_thread) {
  Graph* g = nullptr;
  {
    Lock lock(driver().mu);
    g = as<Graph>(graph, Kind::graph);
    if (!g) return fail(call, CUDA_ERROR_INVALID_HANDLE, "graph");
    if (deps != 0) return fail(call, CUDA_ERROR_NOT_SUPPORTED, "dependencies are not modelled");
  }
  return begin_capture(call, stream, mode, per_thread, g);
}
}  // namespace

STANDIN_API CUresult cuStreamBeginCaptureToGraph(CUstream stream, CUgraph graph, const CUgraphNode*, const CUgraphEdgeData*,
                                                 size_t deps, CUstreamCaptureMode mode) {
  return begin_to_graph("cuStreamBeginCaptureToGraph", stream, graph, deps, mode, false);
}
STANDIN_PROC(cuStreamBeginCaptureToGraph, "cuStreamBeginCaptureToGraph", 12030, false);
STANDIN_API CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream stream, CUgraph graph, const CUgraphNode*, const CUgraphEdgeData*,
                                                      size_t deps, CUstreamCaptureMode mode) {
  return begin_to_graph("cuStreamBeginCaptureToGraph_ptsz", stream, graph, deps, mode, true);
}
STANDIN_PROC(cuStreamBeginCaptureToGraph_ptsz, "cuStreamBeginCaptureToGraph", 12030, true);

STANDIN_API CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  return end_capture("cuStreamEndCapture", stream, graph, false);
}
STANDIN_PROC(cuStreamEndCapture, "cuStreamEndCapture", 10000, false);
STANDIN_API CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph) {
  return end_capture("cuStreamEndCapture_ptsz", stream, graph, true);
}
STANDIN_PROC(cuStreamEndCapture_ptsz, "cuStreamEndCapture", 10000, true);

STANDIN_API CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  return is_capturing("cuStreamIsCapturing", stream, status, false);
}
STANDIN_PROC(cuStreamIsCapturing, "cuStreamIsCapturing", 10000, false);
STANDIN_API CUresult cuStreamIsCapturing_ptsz(CUstream stream, CUstreamCaptureStatus* status) {
  return is_capturing("cuStreamIsCapturing_ptsz", stream, status, true);
}
STANDIN_PROC(cuStreamIsCapturing_ptsz, "cuStreamIsCapturing", 10000, true);

STANDIN_API CUresult cuGraphCreate(CUgraph* graph, unsigned flags) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuGraphCreate");
  if (!graph || flags != 0) return fail("cuGraphCreate", CUDA_ERROR_INVALID_VALUE);
  auto* g = new Graph();
  adopt(g);
  *graph = reinterpret_cast<CUgraph>(g);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuGraphCreate, "cuGraphCreate", 10000, false);

STANDIN_API CUresult cuGraphDestroy(CUgraph graph) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuGraphDestroy");
  Graph* g = as<Graph>(graph, Kind::graph);
  if (!g) return fail("cuGraphDestroy", CUDA_ERROR_INVALID_HANDLE);
  retire(g);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuGraphDestroy, "cuGraphDestroy", 10000, false);

// Nodes are not handed out: the count only (the stand-in's graphs are chains).
STANDIN_API CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode* nodes, size_t* count) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuGraphGetNodes");
  Graph* g = as<Graph>(graph, Kind::graph);
  if (!g || !count) return fail("cuGraphGetNodes", CUDA_ERROR_INVALID_HANDLE);
  if (nodes) return fail("cuGraphGetNodes", CUDA_ERROR_NOT_SUPPORTED, "node handles are not modelled");
  *count = g->nodes.size();
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuGraphGetNodes, "cuGraphGetNodes", 10000, false);

STANDIN_API CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  (void)flags;
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuGraphInstantiateWithFlags");
  Graph* g = as<Graph>(graph, Kind::graph);
  if (!g || !exec) return fail("cuGraphInstantiateWithFlags", CUDA_ERROR_INVALID_HANDLE);
  auto* x = new GraphExec();
  x->nodes = g->nodes;
  adopt(x);
  size_t kernels = 0, records = 0, others = 0;
  for (const GraphNode& n : x->nodes) {
    if (n.type == Op::Type::kernel) {
      ++kernels;
    } else if (n.type == Op::Type::record) {
      ++records;
    } else {
      ++others;
    }
  }
  record_line("{\"record\":\"graph\",\"pid\":" + std::to_string(::getpid()) + ",\"graph\":" + std::to_string(x->id) +
              ",\"kernels\":" + std::to_string(kernels) + ",\"event_records\":" + std::to_string(records) +
              ",\"other_nodes\":" + std::to_string(others) + "}");
  *exec = reinterpret_cast<CUgraphExec>(x);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 11040, false);

STANDIN_API CUresult cuGraphExecDestroy(CUgraphExec exec) {
  Lock lock(driver().mu);
  STANDIN_REQUIRE_INIT("cuGraphExecDestroy");
  GraphExec* x = as<GraphExec>(exec, Kind::graph_exec);
  if (!x) return fail("cuGraphExecDestroy", CUDA_ERROR_INVALID_HANDLE);
  retire(x);
  return CUDA_SUCCESS;
}
STANDIN_PROC(cuGraphExecDestroy, "cuGraphExecDestroy", 10000, false);

STANDIN_API CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) { return graph_launch("cuGraphLaunch", exec, stream, false); }
STANDIN_PROC(cuGraphLaunch, "cuGraphLaunch", 10000, false);
STANDIN_API CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  return graph_launch("cuGraphLaunch_ptsz", exec, stream, true);
}
STANDIN_PROC(cuGraphLaunch_ptsz, "cuGraphLaunch", 10000, true);
