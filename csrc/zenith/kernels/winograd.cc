// 3x3 convolution (stride 1, padding 1) by Winograd's F(2x2, 3x3): each 2x2 block of
// outputs comes from a 4x4 input patch with 16 multiplies per (input, output) channel
// pair instead of 36, so the GEMM work drops 2.25x. The filters transformed (U = G g
// G^T, 16 matrices OC x IC; once, by conv3x3_winograd_pack, for a constant weight); per
// call the input's patches transformed (V = B^T d B, 16 matrices IC x tiles), 16 GEMMs
// M = U V (sgemm; U read in place up to 1024 tiles), and the outputs
// transformed back (A^T m A) with the conv's epilogue (bias / folded batch-norm,
// residual, activation) applied as they are written. Rounding differs from the direct
// conv by a few ulp of the larger intermediate sums (tested against a scalar direct
// convolution and against eager).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "zenith/error.h"
#include "zenith/kernels/activation.h"
#include "zenith/kernels/gemm_internal.h"
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"

namespace zenith {

void winograd_filter_f2(const float* g, float* u) {
  float t[4][3];  // G g, G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1]
  for (int c = 0; c < 3; ++c) {
    t[0][c] = g[c];
    t[1][c] = 0.5f * (g[c] + g[3 + c] + g[6 + c]);
    t[2][c] = 0.5f * (g[c] - g[3 + c] + g[6 + c]);
    t[3][c] = g[6 + c];
  }
  for (int r = 0; r < 4; ++r) {  // (G g) G^T
    u[r * 4 + 0] = t[r][0];
    u[r * 4 + 1] = 0.5f * (t[r][0] + t[r][1] + t[r][2]);
    u[r * 4 + 2] = 0.5f * (t[r][0] - t[r][1] + t[r][2]);
    u[r * 4 + 3] = t[r][2];
  }
}

namespace {
// U[xi][oc][ic] = (G g G^T)[xi]. An output channel's 16 rows go through a small tile
// (rows C + 16 floats apart, so its 16 write streams do not share a cache set) and are
// copied out whole: written pair by pair straight into U, the 16 destinations lie a
// whole U[xi] apart (a multiple of 4 KiB for ResNet's channel counts) and kept 16 partly
// written lines in one set. Zen 4, 2 threads, 512 x 512 filters: 5.5-6.9 -> 4.8 ms.
void transform_filters(int64_t OC, int64_t C, const float* w, float* U) {
  const int64_t rs = C + 16;
  parallel_for(OC, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> tile(size_t(16 * rs));
    for (int64_t oc = lo; oc < hi; ++oc) {
      for (int64_t ic = 0; ic < C; ++ic) {
        float u[16];
        winograd_filter_f2(w + (oc * C + ic) * 9, u);
        for (int xi = 0; xi < 16; ++xi) tile[size_t(xi * rs + ic)] = u[xi];
      }
      for (int xi = 0; xi < 16; ++xi) std::copy_n(tile.data() + xi * rs, C, U + (xi * OC + oc) * C);
    }
  });
}
}  // namespace

namespace {
// Whether x[0, n) holds a NaN or a value of magnitude over limit: !(|x| <= limit), which
// is true for NaN too (an unordered compare), ORed over the vectors.
bool any_past(const float* x, int64_t n, float limit) {
  int64_t i = 0;
#if defined(__AVX2__)
  const __m256 lim = _mm256_set1_ps(limit), absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_and_ps(_mm256_loadu_ps(x + i), absmask);
    acc = _mm256_or_ps(acc, _mm256_cmp_ps(v, lim, _CMP_NLE_UQ));
  }
  if (!_mm256_testz_ps(acc, acc)) return true;
#endif
  for (; i < n; ++i)
    if (!(std::fabs(x[i]) <= limit)) return true;
  return false;
}
}  // namespace

std::vector<uint8_t> nonfinite_images(const float* x, int64_t N, int64_t image, float limit) {
  // Pieces of 64 KiB, so one image's scan splits between threads; up to 4 pieces on the
  // calling thread (ResNet-50's 512 channels on 7 x 7: 2 us from L2, a fork and join more).
  constexpr int64_t kPiece = 16384;
  const int64_t pieces = std::max<int64_t>(1, (image + kPiece - 1) / kPiece);
  std::vector<uint8_t> piece_bad(static_cast<size_t>(N * pieces)), bad(static_cast<size_t>(N));
  const auto scan = [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t n = t / pieces, at = (t % pieces) * kPiece;
      piece_bad[size_t(t)] = any_past(x + n * image + at, std::min(kPiece, image - at), limit);
    }
  };
  if (N * image <= 4 * kPiece)
    scan(0, N * pieces);
  else
    parallel_for(N * pieces, 1, scan);
  for (int64_t t = 0; t < N * pieces; ++t) bad[size_t(t / pieces)] |= piece_bad[size_t(t)];
  return bad;
}

