// Per-op kernel timing (ZENITH_PROFILE=1 on the Python side). Off by default; when
// on, the runtime times each kernel call and adds it to a process-wide table, and,
// while tracing is on too, keeps each call as an event for a timeline.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "zenith/ir.h"

namespace zenith {

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
};

struct ProfileEntry {
  int64_t calls = 0;
  double seconds = 0;
};
void profile_enable(bool on);
bool profile_enabled();
std::vector<std::pair<std::string, ProfileEntry>> profile_snapshot();
void profile_reset();  // clears the table and the trace
// One kernel call, for a timeline (Chrome trace): microseconds since the last
// profile_reset(), on the thread that ran the node (kernels fork from it).
struct ProfileEvent {
  Op op;
  int64_t node;          // the node's position in its graph
  uint64_t graph;        // which executable (a process-wide serial number)
  uint64_t thread;       // which calling thread (a process-wide serial number)
  double start_us, dur_us;
  std::vector<int64_t> out_shape;  // the first output's shape
  GemmShape gemm;                  // gemm_shape of the call (zeros: not a GEMM)
};
// While on (and profiling is on), every kernel call is also kept as an event, up to
// kMaxProfileEvents; later ones are counted in profile_events_dropped().
constexpr size_t kMaxProfileEvents = size_t(1) << 20;
void profile_trace_enable(bool on);
std::vector<ProfileEvent> profile_events();
int64_t profile_events_dropped();

namespace profile_detail {
extern std::atomic<bool> g_on, g_trace;  // profile_enable, profile_trace_enable
}
// Whether calls are being kept as events (profiling and tracing both on): two relaxed
// loads, inline, as the runtime asks before every node.
inline bool profile_tracing() {
  return profile_detail::g_on.load(std::memory_order_relaxed) &&
         profile_detail::g_trace.load(std::memory_order_relaxed);
}

struct TensorRef;
// The product a GEMM-family node (matmul, addmm, qmatmul) computes on these operands,
// as M x N times K: batch dims folded into M, a qmatmul's parts into N. All zero for
// any other op. `zenith bench` divides 2 M N K by a call's time for the per-shape
// GFLOP/s it sets against the machine's peak.
GemmShape gemm_shape(const Node& n, const std::vector<TensorRef>& in, const std::vector<TensorRef>& out);

// A process-wide serial number (executables and calling threads are named by them).
uint64_t profile_next_serial();

// Times one kernel call from construction to destruction when profiling is on; a
// no-op costing one relaxed atomic load otherwise.
class KernelTimer {
 public:
  KernelTimer(Op op, int64_t node, uint64_t graph, const std::vector<int64_t>* out_shape,
              GemmShape gemm = {});
  ~KernelTimer();
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

 private:
  bool on_;
  Op op_;
  int64_t node_;
  uint64_t graph_;
  const std::vector<int64_t>* out_shape_;
  GemmShape gemm_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace zenith
