// Quantized weight formats (quant_formats.def): the block layouts, each format's scalar
// reference dequantizer (the judge every fast path is held to), the activation
// quantizer the integer dot products read, and the scalar dot products of a weight row
// with a quantized activation row (the reference of the SIMD kernels in quant_avx2.cc,
// and the path that runs where AVX2 is absent). Internal to the kernels: quant.h is the
// interface the ops, the bindings and the tests use.
//
// Dot products (y = w . x for one weight row and one activation row):
// - Formats with 32-value blocks (q8_0, q4_0, q4_1, q5_0, q5_1, int4_g*, uint4_g*) and int8
//   read x quantized per 32 values: q = round(x / d) in [-127, 127] with d = max|x| / 127,
//   plus the sum of q per 16 values (the asymmetric formats' m term needs it). A block
//   contributes d_w * d_x * (integer dot of the codes) [+ m_w * d_x * sum(q)].
// - k-quants (q4_k, q5_k, q6_k) read x quantized per 256 values (one d per super-block,
//   like ggml's q8_K) and the sums per 16: a super-block's sub-block scales are integers,
//   so its whole dot is one integer before one float multiply.
// - nf4 reads x itself: its 16 levels are not integers, so it multiplies floats.
// The integer parts are exact and equal in every path; only the order of float sums
// differs between the scalar and the SIMD kernels (k-quants: not even that).
#pragma once
#include <algorithm>
#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "zenith/attrs.h"
#include "zenith/dtype.h"

namespace zenith::quant {

// ---- Block layouts (the GGUF formats bit for bit as ggml's ggml-common.h) ----
// The structs document the layouts and their sizes; kernels read blocks through byte
// offsets (offsetof) with unaligned loads, since a row of an odd-sized format, or a
// tensor view, need not be aligned.
struct BlockQ8_0 {
  uint16_t d;  // f16
  int8_t qs[32];
};
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];  // byte j: low nibble = value j, high nibble = value j + 16
};
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // bit j (little endian u32): the 5th bit of value j
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
// 256 values as 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min:
// value = d * scale_j * q - dmin * min_j, q in [0, 15]. qs holds sub-blocks (2i, 2i+1) in
// the low and high nibbles of bytes [32i, 32i + 32).
struct BlockQ4K {
  uint16_t d, dmin;
  uint8_t scales[12];  // packed 6-bit scales and mins (unpack_q4k_scales)
  uint8_t qs[128];
};
// As q4_k with a 5th bit: bit j of qh[l] is the 5th bit of value l of sub-block j.
struct BlockQ5K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// 256 values as 16 groups of 16, each with an int8 scale: value = d * scale_g * (q - 32),
// q in [0, 63]: 4 low bits in ql, 2 high bits in qh (layout in dequant_q6k).
struct BlockQ6K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
template <int G> struct BlockInt4 {  // int4_g64 / int4_g128: d * (q - 8)
  uint16_t d;
  uint8_t qs[G / 2];  // G / 32 sub-chunks of 16 bytes, each as q4_0's
};
template <int G> struct BlockUint4 {  // uint4_g64 / uint4_g128: d * q + m
  uint16_t d, m;
  uint8_t qs[G / 2];
};
struct BlockNF4 {  // NF4[q] * absmax
  uint16_t absmax;
  uint8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 &&
              sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ4K) == 144 && sizeof(BlockQ5K) == 176 && sizeof(BlockQ6K) == 210);
static_assert(sizeof(BlockInt4<64>) == 34 && sizeof(BlockInt4<128>) == 66 && sizeof(BlockUint4<64>) == 36 &&
              sizeof(BlockUint4<128>) == 68 && sizeof(BlockNF4) == 34);

// The block geometry of quant_formats.def at compile time, for the static_asserts below.
constexpr int64_t kBlockElems[] = {
#define QFORMAT(name, elems, bytes) elems,
#include "zenith/quant_formats.def"
#undef QFORMAT
};
constexpr int64_t kBlockBytes[] = {
#define QFORMAT(name, elems, bytes) bytes,
#include "zenith/quant_formats.def"
#undef QFORMAT
};

