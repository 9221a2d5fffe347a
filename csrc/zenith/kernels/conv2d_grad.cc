// The two halves of a convolution's backward: the gradient of its input
// (conv2d_input_grad: op conv_transpose2d, which is also ConvTranspose2d's forward) and
// of its filters (conv2d_weight_grad). Both are written in the forward conv's terms
// (ConvGradGeom): its input [N, C, H, W], its output gradient [N, OC, OH, OW], its
// filters [OC, C / G, KH, KW].
//
// The input gradient scatters: each output pixel's gradient, times the filters, lands on
// the KH x KW window of input pixels it read. Per chunk of images and group one GEMM
// makes the columns col = W_g^T gy_g ([C/G * KH * KW, pixels]: what each tap sends to
// each input pixel), then col2im adds each column row into the input plane it lands
// on, a thread per plane. Stride-1 input gradients on maps of 100+ pixels (and 1x1
// ones) do not come here: the importer gives them to conv2d as a convolution with the
// filters flipped (flip_filters), where Winograd and the packed GEMMs run them.
// The filters' gradient gathers: dW_g = gy_g B, B the output pixels by the filter taps
// built panel by panel from a padded copy of the input: channels last where a group has
// 16+ channels (ChannelsLastInput; B's columns tap-major, so a panel's row is a run of
// channels, and the sums are reordered into the filters' layout after), else
// phase-split (PhasedInput; runs along output rows, transposed). One GEMM per group over
// the batch's pixels, or on maps of 512+ pixels one per image, the images split across
// threads (sum_images). ZENITH_WGRAD_CL=0 takes the phase-split copy everywhere and
// ZENITH_WGRAD_SPLIT=0 splits each image's GEMM across threads instead (both read per
// call, for A/B measurements).
// Depthwise convs (one input and one output channel per group) run directly, plane by
// plane, row by row, or on rows under 20 columns 16 channels at a time in the vector
// lanes (DepthwiseLanes); a GEMM per channel would be 1-row GEMMs.
// ref_conv2d_input_grad and ref_conv2d_weight_grad are the scalar references: each
// term of the definition in turn, summed in double.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "zenith/error.h"
#include "zenith/kernels/gemm_internal.h"
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"

namespace zenith {

using gemm_detail::AlignedBuf;

namespace {
// The columns t in [*lo, *hi) of a run whose t-th value sits at off + t * s lie in
// [0, n) (t < len).
void span_inside(int64_t off, int64_t s, int64_t len, int64_t n, int64_t* lo, int64_t* hi) {
  *lo = off >= 0 ? 0 : std::min(len, (-off + s - 1) / s);
  *hi = std::max(*lo, std::min(len, n - off > 0 ? (n - off + s - 1) / s : 0));
}

// dst[off + t * s] += a * src[t] over the t that land inside [0, n) (pointers formed
// from the first of them: none before the row).
inline void scatter_row(float* dst, int64_t n, int64_t off, int64_t s, const float* src, int64_t len, float a) {
  int64_t lo, hi;
  span_inside(off, s, len, n, &lo, &hi);
  if (hi <= lo) return;
  float* d = dst + off + lo * s;
  const float* v = src + lo;
  const int64_t m = hi - lo;
  if (s == 1)
    for (int64_t t = 0; t < m; ++t) d[t] += a * v[t];
  else if (s == 2)  // a constant stride: the loop vectorizes
    for (int64_t t = 0; t < m; ++t) d[2 * t] += a * v[t];
  else
    for (int64_t t = 0; t < m; ++t) d[t * s] += a * v[t];
}

void fill_planes(float* dst, const float* bias, int64_t c0, int64_t nch, int64_t plane) {
  for (int64_t c = 0; c < nch; ++c) std::fill_n(dst + c * plane, plane, bias ? bias[c0 + c] : 0.0f);
}

void depthwise_input_grad(const ConvGradGeom& g, const float* gy, const float* w, const float* bias, float* dx) {
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW, taps = g.KH * g.KW;
  parallel_for(g.N * g.C, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t nc = lo; nc < hi; ++nc) {
      const int64_t c = nc % g.C;
      float* plane = dx + nc * HW;
      fill_planes(plane, bias, c, 1, HW);
      const float* src = gy + nc * OHW;
      for (int64_t ky = 0; ky < g.KH; ++ky)
        for (int64_t kx = 0; kx < g.KW; ++kx) {
          const float a = w[c * taps + ky * g.KW + kx];
          for (int64_t oy = 0; oy < g.OH; ++oy) {
            const int64_t iy = oy * g.sh - g.ph + ky * g.dh;
            if (iy < 0 || iy >= g.H) continue;
            scatter_row(plane + iy * g.W, g.W, kx * g.dw - g.pw, g.sw, src + oy * g.OW, g.OW, a);
          }
        }
    }
  });
}

