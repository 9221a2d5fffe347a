#include "zenith/profiler.h"

#include <atomic>
#include <mutex>

namespace zenith {

namespace {
std::atomic<bool> g_profile{false}, g_trace{false};
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

KernelTimer::KernelTimer(Op op, int64_t node, uint64_t graph, const std::vector<int64_t>* out_shape)
    : on_(g_profile.load(std::memory_order_relaxed)), op_(op), node_(node), graph_(graph), out_shape_(out_shape) {
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
                      out_shape_ ? *out_shape_ : std::vector<int64_t>{}});
}

}  // namespace zenith
