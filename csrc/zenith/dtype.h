// Element types Zenith values can carry. float32 is the compute type; float16 and
// bfloat16 are storage types (kernels convert to float32 on load); int64, int32
// and bool serve indices and masks; u8 is quantized weight storage (bytes in a format of
// quant_formats.def), read only by the quantized ops and moved by data movement.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace zenith {

#define ZENITH_DTYPES(X) \
  X(f32, float, 4)       \
  X(f16, uint16_t, 2)    \
  X(bf16, uint16_t, 2)   \
  X(i64, int64_t, 8)     \
  X(i32, int32_t, 4)     \
  X(b8, bool, 1)         \
  X(u8, uint8_t, 1)

enum class DType : uint8_t {
#define X(name, ctype, size) name,
  ZENITH_DTYPES(X)
#undef X
};

inline constexpr int kNumDTypes = 7;
static_assert(int(DType::u8) + 1 == kNumDTypes, "kNumDTypes must count ZENITH_DTYPES");

inline size_t dtype_size(DType d) {
  switch (d) {
#define X(name, ctype, size) \
  case DType::name:          \
    return size;
    ZENITH_DTYPES(X)
#undef X
  }
  return 0;
}

inline const char* dtype_name(DType d) {
  switch (d) {
#define X(name, ctype, size) \
  case DType::name:          \
    return #name;
    ZENITH_DTYPES(X)
#undef X
  }
  return "?";
}

// Returns false if `s` names no dtype.
bool parse_dtype(const std::string& s, DType* out);

inline bool is_float(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16; }

// A scale int8 codes can be quantized by (code = round(v * (1 / scale))): positive and
// finite, and so is its inverse (a scale under ~1e-38 would quantize by an infinite
// factor). The int8 ops' inference and kernels check theirs with it.
inline bool usable_scale(float s) { return s > 0.0f && s <= 3.40282347e38f && 1.0f / s <= 3.40282347e38f; }

// float16 / bfloat16 <-> float32, round-to-nearest-even, NaN preserved.
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
inline float f16_to_f32(uint16_t h) {
#if defined(__FLT16_MAX__)
  _Float16 v;
  std::memcpy(&v, &h, 2);
  return float(v);
#else
#error "Zenith needs a compiler with _Float16"
#endif
}
inline uint16_t f32_to_f16(float f) {
  _Float16 v = (_Float16)f;
  uint16_t h;
  std::memcpy(&h, &v, 2);
  return h;
}

}  // namespace zenith
