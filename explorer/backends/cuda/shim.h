// shim.h: what generated CUDA C needs to compile and run as C++ on the host.
//
// Force-included (g++ -include shim.h) before the generated source, which is compiled
// unchanged; explorer/backends/cuda/emulate.py appends a driver with one entry per launch.
//
// Execution model (emulate.py's docstring has the whole story):
// - every CUDA thread of a block is an OS thread or, compiled with -DEXPLORER_EMU_FIBERS
//   (emulate.py's default), a fiber of one OS thread, switched at barriers; either way
//   all threads of a block are alive at once, blocks run one after the other on the
//   same threads, and every thread ends each block at a barrier;
// - threadIdx/blockIdx are per thread; blockDim/gridDim are set once per launch;
// - __shared__ is `static`: one copy, used by the block that runs;
// - __syncthreads() is a barrier among the block's threads; a warp shuffle writes the
//   lane's value into a per-warp slot, waits for the lanes of its mask, then reads
//   (lane = linear thread id % 32);
// - a barrier some threads never reach (they wait at another one, or finished the
//   kernel) is found as soon as threads disagree on it or all of them wait: the launch
//   stops with a message naming the kernel, the block and where each group waits;
// - a fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL) in a kernel thread stops the launch with a
//   message naming the kernel, block, thread and address.
#pragma once

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef EXPLORER_EMU_FIBERS
#include <ucontext.h>
#else
#include <linux/futex.h>
#endif

#include <atomic>
#include <cmath>
#include <mutex>
#include <type_traits>
#include <utility>

// ---------------------------------------------------------------- keywords
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static
#define __constant__ static const
// g++ knows __restrict__ natively.

// extern __shared__ pools (dynamic shared memory): the launch's pool, allocated per launch.
#define EXPLORER_DYNAMIC_SHARED(T, name) T* const name = reinterpret_cast<T*>(::explorer_emu::dynamic_pool)

// ---------------------------------------------------------------- vector types
struct __align__(8) float2 { float x, y; };
struct __align__(16) float4 { float x, y, z, w; };
struct __align__(8) int2 { int x, y; };
struct __align__(16) int4 { int x, y, z, w; };
struct __align__(16) double2 { double x, y; };
struct uint3 { unsigned int x, y, z; };
struct dim3 { unsigned int x, y, z; };

static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline int2 make_int2(int x, int y) { return int2{x, y}; }
static inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
static inline double2 make_double2(double x, double y) { return double2{x, y}; }

// ---------------------------------------------------------------- math
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
// Mixed argument types (min(threadIdx.x, n), min(long long, int)): the common type, as
// CUDA's overloads give.
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
static inline std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return (C)a < (C)b ? (C)a : (C)b;
}
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
static inline std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return (C)a > (C)b ? (C)a : (C)b;
}
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline float __fdividef(float a, float b) { return a / b; }

// ---------------------------------------------------------------- state
namespace explorer_emu {
namespace {

constexpr int kWarp = 32;
constexpr int kMaxThreads = 1024;
constexpr int kMaxWarps = kMaxThreads / kWarp;
// What a launch returns (emulate.py raises RaceError, BuildError, KernelFault for them).
constexpr int kDone = 0, kDivergent = 1, kBadLaunch = 2, kFault = 3;
constexpr int kEnd = INT_MIN;     // "site" of the barrier every thread reaches at a block's end

unsigned char* dynamic_pool = nullptr;   // the launch's dynamic shared memory, or none

struct Abort {};                  // thrown out of a barrier once the launch is stopped

// Lanes that shuffle together (one mask): disjoint groups of a warp sync independently.
struct Group {
  unsigned mask = 0;              // 0: slot free
  int count = 0, site = 0;
};

struct Warp {
  int lanes = 0;                  // lanes that exist (the last warp of a block may be partial)
  Group groups[kWarp];
  std::atomic<uint32_t> gen[kWarp];   // per lane: moves when the lane's group completes
  unsigned long long slots[2][kWarp];
};

struct Block {
  std::mutex mu;                  // guards the counts below (uncontended with fibers)
  const char* kernel = "";
  int nthreads = 0;
  int count = 0, site = 0;        // the block barrier now filling
  int blocked = 0;                // threads waiting at any barrier (block or warp)
  std::atomic<uint32_t> gen{0};
  std::atomic<bool> abort{false};
  int status = kDone;
  int where[kMaxThreads];         // where each waits: >0 __syncthreads line, kEnd, <0 -shuffle line
  Warp warps[kMaxWarps];
  char msg[2048];
};

Block blk;

struct Thread {
  uint3 tid, bid;
  int linear = 0, lane = 0, warp = 0, phase = 0;
  bool in_kernel = false;
  int sig = 0;
  void* addr = nullptr;
#ifdef EXPLORER_EMU_FIBERS
  ucontext_t ctx;
  bool done = false;
#else
  sigjmp_buf jmp;
#endif
};

#ifdef EXPLORER_EMU_FIBERS
Thread* fibers = nullptr;         // the launch's fibers
Thread* cur = nullptr;            // the fiber running now
thread_local bool on_executor = false;
#define EXPLORER_EMU_SELF (*::explorer_emu::cur)
#else
thread_local Thread self;
#define EXPLORER_EMU_SELF (::explorer_emu::self)
#endif

}  // namespace
}  // namespace explorer_emu

