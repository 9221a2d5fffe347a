#include "zenith/runtime.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "zenith/error.h"
#include "zenith/kernels/kernels.h"
#include "zenith/planner.h"
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif

namespace zenith {

void cast_buffer(const void* src, DType sd, void* dst, DType dd, int64_t n);  // kernels/elementwise.cc

namespace {
constexpr size_t kAlign = kArenaAlign;

std::shared_ptr<void> aligned_buffer(size_t bytes) {
#ifdef __SANITIZE_ADDRESS__
  // The exact size, so that ASan sees a kernel run past an output or the arena's end
  // (aligned_alloc wants a multiple of the alignment, which would hide up to 63 bytes).
  void* p = nullptr;
  if (posix_memalign(&p, kAlign, std::max<size_t>(bytes, 1)) != 0) p = nullptr;
#else
  void* p = std::aligned_alloc(kAlign, arena_align_up(std::max<size_t>(bytes, 1)));
#endif
  if (!p) fail_alloc("zenith runtime: out of memory allocating ", bytes, " bytes");
  return std::shared_ptr<void>(p, std::free);
}

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

struct Plan {
  std::vector<std::vector<int64_t>> shapes;  // per value id
  std::vector<Node> nodes;                   // graph nodes with attributes resolved to constants
  MemoryPlan mem;
  std::vector<bool> via_f32;                 // per node: half-precision values computed through float32
};

struct Context {
  std::shared_ptr<void> arena;
  size_t arena_bytes = 0;
  // The plan the ref vectors below were built for, held so that it cannot be freed
  // (the plan cache is cleared when full) and another plan built at its address.
  std::shared_ptr<const Plan> bound;
  std::vector<std::vector<TensorRef>> ins, outs;
};

Executable::Executable(Graph g, Device device, std::vector<std::string> symbol_inputs)
    : graph_(std::move(g)), device_(device), serial_(profile_next_serial()) {
  ZENITH_CHECK(device_ == Device::kCPU, "runtime: no backend for this device");
  graph_.reindex();
  verify(graph_);
  for (const auto& name : symbol_inputs) {
    int s = graph_.symbols.find(name);
    // A symbol that no shape mentions is still accepted (and ignored).
    symbol_inputs_.push_back(s);
  }
}

Executable::~Executable() = default;

namespace {
// The weight operand a GEMM-based node may read packed: its input slot and which
// side of the GEMM it is (B of matmul / addmm, A of an ungrouped conv2d).
struct WeightOperand {
  int slot = -1;
  PackedOperand::Side side = PackedOperand::kB;
};
WeightOperand weight_operand(const Node& n) {
  if (n.op == Op::addmm) return {2, PackedOperand::kB};
  if (n.op == Op::matmul) return {1, PackedOperand::kB};
  if (n.op == Op::conv2d && n.i("groups", 1) == 1) return {1, PackedOperand::kA};
  return {};
}

// The GEMM the node's kernel runs on `w`, as (rows, cols, row stride, col stride) of
// the weight operand, and whether sgemm reads it packed for that shape.
struct WeightGemm {
  int64_t rows, cols, rs, cs;
  bool reads_packed;
  // How to keep it: as the GEMM's A or B, or (a conv2d run by conv3x3_winograd) as
  // transformed filters.
  PackedOperand::Side side;
};
WeightGemm weight_gemm(const Node& n, WeightOperand w, const std::vector<std::vector<int64_t>>& shapes) {
  const auto& ws = shapes[size_t(n.inputs[size_t(w.slot)])];
  if (w.side == PackedOperand::kA) {  // conv2d: A = weight [OC, IC * KH * KW], B = columns [K, OH * OW]
    const auto& os = shapes[size_t(n.outputs[0])];
    const auto& xs = shapes[size_t(n.inputs[0])];
    int64_t M = ws[0], K = ws[1] * ws[2] * ws[3], groups = n.i("groups", 1);
    bool winograd = conv2d_uses_winograd(groups, ws[2], ws[3], n.const_ints("stride"), n.const_ints("padding"),
                                         n.const_ints("dilation"), xs[1], xs[2], xs[3], ws[0]);
    if (winograd) return {M, K, K, 1, true, PackedOperand::kWinograd};
    if (conv2d_pixel_rows(xs[0], groups, os[2] * os[3], winograd))  // B = W^T: K x OC
      return {K, M, 1, K, true, PackedOperand::kB};
    return {M, K, K, 1, sgemm_reads_packed(M, os[2] * os[3], 1), PackedOperand::kA};
  }
  bool ta = n.i("trans_a", 0) != 0, tb = n.i("trans_b", 0) != 0;
  int64_t K = tb ? ws[1] : ws[0], N = tb ? ws[0] : ws[1];
  const auto& as = shapes[size_t(n.inputs[size_t(w.slot) - 1])];
  int64_t M = as[as.size() - (ta ? 1 : 2)];  // rows of each GEMM (matmul loops over batch dims)
  GemmStrides st = gemm_strides(ta, tb, M, N, K);  // as the kernel reads the operands
  return {K, N, st.b_rs, st.b_cs, sgemm_reads_packed(M, st.b_rs, st.b_cs), PackedOperand::kB};
}
}  // namespace

void Executable::set_constant_inputs(const std::vector<int>& positions) {
  std::lock_guard<std::mutex> lock(pack_mu_);
  weight_input_.assign(graph_.nodes.size(), -1);
  packed_.assign(graph_.nodes.size(), nullptr);
  for (int pos : positions) {
    ZENITH_CHECK(pos >= 0 && size_t(pos) < graph_.inputs.size(), "set_constant_inputs: no input ", pos);
    int v = graph_.inputs[size_t(pos)];
    if (graph_.type(v).dtype != DType::f32) continue;
    for (size_t ni = 0; ni < graph_.nodes.size(); ++ni) {
      const Node& n = graph_.nodes[ni];
      WeightOperand w = weight_operand(n);
      bool matrix = graph_.type(v).shape.size() == (w.side == PackedOperand::kA ? 4u : 2u);
      if (w.slot >= 0 && n.inputs[size_t(w.slot)] == v && matrix && graph_.type(n.outputs[0]).dtype == DType::f32)
        weight_input_[ni] = pos;
    }
  }
}

void Executable::drop_packed() {
  std::lock_guard<std::mutex> lock(pack_mu_);
  for (auto& p : packed_) p.reset();
}

size_t Executable::packed_bytes() const {
  std::lock_guard<std::mutex> lock(pack_mu_);
  size_t total = 0;
  for (const auto& p : packed_)
    if (p) total += p->source_bytes();
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

std::shared_ptr<const Plan> Executable::plan_for(const std::vector<InTensor>& inputs,
                                                 const std::vector<int64_t>& syms) const {
  ZENITH_CHECK(inputs.size() == graph_.inputs.size(), "expected ", graph_.inputs.size(), " tensor inputs, got ",
               inputs.size());
  ZENITH_CHECK(syms.size() == symbol_inputs_.size(), "expected ", symbol_inputs_.size(), " integer inputs, got ",
               syms.size());
  std::vector<int64_t> key;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InTensor& t = inputs[i];
    const TensorType& want = graph_.type(graph_.inputs[i]);
    const std::string name = graph_.value_name(graph_.inputs[i]);
    ZENITH_CHECK(t.dtype == want.dtype, "input ", i, " (", name, "): dtype ", dtype_name(t.dtype),
                 " but the graph was compiled for ", dtype_name(want.dtype));
    ZENITH_CHECK(t.shape.size() == want.shape.size(), "input ", i, " (", name, "): rank ", t.shape.size(),
                 " but the graph was compiled for rank ", want.shape.size());
    for (size_t d = 0; d < t.shape.size(); ++d) {
      ZENITH_CHECK(t.shape[d] >= 0, "input ", i, " (", name, "): negative dim");
      if (want.shape[d].is_const())
        ZENITH_CHECK(t.shape[d] == want.shape[d].value(), "input ", i, " (", name, "): dim ", d, " is ", t.shape[d],
                     " but the graph was compiled for ", want.shape[d].value());
    }
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
  auto set = [&](int s, int64_t v, const std::string& where) {
    if (s < 0) return;
    if (bound[size_t(s)])
      ZENITH_CHECK(bind[size_t(s)] == v, where, ": size ", v, " conflicts with ", graph_.symbols.names[size_t(s)],
                   " = ", bind[size_t(s)], " bound earlier");
    bind[size_t(s)] = v;
    bound[size_t(s)] = true;
  };
  for (size_t i = 0; i < syms.size(); ++i) set(symbol_inputs_[i], syms[i], "integer input " + std::to_string(i));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& want = graph_.type(graph_.inputs[i]);
    for (size_t d = 0; d < want.shape.size(); ++d)
      set(want.shape[d].symbol_index(), inputs[i].shape[d],
          "input " + std::to_string(i) + " (" + graph_.value_name(graph_.inputs[i]) + ") dim " + std::to_string(d));
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
  auto plan = build_plan(bind, inputs);
  std::lock_guard<std::mutex> lock(mu_);
  if (plans_.size() >= 64) plans_.clear();  // bound the cache under highly dynamic use
  plans_[key] = plan;
  last_plan_ = plan;
  return plan;
}

std::shared_ptr<const Plan> Executable::build_plan(const std::vector<int64_t>& bind,
                                                   const std::vector<InTensor>& inputs) const {
  auto plan = std::make_shared<Plan>();
  const Graph& g = graph_;
  plan->shapes.resize(g.values.size());
  // Concrete shapes: a graph with every symbol replaced by its value, re-inferred.
  Graph cg;
  cg.values = g.values;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    auto& t = cg.values[size_t(g.inputs[i])].type;
    for (size_t d = 0; d < t.shape.size(); ++d) t.shape[d] = inputs[i].shape[d];
  }
  plan->nodes = g.nodes;
  for (size_t ni = 0; ni < plan->nodes.size(); ++ni) {
    Node& n = plan->nodes[ni];
    for (auto& [k, a] : n.attrs)
      for (auto& s : a.ints)
        if (!s.is_const()) s = SymInt(s.eval(bind));
    std::vector<TensorType> types;
    try {
      types = op_info(n.op).infer(cg, n);
    } catch (const Error& e) {
      fail("node ", ni, " (", op_info(n.op).name, ") with the given input shapes: ", e.what());
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) cg.values[size_t(n.outputs[k])].type = types[k];
  }
  for (size_t v = 0; v < g.values.size(); ++v)
    for (const auto& d : cg.values[v].type.shape) plan->shapes[v].push_back(d.value());

  plan->mem = plan_memory(g, plan->shapes);
  // Decided once per plan, not per call: non-movement ops touching f16/bf16 values
  // run their float32 kernel between conversions.
  plan->via_f32.assign(g.nodes.size(), false);
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    if (kernel_is_dtype_generic(n.op)) continue;
    bool half = false;
    for (int v : n.inputs) half = half || is_half(g.type(v).dtype);
    for (int v : n.outputs) half = half || is_half(g.type(v).dtype);
    plan->via_f32[ni] = half;
  }
  return plan;
}

std::vector<OutTensor> Executable::run(const std::vector<InTensor>& inputs,
                                       const std::vector<int64_t>& symbol_values) const {
  std::shared_ptr<const Plan> plan = plan_for(inputs, symbol_values);
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

  const Graph& g = graph_;
  if (ctx->arena_bytes < plan->mem.arena_bytes) {
    ctx->arena = aligned_buffer(plan->mem.arena_bytes);
    ctx->arena_bytes = plan->mem.arena_bytes;
  }
  std::vector<std::shared_ptr<void>> out_bufs(size_t(plan->mem.num_output_buffers));
  std::vector<void*> base(plan->mem.storages.size(), nullptr);
  for (size_t i = 0; i < plan->mem.storages.size(); ++i) {
    const Storage& s = plan->mem.storages[i];
    switch (s.kind) {
      case Storage::kArena: base[i] = static_cast<char*>(ctx->arena.get()) + s.offset; break;
      case Storage::kInput: base[i] = const_cast<void*>(inputs[size_t(s.index)].data); break;
      case Storage::kConst: base[i] = const_cast<void*>(g.nodes[size_t(s.index)].constant->data); break;
      case Storage::kOutput:
        out_bufs[size_t(s.index)] = aligned_buffer(s.bytes);
        base[i] = out_bufs[size_t(s.index)].get();
        break;
    }
    if (!base[i]) base[i] = empty_data();
  }
  if (ctx->bound != plan) {
    ctx->bound.reset();  // refs half rebuilt when an allocation fails match no plan
    ctx->ins.assign(plan->nodes.size(), {});
    ctx->outs.assign(plan->nodes.size(), {});
    for (size_t ni = 0; ni < plan->nodes.size(); ++ni) {
      const Node& n = plan->nodes[ni];
      for (int v : n.inputs) ctx->ins[ni].push_back({nullptr, g.type(v).dtype, plan->shapes[size_t(v)]});
      for (int v : n.outputs) ctx->outs[ni].push_back({nullptr, g.type(v).dtype, plan->shapes[size_t(v)]});
    }
    ctx->bound = plan;
  }
  // Constant weights: packed on first use (and again if the input moved), held here
  // for the call so a concurrent drop_packed() cannot free them mid-run.
  // weight_input_ is read under the lock: set_constant_inputs may run during a call.
  std::vector<std::shared_ptr<const PackedOperand>> packed;
  std::unique_lock<std::mutex> pack_lock(pack_mu_);
  if (!weight_input_.empty()) {
    packed.resize(plan->nodes.size());
    for (size_t ni = 0; ni < plan->nodes.size(); ++ni) {
      int pos = weight_input_[ni];
      if (pos < 0) continue;
      const Node& n = plan->nodes[ni];
      WeightOperand w = weight_operand(n);
      WeightGemm wg = weight_gemm(n, w, plan->shapes);
      if (!wg.reads_packed) continue;  // few rows: B is streamed in place
      const float* src = static_cast<const float*>(inputs[size_t(pos)].data);
      auto& kept = packed_[ni];
      if (!kept || kept->src != src || kept->rows != wg.rows || kept->cols != wg.cols || kept->side != wg.side)
        kept = std::make_shared<const PackedOperand>(
            wg.side == PackedOperand::kWinograd ? conv3x3_winograd_pack(wg.rows, wg.cols / 9, src)
            : wg.side == PackedOperand::kA      ? sgemm_pack_a(wg.rows, wg.cols, src, wg.rs, wg.cs)
                                                : sgemm_pack_b(wg.rows, wg.cols, src, wg.rs, wg.cs));
      packed[ni] = kept;
    }
  }
  pack_lock.unlock();
  for (size_t ni = 0; ni < plan->nodes.size(); ++ni) {
    const Node& n = plan->nodes[ni];
    KernelFn fn = kernel_for(n.op);
    if (!fn) continue;
    const PackedOperand* pk = packed.empty() ? nullptr : packed[ni].get();
    auto& ins = ctx->ins[ni];
    auto& outs = ctx->outs[ni];
    for (size_t k = 0; k < n.inputs.size(); ++k) ins[k].data = base[size_t(plan->mem.storage_of[size_t(n.inputs[k])])];
    for (size_t k = 0; k < n.outputs.size(); ++k) outs[k].data = base[size_t(plan->mem.storage_of[size_t(n.outputs[k])])];
    const bool half = plan->via_f32[ni];
    KernelTimer timer(n.op, int64_t(ni), serial_, outs.empty() ? nullptr : &outs[0].shape);
    if (!half) {
      fn(KernelCtx{n, ins, outs, pk});
      continue;
    }
    // float16/bfloat16 storage: compute in float32 and round once on the way out.
    std::vector<TensorRef> fin = ins, fout = outs;
    std::vector<std::shared_ptr<void>> temps;
    for (auto& t : fin)
      if (is_half(t.dtype)) {
        temps.push_back(aligned_buffer(size_t(t.numel()) * 4));
        cast_buffer(t.data, t.dtype, temps.back().get(), DType::f32, t.numel());
        t.data = temps.back().get();
        t.dtype = DType::f32;
      }
    for (auto& t : fout)
      if (is_half(t.dtype)) {
        temps.push_back(aligned_buffer(size_t(t.numel()) * 4));
        t.data = temps.back().get();
        t.dtype = DType::f32;
      }
    fn(KernelCtx{n, fin, fout});
    for (size_t k = 0; k < outs.size(); ++k)
      if (is_half(outs[k].dtype)) cast_buffer(fout[k].data, DType::f32, outs[k].data, outs[k].dtype, outs[k].numel());
  }
  std::vector<OutTensor> result;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    int v = g.outputs[i];
    const Storage& s = plan->mem.storages[size_t(plan->mem.output_storage[i])];
    OutTensor o;
    o.dtype = g.type(v).dtype;
    o.shape = plan->shapes[size_t(v)];
    if (s.kind == Storage::kOutput) {
      o.storage = out_bufs[size_t(s.index)];
      o.data = o.storage.get();
    } else {  // an input or a constant returned as is: give the caller its own copy
      int64_t n = 1;
      for (int64_t d : o.shape) n *= d;
      size_t bytes = size_t(n) * dtype_size(o.dtype);
      o.storage = aligned_buffer(bytes);
      o.data = o.storage.get();
      std::memcpy(o.data, base[size_t(plan->mem.output_storage[i])], bytes);
    }
    result.push_back(std::move(o));
  }
  return result;
}

}  // namespace zenith
