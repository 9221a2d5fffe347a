// The blocked channel layout (NCHWc) and the direct convolution over it.
//
// A blocked tensor is [N, ceil(C / L), H, W, L]: channels in blocks of L (16 where the
// AVX-512 kernels run, else 8), the L channels of one pixel contiguous, the channels
// past C zero. conv2d_nchwc computes a register tile of RO output pixels (consecutive
// in the flattened output map, so a tile may span output rows) by NB blocks of output
// channels, summing over every tap and input channel in registers: each step loads NB
// blocks of the packed filters and broadcasts one input value per pixel. The tile's
// outputs of one block are RO x L contiguous floats, and each pixel's L input channels
// one cache line (AVX-512), where the NCHW GEMM (conv2d.cc) writes and reads rows a
// plane apart. No im2col: constant filters are packed once (conv2d_nchwc_pack; a weight
// that is not constant, per call). ref_conv2d_nchwc is the scalar reference.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <unistd.h>

#include "zenith/error.h"
#include "zenith/kernels/activation.h"
#include "zenith/kernels/gemm_internal.h"
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"

namespace zenith {

using gemm_detail::F32Vec;

namespace {
constexpr int kNB = 2;  // output channel blocks per tile (and per group of packed filters)
// Input per run of tiles (see conv2d_nchwc): half of this core's L2 (256 KiB to 1 MiB).
int64_t run_bytes() {
  static const int64_t bytes = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return std::clamp<int64_t>(l2 > 0 ? l2 / 2 : 0, int64_t(256) << 10, int64_t(1) << 20);
  }();
  return bytes;
}

// L zeros per input channel block: the value a tap outside the image reads.
alignas(64) const float kZeros[16] = {};

// The tile: output pixels [p0, p0 + mr) of one image (mr <= RO; rows past mr repeat
// pixel p0 and are not stored) by output blocks [0, nblk) of a group (nblk <= NB).
// w: the group's packed filters, [taps][CB * L][NB * L]; out, res: the group's first
// block of this image; scale / shift: the group's NB * L channels.
template <int VL, int L, int RO, bool RELU>
ZENITH_UK_INLINE void nchwc_tile(const NchwcConvGeom& g, const float* x, int64_t p0, int64_t mr, int nblk,
                                 const float* w, const float* scale, const float* shift, const float* res,
                                 Activation act, float* out) {
  using Vec = F32Vec<VL>;
  using V = typename Vec::V;
  constexpr int NV = kNB * L / VL, BV = L / VL;  // vectors per tile row, per block
  const int64_t CB = (g.C + L - 1) / L, plane = g.H * g.W * L, oplane = g.OH * g.OW * L;
  V acc[RO][NV];
#pragma GCC unroll 16
  for (int r = 0; r < RO; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  int64_t ih0[RO], iw0[RO];
  for (int r = 0; r < RO; ++r) {
    const int64_t q = p0 + (r < mr ? r : 0);
    ih0[r] = q / g.OW * g.st[0] - g.pd[0];
    iw0[r] = q % g.OW * g.st[1] - g.pd[1];
  }
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      int64_t off[RO];  // each pixel's input offset for this tap, or -1 (padding)
      for (int r = 0; r < RO; ++r) {
        const int64_t ih = ih0[r] + kh * g.dl[0], iw = iw0[r] + kw * g.dl[1];
        off[r] = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W ? (ih * g.W + iw) * L : -1;
      }
      const float* wt = w + (kh * g.KW + kw) * CB * L * kNB * L;
      for (int64_t cb = 0; cb < CB; ++cb) {
        const float* xr[RO];
        for (int r = 0; r < RO; ++r) xr[r] = off[r] >= 0 ? x + cb * plane + off[r] : kZeros;
        const float* wc = wt + cb * L * kNB * L;
#pragma GCC unroll 4
        for (int k = 0; k < L; ++k) {
          V b[NV];
#pragma GCC unroll 4
          for (int v = 0; v < NV; ++v) Vec::load(b[v], wc + k * kNB * L + v * VL);
#pragma GCC unroll 16
          for (int r = 0; r < RO; ++r) {
            const float a = xr[r][k];
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) Vec::fma(acc[r][v], a, b[v]);
          }
        }
      }
    }
  for (int v = 0; v < NV; ++v) {
    const int blk = v / BV, lane = (v % BV) * VL;
    if (blk >= nblk) break;
    V sc, sh;
    Vec::load(sc, scale + blk * L + lane);
    Vec::load(sh, shift + blk * L + lane);
    for (int r = 0; r < RO; ++r) {
      if (r >= mr) break;
      const int64_t at = blk * oplane + (p0 + r) * L + lane;
      V y = acc[r][v] * sc + sh;
      if (res) {
        V rv;
        Vec::load(rv, res + at);
        y += rv;
      }
      if constexpr (RELU) y = y < V{} ? V{} : y;  // NaN stays NaN (as relu_f; -0 stays -0)
      Vec::store(out + at, y);
    }
  }
  if (RELU || act == Activation::kNone) return;
  for (int blk = 0; blk < nblk; ++blk) {  // the other activations over the stored run
    float* o = out + blk * oplane + p0 * L;
    const int64_t n = mr * L;
    with_activation(per_value(act), [&](auto f) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(o[i]);
    });
    per_row(act, o, n);
  }
}

