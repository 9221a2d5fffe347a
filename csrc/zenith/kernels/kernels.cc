// The kernel table, generated from ops.def.
#include "zenith/kernels/kernels.h"

namespace zenith {

namespace {
const KernelFn kKernels[] = {
#define OP(name, nin, nout, traits) run_##name,
#include "zenith/ops.def"
#undef OP
};
static_assert(sizeof(kKernels) / sizeof(kKernels[0]) == size_t(Op::kCount), "kernel table and op table disagree");
}  // namespace

KernelFn kernel_for(Op op) {
  if (op == Op::reshape || op == Op::constant) return nullptr;
  return kKernels[size_t(op)];
}

bool kernel_is_dtype_generic(Op op) {
  switch (op) {
    case Op::reshape: case Op::copy: case Op::permute: case Op::expand: case Op::slice: case Op::cat:
    case Op::pad: case Op::embedding: case Op::index_select: case Op::gather: case Op::index: case Op::tril: case Op::constant:
    case Op::full: case Op::where: case Op::cast:
      return true;
    default:
      return false;
  }
}

}  // namespace zenith