// The formats built from 32-value chunks with one f16 scale (and an optional f16 min)
// per block, described once for the scalar reference and the SIMD kernels: where each
// part of a block lives, and what a code means.
struct SmallBlock {
  bool valid = false;  // false: not such a format
  int bytes = 0;       // block bytes
  int chunks = 0;      // 32-value chunks per block
  bool has_m = false;  // an f16 min after d: value = d * q + m (codes unsigned)
  int qh = -1;         // offset of the u32 of 5th bits, or -1
  int qs = 0;          // offset of the codes: 16 bytes of nibbles per chunk, or 32 int8 (q8_0)
  int offset = 0;      // without a min: value = d * (q - offset)
  bool int8 = false;   // codes are int8 bytes (q8_0)
};
constexpr SmallBlock small_block_layout(QFormat f) {
  switch (f) {
    case QFormat::q8_0: return {true, 34, 1, false, -1, 2, 0, true};
    case QFormat::q4_0: return {true, 18, 1, false, -1, 2, 8, false};
    case QFormat::q4_1: return {true, 20, 1, true, -1, 4, 0, false};
    case QFormat::q5_0: return {true, 22, 1, false, 2, 6, 16, false};
    case QFormat::q5_1: return {true, 24, 1, true, 4, 8, 0, false};
    case QFormat::int4_g64: return {true, 34, 2, false, -1, 2, 8, false};
    case QFormat::int4_g128: return {true, 66, 4, false, -1, 2, 8, false};
    case QFormat::uint4_g64: return {true, 36, 2, true, -1, 4, 0, false};
    case QFormat::uint4_g128: return {true, 68, 4, true, -1, 4, 0, false};
    default: return {};
  }
}
constexpr bool small_blocks_match_the_table() {
  for (size_t i = 0; i < sizeof(kBlockBytes) / sizeof(kBlockBytes[0]); ++i) {
    SmallBlock s = small_block_layout(QFormat(i));
    if (s.valid && (s.bytes != kBlockBytes[i] || 32 * s.chunks != kBlockElems[i])) return false;
  }
  return true;
}
static_assert(small_blocks_match_the_table(), "small_block_layout disagrees with quant_formats.def");
static_assert(kBlockBytes[int(QFormat::q4_k)] == sizeof(BlockQ4K) && kBlockBytes[int(QFormat::q5_k)] == sizeof(BlockQ5K) &&
              kBlockBytes[int(QFormat::q6_k)] == sizeof(BlockQ6K) && kBlockBytes[int(QFormat::nf4)] == sizeof(BlockNF4));

// bitsandbytes' NF4 levels (normal-float quantiles), code 0..15.
extern const float kNF4[16];

// The weight kernels that take one row at a time (over_rows, AVX2 and AVX-512) prefetch
// the row kRowPrefetchAhead bytes past the one they are summing: a decode GEMV streams
// each weight once, and the hardware prefetchers alone left it latency-bound. Intel Xeon
// 6/167, 2 threads, one row of x, weights cold, medians of 3 interleaved runs, us without
// -> with: q5_0 2048 x 640 153 -> 70, q6_k 640 x 2048 90 -> 72, q4_k 640 x 1024 40 -> 27,
// q4_0 2048 x 640 65 -> 51, int4_g128 5632 x 2048 587 -> 403 and 2048 x 5632 572 -> 446,
// int8 5632 x 2048 649 -> 591. Weights in cache: rows under 1 KiB within noise, rows of
// 2-3 KiB (K = 5632) up to 13% slower (int4_g128 2048 x 5632 208 -> 236). 2048 bytes ahead
// measured the same, 4096 and "the next row" for long rows slower.
constexpr int64_t kRowPrefetchAhead = 1024;
// Only calls over more than this many weight bytes prefetch (over_rows, and AVX2's int8
// kernel for one row of x its rows 8-11 ahead instead): decode hands a thread's whole
// share to one call, while many rows of x (prefill) pass over blocks of ~16 KiB that stay
// in L1, where the prefetches only cost instructions (2-7% at 16-64 rows, in cache).
constexpr int64_t kRowPrefetchMinBytes = 32 << 10;
// n cache lines from address p on, into L1 (kLocality 3) or L2 (2). p is an integer: it
// may lie past the end of the weights, which a prefetch may touch (it never faults) but
// pointer arithmetic may not.
template <int kLocality = 3>
inline void prefetch_lines(uintptr_t p, int64_t n) {
  for (int64_t l = 0; l < n; ++l) __builtin_prefetch(reinterpret_cast<const void*>(p + 64 * uintptr_t(l)), 0, kLocality);
}
// over_rows' prefetch: the lines of the row_bytes that start kRowPrefetchAhead bytes past
// `row`.
inline void prefetch_row_ahead(const uint8_t* row, int64_t row_bytes) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(row) + uintptr_t(kRowPrefetchAhead), a = p & ~uintptr_t(63);
  prefetch_lines(a, int64_t((p + uintptr_t(row_bytes) - a + 63) / 64));
}

