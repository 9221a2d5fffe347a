// conv2d: an implicit GEMM per image and group against the filters (gemm.cc's sgemm),
// Winograd for 3x3 stride-1 convs with enough channels (over the blocked layout where
// the channels are whole blocks, conv2d_nchwc.cc; else F(2x2, 3x3) in NCHW, winograd.cc), a
// direct loop for depthwise convs, per plane or per group of channels (depthwise.cc),
// and a direct conv for few input channels (conv2d_direct.cc). prepare_conv2d chooses the algorithm
// once per plan and says how it wants constant filters packed; run_conv2d executes that
// choice. The GEMM paths are held to ref_sgemm through the GEMM and to PyTorch by the
// op tests.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "zenith/error.h"
#include "zenith/kernels/activation.h"
#include "zenith/kernels/gemm_internal.h"
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/quant.h"
#include "zenith/threadpool.h"

namespace zenith {

using gemm_detail::AlignedBuf;
using gemm_detail::transpose_block;

namespace {
// dst[t] = the image's (ih, iw + t * sw) for t < len, 0 outside the image (the
// padding): one row of im2col columns, a strided copy of one image row clipped at the
// edges.
void image_row_strided(const float* plane, int64_t H, int64_t W, int64_t ih, int64_t iw, int64_t sw, int64_t len,
                       float* dst) {
  if (ih < 0 || ih >= H) {
    std::fill_n(dst, len, 0.0f);
    return;
  }
  // Columns t in [lo, hi) read the image (0 <= iw + t * sw < W).
  const int64_t lo = iw >= 0 ? 0 : std::min(len, (-iw + sw - 1) / sw);
  const int64_t hi = std::max(lo, std::min(len, W - iw > 0 ? (W - iw + sw - 1) / sw : 0));
  std::fill_n(dst, lo, 0.0f);
  if (hi > lo) {
    const float* src = plane + ih * W + iw + lo * sw;  // column t reads src[(t - lo) * sw]
    float* d = dst + lo;
    const int64_t n = hi - lo;
    if (sw == 1)
      std::memcpy(d, src, size_t(n) * sizeof(float));
    else if (sw == 2)  // a constant stride: the loop vectorizes
      for (int64_t t = 0; t < n; ++t) d[t] = src[2 * t];
    else
      for (int64_t t = 0; t < n; ++t) d[t] = src[t * sw];
  }
  std::fill_n(dst + hi, len - hi, 0.0f);
}

// The im2col matrix of one image and group, or of a batch's images side by side
// (rows: input channel, kernel row, kernel column; columns: output pixels) as a
// GemmBSource: the driver asks for one packed
// panel at a time and gets it built from the image, so the matrix is never written out
// whole (at 56 x 56 with 64 channels it is 7 MiB, read back once more to be packed).
struct ConvColumns {
  const float* x;  // the (first) image's first channel of this group
  int64_t H, W, KH, KW, OW, sh, sw, ph, pw, dh, dw;
  // Several images side by side (the batched columns): column j is pixel j % cols of
  // image j / cols, which starts image_stride floats after the one before.
  int64_t cols = 0, image_stride = 0;

