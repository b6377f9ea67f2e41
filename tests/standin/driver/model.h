// The stand-in driver's device model: what libcuda.so.1 would keep, for the interception library's
// CPU tests (tests/standin/README.md says what it models and what it does not).
//
// One process-wide Driver holds every object behind one mutex. Each device has N SMs with the
// limits of a Hopper part (threads, blocks, registers, shared memory per SM) and one scheduler
// thread: streams are queues of operations; a kernel at the head of its stream becomes ready, its
// blocks are placed on the SMs its context may use as far as their resources allow (higher stream
// or launch priority first), each block runs its host body once when placed and holds its SM for
// the time the kernel's parameters state; the kernel ends when its last block does. Times are the
// host's monotonic clock (the library's and the daemon's), in real time, so waiting, waking and
// starving are observable; they order events and are never performance figures.
#pragma once

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <bitset>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace standin {

uint64_t now_ns();  // CLOCK_MONOTONIC, as ipc::monotonic_ns

inline constexpr int kMaxSms = 256;
using SmMask = std::bitset<kMaxSms>;

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  uint64_t count() const { return uint64_t{x} * y * z; }
};

// What a handle points at. Every handle the stand-in gives out is one of these, registered while
// it lives, so that a call with a stale or foreign handle is an error the record shows.
enum class Kind : uint32_t {
  context = 1, stream, event, module, function, library, kernel, graph, graph_exec, green, pool, desc
};
struct Object {
  explicit Object(Kind k) : kind(k) {}
  virtual ~Object() = default;
  Kind kind;
  uint64_t id = 0;
};

struct Device;
struct Stream;

struct Context : Object {
  Context() : Object(Kind::context) {}
  Device* device = nullptr;
  bool primary = false;
  bool green = false;
  SmMask sms;                  // the SMs its kernels may run on
  Stream* legacy = nullptr;    // its NULL stream
  std::unordered_map<std::thread::id, Stream*> per_thread;  // each thread's default stream
  bool destroyed = false;
};

struct GreenCtx : Object {
  GreenCtx() : Object(Kind::green) {}
  Context ctx;
};

struct ResourceDesc : Object {
  ResourceDesc() : Object(Kind::desc) {}
  SmMask sms;
};

// A kernel of the stand-in's catalogue (catalogue.cpp): its parameters' sizes, its resources and
// its body, run once per block with the launch's parameters.
struct BlockCtx;
struct KernelSpec {
  std::string name;
  std::vector<size_t> params;  // each parameter's size, in order
  int regs = 32;               // registers per thread
  int static_smem = 0;         // bytes
  int max_threads = 1024;
  void (*body)(const BlockCtx&) = nullptr;
  // The time one block holds its SM, from the launch's parameters.
  uint64_t (*block_ns)(const BlockCtx&) = nullptr;
  // The launch's tag (the catalogue's kernels take one, so a test tells its launches apart).
  uint32_t (*tag)(const BlockCtx&) = nullptr;
};
const KernelSpec* find_kernel(const std::string& name);

// A CUkernel (context-independent, from a library) or a CUfunction (of one context, from a
// module, or a CUkernel's copy in a context).
struct Kernel;
struct Function : Object {
  Function() : Object(Kind::function) {}
  const KernelSpec* spec = nullptr;
  Context* ctx = nullptr;
  Kernel* parent = nullptr;  // when it is a CUkernel's function in ctx
  int max_dynamic = -1;      // -1: the default (the per-block limit less its static shared memory)
};
struct Kernel : Object {
  Kernel() : Object(Kind::kernel) {}
  const KernelSpec* spec = nullptr;
  std::map<int, int> max_dynamic;  // by device ordinal
  std::map<Context*, Function*> functions;
};
struct Module : Object {
  Module() : Object(Kind::module) {}
  Context* ctx = nullptr;
  std::set<std::string> entries;
  std::map<std::string, Function*> functions;
};
struct Library : Object {
  Library() : Object(Kind::library) {}
  std::set<std::string> entries;
  std::map<std::string, Kernel*> kernels;
};