// The lanes tiles' prefetch, spread over their blocks: block b's `per` of next_lines
// cache lines from `next` on, into L2 (per = next_lines / blocks, rounded up).
inline void prefetch_block_share(uintptr_t next, int64_t next_lines, int64_t per, int64_t b) {
  const int64_t lo = b * per;
  if (lo < next_lines) prefetch_lines<2>(next + uintptr_t(64 * lo), std::min(per, next_lines - lo));
}

inline float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}
inline float f32_at(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}
// q4_k / q5_k: the 8 six-bit scales and mins of a super-block's 12 scale bytes.
inline void unpack_q4k_scales(const uint8_t* s, uint8_t sc[8], uint8_t mn[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    mn[j] = s[j + 4] & 63;
    sc[j + 4] = uint8_t((s[j + 8] & 15) | ((s[j] >> 6) << 4));
    mn[j + 4] = uint8_t((s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4));
  }
}

// The reference dequantizer: `out` = the K values of one row. Float operations are those
// of gguf.quants.dequantize (and ggml's dequantize_row_*), unfused, so GGUF rows match it
// bit for bit.
void ref_dequant_row(QFormat f, const uint8_t* row, int64_t K, float* out);

// ---- Activations ----
enum class ActKind : uint8_t {
  kQ8x32,   // int8 per 32 values, one f32 scale per 32
  kQ8x256,  // int8 per 32 values, one f32 scale per 256 (k-quants)
  kF32,     // x itself (nf4)
};
ActKind act_kind(QFormat f);
inline int64_t act_block(ActKind k) { return k == ActKind::kQ8x256 ? 256 : 32; }

// One activation row as the dot products read it. kpad = K rounded up to 32; q[K..kpad)
// are 0. d: one scale per act_block values; s16: the sum of q per 16 values.
struct QActRow {
  const int8_t* q;
  const float* d;
  const int16_t* s16;
  const float* x;  // the row in float (nf4)
  // -zero x the sum of each 4 codes (kpad / 4 values), for kernels whose unsigned codes
  // carry a zero point (quant_avx512.cc); null where the plan's kernels do not read it
  const int32_t* zsum = nullptr;
  // The sum over blocks b of d[b] x (block b's codes), for the int8 GEMM tiles that take
  // the zero point's share off in float (q8_gemm_packed makes it once per row)
  float zshare = 0.0f;
  // The sum of the row's codes, for the uniform tiles that start their sums from -128 x it
  // (AVX-VNNI, AVX-512; q8_gemm_packed makes it once per row)
  int32_t total = 0;
  // A row in nseg equal runs, seg_stride bytes apart (AVX-512's uniform tiles only): an
  // int8 conv's window read in place from its padded input, one run per kernel row
  // (conv2d_int8's direct rows). 1: the row is q[0, kpad).
  int32_t nseg = 1;
  int64_t seg_stride = 0;
};
// Quantizes x[0, K) into q (kpad values), d (kpad / block scales) and s16 (kpad / 16
// sums). q is in [-qmax, qmax], so |code| * |q| products fit the SIMD kernels' 16-bit pair
// sums (quant_avx2.cc): qmax 127 for the dot kernels and the sign-trick tiles, 63 for the
// AVX2 GEMM tile that multiplies unsigned weight codes (q8_gemm_tiles_u8_avx2). A block
// holding inf or NaN gets d = NaN and q = 0: its dot is NaN. scale > 0: every block's
// scale is `scale` (static INT8: codes round(x / scale), clamped); 0: each block's is
// max|x| / qmax (dynamic).
void quantize_act_row(const float* x, int64_t K, int64_t block, int8_t* q, float* d, int16_t* s16,
                      float scale = 0.0f, int qmax = 127);
