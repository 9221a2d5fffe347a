// conv2d_pw_dw: a 1x1 convolution and the depthwise convolution that alone reads its
// output (MobileNet V2's expand -> depthwise), computed band of output rows by band;
// with `project`, also the 1x1 convolution that alone reads the depthwise output (the
// block's projection, with its residual add), band by band as well.
//
// Why: the expanded tensor is the largest in the block (MobileNet V2's first one is 96
// channels of 112 x 112: 4.8 MB per image) and was written by the 1x1 conv's GEMM and
// read back by the depthwise conv; at batch 8 that traffic went to memory. Here each
// worker keeps a window of the expanded rows that its band of depthwise output rows
// needs (every channel, a few rows: a few hundred KiB, in L2), computes only the rows
// the window lacks with the 1x1 GEMM (the rows the last band also needed are kept, not
// recomputed), and runs the depthwise plane kernel on the window. The depthwise output
// (as many channels, a quarter or all of the pixels) went to memory the same way, to be
// read back by the projection: with `project` a band of it is written to a second
// buffer beside the window and the projection's GEMM reads it there, writing only the
// block's output (a sixth of the channels or fewer). Each image's output rows are split
// into as many chunks as there are threads left after the images.
//
// The math is the convs' own: sgemm with each 1x1 conv's epilogue (bias, batch-norm,
// activation; the projection's residual), depthwise_plane (or depthwise_channels, on
// rows under 32 columns) with the depthwise conv's; the op tests hold it to PyTorch and
// the kernel tests hold the parts to their scalar references.
// A blocked x ([N, CB, H, W, L]: the blocks layout_nchwc made blocked) goes to
// conv2d_pw_dw_nchwc (conv2d_pw_dw_nchwc.cc), its filters packed the way the blocked
// convs read them: once, when they are constant (prepare_conv2d_pw_dw's WeightPack),
// else here on every call.
#include <algorithm>
#include <cstring>

#include "zenith/kernels/gemm_internal.h"
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"

