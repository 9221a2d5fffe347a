// Argument conversion shared by the binding files. No logic lives here beyond
// translating between Python objects and core types.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "zenith/error.h"
#include "zenith/ir.h"
#include "zenith/runtime.h"

namespace zenith::py {
namespace nb = nanobind;

inline DType dtype_from_dlpack(nb::dlpack::dtype d) {
  using C = nb::dlpack::dtype_code;
  if (d.lanes != 1) fail("vector dtypes are not supported");
  switch (C(d.code)) {
    case C::Float:
      if (d.bits == 32) return DType::f32;
      if (d.bits == 16) return DType::f16;
      break;
    case C::Bfloat:
      if (d.bits == 16) return DType::bf16;
      break;
    case C::Int:
      if (d.bits == 64) return DType::i64;
      if (d.bits == 32) return DType::i32;
      break;
    case C::UInt:
      if (d.bits == 8) return DType::u8;
      break;
    case C::Bool: return DType::b8;
    default: break;
  }
  fail("unsupported tensor dtype (code ", int(d.code), ", ", int(d.bits), " bits)");
}

inline nb::dlpack::dtype dlpack_from_dtype(DType d) {
  using C = nb::dlpack::dtype_code;
  switch (d) {
    case DType::f32: return {uint8_t(C::Float), 32, 1};
    case DType::f16: return {uint8_t(C::Float), 16, 1};
    case DType::bf16: return {uint8_t(C::Bfloat), 16, 1};
    case DType::i64: return {uint8_t(C::Int), 64, 1};
    case DType::i32: return {uint8_t(C::Int), 32, 1};
    case DType::b8: return {uint8_t(C::Bool), 8, 1};
    case DType::u8: return {uint8_t(C::UInt), 8, 1};
  }
  return {};
}

inline DType dtype_from_name(const std::string& s) {
  DType d;
  if (!parse_dtype(s, &d)) fail("unknown dtype name '", s, "'");
  return d;
}

using CpuArray = nb::ndarray<nb::ro, nb::device::cpu>;

// Checks an incoming array is dense row-major, naming it on failure.
inline void require_contiguous(const CpuArray& a, const std::string& what) {
  for (size_t d = 0; d < a.ndim(); ++d)
    if (a.shape(d) == 0) return;  // empty: strides are meaningless
  int64_t expect = 1;
  for (size_t d = a.ndim(); d-- > 0;) {
    if (a.shape(d) != 1 && a.stride(d) != expect) fail(what, ": tensor is not contiguous");
    expect *= int64_t(a.shape(d));
  }
}

// A dense CPU array as a runtime input (checked contiguous, named `what` on failure).
inline InTensor in_tensor(const CpuArray& a, const std::string& what) {
  require_contiguous(a, what);
  InTensor t{a.data(), dtype_from_dlpack(a.dtype()), {}};
  for (size_t d = 0; d < a.ndim(); ++d) t.shape.push_back(int64_t(a.shape(d)));
  return t;
}

// torch.utils.dlpack.from_dlpack, looked up once. Held for the life of the process
// (never released: no destructor runs after the interpreter is gone). The GIL guards
// the lookup; two threads racing here at worst look it up twice.
inline nb::handle torch_from_dlpack() {
  static PyObject* fn = nullptr;
  if (!fn) fn = nb::object(nb::module_::import_("torch.utils.dlpack").attr("from_dlpack")).release().ptr();
  return fn;
}

// A torch tensor over `data` (dense, row-major), which `storage` keeps alive: a plain
// DLPack capsule handed to from_dlpack (nb::pytorch's export passes an object with
// __dlpack__ instead, which from_dlpack negotiates with in Python: ~1.3 us more).
inline nb::object to_torch(std::shared_ptr<void> storage, void* data, DType dtype, const std::vector<int64_t>& shape) {
  auto* keep = new std::shared_ptr<void>(std::move(storage));
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<std::shared_ptr<void>*>(p); });
  std::vector<size_t> dims(shape.begin(), shape.end());
  nb::ndarray<nb::device::cpu> arr(data, dims.size(), dims.data(), owner, nullptr, dlpack_from_dtype(dtype));
  return torch_from_dlpack()(arr.cast());
}

void init_ir(nb::module_& m);
void init_runtime(nb::module_& m);
void init_quant(nb::module_& m);
void init_model(nb::module_& m);

}  // namespace zenith::py
