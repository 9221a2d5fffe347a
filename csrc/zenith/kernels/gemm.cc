// Single-precision GEMM (packed panels + the register-tile micro-kernels of
// gemm_ukernels.def, chosen at run time) and the ops built on it: matmul and addmm.
// Convolution is in conv2d.cc, attention in attention.cc.
// ref_sgemm is the scalar reference the tests hold sgemm to.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "zenith/error.h"
#include "zenith/kernels/activation.h"
#include "zenith/kernels/gemm_internal.h"
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/vmath.h"
#include "zenith/threadpool.h"

namespace zenith {

void ref_sgemm(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs,
               const float* b, int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, bool accumulate) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(a[m * a_rs + k * a_cs]) * double(b[k * b_rs + n * b_cs]);
      float v = float(alpha * s);
      c[m * ldc + n] = accumulate ? c[m * ldc + n] + v : v;
    }
}

namespace {

using namespace gemm_detail;

constexpr int64_t KC = 256, NC = 3072;
// Up to this many rows, a GEMM with B = W^T or a row-major B is memory-bound and runs
// as blocked dot products (or register-blocked rows) reading B in place.
constexpr int64_t kSkinnyRows = 4;

// C[m][n] (+)= alpha * dot(A[m,:], W[n,:]) for MM rows of A (contiguous along k) and
// NB rows of W at a time: MM*NB independent vector accumulators, so the loop is bound
// by loading W (memory), not by the FMA latency chain a single dot product has.
template <int MM, int NB>
void gemv_nt_block(int64_t K, float alpha, const float* a, int64_t a_rs, const float* w, int64_t ldw, float* c,
                   int64_t ldc, bool accumulate) {
  v8f acc[MM][NB];
  for (int m = 0; m < MM; ++m)
    for (int j = 0; j < NB; ++j) acc[m][j] = v8f{};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    v8f wv[NB];
    for (int j = 0; j < NB; ++j) wv[j] = load8(w + j * ldw + k);
    for (int m = 0; m < MM; ++m) {
      v8f av = load8(a + m * a_rs + k);
      for (int j = 0; j < NB; ++j) acc[m][j] += av * wv[j];
    }
  }
  for (int m = 0; m < MM; ++m)
    for (int j = 0; j < NB; ++j) {
      alignas(32) float lanes[8];
      store8(lanes, acc[m][j]);
      float s = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
      for (int64_t t = k; t < K; ++t) s += a[m * a_rs + t] * w[j * ldw + t];
      float v = alpha * s;
      float& out = c[m * ldc + j];
      out = accumulate ? out + v : v;
    }
}

// Rows [0, M) of A (M small, a_cs == 1) against all N rows of W (B^T row-major).
template <int MM>
void gemv_nt(int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs, const float* w, int64_t ldw,
             float* c, int64_t ldc, bool accumulate) {
  constexpr int NB = MM == 1 ? 8 : (MM == 2 ? 4 : 2);
  int64_t n = 0;
  for (; n + NB <= N; n += NB) gemv_nt_block<MM, NB>(K, alpha, a, a_rs, w + n * ldw, ldw, c + n, ldc, accumulate);
  for (; n < N; ++n) gemv_nt_block<MM, 1>(K, alpha, a, a_rs, w + n * ldw, ldw, c + n, ldc, accumulate);
}

// C[0:MM, cols) (+)= alpha * A[0:MM, :] @ B[:, cols) for row-major B (the layout of
// GPT-2's Conv1D weights): NV vectors of columns stay in registers while K rows of B
// stream past, so C is read and written once per call, not once per row of B.
template <int MM, int NV>
void gemv_nn_cols(int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_rs,
                  float* c, int64_t ldc, bool accumulate) {
  v8f acc[MM][NV];
  for (int m = 0; m < MM; ++m)
    for (int v = 0; v < NV; ++v) acc[m][v] = accumulate ? load8(c + m * ldc + 8 * v) : v8f{};
  for (int64_t k = 0; k < K; ++k) {
    const float* br = b + k * b_rs;
    v8f bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = load8(br + 8 * v);
    for (int m = 0; m < MM; ++m) {
      float x = alpha * a[m * a_rs + k * a_cs];
      v8f xv = v8f{x, x, x, x, x, x, x, x};
      for (int v = 0; v < NV; ++v) acc[m][v] += xv * bv[v];
    }
  }
  for (int m = 0; m < MM; ++m)
    for (int v = 0; v < NV; ++v) store8(c + m * ldc + 8 * v, acc[m][v]);
}

template <int MM>
void gemv_nn(int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
             int64_t b_rs, float* c, int64_t ldc, bool accumulate) {
  constexpr int NV = MM <= 2 ? 4 : 2;
  constexpr int64_t KB = 64;  // rows of B per sweep across the columns: the sweep stays in cache
  int64_t n8 = N / 8 * 8;
  for (int64_t k0 = 0; k0 < K; k0 += KB) {
    int64_t kb = std::min(KB, K - k0);
    bool acc = accumulate || k0 > 0;
    const float* ak = a + k0 * a_cs;
    const float* bk = b + k0 * b_rs;
    int64_t n = 0;
    for (; n + 8 * NV <= n8; n += 8 * NV)
      gemv_nn_cols<MM, NV>(kb, alpha, ak, a_rs, a_cs, bk + n, b_rs, c + n, ldc, acc);
    for (; n < n8; n += 8) gemv_nn_cols<MM, 1>(kb, alpha, ak, a_rs, a_cs, bk + n, b_rs, c + n, ldc, acc);
  }
  int64_t n = n8;
  for (int m = 0; m < MM; ++m)  // column tail (< 8)
    for (int64_t j = n; j < N; ++j) {
      float s = 0;
      for (int64_t k = 0; k < K; ++k) s += a[m * a_rs + k * a_cs] * b[k * b_rs + j];
      float& out = c[m * ldc + j];
      out = accumulate ? out + alpha * s : alpha * s;
    }
}

// Calls f(std::integral_constant<int, MM>, m) for rows [0, M) in blocks of MM = 4 and
// one last block of 3, 2 or 1, so row-blocked kernels are instantiated once per size.
template <class F>
void in_row_blocks(int64_t M, F&& f) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) f(std::integral_constant<int, 4>{}, m);
  switch (M - m) {
    case 3: f(std::integral_constant<int, 3>{}, m); break;
    case 2: f(std::integral_constant<int, 2>{}, m); break;
    case 1: f(std::integral_constant<int, 1>{}, m); break;
    default: break;
  }
}

inline v8f broadcast8(float v) { return v8f{v, v, v, v, v, v, v, v}; }  // keeps -0 (0 + -0 does not)

// apply_epilogue for none and activation.h's simple_activation set: 8 values of a row at a time, the row's last
// w % 8 one at a time. GCC left the one-value loop below scalar for a 16-wide tile
// (AVX2's; the 32-wide one vectorized): bn + ReLU then took 3.6x the time of the GEMM
// itself at 256 x 3136 x 64 (Zen 4, AVX2 path, 2 threads: 33 GFLOP/s with it, 153
// without; 109 with this). End to end on the AVX2 path (in-process A/B against the
// scalar loop, medians): MobileNet V2 0.56x the time at batch 8, 0.58x at batch 1;
// ResNet-50 0.82x at batch 8, 0.96x at batch 1 (its Winograd convs keep their own
// epilogue loop, which vectorizes).
template <Activation A, bool kCs, bool kRes>
void epilogue_rows8(const GemmEpilogue& ep, float* c, int64_t ldc, int64_t m0, int64_t n0, int64_t mr, int64_t w) {
  for (int64_t r = 0; r < mr; ++r) {
    const float s = ep.row_scale ? ep.row_scale[m0 + r] : 1.0f, t = ep.row_shift ? ep.row_shift[m0 + r] : 0.0f;
    const v8f sv = broadcast8(s), tv = broadcast8(t);
    float* row = c + r * ldc;
    const float* res = kRes ? ep.residual + (m0 + r) * ep.ld_residual + n0 : nullptr;
    const float* cs = kCs ? ep.col_shift + n0 : nullptr;
    int64_t j = 0;
    for (; j + 8 <= w; j += 8) {
      v8f v = load8(row + j) * sv + tv;
      if constexpr (kCs) v += load8(cs + j);
      if constexpr (kRes) v += load8(res + j);
      store8(row + j, simple_activation<A>(v));
    }
    for (; j < w; ++j) {  // as the vector body: nothing added for an absent term (+0 would lose a -0)
      float v = row[j] * s + t;
      if constexpr (kCs) v += cs[j];
      if constexpr (kRes) v += res[j];
      row[j] = simple_activation<A>(v);
    }
  }
}

// epilogue_rows8 with the column shift and the residual, present or not, fixed at compile
// time. With them tested per value, GCC vectorized the one-value loop into masked loads
// (vmaskmovps) whose mask is "the pointer is not null": on Intel (Xeon family 6 model
// 167) a masked load of address ~0 with an empty mask takes a microcode assist, so a row
// whose width left 4-7 values past the last 8 cost 77 ns instead of 6 (14 x 14 maps,
// 196 = 24 x 8 + 4; the int8 conv's blocks of pixels).
template <Activation A>
void epilogue_rows8(const GemmEpilogue& ep, float* c, int64_t ldc, int64_t m0, int64_t n0, int64_t mr, int64_t w) {
  if (ep.col_shift) {
    if (ep.residual) return epilogue_rows8<A, true, true>(ep, c, ldc, m0, n0, mr, w);
    return epilogue_rows8<A, true, false>(ep, c, ldc, m0, n0, mr, w);
  }
  if (ep.residual) return epilogue_rows8<A, false, true>(ep, c, ldc, m0, n0, mr, w);
  epilogue_rows8<A, false, false>(ep, c, ldc, m0, n0, mr, w);
}

