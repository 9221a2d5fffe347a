// Scaled dot-product attention: softmax(q k^T * scale + mask) v per (batch, head),
// grouped-query aware, with torch's causal mask (aligned to the top-left corner) and
// bool or additive masks broadcast over batch, heads and rows.
//
// From MR query rows up it runs tiled, flash-attention style: per kv head, K (times the
// scale) and V are packed once into the GEMM micro-kernel's panels; then each block of
// NR queries walks the keys KB at a time. The micro-kernel writes that block's scores
// transposed (keys down, queries across the SIMD lanes), so the softmax runs one query
// per lane with no transposes: the running row max and sum live in lane arrays, the
// tile is exponentiated in place, and the same tile is the A operand of P @ V (row r of
// k at tile[k * NR + r]). When a later key block raises a row's max, that row's running
// output is rescaled. Scores exist only as one KB x NR tile (16 KiB, in L1); the L x S
// score matrix is never formed, and a causal block stops at its last query's key. The
// keys it skips still count where V holds a NaN or infinity: softmax(...) @ V takes
// 0 x v for a masked key, NaN for such a v, as the definition gives (and PyTorch's CPU
// kernel up to 512 keys; past that it skips whole 512-key blocks). V's columns are
// scanned for their last such key while V is packed.
//
// Fewer query rows (decode) take the rows path: whole score rows through sgemm, which
// streams K and V in place instead of packing them for one query.
// ref_sdpa is the scalar reference both are tested against.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "zenith/kernels/gemm_internal.h"
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/vmath.h"
#include "zenith/threadpool.h"

namespace zenith {
namespace {

using namespace gemm_detail;

// One sdpa node's operands as float pointers, sizes and strides.
struct Attn {
  const float *q, *k, *v;
  float* o;
  int64_t B, H, Hk, L, S, E, Ev, group;
  int64_t q_rs, k_rs, v_rs, o_rs;  // between rows of one head
  bool blhe, causal;
  float scale;
  const TensorRef* mask = nullptr;
  int64_t ms[4] = {0, 0, 0, 0};  // the mask's broadcast strides over (B, H, L, S)

