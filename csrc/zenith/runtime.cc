#include "zenith/runtime.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "zenith/batch_slices.h"
#include "zenith/buffer_cache.h"
#include "zenith/error.h"
#include "zenith/kernels/kernels.h"
#include "zenith/planner.h"
#include "zenith/runtime_test_hooks.h"
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif

namespace zenith {

void cast_buffer(const void* src, DType sd, void* dst, DType dd, int64_t n);  // kernels/elementwise.cc

namespace {
constexpr size_t kAlign = kArenaAlign;

bool is_half(DType d) { return d == DType::f16 || d == DType::bf16; }

// Kernels see this instead of a null data pointer (an empty tensor's, as PyTorch passes
// them, or an arena never allocated), so memcpy(dst, src, 0) and the like never get null,
// which is undefined behavior. Poisoned under ASan: no kernel may touch an empty
// tensor's bytes, and one that did is reported.
void* empty_data() {
  alignas(kAlign) static char bytes[kAlign];
#ifdef __SANITIZE_ADDRESS__
  static const bool poisoned = (ASAN_POISON_MEMORY_REGION(bytes, sizeof bytes), true);
  (void)poisoned;
#endif
  return bytes;
}
}  // namespace

// What a plan holds for one node. A static node (constant shapes and attributes) has
// one, made by the first plan and shared by every later one; the others get one per
// signature. So a new signature (a decode step: the sequence grows by one) builds,
// prepares and copies only the nodes whose shapes move: building all of them cost
// ~0.38 ms a token on Gemma 3 270M's ~1000-node decode graph.
struct NodePlan {
  const Node* node = nullptr;      // the graph's node, or `resolved`
  std::unique_ptr<Node> resolved;  // a node with symbolic attributes, with them evaluated
  PreparedOp op;                   // what its kernel chose for these shapes
  std::vector<TensorRef> ins, outs;  // operand dtypes and shapes (data null)
  // The graph input positions of its packable weights (WeightPack's slots, in order);
  // empty when it has none or one of them is not a graph input.
  std::vector<int> weight_inputs;
  bool via_f32 = false;  // half-precision values computed through float32
  // In a batch slice (Plan::slices): the bytes each operand's data moves a pass (0 for
  // weights and for per-pass storages), and ins/outs hold one pass's images.
  std::vector<size_t> in_step, out_step;
};

// One plan per input signature: concrete shapes, each node's plan, and where every value lives.
struct Plan {
  std::vector<int64_t> key;                  // the signature (ranks, dims, symbol values)
  // The concrete shapes of the values whose types have symbols, at their slots
  // (Executable::dynamic_slot_); the others' are the graph's (Executable::shape_of).
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::shared_ptr<const NodePlan>> nodes;
  std::vector<BatchSlice> slices;  // runs of nodes executed a few images at a time
  MemoryPlan mem;
};

struct Context {
  std::shared_ptr<void> arena;
  size_t arena_bytes = 0;
  // The plan the ref vectors below were built for, held so that it cannot be freed
  // (the plan cache is cleared when full) and another plan built at its address.
  std::shared_ptr<const Plan> bound;
  std::vector<std::vector<TensorRef>> ins, outs;
  // Per node: the NodePlan of `bound` that ins and outs were copied from (a switch to a
  // plan sharing it copies nothing), or null.
  std::vector<const NodePlan*> refs_from;
  std::vector<void*> base;  // per storage, this call
  // Packed weights for `bound`, per node, valid while the executable's pack generation
  // is `packed_generation` (0: never valid) and each constant weight input is still at
  // `packed_src` (empty for nodes without packed weights), for the NodePlan `packed_for`
  // of `packed_plan` (held so that no NodePlan compared later can have been freed and its
  // address reused, even when a call failed between a plan switch and its binding).
  std::vector<std::shared_ptr<const PackedOperand>> packed;
  std::vector<std::vector<const void*>> packed_src;
  std::vector<const NodePlan*> packed_for;
  std::shared_ptr<const Plan> packed_plan;
  uint64_t packed_generation = 0;
  int packed_slot = 0;  // the weight slot they were bound for
  void release_packed() {
    packed.clear();
    packed_src.clear();
    packed_for.clear();
    packed_plan.reset();
    packed_generation = 0;
  }
};

struct Executable::Kept {
  int slot = 0;
  std::vector<const void*> src;  // the weight inputs' data it was packed from
  std::vector<int64_t> key;      // the kernel's name for the packed form (WeightPack::key)
  std::shared_ptr<const PackedOperand> packed;  // src.size() operands from here on
};

Executable::Executable(Graph g, Device device, std::vector<std::string> symbol_inputs)
    : graph_(std::move(g)), device_(device), serial_(profile_next_serial()), hot_(std::make_unique<Context>()) {
  ZENITH_CHECK(device_ == Device::kCPU, "runtime: no backend for this device");
  graph_.reindex();
  verify(graph_);
  for (const auto& name : symbol_inputs) {
    int s = graph_.symbols.find(name);
    // A symbol that no shape mentions is still accepted (and ignored).
    symbol_inputs_.push_back(s);
  }
  constant_.assign(graph_.inputs.size(), false);
  kept_.resize(graph_.nodes.size());
  // Nodes whose operands all have constant shapes and whose attributes are constant:
  // verify() inferred their outputs already, and every plan prepares them alike.
  static_node_.assign(graph_.nodes.size(), false);
  for (size_t ni = 0; ni < graph_.nodes.size(); ++ni) {
    const Node& n = graph_.nodes[ni];
    bool st = true;
    for (int v : n.inputs) st = st && graph_.type(v).is_static();
    for (int v : n.outputs) st = st && graph_.type(v).is_static();
    for (const auto& [k, a] : n.attrs)
      for (const auto& d : a.ints) st = st && d.is_const();
    static_node_[ni] = st;
  }
  static_dims_.resize(graph_.values.size());
  dynamic_slot_.assign(graph_.values.size(), -1);
  for (size_t v = 0; v < graph_.values.size(); ++v) {
    const TensorType& t = graph_.values[v].type;
    if (!t.is_static()) {
      dynamic_slot_[v] = int(dynamic_values_.size());
      dynamic_values_.push_back(int(v));
      continue;
    }
    std::vector<int64_t> dims;
    for (const SymInt& d : t.shape) dims.push_back(d.value());
    static_dims_[v] = std::make_unique<const std::vector<int64_t>>(std::move(dims));
  }
}

Executable::~Executable() = default;

void Executable::set_constant_inputs(const std::vector<int>& positions) {
  std::lock_guard<std::mutex> lock(pack_mu_);
  std::vector<bool> c(graph_.inputs.size(), false);
  for (int pos : positions) {
    ZENITH_CHECK(pos >= 0 && size_t(pos) < graph_.inputs.size(), "set_constant_inputs: no input ", pos);
    c[size_t(pos)] = true;
  }
  constant_ = std::move(c);
  for (auto& k : kept_) k.clear();
  holds_packed_.store(false, std::memory_order_release);
  ++pack_generation_;
  release_idle_packed();
}

void Executable::drop_packed() {
  {
    std::lock_guard<std::mutex> lock(pack_mu_);
    for (auto& k : kept_) k.clear();
    holds_packed_.store(false, std::memory_order_release);
    ++pack_generation_;
  }
  release_idle_packed();
}

// Idle contexts let go of their packed references now, not at their next call; a
// context in a call lets go when the call ends (run_with sees the generation moved).
void Executable::release_idle_packed() const {
  if (!hot_busy_.exchange(true, std::memory_order_acquire)) {
    hot_->release_packed();
    hot_busy_.store(false, std::memory_order_release);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& c : free_contexts_) c->release_packed();
}

size_t Executable::packed_bytes() const {
  std::lock_guard<std::mutex> lock(pack_mu_);
  size_t total = 0;
  for (const auto& node : kept_)
    for (const Kept& k : node)
      if (k.packed)
        for (size_t i = 0; i < k.src.size(); ++i) total += k.packed.get()[i].source_bytes();
  return total;
}

size_t Executable::planned_arena_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_plan_ ? last_plan_->mem.arena_bytes : 0;
}