// quantize_act_row's rule for one block, which its SIMD kernels share: given the block's
// max|x| (m; top x scale where a scale is given) and whether it holds no inf or NaN,
// writes the block's scale to *d and returns the codes' multiplier, or 0 where the block
// quantizes to zeros: a block of zeros, one so small that qmax / max overflows (max below
// ~4e-37), or (with *d NaN) one holding inf or NaN.
inline float act_block_multiplier(float m, bool finite, float scale, float top, float* d) {
  const float id = finite && m > 0.0f ? (scale > 0.0f ? 1.0f / scale : top / m) : 0.0f;
  if (!(id > 0.0f && id <= FLT_MAX)) {
    *d = finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
    return 0.0f;
  }
  *d = scale > 0.0f ? scale : m / top;
  return id;
}
// The same in AVX2 (quant_avx2.cc), equal to it value for value.
void quantize_act_row_avx2(const float* x, int64_t K, int64_t block, int8_t* q, float* d, int16_t* s16,
                           float scale = 0.0f, int qmax = 127);
// The same in AVX-512 (quant_avx512.cc; AVX512F/BW/VL), equal to it value for value.
void quantize_act_row_avx512(const float* x, int64_t K, int64_t block, int8_t* q, float* d, int16_t* s16,
                             float scale = 0.0f, int qmax = 127);
using QuantizeActFn = void (*)(const float*, int64_t, int64_t, int8_t*, float*, int16_t*, float, int);
// One activation scale for a whole row (dynamic INT8 per row, quantize_act_row's
// `scale`): max|x| over x[0, K) / qmax, NaN ignored; 1 where that is 0 (a row of zeros,
// or so small the division underflows: it quantizes to zeros on any scale) or the max is
// inf (a block holding inf or NaN gets a NaN scale from quantize_act_row on any scale).
float act_row_scale(const float* x, int64_t K, int qmax);
// act_row_scale from the row's max|x| (NaN left out): both builds end here.
inline float act_row_scale_of_max(float amax, int qmax) {
  const float s = amax <= FLT_MAX ? amax / float(qmax) : 0.0f;
  return s > 0.0f ? s : 1.0f;  // 0 (a row of zeros, or max|x| below ~1e-43 / qmax) or inf: 1
}
// The same in AVX-512 (quant_avx512.cc), equal to it (AVX2 and AVX-VNNI keep a scale
// per block: qmatmul_plan).
float act_row_scale_avx512(const float* x, int64_t K, int qmax);
using ActRowScaleFn = float (*)(const float*, int64_t, int);
// Rows of one scale (QActRows::uniform: static INT8, dynamic INT8 per row) in one pass:
// x[0, K) (each value times mul[k] first where mul is given: SmoothQuant's x_mul) into
// codes q[0, K) on 1 / scale = id, and their sum into *total. The codes are
// quantize_act_row's on that scale, value for value (round half to even, clamped to
// +-qmax), where every value is finite; returns false if one is NaN or infinite (q and
// *total are then not the row's: the caller quantizes it block by block, whose NaN scale
// makes the row's products NaN). K a multiple of 32. quantize_act_row's per-block pass
// read each row twice (a finiteness check, then the codes) and made 16-sums the uniform
// tiles never read, after a pass of its own for mul: 11% of all-MiniLM-L6-v2
// int8-static's samples at seq 128 (AMD Zen 4, family 25 model 17, AVX-512 VNNI). In one
// pass, the same outputs bit for bit, calls alternated in one process: MiniLM int8-static
// 0.932x the time, int8-dynamic 0.940x; BERT-base 0.967x and 0.980x; held to AVX2
// (static only: AVX2's dynamic rows keep a scale per block) MiniLM 0.978x, BERT-base 0.988x.
// AVX2 (quant_avx2.cc; AVX-VNNI plans use it too) and AVX-512 (quant_avx512.cc).
bool quantize_uniform_row_avx2(const float* x, const float* mul, int64_t K, float id, int qmax, int8_t* q,
                               int32_t* total);
bool quantize_uniform_row_avx512(const float* x, const float* mul, int64_t K, float id, int qmax, int8_t* q,
                                 int32_t* total);
using QuantizeUniformFn = bool (*)(const float*, const float*, int64_t, float, int, int8_t*, int32_t*);

