// The quantized ops: qmatmul (prepared once per plan: kernels, activation layout, work
// split) and qembedding, over the formats of quant_formats.{h,cc} and the dot kernels of
// quant_avx2.cc (also built for AVX-VNNI, quant_avxvnni.cc) and quant_avx512.cc.
//
// qmatmul, any number of rows: the rows of x are quantized once per call (quant_formats.h
// says how, per format) into a per-thread scratch buffer; threads then split the weight
// rows, and each weight row is decoded once per tile of up to 4 rows of x (the kernel
// keeps the tile's accumulators in registers) while its bytes stay in L1 for the next
// tile. Rows of x go in chunks whose quantized activations fit in L2, so a weight row is
// read from memory once per chunk. Decode (1-8 rows) is bound by reading the weight once;
// prefill runs the same integer dot products, except int8 weights, which 8 or more rows
// read through the int8 GEMM tiles (AVX2, AVX-VNNI, AVX-512 VNNI) from a copy packed once.
#include "zenith/kernels/quant.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "zenith/error.h"
#include "zenith/kernels/activation.h"
#include "zenith/kernels/gemm_internal.h"
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"

namespace zenith {

using namespace quant;

const char* qisa_name(QIsa isa) {
  switch (isa) {
    case QIsa::kAvx2: return "avx2";
    case QIsa::kAvx512: return "avx512vnni";
    case QIsa::kAvxVnni: return "avxvnni";
    default: return "scalar";
  }
}

bool qisa_supported(QIsa isa) {
  if (isa == QIsa::kScalar) return true;
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  if (isa == QIsa::kAvx2) return avx2;
  if (isa == QIsa::kAvxVnni) return avx2 && __builtin_cpu_supports("avxvnni");
  return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

// AVX-VNNI kernels may run: the CPU has them and ZENITH_NO_AVXVNNI is unset.
static bool avxvnni_allowed() {
  static const bool allowed = !std::getenv("ZENITH_NO_AVXVNNI") && qisa_supported(QIsa::kAvxVnni);
  return allowed;
}

QIsa qisa_default() {
  static const QIsa chosen = !std::getenv("ZENITH_NO_AVX512") && qisa_supported(QIsa::kAvx512) ? QIsa::kAvx512
                             : avxvnni_allowed()                                                ? QIsa::kAvxVnni
                             : qisa_supported(QIsa::kAvx2)                                      ? QIsa::kAvx2
                                                                                                : QIsa::kScalar;
  return chosen;
}

// Zen 4's AVX-512 plans from kHalvesLaneMinRows rows must take the lanes GEMM, never
// AVX-512's one-row dot kernels (slower there than AVX2's 8-row kernels).
static_assert(kHalvesLaneMinRows >= lane_min_rows(QIsa::kAvx512));

QIsa qisa_for(QFormat f, int64_t rows, int64_t K) {
  static const bool halves = gemm_detail::avx512_in_halves();  // Zen 4
  const QIsa isa = qisa_default();
  if (isa != QIsa::kAvx512 || avx2_weight_rows(f) == 1) return isa;
  if (halves) return lanes_format(f) && rows >= kHalvesLaneMinRows ? isa : QIsa::kAvx2;
  if (rows >= lane_min_rows(QIsa::kAvx512) || K < kNarrowMinK) return isa;
  return avxvnni_allowed() ? QIsa::kAvxVnni : QIsa::kAvx2;
}

QMatmulPlan qmatmul_plan(QFormat f, int64_t M, int64_t N, int64_t K, QIsa isa, float x_scale, bool codes8,
                         bool row_scale) {
  QMatmulPlan p;
  p.format = f;
  p.M = M;
  p.N = N;
  p.K = K;
  p.row_bytes = qformat_row_bytes(f, K);
  ZENITH_CHECK(p.row_bytes >= 0, "qmatmul: K = ", K, " is not a whole number of ", qformat_info(f).name, " blocks (",
               qformat_info(f).block_elems, " values)");
  ZENITH_CHECK(qisa_supported(isa), "qmatmul: this CPU has no ", qisa_name(isa));
  p.isa = isa;
  ZENITH_CHECK(x_scale == 0.0f || (f == QFormat::int8 && x_scale > 0.0f && x_scale <= FLT_MAX),
               "qmatmul: a static activation scale needs int8 weights and a positive finite value, got ", x_scale,
               " for ", qformat_info(f).name);
  p.x_scale = x_scale;
  ZENITH_CHECK(!row_scale || (f == QFormat::int8 && x_scale == 0.0f),
               "qmatmul: one activation scale per row needs int8 weights and no static scale");
  p.act = act_kind(f);
  p.dots = isa == QIsa::kScalar    ? nullptr
           : isa == QIsa::kAvxVnni ? avxvnni_dot_kernels(f)
                                   : avx2_dot_kernels(f);
  if (f == QFormat::int8 && isa == QIsa::kAvx512) {
    p.tiles = q8_gemm_tiles_avx512();
    p.tile_rows = kMaxDotRows;
    p.uniform_tiles = q8_gemm_tiles_uniform_avx512();
    p.uniform_rows = kMaxUniformRowsAvx512;
    p.codes_tiles = q8_gemm_codes_tiles_avx512();
  } else if (f == QFormat::int8 && isa == QIsa::kAvx2) {
    p.tiles = q8_gemm_tiles_avx2();
    p.tile_rows = kMaxDotRows;
    p.uniform_tiles = q8_gemm_tiles_uniform_avx2();
    p.uniform_rows = kMaxUniformRows;
    p.narrow_tiles = q8_gemm_tiles_u8_avx2();
    p.narrow_max = 63;
    p.uniform_nonneg_tiles = q8_gemm_tiles_uniform_nonneg_avx2();
    p.uniform_w7_tiles = q8_gemm_tiles_uniform_w7_avx2();
    p.narrow_w7_tiles = q8_gemm_tiles_u8_w7_avx2();
  } else if (f == QFormat::int8 && isa == QIsa::kAvxVnni) {
    // The narrow tiles take every row that is not uniform (any code within +-127); tiles
    // names them too, for qmatmul_reads_packed.
    p.tiles = p.narrow_tiles = q8_gemm_tiles_avxvnni();
    p.tile_rows = kMaxNarrowRows;
    p.narrow_max = 127;
    p.uniform_tiles = q8_gemm_tiles_uniform_avxvnni();
    p.uniform_rows = kMaxUniformRows;
  }
  // AVX2's int8 GEMM without the sign trick (narrow_tiles) needs activation codes within
  // +-63. Static scales keep 127 levels (the uniform tiles' sign trick takes them).
  // int8-dynamic's rows (row_scale asked for: as coarse as the GEMM gains by) take one
  // scale per 64 values there (act_group 2), and the narrow tiles convert and scale each
  // pair of blocks' sums once. Zen 4 held to AVX2 (ZENITH_NO_AVX512=1), two frozen
  // int8-dynamic encoders alternated at seq 128: all-MiniLM-L6-v2 0.975x and 0.979x the
  // time (60 and 100 rounds), BERT-base 0.989x; the 2-row tile alone in L1 at K 384 78 ->
  // 99 GMAC/s, at K 1536 90 -> 92. Accuracy on all-MiniLM-L6-v2's real weights (120 GPL-3
  // sentences against fp32): min cosine 0.99777 against 0.99832 per 32 values, mean
  // 0.99864 against 0.99901 (issue 16's bar: 0.99). Weight-only int8 (no row_scale) keeps
  // a scale per 32 values: per 64 moved the largest logit error of a small random Llama
  // from under 3% of the largest logit to 3.25% (test_quantize.py's bound for what
  // weight-only int8 loses). AVX-VNNI keeps a scale per 32 values (not measured there).
  if (p.narrow_max == 63 && x_scale == 0.0f && M >= kQ8GemmRows && !codes8) {
    p.act_max = 63;
    if (row_scale) {
      p.act_group = 2;
      p.narrow_pair_tiles = q8_gemm_tiles_u8_pairs_avx2(false);
      p.narrow_w7_pair_tiles = q8_gemm_tiles_u8_pairs_avx2(true);
    }
  }
  if (isa == QIsa::kAvx512 && avx512_dot_kernels(f)) {
    p.dots = avx512_dot_kernels(f);
    p.zero_sums = zero_sums_avx512;
    p.zero = avx512_zero_point(f);
  }
  if (lanes_format(f) && M >= lane_min_rows(isa) && p.dots) {
    if (isa == QIsa::kAvx512) {
      p.lanes = lanes_tile_avx512;
      p.lane_rows = 16;
      p.lane_cols = kMaxLaneCols;
      p.zero_sums = nullptr;  // the lanes tiles start from the 16-sums instead
    } else {
      p.lanes = isa == QIsa::kAvxVnni ? lanes_tile_avxvnni : lanes_tile_avx2;
      p.lane_rows = 8;
      p.lane_cols = kLaneColsAvx2;
    }
  }
  // quant_avx2.cc's kernels (AVX2, AVX-VNNI, and AVX-512's formats without kernels of
  // their own) take avx2_weight_rows at a time.
  if (p.dots && (isa != QIsa::kAvx512 || p.dots == avx2_dot_kernels(f))) p.n_step = avx2_weight_rows(f);
  p.quantize = isa == QIsa::kScalar   ? quantize_act_row
               : isa == QIsa::kAvx512 ? quantize_act_row_avx512
                                      : quantize_act_row_avx2;
  p.quantize_uniform = isa == QIsa::kScalar   ? nullptr
                       : isa == QIsa::kAvx512 ? quantize_uniform_row_avx512
                                              : quantize_uniform_row_avx2;
  // One scale per row where it pays: AVX-512 VNNI (the uniform tiles, 1.08-1.28x the
  // per-block tiles' GFLOP/s at BERT-base's shapes) and the scalar reference. AVX2 and
  // AVX-VNNI keep a scale per block (64 values on AVX2 from 8 rows, else 32): their
  // per-block tiles are as fast as their uniform ones or faster, and AVX2's 7-bit codes on one scale per row cost accuracy
  // (all-MiniLM-L6-v2 on real text: min cosine to fp32 0.987 against 0.998 per block;
  // AVX-VNNI's 8-bit codes 0.9954 against 0.9988).
  if (row_scale && isa != QIsa::kAvx2 && isa != QIsa::kAvxVnni)
    p.row_scale = isa == QIsa::kScalar ? act_row_scale : act_row_scale_avx512;
  p.kpad = (K + 31) / 32 * 32;
  p.nscales = p.kpad / act_block(p.act);
  p.nsums = p.kpad / 16;
  // Bytes of one row of x as the kernels read it; chunks of rows of about 128 KiB.
  const int64_t act_bytes =
      p.act == ActKind::kF32 ? 4 * K : p.kpad * (p.zero_sums ? 2 : 1) + 4 * p.nscales + 2 * p.nsums;
  // Whole tiles of the widest kind the plan runs (the uniform tiles' 12 rows on AVX-512).
  const int64_t tile = std::max<int64_t>(kMaxDotRows, p.uniform_rows);
  p.row_chunk = std::max<int64_t>(tile, (int64_t(128) << 10) / std::max<int64_t>(act_bytes, 1) / tile * tile);
  // Weight rows per block: ~16 KiB, read from L1 by every tile of rows of x after the first;
  // with one tile (decode) there is nothing to reuse, and a thread's rows go in one call.
  p.n_block = M <= kMaxDotRows ? N : std::max<int64_t>(1, (int64_t(16) << 10) / std::max<int64_t>(1, p.row_bytes));
  // A thread's share: at least ~32 KiB of weight bytes times rows of x.
  p.n_grain = std::max<int64_t>(1, (int64_t(32) << 10) / std::max<int64_t>(1, p.row_bytes * std::min<int64_t>(M, 16)));
  p.n_block = (p.n_block + p.n_step - 1) / p.n_step * p.n_step;
  p.n_grain = (p.n_grain + p.n_step - 1) / p.n_step * p.n_step;
  // Split the int8 GEMM by rows from 32 rows a thread on weights of up to 1 MiB of codes
  // (N x kpad).
  // Split by columns, every thread reads every row's codes, half of them written by the
  // other core's quantizer, and writes part of every output row, which the next op (a
  // LayerNorm, the next layer's quantizer: split by rows) then reads from that core.
  // Split by rows, those stay on one core, and each core reads the whole weight (from
  // L3) instead of its half. Zen 4 under KVM, seq 128, by rows over by columns (calls
  // alternated): all-MiniLM-L6-v2 (weights of 144-576 KiB) 0.97-0.99x the time
  // (int8-dynamic and -static, AVX2 and AVX-512; one run of int8-static on AVX2 1.016x),
  // and 0.92x (AVX2) / 0.95x (AVX-512) in an hour when stores to lines the other core had
  // read cost 2.5x (0.72 against 0.29 ns a value for the quantizer); at seq 32 (16 rows a
  // thread) 1.00x (AVX2) and 1.04x (AVX-512). BERT-base (1.7-2.3 MiB a weight, 85 MiB in all: past L3) by rows 1.07x
  // (int8-static, AVX2) and 1.04x (int8-dynamic, AVX-512); with this rule (its 576 KiB
  // attention output alone by rows) 0.99-1.00x.
  p.split_rows = p.tiles && num_threads() > 1 && M >= 32 * num_threads() && N * p.kpad <= (int64_t(1) << 20);
  return p;
}

bool qmatmul_reads_packed(const QMatmulPlan& p) {
  return p.tiles && p.M >= kQ8GemmRows && p.N > 0 && p.K > 0;
}

namespace {
int64_t q8_kpad(int64_t K) { return (K + 31) / 32 * 32; }
int64_t q8_col_blocks(int64_t N) { return (N + 31) / 32; }
}  // namespace

PackedOperand qmatmul_pack_int8(const uint8_t* w, int64_t N, int64_t K, QIsa isa) {
  ZENITH_CHECK(isa != QIsa::kScalar, "qmatmul: no int8 GEMM tile for the scalar reference");
  constexpr uint8_t flip = 0x80;  // code + 128: the tiles read unsigned codes
  const int64_t kpad = q8_kpad(K), nb = q8_col_blocks(N), rb = 4 + K;
  const size_t code_bytes = size_t(nb * kpad * 32), floats = size_t(nb * 32) + code_bytes / 4;
  PackedOperand o;
  o.side = PackedOperand::kQ8;
  o.isa = uint8_t(isa);
  o.rows = N;
  o.cols = K;
  o.data.reset(static_cast<float*>(std::aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64)), std::free);
  ZENITH_CHECK(o.data, "qmatmul: out of memory packing an int8 weight of ", N, " x ", K);
  float* scale = o.data.get() + code_bytes / 4;
  uint8_t* codes = reinterpret_cast<uint8_t*>(o.data.get());
  // Each block's largest |code| too (PackedOperand::q8_max: 7-bit weights, zenith.quantize's
  // conv_weight_bits / linear_weight_bits = 7, take AVX2's w7 tiles).
  std::vector<uint8_t> most(static_cast<size_t>(nb), 0);
  parallel_for(nb, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) {
      uint8_t* blk = codes + j * kpad * 32;
      int m = 0;
      for (int64_t c = 0; c < 32; ++c) {
        const int64_t n = 32 * j + c;
        scale[n] = n < N ? f32_at(w + n * rb) : 0.0f;
        for (int64_t k = 0; k < kpad; ++k) {
          const bool in = n < N && k < K;
          if (in) m = std::max(m, std::abs(int(int8_t(w[n * rb + 4 + k]))));
          blk[(k / 4) * 128 + c * 4 + k % 4] = in ? uint8_t(w[n * rb + 4 + k] ^ flip) : flip;
        }
      }
      most[size_t(j)] = uint8_t(m);
    }
  });
  o.q8_max = nb ? *std::max_element(most.begin(), most.end()) : 0;
  return o;
}