#define threadIdx (EXPLORER_EMU_SELF.tid)
#define blockIdx (EXPLORER_EMU_SELF.bid)
static dim3 blockDim;
static dim3 gridDim;

// ---------------------------------------------------------------- barriers
namespace explorer_emu {
namespace {

#ifdef EXPLORER_EMU_FIBERS
ucontext_t executor_ctx;
sigjmp_buf executor_jmp;

// Runs the next fiber that has not finished (round robin); back here when it yields.
void yield() {
  Thread* me = cur;
  for (int i = 1; i <= blk.nthreads; ++i) {
    Thread* next = &fibers[(me->linear + i) % blk.nthreads];
    if (!next->done) {
      if (next == me) return;
      cur = next;
      swapcontext(&me->ctx, &next->ctx);
      cur = me;
      asm volatile("" ::: "memory");
      return;
    }
  }
}
void wake_all(std::atomic<uint32_t>&) {}
void sleep_while(std::atomic<uint32_t>& gen, uint32_t old) {
  while (gen.load() == old && !blk.abort.load()) yield();
}
#else
void wake_all(std::atomic<uint32_t>& gen) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&gen), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}
void sleep_while(std::atomic<uint32_t>& gen, uint32_t old) {
  static_assert(sizeof(std::atomic<uint32_t>) == 4, "futex words are 32 bits");
  while (gen.load(std::memory_order_acquire) == old)
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&gen), FUTEX_WAIT_PRIVATE, old, nullptr, nullptr, 0);
}
#endif

void describe_site(char* out, size_t n, int site) {
  if (site == kEnd) snprintf(out, n, "the end of the kernel");
  else if (site > 0) snprintf(out, n, "__syncthreads() at line %d", site);
  else snprintf(out, n, "a warp shuffle at line %d", -site);
}

// Stops the launch: records `msg` (the first reason wins) and wakes every waiting thread.
// Caller holds blk.mu.
void abort_locked(const char* msg, int status = kDivergent) {
  if (!blk.abort.load()) {
    snprintf(blk.msg, sizeof blk.msg, "%s", msg);
    blk.status = status;
    blk.abort.store(true);
  }
  blk.gen.fetch_add(1);
  wake_all(blk.gen);
  for (Warp& w : blk.warps)
    for (auto& g : w.gen) { g.fetch_add(1); wake_all(g); }
}

[[noreturn]] void stop(const char* msg) {
  abort_locked(msg);
  throw Abort{};
}

// Every thread of the block waits and none can go on: say where each group waits.
void report_deadlock_locked() {
  char msg[2048];
  int n = snprintf(msg, sizeof msg,
                   "kernel %s, block (%u, %u, %u): a barrier not every thread reaches "
                   "(the %d threads of the block wait at different places:",
                   blk.kernel, blockIdx.x, blockIdx.y, blockIdx.z, blk.nthreads);
  static bool seen[kMaxThreads];
  memset(seen, 0, sizeof seen);
  for (int t = 0; t < blk.nthreads && n < (int)sizeof msg - 200; ++t) {
    if (seen[t]) continue;
    int site = blk.where[t], count = 0;
    for (int u = t; u < blk.nthreads; ++u)
      if (blk.where[u] == site) { seen[u] = true; ++count; }
    char what[96];
    describe_site(what, sizeof what, site);
    n += snprintf(msg + n, sizeof msg - n, " %d thread(s) from linear id %d at %s;", count, t, what);
  }
  snprintf(msg + n, sizeof msg - n, " every __syncthreads() must be reached by all threads "
           "of the block, and every shuffle by all lanes of its mask)");
  abort_locked(msg);
}