void depthwise_weight_grad(const ConvGradGeom& g, const float* gy, const float* x, float* dw) {
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW, taps = g.KH * g.KW;
  parallel_for(g.C, 1, [&](int64_t lo, int64_t hi) {
    // Per tap, one running sum per output column: the products along a row add
    // lane-wise (the loop vectorizes), summed across once at the end.
    std::vector<float> acc(size_t(g.OW));
    for (int64_t c = lo; c < hi; ++c)
      for (int64_t ky = 0; ky < g.KH; ++ky)
        for (int64_t kx = 0; kx < g.KW; ++kx) {
          std::fill(acc.begin(), acc.end(), 0.0f);
          const int64_t off = kx * g.dw - g.pw;
          int64_t t0, t1;
          span_inside(off, g.sw, g.OW, g.W, &t0, &t1);
          for (int64_t n = 0; n < g.N; ++n) {
            const float* xp = x + (n * g.C + c) * HW;
            const float* gp = gy + (n * g.C + c) * OHW;
            for (int64_t oy = 0; oy < g.OH; ++oy) {
              const int64_t iy = oy * g.sh - g.ph + ky * g.dh;
              if (iy < 0 || iy >= g.H) continue;
              if (t1 <= t0) continue;
              // from the first column inside: xr[t] is column off + (t0 + t) * sw
              const float* xr = xp + iy * g.W + off + t0 * g.sw;
              const float* gr = gp + oy * g.OW + t0;
              float* a = acc.data() + t0;
              const int64_t m = t1 - t0;
              if (g.sw == 1)
                for (int64_t t = 0; t < m; ++t) a[t] += gr[t] * xr[t];
              else if (g.sw == 2)
                for (int64_t t = 0; t < m; ++t) a[t] += gr[t] * xr[2 * t];
              else
                for (int64_t t = 0; t < m; ++t) a[t] += gr[t] * xr[t * g.sw];
            }
          }
          double s = 0;
          for (float v : acc) s += v;
          dw[c * taps + ky * g.KW + kx] = float(s);
        }
  });
}
// Depthwise convs whose output rows are narrower than kLaneRows columns (MobileNet V2's
// 14 x 14, 7 x 7 and 4 x 4 maps at 224 px) run a group of kDwLanes channels at a time with the
// channels in the vector lanes, as conv2d's depthwise_channels does forward: each image's
// planes of the group transposed into pixel-major buffers (the input zero-padded), then
// each tap is one multiply-add per pixel for the whole group, whatever the stride and
// dilation. The loops above spent their time on rows of 4 to 14 values. Zen 4, 2
// threads, batch 8, lanes / rows, the filters' and the input's gradient: 576 channels on
// 7 x 7 0.19 / ~1.0 and 0.21 / ~1.0 ms (PyTorch 0.14 and 0.18), 192 on 14 x 14 0.21 /
// 0.55 and 0.26 / 0.62; 28-wide rows about even (144 on 28 x 28) or slower (stride 2
// from 56 x 56: 1.5x and 1.15x), 56 and 112 wide 1.3-2x slower.
constexpr int64_t kLaneRows = 20;
constexpr int kDwLanes = 16;

struct DepthwiseLanes {
  const ConvGradGeom& g;
  int64_t Hp, Wp, HW, OHW;
  explicit DepthwiseLanes(const ConvGradGeom& geom)
      : g(geom), Hp(geom.H + 2 * geom.ph), Wp(geom.W + 2 * geom.pw), HW(geom.H * geom.W), OHW(geom.OH * geom.OW) {}
  // Where input pixel (iy, ix) sits in the padded pixel-major buffer (in lanes' units).
  int64_t at(int64_t iy, int64_t ix) const { return ((iy + g.ph) * Wp + ix + g.pw) * kDwLanes; }
  // Channels [c0, c0 + nc) of image n's gradient planes into dst [pixel][kDwLanes], lanes
  // past nc zero: one block of the blocked layout.
  void gather_gy(const float* gy, int64_t n, int64_t c0, int64_t nc, float* dst) const {
    nchw_to_nchwc(gy + (n * g.C + c0) * OHW, 1, nc, OHW, kDwLanes, dst);
  }
  // The same channels of image n's input, zero-padded: a register transpose per row.
  void gather_x(const float* x, int64_t n, int64_t c0, int64_t nc, float* dst) const {
    std::fill_n(dst, Hp * Wp * kDwLanes, 0.0f);
    const float* src = x + (n * g.C + c0) * HW;
    for (int64_t iy = 0; iy < g.H; ++iy)
      gemm_detail::transpose_block(src + iy * g.W, HW, dst + at(iy, 0), kDwLanes, nc, g.W);
  }
  // The padded-buffer offset of output pixel (oy, 0)'s tap (ky, kx).
  int64_t tap(int64_t oy, int64_t ky, int64_t kx) const {
    return ((oy * g.sh + ky * g.dh) * Wp + kx * g.dw) * kDwLanes;
  }
};