size_t Executable::planned_reused_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_plan_ ? last_plan_->mem.arena_unshared_bytes - last_plan_->mem.arena_bytes : 0;
}

size_t Executable::num_plans() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plans_.size();
}

// The checks every call makes against the compiled types (no allocation unless one fails).
void Executable::check_inputs(const std::vector<InTensor>& inputs, const std::vector<int64_t>& syms) const {
  ZENITH_CHECK(inputs.size() == graph_.inputs.size(), "expected ", graph_.inputs.size(), " tensor inputs, got ",
               inputs.size());
  ZENITH_CHECK(syms.size() == symbol_inputs_.size(), "expected ", symbol_inputs_.size(), " integer inputs, got ",
               syms.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InTensor& t = inputs[i];
    const TensorType& want = graph_.type(graph_.inputs[i]);
    ZENITH_CHECK(t.dtype == want.dtype, "input ", i, " (", graph_.value_name(graph_.inputs[i]), "): dtype ",
                 dtype_name(t.dtype), " but the graph was compiled for ", dtype_name(want.dtype));
    ZENITH_CHECK(t.shape.size() == want.shape.size(), "input ", i, " (", graph_.value_name(graph_.inputs[i]),
                 "): rank ", t.shape.size(), " but the graph was compiled for rank ", want.shape.size());
    for (size_t d = 0; d < t.shape.size(); ++d) {
      ZENITH_CHECK(t.shape[d] >= 0, "input ", i, " (", graph_.value_name(graph_.inputs[i]), "): negative dim");
      if (want.shape[d].is_const())
        ZENITH_CHECK(t.shape[d] == want.shape[d].value(), "input ", i, " (", graph_.value_name(graph_.inputs[i]),
                     "): dim ", d, " is ", t.shape[d], " but the graph was compiled for ", want.shape[d].value());
    }
  }
}