// The caller arrived at a barrier that is not complete: wait until `gen` moves past `old`.
void wait_locked(std::unique_lock<std::mutex>& lk, std::atomic<uint32_t>& gen, uint32_t old, int site) {
  blk.where[EXPLORER_EMU_SELF.linear] = site;
  if (++blk.blocked == blk.nthreads) report_deadlock_locked();
  lk.unlock();
  sleep_while(gen, old);
  if (blk.abort.load()) throw Abort{};
}

// The caller completed a barrier: let its `waiters` go.
void release_locked(std::atomic<uint32_t>& gen, int waiters) {
  blk.blocked -= waiters;
  gen.fetch_add(1, std::memory_order_release);
  wake_all(gen);
}

void block_barrier(int site) {
  std::unique_lock<std::mutex> lk(blk.mu);
  if (blk.abort.load()) throw Abort{};
  if (blk.count > 0 && blk.site != site) {
    char a[96], b[96], msg[512];
    describe_site(a, sizeof a, blk.site);
    describe_site(b, sizeof b, site);
    snprintf(msg, sizeof msg, "kernel %s, block (%u, %u, %u): a barrier not every thread "
             "reaches: %d thread(s) wait at %s while thread %d (linear id) reached %s; "
             "every __syncthreads() must be reached by all threads of the block",
             blk.kernel, blockIdx.x, blockIdx.y, blockIdx.z, blk.count, a,
             EXPLORER_EMU_SELF.linear, b);
    stop(msg);
  }
  blk.site = site;
  uint32_t old = blk.gen.load();
  if (++blk.count == blk.nthreads) {
    blk.count = 0;
    release_locked(blk.gen, blk.nthreads - 1);
    return;
  }
  wait_locked(lk, blk.gen, old, site);
}

// The group of `mask` this lane joins: the one filling now, or a new one; nullptr with
// `clash` set when the mask overlaps another group's.
Group* join_group(Warp& w, unsigned mask, Group** clash) {
  Group* free_slot = nullptr;
  for (Group& g : w.groups) {
    if (g.mask == mask) return &g;
    if (g.mask & mask) { *clash = &g; return nullptr; }
    if (!g.mask && !free_slot) free_slot = &g;
  }
  free_slot->mask = mask;        // at most 32 disjoint masks: a slot is always free
  free_slot->count = 0;
  return free_slot;
}

void warp_barrier(unsigned mask, int line) {
  Thread& me = EXPLORER_EMU_SELF;
  Warp& w = blk.warps[me.warp];
  std::unique_lock<std::mutex> lk(blk.mu);
  if (blk.abort.load()) throw Abort{};
  char msg[512];
  if (!((mask >> me.lane) & 1u)) {
    snprintf(msg, sizeof msg, "kernel %s, block (%u, %u, %u): lane %d of warp %d calls the "
             "shuffle at line %d with mask 0x%08x, which leaves it out",
             blk.kernel, blockIdx.x, blockIdx.y, blockIdx.z, me.lane, me.warp, line, mask);
    stop(msg);
  }
  Group* clash = nullptr;
  Group* g = join_group(w, mask, &clash);
  if (!g || (g->count > 0 && g->site != -line)) {
    Group* other = g ? g : clash;
    snprintf(msg, sizeof msg, "kernel %s, block (%u, %u, %u), warp %d: lanes disagree on "
             "the shuffle: %d lane(s) wait at line %d with mask 0x%08x, lane %d came to line "
             "%d with mask 0x%08x", blk.kernel, blockIdx.x, blockIdx.y, blockIdx.z, me.warp,
             other->count, -other->site, other->mask, me.lane, line, mask);
    stop(msg);
  }
  g->site = -line;
  unsigned exists = w.lanes == kWarp ? 0xffffffffu : ((1u << w.lanes) - 1u);
  unsigned members = mask & exists;
  uint32_t old = w.gen[me.lane].load();
  if (++g->count < __builtin_popcount(members)) {
    wait_locked(lk, w.gen[me.lane], old, -line);
    return;
  }
  g->mask = 0;
  blk.blocked -= g->count - 1;
  for (int l = 0; l < kWarp; ++l)
    if (((members >> l) & 1u) && l != me.lane) {
      w.gen[l].fetch_add(1, std::memory_order_release);
      wake_all(w.gen[l]);
    }
}