// The epilogue over the mr x nr block of C at c, whose first value is C[m0, n0]. NR > 0
// fixes the width at compile time (a full register tile): the row loops unroll into
// whole vectors.
template <int64_t NR = 0>
void apply_epilogue(const GemmEpilogue& ep, float* c, int64_t ldc, int64_t m0, int64_t n0, int64_t mr, int64_t nr) {
  const int64_t w = NR > 0 ? NR : nr;
  if (with_simple_activation(ep.act, [&](auto a) { epilogue_rows8<decltype(a)::value>(ep, c, ldc, m0, n0, mr, w); }))
    return;
  with_activation(per_value(ep.act), [&](auto act) {
    for (int64_t r = 0; r < mr; ++r) {
      float s = ep.row_scale ? ep.row_scale[m0 + r] : 1.0f, t = ep.row_shift ? ep.row_shift[m0 + r] : 0.0f;
      float* row = c + r * ldc;
      if (ep.residual) {  // a convolution's fused residual add
        const float* res = ep.residual + (m0 + r) * ep.ld_residual + n0;
        if (ep.col_shift) {
          const float* cs = ep.col_shift + n0;
          for (int64_t j = 0; j < w; ++j) row[j] = act(row[j] * s + t + cs[j] + res[j]);
        } else {
          for (int64_t j = 0; j < w; ++j) row[j] = act(row[j] * s + t + res[j]);
        }
      } else if (ep.col_shift) {
        const float* cs = ep.col_shift + n0;
        for (int64_t j = 0; j < w; ++j) row[j] = act(row[j] * s + t + cs[j]);
      } else {
        for (int64_t j = 0; j < w; ++j) row[j] = act(row[j] * s + t);
      }
      per_row(ep.act, row, w);
    }
  });
}

// Few rows: stream B once instead of packing it.
void small_m(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
             int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, bool accumulate) {
  if (b_rs == 1 && b_cs != 1 && a_cs == 1) {  // B^T row-major, A row-major: blocked dot products
    in_row_blocks(M, [&](auto mm, int64_t m) {
      gemv_nt<mm>(N, K, alpha, a + m * a_rs, a_rs, b, b_cs, c + m * ldc, ldc, accumulate);
    });
    return;
  }
  // Row-major B, a narrow column range (the caller splits N across threads): C in
  // registers, B in sweeps of KB rows. Wider ranges keep the row-streaming loop below,
  // which the hardware prefetcher follows better (measured: faster from ~1000 columns).
  if (b_cs == 1 && N <= 512) {
    in_row_blocks(M, [&](auto mm, int64_t m) {
      gemv_nn<mm>(N, K, alpha, a + m * a_rs, a_rs, a_cs, b, b_rs, c + m * ldc, ldc, accumulate);
    });
    return;
  }
  for (int64_t m = 0; m < M; ++m) {
    float* cr = c + m * ldc;
    if (b_cs == 1) {  // row-major B: axpy over rows of B, four rows per pass over C
      if (!accumulate) std::fill_n(cr, N, 0.0f);
      int64_t k = 0;
      for (; k + 4 <= K; k += 4) {
        float a0 = alpha * a[m * a_rs + k * a_cs], a1 = alpha * a[m * a_rs + (k + 1) * a_cs];
        float a2 = alpha * a[m * a_rs + (k + 2) * a_cs], a3 = alpha * a[m * a_rs + (k + 3) * a_cs];
        const float *b0 = b + k * b_rs, *b1 = b0 + b_rs, *b2 = b1 + b_rs, *b3 = b2 + b_rs;
        for (int64_t n = 0; n < N; ++n) cr[n] += (a0 * b0[n] + a1 * b1[n]) + (a2 * b2[n] + a3 * b3[n]);
      }
      for (; k < K; ++k) {
        float av = alpha * a[m * a_rs + k * a_cs];
        const float* br = b + k * b_rs;
        for (int64_t n = 0; n < N; ++n) cr[n] += av * br[n];
      }
    } else {  // B^T row-major (b_rs == 1): dot products
      for (int64_t n = 0; n < N; ++n) {
        const float* bc = b + n * b_cs;
        float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t k = 0;
        if (a_cs == 1) {
          const float* ar = a + m * a_rs;
          for (; k + 8 <= K; k += 8)
            for (int u = 0; u < 8; ++u) s[u] += ar[k + u] * bc[k + u];
        }
        for (; k < K; ++k) s[0] += a[m * a_rs + k * a_cs] * bc[k];
        float v = alpha * (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])));
        cr[n] = accumulate ? cr[n] + v : v;
      }
    }
  }
}

// Few rows against a row-major B, K split across `threads`: chunk 0 goes to C as the
// caller asked, the others to per-chunk scratch, summed into C after the join. Each
// thread streams one contiguous block of B's rows (a column split strides across all
// of them). One row, cold GPT-2 weights, 2 threads: 768 x 2304 ~22 -> ~24 GB/s,
// 768 x 768 ~19 -> ~21 GB/s, 3072 x 768 unchanged (~20 GB/s).
void split_k_rows(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs,
                  const float* b, int64_t b_rs, float* c, int64_t ldc, bool accumulate, int threads) {
  thread_local AlignedBuf partial_buf;
  float* partial = partial_buf.get(size_t((threads - 1) * M * N));
  parallel_for(threads, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      int64_t k0 = K * t / threads, k1 = K * (t + 1) / threads;
      float* ct = t == 0 ? c : partial + (t - 1) * M * N;
      small_m(M, N, k1 - k0, alpha, a + k0 * a_cs, a_rs, a_cs, b + k0 * b_rs, b_rs, 1, ct, t == 0 ? ldc : N,
              t == 0 && accumulate);
    }
  });
  for (int64_t t = 1; t < threads; ++t)
    for (int64_t m = 0; m < M; ++m) {
      const float* p = partial + ((t - 1) * M + m) * N;
      float* cr = c + m * ldc;
      for (int64_t n = 0; n < N; ++n) cr[n] += p[n];
    }
  partial_buf.trim(size_t(1) << 20);
}

// Few rows (see skinny()): memory-bound. A row-major B (GPT-2's Conv1D weights) is
// split by rows, so each thread streams one contiguous block of it; the partial sums
// are added after. Otherwise the columns are split (W^T: each thread's rows of W are
// contiguous).
void sgemm_skinny(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs,
                  const float* b, int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, bool accumulate) {
  int threads = num_threads();
  // Against B^T, an A whose k are not contiguous (a hand-off's h^T, gemm_handoff_transposed,
  // when a symbolic row count turns out this small) is copied to rows first, so the dot
  // products take their vector path: the same sums, bit for bit. Read in place, BERT-base
  // at 3 tokens took 2.6x the time (docs/benchmarks, 2026-12-07, sixty-fourth session).
  thread_local AlignedBuf a_rows;
  if (a_cs != 1 && b_rs == 1 && b_cs != 1) {
    float* r = a_rows.get(size_t(M * K));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) r[m * K + k] = a[m * a_rs + k * a_cs];
    a = r, a_rs = K, a_cs = 1;
  }
  if (b_cs == 1 && threads > 1 && K >= 64 * threads && N >= 64) {
    split_k_rows(M, N, K, alpha, a, a_rs, a_cs, b, b_rs, c, ldc, accumulate, threads);
    return;
  }
  // A thread is worth waking for about 128 KiB of B (measured on Zen 2: a 256x256 GEMV
  // split over two cores' L2 runs in less than half the time, wake-up included).
  int64_t min_cols = std::max<int64_t>(16, (int64_t(32) << 10) / std::max<int64_t>(K, 1));
  parallel_for(N, min_cols, [&](int64_t lo, int64_t hi) {
    small_m(M, hi - lo, K, alpha, a, a_rs, a_cs, b + lo * b_cs, b_rs, b_cs, c + lo, ldc, accumulate);
  });
  a_rows.trim(size_t(1) << 20);  // (the copy is taken only on this path: split_k_rows reads B row-major)
}

// Where a B packed in advance keeps the panel of column panel P (over all of N) and the
// k block starting at pc: panel after panel, each its k blocks in order, kc x NR apart
// (blocks of KC, or the weight-rows driver's kc for its X^T).
template <int64_t NR>
int64_t packed_b_panel(int64_t P, int64_t pc, int64_t kblocks, int64_t kc = KC) {
  return (P * kblocks + pc / kc) * kc * NR;
}

// All of A (times alpha) in MR-row panels, k block by k block: block pc starts at
// pc * mpanels * MR, panel q of it at q * kc * MR. The driver's layout for A.
template <int64_t MR>
void pack_a_all(int64_t M, int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs, float* dst) {
  int64_t mpanels = (M + MR - 1) / MR, kblocks = (K + KC - 1) / KC;
  parallel_for(mpanels * kblocks, 4, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      int64_t q = t % mpanels, pc = (t / mpanels) * KC, kc = std::min(KC, K - pc);
      pack_a<MR>(kc, std::min(MR, M - q * MR), alpha, a + q * MR * a_rs + pc * a_cs, a_rs, a_cs,
                 dst + pc * mpanels * MR + q * kc * MR);
    }
  });
}

// How many panels of `width` rows (or columns) make one k block (kc deep) of about
// 256 KiB, half of a Zen 3 core's L2: the block of the streamed operand that stays in
// L2 while the other operand's panels go past.
constexpr int64_t panels_in_half_l2(int64_t width, int64_t kc = KC) {
  return (int64_t(256) << 10) / int64_t(sizeof(float) * width * kc);
}