namespace {
// The quantized rows of x (act_rows), the calling thread's, kept between calls (released past 1 MiB).
thread_local gemm_detail::AlignedBuf qmatmul_scratch;
thread_local gemm_detail::AlignedBuf qmatmul_mul_row;  // one row of x * x_mul, on the thread quantizing it
// The quantized rows of x as plan p lays them out in qmatmul_scratch (no row filled
// yet; nonneg unset). packed: the int8 GEMM reads them.
QActRows act_rows(const QMatmulPlan& p, const float* x, bool packed) {
  QActRows rows;
  rows.x = x;
  rows.kpad = p.kpad;
  rows.nscales = p.nscales;
  rows.nsums = p.nsums;
  rows.K = p.K;
  // Rows of one scale each (static, or dynamic per row): the GEMM sums over all of K.
  rows.uniform = (p.x_scale > 0.0f || p.row_scale) && packed;
  rows.group = rows.uniform ? 1 : int32_t(p.act_group);
  if (p.act == ActKind::kF32) return rows;
  const int64_t M = p.M, nzs = p.zero_sums ? p.kpad / 4 : 0;
  const size_t floats = size_t(M * p.kpad / 4 + M * p.nscales + M * nzs + (M * p.nsums + 1) / 2 + M);
  float* base = qmatmul_scratch.get(floats);
  rows.q = reinterpret_cast<int8_t*>(base);
  rows.d = base + M * p.kpad / 4;
  int32_t* zs = reinterpret_cast<int32_t*>(base + M * p.kpad / 4 + M * p.nscales);
  rows.zs = p.zero_sums ? zs : nullptr;
  rows.s16 = reinterpret_cast<int16_t*>(zs + M * nzs);
  if (rows.uniform) rows.totals = zs + M * nzs + (M * p.nsums + 1) / 2;
  return rows;
}

// Quantizes rows [lo, hi) of x into `rows` (act_rows' layout). x_mul: static INT8's
// per-channel multiplier (qmatmul), or null.
void quantize_row_range(const QMatmulPlan& p, const float* x, const float* x_mul, bool packed, const QActRows& rows,
                        int64_t lo, int64_t hi) {
  const int64_t K = p.K, nzs = p.zero_sums ? p.kpad / 4 : 0, block = act_block(p.act);
  // (act_rows' buffers are qmatmul_scratch's, written here: QActRows holds them read-only for the kernels.)
  int8_t* q = const_cast<int8_t*>(rows.q);
  float* d = const_cast<float*>(rows.d);
  int16_t* s16 = const_cast<int16_t*>(rows.s16);
  int32_t* zs = const_cast<int32_t*>(rows.zs);
  int32_t* tot = const_cast<int32_t*>(rows.totals);
  // Uniform rows in one pass each (quantize_uniform), unless a value is NaN or infinite
  // or the scale's inverse is not a positive finite float: those rows go block by block.
  // (Past K of 65536 the GEMM takes the per-block tiles, which read the 16-sums.)
  const bool one_pass = rows.uniform && p.quantize_uniform && K == p.kpad && p.kpad <= 65536;
  for (int64_t m = lo; m < hi; ++m) {
    const float* xm = x + m * K;
    if (one_pass) {  // (the per-block quantizer's multiplier for a block on this scale: 0 where none)
      const float scale = p.row_scale ? p.row_scale(xm, K, p.act_max) : p.x_scale, top = float(p.act_max);
      float ds;
      const float id = act_block_multiplier(top * scale, true, scale, top, &ds);
      if (id != 0.0f && p.quantize_uniform(xm, x_mul, K, id, p.act_max, q + m * p.kpad, tot + m)) {
        std::fill_n(d + m * p.nscales, p.nscales, ds);
        continue;
      }
    }
    if (x_mul) {  // in L1 for the quantizer's pass just after
      float* t = qmatmul_mul_row.get(size_t(K));
      for (int64_t k = 0; k < K; ++k) t[k] = xm[k] * x_mul[k];
      xm = t;
    }
    const float scale = p.row_scale ? p.row_scale(xm, K, p.act_max) : p.x_scale;
    float* dm = d + m * p.nscales;
    p.quantize(xm, K, block * p.act_group, q + m * p.kpad, dm, s16 + m * p.nsums, scale, p.act_max);
    if (p.act_group > 1)  // one scale per 32 values, as every kernel reads them
      for (int64_t b = p.nscales - 1; b > 0; --b) dm[b] = dm[b / p.act_group];
    if (zs && !packed) p.zero_sums(q + m * p.kpad, p.kpad, p.zero, zs + m * nzs);  // the GEMM reads s16
    if (!rows.uniform) continue;
    // The row's sum of codes (the VNNI tiles' zero-point share), made here on the
    // row's thread rather than by q8_gemm_packed on one; and a block with NaN or inf
    // has a NaN scale: the whole row is NaN in float arithmetic, so its first block
    // says so.
    const int16_t* sr = s16 + m * p.nsums;
    int32_t t = 0;
    for (int64_t j = 0; j < p.nsums; ++j) t += sr[j];
    tot[m] = t;
    float* dr = d + m * p.nscales;
    for (int64_t b = 1; b < p.nscales; ++b)
      if (std::isnan(dr[b])) dr[0] = dr[b];
  }
}

// The quantized rows of x: codes, then scales, then zero sums (if the kernels read
// them), then 16-sums, then (rows of one scale read by the int8 GEMM) each row's sum of
// codes, in one per-thread buffer kept between calls (released past 1 MiB); the rows
// split between the threads.
QActRows quantize_rows(const QMatmulPlan& p, const float* x, bool packed, const float* x_mul) {
  ZENITH_CHECK(!x_mul || (p.x_scale > 0.0f && p.act != ActKind::kF32),
               "qmatmul: x_mul needs static INT8 activations (x_scale)");
  QActRows rows = act_rows(p, x, packed);
  if (p.act != ActKind::kF32)
    parallel_for(p.M, 16, [&](int64_t lo, int64_t hi) { quantize_row_range(p, x, x_mul, packed, rows, lo, hi); });
  if (rows.uniform) rows.nonneg = p.uniform_nonneg_tiles && codes_nonnegative(rows.q, p.M * p.kpad);
  return rows;
}

// qmatmul's write-out over its outputs: the product's columns as consecutive parts, each
// [M, rows] with its bias (one part: y [M, N]). finish: the bias, then the activation's
// per-value part, on a block of columns just written (in cache; within one part);
// finish_rows: its per-row part (GELU) over a thread's whole run of columns once the
// blocks are done.
struct Epilogue {
  const std::vector<QPart>& parts;
  Activation act;
  Activation each = per_value(act);
  // The part holding column n, and its first column.
  size_t part_of(int64_t n, int64_t& col0) const {
    size_t i = 0;
    for (col0 = 0; n >= col0 + parts[i].rows; ++i) col0 += parts[i].rows;
    return i;
  }
  void finish(int64_t m0, int64_t m1, int64_t n0, int64_t n1) const {
    int64_t c0;
    const QPart& q = parts[part_of(n0, c0)];
    if (!q.bias && each == Activation::kNone) return;
    if (each == Activation::kNone && n1 - n0 == 32) {
      // A whole block's bias alone (the linear layers' common case): a loop of fixed
      // length, which compiles to straight vector code, where the general loop's unknown
      // length cost as much again.
      const float* b = q.bias + (n0 - c0);
      for (int64_t m = m0; m < m1; ++m) {
        float* row = q.y + m * q.rows + (n0 - c0);
        for (int i = 0; i < 32; ++i) row[i] += b[i];
      }
      return;
    }
    with_activation(each, [&](auto fn) {
      for (int64_t m = m0; m < m1; ++m) {
        float* row = q.y + m * q.rows;  // row[n - c0] for the product's column n
        if (q.bias)
          for (int64_t n = n0; n < n1; ++n) row[n - c0] = fn(row[n - c0] + q.bias[n - c0]);
        else
          for (int64_t n = n0; n < n1; ++n) row[n - c0] = fn(row[n - c0]);
      }
    });
  }
  void finish_rows(int64_t m0, int64_t m1, int64_t n0, int64_t n1) const {
    if (each == act) return;
    for (int64_t i = 0, c0 = 0; i < int64_t(parts.size()); c0 += parts[size_t(i)].rows, ++i) {
      const QPart& q = parts[size_t(i)];
      const int64_t lo = std::max(n0, c0), hi = std::min(n1, c0 + q.rows);
      for (int64_t m = m0; m < m1 && lo < hi; ++m) per_row(act, q.y + m * q.rows + lo - c0, hi - lo);
    }
  }
};
}  // namespace