void depthwise_weight_grad_lanes(const ConvGradGeom& g, const float* gy, const float* x, float* dw) {
  constexpr int L = kDwLanes;
  const int64_t taps = g.KH * g.KW, groups = (g.C + L - 1) / L, xs = g.sw * L;
  const DepthwiseLanes D(g);
  parallel_for(groups, 1, [&](int64_t lo, int64_t hi) {
    thread_local AlignedBuf buf;
    float* xt = buf.get(size_t((D.Hp * D.Wp + D.OHW + taps) * L));
    float* gt = xt + D.Hp * D.Wp * L;
    float* acc = gt + D.OHW * L;  // [taps][L]
    for (int64_t grp = lo; grp < hi; ++grp) {
      const int64_t c0 = grp * L, nc = std::min<int64_t>(L, g.C - c0);
      std::fill_n(acc, taps * L, 0.0f);
      for (int64_t n = 0; n < g.N; ++n) {
        D.gather_x(x, n, c0, nc, xt);
        D.gather_gy(gy, n, c0, nc, gt);
        for (int64_t ky = 0; ky < g.KH; ++ky)
          for (int64_t kx = 0; kx < g.KW; ++kx) {
            float a[L] = {};  // (in registers)
            for (int64_t oy = 0; oy < g.OH; ++oy) {
              const float* xr = xt + D.tap(oy, ky, kx);
              const float* gr = gt + oy * g.OW * L;
              for (int64_t ox = 0; ox < g.OW; ++ox)
                for (int l = 0; l < L; ++l) a[l] += gr[ox * L + l] * xr[ox * xs + l];
            }
            float* at = acc + (ky * g.KW + kx) * L;
            for (int l = 0; l < L; ++l) at[l] += a[l];
          }
      }
      for (int64_t l = 0; l < nc; ++l)
        for (int64_t k = 0; k < taps; ++k) dw[(c0 + l) * taps + k] = acc[k * L + l];
    }
    buf.trim(size_t(1) << 20);
  });
}

void depthwise_input_grad_lanes(const ConvGradGeom& g, const float* gy, const float* w, const float* bias,
                                float* dx) {
  constexpr int L = kDwLanes;
  const int64_t taps = g.KH * g.KW, groups = (g.C + L - 1) / L, xs = g.sw * L;
  const DepthwiseLanes D(g);
  parallel_for(g.N * groups, 1, [&](int64_t lo, int64_t hi) {
    thread_local AlignedBuf buf;
    float* dxt = buf.get(size_t((D.Hp * D.Wp + D.OHW) * L));
    float* gt = dxt + D.Hp * D.Wp * L;
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t n = t / groups, c0 = (t % groups) * L, nc = std::min<int64_t>(L, g.C - c0);
      std::fill_n(dxt, D.Hp * D.Wp * L, 0.0f);
      D.gather_gy(gy, n, c0, nc, gt);
      for (int64_t ky = 0; ky < g.KH; ++ky)
        for (int64_t kx = 0; kx < g.KW; ++kx) {
          float wv[L] = {};
          for (int64_t l = 0; l < nc; ++l) wv[l] = w[(c0 + l) * taps + ky * g.KW + kx];
          for (int64_t oy = 0; oy < g.OH; ++oy) {
            float* dr = dxt + D.tap(oy, ky, kx);
            const float* gr = gt + oy * g.OW * L;
            for (int64_t ox = 0; ox < g.OW; ++ox)
              for (int l = 0; l < L; ++l) dr[ox * xs + l] += gr[ox * L + l] * wv[l];
          }
        }
      float* planes = dx + (n * g.C + c0) * D.HW;
      for (int64_t iy = 0; iy < g.H; ++iy)  // the padded buffer's rows back into the planes
        gemm_detail::transpose_block(dxt + D.at(iy, 0), L, planes + iy * g.W, D.HW, g.W, nc);
      if (bias)
        for (int64_t l = 0; l < nc; ++l) {
          float* plane = planes + l * D.HW;
          for (int64_t i = 0; i < D.HW; ++i) plane[i] += bias[c0 + l];
        }
    }
    buf.trim(size_t(1) << 20);
  });
}
}  // namespace

void conv2d_input_grad(const ConvGradGeom& g, const float* gy, const float* w, const float* bias, float* dx) {
  const int64_t Cg = g.C / g.G, OCg = g.OC / g.G, taps = g.KH * g.KW, HW = g.H * g.W, OHW = g.OH * g.OW;
  if (g.N * g.C * HW == 0) return;
  if (OHW == 0 || g.OC == 0) {
    for (int64_t n = 0; n < g.N; ++n) fill_planes(dx + n * g.C * HW, bias, 0, g.C, HW);
    return;
  }
  if (Cg == 1 && OCg == 1)
    return g.OW < kLaneRows ? depthwise_input_grad_lanes(g, gy, w, bias, dx) : depthwise_input_grad(g, gy, w, bias, dx);
  const int64_t rows = Cg * taps;
  // Images per GEMM: on small maps one image's columns are a narrow GEMM (7 x 7: 49),
  // so a chunk of images runs as one, its gradient planes gathered side by side.
  const int64_t nb = std::max<int64_t>(
      1, std::min({g.N, (512 + OHW - 1) / OHW, (int64_t(8) << 20) / std::max<int64_t>(1, rows * OHW)}));
  thread_local AlignedBuf col_buf, gy_buf;
  for (int64_t n0 = 0; n0 < g.N; n0 += nb) {
    const int64_t nn = std::min(nb, g.N - n0), ld = nn * OHW;
    float* col = col_buf.get(size_t(rows * ld));
    for (int64_t gi = 0; gi < g.G; ++gi) {
      // col (rows x ld) = W_g^T gy_g: A(m, k) = w[(g * OCg + k) * rows + m], B the
      // chunk's gradient planes of this group (in place for one image).
      const float* b = gy + (n0 * g.OC + gi * OCg) * OHW;
      if (nn > 1) {
        float* buf = gy_buf.get(size_t(OCg * ld));
        parallel_for(OCg, 1, [&](int64_t lo, int64_t hi) {
          for (int64_t oc = lo; oc < hi; ++oc)
            for (int64_t i = 0; i < nn; ++i)
              std::memcpy(buf + oc * ld + i * OHW, b + (i * g.OC + oc) * OHW, size_t(OHW) * sizeof(float));
        });
        b = buf;
      }
      sgemm(rows, ld, OCg, 1.0f, w + gi * OCg * rows, 1, rows, b, ld, 1, col, ld, false);
      // col2im: each input plane of the chunk gathers its taps' rows
      parallel_for(nn * Cg, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t ic = lo; ic < hi; ++ic) {
          const int64_t i = ic / Cg, c = ic % Cg;
          float* plane = dx + ((n0 + i) * g.C + gi * Cg + c) * HW;
          fill_planes(plane, bias, gi * Cg + c, 1, HW);
          for (int64_t ky = 0; ky < g.KH; ++ky)
            for (int64_t kx = 0; kx < g.KW; ++kx) {
              const float* row = col + (c * taps + ky * g.KW + kx) * ld + i * OHW;
              for (int64_t oy = 0; oy < g.OH; ++oy) {
                const int64_t iy = oy * g.sh - g.ph + ky * g.dh;
                if (iy < 0 || iy >= g.H) continue;
                scatter_row(plane + iy * g.W, g.W, kx * g.dw - g.pw, g.sw, row + oy * g.OW, g.OW, 1.0f);
              }
            }
        }
      });
    }
  }
  gy_buf.trim(size_t(16) << 20);
  col_buf.trim(size_t(16) << 20);
}