// Row panels of A per block the driver sweeps for each panel of B.
template <int64_t MR>
constexpr int64_t kMcPanels = panels_in_half_l2(MR);

// How many blocks of A's rows the driver runs for `mpanels` row panels of about `per`
// panels each: rounded, so a block may be up to a quarter larger (256 rows of A are 43
// panels: one block of 43, not 42 and a lone one, which packs B again for 6 rows).
constexpr int64_t row_blocks(int64_t mpanels, int64_t per) { return std::max<int64_t>(1, (mpanels + per / 4) / per); }

// Up to this many columns of B the blocked driver reads a row-major A in place (the
// micro-kernel broadcasts from six row pointers) instead of packing it: packing costs a
// pass over A that only pays back when many column panels of B reuse it. Measured
// (Zen 3, 2 threads, B packed, in place / packed time): 256^3 0.84, 512^3 0.93,
// 3136 x 64 x 576 0.75, 196 x 256 x 2304 0.81, 1024^3 0.97; with more columns it
// loses (2048^3 1.08-1.10, 256 x 2048 x 4096 1.04: A's block is read again from L2 for
// each of many column panels, and rows a power-of-two stride apart crowd its sets).
constexpr int64_t kInPlaceAMaxN = 1024;

// How much of B's packed panels a thread that owns column panels sweeps A's rows
// across at a time. One panel at a time writes C down its columns, one cache line per
// row of C; a group writes runs of a line per panel along each row, which the hardware
// prefetchers follow. Short k (1x1 convs with few input channels, whose C is large
// against the work) gain most: measured on Zen 4, 2 threads, conv shapes with bn +
// ReLU, 8 images: 256 x 3136 x 64 0.80x the time (0.83x with a residual), MobileNet
// V2's 16 x 12544 x 32 0.85x; k >= 256 within noise (64 KiB: at k = 64, 8 panels of
// AVX-512's 32 columns, 16 of AVX2's 16; at k >= 256, 2 and 4; more than L1, which the
// measurements accept). ResNet-50 end to end 0.96x at batch 1 and 8.
constexpr int64_t kGroupBytes = int64_t(64) << 10;

// Whether the blocked driver has threads own B's column panels (rather than split A's
// rows: few column panels).
bool owns_columns(int64_t mpanels, int64_t npanels) { return npanels >= mpanels || npanels >= 8; }

// The blocked driver: pack all of A once (or read it in place, UK_ROWS, with few
// columns); then for each NC block of B, threads own column panels of B, pack them one
// KC block at a time and run the micro-kernel down A, one L2-sized block of rows at a
// time (or, with few column panels, split A's rows instead).
template <int64_t MR, int64_t NR, MicroKernel UK, RowsMicroKernel UK_ROWS = nullptr, MicroKernel UK_HALF = nullptr,
          RowsMicroKernel UK_ROWS_HALF = nullptr>
void sgemm_blocked(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs,
                   const float* b, int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, bool accumulate,
                   const float* packed_a, const float* packed_b, const GemmBSource* b_src, const GemmEpilogue* ep) {
  // Buffers belong to the calling thread; pool workers fill disjoint panels of them.
  thread_local AlignedBuf abuf, bbuf;
  int64_t mpanels = (M + MR - 1) / MR;
  // A is packed once, every k block, and reused for every column block of B: one
  // fork/join instead of one per (column, k) block. A prepacked A is the same layout.
  int64_t kblocks = (K + KC - 1) / KC;
  const float* ap_all = packed_a;
  // Row-major A read in place (no packing) where B has few column panels; see
  // kInPlaceAMaxN.
  const bool a_rows = UK_ROWS && !packed_a && a_cs == 1 && alpha == 1.0f && N <= kInPlaceAMaxN;
  if (!packed_a && !a_rows) {
    float* buf = abuf.get(size_t(mpanels * MR * K));
    pack_a_all<MR>(M, K, alpha, a, a_rs, a_cs, buf);
    ap_all = buf;
  }
  for (int64_t jc = 0; jc < N; jc += NC) {
    int64_t nc = std::min(NC, N - jc);
    int64_t npanels = (nc + NR - 1) / NR;
    // Column owners pack one k block of their panels at a time; the row split below
    // packs B's few panels for every k block at once (the prepacked layout).
    bool own_columns = owns_columns(mpanels, npanels);
    float* bp = packed_b ? nullptr : bbuf.get(size_t(npanels * (own_columns ? 1 : kblocks) * KC * NR));
    // One register tile for one k block; after the last, the epilogue while it is in L1.
    auto tile = [&](int64_t p, int64_t q, int64_t pc, int64_t kc, const float* bpanel, int64_t ahead = 0) {
      int64_t mr = std::min(MR, M - q * MR), nr = std::min(NR, nc - p * NR);
      float* ct = c + q * MR * ldc + jc + p * NR;
      // A last panel of at most NR / 2 columns runs the half-width kernel where there is
      // one: 7 x 7 maps (49 columns) compute 56 columns, not 64.
      bool half = nr <= NR / 2;
      if (a_rows)
        (half && UK_ROWS_HALF ? UK_ROWS_HALF : UK_ROWS)(kc, a + q * MR * a_rs + pc, a_rs, bpanel, NR, ct, ldc, mr,
                                                        nr, accumulate || pc > 0, ahead);
      else
        (half && UK_HALF ? UK_HALF : UK)(kc, ap_all + pc * mpanels * MR + q * kc * MR, bpanel, ct, ldc, mr, nr,
                                         accumulate || pc > 0);
      if (ep && pc + kc == K) {
        if (nr == NR) apply_epilogue<NR>(*ep, ct, ldc, q * MR, jc + p * NR, mr, NR);
        else apply_epilogue(*ep, ct, ldc, q * MR, jc + p * NR, mr, nr);
      }
    };
    // A read in place: the tile of row panel q's first column panel prefetches the
    // next row panel's part of the k block, when this thread runs that panel next
    // (prefetch_rows_ahead, as sgemm_weight_rows does). Winograd's 16 GEMMs read their
    // filters this way once per call, cold: ResNet-50's 3x3 convs on 14 x 14 maps lost
    // a third of their time to the late row streams. Measured on an Intel Xeon (family
    // 6, model 167), 2 threads, interleaved processes: ResNet-50 batch 1 0.92x the
    // time, batch 8 0.95x, with the AVX2 tile 0.95x; in cache (the expand and project
    // GEMMs of MobileNet's fused blocks) within noise.
    auto rows_ahead = [&](int64_t q, int64_t end) -> int64_t {
      return a_rows && q + 1 < end && (q + 2) * MR <= M ? MR * a_rs : 0;
    };
    // Where this call packs the panel of B for column panel p and k block pc.
    auto own_panel = [&](int64_t p, int64_t pc) {
      return own_columns ? bp + p * KC * NR : bp + packed_b_panel<NR>(p, pc, kblocks);
    };
    // ... and where the micro-kernel reads it: there, or where a B packed in advance
    // (sgemm_pack_b) keeps it.
    auto panel_of = [&](int64_t p, int64_t pc) -> const float* {
      return packed_b ? packed_b + packed_b_panel<NR>(jc / NR + p, pc, kblocks) : own_panel(p, pc);
    };
    auto pack_panel = [&](int64_t p, int64_t pc, int64_t kc) {
      if (b_src)
        b_src->pack(b_src->self, pc, kc, jc + p * NR, std::min(NR, nc - p * NR), NR, own_panel(p, pc));
      else if (!packed_b)
        pack_b<NR>(kc, std::min(NR, nc - p * NR), b + pc * b_rs + (jc + p * NR) * b_cs, b_rs, b_cs, own_panel(p, pc));
    };
    if (own_columns) {
      // Threads own column panels, a group of them at a time (kGroupBytes): for each k
      // block, pack the group's panels of B and sweep a block of A's rows whose k block
      // stays in L2, each row panel across the whole group, so C is written in runs
      // along its rows; taller A runs block after block, packing B's panels again.
      // Equal blocks (see row_blocks).
      int64_t qblocks = row_blocks(mpanels, kMcPanels<MR>), qstep = (mpanels + qblocks - 1) / qblocks;
      for (int64_t q0 = 0; q0 < mpanels; q0 += qstep) {
        int64_t q1 = std::min(mpanels, q0 + qstep);
        parallel_for(npanels, 1, [&](int64_t lo, int64_t hi) {
          const int64_t panel_bytes = std::max<int64_t>(1, std::min(KC, K)) * NR * int64_t(sizeof(float));
          const int64_t group = std::max<int64_t>(1, kGroupBytes / panel_bytes);
          for (int64_t g0 = lo; g0 < hi; g0 += group) {
            int64_t g1 = std::min(hi, g0 + group);
            for (int64_t pc = 0; pc < K; pc += KC) {
              int64_t kc = std::min(KC, K - pc);
              for (int64_t p = g0; p < g1; ++p) pack_panel(p, pc, kc);
              for (int64_t q = q0; q < q1; ++q)
                for (int64_t p = g0; p < g1; ++p)
                  tile(p, q, pc, kc, panel_of(p, pc), p == g0 ? rows_ahead(q, q1) : 0);
            }
          }
        });
      }
    } else {
      // Few column panels (a short N: small feature maps, few outputs): pack all of
      // them in one pass, then threads split A's rows and run every k block: two
      // fork/joins per call rather than two per k block (a 3x3 conv on 14x14 maps has 9).
      // Each panel of A meets all of B's panels (in L2) while it is in L1.
      if (!packed_b)
        parallel_for(npanels * kblocks, 1, [&](int64_t lo, int64_t hi) {
          for (int64_t t = lo; t < hi; ++t) {
            int64_t p = t % npanels, pc = (t / npanels) * KC;
            pack_panel(p, pc, std::min(KC, K - pc));
          }
        });
      parallel_for(mpanels, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t pc = 0; pc < K; pc += KC) {
          int64_t kc = std::min(KC, K - pc);
          for (int64_t q = lo; q < hi; ++q)
            for (int64_t p = 0; p < npanels; ++p) tile(p, q, pc, kc, panel_of(p, pc), p == 0 ? rows_ahead(q, hi) : 0);
        }
      });
    }
  }
  bbuf.trim(size_t(16) << 20);
  abuf.trim(size_t(16) << 20);  // keep up to 64 MiB of packed A between calls
}