  // Layout 1 keeps each operand as (B, L, H, E), the layout of the projections that
  // produce q/k/v and of the output projection that reads the result: rows of one
  // head are then H * E apart instead of E, and no permute copies are needed.
  int64_t head(int64_t b, int64_t h, int64_t heads, int64_t rows, int64_t width) const {
    return blhe ? (b * rows * heads + h) * width : (b * heads + h) * rows * width;
  }
  const float* q_head(int64_t b, int64_t h) const { return q + head(b, h, H, L, E); }
  const float* k_head(int64_t b, int64_t hk) const { return k + head(b, hk, Hk, S, E); }
  const float* v_head(int64_t b, int64_t hk) const { return v + head(b, hk, Hk, S, Ev); }
  float* o_head(int64_t b, int64_t h) const { return o + head(b, h, H, L, Ev); }
  // Where the mask holds (batch b, head h, query i, key j), broadcast dims at stride 0.
  int64_t mask_at(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3];
  }
  // Score s with the mask entry at `at` applied: a false bool masks it out, a float adds.
  float masked(float s, int64_t at) const {
    if (mask->dtype == DType::b8) return mask->as<bool>()[at] ? s : -INFINITY;
    return s + mask->as<float>()[at];
  }
};

// Whether the mask changes no score: all true (bool) or all zero (float: adding 0 can
// only turn a -0 score into +0, whose exponential is the same). transformers' encoders
// pass one, (B, 1, L, S), for every unpadded input; applying it cost up to half as much
// again as the attention itself at all-MiniLM-L6-v2's shapes (12 heads, 128 tokens).
bool mask_is_neutral(const TensorRef& m) {
  const int64_t n = m.numel();
  if (m.dtype == DType::b8) return std::memchr(m.data, 0, size_t(n)) == nullptr;  // bools are bytes 0 or 1
  const float* f = m.as<float>();
  return std::all_of(f, f + n, [](float x) { return x == 0.0f; });
}

// The sizes, strides and scale of an sdpa node for these operand shapes (pointers null).
Attn geometry(const attrs::sdpa& at, const std::vector<TensorRef>& in) {
  const TensorRef &q = in[0], &k = in[1], &v = in[2];
  Attn a;
  a.q = a.k = a.v = nullptr;
  a.o = nullptr;
  a.blhe = at.layout == SdpaLayout::kBLHE;
  a.causal = at.is_causal;
  a.B = q.shape[0];
  a.H = q.shape[a.blhe ? 2 : 1];
  a.L = q.shape[a.blhe ? 1 : 2];
  a.E = q.shape[3];
  a.Hk = k.shape[a.blhe ? 2 : 1];
  a.S = k.shape[a.blhe ? 1 : 2];
  a.Ev = v.shape[3];
  a.group = a.H / a.Hk;
  a.q_rs = a.blhe ? a.H * a.E : a.E;
  a.k_rs = a.blhe ? a.Hk * a.E : a.E;
  a.v_rs = a.blhe ? a.Hk * a.Ev : a.Ev;
  a.o_rs = a.blhe ? a.H * a.Ev : a.Ev;
  a.scale = at.scale ? float(*at.scale) : 1.0f / std::sqrt(float(a.E));
  if (at.has_mask) {
    const TensorRef& m = in[3];
    std::vector<int64_t> cs = contiguous_strides(m.shape);
    int off = 4 - m.rank();
    for (int d = 0; d < m.rank(); ++d) a.ms[off + d] = m.shape[size_t(d)] == 1 ? 0 : cs[size_t(d)];
  }
  return a;
}

// `a` with this call's operands.
Attn bind(Attn a, const KernelCtx& c) {
  a.q = c.in[0].as<float>();
  a.k = c.in[1].as<float>();
  a.v = c.in[2].as<float>();
  a.o = c.out[0].as<float>();
  if (c.a<attrs::sdpa>().has_mask) a.mask = &c.in[3];
  return a;
}

// What prepare_sdpa chose: the geometry, and the tiled kernel from one micro-kernel's
// worth of query rows (sgemm's ISA choice) or, for fewer queries (decode), whole score rows.
struct SdpaState {
  enum Path : uint8_t { kRows, kTiledAvx2, kTiledAvx512 } path = kRows;
  Attn geom;
};

// ---- rows path: a few queries, whole score rows, K and V streamed by sgemm ----
void attention_rows(const Attn& a) {
  // One (batch, head) pair per task; each thread keeps its own score rows. The GEMMs
  // inside run serially on the worker (nested parallel_for does not fan out again).
  parallel_for(a.B * a.H, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> scores(size_t(a.L * a.S));
    for (int64_t bh = lo; bh < hi; ++bh) {
      int64_t b = bh / a.H, h = bh % a.H, hk = h / a.group;
      // scores = q @ k^T: B(e, s) = k[s, e] -> b_rs = 1, b_cs = k's row stride
      sgemm(a.L, a.S, a.E, a.scale, a.q_head(b, h), a.q_rs, 1, a.k_head(b, hk), 1, a.k_rs, scores.data(), a.S, false);
      for (int64_t i = 0; i < a.L; ++i) {
        float* row = scores.data() + i * a.S;
        if (a.mask)
          for (int64_t j = 0; j < a.S; ++j) row[j] = a.masked(row[j], a.mask_at(b, h, i, j));
        if (a.causal)
          for (int64_t j = i + 1; j < a.S; ++j) row[j] = -INFINITY;
        float m = -INFINITY;
        for (int64_t j = 0; j < a.S; ++j) m = row[j] > m ? row[j] : m;
        if (m == -INFINITY) {  // fully masked row: torch's CPU kernel yields NaN here
          std::fill_n(row, a.S, NAN);
          continue;
        }
        float sum = 0;
        for (int64_t j = 0; j < a.S; ++j) {
          row[j] = vexp_nonpos(row[j] - m);
          sum += row[j];
        }
        float inv = 1.0f / sum;
        for (int64_t j = 0; j < a.S; ++j) row[j] *= inv;
      }
      sgemm(a.L, a.Ev, a.S, 1.0f, scores.data(), a.S, 1, a.v_head(b, hk), a.v_rs, 1, a.o_head(b, h), a.o_rs, false);
    }
  });
}