void qmatmul(const QMatmulPlan& p, const float* x, const uint8_t* w, const float* bias, float* y,
             const PackedOperand* packed, Activation activation, const float* x_mul) {
  const int64_t M = p.M, N = p.N, K = p.K;
  if (M == 0 || N == 0) return;
  const std::vector<QPart> out{{bias, y, N}};
  const Epilogue e{out, activation};
  auto finish = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) { e.finish(m0, m1, n0, n1); };
  auto finish_rows = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) { e.finish_rows(m0, m1, n0, n1); };
  if (K == 0) {
    std::fill_n(y, M * N, 0.0f);
    finish(0, M, 0, N);
    finish_rows(0, M, 0, N);
    return;
  }
  gemm_detail::AlignedBuf& scratch = qmatmul_scratch;
  if (packed && p.split_rows) {  // the int8 GEMM, each thread quantizing its own rows
    q8_gemm_by_rows(p, x, x_mul, *packed, y, finish, finish_rows);
    scratch.trim(size_t(1) << 20);
    return;
  }
  const QActRows rows = quantize_rows(p, x, packed != nullptr, x_mul);
  if (packed) {  // the int8 GEMM
    q8_gemm_packed(p, rows, *packed, y, finish, finish_rows);
    scratch.trim(size_t(1) << 20);
    return;
  }
  if (p.lanes) {
    lanes_gemm(p, rows, w, y, finish, finish_rows);
    scratch.trim(size_t(1) << 20);
    return;
  }
  // Threads take whole steps of n_step weight rows.
  parallel_for((N + p.n_step - 1) / p.n_step, p.n_grain / p.n_step, [&](int64_t s0, int64_t s1) {
    const int64_t lo = s0 * p.n_step, hi = std::min(N, s1 * p.n_step);
    for (int64_t m0 = 0; m0 < M; m0 += p.row_chunk) {
      const int64_t m1 = std::min(M, m0 + p.row_chunk);
      // Weight rows in blocks that stay in L1 while every tile of rows of x passes.
      for (int64_t n0 = lo; n0 < hi; n0 += p.n_block) {
        const int64_t n1 = std::min(hi, n0 + p.n_block);
        if (!p.dots) {
          for (int64_t n = n0; n < n1; ++n)
            for (int64_t m = m0; m < m1; ++m) y[m * N + n] = ref_dot(p.format, w + n * p.row_bytes, K, rows.row(m));
        }
        for (int64_t m = m0; p.dots && m < m1;) {
          const int r = int(std::min<int64_t>(kMaxDotRows, m1 - m));
          QActRow a[kMaxDotRows];
          for (int i = 0; i < r; ++i) a[i] = rows.row(m + i);
          p.dots[r - 1](w + n0 * p.row_bytes, p.row_bytes, n1 - n0, K, a, y + m * N + n0, N);
          m += r;
        }
        finish(m0, m1, n0, n1);
      }
      finish_rows(m0, m1, lo, hi);
    }
  });
  scratch.trim(size_t(1) << 20);
}