// A transposed strip made final: strip[r * width + m] holds the sum for C[m0 + m,
// n0 + r] without alpha; it becomes alpha * sum, then, with an epilogue,
// act(alpha * sum * row_scale[m] + row_shift[m] + col_shift[n]) (apply_epilogue's
// order). Along the strip's rows, contiguous over X's rows, so the loops vectorize;
// on C's side a row would have only MR values.
void finish_strip(const GemmEpilogue* ep, float* strip, int64_t width, int64_t rows, int64_t mr, float alpha,
                  int64_t m0, int64_t n0) {
  for (int64_t r = 0; r < mr && alpha != 1.0f; ++r)
    for (int64_t m = 0; m < rows; ++m) strip[r * width + m] *= alpha;
  if (!ep) return;
  // The per-row part (GELU) over the whole strip at once where its rows are contiguous
  // (no padding past `rows`): gelu_exact_n runs 1.09 ns a value on 32 values, 0.78 on
  // 128 or more (Zen 3, one thread), and MiniLM at seq 32 made 32-value calls: the model
  // 0.984x the time (paired in-process A/B), seq 128 1.000x.
  const bool whole = rows == width;
  with_activation(per_value(ep->act), [&](auto act) {
    for (int64_t r = 0; r < mr; ++r) {
      float* s = strip + r * width;
      const float cs = ep->col_shift ? ep->col_shift[n0 + r] : 0.0f;
      if (ep->row_scale)
        for (int64_t m = 0; m < rows; ++m) s[m] *= ep->row_scale[m0 + m];
      if (ep->row_shift)
        for (int64_t m = 0; m < rows; ++m) s[m] += ep->row_shift[m0 + m];
      if (ep->residual)  // C^T's row r is C's column n0 + r
        for (int64_t m = 0; m < rows; ++m) s[m] += ep->residual[(m0 + m) * ep->ld_residual + n0 + r];
      for (int64_t m = 0; m < rows; ++m) s[m] = act(s[m] + cs);
      if (!whole) per_row(ep->act, s, rows);
    }
  });
  if (whole) per_row(ep->act, strip, mr * width);
}

// x @ W^T with W (an nn.Linear weight: [N, K] row-major, B = W^T) read in place,
// never copied: computes C^T = W X^T with W as the micro-kernel's broadcast operand,
// MR rows of it at a time (the ISA's weight-rows tile, gemm_weight_rows_mr), and X^T
// packed per call into NR-column panels (all k blocks, laid out as pack_b_whole lays B
// out, with weight_rows_kc's k block for KC), or, where X comes transposed and short,
// its whole panels read in place (see in_place below). Threads split W's rows, so each
// streams its own part of W once per block of X. A W row panel's k blocks sum into a
// per-thread MR x (rows of X) strip, written to C transposed, times alpha, epilogue
// applied.
// X's rows go in blocks (weight_rows_x_panels) that every W panel sweeps in turn. A last
// panel of X with at most NR / 2 rows runs a half-width kernel (less padding: 33 rows
// compute 40, not 48). Several weights reading one X (parts: sgemm_parts) run as one
// such GEMM, their panels in turn, each part's strips to its own C.
// c_trans: C is stored transposed (c[n * ldc + m], not accumulating), so the strips are
// C's rows: each tile computes where its values go, the epilogue runs there, and no
// transpose follows (a last panel of X narrower than NR stores only its columns).
// Up to this K the weight-rows driver prefetches W's next row panel in software
// (prefetch_rows_ahead): each row starts a short stream (3 KiB at K 768) that the
// hardware prefetchers pick up late, while longer rows they stream well. Measured on
// an Intel Xeon (family 6, model 167), 2 threads, W cold (a round over 25-400 weights),
// M x N x K GFLOP/s with / without: 32 x 768 x 768 230 / 173-175, 32 x 384 x 384
// 171-174 / 118-119, 32 x 1536 x 384 211-216 / 143, 128 x 768 x 768 282 / 254-258,
// 128 x 3072 x 768 290-295 / 261-264; at K 1536 and 3072 0.86-1.0x (32 x 768 x 3072:
// 260-281 / 278-302), so longer rows go without. The AVX2 tile (same CPU,
// ZENITH_NO_AVX512): 32 x 768 x 768 161 / 134, 32 x 384 x 384 130 / 99, 128 x 768 x 768
// 190-193 / 182.
constexpr int64_t kPrefetchWRowsMaxK = 1024;

// W panels whose strips a thread transposes into C together (kStripGroup x MR columns of
// C, 96 on AVX-512, 48 on AVX2): each row of C gets whole cache lines in one go, where
// a lone strip's MR values (48 bytes on AVX-512) shared lines with the next strip's and
// the line was fetched again once C's rows had crowded it out of L1 (rows a multiple of
// 1024 floats apart share a set). With transpose_block by dst rows, 2 threads, Zen 5
// (family 26 model 2), paired: 128 x 3072 x 768 0.92x the time (AVX2 0.96x), 512 x 3072
// x 768 0.94x, 32 x 3072 x 768 0.96x; outputs 384-1536 wide 0.99-1.01x, 32 x 768 x 768
// 1.02x; BERT-base seq 128 0.94x and all-MiniLM-L6-v2 0.94x with both against neither
// (the order alone 0.97x). Measured on Zen 5 only (1 MiB L2): the strips take G x 12 x
// (up to 256) floats, 96 KiB at most, beside a block of X^T in L2.
constexpr int64_t kStripGroup = 8;

// The weight-rows driver's k block: on the AVX2 tile (6 rows of W) K in equal blocks of
// at most 768 (rounded up to 8), where KC's 256 split MiniLM's K of 384 into 256 + 128.
// Each k block costs every tile a pass over its strip of C (load, add, store) and six
// new W row streams, short ones, that the prefetchers pick up late; the W panel's block
// stays 18 KiB, within L1. Measured on Zen 3 (family 25 model 1), 2 threads, x @ W^T
// with W cycled over 4 copies, paired rounds, GFLOP/s with blocks of 256 / 768:
//   128 x 384 x 384   170 / 180     128 x 768 x 768    181 / 187
//   128 x 1536 x 384  177 / 184     128 x 3072 x 768   177 / 186
//   128 x 384 x 1536  174 / 180     512 x 768 x 768    172 / 188
//   32 x 384 x 384    164 / 171     16 x 2048 x 5632   170 / 175
// 8 x 768 x 768 within noise (110 / 114 and 111 / 109 in two runs); caps of 1024 or
// 1536 within noise of 768. Models (in-process A/B, frozen, paired): all-MiniLM-L6-v2
// seq 128 0.961x the time, seq 32 0.975x, BERT-base seq 128 0.970x. The AVX-512 tiles
// (12 and 8 rows) take the same blocks (a 12-row panel's block is 36 KiB): measured on
// Zen 5 (family 26 model 2), 2 threads, kernel time against KC's blocks, 128 x 384 x 384
// 0.91x, 128 x 1536 x 384 0.96x, 128 x 768 x 768 0.95x, 128 x 3072 x 768 0.97x,
// 128 x 768 x 3072 0.99x (blocks of 512 there 0.95x, of 1024-3072 within noise of 768);
// BERT-base seq 128 0.979x and all-MiniLM-L6-v2 seq 128 0.965x the time (in-process A/B),
// seq 32 1.00x. Their blocks of X keep KC's size (weight_rows_x_panels).
int64_t weight_rows_kc(int64_t K) {
  constexpr int64_t kMost = 768;
  const int64_t blocks = (K + kMost - 1) / kMost;
  return std::max<int64_t>(8, ((K + blocks - 1) / blocks + 7) / 8 * 8);
}
// Panels of X per block of its rows, which every W panel's tiles sweep in turn: on AVX2
// (NR 16) one k block of them in half of L2, below KC as many as for KC (what was
// measured, and the strips' budget); the AVX-512 tiles (NR 32) as many as one KC block in
// half of L2 at any k block (8 panels, 256 rows): with 768-deep blocks that rule would
// give 2 panels, and 128 rows of X in two blocks read W twice: on Zen 5, 2 threads,
// kernel time 1.044x at 128 x 768 x 3072, 1.009x at 128 x 768 x 768 and 300 x 3072 x
// 768, 0.99-1.0x at 128 x 1536 x 384 and 512 x 768 x 768. (AVX2's tile on the same CPU:
// either rule within 1%.)
template <int64_t MR, int64_t NR>
int64_t weight_rows_x_panels(int64_t kcw) {
  return std::max<int64_t>(1, panels_in_half_l2(NR, MR > 6 ? KC : std::max(kcw, KC)));
}

// The most weights one call of the weight-rows driver takes (sgemm_parts runs more in turns).
constexpr int64_t kWeightRowsMaxParts = 16;