// One instantiation per ISA, tile and epilogue kind; the ISA's target attribute lets
// GCC keep the tile in its registers.
using TileFn = void (*)(const NchwcConvGeom&, const float*, int64_t, int64_t, int, const float*, const float*,
                        const float*, const float*, Activation, float*);
#define ZENITH_NCHWC_TILE(name, target, VL, L, RO, RELU)                                                          \
  target void name(const NchwcConvGeom& g, const float* x, int64_t p0, int64_t mr, int nblk, const float* w,    \
                   const float* scale, const float* shift, const float* res, Activation act, float* out) {      \
    nchwc_tile<VL, L, RO, RELU>(g, x, p0, mr, nblk, w, scale, shift, res, act, out);                            \
  }
#if defined(__x86_64__)
ZENITH_NCHWC_TILE(tile_l16_avx512, __attribute__((target("avx512f"))), 16, 16, 12, false)
ZENITH_NCHWC_TILE(tile_l16_avx512_relu, __attribute__((target("avx512f"))), 16, 16, 12, true)
#endif
ZENITH_NCHWC_TILE(tile_l16_avx2, ZENITH_UK_TARGET_avx2, 8, 16, 4, false)
ZENITH_NCHWC_TILE(tile_l16_avx2_relu, ZENITH_UK_TARGET_avx2, 8, 16, 4, true)
ZENITH_NCHWC_TILE(tile_l8_avx2, ZENITH_UK_TARGET_avx2, 8, 8, 6, false)
ZENITH_NCHWC_TILE(tile_l8_avx2_relu, ZENITH_UK_TARGET_avx2, 8, 8, 6, true)
#undef ZENITH_NCHWC_TILE

struct Tile {
  TileFn fn;
  int64_t ro;
};
Tile pick_tile(int64_t L, bool relu) {
  if (L == 16) {
#if defined(__x86_64__)
    if (gemm_detail::kernels_use_avx512()) return {relu ? tile_l16_avx512_relu : tile_l16_avx512, 12};
#endif
    return {relu ? tile_l16_avx2_relu : tile_l16_avx2, 4};
  }
  return {relu ? tile_l8_avx2_relu : tile_l8_avx2, 6};
}

void check_geom(const NchwcConvGeom& g) {
  ZENITH_CHECK(g.L == 8 || g.L == 16, "conv2d_nchwc: channel block ", g.L, " is not 8 or 16");
  ZENITH_CHECK(g.N >= 0 && g.C > 0 && g.OC > 0 && g.KH > 0 && g.KW > 0 && g.st[0] > 0 && g.st[1] > 0 &&
                   g.dl[0] > 0 && g.dl[1] > 0 && g.pd[0] >= 0 && g.pd[1] >= 0,
               "conv2d_nchwc: bad geometry");
}
}  // namespace

int64_t nchwc_block() { return gemm_detail::kernels_use_avx512() ? 16 : 8; }

void nchw_to_nchwc(const float* x, int64_t N, int64_t C, int64_t HW, int64_t L, float* out) {
  const int64_t CB = (C + L - 1) / L;
  parallel_for(N * CB, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t n = t / CB, cb = t % CB, c0 = cb * L, lanes = std::min(L, C - c0);
      float* dst = out + t * HW * L;
      gemm_detail::transpose_block(x + (n * C + c0) * HW, HW, dst, L, lanes, HW);
      for (int64_t p = 0; lanes < L && p < HW; ++p) std::fill_n(dst + p * L + lanes, L - lanes, 0.0f);
    }
  });
}