// ---- tiled path ----
// Per-thread scratch of one query block.
struct BlockScratch {
  AlignedBuf qt, tile, acc;
};

template <int64_t MR, int64_t NR>
struct TiledGeometry {
  // Keys per tile: a multiple of MR (K is packed in MR-key panels) with the KB x NR
  // tile near 16 KiB.
  static constexpr int64_t KB = MR * (512 / NR);
  int64_t kpanels, evp, k_size, v_size;  // per kv head: K panels, V panels' width, floats
  TiledGeometry(const Attn& a) {
    kpanels = (a.S + MR - 1) / MR;
    evp = (a.Ev + NR - 1) / NR * NR;
    k_size = kpanels * MR * a.E;
    v_size = evp * a.S;
  }
};

// One block of up to NR queries (t indexes (b, h, block)) against all its keys.
// always_inline: the AVX-512 entry below compiles this body with AVX-512 enabled, so
// the softmax loops over the NR lanes become 16-wide.
// bad (causal only, else null): per V column of each kv head, the last key whose value
// is NaN or infinite, -1 for none.
// PV_TAIL, TAIL_ROWS: P @ V's kernel for a last chunk of at most TAIL_ROWS query rows (AVX2's
// 16 rows go 6 + 6 + 4, where the 6-row kernel computed 6 and dropped 2, through a tile in
// memory; the same values). Zen 4 held to AVX2, 12 heads, sdpa alone: 0.954-0.968x the
// time at 100-512 tokens, head dim 32 and 64. (By default none: AVX-512's 32 rows are 4 x 8.)
template <int64_t MR, int64_t NR, MicroKernel QK, MicroKernel PV, MicroKernel PV_TAIL = PV, int64_t TAIL_ROWS = MR>
__attribute__((always_inline)) inline void attend_block(const Attn& a, const float* packed, const int64_t* bad,
                                                        int64_t t, BlockScratch& s) {
  using Geo = TiledGeometry<MR, NR>;
  constexpr int64_t KB = Geo::KB;
  const Geo g(a);
  int64_t qblocks = (a.L + NR - 1) / NR;
  int64_t bh = t / qblocks, b = bh / a.H, h = bh % a.H, hk = h / a.group;
  int64_t i0 = (t % qblocks) * NR, nq = std::min(NR, a.L - i0);
  const float* kp = packed + (b * a.Hk + hk) * (g.k_size + g.v_size);
  const float* vp = kp + g.k_size;

  float* qt = s.qt.get(size_t(a.E * NR));
  // + MR: the last MR-row chunk of P @ V may read lanes past NR of the tile's last key
  // (AVX2: 16 lanes in chunks of 6); those rows are computed and dropped.
  float* tile = s.tile.get(size_t(KB * NR + MR));
  float* acc = s.acc.get(size_t(NR * g.evp));
  std::fill_n(tile + KB * NR, MR, 0.0f);
  std::fill_n(acc, NR * g.evp, 0.0f);
  pack_b<NR>(a.E, nq, a.q_head(b, h) + i0 * a.q_rs, 1, a.q_rs, qt);  // Q^T block: E x NR, zero lanes past nq

  float m[NR], l[NR];
  for (int64_t r = 0; r < NR; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  // Keys past the block's last query are masked out in every row of a causal block.
  int64_t s_end = a.causal ? std::min(a.S, i0 + nq) : a.S;
  for (int64_t j0 = 0; j0 < s_end; j0 += KB) {
    int64_t nk = std::min(KB, s_end - j0);
    // Scores^T: keys j0.. down, queries across. K's panel for key j0 + jj is (j0 + jj) / MR.
    for (int64_t jj = 0; jj < nk; jj += MR)
      QK(a.E, kp + (j0 + jj) * a.E, qt, tile + jj * NR, NR, std::min(MR, nk - jj), NR, false);
    if (a.mask) {
      if (a.ms[2] == 0) {  // the same mask for every query (padding masks): one value per key
        for (int64_t j = 0; j < nk; ++j) {
          int64_t at = a.mask_at(b, h, 0, j0 + j);
          float* row = tile + j * NR;
          for (int64_t r = 0; r < nq; ++r) row[r] = a.masked(row[r], at);
        }
      } else {
        for (int64_t j = 0; j < nk; ++j)
          for (int64_t r = 0; r < nq; ++r)
            tile[j * NR + r] = a.masked(tile[j * NR + r], a.mask_at(b, h, i0 + r, j0 + j));
      }
    }
    if (a.causal)  // key j0 + j is visible to query i0 + r when j0 + j <= i0 + r
      for (int64_t j = std::max<int64_t>(0, i0 + 1 - j0); j < nk; ++j)
        for (int64_t r = 0; r < j0 + j - i0 && r < NR; ++r) tile[j * NR + r] = -INFINITY;

    float bm[NR], corr[NR], base[NR], sum[NR];
    {  // each lane's largest score, in two vectors of NR / 2 lanes (one register each: ymm for
       // AVX2's 16 lanes, zmm for AVX-512's 32). Written per lane, GCC kept 16 scalar maxima,
       // some spilled: a tenth of an AVX2 block's time at 128 keys, head dim 32. Zen 4 held
       // to AVX2, 12 heads, sdpa alone: 0.935-0.945x the time at 128 tokens, head dim 32,
       // 0.969x at head dim 64, 0.956x at 512 tokens; AVX-512 1.00x. A NaN score is passed
       // over, as `>` says.
      typedef float VH __attribute__((vector_size(2 * NR)));
      VH lo, hi, t;
      for (int64_t r = 0; r < NR; ++r) bm[r] = -INFINITY;
      std::memcpy(&lo, bm, sizeof lo);
      hi = lo;
      for (int64_t j = 0; j < nk; ++j) {
        std::memcpy(&t, tile + j * NR, sizeof t);
        lo = t > lo ? t : lo;
        std::memcpy(&t, tile + j * NR + NR / 2, sizeof t);
        hi = t > hi ? t : hi;
      }
      std::memcpy(bm, &lo, sizeof lo);
      std::memcpy(bm + NR / 2, &hi, sizeof hi);
    }
    bool rescale = false;
    for (int64_t r = 0; r < NR; ++r) {
      float mn = bm[r] > m[r] ? bm[r] : m[r];
      // A row with no visible key yet keeps max -inf: exp against 0 gives it zeros.
      base[r] = mn == -INFINITY ? 0.0f : mn;
      corr[r] = mn == -INFINITY ? 1.0f : vexp_nonpos(m[r] - mn);
      rescale |= corr[r] != 1.0f && l[r] != 0.0f;
      m[r] = mn;
      sum[r] = 0.0f;
    }
    for (int64_t j = 0; j < nk; ++j) {
      float* row = tile + j * NR;
      for (int64_t r = 0; r < NR; ++r) {
        float e = vexp_nonpos(row[r] - base[r]);
        row[r] = e;
        sum[r] += e;
      }
    }
    for (int64_t r = 0; r < NR; ++r) l[r] = l[r] * corr[r] + sum[r];
    if (rescale)
      for (int64_t r = 0; r < nq; ++r)
        for (int64_t c = 0; c < a.Ev; ++c) acc[r * g.evp + c] *= corr[r];
    // acc += P @ V over these keys; V's panel p holds columns p*NR.. for every key.
    for (int64_t p = 0; p < g.evp / NR; ++p)  // each V panel (KB x NR) stays in L1 for all query rows
      for (int64_t r0 = 0; r0 < nq; r0 += MR) {
        const int64_t rows = std::min(MR, nq - r0);
        const float* vj = vp + p * a.S * NR + j0 * NR;
        if (TAIL_ROWS < MR && rows <= TAIL_ROWS) PV_TAIL(nk, tile + r0, vj, acc + r0 * g.evp + p * NR, g.evp, rows, NR, true);
        else PV(nk, tile + r0, vj, acc + r0 * g.evp + p * NR, g.evp, rows, NR, true);
      }
  }
  float* ob = a.o_head(b, h) + i0 * a.o_rs;
  for (int64_t r = 0; r < nq; ++r) {
    float* orow = ob + r * a.o_rs;
    if (m[r] == -INFINITY) {  // fully masked row: torch's CPU kernel yields NaN here
      std::fill_n(orow, a.Ev, NAN);
      continue;
    }
    float inv = 1.0f / l[r];
    for (int64_t c = 0; c < a.Ev; ++c) orow[c] = acc[r * g.evp + c] * inv;
  }
  if (bad) {  // keys from s_end on were skipped: each has weight 0, and 0 x NaN or inf is NaN
    const int64_t* last = bad + (b * a.Hk + hk) * a.Ev;
    for (int64_t c = 0; c < a.Ev; ++c)
      if (last[c] >= s_end)
        for (int64_t r = 0; r < nq; ++r) ob[r * a.o_rs + c] = NAN;
  }
}

using BlockFn = void (*)(const Attn&, const float*, const int64_t*, int64_t, BlockScratch&);

template <int64_t MR, int64_t NR>
void attention_tiled(const Attn& a, BlockFn block) {
  TiledGeometry<MR, NR> g(a);
  // Packed K and V of every kv head, in the calling thread's buffer; workers fill and
  // then read disjoint heads of it.
  thread_local AlignedBuf kv_buf;
  int64_t per_head = g.k_size + g.v_size;
  float* packed = kv_buf.get(size_t(a.B * a.Hk * per_head));
  std::vector<int64_t> bad(a.causal ? size_t(a.B * a.Hk * a.Ev) : 0);  // attend_block's (a few KiB)
  parallel_for(a.B * a.Hk, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t bh = lo; bh < hi; ++bh) {
      int64_t b = bh / a.Hk, hk = bh % a.Hk;
      float* kp = packed + bh * per_head;
      float* vp = kp + g.k_size;
      const float* kh = a.k_head(b, hk);
      for (int64_t p = 0; p < g.kpanels; ++p)  // K (times the scale) as A: MR keys x E, k-major
        pack_a<MR>(a.E, std::min(MR, a.S - p * MR), a.scale, kh + p * MR * a.k_rs, a.k_rs, 1, kp + p * MR * a.E);
      const float* vh = a.v_head(b, hk);
      for (int64_t p = 0; p < g.evp / NR; ++p)  // V as B: every key x NR columns
        pack_b<NR>(a.S, std::min(NR, a.Ev - p * NR), vh + p * NR, a.v_rs, 1, vp + p * a.S * NR);
      if (a.causal) {
        int64_t* last = bad.data() + bh * a.Ev;
        std::fill_n(last, a.Ev, int64_t(-1));
        for (int64_t j = 0; j < a.S; ++j)
          for (int64_t c = 0; c < a.Ev; ++c)
            if (!std::isfinite(vh[j * a.v_rs + c])) last[c] = j;
      }
    }
  });
  int64_t blocks = a.B * a.H * ((a.L + NR - 1) / NR);
  parallel_for(blocks, 1, [&](int64_t lo, int64_t hi) {
    thread_local BlockScratch scratch;
    for (int64_t t = lo; t < hi; ++t) block(a, packed, a.causal ? bad.data() : nullptr, t, scratch);
  });
  kv_buf.trim(size_t(16) << 20);
}