namespace {
// Whether `key` is the signature of these inputs (what plan_for would build).
bool same_signature(const std::vector<int64_t>& key, const std::vector<InTensor>& inputs,
                    const std::vector<int64_t>& syms) {
  size_t k = 0;
  for (const InTensor& t : inputs) {
    if (k >= key.size() || key[k++] != int64_t(t.shape.size())) return false;
    for (int64_t d : t.shape)
      if (k >= key.size() || key[k++] != d) return false;
  }
  for (int64_t s : syms)
    if (k >= key.size() || key[k++] != s) return false;
  return k == key.size();
}
}  // namespace

std::shared_ptr<const Plan> Executable::plan_for(const std::vector<InTensor>& inputs,
                                                 const std::vector<int64_t>& syms) const {
  std::vector<int64_t> key;
  for (const InTensor& t : inputs) {
    key.push_back(int64_t(t.shape.size()));
    key.insert(key.end(), t.shape.begin(), t.shape.end());
  }
  key.insert(key.end(), syms.begin(), syms.end());
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
  }
  // Bind symbols: integer inputs first, then bare-symbol dims of tensor inputs.
  std::vector<int64_t> bind(graph_.symbols.names.size(), 0);
  std::vector<bool> bound(bind.size(), false);
  // where() names the binding in an error only (building it for every dim of every
  // input cost ~0.1 ms a call on a decode graph of ~300 inputs).
  auto set = [&](int s, int64_t v, auto where) {
    if (s < 0) return;
    if (bound[size_t(s)])
      ZENITH_CHECK(bind[size_t(s)] == v, where(), ": size ", v, " conflicts with ", graph_.symbols.names[size_t(s)],
                   " = ", bind[size_t(s)], " bound earlier");
    bind[size_t(s)] = v;
    bound[size_t(s)] = true;
  };
  for (size_t i = 0; i < syms.size(); ++i)
    set(symbol_inputs_[i], syms[i], [&] { return "integer input " + std::to_string(i); });
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& want = graph_.type(graph_.inputs[i]);
    for (size_t d = 0; d < want.shape.size(); ++d)
      set(want.shape[d].symbol_index(), inputs[i].shape[d], [&] {
        return "input " + std::to_string(i) + " (" + graph_.value_name(graph_.inputs[i]) + ") dim " + std::to_string(d);
      });
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& want = graph_.type(graph_.inputs[i]);
    for (size_t d = 0; d < want.shape.size(); ++d) {
      if (want.shape[d].is_const() || want.shape[d].symbol_index() >= 0) continue;
      int64_t v = want.shape[d].eval(bind);
      ZENITH_CHECK(v == inputs[i].shape[d], "input ", i, " (", graph_.value_name(graph_.inputs[i]), "): dim ", d,
                   " is ", inputs[i].shape[d], " but ", want.shape[d].str(graph_.symbols), " = ", v);
    }
  }
  auto plan = build_plan(key, bind, inputs);
  std::lock_guard<std::mutex> lock(mu_);
  if (plans_.size() >= 64) plans_.clear();  // bound the cache under highly dynamic use
  packable_.resize(graph_.inputs.size(), false);
  for (const auto& np : plan->nodes)
    for (int pos : np->weight_inputs)
      if (!packable_[size_t(pos)]) {
        packable_[size_t(pos)] = true;
        packable_generation_.fetch_add(1, std::memory_order_release);
      }
  plans_[std::move(key)] = plan;
  last_plan_ = plan;
  return plan;
}

namespace {
// A symbol's value rounded up to its bucket: a multiple of 16, or of an eighth of its
// power of two above 128 (at most 12.5% more bytes for the values sized by it).
int64_t bucket_up(int64_t v) {
  if (v <= 0) return v;
  int64_t step = 16;
  while (step * 8 < v) step *= 2;
  return (v + step - 1) / step * step;
}
}  // namespace

// The memory plan for these shapes. A graph with symbols is planned once per bucket of
// symbol values (bucket_up), with every value sized at the bucket's top, and the plan
// reused for the values inside it: a decode step's sequence length grows by one each
// call, and first-fit over ~1000 storages each time cost ~0.5 ms a token. Offsets
// planned for larger sizes hold for smaller ones; each storage's actual size is
// checked against its planned slot, and a size an expression makes larger than at the
// bucket's top (not monotone in the symbols) gets an exact plan instead.
const std::vector<int64_t>& Executable::shape_of(const Plan& plan, int v) const {
  return static_dims_[size_t(v)] ? *static_dims_[size_t(v)] : plan.shapes[size_t(dynamic_slot_[size_t(v)])];
}

std::vector<std::vector<int64_t>> Executable::all_shapes(const Plan& plan) const {
  std::vector<std::vector<int64_t>> out(graph_.values.size());
  for (size_t v = 0; v < out.size(); ++v) out[v] = shape_of(plan, int(v));
  return out;
}