void nchwc_to_nchw(const float* x, int64_t N, int64_t C, int64_t HW, int64_t L, float* out) {
  const int64_t CB = (C + L - 1) / L;
  parallel_for(N * CB, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t n = t / CB, cb = t % CB, c0 = cb * L, lanes = std::min(L, C - c0);
      gemm_detail::transpose_block(x + t * HW * L, L, out + (n * C + c0) * HW, HW, HW, lanes);
    }
  });
}

PackedOperand conv2d_nchwc_pack(const NchwcConvGeom& g, const float* w) {
  check_geom(g);
  const int64_t L = g.L, CB = (g.C + L - 1) / L, OCB = (g.OC + L - 1) / L, groups = (OCB + kNB - 1) / kNB;
  const int64_t taps = g.KH * g.KW, group_floats = taps * CB * L * kNB * L;
  PackedOperand p;
  p.side = PackedOperand::kNchwc;
  p.isa = uint8_t(L);
  p.src = w;
  p.rows = g.OC;
  p.cols = g.C * taps;
  p.rs = g.C * taps;
  p.cs = 1;
  const size_t n = size_t(groups * group_floats);
  p.data = std::shared_ptr<float>(static_cast<float*>(std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64)),
                                  std::free);
  if (!p.data) fail_alloc("conv2d_nchwc: out of memory packing filters of ", n * sizeof(float), " bytes");
  float* d = p.data.get();
  parallel_for(groups, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t grp = lo; grp < hi; ++grp) {
      float* dg = d + grp * group_floats;
      std::fill_n(dg, group_floats, 0.0f);
      for (int64_t j = 0; j < kNB * L; ++j) {
        const int64_t oc = grp * kNB * L + j;
        if (oc >= g.OC) break;
        for (int64_t c = 0; c < g.C; ++c)
          for (int64_t t = 0; t < taps; ++t) dg[(t * CB * L + c) * kNB * L + j] = w[(oc * g.C + c) * taps + t];
      }
    }
  });
  return p;
}

void conv2d_nchwc(const NchwcConvGeom& g, const float* x, const PackedOperand& w, const float* scale,
                  const float* shift, const float* res, Activation act, float* out) {
  check_geom(g);
  const int64_t L = g.L, CB = (g.C + L - 1) / L, OCB = (g.OC + L - 1) / L, groups = (OCB + kNB - 1) / kNB;
  ZENITH_CHECK(w.side == PackedOperand::kNchwc && w.isa == uint8_t(L) && w.rows == g.OC &&
                   w.cols == g.C * g.KH * g.KW,
               "conv2d_nchwc: the packed filters are not this conv's");
  const Tile tile = pick_tile(L, act == Activation::kRelu);
  const int64_t OP = g.OH * g.OW, tiles = (OP + tile.ro - 1) / tile.ro;
  const int64_t group_floats = g.KH * g.KW * CB * L * kNB * L;
  // scale / shift padded to whole groups: the channels past OC come out 0 * acc + 0.
  std::vector<float> sc(size_t(groups * kNB * L), 0.0f), sh(size_t(groups * kNB * L), 0.0f);
  for (int64_t oc = 0; oc < g.OC; ++oc) {
    sc[size_t(oc)] = scale ? scale[oc] : 1.0f;
    sh[size_t(oc)] = shift ? shift[oc] : 0.0f;
  }
  // The tiles of an image in runs whose input fits in half of L2, and at least one run
  // per thread when the threads outnumber the images; within a run, group after group,
  // each over every tile of the run. So each group's output blocks are written (and its
  // residual read) as two sequential streams, the run's input is read from L2 again for
  // each group, and a thread reads the pixels it wrote in the conv before (a 1x1 conv's
  // output pixel needs only its own input pixel). Filters larger than the image's input
  // make the whole image one run, its groups split between the threads, so the filters
  // stream from memory once. Measured in ResNet-50 at batch 1 (Intel Xeon family 6 model
  // 167, `zenith.profile`, 3 runs each): a tile-by-tile order, every group per tile,
  // wrote 2 x groups streams at once, which the prefetchers lose (the 1x1 expansions with
  // a residual on 28 x 28 maps 1.21x the NCHW GEMM's time; with runs 0.97x); groups
  // split between threads on small filters made each thread read pixels the other
  // wrote (1x1 reductions on 28 x 28 1.17-1.20x; split by pixels 0.95-1.01x); pixels
  // split with large filters made each thread read all of them (7 x 7 maps 1.20-1.25x).
  // Threads take (image, run, group) items in that order.
  const int64_t image_bytes = CB * L * g.H * g.W * int64_t(sizeof(float));
  const int64_t tile_bytes = tile.ro * g.st[0] * g.st[1] * CB * L * int64_t(sizeof(float));
  const bool large_filters = group_floats * groups * int64_t(sizeof(float)) > image_bytes;
  int64_t run = large_filters ? tiles : std::clamp<int64_t>(run_bytes() / tile_bytes, 1, tiles);
  if (!large_filters && g.N < num_threads()) run = std::min(run, (tiles + num_threads() - 1) / num_threads());
  const int64_t runs = (tiles + run - 1) / run;
  parallel_for(g.N * runs * groups, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t n = i / (runs * groups), r = i / groups % runs, grp = i % groups, ob = grp * kNB;
      const int64_t o_at = (n * OCB + ob) * OP * L;
      const float* xn = x + n * CB * g.H * g.W * L;
      for (int64_t t = r * run; t < std::min(tiles, (r + 1) * run); ++t) {
        const int64_t p0 = t * tile.ro;
        tile.fn(g, xn, p0, std::min(tile.ro, OP - p0), int(std::min<int64_t>(kNB, OCB - ob)),
                w.data.get() + grp * group_floats, sc.data() + ob * L, sh.data() + ob * L, res ? res + o_at : nullptr,
                act, out + o_at);
      }
    }
  });
  // The channels past OC: zero, as the layout promises (the tile left them act(0 * sum
  // + 0 + res), NaN where the input holds an infinity, which the next conv's zero
  // filters would spread to its real channels).
  if (g.OC % L == 0) return;
  float* last = out + (OCB - 1) * OP * L;
  parallel_for(g.N, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n)
      for (int64_t p = 0; p < OP; ++p) std::fill_n(last + (n * OCB * OP + p) * L + g.OC % L, L - g.OC % L, 0.0f);
  });
}