// ---------------------------------------------------------------- warp shuffles
// One value per lane through the warp's slots; `src` is the lane to read (-1: keep own).
template <class T>
T exchange(unsigned mask, T v, int src, int line) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                "warp shuffles move values of at most 8 bytes");
  Thread& me = EXPLORER_EMU_SELF;
  Warp& w = blk.warps[me.warp];
  int ph = me.phase;
  me.phase ^= 1;                 // two slot sets: the next shuffle cannot overwrite unread slots
  memcpy(&w.slots[ph][me.lane], &v, sizeof(T));
  warp_barrier(mask, line);
  if (src < 0 || src >= w.lanes || !((mask >> src) & 1u)) return v;
  T r;
  memcpy(&r, &w.slots[ph][src], sizeof(T));
  return r;
}

int lane() { return EXPLORER_EMU_SELF.lane; }
int segment_base(int width) { return (lane() / width) * width; }

template <class T> T shfl(int line, unsigned mask, T v, int src_lane, int width = kWarp) {
  return exchange(mask, v, segment_base(width) + ((src_lane % width + width) % width), line);
}
template <class T> T shfl_down(int line, unsigned mask, T v, unsigned delta, int width = kWarp) {
  bool inside = lane() % width + (int)delta < width;
  return exchange(mask, v, inside ? lane() + (int)delta : -1, line);
}
template <class T> T shfl_up(int line, unsigned mask, T v, unsigned delta, int width = kWarp) {
  bool inside = lane() % width - (int)delta >= 0;
  return exchange(mask, v, inside ? lane() - (int)delta : -1, line);
}
template <class T> T shfl_xor(int line, unsigned mask, T v, int lane_mask, int width = kWarp) {
  int src = lane() ^ lane_mask;
  return exchange(mask, v, src < segment_base(width) + width ? src : -1, line);
}
void syncwarp(int line, unsigned mask = 0xffffffffu) { warp_barrier(mask, line); }

}  // namespace
}  // namespace explorer_emu

#define __syncthreads() ::explorer_emu::block_barrier(__LINE__)
#define __syncwarp(...) ::explorer_emu::syncwarp(__LINE__, ##__VA_ARGS__)
#define __shfl_sync(...) ::explorer_emu::shfl(__LINE__, __VA_ARGS__)
#define __shfl_down_sync(...) ::explorer_emu::shfl_down(__LINE__, __VA_ARGS__)
#define __shfl_up_sync(...) ::explorer_emu::shfl_up(__LINE__, __VA_ARGS__)
#define __shfl_xor_sync(...) ::explorer_emu::shfl_xor(__LINE__, __VA_ARGS__)

// ---------------------------------------------------------------- faults
namespace explorer_emu {
namespace {

struct sigaction previous[65];
const int kFaults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};

bool in_emulated_kernel() {
#ifdef EXPLORER_EMU_FIBERS
  return on_executor && cur->in_kernel;
#else
  return self.in_kernel;
#endif
}

void on_fault(int sig, siginfo_t* info, void* context) {
  if (in_emulated_kernel()) {
    EXPLORER_EMU_SELF.sig = sig;
    EXPLORER_EMU_SELF.addr = info->si_addr;
#ifdef EXPLORER_EMU_FIBERS
    siglongjmp(executor_jmp, 1);
#else
    siglongjmp(self.jmp, 1);
#endif
  }
  struct sigaction& p = previous[sig];     // not an emulated thread: what was there before
  if (p.sa_flags & SA_SIGINFO) {
    p.sa_sigaction(sig, info, context);
  } else if (p.sa_handler == SIG_DFL || p.sa_handler == SIG_IGN) {
    signal(sig, SIG_DFL);                  // the faulting instruction runs again and kills
  } else {
    p.sa_handler(sig);
  }
}

// Once per module: each loaded module chains to the handler it found, so reinstalling
// would make two modules chain to each other.
void install_fault_handlers() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  for (int sig : kFaults) {
    struct sigaction mine;
    memset(&mine, 0, sizeof mine);
    mine.sa_sigaction = on_fault;
    mine.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&mine.sa_mask);
    sigaction(sig, &mine, &previous[sig]);
  }
}