MemoryPlan Executable::memory_plan_for(const std::vector<int64_t>& bind, const Plan& plan) const {
  const Graph& g = graph_;
  if (bind.empty()) return plan_memory(g, all_shapes(plan), plan.slices);
  std::vector<int64_t> bucket(bind.size());
  for (size_t i = 0; i < bind.size(); ++i) bucket[i] = bucket_up(bind[i]);
  std::shared_ptr<const MemoryPlan> top;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = mem_plans_.find(bucket);
    if (it != mem_plans_.end()) top = it->second;
  }
  if (!top) {
    std::vector<std::vector<int64_t>> at_top(g.values.size());
    try {
      for (size_t v = 0; v < g.values.size(); ++v) {
        for (const SymInt& d : g.values[v].type.shape) at_top[v].push_back(std::max<int64_t>(0, d.eval(bucket)));
        uint64_t bytes;  // (sized by an expression, a value may outgrow memory at the bucket's top only)
        ZENITH_CHECK(bounded_nbytes(g.type(int(v)).dtype, at_top[v], uint64_t(1) << 48, &bytes),
                     "too large at the bucket's top");
      }
    } catch (const Error&) {  // (or an expression overflows there): plan these sizes exactly
      return plan_memory(g, all_shapes(plan));
    }
    top = std::make_shared<const MemoryPlan>(plan_memory(g, at_top));
    std::lock_guard<std::mutex> lock(mu_);
    if (mem_plans_.size() >= 64) mem_plans_.clear();
    mem_plans_[bucket] = top;
  }
  MemoryPlan mem = *top;
  for (size_t v = 0; v < g.values.size(); ++v) {
    const int si = mem.storage_of[v];
    if (si < 0) continue;
    int64_t n = 1;
    for (int64_t d : shape_of(plan, int(v))) n *= d;
    Storage& s = mem.storages[size_t(si)];
    s.bytes = size_t(n) * dtype_size(g.type(int(v)).dtype);
    if (s.kind == Storage::kArena && arena_align_up(s.bytes) > arena_align_up(top->storages[size_t(si)].bytes))
      return plan_memory(g, all_shapes(plan));
  }
  return mem;
}

namespace {
// Whether `was` (a NodePlan of another plan, for node n) holds for these operands: each
// input's concrete shape in `cg` is the one it was prepared for, and each symbolic
// attribute evaluates as it did. The outputs follow from those (inference is a function
// of them), so the node's kernel choice, scratch sizes and packed weights all hold.
bool same_operands(const NodePlan& was, const Node& n, const Graph& cg, const std::vector<int64_t>& bind) {
  if (was.ins.size() != n.inputs.size() || !was.in_step.empty()) return false;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const auto& now = cg.values[size_t(n.inputs[k])].type.shape;
    const auto& then = was.ins[k].shape;
    if (now.size() != then.size()) return false;
    for (size_t d = 0; d < now.size(); ++d)
      if (!now[d].is_const() || now[d].value() != then[d]) return false;
  }
  if (!was.resolved) return true;  // (no symbolic attributes: the graph's own node)
  auto it = was.resolved->attrs.begin();
  for (const auto& [key, a] : n.attrs) {
    if (it == was.resolved->attrs.end() || it->first != key || it->second.ints.size() != a.ints.size()) return false;
    for (size_t j = 0; j < a.ints.size(); ++j)
      if (!a.ints[j].is_const() && a.ints[j].eval(bind) != it->second.ints[j].value()) return false;
    ++it;
  }
  return true;
}
}  // namespace