void qmatmul_parts(const QMatmulPlan& p, const float* x, const std::vector<QPart>& parts, const PackedOperand& packed,
                   Activation activation, const float* x_mul) {
  const int64_t M = p.M, N = p.N;
  std::vector<QOutPart> out;
  int64_t col0 = 0;
  for (const QPart& q : parts) {
    ZENITH_CHECK(q.rows > 0 && q.rows % 32 == 0 && q.y, "qmatmul: each part of a split qmatmul needs an output and a "
                 "multiple of 32 weight rows, got ", q.rows);
    out.push_back({q.y, col0, q.rows});
    col0 += q.rows;
  }
  ZENITH_CHECK(!parts.empty() && col0 == N, "qmatmul: the parts' weight rows do not sum to the plan's ", N);
  if (M == 0) return;
  const Epilogue e{parts, activation};  // a block of columns lies in one part; a thread's run may cross parts
  auto finish = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) { e.finish(m0, m1, n0, n1); };
  auto finish_rows = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) { e.finish_rows(m0, m1, n0, n1); };
  if (p.K == 0) {
    for (const QOutPart& o : out) {
      std::fill_n(o.y, M * o.cols, 0.0f);
      finish(0, M, o.col0, o.col0 + o.cols);
    }
    finish_rows(0, M, 0, N);
    return;
  }
  if (p.split_rows) q8_gemm_by_rows(p, x, x_mul, packed, nullptr, finish, finish_rows, &out);
  else q8_gemm_packed(p, quantize_rows(p, x, true, x_mul), packed, nullptr, finish, finish_rows, &out);
  qmatmul_scratch.trim(size_t(1) << 20);
}