// One weight of a weight-rows GEMM: W's n rows (ldw apart, the call's), the C its
// columns go to (ldc; with c_trans C^T, rows ldc apart) and their epilogue.
struct WeightRowsPart {
  const float* w;
  int64_t n;
  float* c;
  int64_t ldc;
  const GemmEpilogue* ep;
  // With c_trans, 0: C^T's rows ldc apart; else C^T as the next GEMM's X^T panels
  // (sgemm_ct_panels): the NR rows of C from p * NR at c + p * panel_stride, C^T's rows
  // NR apart within (ldc unused).
  int64_t panel_stride = 0;
};

template <int64_t MR, int64_t NR, RowsMicroKernel UK, RowsMicroKernel UK_HALF>
void sgemm_weight_rows(int64_t M, int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs, int64_t ldw,
                       const WeightRowsPart* parts, int64_t nparts, bool accumulate, bool c_trans,
                       bool a_panels) {
  ZENITH_CHECK(nparts >= 1 && nparts <= kWeightRowsMaxParts && K > 0 && !(c_trans && accumulate),
               "sgemm: the weight-rows driver takes 1 to ", kWeightRowsMaxParts, " weights, K > 0 and no "
               "accumulation into a transposed C; got ", nparts, ", K ", K);
  thread_local AlignedBuf xbuf;
  const int64_t kcw = weight_rows_kc(K);
  int64_t xpanels = (M + NR - 1) / NR, kblocks = (K + kcw - 1) / kcw;
  // The W panels of all parts in turn: part i's are [first[i], first[i + 1]).
  int64_t first[kWeightRowsMaxParts + 1] = {0};
  for (int64_t i = 0; i < nparts; ++i) first[i + 1] = first[i] + (parts[i].n + MR - 1) / MR;
  const int64_t wpanels = first[nparts];
  const bool prefetch_w = K <= kPrefetchWRowsMaxK;
  // X given transposed (a_rs 1: X^T's rows a_cs apart, each contiguous over X's rows; a
  // feed-forward pair's h^T, gemm_handoff_transposed) is read in place on AVX-512's
  // 32-wide panels where X^T's rows are at most two panels apart: a whole panel of it is
  // NR values per k, a_cs apart, what packing would copy NR apart. A last, partial panel
  // is packed (a tile reads NR values per k). Measured on AMD Zen 4 (family 25 model 17),
  // 2 threads, x @ W^T with W cold, M x N x K time in place / packed: 32 x 384 x 1536
  // 0.93-0.94, 45 x 384 x 1536 (rows off cache lines) 0.97-0.99, 48 x 384 x 1536 0.96,
  // 64 x 384 x 1536 0.91-0.96, 32 x 768 x 3072 0.97; all-MiniLM-L6-v2 seq 32
  // 0.988-0.994 and BERT-base seq 32 0.976 (in-process A/Bs, frozen). Rows further apart
  // lost (128 x 768 x 3072: 8 lines a k apart, 1.025), and AVX2's 16-wide panels lost or
  // won by K: 32 x 768 x 3072 1.10, 32 x 384 x 1536 0.95, 128 x 384 x 1536 1.2-1.25:
  // those stay packed.
  // a_panels: X comes as X^T's panels already (sgemm_panels_a), every one read in place.
  ZENITH_CHECK(!a_panels || M % NR == 0, "sgemm: X^T as panels needs whole panels");
  const int64_t in_place =
      a_panels ? xpanels : a_rs == 1 && NR >= 32 && a_cs >= M && a_cs <= 2 * NR ? M / NR : 0;  // [0, in_place)
  const int64_t packed_panels = xpanels - in_place;
  float* xp = packed_panels ? xbuf.get(size_t(packed_panels * kblocks * kcw * NR)) : nullptr;
  auto packed_at = [&](int64_t p, int64_t pc) { return xp + packed_b_panel<NR>(p - in_place, pc, kblocks, kcw); };
  // X^T's panel p, k block starting at pc, and how far apart its rows (k) are: in place,
  // or laid out as a packed B, in blocks of kcw.
  auto xpanel = [&](int64_t p, int64_t pc) {
    return a_panels ? a + p * K * NR + pc * NR : p < in_place ? a + pc * a_cs + p * NR : packed_at(p, pc);
  };
  auto xpanel_ld = [&](int64_t p) { return !a_panels && p < in_place ? a_cs : NR; };
  // Each (panel, k block) to pack as `split` runs of k, so that every thread packs where
  // there are fewer of them than threads (32 rows of X on AVX-512: one panel, one k block,
  // which one thread packed while the other waited). Runs go to threads in k order, as
  // the layers before this one mostly split X's columns (heads, W's rows). Zen 4, 2
  // threads: 32 x 384 x 384 0.98x the time; all-MiniLM-L6-v2 seq 32 0.992x and 0.999x,
  // BERT-base seq 32 0.994x (in-process A/Bs, [p25, p75] [0.988, 0.999]); on AVX2 (two
  // 16-wide panels) within noise.
  const int64_t jobs = packed_panels * kblocks, threads = num_threads();
  const int64_t split = threads > 1 && jobs > 0 && jobs < 2 * threads ? (2 * threads + jobs - 1) / jobs : 1;
  const int64_t krun = ((kcw + split - 1) / split + 7) / 8 * 8;
  if (jobs)
    parallel_for(jobs * split, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t j = t / split, p = in_place + j % packed_panels, pc = (j / packed_panels) * kcw;
        const int64_t k0 = pc + (t % split) * krun, k1 = std::min({pc + kcw, K, k0 + krun});
        if (k0 < k1)
          pack_b<NR>(k1 - k0, std::min(NR, M - p * NR), a + p * NR * a_rs + k0 * a_cs, a_cs, a_rs,
                     packed_at(p, pc) + (k0 - pc) * NR);
      }
    });
  const int64_t kBlockPanels = weight_rows_x_panels<MR, NR>(kcw);
  for (int64_t p0 = 0; p0 < xpanels; p0 += kBlockPanels) {
    int64_t p1 = std::min(xpanels, p0 + kBlockPanels), width = (p1 - p0) * NR;
    int64_t m0 = p0 * NR, rows = std::min(M, p1 * NR) - m0;
    parallel_for(wpanels, 1, [&](int64_t lo, int64_t hi) {
      thread_local AlignedBuf strip_buf;
      const int64_t G = accumulate ? 1 : kStripGroup;  // (accumulating calls add C's old values strip by strip)
      float* strips = c_trans ? nullptr : strip_buf.get(size_t(G * MR * width));
      int64_t part = 0, q0 = lo;  // q's part; the first panel of q's group of strips (one part's)
      for (int64_t q = lo; q < hi; ++q) {
        while (q >= first[part + 1]) ++part;
        const WeightRowsPart& pt = parts[part];
        const int64_t n0 = (q - first[part]) * MR, mr = std::min(MR, pt.n - n0);  // W's rows, C's columns
        const float* wq = pt.w + n0 * ldw;
        // The tile of the block's first panel of X (p0) fetches the thread's next W panel
        // (a whole one, of this part), k block by k block, while it computes; see
        // kPrefetchWRowsMaxK.
        const int64_t ahead = prefetch_w && q + 1 < hi && n0 + 2 * MR <= pt.n ? MR * ldw : 0;
        // The strip: a row of `ld` per W row; with c_trans C's rows n0.. from column m0.
        // As panels (c_trans, pt.panel_stride) each panel of X has its own: NR wide.
        const bool as_panels = c_trans && pt.panel_stride;
        float* strip = c_trans ? pt.c + n0 * pt.ldc + m0 : strips + (q - q0) * MR * width;
        const int64_t ld = as_panels ? NR : c_trans ? pt.ldc : width;
        auto tile_out = [&](int64_t p) {
          return as_panels ? pt.c + p * pt.panel_stride + n0 * NR : strip + (p - p0) * NR;
        };
        for (int64_t pc = 0; pc < K; pc += kcw) {
          int64_t kc = std::min(kcw, K - pc);
          for (int64_t p = p0; p < p1; ++p) {
            const int64_t cols = std::min(NR, M - p * NR);
            const bool half = cols <= NR / 2;  // a last panel with at most NR / 2 rows of X
            // (into the strip buffer the whole tile, padding too; into C^T only its columns)
            (half ? UK_HALF : UK)(kc, wq + pc, ldw, xpanel(p, pc), xpanel_ld(p), tile_out(p), ld, mr,
                                  c_trans ? cols : half ? NR / 2 : NR, pc > 0, p == p0 ? ahead : 0);
          }
        }
        // Finished on the strip, then (but for C^T) written transposed. Accumulating calls
        // add C's old values first, so their epilogue runs on C (rows of MR values,
        // scalar: GELU there cost 6.8 ms on 512 x 1536 x 384 against 2.7 ms on the strip).
        if (as_panels)
          for (int64_t p = p0; p < p1; ++p) finish_strip(pt.ep, tile_out(p), NR, NR, mr, alpha, p * NR, n0);
        else
          finish_strip(accumulate ? nullptr : pt.ep, strip, ld, rows, mr, alpha, m0, n0);
        if (c_trans) continue;
        float* cq = pt.c + m0 * pt.ldc + n0;
        if (!accumulate) {
          if (q + 1 == hi || q + 1 - q0 == G || q + 1 == first[part + 1]) {
            const int64_t g0 = (q0 - first[part]) * MR;  // the group's first column of C
            transpose_block(strips, width, pt.c + m0 * pt.ldc + g0, pt.ldc, n0 - g0 + mr, rows, true);
            q0 = q + 1;
          }
          continue;
        }
        for (int64_t m = 0; m < rows; ++m)
          for (int64_t r = 0; r < mr; ++r) cq[m * pt.ldc + r] += strip[r * width + m];
        if (pt.ep) apply_epilogue(*pt.ep, cq, pt.ldc, m0, n0, rows, mr);
        q0 = q + 1;
      }
      strip_buf.trim(size_t(1) << 20);
    });
  }
  xbuf.trim(size_t(16) << 20);
}