std::shared_ptr<const Plan> Executable::build_plan(std::vector<int64_t> key, const std::vector<int64_t>& bind,
                                                   const std::vector<InTensor>& inputs) const {
  auto plan = std::make_shared<Plan>();
  plan->key = std::move(key);
  const Graph& g = graph_;
  plan->shapes.resize(dynamic_values_.size());
  // Concrete shapes: a graph with every symbol replaced by its value, re-inferred. The
  // values are a scratch copy kept between plans: every input's and node output's type
  // is overwritten below, so it need not be copied afresh from the graph each time.
  Graph cg;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cg.values = std::move(scratch_values_);
  }
  if (cg.values.size() != g.values.size()) cg.values = g.values;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    auto& t = cg.values[size_t(g.inputs[i])].type;
    t.shape.assign(inputs[i].shape.begin(), inputs[i].shape.end());
  }
  // Static nodes keep the first plan's NodePlan. A dynamic node whose operand shapes and
  // attributes are what they were in the last plan built keeps that plan's: a decode
  // step from a file moves the cache's length each call, but its projections and
  // feed-forward layers see one token every time (rebuilding and re-binding all of
  // Gemma 3's ~1200 nodes cost ~2 ms a token; ~300 move). Only the others are inferred anew.
  std::shared_ptr<const std::vector<std::shared_ptr<const NodePlan>>> statics;
  std::shared_ptr<const Plan> prev;
  {
    std::lock_guard<std::mutex> lock(mu_);
    statics = static_plans_;
    prev = last_built_;
  }
  if (prev && prev->nodes.size() != g.nodes.size()) prev.reset();
  std::vector<std::shared_ptr<NodePlan>> fresh(g.nodes.size());
  plan->nodes.resize(g.nodes.size());
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    if (statics && static_node_[ni]) {
      plan->nodes[ni] = (*statics)[ni];
      continue;
    }
    if (prev && !static_node_[ni] && !bind.empty() && same_operands(*prev->nodes[ni], g.nodes[ni], cg, bind)) {
      const NodePlan& was = *prev->nodes[ni];
      plan->nodes[ni] = prev->nodes[ni];
      for (size_t k = 0; k < was.outs.size(); ++k)
        cg.values[size_t(g.nodes[ni].outputs[k])].type.shape.assign(was.outs[k].shape.begin(), was.outs[k].shape.end());
      continue;
    }
    auto np = std::make_shared<NodePlan>();
    np->node = &g.nodes[ni];
    fresh[ni] = np;
    plan->nodes[ni] = np;
    if (static_node_[ni]) continue;  // its outputs' types are the graph's, as verify() inferred
    const Node* n = np->node;
    bool symbolic = false;
    for (const auto& [k, a] : n->attrs)
      for (const auto& s : a.ints) symbolic = symbolic || !s.is_const();
    if (symbolic) {
      np->resolved = std::make_unique<Node>(*n);
      for (auto& [k, a] : np->resolved->attrs)
        for (auto& s : a.ints)
          if (!s.is_const()) s = SymInt(s.eval(bind));
      n = np->node = np->resolved.get();
    }
    std::vector<TensorType> types;
    try {
      types = op_info(n->op).infer(cg, *n);
    } catch (const Error& e) {
      fail("node ", ni, " (", op_info(n->op).name, ") with the given input shapes: ", e.what());
    }
    for (size_t k = 0; k < n->outputs.size(); ++k) {
      const int v = n->outputs[k];
      const TensorType& t = types[k];
      // Each output's size, before the next node's inference multiplies it unchecked (a
      // graph from a file may size a value by any expression of the inputs' sizes): no
      // machine holds a value past 2^48 bytes, so that is an OutOfMemory now.
      uint64_t bytes;
      for (const SymInt& d : t.shape)
        ZENITH_CHECK(d.is_const() && d.value() >= 0, "node ", ni, " (", op_info(n->op).name, ") gives %",
                     g.value_name(v), " a symbolic or negative size with these input sizes");
      if (!bounded_nbytes(t, uint64_t(1) << 48, &bytes))
        fail_alloc("zenith runtime: out of memory allocating value %", g.value_name(v),
                   ": past 2^48 bytes with these input sizes");
      // A value the graph states static is planned by that statement: it must be what
      // its node computes from these inputs.
      ZENITH_CHECK(!static_dims_[size_t(v)] || t.static_dims() == *static_dims_[size_t(v)], "node ", ni, " (",
                   op_info(n->op).name, "): %", g.value_name(v), " is stated as ",
                   dims_str(*static_dims_[size_t(v)]), " but is ", dims_str(t.static_dims()),
                   " with these input sizes");
      cg.values[size_t(v)].type = std::move(types[k]);
    }
  }
  for (size_t i = 0; i < dynamic_values_.size(); ++i) {
    // (a value no node writes, left by a pass, keeps its symbolic type: never read)
    const auto& dims = cg.values[size_t(dynamic_values_[i])].type.shape;
    plan->shapes[i].resize(dims.size());
    for (size_t d = 0; d < dims.size(); ++d) plan->shapes[i][d] = dims[d].value();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    scratch_values_ = std::move(cg.values);
  }
  // Batch slices for a graph without symbols, found once (the static NodePlans, shared by
  // every later plan, are prepared for them; the cache size is read then).
  if (bind.empty()) {
    std::shared_ptr<const std::vector<BatchSlice>> sl;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sl = slices_;
    }
    if (!sl) {
      auto found = std::make_shared<const std::vector<BatchSlice>>(
          find_batch_slices(g, all_shapes(*plan), batch_slice_cache()));
      std::lock_guard<std::mutex> lock(mu_);
      if (!slices_) slices_ = std::move(found);
      sl = slices_;
    }
    plan->slices = *sl;
  }
  plan->mem = memory_plan_for(bind, *plan);
  // Each new NodePlan's kernel prepares for these shapes: typed attributes, its
  // algorithm, and which weight input (if any) it reads packed when that input is constant.
  std::vector<int> input_pos(g.values.size(), -1);
  for (size_t i = 0; i < g.inputs.size(); ++i) input_pos[size_t(g.inputs[i])] = int(i);
  // A reshape shares its input's memory: a weight reshaped on its way to a kernel (conv1d's
  // [OC, C, K] filters read as [OC, C, 1, K]) is still that graph input, packed once.
  for (const Node& n : g.nodes)
    if (n.op == Op::reshape && input_pos[size_t(n.inputs[0])] >= 0)
      input_pos[size_t(n.outputs[0])] = input_pos[size_t(n.inputs[0])];
  std::vector<const BatchSlice*> slice_of(g.nodes.size(), nullptr);
  for (const BatchSlice& r : plan->slices)
    for (int ni = r.first; ni <= r.last; ++ni) slice_of[size_t(ni)] = &r;
  std::vector<bool> batched;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    NodePlan* np = fresh[ni].get();
    if (!np) continue;
    const Node& n = *np->node;
    for (int v : n.inputs) np->ins.push_back({nullptr, g.type(v).dtype, shape_of(*plan, v)});
    for (int v : n.outputs) np->outs.push_back({nullptr, g.type(v).dtype, shape_of(*plan, v)});
    if (const BatchSlice* r = slice_of[ni]; r && per_image_node(n, &batched)) {
      // One pass's images: dim 0 S; a full-batch value's data moves S images a pass.
      auto pass = [&](TensorRef& t, int v) {
        const size_t step = size_t(t.numel()) / size_t(r->batch) * size_t(r->slice) * dtype_size(t.dtype);
        t.shape[0] = r->slice;
        return plan->mem.storages[size_t(plan->mem.storage_of[size_t(v)])].per_pass ? size_t(0) : step;
      };
      np->in_step.assign(n.inputs.size(), 0);
      for (size_t k = 0; k < n.inputs.size(); ++k)
        if (batched[k]) np->in_step[k] = pass(np->ins[k], n.inputs[k]);
      np->out_step.assign(n.outputs.size(), 0);
      for (size_t k = 0; k < n.outputs.size(); ++k) np->out_step[k] = pass(np->outs[k], n.outputs[k]);
    }
    test_hooks::node_plans_prepared.fetch_add(1, std::memory_order_relaxed);
    try {
      np->op = prepare_node(n, np->ins, np->outs);
    } catch (const Error& e) {
      fail("node ", ni, " (", op_info(n.op).name, "): ", e.what());
    }
    std::vector<int> positions;
    for (int slot : np->op.weight.slots) positions.push_back(input_pos[size_t(n.inputs[size_t(slot)])]);
    if (std::find(positions.begin(), positions.end(), -1) == positions.end()) np->weight_inputs = std::move(positions);
    // Non-movement ops touching f16/bf16 values run their float32 kernel between conversions.
    if (has_trait(n.op, kDtypeGeneric)) continue;
    bool half = false;
    for (int v : n.inputs) half = half || is_half(g.type(v).dtype);
    for (int v : n.outputs) half = half || is_half(g.type(v).dtype);
    np->via_f32 = half;
  }
  if (!statics) {
    auto shared = std::make_shared<std::vector<std::shared_ptr<const NodePlan>>>(g.nodes.size());
    for (size_t ni = 0; ni < g.nodes.size(); ++ni)
      if (static_node_[ni]) (*shared)[ni] = plan->nodes[ni];
    std::lock_guard<std::mutex> lock(mu_);
    if (!static_plans_) static_plans_ = std::move(shared);
  }
  if (!bind.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    last_built_ = plan;
  }
  return plan;
}