// The scalar dot product of one weight row (K values) with an activation row: the
// reference of the SIMD kernels and the kernel that runs without AVX2.
float ref_dot(QFormat f, const uint8_t* w, int64_t K, const QActRow& a);

// A SIMD dot kernel: out[r * ldo + n] = w_n . a[r] for `rows` weight rows w_n (at
// w + n * row_bytes) and MR activation rows (MR fixed per kernel), each weight block
// decoded once for all MR. The loop over weight rows is inside, so nothing is paid per
// row beyond the dot product itself.
using QDotFn = void (*)(const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t K, const QActRow* a, float* out,
                        int64_t ldo);
constexpr int kMaxDotRows = 4;
// The AVX2 kernels of `f` for 1..kMaxDotRows rows (quant_avx2.cc), or null when it has none.
// They read no QActRow::zsum: the nibble formats' zero point comes from s16.
const QDotFn* avx2_dot_kernels(QFormat f);
// The same kernels compiled for AVX-VNNI (quant_avxvnni.cc), every format: vpdpbusd where
// AVX2 multiplies with maddubs and madd.
const QDotFn* avxvnni_dot_kernels(QFormat f);
// Weight rows the AVX2 kernels of `f` take at a time (8 for the 4-bit nibble formats,
// rows8_nibbles; 1 otherwise): qmatmul hands them blocks of rows in multiples of it, so
// that only a matrix's last rows take the one-row-at-a-time path. (int8 against one row
// of x takes 4 at a time inside any block, the last 1-3 one at a time: 1 here.)
constexpr int avx2_weight_rows(QFormat f) {
  const SmallBlock s = small_block_layout(f);
  return s.valid && !s.int8 && s.qh < 0 ? 8 : 1;
}
// The AVX-512 VNNI kernels of `f` (quant_avx512.cc: q8_0, q4_0, q5_0, int8, int4_g64,
// int4_g128), or null. They read QActRow::zsum, made by zero_sums with zero =
// avx512_zero_point(f): what makes the format's codes unsigned bytes.
const QDotFn* avx512_dot_kernels(QFormat f);
inline int avx512_zero_point(QFormat f) {
  if (!avx512_dot_kernels(f)) return 0;
  return f == QFormat::q8_0 || f == QFormat::int8 ? 128 : f == QFormat::q5_0 ? 16 : 8;
}
// out[j] = -zero x (q[4j] + q[4j+1] + q[4j+2] + q[4j+3]) for j < kpad / 4 (kpad a
// multiple of 32): the reference, and AVX-512 VNNI (quant_avx512.cc) equal to it.
void zero_sums(const int8_t* q, int64_t kpad, int zero, int32_t* out);
void zero_sums_avx512(const int8_t* q, int64_t kpad, int zero, int32_t* out);
using ZeroSumsFn = void (*)(const int8_t*, int64_t, int, int32_t*);

// The int8 GEMM tile: y[r * ldy + c] = wscale[c] x sum over 32-value blocks b of
// a[r].d[b] x (integer dot of block b of row r with column c), for r < mr (1..the
// plan's tile_rows) and c < nvalid (<= 32), the same integer sums as ref_dot's for int8
// (the per-block tiles, but AVX2's sign-trick ones, take the zero point's share off in
// float, once per row: QActRow::zshare; the uniform tiles start their sums from it). wblock: one block of 32 columns of a weight packed by qmatmul_pack_int8
// for the same ISA (kpad / 4 quads, each 32 columns x 4 codes); wscale: its 32 column
// scales. The codes are packed + 128, unsigned, for every ISA. AVX-512 VNNI
// (quant_avx512.cc), AVX-VNNI and AVX2's u8 tiles multiply them as they are, the
// activation rows' s16 sums giving the zero point's share; AVX2's other tiles read them
// back signed (the sign trick).
// One tile function per row count, as the dot kernels: tiles[mr - 1].
using QGemmTileFn = void (*)(const uint8_t* wblock, const float* wscale, int64_t kpad, const QActRow* a, float* y,
                             int64_t ldy, int nvalid);