  static void pack(const void* self, int64_t k0, int64_t kc, int64_t n0, int64_t nr, int64_t nr_max, float* dst) {
    const auto& g = *static_cast<const ConvColumns*>(self);
    // The panel's columns as runs along one output row each: run r covers columns
    // [j0[r], j0[r + 1]) of the panel, whose windows start at image row ih0[r] and
    // columns iw0[r], iw0[r] + sw, ... So a row of the panel is, per run, a strided
    // copy of one image row, clipped at the image's edges (zeros: the padding).
    ZENITH_CHECK(nr_max <= 64, "conv2d: panel wider than 64 columns");
    int64_t j0[65], ih0[64], iw0[64], runs = 0;
    const float* img[64];
    for (int64_t j = 0; j < nr;) {
      const int64_t col = g.cols ? (n0 + j) % g.cols : n0 + j;
      int64_t oh = col / g.OW, ow = col % g.OW;
      img[runs] = g.cols ? g.x + (n0 + j) / g.cols * g.image_stride : g.x;
      j0[runs] = j;
      ih0[runs] = oh * g.sh - g.ph;
      iw0[runs] = ow * g.sw - g.pw;
      ++runs;
      j += std::min(nr - j, g.OW - ow);
    }
    j0[runs] = nr;
    int64_t ic = k0 / (g.KH * g.KW), kh = (k0 / g.KW) % g.KH, kw = k0 % g.KW;
    for (int64_t k = 0; k < kc; ++k) {
      float* d = dst + k * nr_max;
      const int64_t plane_off = ic * g.H * g.W;
      for (int64_t r = 0; r < runs; ++r) {
        const float* plane = img[r] + plane_off;
        int64_t ih = ih0[r] + kh * g.dh, iw = iw0[r] + kw * g.dw, len = j0[r + 1] - j0[r];
        float* dr = d + j0[r];
        image_row_strided(plane, g.H, g.W, ih, iw, g.sw, len, dr);
      }
      std::fill_n(d + nr, nr_max - nr, 0.0f);
      if (++kw == g.KW) {
        kw = 0;
        if (++kh == g.KH) {
          kh = 0;
          ++ic;
        }
      }
    }
  }
};
}  // namespace

namespace {
// What prepare_conv2d chose for one set of shapes.
struct ConvState {
  enum Algo : uint8_t {
    kDepthwise,        // one input channel per output channel: depthwise_plane per plane
    kDepthwiseGroups,  // the same on small maps: depthwise_channels per group of channels
    kWinograd,         // conv3x3_winograd per image; constant filters kept transformed
    kBatchedColumns,   // small maps of a batch: one GEMM over every image's im2col columns
    kPixelRows,        // one image, C^T = columns^T W^T: pixels as the micro-kernel's rows
                       // (with the filters packed as B; without, kPerImage runs)
    kPerImage,         // a GEMM per image and group, B built panel by panel or in memory
    kInt8,             // an int8 weight: conv2d_int8 (conv2d_int8.cc)
    kDirect,           // few input channels (stems): conv2d_direct per image (conv2d_direct.cc)
    kNchwcWinograd,    // Winograd over the blocked layout (conv3x3_winograd_nchwc), the
                       // image and output converted: channels in whole blocks
  } algo = kPerImage;
  // The algorithm where the filters arrive unpacked (not constant: a training step's) and
  // a Winograd algo would transform them for too few tiles (conv2d_winograd_per_call).
  Algo unpacked = kPerImage;
  NchwcConvGeom ng;  // kNchwcWinograd: its geometry (F(2x2))
  QIsa isa = QIsa::kScalar;  // kInt8: the int8 GEMM's instruction set
  int64_t N, C, H, W, OC, ICg, KH, KW, OH, OW, G, OCg;
  int64_t rows, cols;  // the GEMM's depth (ICg * KH * KW) and output pixels per image
  bool pointwise;      // 1x1, stride 1, no padding: the image is B as it is
  std::array<int64_t, 2> st, pd, dl;
};

Conv2dInt8Geom int8_geom(const ConvState& s) {
  return Conv2dInt8Geom{s.N, s.C, s.H, s.W, s.OC, s.KH, s.KW, s.OH, s.OW, s.st, s.pd, s.dl};
}

// The packed form each algorithm reads (per image and batched columns both read A).
PackedOperand::Side packed_form(ConvState::Algo a) {
  return a == ConvState::kWinograd ? PackedOperand::kWinograd : a == ConvState::kPixelRows ? PackedOperand::kB
                                                                                           : PackedOperand::kA;
}

// The filters packed as `algo` reads them.
std::shared_ptr<const PackedOperand> pack_for(const ConvState& s, ConvState::Algo algo, const void* src) {
  if (algo == ConvState::kInt8)
    return std::make_shared<const PackedOperand>(
        conv2d_int8_pack(int8_geom(s), static_cast<const uint8_t*>(src), s.isa));
  const float* w = static_cast<const float*>(src);
  switch (algo) {
    case ConvState::kNchwcWinograd:
      return std::make_shared<const PackedOperand>(conv3x3_winograd_nchwc_pack(s.ng, w, 2));
    case ConvState::kWinograd: return std::make_shared<const PackedOperand>(conv3x3_winograd_pack(s.OC, s.C, w));
    case ConvState::kPixelRows:  // B = W^T: rows x OC
      return std::make_shared<const PackedOperand>(sgemm_pack_b(s.rows, s.OC, w, 1, s.rows));
    default: return std::make_shared<const PackedOperand>(sgemm_pack_a(s.OC, s.rows, w, s.rows, 1));
  }
}

std::shared_ptr<const PackedOperand> pack_filters(const void* state, const void* const* srcs) {
  const auto& s = *static_cast<const ConvState*>(state);
  return pack_for(s, s.algo, srcs[0]);
}
}  // namespace

GemmEpilogue conv_channel_epilogue(const std::vector<TensorRef>& in, size_t bias_slot, bool has_bias,
                                   const std::optional<double>& bn_eps, Activation act, int64_t channels,
                                   std::vector<float>& scale, std::vector<float>& shift) {
  GemmEpilogue ep;
  ep.act = act;
  const float* pb = has_bias ? in[bias_slot].as<float>() : nullptr;
  if (!bn_eps) {
    ep.row_shift = pb;
    return ep;
  }
  const float eps = float(*bn_eps);
  const float *bw = in[bias_slot + 1].as<float>(), *bb = in[bias_slot + 2].as<float>(),
              *mu = in[bias_slot + 3].as<float>(), *var = in[bias_slot + 4].as<float>();
  scale.resize(size_t(channels));
  shift.resize(size_t(channels));
  for (int64_t ch = 0; ch < channels; ++ch) {
    float& t = shift[size_t(ch)];
    batch_norm_affine(bw[ch], bb[ch], mu[ch], var[ch], eps, &scale[size_t(ch)], &t);
    if (pb) t += pb[ch] * scale[size_t(ch)];
  }
  ep.row_scale = scale.data();
  ep.row_shift = shift.data();
  return ep;
}

namespace {
// Winograd transforms unpacked filters for a call of this many F(2x2) tiles or more: the
// transform costs per channel pair what a few hundred products do. Zen 4, 2 threads, a
// 3x3 conv with its filters an input, its time over PyTorch's by Winograd / by the GEMM:
// 512 channels on 7 x 7 at batch 8 (128 tiles) 1.44 / 1.51, batch 4 1.94 / 1.18, batch
// 1 4.9 / 1.43; 256 on 14 x 14 at batch 8 0.93 / 1.29, batch 2 (98 tiles) 1.35 / 1.29;
// 128 on 28 x 28 at batch 1 (196 tiles) 1.02 / 1.48 (docs/benchmarks, 2026-12-07).
constexpr int64_t kWinogradPerCallTiles = 128;

// The algorithm for ConvState's shapes (winograd: whether conv2d_uses_winograd).
ConvState::Algo choose_conv_algo(const ConvState& q, bool winograd) {
  if (q.G == q.C && q.ICg == 1 && q.OCg == 1) {
    // Output rows narrower than 32 columns run a group of channels at a time, vectors
    // across the channels of a pixel: along a 7- or 14-wide row most of a vector is
    // padding. In-process A/B on Zen 4, 2 threads, 3x3 + bn + ReLU6, channels / plane
    // time: 7 x 7 outputs 0.36-0.42x (AVX-512), 0.43-0.59x (AVX2); 14 x 14 0.63-0.67x,
    // 0.84-0.91x; 28 x 28 0.84-0.96x, 0.73-0.88x; 56 x 56 1.1-1.2x.
    // (Planes of at most 128 x 128: a group's buffers are 8 or 16 planes.)
    return q.OW < 32 && q.H * q.W <= 16384 ? ConvState::kDepthwiseGroups : ConvState::kDepthwise;
  }
  if (winograd) {
    // Whole channel blocks run over the blocked layout, converting the image and the
    // output (and a residual): its passes over several images read the transformed
    // filters once a pass where the NCHW Winograd reads them per image, and its
    // transforms are vector code. ZENITH_CONV_NCHWC_WINOGRAD=0 keeps the NCHW one.
    const char* v = std::getenv("ZENITH_CONV_NCHWC_WINOGRAD");  // (read per plan: A/B in one process)
    const bool nchw = v && std::string(v) == "0";
    return !nchw && q.C % q.ng.L == 0 && q.OC % q.ng.L == 0 ? ConvState::kNchwcWinograd : ConvState::kWinograd;
  }
  if (conv2d_direct_fits(q.C, q.KH, q.KW, q.G) && !q.pointwise && q.cols >= 1024) {
    // Stems (3 channels, 7x7 or 3x3, stride 2, on 224 x 224): direct from the image,
    // no im2col columns. In-process A/B on Zen 4, 2 threads, + bn + ReLU, direct / GEMM
    // time: ResNet's 7x7 0.77-0.84x (AVX-512), 0.58-0.67x (AVX2); MobileNets' 3x3
    // 0.84-1.03x, 0.75-0.92x. Fewer than 1024 output pixels keep the GEMM (its one
    // fork and join against the copy's and the tiles': up to 1.25x on 28 x 28).
    return ConvState::kDirect;
  }
  if (q.G == 1 && q.N > 1 && q.cols < 512) {
    // Small feature maps (14 x 14, 7 x 7) of a batch run as one GEMM over every image's
    // columns: a per-image GEMM that narrow wastes panel width and parallelism (256 x 196
    // x 2304: 139 GFLOP/s; 256 x 1568 x 2304: 191). Costs a copy of the output into the
    // (N, OC, OH, OW) layout, and of the input's columns where B is not built from the
    // images (run_conv2d).
    return ConvState::kBatchedColumns;
  }
  return conv2d_pixel_rows(q.N, q.G, q.cols, false) ? ConvState::kPixelRows : ConvState::kPerImage;
}

// Whether `algo` reads its filters packed (pack_for), where they can be packed once.
bool reads_packed(const ConvState& q, ConvState::Algo algo) {
  if (q.G != 1 || algo == ConvState::kDepthwise || algo == ConvState::kDepthwiseGroups || algo == ConvState::kDirect)
    return false;
  if (algo != ConvState::kPerImage && algo != ConvState::kBatchedColumns) return true;
  return sgemm_reads_packed(q.OC, algo == ConvState::kBatchedColumns ? q.N * q.cols : q.cols, 1);
}

}  // namespace

bool conv2d_winograd_per_call(int64_t N, int64_t H, int64_t W) {
  return N * ((H + 1) / 2) * ((W + 1) / 2) >= kWinogradPerCallTiles;
}

void prepare_conv2d(const PrepareCtx& c, PreparedOp* p) {
  const auto& at = c.a<attrs::conv2d>();
  const TensorRef &x = c.in[0], &w = c.in[1], &o = c.out[0];
  auto s = std::make_shared<ConvState>();
  ConvState& q = *s;
  q.N = x.shape[0], q.C = x.shape[1], q.H = x.shape[2], q.W = x.shape[3];
  const bool int8 = w.dtype == DType::u8;
  q.OC = w.shape[0], q.ICg = int8 ? q.C : w.shape[1];
  q.KH = int8 ? at.kernel[0] : w.shape[2], q.KW = int8 ? at.kernel[1] : w.shape[3];
  q.OH = o.shape[2], q.OW = o.shape[3];
  q.G = at.groups;
  q.OCg = q.OC / q.G;
  q.st = at.stride, q.pd = at.padding, q.dl = at.dilation;
  q.rows = q.ICg * q.KH * q.KW;
  q.cols = q.OH * q.OW;
  if (int8) {  // the filters packed for the int8 GEMM (a weight that is not constant: per call)
    q.algo = ConvState::kInt8;
    q.isa = qisa_default();
    p->weight = WeightPack{{1}, {int64_t(PackedOperand::kQ8), q.OC, q.C, q.KH, q.KW, int64_t(q.isa)}, pack_filters};
    p->state = std::move(s);
    return;
  }
  q.pointwise = q.KH == 1 && q.KW == 1 && q.st[0] == 1 && q.st[1] == 1 && q.pd[0] == 0 && q.pd[1] == 0;
  // 3x3 stride-1 same-padding convs on maps of 49+ pixels with enough channels run as
  // Winograd F(2x2, 3x3): 2.25x fewer multiplies; smaller maps waste tiles. (F(2x2) over
  // the blocked layout too: winograd4_pays depends on the batch, and a symbolic batch
  // alternating across its threshold would re-transform constant filters at each
  // change; F(4x4) is for chains of blocked convs, conv2d_nchwc.)
  const bool winograd = conv2d_uses_winograd(q.G, q.KH, q.KW, q.st, q.pd, q.dl, q.C, q.H, q.W, q.OC);
  q.ng.N = q.N, q.ng.C = q.C, q.ng.H = q.H, q.ng.W = q.W, q.ng.OC = q.OC, q.ng.OH = q.OH, q.ng.OW = q.OW;
  q.ng.KH = q.KH, q.ng.KW = q.KW, q.ng.L = nchwc_block(), q.ng.st = q.st, q.ng.pd = q.pd, q.ng.dl = q.dl;
  q.algo = choose_conv_algo(q, winograd);
  q.unpacked = choose_conv_algo(q, false);
  // Constant filters, kept packed in the form the chosen path reads: transformed
  // (Winograd; over the blocked layout keyed as conv2d_nchwc keys the same layout), as B
  // (pixels as rows), or as the GEMM's A where the blocked driver would pack A on every
  // call. Grouped and depthwise convs read their filters in place.
  if (reads_packed(q, q.algo) && w.dtype == DType::f32 && o.dtype == DType::f32)
    p->weight = q.algo == ConvState::kNchwcWinograd
                    ? WeightPack{{1}, {int64_t(PackedOperand::kWinograd), q.OC, q.C, 9, q.ng.L}, pack_filters}
                    : WeightPack{{1}, {int64_t(packed_form(q.algo)), q.OC, q.C, q.rows}, pack_filters};
  p->state = std::move(s);
}

void run_conv2d(const KernelCtx& c) {
  const TensorRef &x = c.in[0], &w = c.in[1];
  TensorRef& o = c.out[0];
  if (o.numel() == 0) return;
  const auto& at = c.a<attrs::conv2d>();
  const ConvState& q = c.st<ConvState>();
  if (q.algo == ConvState::kInt8) {
    std::shared_ptr<const PackedOperand> own;
    if (!c.packed) own = pack_filters(&q, &w.data);
    std::vector<float> bn_scale, shift;
    const GemmEpilogue ep =
        conv_channel_epilogue(c.in, 2, at.has_bias, at.bn_eps, at.activation, q.OC, bn_scale, shift);
    conv2d_int8(int8_geom(q), q.isa, x.as<float>(), c.packed ? *c.packed : *own,
                at.x_scale ? std::optional<float>(float(*at.x_scale)) : std::nullopt, ep,
                at.has_residual ? c.in.back().as<float>() : nullptr, o.as<float>());
    return;
  }
  // Filters that arrive unpacked (not constant: a training step's; computed in the graph,
  // as a stride-1 input gradient's flipped filters are; computed through float32 for half
  // types) are packed here, for this call alone, where the chosen algorithm reads them
  // packed and would otherwise redo the work per image: Winograd transforming them image
  // by image, a GEMM per image packing them each time. An optimizer's in-place update
  // is read on the next call. (One GEMM over the batch packs them once itself.) Winograd
  // gives way to the GEMM where the call has too few tiles to repay the transform.
  thread_local AlignedBuf wino_buf;  // per-call blocked Winograd filters, their pages reused
  std::shared_ptr<const PackedOperand> own;
  const PackedOperand* packed_w = c.packed;
  ConvState::Algo algo = q.algo;
  if (!packed_w && (algo == ConvState::kWinograd || algo == ConvState::kNchwcWinograd) &&
      !conv2d_winograd_per_call(q.N, q.H, q.W))
    algo = q.unpacked;
  if (!packed_w && reads_packed(q, algo) &&
      (algo == ConvState::kWinograd || algo == ConvState::kNchwcWinograd || algo == ConvState::kPixelRows ||
       (algo == ConvState::kPerImage && q.N > 1))) {
    own = algo == ConvState::kNchwcWinograd
              ? std::make_shared<const PackedOperand>(conv3x3_winograd_nchwc_pack(
                    q.ng, w.as<float>(), 2, wino_buf.get(size_t(winograd_nchwc_packed_floats(q.ng, 2)))))
              : pack_for(q, algo, w.data);
    packed_w = own.get();
  }
  if (algo == ConvState::kPixelRows && !packed_w) algo = ConvState::kPerImage;
  const int64_t N = q.N, C = q.C, H = q.H, W = q.W, OC = q.OC, ICg = q.ICg, KH = q.KH, KW = q.KW, OH = q.OH,
                OW = q.OW, G = q.G, OCg = q.OCg, rows = q.rows, cols = q.cols;
  const auto &st = q.st, &pd = q.pd, &dl = q.dl;
  const bool pointwise = q.pointwise;
  const float* px = x.as<float>();
  const float* pw = w.as<float>();
  float* po = o.as<float>();
  // The epilogue, per output channel (a row of the GEMM): bias, batch-norm and
  // activation (conv_channel_epilogue), and a fused residual add (the last input, the
  // output's shape), applied by sgemm to each tile as it completes.
  std::vector<float> bn_scale, shift;
  GemmEpilogue ep = conv_channel_epilogue(c.in, 2, at.has_bias, at.bn_eps, at.activation, OC, bn_scale, shift);
  const float* res = at.has_residual ? c.in.back().as<float>() : nullptr;
  // The epilogue of image n's output channels [g * OCg, (g + 1) * OCg), rows 0.. of
  // group g's GEMM (its residual rows are that image's channels, `cols` apart).
  auto group_epilogue = [&](int64_t n, int64_t g) {
    GemmEpilogue e = ep;
    if (e.row_scale) e.row_scale += g * OCg;
    if (e.row_shift) e.row_shift += g * OCg;
    if (res) {
      e.residual = res + (n * OC + g * OCg) * cols;
      e.ld_residual = cols;
    }
    return e;
  };
  thread_local AlignedBuf col_buf, out_buf, res_buf;  // reused across calls: no allocation or zero-fill per conv
  auto trim = [&] {
    for (AlignedBuf* b : {&col_buf, &out_buf, &res_buf, &wino_buf}) b->trim(size_t(16) << 20);
  };
  if (algo == ConvState::kNchwcWinograd) {
    // The image (and a residual) into the blocked layout, the conv, the output back.
    const int64_t L = q.ng.L;
    float* xb = col_buf.get(size_t(N * C * H * W));
    nchw_to_nchwc(px, N, C, H * W, L, xb);
    float* rb = nullptr;
    if (res) nchw_to_nchwc(res, N, OC, cols, L, rb = res_buf.get(size_t(N * OC * cols)));
    float* ob = out_buf.get(size_t(N * OC * cols));
    conv3x3_winograd_nchwc_checked(q.ng, xb, *packed_w, pw, ep.row_scale, ep.row_shift, rb, ep.act, ob);
    nchwc_to_nchw(ob, N, OC, cols, L, po);
    trim();
    return;
  }
  if (algo == ConvState::kDepthwise || algo == ConvState::kDepthwiseGroups) {
    const DepthwiseGeom dg{H, W, KH, KW, OH, OW, st[0], st[1], pd[0], pd[1], dl[0], dl[1]};
    if (algo == ConvState::kDepthwiseGroups) {
      const int64_t L = depthwise_channel_lanes(), groups = (C + L - 1) / L;
      parallel_for(N * groups, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t t = lo; t < hi; ++t) {
          const int64_t n = t / groups, c0 = (t % groups) * L;
          const GemmEpilogue e = group_epilogue(n, 0);
          depthwise_channels(dg, px + (n * C + c0) * H * W, H * W, pw + c0 * KH * KW, po + (n * OC + c0) * OH * OW,
                             OH * OW, std::min(L, C - c0), &e, c0);
        }
      });
      return;
    }
    parallel_for(N * C, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t nc = lo; nc < hi; ++nc) {
        int64_t n = nc / C, ch = nc % C;
        float* oi = po + (n * OC + ch) * OH * OW;
        const GemmEpilogue e = group_epilogue(n, 0);  // the channel as row ch of image n's epilogue
        depthwise_plane(dg, px + (n * C + ch) * H * W, pw + ch * KH * KW, oi, &e, ch);
      }
    });
    return;
  }
  if (algo == ConvState::kDirect) {
    const DepthwiseGeom dg{H, W, KH, KW, OH, OW, st[0], st[1], pd[0], pd[1], dl[0], dl[1]};
    for (int64_t n = 0; n < N; ++n) {
      const GemmEpilogue e = group_epilogue(n, 0);
      conv2d_direct(dg, C, OC, px + n * C * H * W, pw, po + n * OC * cols, &e);
    }
    return;
  }
  // Columns of image n, group g (rows x cols, row stride ld) into dst: im2col.
  auto im2col = [&](int64_t n, int64_t g, float* dst_all, int64_t ld) {
    const float* xg = px + (n * C + g * ICg) * H * W;
    parallel_for(rows, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t row = lo; row < hi; ++row) {
        int64_t ic = row / (KH * KW), kh = (row / KW) % KH, kw = row % KW;
        float* dst = dst_all + row * ld;
        if (pointwise) {
          std::memcpy(dst, xg + ic * H * W, size_t(cols) * sizeof(float));
          continue;
        }
        for (int64_t oh = 0; oh < OH; ++oh)
          image_row_strided(xg + ic * H * W, H, W, oh * st[0] - pd[0] + kh * dl[0], kw * dl[1] - pd[1], st[1], OW,
                            dst + oh * OW);
      }
    });
  };
  // packed_w, when given, is what pack_filters made for this algorithm.
  if (algo == ConvState::kBatchedColumns) {
    int64_t ncols = N * cols;
    float* out = out_buf.get(size_t(OC * ncols));
    // A residual is laid out per image, not as the GEMM's columns: it and the
    // activation after it are applied while copying out.
    GemmEpilogue e = ep;
    if (res) e.act = Activation::kNone;
    // B's panels are built from the images (ConvColumns across images, no im2col
    // matrix) where the driver packs each once: measured on Zen 4, 2 threads, 8 images
    // (in-process A/B against im2col, bn + ReLU): 3x3 / 2 at 28 x 28 with 256 channels
    // 0.92x the time (0.94x AVX2), 3x3 dilation 3 on 20 x 20 0.83x, others within
    // noise. Not for stride-1 unpadded 1x1 convs (im2col is a plane copy; the panels'
    // runs of 7 or 14 columns took 1.33x) nor where the driver packs B again per block
    // of A's rows.
    if (!pointwise && sgemm_packs_b_once(OC, ncols)) {
      ConvColumns cc{px, H, W, KH, KW, OW, st[0], st[1], pd[0], pd[1], dl[0], dl[1], cols, C * H * W};
      sgemm_b_source(OC, ncols, rows, pw, rows, 1, GemmBSource{ConvColumns::pack, &cc}, out, ncols, packed_w, &e);
    } else {
      float* col = col_buf.get(size_t(rows * ncols));
      for (int64_t n = 0; n < N; ++n) im2col(n, 0, col + n * cols, ncols);
      sgemm(OC, ncols, rows, 1.0f, pw, rows, 1, col, ncols, 1, out, ncols, false, packed_w, &e);
    }
    parallel_for(OC, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t oc = lo; oc < hi; ++oc) {
        const float* row = out + oc * ncols;
        for (int64_t n = 0; n < N; ++n) {
          float* dst = po + (n * OC + oc) * cols;
          if (!res) {
            std::memcpy(dst, row + n * cols, size_t(cols) * sizeof(float));
            continue;
          }
          const float* r = res + (n * OC + oc) * cols;
          with_activation(ep.act, [&](auto act) {
            for (int64_t p = 0; p < cols; ++p) dst[p] = act(row[n * cols + p] + r[p]);
          });
        }
      }
    });
    trim();
    return;
  }
  // Images holding a NaN, an infinity or a huge value (all, where the filters do) skip
  // Winograd for the GEMM on the raw filters (see nonfinite_images).
  std::vector<uint8_t> nonfinite;
  if (algo == ConvState::kWinograd)
    nonfinite = (packed_w ? packed_w->winograd_unsafe : nonfinite_images(pw, 1, OC * C * 9, kWinogradLimit)[0])
                    ? std::vector<uint8_t>(size_t(N), 1)
                    : nonfinite_images(px, N, C * H * W, kWinogradLimit);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const float* xg = px + (n * C + g * ICg) * H * W;
      float* og = po + (n * OC + g * OCg) * cols;
      GemmEpilogue eg = group_epilogue(n, g);
      const PackedOperand* packed = packed_w;
      if (algo == ConvState::kWinograd) {
        if (!nonfinite[size_t(n)]) {
          conv3x3_winograd(xg, C, H, W, pw, OC, og, eg, packed_w);
          continue;
        }
        packed = nullptr;  // packed_w holds the transformed filters
      }
      if (algo == ConvState::kPixelRows) {
        // Pixels as rows: C^T [cols x OC] = columns^T W^T, then written transposed into
        // the output with the epilogue per output channel (a few hundred KiB, in L2).
        const float* B = xg;
        if (!pointwise) {
          float* col = col_buf.get(size_t(rows * cols));
          im2col(n, g, col, cols);
          B = col;
        }
        float* ct = out_buf.get(size_t(cols * OC));
        sgemm(cols, OC, rows, 1.0f, B, 1, cols, pw, 1, rows, ct, OC, false, packed, nullptr);
        parallel_for(OC, 16, [&](int64_t lo, int64_t hi) {
          transpose_block(ct + lo, OC, og + lo * cols, cols, cols, hi - lo);
          if (!eg.empty()) sgemm_epilogue_block(eg, og + lo * cols, cols, lo, 0, hi - lo, cols);
        });
        continue;
      }
      if (pointwise || !sgemm_packs_b_once(OCg, cols)) {  // B in memory: the image as it is, or its im2col
        const float* B = xg;
        if (!pointwise) {
          float* col = col_buf.get(size_t(rows * cols));
          im2col(n, g, col, cols);
          B = col;
        }
        sgemm(OCg, cols, rows, 1.0f, pw + g * OCg * rows, rows, 1, B, cols, 1, og, cols, false, packed, &eg);
        continue;
      }
      ConvColumns cc{xg, H, W, KH, KW, OW, st[0], st[1], pd[0], pd[1], dl[0], dl[1]};
      sgemm_b_source(OCg, cols, rows, pw + g * OCg * rows, rows, 1, GemmBSource{ConvColumns::pack, &cc}, og, cols,
                     packed, &eg);
    }
  trim();
}

}  // namespace zenith