namespace zenith {

namespace {
// The expanded rows' window aims at this many floats (512 KiB, Zen 2's and 3's whole L2,
// half of Zen 4's and 5's: 256 KiB and 1 MiB measured no different on Zen 5, within noise);
// with a projection, the window and the band of depthwise output share it.
constexpr int64_t kWindowFloats = 128 * 1024;
}  // namespace

int64_t pw_dw_band_rows(bool expand, bool project, int64_t window_row, int64_t out_row, int64_t reach, int64_t stride,
                        int64_t OH) {
  const int64_t budget = project ? kWindowFloats / 2 : kWindowFloats;
  if (!expand) return std::clamp<int64_t>(budget / std::max<int64_t>(1, out_row), 1, OH);
  const int64_t fit = std::max<int64_t>(reach, budget / std::max<int64_t>(1, window_row));
  return std::clamp<int64_t>((fit - reach) / stride + 1, 1, OH);
}

namespace {

// The node's inputs: x, then the expand's filter and its epilogue's, the depthwise
// conv's, the projection's (with `project`), the residual.
struct PwDwInputs {
  size_t dw, pj;  // the depthwise conv's and the projection's filter
  PwDwInputs(const attrs::conv2d_pw_dw& at)
      : dw(!at.expand ? 1 : at.pw_bn_eps ? 7 : 3), pj(dw + (at.bn_eps ? 6 : 2)) {}
};

// What prepare_conv2d_pw_dw chose for a blocked x: the three convs' geometries for
// their filters (the 1x1 convs' as conv2d_nchwc packs them).
struct PwDwBlocked {
  NchwcConvGeom dw, expand, project;
  bool has_expand = false, has_project = false;
};

PwDwBlocked blocked_geometry(const attrs::conv2d_pw_dw& at, const std::vector<TensorRef>& in, const TensorRef& o) {
  const PwDwInputs slots(at);
  const TensorRef &x = in[0], &w2 = in[slots.dw];
  PwDwBlocked b;
  NchwcConvGeom& g = b.dw;
  g.N = x.shape[0], g.H = x.shape[2], g.W = x.shape[3], g.L = x.shape[4];
  g.C = g.OC = g.groups = w2.shape[0], g.KH = w2.shape[2], g.KW = w2.shape[3], g.OH = o.shape[2], g.OW = o.shape[3];
  g.st = at.stride, g.pd = at.padding, g.dl = at.dilation;
  b.expand = b.project = g;  // the 1x1 convs' filters' geometry
  b.expand.groups = b.project.groups = 1;
  b.expand.KH = b.expand.KW = b.project.KH = b.project.KW = 1;
  b.expand.C = at.expand ? in[1].shape[1] : g.C;
  b.project.OC = at.project ? in[slots.pj].shape[0] : g.C;
  b.has_expand = at.expand;
  b.has_project = at.project;
  return b;
}

// The filters packed, in slot order (the expand's if any, the depthwise conv's, the
// projection's if any): src[i] is the i-th one's data.
std::shared_ptr<const PackedOperand> pack_blocked(const void* state, const void* const* src) {
  const auto& b = *static_cast<const PwDwBlocked*>(state);
  const size_t n = 1 + b.has_expand + b.has_project;
  std::shared_ptr<PackedOperand[]> p(new PackedOperand[n]);
  size_t i = 0;
  if (b.has_expand) p[i] = conv2d_nchwc_pack(b.expand, static_cast<const float*>(src[i])), ++i;
  p[i] = depthwise_nchwc_pack(b.dw, static_cast<const float*>(src[i])), ++i;
  if (b.has_project) p[i] = conv2d_nchwc_pack(b.project, static_cast<const float*>(src[i]));
  return std::shared_ptr<const PackedOperand>(p, p.get());
}
}  // namespace

// A blocked x: the filters offered packed (see pack_blocked). NCHW runs sgemm and the
// depthwise plane kernel on the filters as they are.
void prepare_conv2d_pw_dw(const PrepareCtx& c, PreparedOp* p) {
  if (c.in[0].rank() != 5) return;
  const auto& at = c.a<attrs::conv2d_pw_dw>();
  auto s = std::make_shared<PwDwBlocked>(blocked_geometry(at, c.in, c.out[0]));
  const PwDwInputs slots(at);
  WeightPack w;
  if (at.expand) w.slots.push_back(1);
  w.slots.push_back(int(slots.dw));
  if (at.project) w.slots.push_back(int(slots.pj));
  const NchwcConvGeom& g = s->dw;
  w.key = {int64_t(PackedOperand::kNchwcDepthwise), g.C, g.KH, g.KW, g.L, s->expand.C, s->project.OC,
           int64_t(at.expand), int64_t(at.project)};
  w.pack = pack_blocked;
  p->weight = std::move(w);
  p->state = std::move(s);
}

void run_conv2d_pw_dw(const KernelCtx& c) {
  const auto& at = c.a<attrs::conv2d_pw_dw>();
  const TensorRef &x = c.in[0], &w1 = c.in[1];
  TensorRef& o = c.out[0];
  if (o.numel() == 0) return;
  // Without `expand` the node is a depthwise conv and its projection: x is the window.
  const bool expand = at.expand, project = at.project;
  const PwDwInputs slots(at);
  const size_t q = slots.dw, r = slots.pj;  // the depthwise conv's and the projection's first input
  const TensorRef& w2 = c.in[q];
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3], E = w2.shape[0];
  const int64_t KH = w2.shape[2], KW = w2.shape[3], OH = o.shape[2], OW = o.shape[3];
  const int64_t P = project ? c.in[r].shape[0] : E;  // the output's channels
  const int64_t sh = at.stride[0], sw = at.stride[1], ph = at.padding[0], pw = at.padding[1], dh = at.dilation[0],
                dw = at.dilation[1];
  std::vector<float> s1, t1, s2, t2, s3, t3;
  const GemmEpilogue ep1 =
      expand ? conv_channel_epilogue(c.in, 2, at.pw_has_bias, at.pw_bn_eps, at.pw_activation, E, s1, t1)
             : GemmEpilogue{};
  const GemmEpilogue ep2 = conv_channel_epilogue(c.in, q + 1, at.has_bias, at.bn_eps, at.activation, E, s2, t2);
  const GemmEpilogue ep3 = project ? conv_channel_epilogue(c.in, r + 1, at.pj_has_bias, at.pj_bn_eps,
                                                           at.pj_activation, P, s3, t3)
                                   : GemmEpilogue{};
  const float* res = at.has_residual ? c.in.back().as<float>() : nullptr;
  const float *px = x.as<float>(), *pw1 = expand ? w1.as<float>() : nullptr, *pw2 = w2.as<float>();
  const float* pw3 = project ? c.in[r].as<float>() : nullptr;
  float* po = o.as<float>();
  if (x.rank() == 5) {  // blocked [N, CB, H, W, L]: conv2d_pw_dw_nchwc
    const PwDwBlocked& b = c.st<PwDwBlocked>();
    std::shared_ptr<const PackedOperand> own;
    if (!c.packed) {
      std::vector<const void*> src;
      if (expand) src.push_back(pw1);
      src.push_back(pw2);
      if (project) src.push_back(pw3);
      own = pack_blocked(&b, src.data());
    }
    const PackedOperand* packed = c.packed ? c.packed : own.get();
    const PackedOperand* p1 = expand ? packed++ : nullptr;
    const PackedOperand* p2 = packed++;
    const PackedOperand* p3 = project ? packed : nullptr;
    return conv2d_pw_dw_nchwc(b.dw, b.expand.C, P, {p1, ep1.row_scale, ep1.row_shift, ep1.act},
                              {p2, ep2.row_scale, ep2.row_shift, ep2.act}, {p3, ep3.row_scale, ep3.row_shift, ep3.act},
                              px, res, po);
  }