void report_fault(Thread& t) {
  const char* what = t.sig == SIGSEGV ? "segmentation fault (an out-of-bounds access or a stack overflow)"
                   : t.sig == SIGBUS ? "bus error (a misaligned access)"
                   : t.sig == SIGFPE ? "arithmetic fault (an integer division by zero)"
                   : "illegal instruction";
  char msg[512];
  snprintf(msg, sizeof msg, "kernel %s, block (%u, %u, %u), thread (%u, %u, %u): %s at "
           "address %p", blk.kernel, t.bid.x, t.bid.y, t.bid.z, t.tid.x, t.tid.y, t.tid.z,
           what, t.addr);
  std::lock_guard<std::mutex> lk(blk.mu);
  abort_locked(msg, kFault);
}

// A signal stack for the calling thread, so that a stack overflow can be reported.
struct AltStack {
  stack_t ss;
  AltStack() {
    ss.ss_size = 64 * 1024;
    ss.ss_sp = malloc(ss.ss_size);
    ss.ss_flags = 0;
    sigaltstack(&ss, nullptr);
  }
  ~AltStack() {
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, nullptr);
    free(ss.ss_sp);
  }
};

// ---------------------------------------------------------------- launching
typedef void (*Body)(void**);

struct Launch {
  Body body;
  void** args;
  unsigned nblocks;
};

void init_thread(Thread& t, int linear) {
  t.linear = linear;
  t.lane = linear % kWarp;
  t.warp = linear / kWarp;
  t.phase = 0;
  t.in_kernel = false;
  t.tid.x = linear % blockDim.x;
  t.tid.y = (linear / blockDim.x) % blockDim.y;
  t.tid.z = linear / (blockDim.x * blockDim.y);
}

// What every CUDA thread runs: its part of each block, the blocks in turn.
void run_blocks(const Launch& L) {
  Thread& me = EXPLORER_EMU_SELF;
  try {
    for (unsigned b = 0; b < L.nblocks; ++b) {
      me.bid.x = b % gridDim.x;
      me.bid.y = (b / gridDim.x) % gridDim.y;
      me.bid.z = b / (gridDim.x * gridDim.y);
      me.in_kernel = true;
      L.body(L.args);
      me.in_kernel = false;
      block_barrier(kEnd);       // the next block must not start while this one still runs
    }
  } catch (const Abort&) {
  }
  me.in_kernel = false;
}

Launch* current_launch;

#ifdef EXPLORER_EMU_FIBERS
constexpr size_t kFiberStack = 512 * 1024;   // CUDA's limit of local memory per thread
unsigned char* fiber_stacks;      // the launch's stacks, each above a guard page

// Stacks for n fibers, mapped per launch (and unmapped after it: a process loads many
// modules, and the guard pages count against the kernel's limit of mappings).
bool map_stacks(int n) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  void* p = mmap(nullptr, kFiberStack * n, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  fiber_stacks = static_cast<unsigned char*>(p);
  for (int t = 0; t < n; ++t) mprotect(fiber_stacks + t * kFiberStack, page, PROT_NONE);
  return true;
}

void fiber_main() {
  run_blocks(*current_launch);
  cur->done = true;
  for (int i = 1; i < blk.nthreads; ++i) {        // run whoever has not finished
    Thread* next = &fibers[(cur->linear + i) % blk.nthreads];
    if (!next->done) {
      cur = next;
      setcontext(&next->ctx);
    }
  }
  setcontext(&executor_ctx);                       // everyone finished
}

void* executor(void*) {
  AltStack alt;
  on_executor = true;
  int n = blk.nthreads;
  for (int t = 0; t < n; ++t) {
    Thread& f = fibers[t];
    init_thread(f, t);
    f.done = false;
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = fiber_stacks + t * kFiberStack;
    f.ctx.uc_stack.ss_size = kFiberStack;
    f.ctx.uc_link = &executor_ctx;
    makecontext(&f.ctx, fiber_main, 0);
  }
  if (sigsetjmp(executor_jmp, 1) == 0) {
    cur = &fibers[0];
    swapcontext(&executor_ctx, &fibers[0].ctx);
  } else {
    cur->in_kernel = false;
    report_fault(*cur);            // the other fibers are dropped where they stand
  }
  on_executor = false;
  return nullptr;
}