void lanes_gemm(const QMatmulPlan& p, const QActRows& a, const uint8_t* w, float* y, const QBlockFn& block,
                const QBlockFn& rows) {
  const int64_t M = p.M, N = p.N, K = p.K, nb = K / 32, width = p.lane_rows, ncols = p.lane_cols;
  ZENITH_CHECK(p.lanes && K % 32 == 0 && width <= kMaxLaneRows && ncols <= kMaxLaneCols,
               "qmatmul: the lanes GEMM needs a plan that chose it");
  // Tiles of `width` rows of x, laid out once per call: q [K / 4][width][4], then d and z
  // [nb][width].
  const int64_t tiles = (M + width - 1) / width, tile_bytes = width * (K + 8 * nb);
  thread_local gemm_detail::AlignedBuf lane_buf;
  uint8_t* laid = reinterpret_cast<uint8_t*>(lane_buf.get(size_t(tiles * tile_bytes / 4)));
  struct Laid {
    int8_t* q;
    float* d;
    int32_t* z;
  };
  auto tile = [&](int64_t t) {
    uint8_t* base = laid + t * tile_bytes;
    return Laid{reinterpret_cast<int8_t*>(base), reinterpret_cast<float*>(base + width * K),
                reinterpret_cast<int32_t*>(base + width * (K + 4 * nb))};
  };
  parallel_for(tiles, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      QActRow r[kMaxLaneRows];
      const int n = int(std::min<int64_t>(width, M - width * t));
      for (int i = 0; i < n; ++i) r[i] = a.row(width * t + i);
      const Laid l = tile(t);
      lane_rows(r, n, int(width), K, l.q, l.d, l.z);
    }
  });
  // Tiles per sweep over the weight: about 512 KiB of them, kept in L2 while each group
  // of columns, unpacked once per sweep, passes over them.
  const int64_t sweep = std::max<int64_t>(1, (int64_t(512) << 10) / tile_bytes);
  const int64_t groups = (N + ncols - 1) / ncols;
  // The next group's weight rows, as whole cache lines, for the tile to prefetch.
  const int64_t group_lines = (ncols * p.row_bytes + 63) / 64 + 1;
  parallel_for(groups, 1, [&](int64_t g0, int64_t g1) {
    thread_local gemm_detail::AlignedBuf unpacked;
    float* scales = unpacked.get(size_t(kMaxLaneCols * (K / 4 + nb)));
    uint8_t* codes = reinterpret_cast<uint8_t*>(scales + kMaxLaneCols * nb);
    alignas(64) float out[kMaxLaneCols * kMaxLaneRows];
    for (int64_t t0 = 0; t0 < tiles; t0 += sweep) {
      const int64_t t1 = std::min(tiles, t0 + sweep), m0 = width * t0, m1 = std::min(M, width * t1);
      for (int64_t g = g0; g < g1; ++g) {
        const int64_t n0 = ncols * g;
        const int cols = int(std::min<int64_t>(ncols, N - n0));
        lane_unpack_avx2(p.format, w + n0 * p.row_bytes, p.row_bytes, cols, int(ncols), K, codes, scales);
        // the first tile fetches the rows of the group this thread unpacks next while it runs
        const int64_t gn = g + 1 < g1 ? g + 1 : t1 < tiles ? g0 : -1;
        const uintptr_t next = (reinterpret_cast<uintptr_t>(w) + uintptr_t(ncols * gn * p.row_bytes)) & ~uintptr_t(63);
        for (int64_t t = t0; t < t1; ++t) {
          const Laid l = tile(t);
          p.lanes(QLaneRows{l.q, l.d, l.z}, codes, scales, K, out, next, t == t0 && gn >= 0 ? group_lines : 0);
          const int nrows = int(std::min<int64_t>(width, M - width * t));
          for (int r = 0; r < nrows; ++r)
            for (int c = 0; c < cols; ++c) y[(width * t + r) * N + n0 + c] = out[c * width + r];
        }
        if (block) block(m0, m1, n0, n0 + cols);
      }
      if (rows) rows(m0, m1, ncols * g0, std::min(N, ncols * g1));
    }
    unpacked.trim(size_t(1) << 20);
  });
  lane_buf.trim(size_t(1) << 20);
}