std::shared_ptr<float> packed_buffer(size_t n) {
  std::shared_ptr<float> buf(static_cast<float*>(std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64)), std::free);
  if (!buf) fail_alloc("sgemm: out of memory packing a constant operand of ", n * sizeof(float), " bytes");
  return buf;
}

// B packed into the driver's panels, in the order it reads them: column panel P (all
// of N, NR wide, zero-padded) then k block (KC rows; the last one short).
template <int64_t NR>
std::shared_ptr<float> pack_b_whole(int64_t K, int64_t N, const float* b, int64_t b_rs, int64_t b_cs) {
  int64_t npanels = (N + NR - 1) / NR, kblocks = (K + KC - 1) / KC;
  auto buf = packed_buffer(size_t(npanels * kblocks * KC * NR));
  parallel_for(npanels, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p)
      for (int64_t pc = 0; pc < K; pc += KC)
        pack_b<NR>(std::min(KC, K - pc), std::min(NR, N - p * NR), b + pc * b_rs + p * NR * b_cs, b_rs, b_cs,
                   buf.get() + packed_b_panel<NR>(p, pc, kblocks));
  });
  return buf;
}

template <int64_t MR>
std::shared_ptr<float> pack_a_whole(int64_t M, int64_t K, const float* a, int64_t a_rs, int64_t a_cs) {
  auto buf = packed_buffer(size_t((M + MR - 1) / MR * MR * K));
  pack_a_all<MR>(M, K, 1.0f, a, a_rs, a_cs, buf.get());
  return buf;
}

using Driver = void (*)(int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t, const float*, int64_t,
                        int64_t, float*, int64_t, bool, const float*, const float*, const GemmBSource*,
                        const GemmEpilogue*);
using Packer = std::shared_ptr<float> (*)(int64_t, int64_t, const float*, int64_t, int64_t);
using WeightRowsDriver = void (*)(int64_t, int64_t, float, const float*, int64_t, int64_t, int64_t,
                                  const WeightRowsPart*, int64_t, bool, bool, bool);

// The GEMM this machine runs: the driver and the packers share its panel sizes.
// weight_rows (x @ W^T reading W in place) is there where its kernel is.
struct Isa {
  const char* name;
  int64_t mr, nr;  // the micro-kernel's tile
  Driver driver;
  Packer pack_a, pack_b;
  WeightRowsDriver weight_rows = nullptr;
  int64_t weight_rows_mr = 0;
  // The weight-rows GEMM on the main tile's mr rows, where the weight-rows tile is
  // taller (AVX-512's 12 rows): for weights whose rows crowd an L1 set (rows_crowd_l1).
  WeightRowsDriver weight_rows_short = nullptr;
};

// sgemm on ISA I: the ISA's tile (its first row in gemm_ukernels.def) and the list's
// kernels for that tile: full and half width, A packed or read in place.
template <GemmIsa I>
Isa isa_of() {
  constexpr int MR = gemm_main_ukernel(I).mr, NR = gemm_main_ukernel(I).nr;
  constexpr MicroKernel full = gemm_ukernel(I, MR, NR, GemmA::packed, MR, NR).packed;
  constexpr MicroKernel half = gemm_ukernel(I, MR, NR / 2, GemmA::packed, MR, NR).packed;
  constexpr RowsMicroKernel rows = gemm_ukernel(I, MR, NR, GemmA::rows, 0, NR).rows;
  constexpr RowsMicroKernel rows_half = gemm_ukernel(I, MR, NR / 2, GemmA::rows, 0, NR).rows;
  constexpr int WMR = gemm_weight_rows_mr(I);
  constexpr RowsMicroKernel w_rows = gemm_ukernel(I, WMR, NR, GemmA::rows, 0, NR).rows;
  constexpr RowsMicroKernel w_rows_half = gemm_ukernel(I, WMR, NR / 2, GemmA::rows, 0, NR).rows;
  WeightRowsDriver w_short = nullptr;
  if constexpr (WMR != MR) w_short = sgemm_weight_rows<MR, NR, rows, rows_half>;
  return {gemm_isa_name(I), MR, NR, sgemm_blocked<MR, NR, full, rows, half, rows_half>, pack_a_whole<MR>,
          pack_b_whole<NR>, sgemm_weight_rows<WMR, NR, w_rows, w_rows_half>, WMR, w_short};
}

Isa pick_isa() {
#if defined(__x86_64__)
  if (kernels_use_avx512()) return isa_of<GemmIsa::avx512>();
#endif
  return isa_of<GemmIsa::avx2>();
}

const Isa& isa() {
  static const Isa chosen = pick_isa();
  return chosen;
}

// Few rows: the skinny kernels stream B where it is. (x @ W^T with more rows reads W in
// place too, through the weight-rows kernel; see weight_in_place.)
bool skinny(int64_t M, int64_t b_rs, int64_t b_cs) { return M <= kSkinnyRows && (b_cs == 1 || b_rs == 1); }

// B = W^T with W's rows contiguous (x @ W^T, nn.Linear's layout), more rows than the
// skinny kernels take: the GEMM reads W where it is (sgemm_weight_rows), so there is
// nothing to pack and no copy of the weight to keep. Measured against W packed in
// advance (2 threads, x @ W^T, W cold): Zen 3 AVX2, 128 x 768 x 768, 128 x 768 x 3072
// and 64 x 1024 x 1024 4-9% faster, 48, 96, 512 and 1024 rows 1-4% faster, 33 and 40
// rows 5-20% slower (X's panels padded); Zen 4 AVX-512, 2048 x 2048 and 5632 x 2048
// weights, 8 rows 0.7-1.0x packed's speed, 12 to 32 rows 0.9-1.2x, 40 rows 0.9-1.0x,
// and 1.7-4x the blocked dot products that ran 5 to 32 rows unpacked before. A packed
// copy would double the memory of every linear weight (a 1.1B-parameter model's prompt
// of 16 tokens kept 3.9 GB of them), for at most 30% on few-row calls.
bool weight_in_place(int64_t M, int64_t b_rs, int64_t b_cs) {
  return b_rs == 1 && b_cs != 1 && M > kSkinnyRows && isa().weight_rows;
}

// Whether `rows` rows of W, ld floats apart, put more cache lines into one set of this
// core's L1 than the set has ways. The weight-rows tile broadcasts from all its rows at
// every step of k, so each row's current line must stay in L1; rows 4 KiB apart (any
// ld a multiple of 1024 floats) all land in the same set. On an 8-way L1 (AMD Zen 4,
// family 25 model 17) the 12-row tile then missed L1 on every step: 2 threads, x @ W^T
// with W cold, M x N x K GFLOP/s 12-row / 8-row: 128 x 768 x 1024 177 / 207,
// 128 x 768 x 3072 (BERT's FFN down) 194 / 212, 128 x 3072 x 1024 164 / 204; where
// the rows spread (K 768, 1536: at most 6 per set) the two ran within noise of each
// other. BERT-base at 128 tokens 0.971x the time (in-process A/B, p25-p75 0.963-0.975).
// A 12-way L1 (Intel's 48 KiB) holds the 12 rows, and there the taller tile measured
// faster at K 3072 (gemm_weight_rows_mr).
bool rows_crowd_l1(int64_t rows, int64_t ld) {
  struct L1 {
    int64_t ways = 8, sets = 64, line = 64;
  };
  static const L1 l1 = [] {
    L1 g;
    const long ways = sysconf(_SC_LEVEL1_DCACHE_ASSOC), size = sysconf(_SC_LEVEL1_DCACHE_SIZE),
               line = sysconf(_SC_LEVEL1_DCACHE_LINESIZE);
    if (ways > 0 && line > 0 && size >= ways * line) g = {ways, size / (ways * line), line};
    return g;
  }();
  // Per call of sgemm: each row's set computed once (a division), then compared.
  constexpr int64_t kMaxRows = 16;
  int64_t set[kMaxRows];
  rows = std::min(rows, kMaxRows);
  for (int64_t r = 0; r < rows; ++r) set[r] = (r * ld * int64_t(sizeof(float)) / l1.line) % l1.sets;
  for (int64_t r = 0; r < rows; ++r)
    if (std::count(set, set + rows, set[r]) > l1.ways) return true;
  return false;
}

// The weight-rows driver for W's rows ldw floats apart: the weight-rows tile, or the
// main one where the tile's rows crowd an L1 set.
WeightRowsDriver weight_rows_driver(int64_t ldw) {
  const Isa& is = isa();
  return is.weight_rows_short && rows_crowd_l1(is.weight_rows_mr, ldw) ? is.weight_rows_short : is.weight_rows;
}

PackedOperand make_packed(PackedOperand::Side side, int64_t rows, int64_t cols, const float* src, int64_t rs,
                          int64_t cs) {
  PackedOperand p;
  p.side = side;
  p.src = src;
  p.rows = rows;
  p.cols = cols;
  p.rs = rs;
  p.cs = cs;
  if (rows > 0 && cols > 0) p.data = (side == PackedOperand::kA ? isa().pack_a : isa().pack_b)(rows, cols, src, rs, cs);
  return p;
}

}  // namespace

// Whether the blocked driver packs each panel of B once for M x N: it does unless
// threads own B's columns and A is taller than one L2 block of rows (each block then
// packs B's panels again). Producing B panel by panel (GemmBSource) pays only then.
bool sgemm_packs_b_once(int64_t M, int64_t N) {
  int64_t mpanels = (M + isa().mr - 1) / isa().mr, npanels = (std::min(N, NC) + isa().nr - 1) / isa().nr;
  return !owns_columns(mpanels, npanels) || row_blocks(mpanels, panels_in_half_l2(isa().mr)) == 1;
}