namespace {
// The input of a filters' gradient, copied once per call with its padding and split by
// column phase: plane (image, channel) holds sw phases, phase f the padded columns f,
// f + sw, f + 2 sw, ... as rows of Wq. The value tap (ky, kx) reads for output pixel
// (oy, ox) is then at a pixel's offset plus a tap's, with nothing to clip:
//   pixel: (oy * sh) * Wq + ox          tap: phase (kx * dw) % sw, row ky * dh, column (kx * dw) / sw
// and along an output row the values are contiguous, whatever the stride.
struct PhasedInput {
  int64_t Hp, Wq, sw, plane;  // plane: sw * Hp * Wq floats per (image, channel)
  PhasedInput(const ConvGradGeom& g)
      : Hp(g.H + 2 * g.ph), Wq((g.W + 2 * g.pw + g.sw - 1) / g.sw), sw(g.sw), plane(g.sw * Hp * Wq) {}
  int64_t pixel(int64_t oy, int64_t ox, int64_t sh) const { return oy * sh * Wq + ox; }
  int64_t tap(int64_t c, int64_t ky, int64_t kx, int64_t dh, int64_t dw) const {
    return c * plane + (kx * dw) % sw * Hp * Wq + ky * dh * Wq + kx * dw / sw;
  }
  void build(const ConvGradGeom& g, const float* x, float* dst) const {
    parallel_for(g.N * g.C, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t p = lo; p < hi; ++p) {
        const float* src = x + p * g.H * g.W;
        for (int64_t f = 0; f < sw; ++f)
          for (int64_t y = 0; y < Hp; ++y) {
            float* d = dst + p * plane + (f * Hp + y) * Wq;
            const int64_t iy = y - g.ph;
            if (iy < 0 || iy >= g.H) {
              std::fill_n(d, Wq, 0.0f);
              continue;
            }
            // column q holds input column q * sw + f - pw: inside for q in [lo, hi)
            int64_t q0, q1;
            span_inside(f - g.pw, sw, Wq, g.W, &q0, &q1);
            std::fill_n(d, q0, 0.0f);
            const float* r = src + iy * g.W + f - g.pw;
            if (sw == 1)
              std::memcpy(d + q0, r + q0, size_t(q1 - q0) * sizeof(float));
            else
              for (int64_t q = q0; q < q1; ++q) d[q] = r[q * sw];
            std::fill(d + q1, d + Wq, 0.0f);
          }
      }
    });
  }
};

// B of the filters' gradient GEMM, dW_g = gy_g B (B: the batch's output pixels by the
// filter taps), built panel by panel from the phased input, so the im2col matrix (every
// pixel by every tap, 9x the input for a 3x3 conv) is never written out whole: B(k, j)
// is the input value tap j (input channel, kernel row, kernel column of this group)
// reads for output pixel k (image k / (OH * OW)), 0 in the padding: each tap's kc
// values as runs along output rows (contiguous copies: nothing to clip), then
// transposed into the panel's layout. (Reading value by value along the panel's rows
// instead, at a pixel's offset plus a tap's, took 1.1-1.2x the time on 28 x 28 and
// 14 x 14 maps, the same on smaller ones: in-process on Zen 4.)
struct WeightGradColumns {
  const ConvGradGeom* g;
  const PhasedInput* in;
  const float* xp;  // the group's first channel of image 0 in the phased input
  static void pack(const void* self, int64_t k0, int64_t kc, int64_t n0, int64_t nr, int64_t nr_max, float* dst) {
    const auto& s = *static_cast<const WeightGradColumns*>(self);
    const ConvGradGeom& g = *s.g;
    const PhasedInput& in = *s.in;
    const int64_t OHW = g.OH * g.OW, taps = g.KH * g.KW;
    thread_local std::vector<int64_t> off, toff;
    off.resize(size_t(kc));
    toff.resize(size_t(nr));
    for (int64_t k = 0; k < kc; ++k) {
      const int64_t n = (k0 + k) / OHW, pix = (k0 + k) % OHW;
      off[size_t(k)] = n * g.C * in.plane + in.pixel(pix / g.OW, pix % g.OW, g.sh);
    }
    for (int64_t j = 0; j < nr; ++j) {
      const int64_t r = n0 + j;
      toff[size_t(j)] = in.tap(r / taps, (r / g.KW) % g.KH, r % g.KW, g.dh, g.dw);
    }
    thread_local std::vector<float> tmp;
    tmp.resize(size_t(nr * kc));
    for (int64_t k = 0; k < kc;) {  // runs along one output row each
      const int64_t len = std::min(kc - k, g.OW - (k0 + k) % OHW % g.OW);
      const float* base = s.xp + off[size_t(k)];
      for (int64_t j = 0; j < nr; ++j)
        std::memcpy(tmp.data() + j * kc + k, base + toff[size_t(j)], size_t(len) * sizeof(float));
      k += len;
    }
    gemm_detail::transpose_block(tmp.data(), kc, dst, nr_max, nr, kc);
    if (nr < nr_max)
      for (int64_t k = 0; k < kc; ++k) std::fill_n(dst + k * nr_max + nr, nr_max - nr, 0.0f);
  }
};