std::vector<uint8_t> ref_nonfinite_images(const float* x, int64_t N, int64_t image, float limit) {
  std::vector<uint8_t> bad(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < image; ++i) {
      const float v = x[n * image + i];
      bad[size_t(n)] |= std::isnan(v) || std::fabs(v) > limit;
    }
  return bad;
}

bool conv2d_uses_winograd(int64_t groups, int64_t KH, int64_t KW, const std::array<int64_t, 2>& stride,
                          const std::array<int64_t, 2>& padding, const std::array<int64_t, 2>& dilation, int64_t C,
                          int64_t H, int64_t W, int64_t OC) {
  static const bool off = std::getenv("ZENITH_NO_WINOGRAD") != nullptr;
  const std::array<int64_t, 2> one{1, 1};
  return !off && groups == 1 && KH == 3 && KW == 3 && stride == one && padding == one && dilation == one &&
         H * W >= 49 && C >= 64 && OC >= 64;
}

PackedOperand conv3x3_winograd_pack(int64_t OC, int64_t C, const float* w) {
  PackedOperand p;
  p.side = PackedOperand::kWinograd;
  p.src = w;
  p.rows = OC;
  p.cols = C * 9;
  p.rs = C * 9;
  p.cs = 1;
  p.data = std::shared_ptr<float>(static_cast<float*>(std::aligned_alloc(64, size_t(16 * OC * C) * sizeof(float))),
                                  std::free);
  if (!p.data) fail_alloc("conv2d: out of memory for Winograd filters (", size_t(16 * OC * C) * sizeof(float), " bytes)");
  p.winograd_unsafe = nonfinite_images(w, 1, OC * C * 9, kWinogradLimit)[0];
  transform_filters(OC, C, w, p.data.get());
  return p;
}