namespace {
// Whether the int8 GEMM sums rows `a` over all of K on one scale (the uniform tiles): sums
// over the whole K stay inside int32 (255 x 127 x K) up to K = 65536.
bool q8_sums_all_of_k(const QMatmulPlan& p, const QActRows& a) { return a.uniform && p.kpad <= 65536; }

struct Q8Tiles {
  const QGemmTileFn* fns;  // for 1..rows rows of x
  int rows;
};
// The int8 GEMM's tiles for rows `a` against `packed`.
Q8Tiles q8_tiles(const QMatmulPlan& p, const QActRows& a, const PackedOperand& packed) {
  const bool uniform = q8_sums_all_of_k(p, a);
  const bool narrow = !uniform && p.act_max <= p.narrow_max && p.narrow_tiles;
  // AVX2 on a weight of 7-bit codes (|code| <= 63): the w7 tiles, two quads' pairs summed in int16.
  const bool w7 = packed.q8_max <= 63;
  const bool nonneg = uniform && a.nonneg && p.uniform_nonneg_tiles;
  // Rows of a scale per 64 values (group 2): the narrow tiles that scale each pair's sums
  // once. (Every other tile reads d per block, where group 2 repeats each scale.)
  const bool pairs = narrow && a.group == 2 && p.narrow_pair_tiles;
  const QGemmTileFn* fns = nonneg    ? (w7 && p.uniform_w7_tiles ? p.uniform_w7_tiles : p.uniform_nonneg_tiles)
                           : uniform ? p.uniform_tiles
                           : pairs   ? (w7 ? p.narrow_w7_pair_tiles : p.narrow_pair_tiles)
                           : narrow  ? (w7 && p.narrow_w7_tiles ? p.narrow_w7_tiles : p.narrow_tiles)
                                     : p.tiles;
  return {fns, uniform ? p.uniform_rows : narrow ? kMaxNarrowRows : p.tile_rows};
}

// Where block j of 32 columns of a split output goes (out[j]): its first column's place
// in row 0, and the distance between rows.
void q8_part_blocks(int64_t N, const std::vector<QOutPart>& parts, std::vector<std::pair<float*, int64_t>>& out) {
  out.resize(static_cast<size_t>(q8_col_blocks(N)));
  int64_t covered = 0;
  for (const QOutPart& o : parts) {
    ZENITH_CHECK(o.col0 == covered && o.col0 % 32 == 0 && o.cols > 0 && o.y,
                 "qmatmul: output parts must cover the columns in order, from multiples of 32");
    for (int64_t c = o.col0; c < o.col0 + o.cols; c += 32) out[size_t(c / 32)] = {o.y + (c - o.col0), o.cols};
    covered += o.cols;
  }
  ZENITH_CHECK(covered == N, "qmatmul: output parts cover ", covered, " of ", N, " columns");
}

void check_packed_q8(const QMatmulPlan& p, const PackedOperand& packed) {
  ZENITH_CHECK(packed.side == PackedOperand::kQ8 && packed.isa == uint8_t(p.isa) && p.tiles && packed.rows == p.N &&
                   packed.cols == p.K && p.act == ActKind::kQ8x32,
               "qmatmul: the packed weight is not this int8 weight's, for this ISA");
}

// Rows [m0, m1) (t: their QActRows from m0) times block j of the packed weight's 32
// columns, into yj (row m at yj + m * ld), the tiles taking up to tiles.rows rows at a time.
void q8_block_tiles(const QMatmulPlan& p, const Q8Tiles& tiles, const uint8_t* wcodes, const float* scale,
                    const QActRow* t, int64_t m0, int64_t m1, int64_t j, float* yj, int64_t ld, int nvalid) {
  for (int64_t m = m0; m < m1;) {
    const int r = int(std::min<int64_t>(tiles.rows, m1 - m));
    tiles.fns[r - 1](wcodes + j * p.kpad * 32, scale + 32 * j, p.kpad, t + (m - m0), yj + m * ld, ld, nvalid);
    m += r;
  }
}

// A row's zero-point share in float (rows with a scale per block: QActRow::zshare) and its
// integer sum of codes (uniform rows: QActRow::total), from its 16-sums.
void q8_row_shares(const QMatmulPlan& p, const QActRow& r, float& z, int32_t& total) {
  z = 0.0f;
  total = 0;
  for (int64_t b = 0; b < p.kpad / 32; ++b) {
    const int32_t s = int32_t(r.s16[2 * b]) + r.s16[2 * b + 1];
    z += r.d[b] * float(s);
    total += s;
  }
}
}  // namespace

