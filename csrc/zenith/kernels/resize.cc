// upsample2d: [..., H, W] planes resized to [..., OH, OW], nearest, nearest-exact or
// bilinear, with the source indices and weights PyTorch's CPU kernels use (ATen's
// UpSample.h, in float): each output row's and column's taps are computed once per call,
// then rows of output run in parallel, each reading its one or two source rows.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"

namespace zenith {

namespace {
// One output index's source indices and weights (nearest: i1 == i0, l1 = 0, unused).
struct Tap {
  int64_t i0, i1;
  float l0, l1;
};

// 1 / scale where the caller gave a positive scale factor, else in / out (compute_scales_value).
float inverse_scale(std::optional<double> scale, int64_t in, int64_t out) {
  return scale && *scale > 0 ? float(1.0 / *scale) : float(in) / float(out);
}

std::vector<Tap> taps(Resize mode, bool align_corners, std::optional<double> scale, int64_t in, int64_t out) {
  std::vector<Tap> t(static_cast<size_t>(out));
  if (mode == Resize::kNearest || mode == Resize::kNearestExact) {
    // nearest keeps its two special cases (nearest_idx): the same size copies, twice the
    // size halves the index, whatever the scale factor said
    const float s = inverse_scale(scale, in, out);
    for (int64_t o = 0; o < out; ++o) {
      int64_t i;
      if (mode == Resize::kNearest && (out == in || out == 2 * in))
        i = out == in ? o : o >> 1;
      else
        i = std::min(int64_t(std::floor(mode == Resize::kNearest ? float(o) * s : float((double(o) + 0.5) * double(s)))),
                     in - 1);
      t[size_t(o)] = {i, i, 1.0f, 0.0f};
    }
    return t;
  }
  // bilinear (area_pixel_compute_scale, area_pixel_compute_source_index, guard_index_and_lambda)
  const float s = align_corners ? (out > 1 ? float(in - 1) / float(out - 1) : 0.0f) : inverse_scale(scale, in, out);
  for (int64_t o = 0; o < out; ++o) {
    if (in == out) {
      t[size_t(o)] = {o, o, 1.0f, 0.0f};
      continue;
    }
    // one rounding, as ATen's build contracts scale * (o + 0.5) - 0.5 into an FMA
    float src = align_corners ? s * float(o) : std::fma(s, float(o) + 0.5f, -0.5f);
    if (!align_corners && src < 0.0f) src = 0.0f;
    const int64_t i0 = std::min(int64_t(std::floor(src)), in - 1);
    const float l1 = std::min(std::max(src - float(i0), 0.0f), 1.0f);
    t[size_t(o)] = {i0, i0 + (i0 < in - 1 ? 1 : 0), 1.0f - l1, l1};
  }
  return t;
}
}  // namespace

void run_upsample2d(const KernelCtx& c) {
  const auto& a = c.a<attrs::upsample2d>();
  const TensorRef& x = c.in[0];
  TensorRef& o = c.out[0];
  const int r = x.rank();
  const int64_t H = x.shape[size_t(r - 2)], W = x.shape[size_t(r - 1)];
  const int64_t OH = o.shape[size_t(r - 2)], OW = o.shape[size_t(r - 1)];
  if (o.numel() == 0) return;
  ZENITH_CHECK(H > 0 && W > 0, "upsample2d: an empty input plane cannot be resized to ", OH, " x ", OW);
  const int64_t planes = x.numel() / (H * W);
  const std::vector<Tap> rows = taps(a.mode, a.align_corners, a.scale_h, H, OH);
  const std::vector<Tap> cols = taps(a.mode, a.align_corners, a.scale_w, W, OW);
  const float* xp = x.as<float>();
  float* op = o.as<float>();
  const bool nearest = a.mode != Resize::kBilinear;
  parallel_for(planes * OH, std::max<int64_t>(1, 4096 / std::max<int64_t>(OW, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) {
      const int64_t p = j / OH, oh = j % OH;
      const Tap& th = rows[size_t(oh)];
      const float* r0 = xp + (p * H + th.i0) * W;
      float* out = op + j * OW;
      if (nearest) {
        for (int64_t ow = 0; ow < OW; ++ow) out[ow] = r0[cols[size_t(ow)].i0];
        continue;
      }
      const float* r1 = xp + (p * H + th.i1) * W;
      // in the order of ATen's generic Interpolate<2> (each source row across, then down);
      // its other CPU paths agree to rounding
      for (int64_t ow = 0; ow < OW; ++ow) {
        const Tap& tw = cols[size_t(ow)];
        const float t0 = r0[tw.i0] * tw.l0 + r0[tw.i1] * tw.l1;
        const float t1 = r1[tw.i0] * tw.l0 + r1[tw.i1] * tw.l1;
        out[ow] = t0 * th.l0 + t1 * th.l1;
      }
    }
  });
}

}  // namespace zenith