// The input of a filters' gradient copied once channels last, with its padding: value
// (image n, padded row y, padded column x, channel c) at ((n * Hp + y) * Wp + x) * C + c.
// Tap (ky, kx) of output pixel (oy, ox) reads the whole run of channels at a pixel's
// offset plus a tap's, whatever the stride, dilation or map size.
struct ChannelsLastInput {
  int64_t Hp, Wp, C;
  explicit ChannelsLastInput(const ConvGradGeom& g) : Hp(g.H + 2 * g.ph), Wp(g.W + 2 * g.pw), C(g.C) {}
  int64_t pixel(const ConvGradGeom& g, int64_t n, int64_t oy, int64_t ox) const {
    return ((n * Hp + oy * g.sh) * Wp + ox * g.sw) * C;
  }
  int64_t tap(const ConvGradGeom& g, int64_t ky, int64_t kx) const { return (ky * g.dh * Wp + kx * g.dw) * C; }
  // Images [0, g.N) of x into dst, a thread per padded row.
  void build(const ConvGradGeom& g, const float* x, float* dst) const {
    parallel_for(g.N * Hp, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t p = lo; p < hi; ++p) {
        float* d = dst + p * Wp * C;
        const int64_t n = p / Hp, iy = p % Hp - g.ph;
        if (iy < 0 || iy >= g.H) {
          std::fill_n(d, Wp * C, 0.0f);
          continue;
        }
        std::fill_n(d, g.pw * C, 0.0f);
        gemm_detail::transpose_block(x + n * C * g.H * g.W + iy * g.W, g.H * g.W, d + g.pw * C, C, C, g.W);
        std::fill(d + (g.pw + g.W) * C, d + Wp * C, 0.0f);
      }
    });
  }
};

// B of the filters' gradient GEMM with its columns tap-major, B(k, tap * Cg + c): the
// value channel c of the group reads at tap for output pixel k. Each row of a panel is
// one or a few runs of channels copied from the channels-last input (one where the
// group's channels fill whole panels): no clipping, no transposes. dW comes out as
// [OCg, taps, Cg] and is reordered to the filters' [OCg, Cg, taps] afterwards.
struct WeightGradTaps {
  const ConvGradGeom* g;
  const ChannelsLastInput* in;
  const float* xh;  // the group's first channel of image 0 in the channels-last input
  int64_t Cg;
  static void pack(const void* self, int64_t k0, int64_t kc, int64_t n0, int64_t nr, int64_t nr_max, float* dst) {
    const auto& s = *static_cast<const WeightGradTaps*>(self);
    const ConvGradGeom& g = *s.g;
    const ChannelsLastInput& in = *s.in;
    struct Run {
      int64_t j, len, off;
    };
    thread_local std::vector<Run> runs;
    runs.clear();
    for (int64_t j = 0; j < nr;) {
      const int64_t col = n0 + j, t = col / s.Cg, c = col % s.Cg, len = std::min(s.Cg - c, nr - j);
      runs.push_back({j, len, in.tap(g, t / g.KW, t % g.KW) + c});
      j += len;
    }
    const int64_t OHW = g.OH * g.OW;
    int64_t n = k0 / OHW, oy = k0 % OHW / g.OW, ox = k0 % g.OW;
    const bool whole = runs.size() == 1 && nr == nr_max;
    const int64_t off0 = runs[0].off;
    for (int64_t k = 0; k < kc; ++k) {
      const float* base = s.xh + in.pixel(g, n, oy, ox);
      float* d = dst + k * nr_max;
      if (whole && nr_max == 32)
        std::memcpy(d, base + off0, 32 * sizeof(float));
      else if (whole && nr_max == 16)
        std::memcpy(d, base + off0, 16 * sizeof(float));
      else {
        for (const Run& r : runs) std::memcpy(d + r.j, base + r.off, size_t(r.len) * sizeof(float));
        std::fill(d + nr, d + nr_max, 0.0f);
      }
      if (++ox == g.OW) {
        ox = 0;
        if (++oy == g.OH) oy = 0, ++n;
      }
    }
  }
};