// One kernel execution.
struct Run {
  const KernelSpec* spec = nullptr;
  std::string handle;  // "function" or "kernel"
  const char* api = "";
  Context* ctx = nullptr;
  Stream* stream = nullptr;
  Dim3 grid, block;
  uint32_t dynamic_smem = 0;
  std::vector<std::vector<uint8_t>> params;
  int priority = 0;
  bool priority_attribute = false;
  bool cooperative = false;
  uint64_t graph = 0, graph_launch = 0;  // the graph exec and its launch number (0: not a graph's)
  int limit_per_sm = 0;                  // blocks that fit on one SM by its resources
  uint64_t queued_ns = 0, ready_ns = 0, start_ns = 0, end_ns = 0;
  uint64_t placed = 0, done = 0;
  std::vector<int> resident;  // its blocks on each SM now
  int peak_per_sm = 0;
  SmMask used;
  uint64_t seq = 0;
};
using RunPtr = std::shared_ptr<Run>;

struct BlockCtx {
  const Run& run;
  Dim3 block_idx;
  uint64_t linear = 0;
  int sm = 0;
  int resident_on_sm = 0;  // this kernel's blocks on that SM, this one included
  template <typename T>
  T param(size_t i) const {
    T v{};
    if (i < run.params.size() && run.params[i].size() >= sizeof(T)) std::memcpy(&v, run.params[i].data(), sizeof(T));
    return v;
  }
};

struct Event : Object {
  Event() : Object(Kind::event) {}
  Context* ctx = nullptr;
  unsigned flags = 0;
  uint64_t recorded = 0;  // records made
  uint64_t reached = 0;   // records their streams have reached
  uint64_t reached_ns = 0;
  bool captured = false;  // last recorded into a capturing stream
  int pending = 0;        // queued operations that name it
  bool destroyed = false;
};

struct Graph;
struct Op {
  enum class Type { kernel, record, wait, copy, set, free_memory } type = Type::kernel;
  uint64_t seq = 0;  // the context-wide order of enqueueing (legacy-stream semantics)
  RunPtr run;
  Event* event = nullptr;
  uint64_t generation = 0;
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  uint32_t value = 0;
  int width = 1;
  std::shared_ptr<std::vector<uint8_t>> staged;  // a host source copied at the call
};

struct Capture {
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::thread::id thread;
  Graph* graph = nullptr;
  bool invalidated = false;
  uint64_t id = 0;
};

struct Stream : Object {
  Stream() : Object(Kind::stream) {}
  Context* ctx = nullptr;
  int priority = 0;
  unsigned flags = 0;
  bool legacy = false;
  bool per_thread = false;
  std::deque<Op> ops;
  bool head_started = false;
  uint64_t enqueued = 0, completed = 0;
  std::unique_ptr<Capture> capture;
  bool destroyed = false;
  // A blocking stream synchronises with its context's legacy stream.
  bool blocking() const { return !legacy && (flags & CU_STREAM_NON_BLOCKING) == 0; }
};

struct GraphNode {
  Op::Type type = Op::Type::kernel;
  RunPtr run;  // a template: copied at each launch
  Event* event = nullptr;
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  uint32_t value = 0;
  int width = 1;
};
struct Graph : Object {
  Graph() : Object(Kind::graph) {}
  std::vector<GraphNode> nodes;
};
struct GraphExec : Object {
  GraphExec() : Object(Kind::graph_exec) {}
  std::vector<GraphNode> nodes;
  uint64_t launches = 0;
};

struct Pool : Object {
  Pool() : Object(Kind::pool) {}
  int device = 0;
};

struct Device {
  int ordinal = 0;
  std::string name;
  std::string bus_id;
  int sms = 132;
  int threads_per_sm = 2048;
  int blocks_per_sm = 32;
  int regs_per_sm = 65536;
  int smem_per_sm = 233472;           // 228 KiB
  int smem_per_block = 49152;         // without opting in
  int smem_per_block_optin = 232448;  // 227 KiB
  int reserved_smem_per_block = 1024;
  size_t memory = 0;
  size_t used_memory = 0;  // allocated and created (VMM) bytes
  Context* primary = nullptr;
  int primary_refs = 0;
  Pool* default_pool = nullptr;
  std::vector<Stream*> streams;  // every live stream of its contexts
  // The SMs' use now.
  std::vector<int> threads_used, blocks_used, regs_used, smem_used;
  std::vector<RunPtr> ready;  // kernels at their stream's head with blocks still to place
  struct BlockEnd {
    uint64_t at = 0;
    RunPtr run;
    int sm = 0;
    bool operator>(const BlockEnd& o) const { return at > o.at; }
  };
  std::priority_queue<BlockEnd, std::vector<BlockEnd>, std::greater<BlockEnd>> running;
  int cursor = 0;  // where block placement starts next
  std::condition_variable wake;
  std::thread scheduler;
};