void block_avx2(const Attn& a, const float* packed, const int64_t* bad, int64_t t, BlockScratch& s) {
  attend_block<6, 16, f32_gemm_6x16__avx2, f32_gemm_6x16__avx2_ka16, f32_gemm_4x16__avx2_ka16, 4>(a, packed, bad, t,
                                                                                                s);
}

#if defined(__x86_64__)
__attribute__((target("avx512f,prefer-vector-width=512"))) void block_avx512(const Attn& a, const float* packed,
                                                                              const int64_t* bad, int64_t t,
                                                                              BlockScratch& s) {
  attend_block<8, 32, f32_gemm_8x32__avx512, f32_gemm_8x32__avx512_ka32>(a, packed, bad, t, s);
}
#endif

}  // namespace

void prepare_sdpa(const PrepareCtx& c, PreparedOp* p) {
  auto s = std::make_shared<SdpaState>();
  s->geom = geometry(c.a<attrs::sdpa>(), c.in);
  s->path = SdpaState::kRows;
#if defined(__x86_64__)
  if (std::strcmp(sgemm_isa(), "avx512") == 0) {
    if (s->geom.L >= 8) s->path = SdpaState::kTiledAvx512;
  } else
#endif
  if (s->geom.L >= 6) {
    s->path = SdpaState::kTiledAvx2;
  }
  p->state = std::move(s);
}