void conv3x3_winograd(const float* x, int64_t C, int64_t H, int64_t W, const float* w, int64_t OC, float* out,
                      const GemmEpilogue& ep, const PackedOperand* filters) {
  using gemm_detail::AlignedBuf;
  const int64_t th = (H + 1) / 2, tw = (W + 1) / 2, T = th * tw;
  thread_local AlignedBuf ubuf, vbuf, mbuf;
  const float* U;
  if (filters) {
    ZENITH_CHECK(filters->side == PackedOperand::kWinograd && filters->isa == 0 && filters->src == w &&
                     filters->rows == OC && filters->cols == C * 9,
                 "conv2d: the Winograd filters were made for another weight");
    U = filters->data.get();
  } else {
    float* u = ubuf.get(size_t(16 * OC * C));
    transform_filters(OC, C, w, u);
    U = u;
  }
  float* V = vbuf.get(size_t(16 * C * T));
  float* M = mbuf.get(size_t(16 * OC * T));

  // V[xi][ic][tile] = (B^T d B)[xi], d the 4x4 patch at (2i - 1, 2j - 1), zero outside;
  // B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]. Loops run along tiles so they
  // vectorize: per channel, each patch row r of every tile is transformed along its
  // columns (d B: stride-2 reads of a zero-padded copy of the image row, line[1 + x] =
  // column x) into db[r * 4 + k][tile], then the four rows combine (B^T) over all tiles.
  parallel_for(C, 1, [&](int64_t lo, int64_t hi) {
    thread_local AlignedBuf scratch;
    float* line = scratch.get(size_t(2 * tw + 4 + 16 * T));
    float* db = line + 2 * tw + 4;
    for (int64_t ic = lo; ic < hi; ++ic) {
      const float* plane = x + ic * H * W;
      for (int64_t i = 0; i < th; ++i)
        for (int r = 0; r < 4; ++r) {
          int64_t y = 2 * i - 1 + r;
          float* d0 = db + (r * 4 + 0) * T + i * tw;
          float *d1 = d0 + T, *d2 = d1 + T, *d3 = d2 + T;
          if (y < 0 || y >= H) {
            for (float* d : {d0, d1, d2, d3}) std::fill_n(d, tw, 0.0f);
            continue;
          }
          line[0] = 0.0f;
          std::copy_n(plane + y * W, W, line + 1);
          std::fill_n(line + 1 + W, 2 * tw + 3 - W, 0.0f);
          for (int64_t j = 0; j < tw; ++j) {
            const float* p = line + 2 * j;
            d0[j] = p[0] - p[2];
            d1[j] = p[1] + p[2];
            d2[j] = p[2] - p[1];
            d3[j] = p[1] - p[3];
          }
        }
      const int64_t xs = C * T;  // between consecutive xi in V
      for (int k = 0; k < 4; ++k) {
        const float *r0 = db + k * T, *r1 = db + (4 + k) * T, *r2 = db + (8 + k) * T, *r3 = db + (12 + k) * T;
        float* v0 = V + k * xs + ic * T;
        float *v1 = v0 + 4 * xs, *v2 = v1 + 4 * xs, *v3 = v2 + 4 * xs;
        for (int64_t t = 0; t < T; ++t) {
          v0[t] = r0[t] - r2[t];
          v1[t] = r1[t] + r2[t];
          v2[t] = r2[t] - r1[t];
          v3[t] = r1[t] - r3[t];
        }
      }
    }
    scratch.trim(size_t(1) << 20);
  });

  // The 16 GEMMs split between threads whole (each runs serially inside: nested
  // parallel_for), one fork/join instead of 16 and no sync inside small GEMMs.
  parallel_for(16, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t xi = lo; xi < hi; ++xi)
      sgemm(OC, T, C, 1.0f, U + xi * OC * C, C, 1, V + xi * C * T, T, 1, M + xi * OC * T, T, false);
  });

  // out = A^T m A, A^T = [1 1 1 0; 0 1 -1 -1], then the epilogue per output value.
  // Per channel: A^T over all tiles at once (rows of M are contiguous in tiles), then
  // per row of tiles (A^T m) A with the two output rows interleaved into a line
  // (columns 2j, 2j + 1) and the epilogue along it.
  const int64_t HW = H * W;
  with_activation(ep.act, [&](auto act) {
    parallel_for(OC, 1, [&](int64_t lo, int64_t hi) {
      thread_local AlignedBuf scratch;
      float* tm = scratch.get(size_t(8 * T + 4 * tw));  // tm[a * 4 + c][tile] = (A^T m)[a][c]
      float* line = tm + 8 * T;                         // 2 output rows of 2 * tw columns
      const int64_t xs = OC * T;                         // between consecutive xi in M
      for (int64_t oc = lo; oc < hi; ++oc) {
        const float s = ep.row_scale ? ep.row_scale[oc] : 1.0f, sh = ep.row_shift ? ep.row_shift[oc] : 0.0f;
        const float* res = ep.residual ? ep.residual + oc * ep.ld_residual : nullptr;
        float* o = out + oc * HW;
        for (int c = 0; c < 4; ++c) {
          const float* m0 = M + c * xs + oc * T;
          const float *m1 = m0 + 4 * xs, *m2 = m1 + 4 * xs, *m3 = m2 + 4 * xs;
          float *t0 = tm + c * T, *t1 = tm + (4 + c) * T;
          for (int64_t t = 0; t < T; ++t) {
            t0[t] = m0[t] + m1[t] + m2[t];
            t1[t] = m1[t] - m2[t] - m3[t];
          }
        }
        for (int64_t i = 0; i < th; ++i)
          for (int a = 0; a < 2; ++a) {
            int64_t y = 2 * i + a;
            if (y >= H) break;
            const float* t0 = tm + (a * 4) * T + i * tw;
            const float *t1 = t0 + T, *t2 = t1 + T, *t3 = t2 + T;
            for (int64_t j = 0; j < tw; ++j) {
              line[2 * j] = t0[j] + t1[j] + t2[j];
              line[2 * j + 1] = t1[j] - t2[j] - t3[j];
            }
            float* orow = o + y * W;
            const float* rrow = res ? res + y * W : nullptr;
            if (rrow) {
              for (int64_t xx = 0; xx < W; ++xx) orow[xx] = act(line[xx] * s + sh + rrow[xx]);
            } else {
              for (int64_t xx = 0; xx < W; ++xx) orow[xx] = act(line[xx] * s + sh);
            }
          }
      }
      scratch.trim(size_t(1) << 20);
    });
  });
  ubuf.trim(size_t(16) << 20);
  vbuf.trim(size_t(16) << 20);
  mbuf.trim(size_t(16) << 20);
}

}  // namespace zenith