struct Allocation {
  size_t bytes = 0;
  Device* device = nullptr;
};
// VMM physical memory, freed as the driver frees it: once every reference (cuMemCreate's and each
// cuMemRetainAllocationHandle's) is released and every mapping unmapped.
struct PhysicalMemory {
  int fd = -1;
  size_t bytes = 0;
  int device = 0;
  int references = 1;
  int mappings = 0;
};

// The process's driver. Never destroyed (threads of the process call into it until exit).
struct Driver {
  std::mutex mu;
  std::condition_variable host;  // completions, for host-side waits
  bool initialized = false;
  std::vector<std::unique_ptr<Device>> devices;
  std::unordered_set<const Object*> live;
  uint64_t next_id = 1;
  uint64_t next_seq = 1;
  uint64_t next_run = 1;
  uint64_t next_capture = 1;
  // Handles a destroyed stream or event leaves go to the next one made (as the driver reuses
  // them), so that state kept under a stale handle shows.
  std::vector<Stream*> free_streams;
  std::vector<Event*> free_events;
  std::map<uintptr_t, Allocation> allocations;  // device memory by address
  std::map<CUmemGenericAllocationHandle, PhysicalMemory> physical;
  CUmemGenericAllocationHandle next_physical = 1;
  std::map<uintptr_t, size_t> reservations;  // VMM address ranges
  std::map<uintptr_t, std::pair<CUmemGenericAllocationHandle, size_t>> mappings;
  int global_captures = 0;  // captures in progress whose mode forbids unsafe calls elsewhere
  int record_fd = -1;
  std::string throw_in;  // CONCORD_STANDIN_THROW: the call that throws std::bad_alloc
  uint64_t throw_after = 0;
  uint64_t throw_calls = 0;
};
Driver& driver();

// --- under driver().mu ---------------------------------------------------------------------

template <typename T>
T* as(const void* handle, Kind kind) {
  Driver& d = driver();
  auto* o = static_cast<const Object*>(handle);
  if (!o || !d.live.contains(o) || o->kind != kind) return nullptr;
  return static_cast<T*>(const_cast<Object*>(o));
}
void adopt(Object* o);  // registers o, gives it an id
void retire(Object* o);

// The calling thread's current context (null: none).
Context* current();
void set_current(Context* c);
std::vector<Context*>& context_stack();

Stream* new_stream(Context* ctx, unsigned flags, int priority);
// The stream a handle names, from the current context for the default ones; `per_thread_null`:
// a null handle is the calling thread's default stream (the _ptsz flavour). Null: invalid.
Stream* resolve_stream(CUstream handle, bool per_thread_null);
void destroy_stream(Stream* s);

// Queues `op` on `s` (into its capture when it captures); CUDA_SUCCESS or the capture's error.
CUresult enqueue(Stream* s, Op op);
// Blocks the caller until `s` has run everything queued on it so far.
void wait_stream(std::unique_lock<std::mutex>& lock, Stream* s);
void wait_context(std::unique_lock<std::mutex>& lock, Context* c);

// Blocks that fit on one SM of `d` for a launch of `threads` threads and `smem` bytes of shared
// memory per block, by each resource; 0 when one block does not fit.
int blocks_that_fit(const Device& d, const KernelSpec& k, int threads, int dynamic_smem);

// Capture mode (cuThreadExchangeStreamCaptureMode) of the calling thread.
CUstreamCaptureMode& thread_capture_mode();
// Whether an unsafe call (a synchronous allocation, free or copy, a context synchronisation) is
// forbidden on this thread now; if so the captures that forbid it are invalidated.
bool unsafe_forbidden();

void start_device(Device& d);

// The record (CONCORD_STANDIN_RECORD): one JSON object per line.
void record_line(const std::string& json);
void record_error(const char* call, CUresult r, const std::string& detail = "");
std::string json_escape(const std::string& s);

// Fault injection for tests (CONCORD_STANDIN_THROW=<call>[:after=N]): throws std::bad_alloc.
void maybe_throw(const char* call);

}  // namespace standin