void run_sdpa(const KernelCtx& c) {
  if (c.out[0].numel() == 0) return;
  const auto& s = c.st<SdpaState>();
  Attn a = bind(s.geom, c);
  if (a.mask && mask_is_neutral(*a.mask)) a.mask = nullptr;  // checked per call: the mask is an input
  switch (s.path) {
#if defined(__x86_64__)
    case SdpaState::kTiledAvx512: return attention_tiled<8, 32>(a, block_avx512);
#endif
    case SdpaState::kTiledAvx2: return attention_tiled<6, 16>(a, block_avx2);
    default: return attention_rows(a);
  }
}

void ref_sdpa(const KernelCtx& c) {
  if (c.out[0].numel() == 0) return;
  Attn a = bind(geometry(c.a<attrs::sdpa>(), c.in), c);
  std::vector<double> p(size_t(a.S));
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t h = 0; h < a.H; ++h) {
      int64_t hk = h / a.group;
      const float *qh = a.q_head(b, h), *kh = a.k_head(b, hk), *vh = a.v_head(b, hk);
      for (int64_t i = 0; i < a.L; ++i) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < a.S; ++j) {
          double s = 0;
          for (int64_t e = 0; e < a.E; ++e) s += double(qh[i * a.q_rs + e]) * double(kh[j * a.k_rs + e]);
          float sf = float(s * a.scale);
          if (a.mask) sf = a.masked(sf, a.mask_at(b, h, i, j));
          if (a.causal && j > i) sf = -INFINITY;
          p[size_t(j)] = sf;
          mx = std::max(mx, double(sf));
        }
        float* orow = a.o_head(b, h) + i * a.o_rs;
        if (mx == -INFINITY) {
          std::fill_n(orow, a.Ev, NAN);
          continue;
        }
        double sum = 0;
        for (int64_t j = 0; j < a.S; ++j) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - mx));
        for (int64_t e = 0; e < a.Ev; ++e) {
          double o = 0;
          for (int64_t j = 0; j < a.S; ++j) o += p[size_t(j)] * double(vh[j * a.v_rs + e]);
          orow[e] = float(o / sum);
        }
      }
    }
}

}  // namespace zenith