bool start_threads(int n, char* err, int errlen) {
  if (!map_stacks(n)) {
    snprintf(err, errlen, "kernel %s: could not map %d fiber stacks", blk.kernel, n);
    return false;
  }
  fibers = new Thread[n];
  pthread_t th;
  bool started = pthread_create(&th, nullptr, executor, nullptr) == 0;
  if (started) pthread_join(th, nullptr);
  else snprintf(err, errlen, "kernel %s: could not start the emulator's thread", blk.kernel);
  delete[] fibers;
  fibers = cur = nullptr;
  munmap(fiber_stacks, kFiberStack * n);
  return started;
}
#else
void* worker(void* arg) {
  AltStack alt;
  init_thread(self, (int)(intptr_t)arg);
  if (sigsetjmp(self.jmp, 1) == 0) {
    run_blocks(*current_launch);
  } else {
    self.in_kernel = false;
    report_fault(self);
  }
  return nullptr;
}

bool start_threads(int n, char* err, int errlen) {
  static pthread_t threads[kMaxThreads];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 4u << 20);
  int started = 0;
  for (; started < n; ++started)
    if (pthread_create(&threads[started], &attr, worker, (void*)(intptr_t)started) != 0) break;
  pthread_attr_destroy(&attr);
  if (started < n) {
    std::lock_guard<std::mutex> lk(blk.mu);
    char msg[256];
    snprintf(msg, sizeof msg, "kernel %s: could not start thread %d of %d (pthread_create "
             "failed: too many threads or too little memory)", blk.kernel, started, n);
    abort_locked(msg, kFault);     // the started ones stop at their next barrier
  }
  for (int t = 0; t < started; ++t) pthread_join(threads[t], nullptr);
  return true;
}
#endif

std::mutex launch_mu;            // shared memory is static: one launch at a time

// Runs `body` on every thread of every block; 0 when done, 1 with `err` when stopped.
int launch(const char* kernel, dim3 grid, dim3 block, size_t dynamic_bytes, Body body,
           void** args, char* err, int errlen) {
  std::lock_guard<std::mutex> one_at_a_time(launch_mu);
  int n = (int)(block.x * block.y * block.z);
  if (n < 1 || n > kMaxThreads) {
    snprintf(err, errlen, "kernel %s: %d threads per block, the emulator runs 1 to %d", kernel, n, kMaxThreads);
    return kBadLaunch;
  }
  gridDim = grid;
  blockDim = block;
  blk.kernel = kernel;
  blk.nthreads = n;
  blk.count = 0;
  blk.blocked = 0;
  blk.abort.store(false);
  blk.status = kDone;
  blk.msg[0] = 0;
  for (int w = 0; w < kMaxWarps; ++w) {
    int lanes = n - w * kWarp;
    blk.warps[w].lanes = lanes < 0 ? 0 : (lanes > kWarp ? kWarp : lanes);
    for (Group& g : blk.warps[w].groups) g = Group{};
  }
  if (dynamic_bytes) {
    size_t rounded = (dynamic_bytes + 63) / 64 * 64;
    dynamic_pool = static_cast<unsigned char*>(aligned_alloc(64, rounded));
    memset(dynamic_pool, 0xff, rounded);   // reads before writes see NaN, not zeros
  }
  install_fault_handlers();
  Launch L{body, args, grid.x * grid.y * grid.z};
  current_launch = &L;
  bool ran = start_threads(n, err, errlen);
  free(dynamic_pool);
  dynamic_pool = nullptr;
  if (!ran) return kFault;
  if (blk.abort.load()) {
    snprintf(err, errlen, "%s", blk.msg);
    return blk.status;
  }
  return kDone;
}

// Whether kernel `f` takes exactly pointers to `Want...` (const or not), in this order.
template <class... Want, class... P>
constexpr bool params_are(void (*)(P...)) {
  if constexpr (sizeof...(Want) != sizeof...(P)) {
    return false;
  } else {
    return ((std::is_pointer_v<P> &&
             std::is_same_v<std::remove_cv_t<std::remove_pointer_t<P>>, Want>) && ...);
  }
}

// Calls kernel `f` with the buffers in `args`, each cast to the parameter's pointer type.
template <class... P, size_t... I>
void call_with(void (*f)(P...), void** args, std::index_sequence<I...>) {
  f(static_cast<P>(args[I])...);
}
template <class... P>
void call(void (*f)(P...), void** args) {
  call_with(f, args, std::index_sequence_for<P...>{});
}

}  // namespace
}  // namespace explorer_emu

#define EXPLORER_EMU_EXPORT extern "C" __attribute__((visibility("default")))