// dwg[oc * ldw + c * taps + t] = t_major[oc, t, c] (t_major: OCg x taps x Cg).
void taps_to_filters(const float* t_major, int64_t OCg, int64_t Cg, int64_t taps, float* dwg, int64_t ldw) {
  parallel_for(OCg, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t oc = lo; oc < hi; ++oc)
      gemm_detail::transpose_block(t_major + oc * taps * Cg, Cg, dwg + oc * ldw, taps, taps, Cg);
  });
}

// Whether the filters' gradient builds B from the channels-last input (else the phased
// one). Read per call: A/B in one process.
bool wants_channels_last(const ConvGradGeom& g) {
  const char* v = std::getenv("ZENITH_WGRAD_CL");
  if (v && v[0] == '0') return false;
  return g.C / g.G >= 16;
}

// The batch's images split across threads, each thread adding its images' products
// (image(n, sum, first): image n's GEMMs for every group, into `size` floats at sum,
// overwriting them when `first`) into its own sum with single-threaded GEMMs (nested in
// this loop), then the sums added into out. Used on maps of 512+ output pixels, where a
// GEMM per image has K enough: no fork and join per GEMM, and no split of few column
// panels across threads (a ResNet stem's 147 columns are 5 panels of 32, which two
// threads split 3 / 2). Where the images do not share out evenly (under 85% of the
// threads' time busy: 3 images on 2 threads, 9 on 8) or the extra sums would take more
// than kSplitSumBytes, the images go one at a time, each GEMM split across the threads
// (also with ZENITH_WGRAD_SPLIT=0; read per call for A/B measurements, not meant to
// change while another thread runs a gradient).
template <class Image>
void sum_images(int64_t N, int64_t size, float* out, const Image& image) {
  constexpr int64_t kSplitSumBytes = int64_t(32) << 20;
  const char* v = std::getenv("ZENITH_WGRAD_SPLIT");
  const int64_t T = num_threads(), rounds = (N + T - 1) / T;
  const bool split = !(v && v[0] == '0') && T > 1 && N * 100 >= 85 * T * rounds &&
                     (T - 1) * size * int64_t(sizeof(float)) <= kSplitSumBytes;
  const int64_t chunks = split ? std::min(T, N) : 1;
  thread_local AlignedBuf sums_buf;
  float* sums = sums_buf.get(size_t(std::max<int64_t>(chunks - 1, 1) * size));
  parallel_for(chunks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t)
      for (int64_t n = t * N / chunks; n < (t + 1) * N / chunks; ++n)
        image(n, t ? sums + (t - 1) * size : out, n == t * N / chunks);
  });
  if (chunks > 1)
    parallel_for(size, 4096, [&](int64_t lo, int64_t hi) {
      for (int64_t t = 1; t < chunks; ++t)
        for (int64_t i = lo; i < hi; ++i) out[i] += sums[(t - 1) * size + i];
    });
  sums_buf.trim(size_t(16) << 20);
}

// The gradient planes of group gi, [OCg, N * OHW]: read in place for one image, else
// gathered into buf (one pass over gy).
const float* group_planes(const ConvGradGeom& g, const float* gy, int64_t gi, AlignedBuf& buf) {
  const int64_t OCg = g.OC / g.G, OHW = g.OH * g.OW, K = g.N * OHW;
  const float* a = gy + gi * OCg * OHW;
  if (g.N == 1) return a;
  float* d = buf.get(size_t(OCg * K));
  parallel_for(OCg, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t oc = lo; oc < hi; ++oc)
      for (int64_t n = 0; n < g.N; ++n)
        std::memcpy(d + oc * K + n * OHW, a + (n * g.OC + oc) * OHW, size_t(OHW) * sizeof(float));
  });
  return d;
}

// dW with B from the channels-last input, its columns tap-major (WeightGradTaps); with
// taps > 1 the sums are reordered into the filters' layout after (a pass over dW).
void weight_grad_channels_last(const ConvGradGeom& g, const float* gy, const float* x, float* dw) {
  const int64_t Cg = g.C / g.G, OCg = g.OC / g.G, taps = g.KH * g.KW, OHW = g.OH * g.OW;
  const int64_t rows = Cg * taps;
  const ChannelsLastInput in(g);
  thread_local AlignedBuf gy_buf, in_buf, t_buf;
  float* sums = taps > 1 ? t_buf.get(size_t(g.OC * rows)) : dw;  // [G][OCg][rows]
  if (g.N > 1 && OHW >= 512) {
    ConvGradGeom one = g;
    one.N = 1;
    sum_images(g.N, g.OC * rows, sums, [&](int64_t n, float* sum, bool first) {
      thread_local AlignedBuf img_buf;
      float* xh = img_buf.get(size_t(in.Hp * in.Wp * g.C));
      in.build(one, x + n * g.C * g.H * g.W, xh);
      for (int64_t gi = 0; gi < g.G; ++gi) {
        WeightGradTaps src{&g, &in, xh + gi * Cg, Cg};
        sgemm_b_source(OCg, rows, OHW, gy + (n * g.OC + gi * OCg) * OHW, OHW, 1, GemmBSource{WeightGradTaps::pack, &src},
                       sum + gi * OCg * rows, rows, nullptr, nullptr, !first);
      }
      img_buf.trim(size_t(16) << 20);
    });
  } else {
    float* xh = in_buf.get(size_t(g.N * in.Hp * in.Wp * g.C));
    in.build(g, x, xh);
    for (int64_t gi = 0; gi < g.G; ++gi) {
      WeightGradTaps src{&g, &in, xh + gi * Cg, Cg};
      sgemm_b_source(OCg, rows, g.N * OHW, group_planes(g, gy, gi, gy_buf), g.N * OHW, 1,
                     GemmBSource{WeightGradTaps::pack, &src}, sums + gi * OCg * rows, rows);
    }
  }
  if (taps > 1)
    for (int64_t gi = 0; gi < g.G; ++gi) taps_to_filters(sums + gi * OCg * rows, OCg, Cg, taps, dw + gi * OCg * rows, rows);
  for (AlignedBuf* b : {&gy_buf, &in_buf, &t_buf}) b->trim(size_t(16) << 20);
}