void ref_conv2d_nchwc(const NchwcConvGeom& g, const float* x, const float* w, const float* scale, const float* shift,
                      const float* res, Activation act, float* out) {
  check_geom(g);
  const int64_t L = g.L, CB = (g.C + L - 1) / L, OCB = (g.OC + L - 1) / L;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t ob = 0; ob < OCB; ++ob)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow)
          for (int64_t j = 0; j < L; ++j) {
            const int64_t oc = ob * L + j, at = (((n * OCB + ob) * g.OH + oh) * g.OW + ow) * L + j;
            double s = 0;
            for (int64_t c = 0; oc < g.OC && c < g.C; ++c)
              for (int64_t kh = 0; kh < g.KH; ++kh)
                for (int64_t kw = 0; kw < g.KW; ++kw) {
                  const int64_t ih = oh * g.st[0] - g.pd[0] + kh * g.dl[0], iw = ow * g.st[1] - g.pd[1] + kw * g.dl[1];
                  if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                  s += double(x[(((n * CB + c / L) * g.H + ih) * g.W + iw) * L + c % L]) *
                       w[((oc * g.C + c) * g.KH + kh) * g.KW + kw];
                }
            if (oc >= g.OC) {  // the padding channels
              out[at] = 0.0f;
              continue;
            }
            float y = float(s) * (scale ? scale[oc] : 1.0f) + (shift ? shift[oc] : 0.0f);
            if (res) y += res[at];
            with_activation(act, [&](auto f) { y = f(y); });
            out[at] = y;
          }
}

// ---- The ops ----

void run_to_nchwc(const KernelCtx& c) {
  const TensorRef& x = c.in[0];
  TensorRef& o = c.out[0];
  if (o.numel() == 0) return;
  const int64_t L = c.a<attrs::to_nchwc>().block;
  nchw_to_nchwc(x.as<float>(), x.shape[0], x.shape[1], x.shape[2] * x.shape[3], L, o.as<float>());
}

void run_from_nchwc(const KernelCtx& c) {
  const TensorRef& x = c.in[0];
  TensorRef& o = c.out[0];
  if (o.numel() == 0) return;
  nchwc_to_nchw(x.as<float>(), o.shape[0], o.shape[1], o.shape[2] * o.shape[3], x.shape[4], o.as<float>());
}