namespace test_hooks {
void (*bind_packed_before_lock)() = nullptr;
std::atomic<uint64_t> node_plans_prepared{0};
}

std::vector<int> Executable::packable_inputs() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> out;
  for (size_t i = 0; i < packable_.size(); ++i)
    if (packable_[i]) out.push_back(int(i));
  return out;
}

// Constant weights: packed on first use (and again if the input moved) the way the
// node's kernel asked (WeightPack), kept per node and weight slot (one copy each) across
// calls and plans while the kernel's key for it is the same. The context holds this call's references, so a
// concurrent drop_packed() cannot free them mid-run, and reuses them without the lock
// while nothing changed.
void Executable::bind_packed(const std::shared_ptr<const Plan>& bound, const std::vector<InTensor>& inputs, int slot,
                             Context& ctx) const {
  const Plan& plan = *bound;
  const size_t nn = plan.nodes.size();
  const uint64_t seen = pack_generation_.load(std::memory_order_acquire);
  if (ctx.packed.size() != nn || ctx.packed_generation == 0 || ctx.packed_slot != slot ||
      ctx.packed_generation != seen) {
    ctx.release_packed();
    ctx.packed.assign(nn, nullptr);
    ctx.packed_src.assign(nn, {});
    ctx.packed_for.assign(nn, nullptr);
  }
  // A node's binding holds while its NodePlan is the same (a static node's is shared by
  // every plan) and its constant weights are at the same addresses; a node without
  // packable weights holds none. The others (packed_for null) are looked up below.
  bool stale = ctx.packed_generation == 0;
  for (size_t ni = 0; ni < nn; ++ni) {
    const NodePlan* np = plan.nodes[ni].get();
    if (np->weight_inputs.empty()) {
      if (ctx.packed_for[ni] == np) continue;  // bound as holding none already
      ctx.packed[ni].reset();
      ctx.packed_src[ni].clear();
      ctx.packed_for[ni] = np;
      continue;
    }
    bool held = ctx.packed_for[ni] == np;
    const std::vector<const void*>& was = ctx.packed_src[ni];
    for (size_t i = 0; i < was.size() && held; ++i) held = inputs[size_t(np->weight_inputs[i])].data == was[i];
    if (!held) {
      ctx.packed_for[ni] = nullptr;
      stale = true;
    }
  }
  ctx.packed_plan = bound;  // every packed_for entry is null or one of its NodePlans now
  if (!stale) return;
  ctx.packed_generation = 0;  // valid again only once every pack below has succeeded
  if (test_hooks::bind_packed_before_lock) test_hooks::bind_packed_before_lock();
  std::unique_lock<std::mutex> lock(pack_mu_);
  const uint64_t generation = pack_generation_.load(std::memory_order_relaxed);
  // Weights dropped or the constant set changed since the check above: nothing held holds.
  if (generation != seen) std::fill(ctx.packed_for.begin(), ctx.packed_for.end(), nullptr);
  for (size_t ni = 0; ni < nn; ++ni) {
    if (ctx.packed_for[ni]) continue;
    const NodePlan& np = *plan.nodes[ni];
    ctx.packed[ni].reset();
    ctx.packed_src[ni].clear();
    ctx.packed_for[ni] = &np;
    const std::vector<int>& positions = np.weight_inputs;
    if (positions.empty()) continue;
    std::vector<const void*> src;
    for (int pos : positions) src.push_back(inputs[size_t(pos)].data);
    // Weights that are not all constant are read as they are (a conv2d packs its
    // filters for the call itself where its algorithm reads them packed).
    if (!std::all_of(positions.begin(), positions.end(), [&](int pos) { return bool(constant_[size_t(pos)]); }))
      continue;
    const WeightPack& w = np.op.weight;
    auto& kept = kept_[ni];
    auto it = std::find_if(kept.begin(), kept.end(), [&](const Kept& k) { return k.slot == slot; });
    if (it == kept.end() || it->src != src || it->key != w.key) {
      if (it != kept.end()) kept.erase(it);  // the slot's old copy goes before the new one is made
      Kept k{slot, src, w.key, w.pack(np.op.state.get(), src.data())};
      kept.push_back(std::move(k));
      it = kept.end() - 1;
      holds_packed_.store(true, std::memory_order_release);
    }
    ctx.packed[ni] = it->packed;
    ctx.packed_src[ni] = std::move(src);
  }
  ctx.packed_generation = generation;
  ctx.packed_slot = slot;
}

