// Quantized weight-only kernels: qmatmul (y = x @ dequant(w)^T + bias) and qembedding
// (rows of dequant(w)), for weights stored as u8 [N, row_bytes] in a format of
// quant_formats.def. The interface the ops (quant.cc), the bindings and the tests use;
// the formats themselves are in quant_formats.{h,cc}, the AVX2 kernels in quant_avx2.cc,
// the AVX-512 VNNI kernels (dot products, the int8 GEMM tile, the 4-bit lanes tile) in quant_avx512.cc.
#pragma once
#include <cstdint>
#include <array>
#include <functional>
#include <optional>

#include "zenith/attrs.h"
#include "zenith/dtype.h"
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/quant_formats.h"

namespace zenith {

// The instruction sets qmatmul's dot products come in: the scalar reference (any CPU),
// AVX2, AVX-VNNI (AVX2 with the 256-bit vpdpbusd) and AVX-512 VNNI, chosen at run time:
// the widest the CPU has, as sgemm chooses its kernels. ZENITH_NO_AVX512=1 leaves
// AVX-VNNI or AVX2, ZENITH_NO_AVXVNNI=1 (with it) AVX2. Formats without an AVX-512 kernel
// run their AVX2 one under kAvx512.
enum class QIsa : uint8_t { kScalar, kAvx2, kAvx512, kAvxVnni };
const char* qisa_name(QIsa isa);
bool qisa_supported(QIsa isa);
QIsa qisa_default();  // the best one this CPU runs
// The ISA qmatmul runs `f` in for `rows` rows of x: qisa_default(), except for the 4-bit
// nibble formats (q4_0, q4_1, int4_g*, uint4_g*), whose AVX2 kernels take 8 weight rows
// at a time:
// - on CPUs that run 512-bit instructions as two 256-bit halves (AMD Zen 4), AVX2 below
//   kHalvesLaneMinRows rows, and for the formats without a lanes tile at any rows. There,
//   on 2 threads, the AVX2 8-row kernels measured 1.3-1.45x faster than AVX-512's
//   one-row dot kernels in cache and 1.2-1.4x from memory, 1 to 128 rows of x (q4_0 and
//   int4_g128, N 5632 x K 2048; before the lanes GEMM existed); int8 and q8_0 keep VNNI
//   (faster there: 0.67 / 0.84 against 0.79 / 1.02 ns per 32 values, one row). The
//   AVX-512 lanes GEMM (lanes_format) beats the 8-row kernels there from 12 rows: GMAC/s,
//   8-row / lanes, q4_0 5632 x 2048: 8 rows 126 / 96, 11 rows 123 / 130, 12 rows 128 /
//   142, 16 rows 129 / 191, 128 rows 162 / 290; 2048 x 5632 and 256 x 2048 alike, and
//   int4_g128 (16 rows 131 / 224); TinyLlama int4's 16-token prompt 144 -> 100 ms
//   (docs/benchmarks/README.md, forty-ninth session).
// - on other AVX-512 CPUs, below lane_min_rows (decode) and from kNarrowMinK values a
//   row, the same 8-row kernels in AVX-VNNI where the CPU has it, else in AVX2 (AVX-512's
//   dot kernels take one row at a time). Intel Xeon 6/167, 2 threads, q4_0 inside
//   TinyLlama-1.1B int4 decode (weights cold), us a call, 8-row / one-row: 2048 x 5632
//   258-264 / 282-288; at K 2048 they lost (5632 x 2048 258-268 / 242-250, 32000 x 2048
//   1403 / 1327-1351), though in cache they run 1.3-1.7x the one-row kernels' GB/s:
//   the one-row kernels read consecutive rows as one stream, 8 rows at a time are 8
//   streams, which short rows keep restarting. TinyLlama int4 decode with this rule
//   0.985x the time a token (interleaved processes). AVX2's kernels equal AVX-VNNI's
//   there. From 8 rows the AVX-512 lanes tiles run.
constexpr int64_t kNarrowMinK = 4096;
constexpr int64_t kHalvesLaneMinRows = 12;
QIsa qisa_for(QFormat f, int64_t rows, int64_t K);

// What qmatmul chose for one format and one set of sizes, once per plan: the kernels,
// the activation layout and the split of the work.
struct QMatmulPlan {
  QFormat format = QFormat::q8_0;
  int64_t M = 0, N = 0, K = 0, row_bytes = 0;
  QIsa isa = QIsa::kScalar;
  quant::ActKind act = quant::ActKind::kQ8x32;
  const quant::QDotFn* dots = nullptr;  // the SIMD kernels for 1..kMaxDotRows rows; null: ref_dot
  const quant::QGemmTileFn* tiles = nullptr;  // int8: the GEMM tiles for 1..tile_rows rows, of the same ISA
  int tile_rows = 0;
  const quant::QGemmTileFn* uniform_tiles = nullptr;  // rows of one scale (QActRows::uniform), 1..uniform_rows
  int uniform_rows = 0;  // kMaxUniformRows, or kMaxUniformRowsAvx512 on AVX-512
  // AVX-512: the uniform tiles writing an int8 conv's codes (quant::QCodesOut), 1..uniform_rows
  const quant::QGemmCodesTileFn* codes_tiles = nullptr;
  const quant::QGemmTileFn* narrow_tiles = nullptr;   // for activation codes within +-narrow_max, 1..kMaxNarrowRows rows
  int narrow_max = 0;  // 63 on AVX2 (maddubs' pair sums), 127 on AVX-VNNI
  // AVX2: the narrow tiles against a weight of 7-bit codes (PackedOperand::q8_max <= 63)
  const quant::QGemmTileFn* narrow_w7_tiles = nullptr;
  // Blocks of 32 values per activation scale where the plan quantizes its own rows per
  // block (not uniform): 2 (a scale per 64 values) for AVX2 int8 plans with act_max 63 and
  // row_scale asked for (int8-dynamic), whose narrow tiles then scale each pair's sums
  // once (narrow_pair_tiles); 1 elsewhere. The rows' d keeps one entry per 32 values
  // (each scale repeated), so every kernel reading d per block reads them unchanged.
  int act_group = 1;
  const quant::QGemmTileFn* narrow_pair_tiles = nullptr;     // narrow_tiles for rows of group 2
  const quant::QGemmTileFn* narrow_w7_pair_tiles = nullptr;  // narrow_w7_tiles for rows of group 2
  const quant::QGemmTileFn* uniform_nonneg_tiles = nullptr;  // AVX2: uniform rows with no negative code
  // AVX2: the same against a weight of 7-bit codes (PackedOperand::q8_max <= 63)
  const quant::QGemmTileFn* uniform_w7_tiles = nullptr;
  quant::QuantizeActFn quantize = nullptr;  // the activation quantizer of the same ISA
  // Its one-pass form for rows of one scale (the packed int8 GEMM's uniform rows), or null
  quant::QuantizeUniformFn quantize_uniform = nullptr;
  // The largest activation code in the rows: 63 for AVX2 int8 plans of 8 or more rows on
  // dynamic activations (no x_scale) that quantize their own rows, which the int8 GEMM's
  // narrow tiles need; the dot kernels read the same codes when no packed weight is
  // given, so eager and compiled runs agree. Else 127. The GEMM takes its tiles by it.
  int act_max = 127;
  float x_scale = 0.0f;                     // > 0: static INT8 activations on this scale (int8 weights)
  quant::ActRowScaleFn row_scale = nullptr;  // dynamic INT8 per row (int8 weights): each row's own scale, or null
  quant::ZeroSumsFn zero_sums = nullptr;    // QActRow::zsum for the kernels that read it
  int zero = 0;                             // their zero point
  int64_t kpad = 0, nscales = 0, nsums = 0;  // one quantized activation row: codes, scales, 16-sums
  int64_t row_chunk = 0;  // rows of x per sweep over the weight rows (their activations stay in L2)
  int64_t n_block = 1;    // weight rows that stay in L1 while the tiles of rows of x pass
  int64_t n_grain = 1;    // fewest weight rows a thread takes
  int64_t n_step = 1;     // weight rows the dot kernels take at a time: blocks and shares are multiples of it
  // The int8 GEMM (a packed weight) split by rows of x, each thread quantizing its own
  // (q8_gemm_by_rows), rather than by blocks of columns (q8_gemm_packed): qmatmul_plan's
  // rule, from the threads at planning time; the two give the same values.
  bool split_rows = false;
  // The 4-bit lanes GEMM's tile (quant_formats.h) where it runs instead of the dot
  // kernels (a format lanes_format takes, lane_min_rows or more rows of x, a SIMD ISA),
  // else null; its rows of x per register and its weight columns.
  quant::QLaneTileFn lanes = nullptr;
  int lane_rows = 0, lane_cols = 0;
};
// Rows of x from which the lanes GEMM runs: 8 with vpdpbusd (AVX-512 VNNI: 1.1-1.4x the
// dot kernels' speed at 8 rows, 2.5-2.7x at 16; AVX-VNNI 0.93-1.07x at 8, 1.3x at 16,
// 1.65x at 64); 64 on AVX2, whose 8-row dot kernels keep up better (lanes 0.8x their
// speed at 8 rows, 0.9-1.05x at 16-32, 1.0-1.1x at 64-128). Intel Xeon 6/167, 2 threads,
// int4_g128 at TinyLlama's shapes, in cache.
constexpr int64_t lane_min_rows(QIsa isa) { return isa == QIsa::kAvx2 ? 64 : 8; }
// Throws zenith::Error if K is not a whole number of the format's blocks.
// x_scale > 0 (int8 weights only): activations quantized on that one scale (static INT8)
// instead of per block (dynamic: act_group x 32 values). codes8: the caller quantizes the
// rows itself, to codes within +-127 (conv2d_int8), so act_max is 127 whatever the rows.
// row_scale (int8 weights, no x_scale): each row of x quantized on one scale of its own,
// max|x| / act_max (act_row_scale), as dynamic INT8 per token does, where that pays
// (AVX-512 VNNI, and the scalar reference; AVX2 and AVX-VNNI keep a scale per act_group x
// 32 values: QMatmulPlan::row_scale says which); with a packed weight the int8 GEMM then
// sums each row over all of K (the uniform tiles).
QMatmulPlan qmatmul_plan(QFormat f, int64_t M, int64_t N, int64_t K, QIsa isa, float x_scale = 0.0f,
                         bool codes8 = false, bool row_scale = false);
// The plan in the ISA the runtime runs `f` in (qisa_for).
inline QMatmulPlan qmatmul_plan(QFormat f, int64_t M, int64_t N, int64_t K) {
  return qmatmul_plan(f, M, N, K, qisa_for(f, M, K));
}
// y[M, N] = act(x[M, K] @ dequant(w[N, row_bytes])^T (+ bias[N], if given)). Threads split N.
// packed: w as qmatmul_pack_int8 made it for the plan's ISA (the int8 GEMM runs), or null.
struct PackedOperand;
// act: applied to each output after the bias (fuse_epilogue's activation), while the
// tile is in cache. x_mul (static INT8 only, p.x_scale > 0): K floats each row of x is
// multiplied by, value by value, before it is quantized (1 / SmoothQuant's per-channel
// divisor s), in the quantizer's pass over the row rather than a pass of its own; the
// codes are those of quantizing x * x_mul computed in float32.
void qmatmul(const QMatmulPlan& p, const float* x, const uint8_t* w, const float* bias, float* y,
             const PackedOperand* packed = nullptr, Activation act = Activation::kNone,
             const float* x_mul = nullptr);
// Several weights sharing x, each a multiple of 32 rows (Q, K and V): the int8 GEMM over
// their rows concatenated (packed, as one qmatmul_pack_int8 weight, for the plan's N, the
// parts' rows summed), x quantized once, each part's columns (with its bias, if given)
// written into its own y [M, rows of its weight].
struct QPart {
  const float* bias = nullptr;
  float* y = nullptr;
  int64_t rows = 0;
};
void qmatmul_parts(const QMatmulPlan& p, const float* x, const std::vector<QPart>& parts, const PackedOperand& packed,
                   Activation act = Activation::kNone, const float* x_mul = nullptr);
// Whether qmatmul with this plan reads a weight packed by qmatmul_pack_int8: int8 weights,
// AVX2, AVX-VNNI or AVX-512 VNNI, and enough rows of x (kQ8GemmRows) for the GEMM tiles to pay for
// the packed copy (N x K bytes more while it is kept). Decode (one row) reads w as it is.
constexpr int64_t kQ8GemmRows = 8;
bool qmatmul_reads_packed(const QMatmulPlan& p);
// An int8 weight [N, 4 + K] (per row an f32 scale, K codes) as the int8 GEMM tiles of
// `isa` read it: columns in blocks of 32, each block's K as quads of 4 codes per column,
// code + 128 (unsigned), padded with code 0 to whole blocks; then the column scales.
PackedOperand qmatmul_pack_int8(const uint8_t* w, int64_t N, int64_t K, QIsa isa);

// Quantized activation rows as a plan lays them out: row m's codes at q + m * kpad (or, in
// runs, at ptrs[m]: below), its scales at d + m * nscales, its 16-sums at s16 + m * nsums
// (zero sums, where read, at zs + m * kpad / 4). Uniform rows with totals need only q,
// d[0] and the totals: qmatmul's one-pass quantizer writes no 16-sums for them.
struct QActRows {
  const int8_t* q = nullptr;
  const float* d = nullptr;
  const int16_t* s16 = nullptr;
  const int32_t* zs = nullptr;
  const float* x = nullptr;  // the float rows (K apart), for formats that read them
  int64_t kpad = 0, nscales = 0, nsums = 0, K = 0;
  bool uniform = false;  // every block of a row has the scale d[0] (the int8 GEMM then sums over all of K)
  bool nonneg = false;   // no code is below 0 (uniform rows: AVX2's int8 GEMM skips the sign trick)
  int32_t group = 1;     // blocks of 32 sharing each scale (QMatmulPlan::act_group; d repeats it per block)
  // Uniform rows: each row's sum of codes, made by the caller (qmatmul's quantizer, per
  // row; conv2d_int8, from its pixels' sums); null: q8_gemm_packed sums the 16-sums.
  const int32_t* totals = nullptr;
  // Uniform rows read in place (conv2d_int8's direct rows; AVX-512 plans only): row m's
  // codes are nseg runs of kpad / nseg, the first at ptrs[m], each seg_stride bytes after
  // the last (q unused).
  const int8_t* const* ptrs = nullptr;
  int32_t nseg = 1;
  int64_t seg_stride = 0;
  quant::QActRow row(int64_t m) const {
    quant::QActRow r{ptrs ? ptrs[m] : q ? q + m * kpad : nullptr, d ? d + m * nscales : nullptr,
                     s16 ? s16 + m * nsums : nullptr, x ? x + m * K : nullptr, zs ? zs + m * kpad / 4 : nullptr};
    r.nseg = nseg;
    r.seg_stride = seg_stride;
    return r;
  }
};
// The int8 GEMM over rows already quantized (kQ8x32): y[m * N + n] for m < M, n < N
// (p.M, p.N) from the weight packed by qmatmul_pack_int8 for p.isa. Threads split the
// blocks of 32 columns; each block of rows [m0, m1) x columns [n0, n1) is handed to
// `block` as soon as it is written (still in cache), and each thread's run of columns to
// `rows` once a chunk of rows is done (either may be empty).
using QBlockFn = std::function<void(int64_t m0, int64_t m1, int64_t n0, int64_t n1)>;
// One part of a split output: columns [col0, col0 + cols) of the product go to y [M,
// cols] (col0 a multiple of 32: each block of 32 columns lies in one part).
struct QOutPart {
  float* y = nullptr;
  int64_t col0 = 0, cols = 0;
};
// parts: the product written part by part (y unused); the callbacks still see the
// product's columns. codes (uniform rows, a plan with codes_tiles; no parts, no
// callbacks): the product's codes written by those tiles (quant::QCodesOut, its pointers
// at row 0 and column 0; y unused).
void q8_gemm_packed(const QMatmulPlan& p, const QActRows& a, const PackedOperand& packed, float* y,
                    const QBlockFn& block, const QBlockFn& rows = {}, const std::vector<QOutPart>* parts = nullptr,
                    const quant::QCodesOut* codes = nullptr);
// The int8 GEMM split by rows of x (QMatmulPlan::split_rows): each thread quantizes its
// share of x's rows as qmatmul does (x_mul as for qmatmul) and multiplies them by every
// block of columns, in one parallel region; `block` and `rows` then see chunks of up to
// row_chunk of that thread's rows (`rows`: all N columns). The same values as qmatmul's
// quantizer then q8_gemm_packed (the tiles may differ by thread: AVX2's nonneg tiles
// where that thread's rows have no negative code).
void q8_gemm_by_rows(const QMatmulPlan& p, const float* x, const float* x_mul, const PackedOperand& packed, float* y,
                     const QBlockFn& block, const QBlockFn& rows = {}, const std::vector<QOutPart>* parts = nullptr);
// The 4-bit lanes GEMM over rows already quantized (kQ8x32): y[m * N + n] from the weight
// w as it is stored (QMatmulPlan::lanes), each group of lane_cols weight rows unpacked
// once per sweep over up to ~512 KiB of rows of x; `block` and `rows` as for q8_gemm_packed.
void lanes_gemm(const QMatmulPlan& p, const QActRows& a, const uint8_t* w, float* y, const QBlockFn& block,
                const QBlockFn& rows = {});
// Whether no code of q[0, n) is negative (QActRows::nonneg).
bool codes_nonnegative(const int8_t* q, int64_t n);

// conv2d with an int8 weight (conv2d_int8.cc): one group, int8 activations with one
// scale per image (given: static; else max|x| / 127 of the image: dynamic).
struct Conv2dInt8Geom {
  int64_t N = 0, C = 0, H = 0, W = 0, OC = 0, KH = 0, KW = 0, OH = 0, OW = 0;
  std::array<int64_t, 2> st{1, 1}, pd{0, 0}, dl{1, 1};
  // The layout of x, the residual and y: 0 NCHW; 8 or 16 the blocked NCHWc layout
  // [N, ceil(C / L), H, W, L] (conv2d_nchwc's; the channels past C are zero).
  int64_t L = 0;
  // x NCHW though L is not 0 (a stem over its image writing the blocked layout).
  bool x_nchw = false;
  int64_t K() const { return C * KH * KW; }
};
// The filters w (int8 rows [OC, 4 + C * KH * KW], torch's (ic, kh, kw) order) as
// conv2d_int8 reads them on `isa`: the int8 GEMM's packing of rows in (kh, kw, ic) order.
PackedOperand conv2d_int8_pack(const Conv2dInt8Geom& g, const uint8_t* w, QIsa isa);
// Int8 activations passed from one int8 conv to the next (blocked layout only): codes
// [N, H, W, C] (pixel-major), each round(v * (1 / scale)) within +-127 (the codes conv2d_int8
// quantizes its float input to), and -128 marking a NaN or infinity. x: read in place of
// the float input, on x_scale (then required); y: written in place of the float output,
// on y_scale, from the same values the float output would hold, so a chain of convs gives
// the same codes, and the same results, either way.
// res: the residual as codes [N, OH, OW, OC] on res_scale (the float residual then null).
struct Conv2dInt8Codes {
  const int8_t* x = nullptr;
  int8_t* y = nullptr;
  float y_scale = 0.0f;
  const int8_t* res = nullptr;
  float res_scale = 0.0f;
};
// y [N, OC, OH, OW] = ep(conv(x [N, C, H, W], w)) (+ residual [N, OC, OH, OW] before the
// activation): ep per output channel, as conv2d's (conv_channel_epilogue). With g.L, x,
// the residual and y are blocked (y's channels past OC written 0); codes.x (g.L required)
// replaces x, codes.y replaces y (null) or is written beside it.
void conv2d_int8(const Conv2dInt8Geom& g, QIsa isa, const float* x, const PackedOperand& w,
                 std::optional<float> x_scale, const GemmEpilogue& ep, const float* residual, float* y,
                 const Conv2dInt8Codes& codes = {});
// Calls of conv2d_int8 that took direct rows (AVX-512 VNNI: windows read in place from a
// padded copy of the codes) since the process began: for the tests.
int64_t conv2d_int8_direct_calls();

// Static INT8 calibration (calibrate.cc). |x| over n floats: the largest finite value,
// the exact zeros and the NaNs and infinities.
struct AbsStats {
  float amax = 0.0f;
  int64_t zeros = 0, nonfinite = 0;
};
AbsStats abs_stats(const float* x, int64_t n);
// counts[bins]: the finite nonzero |x|, bin floor(|x| * (bins / range)) (the last bin also
// takes anything at or past range). range positive and finite, bins in [1, 2^24], else
// zenith::Error.
void abs_histogram(const float* x, int64_t n, double range, int64_t bins, int64_t* counts);

// out[rows, K] = dequant(w[rows, row_bytes]), by the scalar reference.
void qdequantize(QFormat f, const uint8_t* w, int64_t rows, int64_t row_bytes, float* out);
// out[i, :] = dequant(w[ids[i]]) for n ids (i64 or i32); an id outside [0, V) throws
// zenith::Error naming it, before anything is written.
void qembedding(QFormat f, const uint8_t* w, int64_t V, int64_t row_bytes, const void* ids, DType id_dtype,
                int64_t n, float* out);

}  // namespace zenith
