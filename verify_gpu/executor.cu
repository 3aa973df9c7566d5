// The CUDA executor: issues a GpuPlan's commands on CUDA streams (ranks share one device), holds
// every stream behind a gate kernel until all commands are issued, and measures item times with
// events and each rank's peak with its memory pool's used-memory high-water mark.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "executor.h"

namespace sc::gpu {
namespace {

// A failed CUDA or cuBLAS call: file, line, the call and the library's message.
struct CudaFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The device has too little free memory for the plan's pools and staging buffers.
struct TooLittleMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string where(const char* file, int line, const char* call) {
  return std::string(file) + ":" + std::to_string(line) + ": " + call + ": ";
}

#define SC_CUDA(call)                                                                     \
  do {                                                                                    \
    cudaError_t sc_e_ = (call);                                                           \
    if (sc_e_ != cudaSuccess)                                                             \
      throw CudaFailure(where(__FILE__, __LINE__, #call) + cudaGetErrorString(sc_e_));    \
  } while (0)

// cuBLAS is loaded only for --kernels gemm (dlopen): linking it would add a quarter second to
// every start of schedcheck.
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  GemmEx gemm_ex = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;

  void load() {
    if (create) return;
    void* h = nullptr;
    for (const char* name : {"libcublas.so.13", "libcublas.so"})
      if ((h = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!h) throw CudaFailure(std::string("cannot load cuBLAS for --kernels gemm: ") + dlerror());
    create = reinterpret_cast<decltype(create)>(dlsym(h, "cublasCreate_v2"));
    destroy = reinterpret_cast<decltype(destroy)>(dlsym(h, "cublasDestroy_v2"));
    set_stream = reinterpret_cast<decltype(set_stream)>(dlsym(h, "cublasSetStream_v2"));
    gemm_ex = reinterpret_cast<decltype(gemm_ex)>(dlsym(h, "cublasGemmEx"));
    status_string = reinterpret_cast<decltype(status_string)>(dlsym(h, "cublasGetStatusString"));
    if (!create || !destroy || !set_stream || !gemm_ex || !status_string)
      throw CudaFailure("cuBLAS lacks cublasCreate_v2, cublasSetStream_v2, cublasGemmEx or cublasGetStatusString");
  }
};
Cublas cublas;

#define SC_CUBLAS(call)                                                                    \
  do {                                                                                     \
    cublasStatus_t sc_s_ = (call);                                                         \
    if (sc_s_ != CUBLAS_STATUS_SUCCESS)                                                    \
      throw CudaFailure(where(__FILE__, __LINE__, #call) + cublas.status_string(sc_s_));   \
  } while (0)

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins one thread for `ns` nanoseconds of the global timer: a compute op that lasts its cost
// and occupies one SM slot, so ops of different ranks run side by side.
__global__ void spin_kernel(uint64_t ns) {
  uint64_t t0 = global_timer_ns();
  while (global_timer_ns() - t0 < ns) {
  }
}

// Writes the global timer to slots[item]: where a held copy starts.
__global__ void stamp_kernel(uint64_t* slots, int item) { slots[item] = global_timer_ns(); }

// Spins until slots[item] + ns: pads a copy to its link time (returns at once when the copy
// was slower).
__global__ void pad_kernel(const uint64_t* slots, int item, uint64_t ns) {
  uint64_t until = slots[item] + ns;
  while (global_timer_ns() < until) {
  }
}

// Correctness pass: takes a ticket from one global counter at an item's begin or end.
__global__ void mark_kernel(unsigned long long* counter, long long* tickets, int* runs, int item, int begin) {
  long long t = static_cast<long long>(atomicAdd(counter, 1ULL));
  tickets[item] = t;
  if (begin) atomicAdd(&runs[item], 1);
}

// Holds its stream until the host sets *flag (all commands issued), or `timeout_ns` passed
// (then *timed_out is set and the run is reported as disturbed by issue time).
__global__ void gate_kernel(volatile int* flag, volatile int* timed_out, uint64_t timeout_ns) {
  uint64_t t0 = global_timer_ns();
  while (*flag == 0) {
    if (global_timer_ns() - t0 > timeout_ns) {
      *timed_out = 1;
      return;
    }
  }
}

__global__ void empty_kernel() {}

// Reads the timer `n` times; out[0] = elapsed, out[1] = smallest non-zero step seen.
__global__ void timer_kernel(int n, uint64_t* out) {
  uint64_t first = global_timer_ns(), prev = first, step = ~0ull;
  for (int i = 0; i < n; ++i) {
    uint64_t t = global_timer_ns();
    if (t != prev && t - prev < step) step = t - prev;
    prev = t;
  }
  out[0] = prev - first;
  out[1] = step;
}

uint64_t to_ns(double s) { return s <= 0 ? 0 : static_cast<uint64_t>(std::llround(s * 1e9)); }

class Runner {
 public:
  Runner(const GpuPlan& plan, const ExecOptions& o) : plan_(plan), o_(o) {}

  ~Runner() { release(); }

  ExecOutcome run() {
    ExecOutcome out;
    Measurement& m = out.measurement;
    m.kernels = o_.kernels;
    m.warmup_runs = o_.warmup;
    setup(m.calibration);
    calibrate(m.calibration);

    // Untimed correctness pass: tickets per item, then the happens-before check.
    if (!issue_and_wait(true, &out)) return out;
    Tickets tk;
    size_t n = plan_.items.size();
    tk.begin_ticket.resize(n);
    tk.end_ticket.resize(n);
    tk.runs.resize(n);
    SC_CUDA(cudaMemcpy(tk.begin_ticket.data(), d_begin_, n * sizeof(long long), cudaMemcpyDeviceToHost));
    SC_CUDA(cudaMemcpy(tk.end_ticket.data(), d_end_, n * sizeof(long long), cudaMemcpyDeviceToHost));
    SC_CUDA(cudaMemcpy(tk.runs.data(), d_runs_, n * sizeof(int), cudaMemcpyDeviceToHost));
    std::vector<int64_t> leaked(plan_.num_ranks, 0);
    for (int32_t r = 0; r < plan_.num_ranks; ++r) leaked[r] = pool_attr(r, cudaMemPoolAttrUsedMemCurrent);
    m.correctness_problems = check_execution(plan_, tk, leaked);

    for (int32_t w = 0; w < o_.warmup; ++w)
      if (!issue_and_wait(false, &out)) return out;

    struct Run {
      double makespan_s;
      std::vector<ItemTime> items;
      std::vector<int64_t> peak, reserved;
    };
    std::vector<Run> runs;
    for (int32_t k = 0; k < std::max(1, o_.repeat); ++k) {
      for (int32_t r = 0; r < plan_.num_ranks; ++r) reset_pool_highs(r);
      if (!issue_and_wait(false, &out)) return out;
      Run run;
      run.items = read_times();
      double lo = 1e300, hi = -1e300;
      for (size_t i = 0; i < plan_.num_ops; ++i) {
        lo = std::min(lo, run.items[i].start_s);
        hi = std::max(hi, run.items[i].end_s);
      }
      run.makespan_s = plan_.num_ops ? hi - lo : 0;
      for (int32_t r = 0; r < plan_.num_ranks; ++r) {
        run.peak.push_back(pool_attr(r, cudaMemPoolAttrUsedMemHigh));
        run.reserved.push_back(pool_attr(r, cudaMemPoolAttrReservedMemHigh));
      }
      m.makespan_per_repeat_s.push_back(run.makespan_s);
      runs.push_back(std::move(run));
    }
    std::vector<size_t> idx(runs.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return runs[a].makespan_s < runs[b].makespan_s; });
    Run& med = runs[idx[(idx.size() - 1) / 2]];
    m.items = std::move(med.items);
    m.peak_bytes_per_rank = med.peak;
    m.reserved_peak_bytes_per_rank = med.reserved;
    if (gate_timeouts_ > 0)
      m.correctness_problems.push_back("the gate timed out before every command was issued in " +
                                       std::to_string(gate_timeouts_) + " run(s): host issue time shows in the timeline");
    out.ok = true;
    return out;
  }

 private:
  void setup(Calibration& cal) {
    int count = 0;
    SC_CUDA(cudaGetDeviceCount(&count));
    SC_CUDA(cudaSetDevice(o_.device));
    cudaDeviceProp prop{};
    SC_CUDA(cudaGetDeviceProperties(&prop, o_.device));
    cal.device_name = prop.name;
    cal.device = o_.device;
    cal.compute_capability = prop.major * 10 + prop.minor;
    // Every rank's pool at its planned peak (plus 2 MiB per live buffer of rounding) and the
    // staging buffers must fit in the device's free memory.
    size_t free_bytes = 0, total_bytes = 0;
    SC_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    double need = 0;
    for (int32_t r = 0; r < plan_.num_ranks; ++r)
      need += static_cast<double>(plan_.expected_peak_bytes_per_rank[r]) + (2 << 20) * plan_.max_live_buffers_per_rank[r] +
              plan_.send_staging_bytes[r] + plan_.recv_staging_bytes[r];
    if (need > static_cast<double>(free_bytes))
      throw TooLittleMemory("the plan needs " + std::to_string(need / (1 << 30)) + " GiB on device " +
                            std::to_string(o_.device) + " (" + prop.name + "), which has " +
                            std::to_string(static_cast<double>(free_bytes) / (1 << 30)) + " GiB free (exit 69)");

    streams_.resize(plan_.streams.size());
    for (auto& s : streams_) SC_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    SC_CUDA(cudaStreamCreateWithFlags(&gate_stream_, cudaStreamNonBlocking));
    events_.resize(plan_.events.size());
    for (size_t e = 0; e < events_.size(); ++e)
      SC_CUDA(cudaEventCreateWithFlags(&events_[e], plan_.events[e].timing ? cudaEventDefault : cudaEventDisableTiming));
    SC_CUDA(cudaEventCreate(&t0_));
    SC_CUDA(cudaEventCreateWithFlags(&gate_event_, cudaEventDisableTiming));
    SC_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&h_flags_), 2 * sizeof(int), cudaHostAllocMapped));
    SC_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d_flags_), h_flags_, 0));