const QGemmTileFn* q8_gemm_tiles_avx512();
const QGemmTileFn* q8_gemm_tiles_avx2();
// AVX2 tiles for activation codes in [-63, 63] only (quantize_act_row with qmax 63):
// one maddubs of the unsigned weight codes by the activation codes, no sign trick; for
// 1..kMaxNarrowRows rows.
constexpr int kMaxNarrowRows = 4;
const QGemmTileFn* q8_gemm_tiles_u8_avx2();
// The same tiles on AVX-VNNI (vpdpbusd: no saturation), for any codes within +-127;
// 1..kMaxNarrowRows rows. Like every tile for rows with a scale per block but AVX2's
// sign-trick ones, they read QActRow::zshare.
const QGemmTileFn* q8_gemm_tiles_avxvnni();
// The tiles for rows whose blocks all have the scale a[r].d[0] (static INT8, conv2d's
// per-image scale), for 1..kMaxUniformRows rows (AVX2, AVX-VNNI: 16 registers) or
// 1..kMaxUniformRowsAvx512 (32 registers): the integer sums over the whole K, scaled
// once; the same results up to float order. QMatmulPlan::uniform_rows says which.
constexpr int kMaxUniformRows = 8;
constexpr int kMaxUniformRowsAvx512 = 12;
const QGemmTileFn* q8_gemm_tiles_uniform_avx512();
const QGemmTileFn* q8_gemm_tiles_uniform_avx2();
const QGemmTileFn* q8_gemm_tiles_uniform_avxvnni();
// An int8 conv's output as codes alone (conv2d_int8.cc: the next int8 conv's input),
// for row r and column c of a tile, with f the float the uniform tile makes there:
//   v = f x scale[c] + shift[c]          (one FMA)
//       + res[r * ld + c] x r_scale      (res given; NaN for the mark -128)
//   v = ReLU(v)                          (relu: v < 0 gives +0, NaN and -0 stay)
//   y[r * ld + c] = the code of v on 1 / scale = inv (round half to even, clamped to
//                   +-127; -128 for a NaN or an infinity),
// the arithmetic of conv2d_int8's write-out from floats (store_blocked, codes_by_value)
// in the same order, so the same codes. Pointers at the tile's first row and column.
struct QCodesOut {
  const float* scale = nullptr;
  const float* shift = nullptr;
  const int8_t* res = nullptr;
  float r_scale = 0.0f;
  int8_t* y = nullptr;
  int64_t ld = 0;
  float inv = 0.0f;
  bool relu = false;
};
// The uniform tiles writing codes (QCodesOut) instead of floats, columns < nvalid, for
// 1..kMaxUniformRowsAvx512 rows: AVX-512 VNNI only (quant_avx512.cc). (On AVX2 the same
// epilogue in the tiles measured no faster than conv2d_int8's second pass: 1.01-1.03x
// ResNet-50 int8-static's time, Zen 4 held to AVX2.)
using QGemmCodesTileFn = void (*)(const uint8_t* wblock, const float* wscale, int64_t kpad, const QActRow* a,
                                  const QCodesOut& out, int nvalid);
const QGemmCodesTileFn* q8_gemm_codes_tiles_avx512();
// The 4-bit GEMM with rows of x in the lanes, for the nibble formats whose value is
// d x (q - 8) (q4_0, int4_g64, int4_g128) and 8 or more rows of x. The dot kernels above
// decode each weight block once per tile of up to 4 rows and spend a convert and an FMA
// per 32 values and row; here a register holds `width` rows of x (16 in 512 bits, 8 in
// 256), 4 activation codes each, a weight quad (4 codes of one column, unpacked into
// bytes once per sweep over the rows) is broadcast to all of them, and one vpdpbusd (AVX2: maddubs, its
// int16 pairs summed over a 32-value block, then madd) multiplies the quad with every
// row; the scales are applied once per 32-value block for all the rows at a time.
// Whether the lanes GEMM takes weights of format f.
constexpr bool lanes_format(QFormat f) {
  return f == QFormat::q4_0 || f == QFormat::int4_g64 || f == QFormat::int4_g128;
}
constexpr int kMaxLaneRows = 16;  // rows of x per register: 16 (AVX-512), 8 (AVX2, AVX-VNNI)
constexpr int kMaxLaneCols = 8;   // weight columns per tile: 8 (AVX-512), kLaneColsAvx2
constexpr int kLaneColsAvx2 = 4;  // (16 registers: 2 per column, and the rows' quad)
// `width` activation rows of one scale per 32 values as the lanes tiles read them, for
// kpad values: q [kpad / 4][width][4] (quad j of row r at q + 4 (width j + r)), d
// [kpad / 32][width] (the rows' block scales), z [kpad / 32][width] (-8 x the sum of each
// row's block codes: the zero point's share); rows past the last are codes 0, scales 0.
struct QLaneRows {
  const int8_t* q;
  const float* d;
  const int32_t* z;
};
// Lays out rows a[0, rows) (rows <= width) of kpad values as a QLaneRows in q, d, z.
void lane_rows(const QActRow* a, int rows, int width, int64_t kpad, int8_t* q, float* d, int32_t* z);
// Unpacks `cols` (<= width <= kMaxLaneCols) weight rows of format f (lanes_format) at w,
// row_bytes apart, K values each, into codes [width][K] (unsigned, 0..15, value order)
// and scales [width][K / 32] (each 32-value chunk's d in f32); the columns from `cols` to
// `width` (a tile's columns) get codes and scales 0. The scalar reference, and AVX2
// (quant_avx2.cc; every lanes tile's ISA runs it).
void lane_unpack(QFormat f, const uint8_t* w, int64_t row_bytes, int cols, int width, int64_t K, uint8_t* codes,
                 float* scales);