void q8_gemm_packed(const QMatmulPlan& p, const QActRows& a, const PackedOperand& packed, float* y,
                    const QBlockFn& block, const QBlockFn& rows, const std::vector<QOutPart>* parts,
                    const QCodesOut* codes) {
  const int64_t M = p.M, N = p.N;
  check_packed_q8(p, packed);
  const uint8_t* wcodes = reinterpret_cast<const uint8_t*>(packed.data.get());
  const int64_t nb = q8_col_blocks(N);
  // The per-call tables live in the calling thread's buffers, kept between calls; the
  // tasks below reach them through these references, not as their own threads' buffers.
  // (q8_gemm_packed runs inside a task only through conv2d_int8's, whose thread's buffers
  // are its own.)
  thread_local std::vector<std::pair<float*, int64_t>> out_buf;
  thread_local std::vector<float> zshare_buf;
  thread_local std::vector<int32_t> total_buf;
  std::vector<std::pair<float*, int64_t>>& out = out_buf;
  std::vector<float>& zshare = zshare_buf;
  std::vector<int32_t>& total = total_buf;
  if (parts) q8_part_blocks(N, *parts, out);
  const float* scale = packed.data.get() + nb * p.kpad * 32 / 4;
  const bool uniform = q8_sums_all_of_k(p, a);
  const Q8Tiles tiles = q8_tiles(p, a, packed);
  ZENITH_CHECK(a.nseg == 1 || (uniform && a.totals && a.ptrs && p.isa == QIsa::kAvx512 && a.nseg > 0 &&
                                p.kpad % (4 * int64_t(a.nseg)) == 0),
               "qmatmul: rows in runs need rows of one scale with their sums, AVX-512's tiles and whole quads a run");
  ZENITH_CHECK(!codes || (uniform && p.codes_tiles && !parts && !block && !rows),
               "qmatmul: codes out need rows of one scale, tiles that write codes, one output and no callbacks");
  // The zero point's share, made once per row here rather than in every block of
  // columns: for rows with a scale per block, in float (QActRow::zshare, taken off at the
  // store); for uniform rows, the codes' integer sum (QActRow::total, the sums' start),
  // unless the caller gave it (QActRows::totals).
  const bool own_totals = uniform && !a.totals;
  zshare.resize(uniform ? 0 : static_cast<size_t>(M));
  total.resize(own_totals ? static_cast<size_t>(M) : 0);
  const int32_t* totals = own_totals ? total.data() : a.totals;
  for (int64_t m = 0; m < M && (!uniform || own_totals); ++m) {
    float z;
    int32_t t;
    q8_row_shares(p, a.row(m), z, t);
    if (uniform) total[size_t(m)] = t;
    else zshare[size_t(m)] = z;
  }
  parallel_for(nb, 1, [&](int64_t lo, int64_t hi) {
    // The chunk's rows as the tiles take them, made once per chunk rather than per tile
    // and block of columns (3% of a MiniLM int8 call went to remaking them).
    thread_local std::vector<QActRow> t;
    t.resize(static_cast<size_t>(std::min(M, p.row_chunk)));
    for (int64_t m0 = 0; m0 < M; m0 += p.row_chunk) {
      const int64_t m1 = std::min(M, m0 + p.row_chunk);
      for (int64_t m = m0; m < m1; ++m) {
        QActRow& r = t[size_t(m - m0)];
        r = a.row(m);
        if (uniform) r.total = totals[m];
        else r.zshare = zshare[size_t(m)];
      }
      for (int64_t j = lo; j < hi; ++j) {
        const int nvalid = int(std::min<int64_t>(32, N - 32 * j));
        if (codes) {
          for (int64_t m = m0; m < m1;) {  // each tile's corner of the codes
            const int r = int(std::min<int64_t>(tiles.rows, m1 - m));
            QCodesOut o = *codes;
            o.scale += 32 * j;
            o.shift += 32 * j;
            if (o.res) o.res += m * o.ld + 32 * j;
            o.y += m * o.ld + 32 * j;
            p.codes_tiles[r - 1](wcodes + j * p.kpad * 32, scale + 32 * j, p.kpad, t.data() + (m - m0), o, nvalid);
            m += r;
          }
        } else {
          const auto [yj, ld] = parts ? out[size_t(j)] : std::pair<float*, int64_t>{y + 32 * j, N};
          q8_block_tiles(p, tiles, wcodes, scale, t.data(), m0, m1, j, yj, ld, nvalid);
        }
        if (block) block(m0, m1, 32 * j, 32 * j + nvalid);
      }
      if (rows) rows(m0, m1, 32 * lo, std::min(N, 32 * hi));
    }
  });
}

void q8_gemm_by_rows(const QMatmulPlan& p, const float* x, const float* x_mul, const PackedOperand& packed, float* y,
                     const QBlockFn& block, const QBlockFn& rows, const std::vector<QOutPart>* parts) {
  const int64_t M = p.M, N = p.N, nb = q8_col_blocks(N);
  check_packed_q8(p, packed);
  ZENITH_CHECK(!x_mul || p.x_scale > 0.0f, "qmatmul: x_mul needs static INT8 activations (x_scale)");
  const uint8_t* wcodes = reinterpret_cast<const uint8_t*>(packed.data.get());
  const float* scale = packed.data.get() + nb * p.kpad * 32 / 4;
  thread_local std::vector<std::pair<float*, int64_t>> out_buf;  // as in q8_gemm_packed: the caller's, kept
  std::vector<std::pair<float*, int64_t>>& out = out_buf;
  if (parts) q8_part_blocks(N, *parts, out);
  const QActRows all = act_rows(p, x, true);  // the calling thread's buffer; each thread fills its rows
  const bool uniform = q8_sums_all_of_k(p, all);
  parallel_for(M, 16, [&](int64_t lo, int64_t hi) {
    quantize_row_range(p, x, x_mul, true, all, lo, hi);
    QActRows a = all;  // the tiles by this thread's rows' codes alone
    if (a.uniform) a.nonneg = p.uniform_nonneg_tiles && codes_nonnegative(a.q + lo * p.kpad, (hi - lo) * p.kpad);
    const Q8Tiles tiles = q8_tiles(p, a, packed);
    thread_local std::vector<QActRow> t;
    for (int64_t m0 = lo; m0 < hi; m0 += p.row_chunk) {
      const int64_t m1 = std::min(hi, m0 + p.row_chunk);
      t.resize(static_cast<size_t>(m1 - m0));
      for (int64_t m = m0; m < m1; ++m) {
        QActRow& r = t[size_t(m - m0)];
        r = a.row(m);
        if (uniform) {  // the sum of codes, made by the quantizer (act_rows' totals)
          r.total = a.totals[m];
          continue;
        }
        int32_t unused;
        q8_row_shares(p, r, r.zshare, unused);
      }
      for (int64_t j = 0; j < nb; ++j) {
        const int nvalid = int(std::min<int64_t>(32, N - 32 * j));
        const auto [yj, ld] = parts ? out[size_t(j)] : std::pair<float*, int64_t>{y + 32 * j, N};
        q8_block_tiles(p, tiles, wcodes, scale, t.data(), m0, m1, j, yj, ld, nvalid);
        if (block) block(m0, m1, 32 * j, 32 * j + nvalid);
      }
      if (rows) rows(m0, m1, 0, N);
    }
  });
}

bool codes_nonnegative(const int8_t* q, int64_t n) {
  uint8_t any = 0;  // the sign bits of all codes, or-ed (a loop the compiler vectorizes)
  for (int64_t i = 0; i < n; ++i) any |= uint8_t(q[i]);
  return (any & 0x80) == 0;
}

void qdequantize(QFormat f, const uint8_t* w, int64_t rows, int64_t row_bytes, float* out) {
  const int64_t K = qformat_row_elems(f, row_bytes);
  ZENITH_CHECK(K >= 0, "qdequantize: ", row_bytes, " bytes per row is not a whole number of ", qformat_info(f).name,
               " blocks");
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(K, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) ref_dequant_row(f, w + r * row_bytes, K, out + r * K);
  });
}