    // One pool per rank on the device; it keeps its memory between runs (release threshold max).
    pools_.resize(plan_.num_ranks);
    for (auto& pool : pools_) {
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = o_.device;
      SC_CUDA(cudaMemPoolCreate(&pool, &props));
      uint64_t keep = UINT64_MAX;
      SC_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    }
    ptrs_.assign(plan_.buffers.size(), nullptr);

    // Staging buffers for messages (outside the pools) and per-item device slots.
    send_.assign(plan_.num_ranks, nullptr);
    recv_.assign(plan_.num_ranks, nullptr);
    for (int32_t r = 0; r < plan_.num_ranks; ++r) {
      if (plan_.send_staging_bytes[r] > 0) SC_CUDA(cudaMalloc(&send_[r], plan_.send_staging_bytes[r]));
      if (plan_.recv_staging_bytes[r] > 0) SC_CUDA(cudaMalloc(&recv_[r], plan_.recv_staging_bytes[r]));
    }
    size_t n = std::max<size_t>(1, plan_.items.size());
    SC_CUDA(cudaMalloc(&d_slots_, n * sizeof(uint64_t)));
    SC_CUDA(cudaMalloc(&d_begin_, n * sizeof(long long)));
    SC_CUDA(cudaMalloc(&d_end_, n * sizeof(long long)));
    SC_CUDA(cudaMalloc(&d_runs_, n * sizeof(int)));
    SC_CUDA(cudaMalloc(&d_counter_, sizeof(unsigned long long)));