namespace {
NchwcConvGeom nchwc_geom(const std::vector<TensorRef>& in, const std::vector<TensorRef>& out,
                         const attrs::conv2d_nchwc& at) {
  const TensorRef &x = in[0], &w = in[1], &o = out[0];
  NchwcConvGeom g;
  g.N = x.shape[0], g.H = x.shape[2], g.W = x.shape[3], g.L = x.shape[4];
  g.OC = w.shape[0], g.C = w.shape[1], g.KH = w.shape[2], g.KW = w.shape[3];
  g.OH = o.shape[2], g.OW = o.shape[3];
  g.st = at.stride, g.pd = at.padding, g.dl = at.dilation;
  return g;
}

// Winograd over the blocked layout reads and writes each channel every block-th float
// (winograd.cc's transforms are per channel), which costs little on maps up to 14 x 14
// and much on larger ones; there the direct conv runs. ResNet-50 batch 1, Intel Xeon
// family 6 model 167, `zenith.profile`, 3 processes: 3x3 convs on 56 x 56 / 64 channels
// blocked Winograd 2.86 ms, direct 2.01-2.06 (NCHW Winograd 2.37); 28 x 28 / 128 2.03-2.13
// both (NCHW 1.81); 14 x 14 / 256 Winograd 3.22 (NCHW 3.55).
constexpr int64_t kWinogradMaxPixels = 14 * 14;

// What prepare_conv2d_nchwc chose: the geometry, and whether the conv runs as
// Winograd over the blocked layout (conv2d_uses_winograd's convs on whole blocks of
// channels, maps up to kWinogradMaxPixels).
struct NchwcState {
  NchwcConvGeom g;
  bool winograd = false;
};

std::shared_ptr<const PackedOperand> pack_nchwc(const void* state, const void* src) {
  const auto& s = *static_cast<const NchwcState*>(state);
  const float* w = static_cast<const float*>(src);
  return std::make_shared<const PackedOperand>(s.winograd ? conv3x3_winograd_pack(s.g.OC, s.g.C, w)
                                                          : conv2d_nchwc_pack(s.g, w));
}
}  // namespace

void prepare_conv2d_nchwc(const PrepareCtx& c, PreparedOp* p) {
  auto s = std::make_shared<NchwcState>();
  s->g = nchwc_geom(c.in, c.out, c.a<attrs::conv2d_nchwc>());
  const NchwcConvGeom& g = s->g;
  s->winograd = g.C % g.L == 0 && g.OC % g.L == 0 && g.H * g.W <= kWinogradMaxPixels &&
                conv2d_uses_winograd(1, g.KH, g.KW, g.st, g.pd, g.dl, g.C, g.H, g.W, g.OC);
  const PackedOperand::Side side = s->winograd ? PackedOperand::kWinograd : PackedOperand::kNchwc;
  p->weight = WeightPack{1, {int64_t(side), g.OC, g.C, g.KH * g.KW, g.L}, pack_nchwc};
  p->state = std::move(s);
}

void run_conv2d_nchwc(const KernelCtx& c) {
  TensorRef& o = c.out[0];
  if (o.numel() == 0) return;
  const auto& at = c.a<attrs::conv2d_nchwc>();
  const NchwcState& s = c.st<NchwcState>();
  const NchwcConvGeom& g = s.g;
  std::shared_ptr<const PackedOperand> own;
  if (!c.packed) own = pack_nchwc(&s, c.in[1].as<float>());
  const PackedOperand& pw = c.packed ? *c.packed : *own;
  std::vector<float> bn_scale, shift;
  const GemmEpilogue ep =
      conv_channel_epilogue(c.in, 2, at.has_bias, at.bn_eps, at.activation, g.OC, bn_scale, shift);
  const float* x = c.in[0].as<float>();
  const float* res = at.has_residual ? c.in.back().as<float>() : nullptr;
  if (s.winograd) {  // image by image, as conv2d's Winograd path (whole blocks: no padding channels)
    const int64_t in_image = g.C * g.H * g.W, out_image = g.OC * g.OH * g.OW;
    for (int64_t n = 0; n < g.N; ++n) {
      GemmEpilogue e = ep;
      if (res) e.residual = res + n * out_image;
      conv3x3_winograd(x + n * in_image, g.C, g.H, g.W, c.in[1].as<float>(), g.OC, o.as<float>() + n * out_image, e,
                       &pw, g.L);
    }
    return;
  }
  conv2d_nchwc(g, x, pw, ep.row_scale, ep.row_shift, res, at.activation, o.as<float>());
}

}  // namespace zenith
