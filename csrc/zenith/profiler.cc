#include "zenith/profiler.h"

#include <atomic>
#include <mutex>

#include "zenith/kernels/kernels.h"

namespace zenith {

namespace profile_detail {
std::atomic<bool> g_on{false}, g_trace{false};
}

namespace {
using profile_detail::g_trace;
std::atomic<bool>& g_profile = profile_detail::g_on;
std::mutex g_profile_mu;
ProfileEntry g_profile_table[kNumOps];
std::vector<ProfileEvent> g_events;
int64_t g_events_dropped = 0;
std::chrono::steady_clock::time_point g_epoch = std::chrono::steady_clock::now();
std::atomic<uint64_t> g_next_serial{1};

uint64_t thread_serial() {
  thread_local uint64_t id = g_next_serial++;
  return id;
}
}  // namespace

uint64_t profile_next_serial() { return g_next_serial++; }
void profile_enable(bool on) { g_profile = on; }
bool profile_enabled() { return g_profile; }
void profile_trace_enable(bool on) { g_trace = on; }

GemmShape gemm_shape(const Node& n, const std::vector<TensorRef>& in, const std::vector<TensorRef>& out) {
  // The reduced dimension: the A operand's last (or, transposed, second-to-last) dim.
  auto k_of = [&](const TensorRef& a) -> int64_t {
    const bool t = n.i("trans_a", 0) != 0 && a.rank() >= 2;
    return a.rank() == 0 ? 0 : a.shape[size_t(a.rank() - (t ? 2 : 1))];
  };
  const TensorRef* a = nullptr;
  switch (n.op) {
    case Op::matmul: a = in.empty() ? nullptr : &in[0]; break;
    case Op::addmm: a = in.size() < 2 ? nullptr : &in[1]; break;  // (bias, a, b)
    case Op::addmm_parts: a = in.empty() ? nullptr : &in[0]; break;  // (x, weights..., biases...)
    case Op::qmatmul: a = in.empty() ? nullptr : &in[0]; break;   // (x, weights..., biases...)
    default: break;
  }
  if (!a || out.empty() || out[0].rank() == 0) return {};
  GemmShape g;
  g.k = n.op == Op::qmatmul ? (a->rank() ? a->shape.back() : 0) : k_of(*a);
  for (const TensorRef& o : out) g.n += o.rank() ? o.shape.back() : 0;  // qmatmul, addmm_parts: one output per part
  if (g.n == 0) return {};
  // M: the rows of every output (batch dims folded in); a part's output with no columns
  // says nothing, so the first with some.
  for (const TensorRef& o : out)
    if (o.rank() && o.shape.back() > 0) {
      g.m = o.numel() / o.shape.back();
      break;
    }
  if (n.op == Op::addmm && n.i("trans_c", 0)) std::swap(g.m, g.n);  // the output is [N, M]
  return g;
}

void profile_reset() {
  std::lock_guard<std::mutex> lock(g_profile_mu);
  for (auto& e : g_profile_table) e = ProfileEntry{};
  g_events.clear();
  g_events_dropped = 0;
  g_epoch = std::chrono::steady_clock::now();
}
std::vector<ProfileEvent> profile_events() {
  std::lock_guard<std::mutex> lock(g_profile_mu);
  return g_events;
}
int64_t profile_events_dropped() {
  std::lock_guard<std::mutex> lock(g_profile_mu);
  return g_events_dropped;
}
std::vector<std::pair<std::string, ProfileEntry>> profile_snapshot() {
  std::lock_guard<std::mutex> lock(g_profile_mu);
  std::vector<std::pair<std::string, ProfileEntry>> r;
  for (int i = 0; i < kNumOps; ++i)
    if (g_profile_table[i].calls) r.push_back({op_info(Op(i)).name, g_profile_table[i]});
  return r;
}

KernelTimer::KernelTimer(Op op, int64_t node, uint64_t graph, const std::vector<int64_t>* out_shape,
                         GemmShape gemm)
    : on_(g_profile.load(std::memory_order_relaxed)),
      op_(op),
      node_(node),
      graph_(graph),
      out_shape_(out_shape),
      gemm_(gemm) {
  if (on_) t0_ = std::chrono::steady_clock::now();
}

KernelTimer::~KernelTimer() {
  if (!on_) return;
  auto t1 = std::chrono::steady_clock::now();
  double dt = std::chrono::duration<double>(t1 - t0_).count();
  std::lock_guard<std::mutex> lock(g_profile_mu);
  ++g_profile_table[size_t(op_)].calls;
  g_profile_table[size_t(op_)].seconds += dt;
  if (!g_trace.load(std::memory_order_relaxed)) return;
  if (g_events.size() >= kMaxProfileEvents) {
    ++g_events_dropped;
    return;
  }
  g_events.push_back({op_, node_, graph_, thread_serial(),
                      std::chrono::duration<double, std::micro>(t0_ - g_epoch).count(), dt * 1e6,
                      out_shape_ ? *out_shape_ : std::vector<int64_t>{}, gemm_});
}

}  // namespace zenith