void lane_unpack_avx2(QFormat f, const uint8_t* w, int64_t row_bytes, int cols, int width, int64_t K, uint8_t* codes,
                      float* scales);
// A lanes tile: out[c * width + r] = sum over blocks b of a.d[b][r] x scales[c][b] x (the
// integer dot of block b of row r with column c, less its zero point), for c < its
// columns, r < width: the integer sums are ref_dot's, scaled and added in its order and
// rounding (no FMA), so every output equals ref_dot's bit for bit. codes and scales as
// lane_unpack writes them. Meanwhile it prefetches next_lines cache lines from address
// `next` (a line's) on into L2 (the next group's weight rows, or none): the unpacking reads a group's rows
// in one burst and the tile none, so the hardware prefetchers, left alone, idle while
// the tile runs (Intel Xeon 6/167, 2 threads, 16 rows of x, int4_g128 weights cold, one
// run each, us without -> with: 2048 x 2048 304 -> 302, 5632 x 2048 791 -> 740, 2048 x
// 5632 817 -> 788; into L1 instead: the same).
using QLaneTileFn = void (*)(const QLaneRows& a, const uint8_t* codes, const float* scales, int64_t K, float* out,
                             uintptr_t next, int64_t next_lines);
// AVX-512 VNNI: 16 rows x 8 columns (quant_avx512.cc).
void lanes_tile_avx512(const QLaneRows& a, const uint8_t* codes, const float* scales, int64_t K, float* out,
                       uintptr_t next, int64_t next_lines);
// AVX2 and AVX-VNNI: 8 rows x kLaneColsAvx2 columns (quant_avx2.cc, quant_avxvnni.cc).
void lanes_tile_avx2(const QLaneRows& a, const uint8_t* codes, const float* scales, int64_t K, float* out,
                     uintptr_t next, int64_t next_lines);
void lanes_tile_avxvnni(const QLaneRows& a, const uint8_t* codes, const float* scales, int64_t K, float* out,
                        uintptr_t next, int64_t next_lines);

// AVX2 uniform tiles for rows whose codes are all in [0, 127] (QActRows::nonneg): the
// activation codes are maddubs' unsigned operand, no sign trick.
const QGemmTileFn* q8_gemm_tiles_uniform_nonneg_avx2();
// The same for weights of 7-bit codes (PackedOperand::q8_max <= 63): two quads' maddubs
// pairs summed in int16 before each madd.
const QGemmTileFn* q8_gemm_tiles_uniform_w7_avx2();
// AVX2's narrow tiles (q8_gemm_tile_u8) for weights of 7-bit codes: the same, two quads'
// pairs summed in int16 before each madd.
const QGemmTileFn* q8_gemm_tiles_u8_w7_avx2();
// AVX2's narrow tiles (8-bit weight codes, or 7-bit: w7) for rows whose scales come one
// per 64 values (QActRows::group 2): each pair of blocks summed in int32, then scaled once.
const QGemmTileFn* q8_gemm_tiles_u8_pairs_avx2(bool w7);

}  // namespace zenith::quant
