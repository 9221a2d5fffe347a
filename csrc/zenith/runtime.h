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
#include "zenith/profiler.h"  // the bindings reach the profiler through this header

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