std::vector<OutTensor> Executable::run(const std::vector<InTensor>& inputs, const std::vector<int64_t>& symbol_values,
                                       int weight_slot) const {
  check_inputs(inputs, symbol_values);
  std::vector<OutTensor> result;
  // The single-threaded path takes the hot context with one atomic exchange; a call
  // that finds it taken draws a context from the pool under the mutex.
  if (!hot_busy_.exchange(true, std::memory_order_acquire)) {
    struct Release {
      std::atomic<bool>& busy;
      ~Release() { busy.store(false, std::memory_order_release); }
    } release{hot_busy_};
    run_with(*hot_, inputs, symbol_values, weight_slot, result);
    return result;
  }
  std::unique_ptr<Context> ctx;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_contexts_.empty()) {
      ctx = std::move(free_contexts_.back());
      free_contexts_.pop_back();
    }
  }
  if (!ctx) ctx = std::make_unique<Context>();
  // Return the context to the pool on every path, errors included.
  struct Release {
    const Executable* self;
    std::unique_ptr<Context>& c;
    ~Release() {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->free_contexts_.push_back(std::move(c));
    }
  } release{this, ctx};
  run_with(*ctx, inputs, symbol_values, weight_slot, result);
  return result;
}

void Executable::run_with(Context& ctx, const std::vector<InTensor>& inputs, const std::vector<int64_t>& syms,
                          int slot, std::vector<OutTensor>& result) const {
  ZENITH_CHECK(slot >= 0 && slot < kKeptPerNode, "run: weight slot ", slot, " outside [0, ", kKeptPerNode, ")");
  // The plan: the context's own when the signature is unchanged (no lock), else the cache's.
  std::shared_ptr<const Plan> plan =
      ctx.bound && same_signature(ctx.bound->key, inputs, syms) ? ctx.bound : plan_for(inputs, syms);
  const Graph& g = graph_;
  const MemoryPlan& mem = plan->mem;
  if (ctx.arena_bytes < mem.arena_bytes) {
    ctx.arena.reset();
    ctx.arena_bytes = 0;
    ctx.arena = aligned_buffer(mem.arena_bytes);
    ctx.arena_bytes = mem.arena_bytes;
  }
  // The plan bound before, kept alive through the comparisons of NodePlan addresses in
  // refs_from below: none can have been freed and its address reused by a NodePlan of
  // the new plan (packed_for's are held by packed_plan).
  std::shared_ptr<const Plan> old;
  if (ctx.bound != plan) {
    // This context's own copies of the refs (kernels see data pointers set per call),
    // made again only for the nodes whose NodePlan changed; refs half rebuilt when an
    // allocation fails match no NodePlan.
    old = std::move(ctx.bound);
    const size_t nn = plan->nodes.size();
    if (ctx.refs_from.size() != nn) {
      ctx.ins.assign(nn, {});
      ctx.outs.assign(nn, {});
      ctx.refs_from.assign(nn, nullptr);
    }
    try {
      for (size_t ni = 0; ni < nn; ++ni) {
        const NodePlan* np = plan->nodes[ni].get();
        if (ctx.refs_from[ni] == np) continue;
        ctx.refs_from[ni] = nullptr;
        ctx.ins[ni] = np->ins;
        ctx.outs[ni] = np->outs;
        ctx.refs_from[ni] = np;
      }
      ctx.base.assign(mem.storages.size(), nullptr);
    } catch (...) {
      ctx.refs_from.assign(nn, nullptr);
      throw;
    }
    ctx.bound = plan;
  }
  std::vector<std::shared_ptr<void>> out_bufs(size_t(mem.num_output_buffers));
  std::vector<void*>& base = ctx.base;
  for (size_t i = 0; i < mem.storages.size(); ++i) {
    const Storage& s = mem.storages[i];
    switch (s.kind) {
      case Storage::kArena: base[i] = static_cast<char*>(ctx.arena.get()) + s.offset; break;
      case Storage::kInput: base[i] = const_cast<void*>(inputs[size_t(s.index)].data); break;
      case Storage::kConst: base[i] = const_cast<void*>(g.nodes[size_t(s.index)].constant->data); break;
      case Storage::kOutput:
        out_bufs[size_t(s.index)] = cached_buffer(s.bytes);
        base[i] = out_bufs[size_t(s.index)].get();
        break;
    }
    if (!base[i]) base[i] = empty_data();
  }
  bind_packed(plan, inputs, slot, ctx);
  // Node ni on pass `pass` of its batch slice (0 outside one).
  auto run_node = [&](size_t ni, int64_t pass) {
    const NodePlan& np = *plan->nodes[ni];
    const PreparedOp& op = np.op;
    if (!op.run) return;
    const Node& n = *np.node;
    auto& ins = ctx.ins[ni];
    auto& outs = ctx.outs[ni];
    for (size_t k = 0; k < n.inputs.size(); ++k) ins[k].data = base[size_t(mem.storage_of[size_t(n.inputs[k])])];
    for (size_t k = 0; k < n.outputs.size(); ++k) outs[k].data = base[size_t(mem.storage_of[size_t(n.outputs[k])])];
    if (pass > 0) {
      for (size_t k = 0; k < np.in_step.size(); ++k) ins[k].data = static_cast<char*>(ins[k].data) + pass * np.in_step[k];
      for (size_t k = 0; k < np.out_step.size(); ++k)
        outs[k].data = static_cast<char*>(outs[k].data) + pass * np.out_step[k];
    }
    KernelTimer timer(n.op, int64_t(ni), serial_, outs.empty() ? nullptr : &outs[0].shape,
                      profile_tracing() ? gemm_shape(n, ins, outs) : GemmShape{});
    if (!np.via_f32) {
      op.run(op.ctx(n, ins, outs, ctx.packed.empty() ? nullptr : ctx.packed[ni].get()));
      return;
    }
    // float16/bfloat16 storage: compute in float32 and round once on the way out.
    std::vector<TensorRef> fin = ins, fout = outs;
    std::vector<std::shared_ptr<void>> temps;
    for (auto& t : fin)
      if (is_half(t.dtype)) {
        temps.push_back(cached_buffer(size_t(t.numel()) * 4));
        cast_buffer(t.data, t.dtype, temps.back().get(), DType::f32, t.numel());
        t.data = temps.back().get();
        t.dtype = DType::f32;
      }
    for (auto& t : fout)
      if (is_half(t.dtype)) {
        temps.push_back(cached_buffer(size_t(t.numel()) * 4));
        t.data = temps.back().get();
        t.dtype = DType::f32;
      }
    op.run(op.ctx(n, fin, fout));
    for (size_t k = 0; k < outs.size(); ++k)
      if (is_half(outs[k].dtype)) cast_buffer(fout[k].data, DType::f32, outs[k].data, outs[k].dtype, outs[k].numel());
  };
  size_t ni = 0;
  for (const BatchSlice& r : plan->slices) {
    for (; ni < size_t(r.first); ++ni) run_node(ni, 0);
    for (int64_t pass = 0; pass < r.batch / r.slice; ++pass)
      for (ni = size_t(r.first); ni <= size_t(r.last); ++ni) run_node(ni, pass);
  }
  for (; ni < plan->nodes.size(); ++ni) run_node(ni, 0);
  // Weights dropped during this call: let go of them now.
  if (ctx.packed_generation != pack_generation_.load(std::memory_order_acquire)) ctx.release_packed();
  result.reserve(g.outputs.size());
  // Each output gets a buffer of its own: the first output of a kOutput storage takes it,
  // a later one (the same value listed again, or a reshape of it: values the caller's graph
  // keeps apart, such as a training forward's output and the tensor it saves for
  // backward) gets a copy, as an input or a constant returned does.
  std::vector<bool> handed(out_bufs.size(), false);
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    int v = g.outputs[i];
    const Storage& s = mem.storages[size_t(mem.output_storage[i])];
    OutTensor o;
    o.dtype = g.type(v).dtype;
    o.shape = shape_of(*plan, v);
    if (s.kind == Storage::kOutput && !handed[size_t(s.index)]) {
      handed[size_t(s.index)] = true;
      o.storage = out_bufs[size_t(s.index)];
      o.data = o.storage.get();
    } else {  // an input, a constant or an output buffer handed out already: a copy of its own
      int64_t n = 1;
      for (int64_t d : o.shape) n *= d;
      size_t bytes = size_t(n) * dtype_size(o.dtype);
      o.storage = cached_buffer(bytes);
      o.data = o.storage.get();
      std::memcpy(o.data, base[size_t(mem.output_storage[i])], bytes);
    }
    result.push_back(std::move(o));
  }
}

}  // namespace zenith