    if (o_.kernels == "gemm") {
      cublas.load();
      handles_.assign(plan_.streams.size(), nullptr);
      for (size_t s = 0; s < streams_.size(); ++s) {
        SC_CUBLAS(cublas.create(&handles_[s]));
        SC_CUBLAS(cublas.set_stream(handles_[s], streams_[s]));
      }
      SC_CUDA(cudaMalloc(&gemm_a_, kGemmMax * kGemmMax * sizeof(__nv_bfloat16)));
      SC_CUDA(cudaMalloc(&gemm_b_, kGemmMax * kGemmMax * sizeof(__nv_bfloat16)));
      SC_CUDA(cudaMalloc(&gemm_c_, kGemmMax * kGemmMax * sizeof(__nv_bfloat16)));
      SC_CUDA(cudaMemset(gemm_a_, 0, kGemmMax * kGemmMax * sizeof(__nv_bfloat16)));
      SC_CUDA(cudaMemset(gemm_b_, 0, kGemmMax * kGemmMax * sizeof(__nv_bfloat16)));
    }
  }

  // Times `fn` (which enqueues on `s`) with events; seconds.
  template <typename F>
  double time_on(cudaStream_t s, F fn) {
    cudaEvent_t a, b;
    SC_CUDA(cudaEventCreate(&a));
    SC_CUDA(cudaEventCreate(&b));
    SC_CUDA(cudaEventRecord(a, s));
    fn();
    SC_CUDA(cudaEventRecord(b, s));
    SC_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    SC_CUDA(cudaEventElapsedTime(&ms, a, b));
    SC_CUDA(cudaEventDestroy(a));
    SC_CUDA(cudaEventDestroy(b));
    return ms * 1e-3;
  }

  void calibrate(Calibration& cal) {
    cudaStream_t s = gate_stream_;
    // Launch latency: back-to-back empty kernels (after a warm-up batch).
    for (int i = 0; i < 100; ++i) empty_kernel<<<1, 1, 0, s>>>();
    SC_CUDA(cudaGetLastError());
    const int kLaunches = 1000;
    cal.launch_latency_s = time_on(s, [&] {
      for (int i = 0; i < kLaunches; ++i) empty_kernel<<<1, 1, 0, s>>>();
    }) / kLaunches;
    // Timer: overhead per read and resolution.
    uint64_t* d_out = nullptr;
    SC_CUDA(cudaMalloc(&d_out, 2 * sizeof(uint64_t)));
    const int kReads = 100000;
    timer_kernel<<<1, 1, 0, s>>>(kReads, d_out);
    SC_CUDA(cudaGetLastError());
    uint64_t h[2] = {0, 0};
    SC_CUDA(cudaMemcpyAsync(h, d_out, sizeof(h), cudaMemcpyDeviceToHost, s));
    SC_CUDA(cudaStreamSynchronize(s));
    SC_CUDA(cudaFree(d_out));
    cal.timer_overhead_s = static_cast<double>(h[0]) / kReads * 1e-9;
    cal.timer_resolution_s = h[1] == ~0ull ? 0 : static_cast<double>(h[1]) * 1e-9;
    // Copy bandwidth: device-to-device copies of the largest message (64 MiB when none).
    int64_t bytes = 0;
    for (int32_t r = 0; r < plan_.num_ranks; ++r) bytes = std::max(bytes, plan_.send_staging_bytes[r]);
    if (bytes <= 0) bytes = 64ll << 20;
    void *a = nullptr, *b = nullptr;
    SC_CUDA(cudaMalloc(&a, bytes));
    SC_CUDA(cudaMalloc(&b, bytes));
    SC_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
    const int kCopies = 20;
    double t = time_on(s, [&] {
      for (int i = 0; i < kCopies; ++i) SC_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
    });
    cal.copy_bandwidth_bytes_per_s = t > 0 ? static_cast<double>(bytes) * kCopies / t : 0;
    SC_CUDA(cudaFree(a));
    SC_CUDA(cudaFree(b));
    // Pool rounding: what a 1-byte allocation adds to used memory.
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = o_.device;
    cudaMemPool_t pool;
    SC_CUDA(cudaMemPoolCreate(&pool, &props));
    void* p = nullptr;
    SC_CUDA(cudaMallocFromPoolAsync(&p, 1, pool, s));
    uint64_t used = 0;
    SC_CUDA(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
    SC_CUDA(cudaFreeAsync(p, s));
    SC_CUDA(cudaStreamSynchronize(s));
    SC_CUDA(cudaMemPoolDestroy(pool));
    cal.pool_rounding_bytes = static_cast<int64_t>(std::max<uint64_t>(used, 1));
    if (o_.kernels == "gemm") {
      const int n = 4096;
      gemm(0, s, n);  // warm-up (loads the kernel)
      double g = time_on(s, [&] {
        for (int i = 0; i < 5; ++i) gemm(0, s, n);
      });
      cal.gemm_flops_per_s = g > 0 ? 2.0 * n * n * n * 5 / g : 0;
      gemm_flops_per_s_ = cal.gemm_flops_per_s;
    }
  }

  static constexpr int kGemmMax = 16384;

  void gemm(size_t stream, cudaStream_t s, int n) {
    cublasHandle_t h = handles_[stream];
    SC_CUBLAS(cublas.set_stream(h, s));
    float alpha = 1, beta = 0;
    SC_CUBLAS(cublas.gemm_ex(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, gemm_a_, CUDA_R_16BF, n, gemm_b_, CUDA_R_16BF, n,
                           &beta, gemm_c_, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  // A square bf16 GEMM of about `seconds` at the measured throughput: n = cbrt(flops / 2),
  // rounded to a multiple of 64 in [64, kGemmMax].
  int gemm_size(double seconds) const {
    double flops = seconds * gemm_flops_per_s_;
    int n = static_cast<int>(std::lround(std::cbrt(flops / 2) / 64.0)) * 64;
    return std::clamp(n, 64, kGemmMax);
  }

  void issue(bool mark) {
    h_flags_[0] = 0;
    h_flags_[1] = 0;
    if (mark) {
      SC_CUDA(cudaMemsetAsync(d_counter_, 0, sizeof(unsigned long long), gate_stream_));
      SC_CUDA(cudaMemsetAsync(d_runs_, 0, std::max<size_t>(1, plan_.items.size()) * sizeof(int), gate_stream_));
    }
    gate_kernel<<<1, 1, 0, gate_stream_>>>(d_flags_, d_flags_ + 1, to_ns(kGateTimeoutS));
    SC_CUDA(cudaGetLastError());
    SC_CUDA(cudaEventRecord(t0_, gate_stream_));
    SC_CUDA(cudaEventRecord(gate_event_, gate_stream_));
    for (auto& s : streams_) SC_CUDA(cudaStreamWaitEvent(s, gate_event_, 0));
    for (const Command& c : plan_.commands) {
      cudaStream_t s = streams_[c.stream];
      switch (c.kind) {
        case CmdKind::kWait:
          SC_CUDA(cudaStreamWaitEvent(s, events_[c.event], 0));
          break;
        case CmdKind::kRecord: {
          const PlanEvent& e = plan_.events[c.event];
          if (mark && e.timing && !e.is_start) mark_kernel<<<1, 1, 0, s>>>(d_counter_, d_end_, d_runs_, e.item, 0);
          SC_CUDA(cudaEventRecord(events_[c.event], s));
          if (mark && e.timing && e.is_start) mark_kernel<<<1, 1, 0, s>>>(d_counter_, d_begin_, d_runs_, e.item, 1);
          break;
        }
        case CmdKind::kAlloc: {
          const PlanBuffer& b = plan_.buffers[c.buffer];
          SC_CUDA(cudaMallocFromPoolAsync(&ptrs_[c.buffer], static_cast<size_t>(b.bytes), pools_[b.rank], s));
          break;
        }
        case CmdKind::kFree:
          SC_CUDA(cudaFreeAsync(ptrs_[c.buffer], s));
          ptrs_[c.buffer] = nullptr;
          break;
        case CmdKind::kSpin:
          if (!handles_.empty() && c.duration_s > 0) gemm(c.stream, s, gemm_size(c.duration_s));
          else spin_kernel<<<1, 1, 0, s>>>(to_ns(c.duration_s));
          break;
        case CmdKind::kCopy:
          stamp_kernel<<<1, 1, 0, s>>>(d_slots_, c.item);
          if (c.bytes > 0 && send_[c.src_rank] && recv_[c.dst_rank])
            SC_CUDA(cudaMemcpyAsync(recv_[c.dst_rank], send_[c.src_rank], static_cast<size_t>(c.bytes),
                                    cudaMemcpyDeviceToDevice, s));
          pad_kernel<<<1, 1, 0, s>>>(d_slots_, c.item, to_ns(c.duration_s));
          break;
      }
    }
    SC_CUDA(cudaGetLastError());
  }

  // Issues one run, opens the gate, and waits for every stream under the watchdog. False (with
  // `out->error` set) when the watchdog fired.
  bool issue_and_wait(bool mark, ExecOutcome* out) {
    issue(mark);
    __atomic_store_n(&h_flags_[0], 1, __ATOMIC_SEQ_CST);
    std::vector<cudaEvent_t> done(streams_.size());
    for (size_t s = 0; s < streams_.size(); ++s) {
      SC_CUDA(cudaEventCreateWithFlags(&done[s], cudaEventDisableTiming));
      SC_CUDA(cudaEventRecord(done[s], streams_[s]));
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o_.watchdog_s);
    bool finished = false;
    while (!finished) {
      finished = true;
      for (auto& e : done) {
        cudaError_t q = cudaEventQuery(e);
        if (q == cudaErrorNotReady) {
          finished = false;
          break;
        }
        SC_CUDA(q);
      }
      if (finished) break;
      if (std::chrono::steady_clock::now() > deadline) {
        out->error = {ExecFailure::kHang, hang_report()};
        hung_ = true;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    for (auto& e : done) SC_CUDA(cudaEventDestroy(e));
    if (h_flags_[1]) ++gate_timeouts_;
    return true;
  }

  // The first item on each stream whose end event has not completed.
  std::string hang_report() {
    std::string msg = "the run did not finish within " + std::to_string(o_.watchdog_s) + " s (watchdog); stuck at:";
    std::vector<int> reported(streams_.size(), 0);
    for (size_t i = 0; i < plan_.items.size(); ++i) {
      const Item& it = plan_.items[i];
      if (reported[it.stream]) continue;
      if (cudaEventQuery(events_[it.end_event]) == cudaErrorNotReady) {
        reported[it.stream] = 1;
        msg += " " + plan_.streams[it.stream].name + ": " + it.label + ";";
      }
    }
    return msg;
  }

  std::vector<ItemTime> read_times() {
    std::vector<ItemTime> t(plan_.items.size());
    double first = 1e300;
    for (size_t i = 0; i < plan_.items.size(); ++i) {
      float a = 0, b = 0;
      SC_CUDA(cudaEventElapsedTime(&a, t0_, events_[plan_.items[i].start_event]));
      SC_CUDA(cudaEventElapsedTime(&b, t0_, events_[plan_.items[i].end_event]));
      t[i] = {a * 1e-3, b * 1e-3};
      if (i < plan_.num_ops) first = std::min(first, t[i].start_s);
    }
    if (first > 1e299) first = 0;
    for (auto& x : t) {
      x.start_s -= first;
      x.end_s -= first;
    }
    return t;
  }

  int64_t pool_attr(int32_t rank, cudaMemPoolAttr attr) {
    uint64_t v = 0;
    SC_CUDA(cudaMemPoolGetAttribute(pools_[rank], attr, &v));
    return static_cast<int64_t>(v);
  }

  void reset_pool_highs(int32_t rank) {
    uint64_t zero = 0;
    SC_CUDA(cudaMemPoolSetAttribute(pools_[rank], cudaMemPoolAttrUsedMemHigh, &zero));
    SC_CUDA(cudaMemPoolSetAttribute(pools_[rank], cudaMemPoolAttrReservedMemHigh, &zero));
  }

  // Frees what was created (not after a hang: kernels may still spin; the process exit ends them).
  void release() {
    if (hung_) return;
    cudaDeviceSynchronize();
    for (auto h : handles_)
      if (h) cublas.destroy(h);
    for (void* p : ptrs_)
      if (p) cudaFree(p);
    for (auto& pool : pools_) cudaMemPoolDestroy(pool);
    for (void* p : send_) cudaFree(p);
    for (void* p : recv_) cudaFree(p);
    cudaFree(d_slots_);
    cudaFree(d_begin_);
    cudaFree(d_end_);
    cudaFree(d_runs_);
    cudaFree(d_counter_);
    cudaFree(gemm_a_);
    cudaFree(gemm_b_);
    cudaFree(gemm_c_);
    for (auto& e : events_) cudaEventDestroy(e);
    if (t0_) cudaEventDestroy(t0_);
    if (gate_event_) cudaEventDestroy(gate_event_);
    for (auto& s : streams_) cudaStreamDestroy(s);
    if (gate_stream_) cudaStreamDestroy(gate_stream_);
    if (h_flags_) cudaFreeHost(h_flags_);
  }

  static constexpr double kGateTimeoutS = 10;

  const GpuPlan& plan_;
  ExecOptions o_;
  std::vector<cudaStream_t> streams_;
  cudaStream_t gate_stream_ = nullptr;
  std::vector<cudaEvent_t> events_;
  cudaEvent_t t0_ = nullptr, gate_event_ = nullptr;
  int* h_flags_ = nullptr;
  int* d_flags_ = nullptr;
  std::vector<cudaMemPool_t> pools_;
  std::vector<void*> ptrs_, send_, recv_;
  uint64_t* d_slots_ = nullptr;
  long long *d_begin_ = nullptr, *d_end_ = nullptr;
  int* d_runs_ = nullptr;
  unsigned long long* d_counter_ = nullptr;
  std::vector<cublasHandle_t> handles_;
  void *gemm_a_ = nullptr, *gemm_b_ = nullptr, *gemm_c_ = nullptr;
  double gemm_flops_per_s_ = 0;
  int gate_timeouts_ = 0;
  bool hung_ = false;
};

}  // namespace

bool cuda_executor_built() { return true; }

ExecOutcome execute_plan(const GpuPlan& plan, const ExecOptions& options) {
  ExecOutcome out;
  // More hardware queues than CUDA's default 8, so streams of different ranks do not falsely
  // serialize (must be set before the first CUDA call; a user's setting wins).
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    out.error = {ExecFailure::kNoDevice, std::string("no CUDA device to run on (") +
                                             (e != cudaSuccess ? cudaGetErrorString(e) : "no device found") + ") (exit 69)"};
    return out;
  }
  if (options.device < 0 || options.device >= count) {
    out.error = {ExecFailure::kNoDevice, "no CUDA device " + std::to_string(options.device) + " (this machine has " +
                                             std::to_string(count) + ") (exit 69)"};
    return out;
  }
  try {
    Runner r(plan, options);
    return r.run();
  } catch (const TooLittleMemory& f) {
    out.ok = false;
    out.error = {ExecFailure::kNoDevice, f.what()};
    return out;
  } catch (const CudaFailure& f) {
    out.ok = false;
    out.error = {ExecFailure::kCuda, f.what()};
    return out;
  }
}

}  // namespace sc::gpu
