// Canonicalization: removes ops that do nothing and collapses chains, so later passes
// and the runtime see one spelling of each computation:
//   copy(x) -> x; reshape/expand/cast/permute that leave x unchanged -> x;
//   permute(permute(x)) -> one permute (often the identity, so x);
//   reshape(reshape(x)) -> reshape(x); full-range slice -> x; cat of one input -> x;
//   x + 0, x - 0, x * 1, x / 1 with a scalar constant -> x (same dtype and shape only;
//   in floats only x + (-0) and x - (+0): -0 + 0 is +0, so x + 0 is not x at x = -0);
//   matmul/addmm(permute(a), permute(b)) where a permute swaps the last two dims ->
//   trans_a / trans_b on the operand itself, so a transpose (of a weight, or of the
//   activations and gradients a backward graph multiplies) is read through strides
//   instead of being copied every call.
// Leaves alone: anything whose identity depends on symbolic values it cannot prove equal.
#include <cmath>
#include <cstring>

#include "zenith/passes/passes.h"

namespace zenith {

namespace {
// True if v is a one-element constant equal to `x` (a float zero of x's sign).
bool is_scalar_const(const Graph& g, int v, double x) {
  int p = g.values[size_t(v)].producer;
  if (p < 0) return false;
  const Node& n = g.nodes[size_t(p)];
  if (n.op != Op::constant || !g.type(v).is_static() || g.type(v).static_numel() != 1) return false;
  switch (g.type(v).dtype) {
    case DType::f32: {
      float f;
      std::memcpy(&f, n.constant->data, 4);
      return f == float(x) && std::signbit(f) == std::signbit(x);
    }
    case DType::i64: { int64_t f; std::memcpy(&f, n.constant->data, 8); return double(f) == x; }
    case DType::i32: { int32_t f; std::memcpy(&f, n.constant->data, 4); return double(f) == x; }
    default: return false;
  }
}
}  // namespace

int canonicalize(Graph& g) {
  int changes = 0;
  g.reindex();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (n.outputs.size() != 1) continue;
    int out = n.outputs[0];
    const TensorType& ot = g.type(out);
    int forward = -1;  // input value that `out` equals, if any
    switch (n.op) {
      case Op::copy: forward = n.inputs[0]; break;
      case Op::reshape:
      case Op::expand:
      case Op::cast: {
        const TensorType& it = g.type(n.inputs[0]);
        if (it.dtype == ot.dtype && same_shape(it.shape, ot.shape)) forward = n.inputs[0];
        break;
      }
      case Op::permute: {
        auto p = n.const_ints("perm");
        int64_t r = int64_t(p.size());
        for (auto& d : p) d = d < 0 ? d + r : d;
        int prod = g.values[size_t(n.inputs[0])].producer;
        if (prod >= 0 && g.nodes[size_t(prod)].op == Op::permute) {
          // permute(permute(x, q), p) = permute(x, q[p[k]]): one data movement, or none
          auto q = g.nodes[size_t(prod)].const_ints("perm");
          std::vector<SymInt> composed;
          for (int64_t k = 0; k < r; ++k) {
            int64_t qk = q[size_t(p[size_t(k)])];
            composed.push_back(SymInt(qk < 0 ? qk + r : qk));
          }
          n.inputs[0] = g.nodes[size_t(prod)].inputs[0];
          n.set_ints("perm", composed);
          for (int64_t k = 0; k < r; ++k) p[size_t(k)] = composed[size_t(k)].value();
          ++changes;
        }
        bool id = true;
        for (size_t k = 0; k < p.size(); ++k) id = id && (p[k] == int64_t(k) || p[k] == int64_t(k) - int64_t(p.size()));
        if (id) forward = n.inputs[0];
        break;
      }
      case Op::slice: {
        const TensorType& it = g.type(n.inputs[0]);
        if (same_shape(it.shape, ot.shape)) forward = n.inputs[0];
        break;
      }
      case Op::cat:
        if (n.inputs.size() == 1) forward = n.inputs[0];
        break;
      case Op::add:
      case Op::sub:
      case Op::mul:
      case Op::div: {
        // x + (-0) and x - (+0) are x for every float x; x + (+0) is not (at -0).
        double unit = (n.op == Op::mul || n.op == Op::div) ? 1.0 : n.op == Op::add ? -0.0 : 0.0;
        if (n.op == Op::div && n.i("rounding", 0) != 0) break;
        for (int k = 0; k < 2; ++k) {
          if (k == 0 && (n.op == Op::sub || n.op == Op::div)) continue;  // only x - 0, x / 1
          int c = n.inputs[size_t(k)], x = n.inputs[size_t(1 - k)];
          if (is_scalar_const(g, c, unit) && g.type(x).dtype == ot.dtype && same_shape(g.type(x).shape, ot.shape)) {
            forward = x;
            break;
          }
        }
        break;
      }
      default: break;
    }
    if (forward >= 0) {
      replace_all_uses(g, out, forward);
      ++changes;
      continue;
    }
    if (n.op == Op::matmul || n.op == Op::addmm) {
      size_t first = n.op == Op::matmul ? 0 : 1;
      for (size_t side = 0; side < 2; ++side) {  // a, then b
        size_t slot = first + side;
        int p = g.values[size_t(n.inputs[slot])].producer;
        if (p < 0 || g.nodes[size_t(p)].op != Op::permute) continue;
        auto perm = g.nodes[size_t(p)].const_ints("perm");
        int64_t r = int64_t(perm.size());
        bool swap_last = r >= 2;
        for (int64_t k = 0; swap_last && k < r; ++k) {
          int64_t want = k == r - 2 ? r - 1 : (k == r - 1 ? r - 2 : k);
          int64_t got = perm[size_t(k)] < 0 ? perm[size_t(k)] + r : perm[size_t(k)];
          swap_last = got == want;
        }
        if (!swap_last) continue;
        const char* attr = side == 0 ? "trans_a" : "trans_b";
        n.inputs[slot] = g.nodes[size_t(p)].inputs[0];
        n.set_int(attr, n.i(attr, 0) ? 0 : 1);
        ++changes;
      }
    }
    if (n.op == Op::reshape) {  // reshape(reshape(x)) -> reshape(x)
      int p = g.values[size_t(n.inputs[0])].producer;
      if (p >= 0 && g.nodes[size_t(p)].op == Op::reshape) {
        n.inputs[0] = g.nodes[size_t(p)].inputs[0];
        ++changes;
      }
    }
  }
  return changes;
}

}  // namespace zenith