  // Output rows per band (pw_dw_band_rows); the window holds `cap` input rows per channel.
  const int64_t reach = (KH - 1) * dh + 1;
  const int64_t band = pw_dw_band_rows(expand, project, E * W, E * OW, reach, sh, OH);
  const int64_t cap = expand ? (band - 1) * sh + reach : 0;
  // Work items: (image, chunk of output rows).
  const int64_t chunks = std::min(OH, std::max<int64_t>(1, (num_threads() + N - 1) / N));
  parallel_for(N * chunks, 1, [&](int64_t lo, int64_t hi) {
    thread_local gemm_detail::AlignedBuf window, mid;
    float* win = expand ? window.get(size_t(E * cap * W)) : nullptr;
    float* dwo = project ? mid.get(size_t(E * band * OW)) : nullptr;  // a band of depthwise output
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t n = item / chunks, ch = item % chunks;
      const int64_t r_begin = OH * ch / chunks, r_end = OH * (ch + 1) / chunks;
      const float* xn = px + n * C * H * W;
      int64_t w_lo = 0, w_hi = 0;  // the input rows the window holds, at its rows 0..
      for (int64_t b0 = r_begin; b0 < r_end; b0 += band) {
        const int64_t b1 = std::min(r_end, b0 + band);
        const int64_t need_lo = std::clamp<int64_t>(b0 * sh - ph, 0, H);
        const int64_t need_hi = std::clamp<int64_t>((b1 - 1) * sh - ph + reach, need_lo, H);
        if (expand) {
          // Keep the rows of the window this band needs again, at the top.
          int64_t keep_lo = std::max(w_lo, need_lo), keep_hi = std::min(w_hi, need_hi);
          if (keep_hi <= keep_lo) keep_lo = keep_hi = need_lo;
          if (keep_lo > w_lo && keep_hi > keep_lo)
            for (int64_t e = 0; e < E; ++e)
              std::memmove(win + e * cap * W, win + (e * cap + keep_lo - w_lo) * W,
                           size_t((keep_hi - keep_lo) * W) * sizeof(float));
          // The 1x1 conv of the rows the window lacks (window rows keep_hi - need_lo ..).
          if (need_hi > keep_hi)
            sgemm(E, (need_hi - keep_hi) * W, C, 1.0f, pw1, C, 1, xn + keep_hi * W, H * W, 1,
                  win + (keep_hi - need_lo) * W, cap * W, false, nullptr, &ep1);
          w_lo = need_lo;
          w_hi = need_hi;
        }
        // The depthwise conv of the band: its windows start at input row b0 * sh - ph,
        // which is window row b0 * sh - ph - need_lo (negative: that much padding left);
        // without an expand it reads x's rows need_lo.. in place. Into the output, or,
        // with a projection, into dwo: channel e's rows at e * pixels, the projection
        // GEMM's B.
        const DepthwiseGeom g{need_hi - need_lo, W, KH, KW, b1 - b0, OW, sh, sw, need_lo - (b0 * sh - ph), pw,
                              dh,                dw};
        const int64_t pixels = (b1 - b0) * OW;
        const float* dw_in = expand ? win : xn + need_lo * W;
        const int64_t in_stride = expand ? cap * W : H * W;
        float* dw_out = project ? dwo : po + (n * E * OH + b0) * OW;
        const int64_t out_stride = project ? pixels : OH * OW;
        // Output rows under 32 columns: a group of channels at a time, as conv2d's
        // kDepthwiseGroups (MobileNet V2 end to end, in-process A/B on Zen 4, 2 threads:
        // 0.97-0.99x the time per plane at batch 1 and 8 on both paths, near the noise).
        if (OW < 32) {
          const int64_t L = depthwise_channel_lanes();
          for (int64_t e = 0; e < E; e += L)
            depthwise_channels(g, dw_in + e * in_stride, in_stride, pw2 + e * KH * KW, dw_out + e * out_stride,
                               out_stride, std::min(L, E - e), &ep2, e);
        } else {
          for (int64_t e = 0; e < E; ++e)
            depthwise_plane(g, dw_in + e * in_stride, pw2 + e * KH * KW, dw_out + e * out_stride, &ep2, e);
        }
        if (!project) continue;
        // The projection of the band: output rows b0..b1 of every channel of image n
        // (C's rows OH * OW apart), the residual's the same.
        GemmEpilogue e3 = ep3;
        if (res) {
          e3.residual = res + (n * P * OH + b0) * OW;
          e3.ld_residual = OH * OW;
        }
        sgemm(P, pixels, E, 1.0f, pw3, E, 1, dwo, pixels, 1, po + (n * P * OH + b0) * OW, OH * OW, false, nullptr,
              &e3);
      }
    }
    mid.trim(size_t(4) << 20);
    window.trim(size_t(4) << 20);
  });
}

}  // namespace zenith
