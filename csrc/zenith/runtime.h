// The runtime: executes a verified graph on a device through its kernel table.
//
// For each new input signature (shapes and symbol values) it builds a Plan once:
// symbols are bound, attributes resolved to constants, shapes inferred, and every
// intermediate given an offset in one arena by a liveness-based first-fit planner.
// Calls then only patch data pointers and run kernels node by node. Arenas live in
// per-call contexts drawn from a pool, so concurrent calls never share scratch
// memory; outputs get buffers of their own that the caller takes over.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zenith/ir.h"

namespace zenith {

// The device seam. Only the CPU backend exists; a CUDA backend would add an entry
// with its own allocator and kernel table. Until then CUDA graphs stay in PyTorch.
enum class Device : uint8_t { kCPU };

struct InTensor {
  const void* data;
  DType dtype;
  std::vector<int64_t> shape;  // dense, row-major
};

struct OutTensor {
  std::shared_ptr<void> storage;  // keeps data alive; hand it to the caller's tensor
  void* data;
  DType dtype;
  std::vector<int64_t> shape;
};

struct Plan;
struct Context;
struct PackedOperand;

// Per-op kernel timing (ZENITH_PROFILE=1 on the Python side). Off by default; when
// on, each kernel call is timed and added to a process-wide table.
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
};
// While on (and profiling is on), every kernel call is also kept as an event, up to
// kMaxProfileEvents; later ones are counted in profile_events_dropped().
constexpr size_t kMaxProfileEvents = size_t(1) << 20;
void profile_trace_enable(bool on);
std::vector<ProfileEvent> profile_events();
int64_t profile_events_dropped();

class Executable {
 public:
  // `symbol_inputs` names the symbols that arrive as plain integers at run time
  // (PyTorch's SymInt graph inputs), in call order.
  Executable(Graph g, Device device = Device::kCPU, std::vector<std::string> symbol_inputs = {});
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // Thread-safe. Throws zenith::Error naming the offending input on a mismatch
  // with the compiled types (count, dtype, rank, static dim, symbol consistency).
  std::vector<OutTensor> run(const std::vector<InTensor>& inputs, const std::vector<int64_t>& symbol_values) const;

  // Marks graph inputs (by position) as constant weights: a matmul or addmm whose B
  // operand, or an ungrouped conv2d whose weight, is one of them reads it packed once,
  // on its first call, instead of packing it every call. The packed copy is kept until drop_packed() or until that input
  // arrives at another address. The caller promises the data does not change in
  // place without a drop_packed() (the Python side checks PyTorch's version counters).
  // May be called again, also while other threads run calls; it forgets every packed copy.
  void set_constant_inputs(const std::vector<int>& positions);
  void drop_packed();
  size_t packed_bytes() const;  // bytes held by packed weights

  const Graph& graph() const { return graph_; }
  // Arena bytes of the plan for the most recently planned signature (0 before a call).
  size_t planned_arena_bytes() const;
  // Of the same plan: arena bytes saved by giving values with disjoint lifetimes the same bytes.
  size_t planned_reused_bytes() const;
  size_t num_plans() const;

 private:
  std::shared_ptr<const Plan> plan_for(const std::vector<InTensor>& inputs, const std::vector<int64_t>& syms) const;
  std::shared_ptr<const Plan> build_plan(const std::vector<int64_t>& bindings,
                                         const std::vector<InTensor>& inputs) const;

  Graph graph_;
  Device device_;
  uint64_t serial_;  // names this executable in profile events
  std::vector<int> symbol_inputs_;  // symbol index per integer input
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const Plan>> plans_;
  mutable std::shared_ptr<const Plan> last_plan_;
  mutable std::vector<std::unique_ptr<Context>> free_contexts_;
  std::vector<int> weight_input_;  // per node: graph-input position of its constant weight operand, or -1
  mutable std::mutex pack_mu_;
  mutable std::vector<std::shared_ptr<const PackedOperand>> packed_;  // per node
};

}  // namespace zenith