bool conv2d_pixel_rows(int64_t images, int64_t groups, int64_t cols, bool winograd) {
  static const bool off = std::getenv("ZENITH_NO_PIXEL_ROWS") != nullptr;  // for A/B measurement
  if (off || images != 1 || groups != 1 || winograd || cols > 512) return false;
  const int64_t mr = isa().mr, nr = isa().nr, rem = cols % nr;
  // Columns the blocked driver computes for `cols`: full panels, and a last one of
  // nr / 2 columns (the half-width kernel) or nr.
  int64_t as_columns = cols - rem + (rem == 0 ? 0 : rem <= nr / 2 ? nr / 2 : nr);
  int64_t as_rows = (cols + mr - 1) / mr * mr;
  return as_columns * 10 > as_rows * 11;  // more than 10% less padding as rows
}

const char* sgemm_isa() { return isa().name; }

void sgemm_epilogue_block(const GemmEpilogue& ep, float* c, int64_t ldc, int64_t m0, int64_t n0, int64_t mr,
                          int64_t nr) {
  apply_epilogue(ep, c, ldc, m0, n0, mr, nr);
}

bool sgemm_reads_packed(int64_t M, int64_t b_rs, int64_t b_cs) {
  return !skinny(M, b_rs, b_cs) && !weight_in_place(M, b_rs, b_cs);
}

PackedOperand sgemm_pack_a(int64_t M, int64_t K, const float* a, int64_t a_rs, int64_t a_cs) {
  return make_packed(PackedOperand::kA, M, K, a, a_rs, a_cs);
}

PackedOperand sgemm_pack_b(int64_t K, int64_t N, const float* b, int64_t b_rs, int64_t b_cs) {
  return make_packed(PackedOperand::kB, K, N, b, b_rs, b_cs);
}

void sgemm(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
           int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, bool accumulate, const PackedOperand* packed,
           const GemmEpilogue* ep) {
  if (M == 0 || N == 0) return;
  if (ep && ep->empty()) ep = nullptr;
  // Paths without a tiled driver run the epilogue as one pass over C afterwards.
  auto epilogue_pass = [&] {
    if (ep)
      parallel_for(N, 256, [&](int64_t lo, int64_t hi) { apply_epilogue(*ep, c + lo, ldc, 0, lo, M, hi - lo); });
  };
  if (K == 0) {
    if (!accumulate)
      for (int64_t m = 0; m < M; ++m) std::fill_n(c + m * ldc, N, 0.0f);
    epilogue_pass();
    return;
  }
  if (skinny(M, b_rs, b_cs)) {
    sgemm_skinny(M, N, K, alpha, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc, accumulate);
    epilogue_pass();
    return;
  }
  if (!packed && weight_in_place(M, b_rs, b_cs)) {
    const WeightRowsPart part{b, N, c, ldc, ep};
    weight_rows_driver(b_cs)(M, K, alpha, a, a_rs, a_cs, b_cs, &part, 1, accumulate, false, false);
    return;
  }
  const float *pa = nullptr, *pb = nullptr;
  if (packed) {
    bool is_a = packed->side == PackedOperand::kA;
    ZENITH_CHECK(is_a ? (packed->rows == M && packed->cols == K && packed->src == a && packed->rs == a_rs &&
                         packed->cs == a_cs && alpha == 1.0f)
                      : (packed->rows == K && packed->cols == N && packed->src == b && packed->rs == b_rs &&
                         packed->cs == b_cs),
                 "sgemm: the packed ", is_a ? "A" : "B", " was made for another operand");
    (is_a ? pa : pb) = packed->data.get();
  }
  isa().driver(M, N, K, alpha, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc, accumulate, pa, pb, nullptr, ep);
}

bool sgemm_reads_weight_in_place(int64_t M, int64_t b_rs, int64_t b_cs) { return weight_in_place(M, b_rs, b_cs); }

namespace {
// ct[n * ldct + m] = cm[m * N + n]: a C made whole, transposed into place, threads by columns.
void transpose_out(const float* cm, int64_t M, int64_t N, float* ct, int64_t ldct) {
  parallel_for(N, 64, [&](int64_t lo, int64_t hi) { transpose_block(cm + lo, N, ct + lo * ldct, ldct, M, hi - lo); });
}
}  // namespace

void sgemm_ct(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
              int64_t b_rs, int64_t b_cs, float* ct, int64_t ldct, const PackedOperand* packed, const GemmEpilogue* ep) {
  if (M == 0 || N == 0) return;
  if (ep && ep->empty()) ep = nullptr;
  if (K > 0 && !packed && weight_in_place(M, b_rs, b_cs)) {
    const WeightRowsPart part{b, N, ct, ldct, ep};
    weight_rows_driver(b_cs)(M, K, alpha, a, a_rs, a_cs, b_cs, &part, 1, false, true, false);
    return;
  }
  thread_local AlignedBuf cbuf;  // C as sgemm writes it, then transposed
  float* cm = cbuf.get(size_t(M * N));
  sgemm(M, N, K, alpha, a, a_rs, a_cs, b, b_rs, b_cs, cm, N, false, packed, ep);
  transpose_out(cm, M, N, ct, ldct);
  cbuf.trim(size_t(16) << 20);
}

bool sgemm_handoff_panels(int64_t M, int64_t K) { return K > 0 && weight_in_place(M, 1, K) && M % isa().nr == 0; }

void sgemm_ct_panels(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs,
                     const float* w, int64_t ldw, float* ct, const GemmEpilogue* ep) {
  ZENITH_CHECK(sgemm_handoff_panels(M, N) && weight_in_place(M, 1, ldw), "sgemm_ct_panels: ", M, " rows into ", N,
               " outputs do not go as panels");
  if (ep && ep->empty()) ep = nullptr;
  WeightRowsPart part{w, N, ct, 0, ep};
  part.panel_stride = N * isa().nr;
  weight_rows_driver(ldw)(M, K, alpha, a, a_rs, a_cs, ldw, &part, 1, false, true, false);
}

void sgemm_panels_a(int64_t M, int64_t N, int64_t K, const float* xt, const float* w, int64_t ldw, float* c,
                    int64_t ldc, bool accumulate, const GemmEpilogue* ep) {
  ZENITH_CHECK(sgemm_handoff_panels(M, K) && weight_in_place(M, 1, ldw), "sgemm_panels_a: ", M, " rows over ", K,
               " inputs do not come as panels");
  if (N == 0) return;
  if (ep && ep->empty()) ep = nullptr;
  const WeightRowsPart part{w, N, c, ldc, ep};
  weight_rows_driver(ldw)(M, K, 1.0f, xt, 1, M, ldw, &part, 1, accumulate, false, true);
}

void sgemm_parts(int64_t M, int64_t K, const float* x, int64_t ldx, const GemmPart* parts, int64_t nparts) {
  if (M == 0) return;
  if (!(K > 0 && weight_in_place(M, 1, K))) {  // few rows (or K = 0): part by part
    for (int64_t i = 0; i < nparts; ++i) {
      GemmEpilogue ep;
      ep.col_shift = parts[i].bias;
      sgemm(M, parts[i].n, K, 1.0f, x, ldx, 1, parts[i].w, 1, K, parts[i].c, parts[i].n, false, nullptr, &ep);
    }
    return;
  }
  // One driver call a kWeightRowsMaxParts weights (more go in turns); empty parts left out.
  GemmEpilogue eps[kWeightRowsMaxParts];
  WeightRowsPart wp[kWeightRowsMaxParts];
  for (int64_t i0 = 0; i0 < nparts; i0 += kWeightRowsMaxParts) {
    int64_t used = 0;
    for (int64_t i = i0; i < std::min(nparts, i0 + kWeightRowsMaxParts); ++i) {
      if (parts[i].n == 0) continue;
      eps[used].col_shift = parts[i].bias;  // (no bias: no epilogue pass)
      wp[used] = {parts[i].w, parts[i].n, parts[i].c, parts[i].n, parts[i].bias ? &eps[used] : nullptr};
      ++used;
    }
    if (used) weight_rows_driver(K)(M, K, 1.0f, x, ldx, 1, K, wp, used, false, false, false);
  }
}

void sgemm_b_source(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const GemmBSource& b,
                    float* c, int64_t ldc, const PackedOperand* packed_a, const GemmEpilogue* ep, bool accumulate) {
  if (M == 0 || N == 0) return;
  if (ep && ep->empty()) ep = nullptr;
  if (K == 0) {
    if (!accumulate)
      for (int64_t m = 0; m < M; ++m) std::fill_n(c + m * ldc, N, 0.0f);
    if (ep) apply_epilogue(*ep, c, ldc, 0, 0, M, N);
    return;
  }
  const float* pa = nullptr;
  if (packed_a) {
    ZENITH_CHECK(packed_a->side == PackedOperand::kA && packed_a->rows == M && packed_a->cols == K &&
                     packed_a->src == a && packed_a->rs == a_rs && packed_a->cs == a_cs,
                 "sgemm: the packed A was made for another operand");
    pa = packed_a->data.get();
  }
  isa().driver(M, N, K, 1.0f, a, a_rs, a_cs, nullptr, 0, 0, c, ldc, accumulate, pa, nullptr, &b, ep);
}

