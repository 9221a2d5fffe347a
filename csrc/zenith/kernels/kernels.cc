// The kernel table, generated from ops.def, and the prepare step every node goes
// through once per plan.
#include "zenith/kernels/kernels.h"

namespace zenith {

namespace {
const KernelFn kKernels[] = {
#define OP(name, nin, nout, traits, attrs) run_##name,
#include "zenith/ops.def"
#undef OP
};
static_assert(sizeof(kKernels) / sizeof(kKernels[0]) == size_t(Op::kCount), "kernel table and op table disagree");

PrepareFn prepare_for(Op op) {
  switch (op) {
    case Op::matmul: return prepare_matmul;
    case Op::addmm: return prepare_addmm;
    case Op::conv2d: return prepare_conv2d;
    case Op::conv2d_nchwc: return prepare_conv2d_nchwc;
    case Op::conv2d_pw_dw: return prepare_conv2d_pw_dw;
    case Op::sdpa: return prepare_sdpa;
    case Op::fused: return prepare_fused;
    case Op::qmatmul: return prepare_qmatmul;
    default: return nullptr;
  }
}
}  // namespace

KernelFn kernel_for(Op op) {
  if (op == Op::reshape || op == Op::constant) return nullptr;
  return kKernels[size_t(op)];
}

PreparedOp prepare_node(const Node& n, const std::vector<TensorRef>& in, const std::vector<TensorRef>& out) {
  PreparedOp p;
  p.run = kernel_for(n.op);
  p.attrs = decode_attrs(n);
  if (PrepareFn f = prepare_for(n.op)) f(PrepareCtx{n, p.attrs.get(), in, out}, &p);
  return p;
}

void run_node(const Node& n, const std::vector<TensorRef>& in, std::vector<TensorRef>& out) {
  PreparedOp p = prepare_node(n, in, out);
  if (p.run) p.run(p.ctx(n, in, out));
}

}  // namespace zenith