// dW with B from the phased input (WeightGradColumns).
void weight_grad_phased(const ConvGradGeom& g, const float* gy, const float* x, float* dw) {
  const int64_t Cg = g.C / g.G, OCg = g.OC / g.G, OHW = g.OH * g.OW, rows = Cg * g.KH * g.KW;
  const PhasedInput in(g);
  thread_local AlignedBuf gy_buf, in_buf;
  if (g.N > 1 && OHW >= 512) {
    ConvGradGeom one = g;
    one.N = 1;
    sum_images(g.N, g.OC * rows, dw, [&](int64_t n, float* sum, bool first) {
      thread_local AlignedBuf img_buf;
      float* xp = img_buf.get(size_t(g.C * in.plane));
      in.build(one, x + n * g.C * g.H * g.W, xp);
      for (int64_t gi = 0; gi < g.G; ++gi) {
        WeightGradColumns src{&g, &in, xp + gi * Cg * in.plane};
        sgemm_b_source(OCg, rows, OHW, gy + (n * g.OC + gi * OCg) * OHW, OHW, 1,
                       GemmBSource{WeightGradColumns::pack, &src}, sum + gi * OCg * rows, rows, nullptr, nullptr,
                       !first);
      }
      img_buf.trim(size_t(16) << 20);
    });
  } else {
    float* xp = in_buf.get(size_t(g.N * g.C * in.plane));
    in.build(g, x, xp);
    for (int64_t gi = 0; gi < g.G; ++gi) {
      WeightGradColumns src{&g, &in, xp + gi * Cg * in.plane};
      sgemm_b_source(OCg, rows, g.N * OHW, group_planes(g, gy, gi, gy_buf), g.N * OHW, 1,
                     GemmBSource{WeightGradColumns::pack, &src}, dw + gi * OCg * rows, rows);
    }
  }
  gy_buf.trim(size_t(16) << 20);
  in_buf.trim(size_t(16) << 20);
}
}  // namespace

void conv2d_weight_grad(const ConvGradGeom& g, const float* gy, const float* x, float* dw) {
  const int64_t Cg = g.C / g.G, OCg = g.OC / g.G, rows = Cg * g.KH * g.KW;
  if (g.OC * rows == 0) return;
  if (g.N * g.OH * g.OW == 0) {
    std::fill_n(dw, g.OC * rows, 0.0f);
    return;
  }
  if (Cg == 1 && OCg == 1)
    return g.OW < kLaneRows ? depthwise_weight_grad_lanes(g, gy, x, dw) : depthwise_weight_grad(g, gy, x, dw);
  // One GEMM per group over the whole batch's pixels (A: the group's gradient planes
  // side by side), or on maps of 512+ pixels one per image, the images split across
  // threads (sum_images), each reading its gradient planes in place.
  if (wants_channels_last(g)) return weight_grad_channels_last(g, gy, x, dw);
  weight_grad_phased(g, gy, x, dw);
}

void ref_conv2d_input_grad(const ConvGradGeom& g, const float* gy, const float* w, const float* bias, float* dx) {
  const int64_t Cg = g.C / g.G, OCg = g.OC / g.G;
  std::vector<double> acc(size_t(g.N * g.C * g.H * g.W), 0.0);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t oc = 0; oc < g.OC; ++oc)
      for (int64_t ci = 0; ci < Cg; ++ci)
        for (int64_t ky = 0; ky < g.KH; ++ky)
          for (int64_t kx = 0; kx < g.KW; ++kx)
            for (int64_t oy = 0; oy < g.OH; ++oy)
              for (int64_t ox = 0; ox < g.OW; ++ox) {
                const int64_t iy = oy * g.sh - g.ph + ky * g.dh, ix = ox * g.sw - g.pw + kx * g.dw;
                if (iy < 0 || iy >= g.H || ix < 0 || ix >= g.W) continue;
                const int64_t c = oc / OCg * Cg + ci;
                acc[size_t(((n * g.C + c) * g.H + iy) * g.W + ix)] +=
                    double(w[((oc * Cg + ci) * g.KH + ky) * g.KW + kx]) *
                    gy[((n * g.OC + oc) * g.OH + oy) * g.OW + ox];
              }
  for (int64_t i = 0; i < int64_t(acc.size()); ++i)
    dx[i] = float(acc[size_t(i)] + (bias ? bias[(i / (g.H * g.W)) % g.C] : 0.0f));
}