// ---- matmul and addmm: prepared once per plan ----
namespace {
// What prepare_matmul / prepare_addmm chose: the sizes and strides of each GEMM (matmul
// loops over batch dims), as the kernel reads the operands.
struct GemmState {
  int64_t M, N, K;
  GemmStrides st;
  // addmm's hand-off as panels (`panels`, gemm_handoff_transposed): this node writes its
  // output as the reader's X^T panels, or reads its A so. Writer and reader each ask
  // sgemm_handoff_panels of the same M and hand-off width, so they agree.
  bool panels_out = false, panels_in = false;
};
std::shared_ptr<const PackedOperand> pack_gemm_b(const void* state, const void* const* src) {
  const auto& s = *static_cast<const GemmState*>(state);
  return std::make_shared<const PackedOperand>(
      sgemm_pack_b(s.K, s.N, static_cast<const float*>(src[0]), s.st.b_rs, s.st.b_cs));
}
// One bias value per column (nn.Linear's) at beta 1: the epilogue's column shift.
bool column_bias(const TensorRef& bias, double beta, int64_t N) {
  const int64_t br = bias.rank() == 2 ? bias.shape[0] : 1;
  const int64_t bc = bias.rank() >= 1 ? bias.shape[size_t(bias.rank() - 1)] : 1;
  return float(beta) == 1.0f && br == 1 && bc == N;
}
// B (input `slot`) is offered packed when it is a float32 matrix that sgemm's blocked
// driver would pack on every call at these sizes (few rows stream B in place instead).
void prepare_gemm(const PrepareCtx& c, PreparedOp* p, int slot, bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
  auto s = std::make_shared<GemmState>(GemmState{M, N, K, gemm_strides(ta, tb, M, N, K)});
  const TensorRef& b = c.in[size_t(slot)];
  if (b.rank() == 2 && b.dtype == DType::f32 && c.out[0].dtype == DType::f32 &&
      sgemm_reads_packed(M, s->st.b_rs, s->st.b_cs))
    p->weight = WeightPack{{slot}, {int64_t(PackedOperand::kB), K, N, s->st.b_rs, s->st.b_cs}, pack_gemm_b};
  p->state = std::move(s);
}
}  // namespace

void prepare_matmul(const PrepareCtx& c, PreparedOp* p) {
  const auto& at = c.a<attrs::matmul>();
  const TensorRef &a = c.in[0], &o = c.out[0];
  int ro = o.rank();
  prepare_gemm(c, p, 1, at.trans_a, at.trans_b, o.shape[size_t(ro - 2)], o.shape[size_t(ro - 1)],
               a.shape[size_t(a.rank() - (at.trans_a ? 2 : 1))]);
}

void prepare_addmm(const PrepareCtx& c, PreparedOp* p) {
  const auto& at = c.a<attrs::addmm>();
  const auto& o = c.out[0].shape;  // [M, N], or [N, M] with trans_c
  const int64_t M = o[at.trans_c ? 1 : 0], N = o[at.trans_c ? 0 : 1], K = c.in[1].shape[at.trans_a ? 0 : 1];
  prepare_gemm(c, p, 2, at.trans_a, at.trans_b, M, N, K);
  if (!at.panels) return;
  auto s = std::make_shared<GemmState>(*static_cast<const GemmState*>(p->state.get()));
  s->panels_out = at.trans_c && sgemm_handoff_panels(M, N);
  s->panels_in = at.trans_a && sgemm_handoff_panels(M, K);
  const bool unpacked = p->weight.slots.empty() && s->st.b_rs == 1;
  ZENITH_CHECK(!s->panels_out || (column_bias(c.in[0], at.beta, N) && unpacked),
               "addmm: a hand-off written as panels needs x @ W^T, a bias per column and beta 1");
  ZENITH_CHECK(!s->panels_in || (unpacked && float(at.alpha) == 1.0f && !at.trans_c),
               "addmm: a hand-off read as panels needs x @ W^T, alpha 1 and a row-major result");
  p->state = std::move(s);
}

// ---- matmul: a[..., M, K] @ b[..., K, N] with broadcast batch dims ----
void run_matmul(const KernelCtx& c) {
  const TensorRef &a = c.in[0], &b = c.in[1];
  TensorRef& o = c.out[0];
  const auto& gs = c.st<GemmState>();
  const int64_t M = gs.M, N = gs.N, K = gs.K;
  const GemmStrides& st = gs.st;
  std::vector<int64_t> batch(o.shape.begin(), o.shape.end() - 2);
  int64_t nb = 1;
  for (int64_t d : batch) nb *= d;
  // batch strides of a and b (0 where broadcast)
  auto bstrides = [&](const TensorRef& t) {
    std::vector<int64_t> s(batch.size(), 0);
    int64_t stride = t.shape[size_t(t.rank() - 1)] * t.shape[size_t(t.rank() - 2)];
    int tb = t.rank() - 2;
    for (int d = tb - 1, od = int(batch.size()) - 1; d >= 0; --d, --od) {
      s[size_t(od)] = t.shape[size_t(d)] == 1 ? 0 : stride;
      stride *= t.shape[size_t(d)];
    }
    return s;
  };
  std::vector<int64_t> sa = bstrides(a), sb = bstrides(b);
  std::vector<int64_t> idx(batch.size(), 0);
  for (int64_t i = 0; i < nb; ++i) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      oa += idx[d] * sa[d];
      ob += idx[d] * sb[d];
    }
    sgemm(M, N, K, 1.0f, a.as<float>() + oa, st.a_rs, st.a_cs, b.as<float>() + ob, st.b_rs, st.b_cs,
          o.as<float>() + i * M * N, N, false, ob == 0 ? c.packed : nullptr);
    for (int d = int(batch.size()) - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < batch[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
}

// ---- addmm_parts: x @ w_i^T (+ bias_i), one GEMM ----
void run_addmm_parts(const KernelCtx& c) {
  const int64_t P = c.a<attrs::addmm_parts>().parts;
  const TensorRef& x = c.in[0];
  const bool bias = int64_t(c.in.size()) == 1 + 2 * P;
  // Each part as sgemm_parts takes it, on the stack (a call per 16 parts; the pass makes 2-3).
  constexpr int64_t kChunk = 16;
  GemmPart parts[kChunk];
  for (int64_t i0 = 0; i0 < P; i0 += kChunk) {
    const int64_t n = std::min(kChunk, P - i0);
    for (int64_t j = 0; j < n; ++j) {
      const size_t i = size_t(i0 + j);
      parts[j] = {c.in[1 + i].as<float>(), c.in[1 + i].shape[0], c.out[i].as<float>(),
                  bias ? c.in[1 + size_t(P) + i].as<float>() : nullptr};
    }
    sgemm_parts(x.shape[0], x.shape[1], x.as<float>(), x.shape[1], parts, n);
  }
}

// ---- addmm: beta * bias + alpha * (a @ b) ----
void run_addmm(const KernelCtx& c) {
  const TensorRef &bias = c.in[0], &a = c.in[1], &b = c.in[2];
  TensorRef& o = c.out[0];
  const auto& at = c.a<attrs::addmm>();
  const auto& gs = c.st<GemmState>();
  const int64_t M = gs.M, N = gs.N, K = gs.K;
  float alpha = float(at.alpha), beta = float(at.beta);
  const float* pb = bias.as<float>();
  const int64_t br = bias.rank() == 2 ? bias.shape[0] : 1;
  const int64_t bc = bias.rank() >= 1 ? bias.shape[size_t(bias.rank() - 1)] : 1;
  GemmEpilogue ep;
  ep.act = at.activation;  // fused activation, if any
  // A bias per column is the epilogue's column shift, added to each tile once its sum is
  // complete. Any other bias (per row and column, a scalar, beta != 1) is broadcast into
  // the output first, the product added on top.
  const bool col_bias = column_bias(bias, at.beta, N);
  const GemmStrides& st = gs.st;
  if (gs.panels_out) {  // prepare_addmm chose it, and checked col_bias
    ep.col_shift = pb;
    sgemm_ct_panels(M, N, K, alpha, a.as<float>(), st.a_rs, st.a_cs, b.as<float>(), st.b_cs, o.as<float>(), &ep);
    return;
  }
  if (at.trans_c && col_bias) {  // the output [N, M]: sgemm writes it so
    ep.col_shift = pb;
    sgemm_ct(M, N, K, alpha, a.as<float>(), st.a_rs, st.a_cs, b.as<float>(), st.b_rs, st.b_cs, o.as<float>(), M,
             c.packed, &ep);
    return;
  }
  // C itself, or with trans_c (and any other bias) C made whole first, then transposed.
  thread_local AlignedBuf cbuf;
  float* po = at.trans_c ? cbuf.get(size_t(M * N)) : o.as<float>();
  if (col_bias) {
    ep.col_shift = pb;
  } else {
    parallel_for(M, 16, [&](int64_t lo, int64_t hi) {  // rows split across threads, like the GEMM
      for (int64_t m = lo; m < hi; ++m) {
        float* row = po + m * N;
        const float* src = pb + (br == 1 ? 0 : m) * bc;
        if (beta == 0.0f) {
          std::fill_n(row, N, 0.0f);
        } else if (bc == 1) {
          std::fill_n(row, N, beta * src[0]);
        } else {
          for (int64_t n = 0; n < N; ++n) row[n] = beta * src[n];
        }
      }
    });
  }
  if (gs.panels_in)
    sgemm_panels_a(M, N, K, a.as<float>(), b.as<float>(), st.b_cs, po, N, !col_bias, &ep);
  else
    sgemm(M, N, K, alpha, a.as<float>(), st.a_rs, st.a_cs, b.as<float>(), st.b_rs, st.b_cs, po, N, !col_bias,
          c.packed, &ep);
  if (at.trans_c) {
    transpose_out(po, M, N, o.as<float>(), M);
    cbuf.trim(size_t(16) << 20);
  }
}

}  // namespace zenith
