// conv2d for convolutions with few input channels (the stems of ResNets and MobileNets:
// 3 channels, 7x7 or 3x3, stride 2): computed directly from a copy of the image, with
// no im2col columns.
//
// As an implicit GEMM these convs are all packing: K = C * KH * KW is small (27, 147),
// so each column of B is built (a strided gather, at stride 2) for few multiplies, and
// with few output channels each packed panel serves few rows of A. Here the image is
// copied once, zero-padded and split by column phase as depthwise.cc does (stride s:
// a padded row holds its columns 0, s, 2s, ... then 1, 1 + s, ...), so the B row of
// tap k = (c, kh, kw) for an output row is one unit-stride run of the copy, at an
// offset fixed per tap. The register tile (sgemm's shape: 8 x 32 with AVX-512, 6 x 16
// with AVX2) reads those runs in place: output channels as its rows (the filters packed
// per call, MR rows at a time, k-major), an output row's pixels as its columns.
#include <algorithm>
#include <cstring>
#include <vector>

#include "zenith/error.h"
#include "zenith/kernels/gemm_internal.h"
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"

namespace zenith {

using gemm_detail::F32Vec;
using gemm_detail::kernels_use_avx512;

namespace {

// The padded, phase-split copy of one image: per channel `rows` padded rows (every row
// a window reaches, and x's: the padding below is whatever the windows reach past x) of
// `sw` phases of `phase_len` floats, long enough for every column a tile reads (the
// last tile of a row reads whole vectors past the output's last column: zeros).
struct DirectLayout {
  int64_t rows, phase_len, pitch, plane;
  DirectLayout(const DepthwiseGeom& g, int64_t tile_cols)
      : rows(std::max((g.OH - 1) * g.sh + (g.KH - 1) * g.dh + 1, g.ph + g.H)),
        phase_len((std::max((g.OW + tile_cols - 1) / tile_cols * tile_cols + (g.KW - 1) * g.dw / g.sw,
                            (g.W + g.pw + g.sw - 1) / g.sw) +
                   15) / 16 * 16),
        pitch(g.sw * phase_len),
        plane(rows * pitch) {}
};

// What the tiles read: the copy, the packed filters, each tap's offset.
struct DirectJob {
  const DepthwiseGeom* g;
  DirectLayout lay;
  int64_t K, OC, panels, col_tiles;
  const float *img, *wp;
  const int64_t* off;
  float* out;
  const GemmEpilogue* ep;
};

// Column tiles [lo, hi) of the output rows (tile t: row t / col_tiles), every panel of
// output channels for each while its K runs of B are in L1. Called from the target
// functions below (a lambda would not inherit their ISA).
template <int L, int MR, int NV>
ZENITH_UK_INLINE void direct_tiles(const DirectJob& j, int64_t lo, int64_t hi) {
  using Vec = F32Vec<L>;
  using V = typename Vec::V;
  constexpr int NR = NV * L;
  const DepthwiseGeom& g = *j.g;
  const int64_t K = j.K, out_plane = g.OH * g.OW;
  for (int64_t t = lo; t < hi; ++t) {
    const int64_t oh = t / j.col_tiles, ow0 = (t % j.col_tiles) * NR, nr = std::min<int64_t>(NR, g.OW - ow0);
    const float* base = j.img + oh * g.sh * j.lay.pitch + ow0;
    for (int64_t q = 0; q < j.panels; ++q) {
      V acc[MR][NV];
      for (int r = 0; r < MR; ++r)
        for (int v = 0; v < NV; ++v) acc[r][v] = V{};
      const float* a = j.wp + q * K * MR;
      for (int64_t k = 0; k < K; ++k) {
        const float* b = base + j.off[k];
        V bv[NV];
        for (int v = 0; v < NV; ++v) Vec::load(bv[v], b + v * L);
        for (int r = 0; r < MR; ++r)
          for (int v = 0; v < NV; ++v) Vec::fma(acc[r][v], a[k * MR + r], bv[v]);
      }
      const int64_t mr = std::min<int64_t>(MR, j.OC - q * MR);
      float* ct = j.out + q * MR * out_plane + oh * g.OW + ow0;
      if (nr == NR) {
        for (int r = 0; r < mr; ++r)
          for (int v = 0; v < NV; ++v) Vec::store(ct + r * out_plane + v * L, acc[r][v]);
      } else {
        float tile[MR][NR];
        for (int r = 0; r < MR; ++r)
          for (int v = 0; v < NV; ++v) Vec::store(&tile[r][v * L], acc[r][v]);
        for (int r = 0; r < mr; ++r) std::memcpy(ct + r * out_plane, tile[r], size_t(nr) * sizeof(float));
      }
      if (j.ep) sgemm_epilogue_block(*j.ep, ct, out_plane, q * MR, oh * g.OW + ow0, mr, nr);
    }
  }
}

ZENITH_UK_TARGET_avx2 void tiles_avx2(const DirectJob& j, int64_t lo, int64_t hi) { direct_tiles<8, 6, 2>(j, lo, hi); }
#if defined(__x86_64__)
ZENITH_UK_TARGET_avx512 void tiles_avx512(const DirectJob& j, int64_t lo, int64_t hi) {
  direct_tiles<16, 8, 2>(j, lo, hi);
}
#endif

// One image: the copy, the packed filters, then the tiles across the threads.
void direct_image(const DepthwiseGeom& g, int64_t C, int64_t OC, const float* x, const float* w, float* out,
                  const GemmEpilogue* ep) {
  const bool wide = kernels_use_avx512();
  const int64_t MR = wide ? 8 : 6, NR = wide ? 32 : 16;
  const DirectLayout lay(g, NR);
  const int64_t K = C * g.KH * g.KW, panels = (OC + MR - 1) / MR;
  thread_local gemm_detail::AlignedBuf img_buf, w_buf;
  // The copy: zeroed, then x's values at their padded, phase-split places.
  float* img = img_buf.get(size_t(C * lay.plane));
  parallel_for(C * lay.rows, 8, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t c = t / lay.rows, r = t % lay.rows, ih = r - g.ph;
      float* row = img + c * lay.plane + r * lay.pitch;
      std::fill_n(row, lay.pitch, 0.0f);
      if (ih < 0 || ih >= g.H) continue;
      const float* src = x + (c * g.H + ih) * g.W;
      if (g.sw == 1) {
        std::memcpy(row + g.pw, src, size_t(g.W) * sizeof(float));
      } else if (g.sw == 2) {  // even padded columns to phase 0, odd to phase 1
        float* ph0 = row + (g.pw % 2) * lay.phase_len + g.pw / 2;
        float* ph1 = row + ((g.pw + 1) % 2) * lay.phase_len + (g.pw + 1) / 2;
        const int64_t pairs = g.W / 2;
        for (int64_t i = 0; i < pairs; ++i) {
          ph0[i] = src[2 * i];
          ph1[i] = src[2 * i + 1];
        }
        if (g.W % 2) ph0[pairs] = src[g.W - 1];
      } else {
        for (int64_t iw = 0; iw < g.W; ++iw) {
          const int64_t col = iw + g.pw;
          row[(col % g.sw) * lay.phase_len + col / g.sw] = src[iw];
        }
      }
    }
  });
  // The filters, MR output channels at a time, k-major (rows past OC zero), and each
  // tap's offset in the copy.
  float* wp = w_buf.get(size_t(panels * K * MR));
  for (int64_t q = 0; q < panels; ++q)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t r = 0; r < MR; ++r) wp[(q * K + k) * MR + r] = q * MR + r < OC ? w[(q * MR + r) * K + k] : 0.0f;
  std::vector<int64_t> off(static_cast<size_t>(K));
  for (int64_t c = 0, k = 0; c < C; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw, ++k) {
        const int64_t col = kw * g.dw;
        off[size_t(k)] = c * lay.plane + kh * g.dh * lay.pitch + (col % g.sw) * lay.phase_len + col / g.sw;
      }
  const DirectJob job{&g, lay, K, OC, panels, (g.OW + NR - 1) / NR, img, wp, off.data(), out, ep};
  void (*tiles)(const DirectJob&, int64_t, int64_t) = tiles_avx2;
#if defined(__x86_64__)
  if (wide) tiles = tiles_avx512;
#endif
  parallel_for(g.OH * job.col_tiles, 1, [&](int64_t lo, int64_t hi) { tiles(job, lo, hi); });
  img_buf.trim(size_t(4) << 20);
}

}  // namespace

bool conv2d_direct_fits(int64_t C, int64_t KH, int64_t KW, int64_t groups) {
  return groups == 1 && C <= 4 && C * KH * KW <= 256;
}

void conv2d_direct(const DepthwiseGeom& g, int64_t C, int64_t OC, const float* x, const float* w, float* out,
                   const GemmEpilogue* ep) {
  ZENITH_CHECK(conv2d_direct_fits(C, g.KH, g.KW, 1), "conv2d_direct: ", C, " input channels of ", g.KH, "x", g.KW,
               " taps is not a direct conv's shape");
  if (OC == 0 || g.OH * g.OW == 0) return;
  direct_image(g, C, OC, x, w, out, ep && !ep->empty() ? ep : nullptr);
}

}  // namespace zenith