void ref_conv2d_weight_grad(const ConvGradGeom& g, const float* gy, const float* x, float* dw) {
  const int64_t Cg = g.C / g.G, OCg = g.OC / g.G;
  for (int64_t oc = 0; oc < g.OC; ++oc)
    for (int64_t ci = 0; ci < Cg; ++ci)
      for (int64_t ky = 0; ky < g.KH; ++ky)
        for (int64_t kx = 0; kx < g.KW; ++kx) {
          double s = 0;
          const int64_t c = oc / OCg * Cg + ci;
          for (int64_t n = 0; n < g.N; ++n)
            for (int64_t oy = 0; oy < g.OH; ++oy)
              for (int64_t ox = 0; ox < g.OW; ++ox) {
                const int64_t iy = oy * g.sh - g.ph + ky * g.dh, ix = ox * g.sw - g.pw + kx * g.dw;
                if (iy < 0 || iy >= g.H || ix < 0 || ix >= g.W) continue;
                s += double(gy[((n * g.OC + oc) * g.OH + oy) * g.OW + ox]) * x[((n * g.C + c) * g.H + iy) * g.W + ix];
              }
          dw[((oc * Cg + ci) * g.KH + ky) * g.KW + kx] = float(s);
        }
}

namespace {
ConvGradGeom grad_geom(const TensorRef& big, const TensorRef& small, int64_t OC, int64_t KH, int64_t KW,
                       const std::array<int64_t, 2>& st, const std::array<int64_t, 2>& pd, const std::array<int64_t, 2>& dl,
                       int64_t groups) {
  return ConvGradGeom{big.shape[0], big.shape[1], big.shape[2], big.shape[3], OC, small.shape[2], small.shape[3],
                      KH, KW, st[0], st[1], pd[0], pd[1], dl[0], dl[1], groups};
}
}  // namespace

void run_conv_transpose2d(const KernelCtx& c) {
  const auto& at = c.a<attrs::conv_transpose2d>();
  const TensorRef &x = c.in[0], &w = c.in[1];
  const ConvGradGeom g = grad_geom(c.out[0], x, x.shape[1], w.shape[2], w.shape[3], at.stride, at.padding,
                                   at.dilation, at.groups);
  conv2d_input_grad(g, x.as<float>(), w.as<float>(), at.has_bias ? c.in[2].as<float>() : nullptr,
                    c.out[0].as<float>());
}

void run_conv2d_weight_grad(const KernelCtx& c) {
  const auto& at = c.a<attrs::conv2d_weight_grad>();
  const TensorRef &gy = c.in[0], &x = c.in[1];
  const ConvGradGeom g = grad_geom(x, gy, gy.shape[1], at.kernel[0], at.kernel[1], at.stride, at.padding,
                                   at.dilation, at.groups);
  conv2d_weight_grad(g, gy.as<float>(), x.as<float>(), c.out[0].as<float>());
}

void run_flip_filters(const KernelCtx& c) {
  // [A, B, KH, KW] in G groups of A -> [G * B, A / G, KH, KW], each filter turned half a
  // turn: out[(g, b), a, ky, kx] = in[(g, a), b, KH - 1 - ky, KW - 1 - kx]. A transpose of
  // KH * KW-value cells, done in tiles of kT x kT cells so that both sides are read and
  // written along their rows.
  const TensorRef& w = c.in[0];
  const int64_t G = c.a<attrs::flip_filters>().groups, A = w.shape[0], B = w.shape[1], taps = w.shape[2] * w.shape[3];
  const int64_t Ag = A / G;
  const size_t es = dtype_size(w.dtype);
  const auto* src = static_cast<const uint8_t*>(w.data);
  auto* dst = static_cast<uint8_t*>(c.out[0].data);
  constexpr int64_t kT = 16;
  const int64_t bt = (B + kT - 1) / kT, at = (Ag + kT - 1) / kT;
  // One cell: taps values reversed (a fixed count for 3x3 and 1x1 filters, unrolled).
  auto tiles = [&](auto cell) {
    parallel_for(G * bt * at, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t tile = lo; tile < hi; ++tile) {
        const int64_t gi = tile / (bt * at), b0 = (tile / at) % bt * kT, a0 = tile % at * kT;
        const int64_t b1 = std::min(B, b0 + kT), a1 = std::min(Ag, a0 + kT);
        for (int64_t b = b0; b < b1; ++b)
          for (int64_t a = a0; a < a1; ++a)
            cell(src + (((gi * Ag + a) * B + b) * taps) * es, dst + (((gi * B + b) * Ag + a) * taps) * es);
      }
    });
  };
  auto reversed = [&](auto n) {
    return [](const uint8_t* s, uint8_t* d) {
      float v[decltype(n)::value];
      std::memcpy(v, s, sizeof(v));
      for (int t = 0; t < decltype(n)::value; ++t) std::memcpy(d + 4 * t, &v[decltype(n)::value - 1 - t], 4);
    };
  };
  if (es == 4 && taps == 9)
    tiles(reversed(std::integral_constant<int, 9>()));
  else if (es == 4 && taps == 1)
    tiles(reversed(std::integral_constant<int, 1>()));
  else
    tiles([&](const uint8_t* s, uint8_t* d) {
      for (int64_t t = 0; t < taps; ++t) std::memcpy(d + t * es, s + (taps - 1 - t) * es, es);
    });
}

}  // namespace zenith