void qembedding(QFormat f, const uint8_t* w, int64_t V, int64_t row_bytes, const void* ids, DType id_dtype,
                int64_t n, float* out) {
  const int64_t K = qformat_row_elems(f, row_bytes);
  ZENITH_CHECK(K >= 0, "qembedding: ", row_bytes, " bytes per row is not a whole number of ", qformat_info(f).name,
               " blocks");
  ZENITH_CHECK(id_dtype == DType::i64 || id_dtype == DType::i32, "qembedding: ids must be i64 or i32");
  auto id = [&](int64_t i) {
    return id_dtype == DType::i64 ? static_cast<const int64_t*>(ids)[i] : int64_t(static_cast<const int32_t*>(ids)[i]);
  };
  for (int64_t i = 0; i < n; ++i)
    ZENITH_CHECK(id(i) >= 0 && id(i) < V, "qembedding: id ", id(i), " (at ", i, ") is out of range for ", V, " rows");
  // One row (decode) is a few hundred values: the scalar dequantizer, which the compiler
  // vectorizes, costs less than the call around it. Many rows split across threads.
  parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(K, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) ref_dequant_row(f, w + id(i) * row_bytes, K, out + i * K);
  });
}

// ---- The ops ----
namespace {
// A qmatmul node's choices: the plan over all its weights' rows; with parts, each part's
// rows and each part's own plan, for calls without a packed weight (the parts then run
// one by one, as separate qmatmuls would).
struct QMatmulState {
  QMatmulPlan plan;
  std::vector<int64_t> rows;
  std::vector<QMatmulPlan> part_plans;
};

std::shared_ptr<const PackedOperand> pack_qmatmul_int8(const void* state, const void* const* src) {
  const auto& s = *static_cast<const QMatmulState*>(state);
  const QMatmulPlan& p = s.plan;
  if (s.rows.size() <= 1)
    return std::make_shared<const PackedOperand>(qmatmul_pack_int8(static_cast<const uint8_t*>(src[0]), p.N, p.K, p.isa));
  // WeightPack's contract: one PackedOperand per slot. The first holds every part's rows,
  // one after another, packed as one weight; the others are empty.
  std::vector<uint8_t> all(size_t(p.N * p.row_bytes));
  size_t at = 0;
  for (size_t i = 0; i < s.rows.size(); ++i) {
    std::memcpy(all.data() + at, src[i], size_t(s.rows[i] * p.row_bytes));
    at += size_t(s.rows[i] * p.row_bytes);
  }
  std::shared_ptr<PackedOperand[]> ops(new PackedOperand[s.rows.size()]);
  ops[0] = qmatmul_pack_int8(all.data(), p.N, p.K, p.isa);
  return std::shared_ptr<const PackedOperand>(ops, ops.get());
}
}  // namespace

void prepare_qmatmul(const PrepareCtx& c, PreparedOp* p) {
  const TensorRef& x = c.in[0];
  const int64_t K = x.shape.back();
  int64_t M = 1;  // batch dims flattened into rows
  for (int d = 0; d + 1 < x.rank(); ++d) M *= x.shape[size_t(d)];
  const auto& at = c.a<attrs::qmatmul>();
  const int64_t P = at.parts;
  auto st = std::make_shared<QMatmulState>();
  int64_t N = 0;
  for (int64_t i = 0; i < P; ++i) {
    const TensorRef& w = c.in[size_t(1 + i)];
    st->rows.push_back(w.shape[0]);
    N += w.shape[0];
  }
  const float x_scale = at.x_scale ? float(*at.x_scale) : 0.0f;
  const QIsa isa = qisa_for(at.format, M, K);
  st->plan = qmatmul_plan(at.format, M, N, K, isa, x_scale, false, at.row_scale);
  ZENITH_CHECK(st->plan.row_bytes == c.in[1].shape[1], "qmatmul: the weight has ", c.in[1].shape[1], " bytes per row, ",
               qformat_info(st->plan.format).name, " rows of ", K, " values take ", st->plan.row_bytes);
  // A constant int8 weight is offered packed for the int8 GEMM when enough rows read it
  // (the parts' weights packed as one).
  if (qmatmul_reads_packed(st->plan)) {
    std::vector<int> slots;
    for (int64_t i = 0; i < P; ++i) slots.push_back(int(1 + i));
    p->weight = WeightPack{slots, {int64_t(PackedOperand::kQ8), N, K, int64_t(isa)}, pack_qmatmul_int8};
  }
  // Without a packed weight (few rows, or weights the runtime does not hold constant) the
  // parts run one by one.
  if (P > 1)
    for (int64_t i = 0; i < P; ++i)
      st->part_plans.push_back(qmatmul_plan(at.format, M, st->rows[size_t(i)], K, isa, x_scale, false, at.row_scale));
  p->state = std::move(st);
}

void run_qmatmul(const KernelCtx& c) {
  const auto& st = c.st<QMatmulState>();
  const auto& at = c.a<attrs::qmatmul>();
  const size_t P = st.rows.size();
  const size_t n_in = c.in.size() - (at.x_mul ? 1 : 0);  // x_mul, when given, comes last
  const bool has_bias = n_in == 1 + 2 * P;
  auto bias = [&](size_t i) { return has_bias ? c.in[1 + P + i].as<float>() : nullptr; };
  const float* x_mul = at.x_mul ? c.in[n_in].as<float>() : nullptr;
  if (P == 1) {
    qmatmul(st.plan, c.in[0].as<float>(), c.in[1].as<uint8_t>(), bias(0), c.out[0].as<float>(), c.packed,
            at.activation, x_mul);
    return;
  }
  if (c.packed) {  // one int8 GEMM over the parts
    std::vector<QPart> parts(P);
    for (size_t i = 0; i < P; ++i) parts[i] = QPart{bias(i), c.out[i].as<float>(), st.rows[i]};
    qmatmul_parts(st.plan, c.in[0].as<float>(), parts, *c.packed, at.activation, x_mul);
    return;
  }
  for (size_t i = 0; i < P; ++i)
    qmatmul(st.part_plans[i], c.in[0].as<float>(), c.in[1 + i].as<uint8_t>(), bias(i), c.out[i].as<float>(), nullptr,
            at.activation, x_mul);
}

void run_qembedding(const KernelCtx& c) {
  const TensorRef &w = c.in[0], &ids = c.in[1];
  qembedding(c.a<attrs::qembedding>().format, w.as<uint8_t>(), w.shape[0], w.shape[1], ids.data, ids.dtype,
             ids.numel(), c.out[0].as<float>());
}

}  // namespace zenith
