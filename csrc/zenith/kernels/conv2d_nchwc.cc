// The blocked channel layout (NCHWc) and the direct convolution over it.
//
// A blocked tensor is [N, ceil(C / L), H, W, L]: channels in blocks of L (nchwc_block:
// 16 where the AVX-512 kernels run at full width, else 8), the L channels of one pixel
// contiguous, the channels
// past C zero. conv2d_nchwc computes a register tile of RO output pixels (consecutive
// in the flattened output map, so a tile may span output rows) by NB blocks of output
// channels, summing over every tap and input channel in registers: each step loads NB
// blocks of the packed filters and broadcasts one input value per pixel (a 1x1 conv
// without padding, a strided conv's copied patches (8-channel blocks) and Winograd's
// products: the 1x1 run
// kernel, pw_run, the same steps over a run of pixels per call, without the tile's
// per-pixel offsets). The tile's
// outputs of one block are RO x L contiguous floats, and each pixel's L input channels
// one cache line (AVX-512), where the NCHW GEMM (conv2d.cc) writes and reads rows a
// plane apart. No im2col: constant filters are packed once (conv2d_nchwc_pack; a weight
// that is not constant, per call). ref_conv2d_nchwc is the scalar reference. Below: the
// same conv by Winograd (F(2x2, 3x3) and F(4x4, 3x3)), and depthwise convs.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <unistd.h>

#include "zenith/error.h"
#include "zenith/kernels/activation.h"
#include "zenith/kernels/conv2d_nchwc_internal.h"
#include "zenith/kernels/gemm_internal.h"
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/quant.h"
#include "zenith/threadpool.h"

namespace zenith {

using gemm_detail::F32Vec;
using namespace nchwc_detail;

namespace nchwc_detail {
namespace {  // this file's own; conv2d_nchwc_internal.h declares what the other files use
// Input per run of tiles (see conv2d_nchwc): half of this core's L2 (256 KiB to 1 MiB).
int64_t run_bytes() {
  static const int64_t bytes = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return std::clamp<int64_t>(l2 > 0 ? l2 / 2 : 0, int64_t(256) << 10, int64_t(1) << 20);
  }();
  return bytes;
}

// How many parts to cut each of n images' `units` (tiles, rows of tiles) into: at least
// `parts`, and where it can be (no more parts than units), so many that the n x parts
// items split evenly between the threads. parallel_for gives each thread a contiguous
// share of the items, so at batch 1 on 2 threads 4 runs of 42, 42, 42 and 5 tiles had
// given one thread 64% of the work (ResNet-50's 512 -> 128 1x1 conv on 28 x 28, alone:
// 2 threads 163 GFLOP/s where two 1-thread processes made 2 x 107; Zen 4, 2026-11-28).
// Callers cut unit ranges as units * p / parts, so the parts differ by at most one unit.
int64_t balanced_parts(int64_t n, int64_t parts, int64_t units) {
  const int64_t T = num_threads();
  for (int64_t p = parts; p < parts + T && p <= units; ++p)
    if (n * p % T == 0) return p;
  return parts;
}

// L zeros per input channel block: the value a tap outside the image reads.
alignas(64) const float kZeros[16] = {};
}  // namespace

// The tile: output pixels [p0, p0 + mr) of one image (mr <= RO; rows past mr repeat
// pixel p0 and are not stored) by output blocks [0, nblk) of a group (nblk <= NB <=
// kNB: NB = 1 for a group's lone last block, whose partner's zero filters the kNB tile
// would multiply too).
// w: the group's packed filters, [taps][CI][kNB * L] (CI: in_channels_padded, CB * L or,
// over an NCHW input, C); out, res: the group's first
// block of this image; scale / shift: the group's NB * L channels.
// The activation a kernel applies in registers (ACT): 1 ReLU, 2 ReLU6, 0 none (the
// others over the stored run).
int register_act(Activation a) { return a == Activation::kRelu ? 1 : a == Activation::kRelu6 ? 2 : 0; }

// act over n stored values: the activations the kernels do not apply in registers.
void activate_run(Activation act, float* o, int64_t n) {
  with_activation(per_value(act), [&](auto f) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(o[i]);
  });
  per_row(act, o, n);
}

namespace {
// act(y) in registers for ACT 1 and 2, as relu_f and relu6_f compute it: NaN stays NaN,
// -0 stays -0.
template <int ACT, class V>
ZENITH_UK_INLINE void register_activation(V& y) {
  if constexpr (ACT == 1) y = y < V{} ? V{} : y;
  if constexpr (ACT == 2) {
    const V six = V{} + 6.0f;
    y = y < V{} ? V{} : y;
    y = y > six ? six : y;
  }
}

// A tile's epilogue: pixels [p0, p0 + mr) of blocks [0, nblk) from the accumulators
// (RO pixels by NB * L / VL vectors), scale * acc + shift (+ residual), the activation
// in registers (ACT) or over the stored run, into the blocked output (oplane floats per
// block).
template <int VL, int L, int RO, int NB, int ACT, class V>
ZENITH_UK_INLINE void store_tile(const V (&acc)[RO][NB * L / VL], int64_t mr, int nblk, int64_t oplane, int64_t p0,
                                 const float* scale, const float* shift, const float* res, Activation act,
                                 float* out) {
  using Vec = F32Vec<VL>;
  constexpr int NV = NB * L / VL, BV = L / VL;
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
      register_activation<ACT>(y);
      Vec::store(out + at, y);
    }
  }
  if (ACT != 0 || act == Activation::kNone) return;
  for (int blk = 0; blk < nblk; ++blk) activate_run(act, out + blk * oplane + p0 * L, mr * L);  // the stored run
}

// One channel block step of a large-filter conv's prefetch (Prefetch): its lines into
// L2, p.at moved past them, up to p.end.
ZENITH_UK_INLINE void prefetch_step(Prefetch& p) {
  if (!p.at) return;
  const int64_t n = std::min<int64_t>(int64_t(p.lines) * 16, p.end - p.at);
  for (int64_t q = 0; q < n; q += 16) __builtin_prefetch(p.at + q, 0, 2);
  p.at += n;
}

// The prefetch of one group of packed filters, `floats` long from `group` (null: none).
Prefetch group_prefetch(const float* group, int64_t floats, int lines) {
  return group ? Prefetch{group, group + floats, lines} : Prefetch{};
}

// The tiles a run of `pixels` output pixels spreads its prefetch over: those of full
// width (ro pixels, and a last one of more than ro - tail_ro: Tile's rule), so the
// lines are asked for in step with the products. Spread over every tile, a last tail
// tile (tail_ro rows: a third of a full tile's time on AVX-512, half on AVX2's 8-channel
// blocks) issued its share in a burst at the end: on AVX-512, 7 x 7 maps at batch 1 are
// 4 tiles of direct conv and a 1-pixel tail, 16 Winograd tiles 12 and a 4-pixel tail.
// 3x3 512 -> 512 on 7 x 7, Winograd F(2x2), weights past L3: 0.80x the time [0.79,
// 0.85] (`chain_ab.py`, ten convs, calls interleaved in one process), 14 x 14 to
// 56 x 56 maps 1.00x; ResNet-50 batch 1 0.990x
// [0.984, 0.999], batch 8 0.999x, MobileNet V2 1.00x (`switch_ab.py`; Zen 5, family 26
// model 2, 2 threads, 2026-12-05); the AVX2 path (this CPU held to it), whose 16
// Winograd tiles are 3 of full width, ResNet-50 batch 1 1.000x.
int64_t prefetch_full_tiles(int64_t pixels, int64_t ro, int64_t tail_ro) {
  return std::max<int64_t>(1, pixels / ro + (pixels % ro > ro - tail_ro ? 1 : 0));
}

// One step k of a channel block, shared by the tiles: NV filter vectors of the packed
// group (kNB * L floats a step) by one input value per pixel, xr[r][k].
template <int VL, int L, int RO, int NV, class V>
ZENITH_UK_INLINE void tile_step(V (&acc)[RO][NV], const float* const (&xr)[RO], const float* wc, int k) {
  using Vec = F32Vec<VL>;
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

// LI: the input's channels per block, L (blocked) or 1 (an NCHW input, nchw_in: each
// channel a block of one, its plane H x W floats).
template <int VL, int L, int LI, int RO, int NB, int ACT>
ZENITH_UK_INLINE void nchwc_tile(const NchwcConvGeom& g, const float* x, int64_t p0, int64_t mr, int nblk,
                                 const float* w, const float* scale, const float* shift, const float* res,
                                 Activation act, float* out, Prefetch pf) {
  using Vec = F32Vec<VL>;
  using V = typename Vec::V;
  constexpr int NV = NB * L / VL;  // vectors per tile row
  const int64_t CB = (g.C + LI - 1) / LI, plane = g.H * g.W * LI, oplane = g.OH * g.OW * L;
  V acc[RO][NV];
#pragma GCC unroll 16
  for (int r = 0; r < RO; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  // Each pixel's first input row and column (rows past mr: pixel p0's), one division
  // per tile (one per pixel had cost as much as a 1x1 conv's 16 channels of FMAs).
  int64_t ih0[RO], iw0[RO];
  for (int64_t r = 0, oh = p0 / g.OW, ow = p0 % g.OW; r < RO; ++r) {
    ih0[r] = r < mr || r == 0 ? oh * g.st[0] - g.pd[0] : ih0[0];
    iw0[r] = r < mr || r == 0 ? ow * g.st[1] - g.pd[1] : iw0[0];
    if (++ow == g.OW) ow = 0, ++oh;
  }
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      int64_t off[RO];  // each pixel's input offset for this tap, or -1 (padding)
      for (int r = 0; r < RO; ++r) {
        const int64_t ih = ih0[r] + kh * g.dl[0], iw = iw0[r] + kw * g.dl[1];
        off[r] = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W ? (ih * g.W + iw) * LI : -1;
      }
      const float* wt = w + (kh * g.KW + kw) * CB * LI * kNB * L;
      for (int64_t cb = 0; cb < CB; ++cb) {
        const float* xr[RO];
        for (int r = 0; r < RO; ++r) xr[r] = off[r] >= 0 ? x + cb * plane + off[r] : kZeros;
        const float* wc = wt + cb * LI * kNB * L;
        prefetch_step(pf);
        // The last block's real channels only (its padding's filters are zero): 24
        // channels are 1.5 blocks of work, not 2.
        const int kn = cb == CB - 1 ? int(g.C - cb * LI) : LI;
#pragma GCC unroll 4
        for (int k = 0; k < kn; ++k) tile_step<VL, L, RO, NV>(acc, xr, wc, k);
      }
    }
  store_tile<VL, L, RO, NB, ACT>(acc, mr, nblk, oplane, p0, scale, shift, res, act, out);
}

// Each kernel's tile, in output pixels (its rows), and the shorter tile for a map's last
// few: one set per ISA and block, shared by the generic tile, the 1x1 run kernel and the
// stem's row tile (the run kernel's runs and prefetch slices are cut in the tile's).
constexpr int kRoL16Avx512 = 12, kTailL16Avx512 = 4;  // 32 zmm: 12 x 2 accumulators
constexpr int kRoL16Avx2 = 4;                          // 16 ymm: 4 x 4 (no tail tile)
constexpr int kRoL8 = 6, kTailL8 = 3;                  // 16 ymm: 6 x 2

// One instantiation per ISA, tile and in-register activation; the ISA's target
// attribute lets GCC keep the tile in its registers.
#define ZENITH_NCHWC_TILE(name, target, VL, L, RO)                                                                \
  template <int LI, int NB, int ACT>                                                                              \
  target void name(const NchwcConvGeom& g, const float* x, int64_t p0, int64_t mr, int nblk, const float* w,    \
                   const float* scale, const float* shift, const float* res, Activation act, float* out,        \
                   Prefetch pf) {                                                                               \
    nchwc_tile<VL, L, LI, RO, NB, ACT>(g, x, p0, mr, nblk, w, scale, shift, res, act, out, pf);                 \
  }
#if defined(__x86_64__)
ZENITH_NCHWC_TILE(tile_l16_avx512, ZENITH_UK_TARGET_avx512, 16, 16, kRoL16Avx512)
ZENITH_NCHWC_TILE(tail_l16_avx512, ZENITH_UK_TARGET_avx512, 16, 16, kTailL16Avx512)
#endif
ZENITH_NCHWC_TILE(tile_l16_avx2, ZENITH_UK_TARGET_avx2, 8, 16, kRoL16Avx2)
ZENITH_NCHWC_TILE(tile_l8_avx2, ZENITH_UK_TARGET_avx2, 8, 8, kRoL8)
ZENITH_NCHWC_TILE(tail_l8_avx2, ZENITH_UK_TARGET_avx2, 8, 8, kTailL8)
#undef ZENITH_NCHWC_TILE

// A 1x1 conv over a run of consecutive pixels (PwRun): tiles of RO pixels, the last
// few in tiles of TRO, as Tile::operator() splits them. Each tile's pixels sit L floats
// apart in every block, so a block step is NV filter loads and RO broadcasts from one
// pointer per pixel, and whole blocks are unrolled; one call covers the run. The
// generic tile, called per tile with 13 arguments, spent about two thirds of its time
// outside the FMAs at MobileNet V2's 16- and 24-channel expansions (perf, Zen 4, AVX2
// path): per-pixel offsets and padding checks, the partial unroll, the call.
template <int VL, int L, int RO, int NB, int ACT>
ZENITH_UK_INLINE void pw_tile(const PwRun& a, int64_t p0, int64_t mr, Prefetch& pf) {
  using Vec = F32Vec<VL>;
  using V = typename Vec::V;
  constexpr int NV = NB * L / VL;
  const int64_t CB = (a.C + L - 1) / L;
  V acc[RO][NV];
#pragma GCC unroll 16
  for (int r = 0; r < RO; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  const float* xr[RO];  // rows past mr read pixel p0 and are not stored
  for (int r = 0; r < RO; ++r) xr[r] = a.x + (p0 + (r < mr ? r : 0)) * L;
  const float* wc = a.w;
  // The tile's residual lines (a pixel's block is one line), asked for before its sums:
  // AVX-512's tiles finish them twice as fast as AVX2's, and the epilogue's residual
  // loads then waited on memory. 2 threads, batch 8, residual and ReLU, C++, Zen 5
  // (family 26 model 2): 128 -> 512 on 28 x 28 and 64 -> 256 on 56 x 56 0.82x the time,
  // 256 -> 1024 on 14 x 14 and 512 -> 2048 on 7 x 7 0.96-0.97x; ResNet-50 batch 8 0.95x,
  // batch 1 1.00x (calls interleaved in one process). AVX2's 8-channel tile
  // (half a line a pixel) ran 1.00-1.05x the time with it, so it goes without.
  if constexpr (VL == 16)
    if (a.res)
      for (int blk = 0; blk < a.nblk; ++blk)
        for (int r = 0; r < RO && r < mr; ++r) __builtin_prefetch(a.res + blk * a.o_plane + (p0 + r) * L, 0, 3);
  for (int64_t cb = 0; cb < CB; ++cb, wc += L * kNB * L) {
    prefetch_step(pf);
    if (cb + 1 < CB || a.C % L == 0) {
#pragma GCC unroll 16
      for (int k = 0; k < L; ++k) tile_step<VL, L, RO, NV>(acc, xr, wc, k);
    } else {
      for (int k = 0; k < int(a.C % L); ++k) tile_step<VL, L, RO, NV>(acc, xr, wc, k);  // the last block's real channels
    }
    for (int r = 0; r < RO; ++r) xr[r] += a.x_plane;
  }
  store_tile<VL, L, RO, NB, ACT>(acc, mr, a.nblk, a.o_plane, p0, a.scale, a.shift, a.res, a.act, a.out);
}
template <int VL, int L, int RO, int TRO, int NB, int ACT>
ZENITH_UK_INLINE void pw_run(const PwRun& a) {
  int64_t p0 = 0;
  Prefetch pf = a.pf;
  for (; p0 + RO <= a.count; p0 += RO) pw_tile<VL, L, RO, NB, ACT>(a, p0, RO, pf);
  if (a.count - p0 > RO - TRO) return pw_tile<VL, L, RO, NB, ACT>(a, p0, a.count - p0, pf);
  for (; p0 < a.count; p0 += TRO) pw_tile<VL, L, TRO, NB, ACT>(a, p0, std::min<int64_t>(TRO, a.count - p0), pf);
}
#define ZENITH_PW_RUN(name, target, VL, L, RO, TRO) \
  template <int NB, int ACT>                        \
  target void name(const PwRun& a) {                \
    pw_run<VL, L, RO, TRO, NB, ACT>(a);             \
  }
#if defined(__x86_64__)
ZENITH_PW_RUN(run_l16_avx512, ZENITH_UK_TARGET_avx512, 16, 16, kRoL16Avx512, kTailL16Avx512)
#endif
ZENITH_PW_RUN(run_l16_avx2, ZENITH_UK_TARGET_avx2, 8, 16, kRoL16Avx2, kRoL16Avx2)
ZENITH_PW_RUN(run_l8_avx2, ZENITH_UK_TARGET_avx2, 8, 8, kRoL8, kTailL8)
#undef ZENITH_PW_RUN

// An NCHW input's tile inside one output row, every tap within the row's columns (a
// stem's interior): RO pixels from output column ow0 of row oh by NB blocks, the input
// pixel of tap (kh, kw) for pixel r at a constant offset r * SW from one pointer, so
// each step is NV filter loads and RO * NV FMAs with the input broadcast from memory
// (no per-pixel pointers or padding checks; the generic tile, LI = 1, takes the rows'
// edges). Taps above or below the image add nothing and are skipped.
template <int VL, int L, int RO, int NB, int ACT, int SW>
ZENITH_UK_INLINE void nchw_in_row_tile(const NchwcConvGeom& g, const float* x, int64_t oh, int64_t ow0, int nblk,
                                       const float* w, const float* scale, const float* shift, const float* res,
                                       Activation act, float* out) {
  using Vec = F32Vec<VL>;
  using V = typename Vec::V;
  constexpr int NV = NB * L / VL;
  const int64_t oplane = g.OH * g.OW * L, plane = g.H * g.W, p0 = oh * g.OW + ow0;
  V acc[RO][NV];
#pragma GCC unroll 16
  for (int r = 0; r < RO; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  const int64_t iw0 = ow0 * SW - g.pd[1];
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    const int64_t ih = oh * g.st[0] - g.pd[0] + kh * g.dl[0];
    if (ih < 0 || ih >= g.H) continue;
    for (int64_t c = 0; c < g.C; ++c) {
      const float* xr = x + c * plane + ih * g.W + iw0;
      const float* wc = w + ((kh * g.KW) * g.C + c) * kNB * L;
      for (int64_t kw = 0; kw < g.KW; ++kw, xr += g.dl[1], wc += g.C * kNB * L) {
        V b[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) Vec::load(b[v], wc + v * VL);
#pragma GCC unroll 16
        for (int r = 0; r < RO; ++r) {
          const float a = xr[r * SW];
#pragma GCC unroll 4
          for (int v = 0; v < NV; ++v) Vec::fma(acc[r][v], a, b[v]);
        }
      }
    }
  }
  store_tile<VL, L, RO, NB, ACT>(acc, RO, nblk, oplane, p0, scale, shift, res, act, out);
}

using RowTileFn = void (*)(const NchwcConvGeom&, const float*, int64_t, int64_t, int, const float*, const float*,
                           const float*, const float*, Activation, float*);
#define ZENITH_NCHW_IN_ROW_TILE(name, target, VL, L, RO)                                                           \
  template <int NB, int ACT, int SW>                                                                                \
  target void name(const NchwcConvGeom& g, const float* x, int64_t oh, int64_t ow0, int nblk, const float* w,      \
                   const float* scale, const float* shift, const float* res, Activation act, float* out) {        \
    nchw_in_row_tile<VL, L, RO, NB, ACT, SW>(g, x, oh, ow0, nblk, w, scale, shift, res, act, out);                \
  }
#if defined(__x86_64__)
ZENITH_NCHW_IN_ROW_TILE(row_l16_avx512, ZENITH_UK_TARGET_avx512, 16, 16, kRoL16Avx512)
#endif
ZENITH_NCHW_IN_ROW_TILE(row_l8_avx2, ZENITH_UK_TARGET_avx2, 8, 8, kRoL8)
#undef ZENITH_NCHW_IN_ROW_TILE

// The row tile for this ISA, block, activation and stride ([nblk > 1]), or none (the
// generic tile then runs the whole row): strides 1 and 2, AVX-512's 16-channel block or
// AVX2's 8.
struct RowTile {
  RowTileFn fn[2] = {nullptr, nullptr};
  int64_t ro = 0;
};
template <int ACT, int SW>
RowTile pick_row_tile_act(int64_t L) {
#if defined(__x86_64__)
  if (L == 16 && gemm_detail::kernels_use_avx512())
    return {{row_l16_avx512<1, ACT, SW>, row_l16_avx512<2, ACT, SW>}, kRoL16Avx512};
#endif
  if (L == 8) return {{row_l8_avx2<1, ACT, SW>, row_l8_avx2<2, ACT, SW>}, kRoL8};
  return {};
}
template <int SW>
RowTile pick_row_tile_sw(int64_t L, Activation act) {
  const int a = register_act(act);
  return a == 1 ? pick_row_tile_act<1, SW>(L) : a == 2 ? pick_row_tile_act<2, SW>(L) : pick_row_tile_act<0, SW>(L);
}
RowTile pick_row_tile(const NchwcConvGeom& g, Activation act) {
  return g.st[1] == 1 ? pick_row_tile_sw<1>(g.L, act) : g.st[1] == 2 ? pick_row_tile_sw<2>(g.L, act) : RowTile{};
}

// The tile (Tile, conv2d_nchwc_internal.h), and a shorter one for a map's last few
// pixels (a 7 x 7 map is 4 tiles of 12 and one pixel, which the full tile would compute
// 12 times); [0] for a lone block.
template <int ACT, bool NCHW_IN>
Tile pick_tile_act(int64_t L) {
  static_assert(kNB == 2, "a tile of one block and one of kNB");
  constexpr int LI16 = NCHW_IN ? 1 : 16, LI8 = NCHW_IN ? 1 : 8;
  if (L == 16) {
#if defined(__x86_64__)
    if (gemm_detail::kernels_use_avx512())
      return {{tile_l16_avx512<LI16, 1, ACT>, tile_l16_avx512<LI16, 2, ACT>},
              {tail_l16_avx512<LI16, 1, ACT>, tail_l16_avx512<LI16, 2, ACT>},
              kRoL16Avx512,
              kTailL16Avx512};
#endif
    return {{tile_l16_avx2<LI16, 1, ACT>, tile_l16_avx2<LI16, 2, ACT>}, {nullptr, nullptr}, kRoL16Avx2, kRoL16Avx2};
  }
  return {{tile_l8_avx2<LI8, 1, ACT>, tile_l8_avx2<LI8, 2, ACT>},
          {tail_l8_avx2<LI8, 1, ACT>, tail_l8_avx2<LI8, 2, ACT>},
          kRoL8,
          kTailL8};
}
template <bool NCHW_IN>
Tile pick_tile_in(int64_t L, Activation act) {
  const int a = register_act(act);
  return a == 1 ? pick_tile_act<1, NCHW_IN>(L) : a == 2 ? pick_tile_act<2, NCHW_IN>(L) : pick_tile_act<0, NCHW_IN>(L);
}
}  // namespace

// Zen 4 (AVX-512 in 256-bit halves, 8-channel blocks) once ran a 12-pixel tile and run
// kernel in AVX-512VL's 32 ymm registers for sums of up to 192 products. Once the 1x1
// convs ran the run kernel, it no longer paid: ResNet-50 and MobileNet V2 at batch 1 and
// 8 took 0.975-1.002x the time without it (calls interleaved in one process, three
// sessions' A/Bs; docs/benchmarks, 2026-11-29), so the 6-pixel AVX2 tile serves there.
Tile pick_tile(const NchwcConvGeom& g, Activation act) {
  return g.nchw_in ? pick_tile_in<true>(g.L, act) : pick_tile_in<false>(g.L, act);
}
namespace {
template <int ACT>
PwRunFns pick_pw_run_act(int64_t L) {
  if (L == 16) {
#if defined(__x86_64__)
    if (gemm_detail::kernels_use_avx512())
      return {{run_l16_avx512<1, ACT>, run_l16_avx512<2, ACT>}, kRoL16Avx512, kTailL16Avx512};
#endif
    return {{run_l16_avx2<1, ACT>, run_l16_avx2<2, ACT>}, kRoL16Avx2, kRoL16Avx2};
  }
  return {{run_l8_avx2<1, ACT>, run_l8_avx2<2, ACT>}, kRoL8, kTailL8};
}
}  // namespace
// The same ISA, block and tile width as pick_tile's.
PwRunFns pick_pw_run(int64_t L, Activation act) {
  const int a = register_act(act);
  return a == 1 ? pick_pw_run_act<1>(L) : a == 2 ? pick_pw_run_act<2>(L) : pick_pw_run_act<0>(L);
}
namespace {
// The input's channels per block: L, or 1 for an NCHW input.
int64_t in_block(const NchwcConvGeom& g) { return g.nchw_in ? 1 : g.L; }
// The input's channels rounded up to whole blocks (the rows of a tap's packed filters).
int64_t in_channels_padded(const NchwcConvGeom& g) { return (g.C + in_block(g) - 1) / in_block(g) * in_block(g); }
}  // namespace
int64_t packed_group_floats(const NchwcConvGeom& g) { return g.KH * g.KW * in_channels_padded(g) * kNB * g.L; }

namespace {
void check_geom(const NchwcConvGeom& g) {
  ZENITH_CHECK(g.L == 8 || g.L == 16, "conv2d_nchwc: channel block ", g.L, " is not 8 or 16");
  ZENITH_CHECK(g.N >= 0 && g.C > 0 && g.OC > 0 && g.KH > 0 && g.KW > 0 && g.st[0] > 0 && g.st[1] > 0 &&
                   g.dl[0] > 0 && g.dl[1] > 0 && g.pd[0] >= 0 && g.pd[1] >= 0,
               "conv2d_nchwc: bad geometry");
  ZENITH_CHECK(g.groups == 1 || (g.groups == g.C && g.groups == g.OC), "conv2d_nchwc: groups must be 1 or C == OC, got ",
               g.groups, " for ", g.C, " and ", g.OC, " channels");
  ZENITH_CHECK(!g.nchw_in || g.groups == 1, "conv2d_nchwc: an NCHW input needs the direct conv (groups 1)");
}
}  // namespace
}  // namespace nchwc_detail

// 16 where the AVX-512 kernels run at full width; 8 (the AVX2 kernels) elsewhere and on
// Zen 4, which runs each 512-bit FMA as two halves. There the 16-channel tile lost to the
// 8-channel one on every ResNet-50 conv class measured (a 64 -> 64 1x1 conv over 56 x 56,
// one thread: 46 against 83 GFLOP/s; equal only from about 1024 channels in), and its
// processes fell into a slow mode the 8-channel ones did not (docs/benchmarks,
// 2026-11-28, eighteenth session).
int64_t nchwc_block() {
  return gemm_detail::kernels_use_avx512() && !gemm_detail::avx512_in_halves() ? 16 : 8;
}

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

namespace nchwc_detail {
namespace {
// Floats of a conv's packed filters: groups of kNB output blocks, [taps][CI][kNB * L]
// each (CI: in_channels_padded).
int64_t packed_filter_floats(const NchwcConvGeom& g) {
  const int64_t L = g.L, OCB = (g.OC + L - 1) / L, groups = (OCB + kNB - 1) / kNB;
  return groups * g.KH * g.KW * in_channels_padded(g) * kNB * L;
}

// A PackedOperand of `floats` floats for the filters w ([OC, C, ...], C * taps per row).
PackedOperand alloc_packed(PackedOperand::Side side, const NchwcConvGeom& g, const float* w, int64_t taps,
                           int64_t floats, float* into = nullptr) {
  PackedOperand p;
  p.side = side;
  p.isa = uint8_t(g.L);
  p.src = w;
  p.rows = g.OC;
  p.cols = g.C * taps;
  p.rs = g.C * taps;
  p.cs = 1;
  const size_t n = size_t(floats);
  if (into) {  // the caller's buffer (a per-call pack reusing its pages)
    p.data = std::shared_ptr<float>(into, [](float*) {});
    return p;
  }
  p.data = std::shared_ptr<float>(static_cast<float*>(std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64)),
                                  std::free);
  if (!p.data) fail_alloc("conv2d_nchwc: out of memory packing filters of ", n * sizeof(float), " bytes");
  return p;
}

// Writes the filters w (OIHW) as conv2d_nchwc's tile reads them to d (packed_filter_floats).
void pack_filter_groups(const NchwcConvGeom& g, const float* w, float* d) {
  const int64_t L = g.L, CI = in_channels_padded(g), OCB = (g.OC + L - 1) / L, groups = (OCB + kNB - 1) / kNB;
  const int64_t taps = g.KH * g.KW, group_floats = taps * CI * kNB * L;
  parallel_for(groups, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t grp = lo; grp < hi; ++grp) {
      float* dg = d + grp * group_floats;
      std::fill_n(dg, group_floats, 0.0f);
      for (int64_t j = 0; j < kNB * L; ++j) {
        const int64_t oc = grp * kNB * L + j;
        if (oc >= g.OC) break;
        for (int64_t c = 0; c < g.C; ++c)
          for (int64_t t = 0; t < taps; ++t) dg[(t * CI + c) * kNB * L + j] = w[(oc * g.C + c) * taps + t];
      }
    }
  });
}
}  // namespace

// The epilogue's scale and shift per output channel (null: 1 and 0), zero past OC up to
// `n` channels (the padding channels come out 0 * sum + 0).
void channel_scale_shift(const float* scale, const float* shift, int64_t OC, int64_t n, std::vector<float>& sc,
                         std::vector<float>& sh) {
  sc.assign(size_t(n), 0.0f);
  sh.assign(size_t(n), 0.0f);
  for (int64_t oc = 0; oc < OC; ++oc) {
    sc[size_t(oc)] = scale ? scale[oc] : 1.0f;
    sh[size_t(oc)] = shift ? shift[oc] : 0.0f;
  }
}

// Zeroes the output's channels past OC (in the last block of each image).
void zero_padding_channels(const NchwcConvGeom& g, float* out) {
  const int64_t L = g.L, OCB = (g.OC + L - 1) / L, OP = g.OH * g.OW;
  if (g.OC % L == 0) return;
  float* last = out + (OCB - 1) * OP * L;
  parallel_for(g.N, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n)
      for (int64_t p = 0; p < OP; ++p) std::fill_n(last + (n * OCB * OP + p) * L + g.OC % L, L - g.OC % L, 0.0f);
  });
}
}  // namespace nchwc_detail

PackedOperand conv2d_nchwc_pack(const NchwcConvGeom& g, const float* w) {
  check_geom(g);
  ZENITH_CHECK(g.groups == 1, "conv2d_nchwc: the direct conv has one group; depthwise_nchwc runs depthwise convs");
  PackedOperand p = alloc_packed(g.nchw_in ? PackedOperand::kNchwcNchwIn : PackedOperand::kNchwc, g, w, g.KH * g.KW,
                                 packed_filter_floats(g));
  pack_filter_groups(g, w, p.data.get());
  return p;
}

namespace {
// The patches that output pixels [pb, pe) of a conv read, from one image's blocked input
// xn (CB channel blocks), tap after tap: tap t's block cb at buf + (t * CB + cb) *
// (pe - pb) * L, its pixels consecutive, zeros where the tap falls in the padding. In the
// order the packed filters sum (tap-major, then channel), so the 1x1 run kernel over
// taps * CB blocks of these computes the conv (for a strided 1x1 conv: its pixels). L a
// constant, so each pixel's copy is one move.
constexpr int64_t kMaxPatchBytes = int64_t(4) << 20;
template <int64_t L>
void gather_patches(const NchwcConvGeom& g, const float* xn, int64_t CB, int64_t pb, int64_t pe, float* buf) {
  const int64_t np = pe - pb;
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw)
      for (int64_t cb = 0; cb < CB; ++cb) {
        const float* from = xn + cb * g.H * g.W * L;
        float* dst = buf + ((kh * g.KW + kw) * CB + cb) * np * L;
        for (int64_t p = pb, oh = pb / g.OW, ow = pb % g.OW; p < pe; ++p, dst += L) {
          const int64_t ih = oh * g.st[0] - g.pd[0] + kh * g.dl[0], iw = ow * g.st[1] - g.pd[1] + kw * g.dl[1];
          if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W)
            std::memcpy(dst, from + (ih * g.W + iw) * L, L * sizeof(float));
          else
            std::memset(dst, 0, L * sizeof(float));
          if (++ow == g.OW) ow = 0, ++oh;
        }
      }
}
}  // namespace

void conv2d_nchwc(const NchwcConvGeom& g, const float* x, const PackedOperand& w, const float* scale,
                  const float* shift, const float* res, Activation act, float* out) {
  check_geom(g);
  // (the 1x1 run kernel below reads input pixel p for output pixel p at stride 1)
  const auto out_dim = [](int64_t i, int64_t k, int64_t s, int64_t p, int64_t d) {
    const int64_t span = i + 2 * p - d * (k - 1);  // positions the filter fits in: none when <= 0
    return span > 0 ? (span - 1) / s + 1 : 0;
  };
  ZENITH_CHECK(g.OH == out_dim(g.H, g.KH, g.st[0], g.pd[0], g.dl[0]) &&
                   g.OW == out_dim(g.W, g.KW, g.st[1], g.pd[1], g.dl[1]),
               "conv2d_nchwc: output map ", g.OH, " x ", g.OW, " is not the conv's for input ", g.H, " x ", g.W);
  const int64_t L = g.L, CI = in_channels_padded(g), OCB = (g.OC + L - 1) / L, groups = (OCB + kNB - 1) / kNB;
  ZENITH_CHECK(g.groups == 1 && w.side == (g.nchw_in ? PackedOperand::kNchwcNchwIn : PackedOperand::kNchwc) &&
                   w.isa == uint8_t(L) && w.rows == g.OC && w.cols == g.C * g.KH * g.KW,
               "conv2d_nchwc: the packed filters are not this conv's");
  const Tile tile = pick_tile(g, act);
  const int64_t OP = g.OH * g.OW, tiles = (OP + tile.ro - 1) / tile.ro;
  if (OP == 0 || g.N == 0) return;  // no output (a map smaller than the filter's reach, or no images)
  const int64_t group_floats = g.KH * g.KW * CI * kNB * L;
  std::vector<float> sc, sh;  // padded to whole groups
  channel_scale_shift(scale, shift, g.OC, groups * kNB * L, sc, sh);
  if (g.nchw_in) {
    // A stem's image: items of one output row by one group, the row's interior columns
    // (every tap inside the image's width) in row tiles, its edges and the interior's
    // last pixels by the generic tile. Its input (a few channels) is small.
    const RowTile rt = pick_row_tile(g, act);
    const int64_t sw = g.st[1], reach = (g.KW - 1) * g.dl[1];
    const int64_t lo = std::min(g.OW, (g.pd[1] + sw - 1) / sw);  // first column reading no left padding
    const int64_t hi = std::max(lo, std::min(g.OW, g.W - 1 - reach + g.pd[1] >= 0 ? (g.W - 1 - reach + g.pd[1]) / sw + 1
                                                                                   : int64_t(0)));
    parallel_for(g.N * g.OH * groups, 1, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) {
        const int64_t n = i / (g.OH * groups), oh = i / groups % g.OH, grp = i % groups, ob = grp * kNB;
        const int64_t o_at = (n * OCB + ob) * OP * L;
        const int nblk = int(std::min<int64_t>(kNB, OCB - ob));
        const float *xn = x + n * g.C * g.H * g.W, *wg = w.data.get() + grp * group_floats;
        const float *s = sc.data() + ob * L, *t = sh.data() + ob * L, *rs = res ? res + o_at : nullptr;
        auto generic = [&](int64_t ow, int64_t count) {
          for (int64_t q = 0; q < count; q += tile.ro)
            tile(g, xn, oh * g.OW + ow + q, std::min(tile.ro, count - q), nblk, wg, s, t, rs, act, out + o_at,
                 Prefetch{});
        };
        int64_t ow = rt.ro ? lo : g.OW;
        generic(0, std::min(ow, g.OW));
        for (; rt.ro && ow + rt.ro <= hi; ow += rt.ro) rt.fn[nblk > 1](g, xn, oh, ow, nblk, wg, s, t, rs, act, out + o_at);
        generic(ow, g.OW - ow);
      }
    });
    zero_padding_channels(g, out);
    return;
  }
  // The tiles of an image in runs whose input fits in half of L2, cut so the (image,
  // run) items split evenly between the threads (balanced_parts); within a run, group after group,
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
  const int64_t image_bytes = CI * g.H * g.W * int64_t(sizeof(float));
  const bool large_filters = group_floats * groups * int64_t(sizeof(float)) > image_bytes;
  // A strided conv wider than 1x1 (ResNet's stride-2 3x3 convs) runs the 1x1 run kernel
  // too, over its runs' patches copied together, one (tap, channel block) after another
  // (gather_patches): taps x C products per output, as the packed filters sum them. The
  // tile's strided broadcasts used half of each line they touched. ResNet-50's three
  // (C++, Zen 4 family 25 model 17, 2 threads, AVX2 path, caches flushed, batch 8):
  // 0.92-0.99x the tile's time, batch 1 0.97-1.03x; the model 0.976x (AVX-512) and
  // 0.982x (AVX2) at batch 8, 1.00x at batch 1 (calls interleaved in one process). Where
  // the filters outweigh the image, its one run's patches must fit a few MiB.
  // With 16-channel blocks (AVX-512 at full width) a pixel's block is a whole line, the
  // tile's broadcasts waste none of it, and the copy costs more than it saves: the tile
  // runs ResNet-50's stride-2 3x3 convs at 433-479 GFLOP/s where the patches made
  // 362-417 (batch 8; AMD Zen 5, family 26 model 2, 2 threads, `zenith.profile`), the
  // model 0.98x the time at batch 1 and 8 (calls interleaved in one process; the
  // patches kept for a strided 1x1 conv's pixels, which the tile ran no faster).
  const int64_t patch_bytes = g.KH * g.KW * CI * int64_t(sizeof(float));  // one output pixel's
  const bool patches = L == 8 && !g.nchw_in && (g.KH > 1 || g.KW > 1) && (g.st[0] > 1 || g.st[1] > 1) &&
                       (!large_filters || patch_bytes * OP <= kMaxPatchBytes);
  const int64_t tile_bytes = tile.ro * (patches ? patch_bytes : g.st[0] * g.st[1] * CI * int64_t(sizeof(float)));
  const int64_t max_run = large_filters ? tiles : std::clamp<int64_t>(run_bytes() / tile_bytes, 1, tiles);
  const int64_t runs = large_filters ? 1 : balanced_parts(g.N, (tiles + max_run - 1) / max_run, tiles);
  // Large filters stream from memory group by group: each item prefetches the thread's
  // next group into L2, a slice per full-width tile (a few lines per channel block step), while
  // its own later tiles read theirs from L2. ResNet-50, `zenith.profile`, 3 processes:
  // the 1x1 convs on 14 x 14 and 7 x 7 maps at batch 1 0.79-0.93x the time, end to end
  // on AVX2 0.89-0.92x; batch 8 0.88-0.98x per class.
  // (Large filters make the image one run; the slices go to its full tiles.)
  const int64_t full = prefetch_full_tiles(OP, tile.ro, tile.tail_ro);
  const int64_t steps = g.KH * g.KW * (CI / in_block(g)), lines_tile = (group_floats / 16 + full - 1) / full;
  const int pf_lines = int((lines_tile + steps - 1) / steps);
  const int64_t pf_tile = int64_t(pf_lines) * steps * 16;  // floats prefetched per tile
  // A 1x1 conv without padding runs the 1x1 run kernel (pw_run) over each (image, run,
  // group) item's pixels. Stride 1 reads them in place: the generic tile's per-tile
  // set-up (pixel offsets, padding checks, a partial unroll) made it 1.07-1.8x the run
  // kernel's time, most on short sums. C++, one thread, AVX2 path, Zen 4 (family 25
  // model 17): 16 -> 64 on 14 x 14 48 -> 87 GFLOP/s, 64 -> 256 on 56 x 56 82 -> 107,
  // 320 -> 1280 on 7 x 7 99 -> 106. Whole models, 2 threads, calls interleaved in one
  // process: ResNet-50 0.90-0.91x the time at batch 1 and 0.95x at batch 8, MobileNet V2
  // 0.95-0.97x and 0.88-0.95x (AVX2 and AVX-512 paths).
  // A strided one (ResNet's downsampling shortcuts) reads one input pixel in s0 x s1, so
  // the tile's broadcasts used half of each line they touch (stride 2, 8-channel blocks)
  // and its run's input spans s0 x s1 times the pixels it needs. Each thread instead
  // copies its run's pixels, once per (image, run), into a buffer of consecutive pixels.
  // ResNet-50's three (C++, Zen 4, 2 threads): 0.81-0.97x the strided tile's time on
  // AVX2 and AVX-512, the model 0.98-0.99x (an earlier version, which copied the whole
  // subsampled tensor and then ran a stride-1 conv over it, had lost most of the gain
  // at batch 8 to the copy).
  const bool pointwise = g.KH == 1 && g.KW == 1 && g.pd[0] == 0 && g.pd[1] == 0;
  const bool strided = pointwise && (g.st[0] > 1 || g.st[1] > 1);
  const PwRunFns pw = pointwise || patches ? pick_pw_run(L, act) : PwRunFns{};
  parallel_for(g.N * runs * groups, 1, [&](int64_t lo, int64_t hi) {
    thread_local gemm_detail::AlignedBuf pixels;
    int64_t have = -1;  // the (image, run) whose pixels buf holds, as item / groups
    float* buf = nullptr;
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t n = i / (runs * groups), r = i / groups % runs, grp = i % groups, ob = grp * kNB;
      const int64_t o_at = (n * OCB + ob) * OP * L;
      const float* xn = x + n * CI * g.H * g.W;
      const Prefetch pf = group_prefetch(  // the thread's next group, large filters only
          large_filters && i + 1 < hi ? w.data.get() + (i + 1) % groups * group_floats : nullptr, group_floats,
          pf_lines);
      const int64_t t0 = tiles * r / runs, t1 = tiles * (r + 1) / runs;
      if (pointwise || patches) {
        const int64_t pb = t0 * tile.ro, pe = std::min(t1 * tile.ro, OP), np = pe - pb, CB = CI / L;
        const float* src = xn + pb * L;  // the run's first pixel, blocks src_plane floats apart
        int64_t src_plane = g.H * g.W * L;
        if (strided || patches) {  // the run's pixels or patches, copied (have and buf serve these only)
          if (have != i / groups) {
            have = i / groups;
            buf = pixels.get(size_t(g.KH * g.KW * CB * np * L));  // (get may drop what it held)
            if (L == 8) gather_patches<8>(g, xn, CB, pb, pe, buf);
            else gather_patches<16>(g, xn, CB, pb, pe, buf);
          }
          src = buf;
          src_plane = np * L;
        }
        pw({src, src_plane, patches ? g.KH * g.KW * CI : g.C, w.data.get() + grp * group_floats, sc.data() + ob * L,
            sh.data() + ob * L, res ? res + o_at + pb * L : nullptr, act, out + o_at + pb * L, OP * L, np,
            int(std::min<int64_t>(kNB, OCB - ob)), pf});
        continue;
      }
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t p0 = t * tile.ro;
        tile(g, xn, p0, std::min(tile.ro, OP - p0), int(std::min<int64_t>(kNB, OCB - ob)),
             w.data.get() + grp * group_floats, sc.data() + ob * L, sh.data() + ob * L, res ? res + o_at : nullptr, act,
             out + o_at, pf.at ? Prefetch{pf.at + std::min((t - t0) * pf_tile, group_floats), pf.end, pf_lines} : pf);
      }
    }
    pixels.trim(size_t(4) << 20);
  });
  // The channels past OC: zero, as the layout promises (the tile left them act(0 * sum
  // + 0 + res), NaN where the input holds an infinity, which the next conv's zero
  // filters would spread to its real channels).
  zero_padding_channels(g, out);
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
            const int64_t cg = g.C / g.groups, c0 = oc / (g.OC / g.groups) * cg;  // oc's group's channels
            for (int64_t c = c0; oc < g.OC && c < c0 + cg; ++c)
              for (int64_t kh = 0; kh < g.KH; ++kh)
                for (int64_t kw = 0; kw < g.KW; ++kw) {
                  const int64_t ih = oh * g.st[0] - g.pd[0] + kh * g.dl[0], iw = ow * g.st[1] - g.pd[1] + kw * g.dl[1];
                  if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                  const int64_t xi = g.nchw_in ? ((n * g.C + c) * g.H + ih) * g.W + iw
                                               : (((n * CB + c / L) * g.H + ih) * g.W + iw) * L + c % L;
                  s += double(x[xi]) * w[((oc * cg + c - c0) * g.KH + kh) * g.KW + kw];
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

// ---- Winograd F(2x2, 3x3) and F(4x4, 3x3) over the blocked layout ----
// The same algorithm as winograd.cc's (U = G g G^T once, V = B^T d B per 4x4 input
// patch, M = U V per transformed position, out = A^T m A), laid out so every step
// works on a pixel's L channels as one vector: a patch of channel block cb is 16 of the
// input's vectors, transformed into V[xi][cb][tile] (16 blocked "images" of one pixel
// per tile), each M[xi] = U[xi] V[xi] is a 1x1 conv over those images run by the 1x1
// run kernel (U[xi] packed as the direct conv's filters), and A^T m A writes each 2x2 block of output
// pixels with the epilogue. F(4x4, 3x3) is the same with 6x6 patches, 36 positions and
// 4x4 blocks of outputs: 2.25 products per output pixel and channel pair where F(2x2)
// needs 4 (winograd4_pays says where it is used). Tiles go through in passes (see below): a few tile rows per
// thread with all three stages for small filters, whole images per stage for large ones.
namespace {
// How passes are cut (ResNet-50 batch 8, Intel Xeon family 6 model 167, `zenith.profile`,
// 3 processes each, time per class of conv): filters up to 1 MiB transformed (64 and 128
// channels) run fused passes of 1 MiB of V and M per thread (56 x 56 maps 0.85x the
// time of passes of a whole image, 28 x 28 0.96x; 384 KiB 1.10x / 1.36x, 2 MiB 1.06x /
// 1.03x); larger filters, where a fused pass would read U for a few tiles (14 x 14
// 1.08x, 7 x 7 1.34x), run passes of whole images of 8 MiB, which read U once for 8
// images at 7 x 7 (4 MiB: 1.25x the time at 7 x 7, 1.05x at 14 x 14).
constexpr int64_t kWinogradFusedFilterBytes = int64_t(1) << 20, kWinogradRowsBytes = int64_t(1) << 20;
constexpr int64_t kWinogradPassBytes = int64_t(8) << 20;

NchwcConvGeom winograd_gemm_geom(const NchwcConvGeom& g, int64_t tiles) {
  NchwcConvGeom p;
  p.N = 1, p.C = g.C, p.H = 1, p.W = tiles, p.OC = g.OC, p.OH = 1, p.OW = tiles, p.KH = 1, p.KW = 1, p.L = g.L;
  return p;
}

// One row i of tiles of one image's channel block (`plane`, H x W x L): tile j's 16
// transformed vectors to v + xi * xs + j * L. B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
template <int L>
ZENITH_UK_INLINE void winograd_input_row(const float* plane, int64_t H, int64_t W, int64_t i, int64_t tw, float* v,
                                         int64_t xs) {
  using Vec = F32Vec<L>;
  using V = typename Vec::V;
  for (int64_t j = 0; j < tw; ++j) {
    V t[4][4];  // d B, row by row of the patch at (2i - 1, 2j - 1), zero outside the image
    for (int r = 0; r < 4; ++r) {
      const int64_t y = 2 * i - 1 + r;
      V d[4];
      for (int c = 0; c < 4; ++c) {
        const int64_t xx = 2 * j - 1 + c;
        if (y >= 0 && y < H && xx >= 0 && xx < W)
          Vec::load(d[c], plane + (y * W + xx) * L);
        else
          d[c] = V{};
      }
      t[r][0] = d[0] - d[2];
      t[r][1] = d[1] + d[2];
      t[r][2] = d[2] - d[1];
      t[r][3] = d[1] - d[3];
    }
    float* o = v + j * L;
    for (int k = 0; k < 4; ++k) {
      Vec::store(o + k * xs, t[0][k] - t[2][k]);
      Vec::store(o + (4 + k) * xs, t[1][k] + t[2][k]);
      Vec::store(o + (8 + k) * xs, t[2][k] - t[1][k]);
      Vec::store(o + (12 + k) * xs, t[1][k] - t[3][k]);
    }
  }
}

// One output pixel's L channels from a finished Winograd sum y (scaled and shifted):
// + residual, ReLU (RELU), stored at out + at.
template <int L, bool RELU, class V>
ZENITH_UK_INLINE void winograd_store(V y, const float* res, float* out, int64_t at) {
  using Vec = F32Vec<L>;
  if (res) {
    V rv;
    Vec::load(rv, res + at);
    y += rv;
  }
  if constexpr (RELU) register_activation<1>(y);
  Vec::store(out + at, y);
}

// One row i of tiles of one output block: tile j's 16 vectors at m + xi * xs + j * L
// (A^T = [1 1 1 0; 0 1 -1 -1]) to output pixels (2i + a, 2j + b) inside the map, each
// act(sum * sc + sh + res) (ReLU here, other activations by the caller).
template <int L, bool RELU>
ZENITH_UK_INLINE void winograd_output_row(const float* m, int64_t xs, int64_t tw, int64_t i, int64_t H, int64_t W,
                                          const float* sc, const float* sh, const float* res, float* out) {
  using Vec = F32Vec<L>;
  using V = typename Vec::V;
  V s, b;
  Vec::load(s, sc);
  Vec::load(b, sh);
  for (int64_t j = 0; j < tw; ++j) {
    V t[2][4];  // A^T m
    for (int c = 0; c < 4; ++c) {
      V m0, m1, m2, m3;
      Vec::load(m0, m + c * xs + j * L);
      Vec::load(m1, m + (4 + c) * xs + j * L);
      Vec::load(m2, m + (8 + c) * xs + j * L);
      Vec::load(m3, m + (12 + c) * xs + j * L);
      t[0][c] = m0 + m1 + m2;
      t[1][c] = m1 - m2 - m3;
    }
    for (int a = 0; a < 2; ++a) {
      const int64_t y = 2 * i + a;
      if (y >= H) break;
      V o[2] = {t[a][0] + t[a][1] + t[a][2], t[a][1] - t[a][2] - t[a][3]};
      for (int c = 0; c < 2; ++c) {
        const int64_t xx = 2 * j + c;
        if (xx >= W) break;
        winograd_store<L, RELU>(o[c] * s + b, res, out, (y * W + xx) * L);
      }
    }
  }
}

// F(4x4, 3x3): 4x4 outputs from a 6x6 patch, 36 products per (input, output) channel
// pair instead of 144 (F(2x2, 3x3): 64 for the same outputs), the points 0, +-1, +-2 and
// infinity (Lavin and Gray). Position xi = 6 k + l: row transform k, column transform l.
// B^T's rows on z[0..5], in the order of the products as below:
//   [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
template <class V>
ZENITH_UK_INLINE void winograd4_bt(const V (&z)[6], V (&o)[6]) {
  const V a = z[4] - 4.0f * z[2], b = 4.0f * z[1] - z[3], c = z[4] - z[2], d = 2.0f * (z[1] - z[3]);
  o[0] = 4.0f * z[0] - 5.0f * z[2] + z[4];
  o[1] = a - b;
  o[2] = a + b;
  o[3] = c - d;
  o[4] = c + d;
  o[5] = 4.0f * z[1] - 5.0f * z[3] + z[5];
}
// A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1] on m[0..5].
template <class V>
ZENITH_UK_INLINE void winograd4_at(const V (&m)[6], V (&y)[4]) {
  const V s12 = m[1] + m[2], d12 = m[1] - m[2], s34 = m[3] + m[4], d34 = m[3] - m[4];
  y[0] = m[0] + s12 + s34;
  y[1] = d12 + 2.0f * d34;
  y[2] = s12 + 4.0f * s34;
  y[3] = d12 + 8.0f * d34 + m[5];
}

// F(4x4)'s winograd_input_row: tile j's patch at (4i - 1, 4j - 1), 36 vectors.
template <int L>
ZENITH_UK_INLINE void winograd4_input_row(const float* plane, int64_t H, int64_t W, int64_t i, int64_t tw, float* v,
                                          int64_t xs) {
  using Vec = F32Vec<L>;
  using V = typename Vec::V;
  constexpr int64_t kAhead = 2;
  for (int64_t j = 0; j < tw; ++j) {
    const int64_t y0 = 4 * i - 1, x0 = 4 * j - 1;
    const bool inside = y0 >= 0 && y0 + 6 <= H && x0 >= 0 && x0 + 6 <= W;
    // The input rows' pixels two tiles on, which the patch of tile j + 2 adds (its last 4),
    // prefetched: the loads below had waited on memory (Zen 4, 64 channels on 56 x 56 at
    // batch 8, caches flushed: 0.86x the conv's time; 128 on 28 x 28 0.94x; ResNet-50
    // 0.986x at batch 8, 0.993x at batch 1, calls interleaved in one process).
    if (x0 + 4 * kAhead + 6 <= W)
      for (int r = 0; r < 6; ++r)
        if (y0 + r >= 0 && y0 + r < H) {
          const float* q = plane + ((y0 + r) * W + x0 + 4 * kAhead + 2) * L;
          for (int line = 0; line < 4 * L / 16; ++line) __builtin_prefetch(q + 16 * line);
        }
    V t[6][6];  // d B^T's columns, patch row by row
    for (int r = 0; r < 6; ++r) {
      const int64_t y = y0 + r;
      V d[6];
      for (int c = 0; c < 6; ++c) {
        const int64_t xx = x0 + c;
        if (inside || (y >= 0 && y < H && xx >= 0 && xx < W))
          Vec::load(d[c], plane + (y * W + xx) * L);
        else
          d[c] = V{};
      }
      winograd4_bt(d, t[r]);
    }
    float* o = v + j * L;
    for (int l = 0; l < 6; ++l) {
      const V z[6] = {t[0][l], t[1][l], t[2][l], t[3][l], t[4][l], t[5][l]};
      V q[6];
      winograd4_bt(z, q);
      for (int k = 0; k < 6; ++k) Vec::store(o + (6 * k + l) * xs, q[k]);
    }
  }
}

// F(4x4)'s winograd_output_row: tile j's 36 vectors to output pixels (4i + a, 4j + b).
template <int L, bool RELU>
ZENITH_UK_INLINE void winograd4_output_row(const float* m, int64_t xs, int64_t tw, int64_t i, int64_t H, int64_t W,
                                           const float* sc, const float* sh, const float* res, float* out) {
  using Vec = F32Vec<L>;
  using V = typename Vec::V;
  V s, b;
  Vec::load(s, sc);
  Vec::load(b, sh);
  for (int64_t j = 0; j < tw; ++j) {
    V t[4][6];  // A^T m, column by column
    for (int l = 0; l < 6; ++l) {
      V z[6], y[4];
      for (int k = 0; k < 6; ++k) Vec::load(z[k], m + (6 * k + l) * xs + j * L);
      winograd4_at(z, y);
      for (int a = 0; a < 4; ++a) t[a][l] = y[a];
    }
    for (int a = 0; a < 4; ++a) {
      const int64_t y = 4 * i + a;
      if (y >= H) break;
      V o[4];
      winograd4_at(t[a], o);
      for (int c = 0; c < 4; ++c) {
        const int64_t xx = 4 * j + c;
        if (xx >= W) break;
        winograd_store<L, RELU>(o[c] * s + b, res, out, (y * W + xx) * L);
      }
    }
  }
}

using WinogradInFn = void (*)(const float*, int64_t, int64_t, int64_t, int64_t, float*, int64_t);
using WinogradOutFn = void (*)(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, const float*, const float*,
                               const float*, float*);
// One instantiation per ISA, block, tile size M (F(M x M, 3x3)) and ReLU.
#define ZENITH_WINOGRAD_ROWS(name, target, L)                                                                        \
  template <int M>                                                                                                   \
  target void name##_in(const float* plane, int64_t H, int64_t W, int64_t i, int64_t tw, float* v, int64_t xs) {    \
    if constexpr (M == 4)                                                                                            \
      winograd4_input_row<L>(plane, H, W, i, tw, v, xs);                                                             \
    else                                                                                                             \
      winograd_input_row<L>(plane, H, W, i, tw, v, xs);                                                              \
  }                                                                                                                  \
  template <int M, bool RELU>                                                                                        \
  target void name##_out(const float* m, int64_t xs, int64_t tw, int64_t i, int64_t H, int64_t W, const float* sc,  \
                         const float* sh, const float* res, float* out) {                                            \
    if constexpr (M == 4)                                                                                            \
      winograd4_output_row<L, RELU>(m, xs, tw, i, H, W, sc, sh, res, out);                                           \
    else                                                                                                             \
      winograd_output_row<L, RELU>(m, xs, tw, i, H, W, sc, sh, res, out);                                            \
  }
#if defined(__x86_64__)
ZENITH_WINOGRAD_ROWS(winograd_l16_avx512, __attribute__((target("avx512f"))), 16)
#endif
ZENITH_WINOGRAD_ROWS(winograd_l16_avx2, ZENITH_UK_TARGET_avx2, 16)
ZENITH_WINOGRAD_ROWS(winograd_l8_avx2, ZENITH_UK_TARGET_avx2, 8)
#undef ZENITH_WINOGRAD_ROWS

struct WinogradRows {
  WinogradInFn in;
  WinogradOutFn out;
};
#define ZENITH_PICK_ROWS(name)                                                                                  \
  return m == 4 ? WinogradRows{name##_in<4>, relu ? name##_out<4, true> : name##_out<4, false>}                   \
                : WinogradRows{name##_in<2>, relu ? name##_out<2, true> : name##_out<2, false>}
// The row transforms of F(m x m, 3x3), m 2 or 4.
WinogradRows pick_winograd_rows(int64_t L, int m, bool relu) {
  if (L == 16) {
#if defined(__x86_64__)
    if (gemm_detail::kernels_use_avx512()) ZENITH_PICK_ROWS(winograd_l16_avx512);
#endif
    ZENITH_PICK_ROWS(winograd_l16_avx2);
  }
  ZENITH_PICK_ROWS(winograd_l8_avx2);
}
#undef ZENITH_PICK_ROWS

// The Winograd filters of F(m x m, 3x3), U[xi] = (G g G^T)[xi] for each of the P = (m + 2)^2
// positions xi, written straight into conv3x3_winograd_nchwc's layout: U[xi] packed as a
// 1x1 conv's filters (pack_filter_groups of winograd_gemm_geom: groups of kNB * L output
// channels, [C][kNB * L] each; C and OC whole blocks), xi_floats apart. A group's input
// channels go through a tile [P][kChunk][kNB * L] in chunks, each position's part copied
// out whole: writing each pair's P values straight to their places (P streams a whole
// U[xi] apart, a multiple of 4 KiB for ResNet's channel counts) kept P partly written
// lines in one cache set, and before that the transform went through U in OIHW order
// first. Zen 4, 2 threads, F(2x2), a fresh allocation each time: 512 x 512 filters 9.3
// -> 5.9 ms (2.6 into a buffer already paged in: conv2d's per-call pack), 256 x 256 2.2
// -> 0.3; the scalar transform through the tile took 6.2 and 1.4 ms paged in.
template <int m>
void pack_winograd_filters(const NchwcConvGeom& g, const float* w, float* d, int64_t xi_floats) {
  constexpr int P = (m + 2) * (m + 2);
  constexpr int64_t kChunk = 16, kMaxJ = kNB * 16;
  const int64_t J = kNB * g.L, groups = (g.OC / g.L + kNB - 1) / kNB, C = g.C;
  parallel_for(groups, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> tile(size_t(P * kChunk * J));
    for (int64_t grp = lo; grp < hi; ++grp) {
      const int64_t oc0 = grp * J, nj = std::min(J, g.OC - oc0);
      for (int64_t ic0 = 0; ic0 < C; ic0 += kChunk) {
        const int64_t nc = std::min(kChunk, C - ic0);
        if constexpr (m == 4) {  // (a blocked chain's F(4x4): mostly constant filters, packed once)
          if (nj < J) std::fill(tile.begin(), tile.end(), 0.0f);  // a last group of one block
          for (int64_t j = 0; j < nj; ++j)
            for (int64_t i = 0; i < nc; ++i) {
              float u[P];
              winograd_filter_f4(w + ((oc0 + j) * C + ic0 + i) * 9, u);
              for (int xi = 0; xi < P; ++xi) tile[size_t((xi * kChunk + i) * J + j)] = u[xi];
            }
        } else {
          // F(2x2) also packs a training step's filters on every call: its transform runs
          // across the group's output channels, the vector lanes of the tile's rows
          // (winograd_filter_f2's arithmetic, in the same order).
          for (int64_t i = 0; i < nc; ++i) {
            alignas(64) float gt[9][kMaxJ];
            for (int64_t j = 0; j < J; ++j) {
              const float* gw = w + ((oc0 + j) * C + ic0 + i) * 9;
              for (int k = 0; k < 9; ++k) gt[k][j] = j < nj ? gw[k] : 0.0f;
            }
            float* d0 = tile.data() + i * J;
            const int64_t xs = kChunk * J;  // between positions in the tile
            for (int64_t j = 0; j < J; ++j) {
              float t[4][3];  // G g
              for (int c = 0; c < 3; ++c) {
                t[0][c] = gt[c][j];
                t[1][c] = 0.5f * (gt[c][j] + gt[3 + c][j] + gt[6 + c][j]);
                t[2][c] = 0.5f * (gt[c][j] - gt[3 + c][j] + gt[6 + c][j]);
                t[3][c] = gt[6 + c][j];
              }
              for (int r = 0; r < 4; ++r) {  // (G g) G^T
                d0[(r * 4 + 0) * xs + j] = t[r][0];
                d0[(r * 4 + 1) * xs + j] = 0.5f * (t[r][0] + t[r][1] + t[r][2]);
                d0[(r * 4 + 2) * xs + j] = 0.5f * (t[r][0] - t[r][1] + t[r][2]);
                d0[(r * 4 + 3) * xs + j] = t[r][2];
              }
            }
          }
        }
        for (int xi = 0; xi < P; ++xi)
          std::copy_n(tile.data() + xi * kChunk * J, nc * J, d + xi * xi_floats + (grp * C + ic0) * J);
      }
    }
  });
}

void check_winograd_geom(const NchwcConvGeom& g) {
  check_geom(g);
  const std::array<int64_t, 2> one{1, 1};
  ZENITH_CHECK(g.KH == 3 && g.KW == 3 && g.st == one && g.pd == one && g.dl == one && g.OH == g.H && g.OW == g.W,
               "conv2d_nchwc: Winograd runs 3x3 convs of stride 1 and padding 1 only");
  ZENITH_CHECK(g.C % g.L == 0 && g.OC % g.L == 0, "conv2d_nchwc: Winograd needs whole channel blocks, got ", g.C,
               " and ", g.OC, " channels for blocks of ", g.L);
}
}  // namespace

int64_t winograd_nchwc_packed_floats(const NchwcConvGeom& g, int m) {
  return (m + 2) * (m + 2) * packed_filter_floats(winograd_gemm_geom(g, 1));  // U[xi] as a 1x1 conv's filters
}

PackedOperand conv3x3_winograd_nchwc_pack(const NchwcConvGeom& g, const float* w, int m, float* into) {
  check_winograd_geom(g);
  ZENITH_CHECK(m == 2 || m == 4, "conv2d_nchwc: Winograd tiles are 2x2 or 4x4, not ", m, "x", m);
  const int64_t xi_floats = packed_filter_floats(winograd_gemm_geom(g, 1));
  PackedOperand p = alloc_packed(m == 4 ? PackedOperand::kWinograd4 : PackedOperand::kWinograd, g, w, 9,
                                 winograd_nchwc_packed_floats(g, m), into);
  if (m == 4)
    pack_winograd_filters<4>(g, w, p.data.get(), xi_floats);
  else
    pack_winograd_filters<2>(g, w, p.data.get(), xi_floats);
  p.winograd_unsafe = nonfinite_images(w, 1, g.OC * g.C * 9, kWinogradLimit)[0];
  return p;
}

void conv3x3_winograd_nchwc(const NchwcConvGeom& g, const float* x, const PackedOperand& w, const float* scale,
                            const float* shift, const float* res, Activation act, float* out) {
  using gemm_detail::AlignedBuf;
  check_winograd_geom(g);
  const int64_t L = g.L, CB = g.C / L, OCB = g.OC / L, groups = (OCB + kNB - 1) / kNB, HW = g.H * g.W;
  ZENITH_CHECK((w.side == PackedOperand::kWinograd || w.side == PackedOperand::kWinograd4) && w.isa == uint8_t(L) &&
                   w.rows == g.OC && w.cols == g.C * 9,
               "conv2d_nchwc: the packed Winograd filters are not this conv's");
  if (g.N == 0) return;
  // F(m x m, 3x3) as the filters were packed: P = (m + 2)^2 positions.
  const int64_t m = w.side == PackedOperand::kWinograd4 ? 4 : 2, P = (m + 2) * (m + 2);
  const int64_t th = (g.H + m - 1) / m, tw = (g.W + m - 1) / m;
  const int64_t group_floats = CB * L * kNB * L, xi_floats = groups * group_floats;
  std::vector<float> sc, sh;
  channel_scale_shift(scale, shift, g.OC, g.OC, sc, sh);
  // The products' own epilogue: scale 1 and shift 0 for a group's channels.
  static const std::vector<float> ones(kNB * 16, 1.0f), zeros(kNB * 16, 0.0f);
  // Each M[xi] by the 1x1 run kernel over the pass's tiles: it sums in the generic tile's
  // order (the same M), and took 0.89-0.96x the tile's time alone (C++, Zen 4 family 25
  // model 17, 2 threads, caches flushed; ResNet-50's four shapes at batch 1 and 8),
  // ResNet-50 0.956x / 0.966x at batch 8 and 0.972x / 0.980x at batch 1 (AVX-512 / AVX2
  // paths, calls interleaved in one process).
  const PwRunFns run = pick_pw_run(L, Activation::kNone);
  const WinogradRows fns = pick_winograd_rows(L, int(m), act == Activation::kRelu);
  const Activation rest = act == Activation::kRelu ? Activation::kNone : act;  // applied after the rows

  // A pass: tile rows [i0, i0 + rows) of images [n0, n0 + nb), S = nb * rows * tw tiles,
  // tile (b, i, j) the pass's tile (b * rows + i - i0) * tw + j. Each stage runs items
  // [lo, hi) of its own.
  struct Pass {
    int64_t n0, nb, i0, rows, S;
  };
  auto stage_in = [&](const Pass& p, float* V, int64_t lo, int64_t hi) {  // items (b, cb, i)
    for (int64_t it = lo; it < hi; ++it) {
      const int64_t b = it / (CB * p.rows), cb = it / p.rows % CB, i = it % p.rows;
      fns.in(x + ((p.n0 + b) * CB + cb) * HW * L, g.H, g.W, p.i0 + i, tw, V + (cb * p.S + (b * p.rows + i) * tw) * L,
             CB * p.S * L);
    }
  };
  auto stage_gemm = [&](const Pass& p, const float* V, float* M, int64_t lo, int64_t hi) {  // items (xi, group)
    // Each item prefetches the next one's filters into L2, a slice per full-width tile, while its
    // own stream in (ResNet-50 batch 1, `zenith.profile`: 3x3 convs on 14 x 14 and 7 x 7
    // maps 0.81-0.82x the time, 28 x 28 0.87x).
    const int64_t full = prefetch_full_tiles(p.S, run.ro, run.tail_ro);
    const int64_t lines_tile = (group_floats / 16 + full - 1) / full;
    const int pf_lines = int((lines_tile + CB - 1) / CB);
    for (int64_t it = lo; it < hi; ++it) {
      const int64_t xi = it / groups, grp = it % groups, ob = grp * kNB;
      const float* f = w.data.get() + xi * xi_floats + grp * group_floats;
      const Prefetch pf = group_prefetch(  // item it + 1's filters come next
          it + 1 < hi ? w.data.get() + (it + 1) / groups * xi_floats + (it + 1) % groups * group_floats : nullptr,
          group_floats, pf_lines);
      run({V + xi * CB * p.S * L, p.S * L, g.C, f, ones.data(), zeros.data(), nullptr, Activation::kNone,
           M + (xi * OCB + ob) * p.S * L, p.S * L, p.S, int(std::min<int64_t>(kNB, OCB - ob)), pf});
    }
  };
  auto stage_out = [&](const Pass& p, const float* M, int64_t lo, int64_t hi) {  // items (b, ob, i)
    for (int64_t it = lo; it < hi; ++it) {
      const int64_t b = it / (OCB * p.rows), ob = it / p.rows % OCB, i = p.i0 + it % p.rows;
      const int64_t at = ((p.n0 + b) * OCB + ob) * HW * L;
      fns.out(M + (ob * p.S + (b * p.rows + i - p.i0) * tw) * L, OCB * p.S * L, tw, i, g.H, g.W, sc.data() + ob * L,
              sh.data() + ob * L, res ? res + at : nullptr, out + at);
      if (rest == Activation::kNone) continue;
      // the tile row's output rows
      activate_run(rest, out + at + m * i * g.W * L, (std::min<int64_t>(m * i + m, g.H) - m * i) * g.W * L);
    }
  };
  const int64_t row_bytes = P * (CB + OCB) * L * tw * int64_t(sizeof(float));  // V and M per tile row
  if (P * xi_floats * int64_t(sizeof(float)) <= kWinogradFusedFilterBytes) {
    // Filters that fit in L2 beside a pass: each thread runs whole passes of a few tile
    // rows of one image, all three stages, so V and M stay in its L2.
    const int64_t most = std::clamp<int64_t>(kWinogradRowsBytes / row_bytes, 1, th);
    const int64_t chunks = balanced_parts(g.N, (th + most - 1) / most, th), rows = (th + chunks - 1) / chunks;
    parallel_for(g.N * chunks, 1, [&](int64_t lo, int64_t hi) {
      thread_local AlignedBuf vbuf, mbuf;
      float* V = vbuf.get(size_t(P * CB * L * rows * tw));
      float* M = mbuf.get(size_t(P * OCB * L * rows * tw));
      for (int64_t it = lo; it < hi; ++it) {
        const int64_t n = it / chunks, c = it % chunks, i0 = th * c / chunks, r = th * (c + 1) / chunks - i0;
        const Pass p{n, 1, i0, r, r * tw};
        stage_in(p, V, 0, CB * r);
        stage_gemm(p, V, M, 0, P * groups);
        stage_out(p, M, 0, OCB * r);
      }
      vbuf.trim(size_t(16) << 20);
      mbuf.trim(size_t(16) << 20);
    });
    return;
  }
  // Larger filters: passes of whole images (as many as kWinogradPassBytes of V and M
  // hold), each stage split between the threads, so a pass reads U once.
  const int64_t imgs = std::clamp<int64_t>(kWinogradPassBytes / (row_bytes * th), 1, g.N);
  thread_local AlignedBuf vbuf, mbuf;
  float* V = vbuf.get(size_t(P * CB * L * imgs * th * tw));
  float* M = mbuf.get(size_t(P * OCB * L * imgs * th * tw));
  for (int64_t n0 = 0; n0 < g.N; n0 += imgs) {
    const int64_t nb = std::min(imgs, g.N - n0);
    const Pass p{n0, nb, 0, th, nb * th * tw};
    parallel_for(nb * CB * th, 1, [&](int64_t lo, int64_t hi) { stage_in(p, V, lo, hi); });
    // Position after position: each thread reads the U of its positions once per pass.
    parallel_for(P * groups, 1, [&](int64_t lo, int64_t hi) { stage_gemm(p, V, M, lo, hi); });
    parallel_for(nb * OCB * th, 1, [&](int64_t lo, int64_t hi) { stage_out(p, M, lo, hi); });
  }
  vbuf.trim(size_t(16) << 20);
  mbuf.trim(size_t(16) << 20);
}

// ---- Depthwise over the blocked layout ----
// A depthwise conv (groups == C == OC: MobileNets' and EfficientNets' 3x3 and 5x5 convs
// between their 1x1 convs) multiplies each channel by its own filter, so in the blocked
// layout a tap is one vector FMA per output pixel: the pixel's L input channels by the
// tap's L filter values, no transposes (the NCHW kernel, depthwise.cc, transposes small
// maps in and out for the same effect), and the 1x1 convs on either side stay blocked.
// An item is a band of output rows of one image's channel block: its input rows are
// first copied into the thread's buffer with the padding around them written as zeros,
// so the inner loop has no bounds checks and a row's last tile may run past the row
// (those pixels are computed and not stored). A register tile of RO output pixels of a
// row sums every tap, row by row then column as the scalar reference does, loading the
// tap's filter vector once per tile; the epilogue is conv2d_nchwc's (scale, shift,
// residual; ReLU and ReLU6 in registers, the other activations over the stored row).
namespace nchwc_detail {
namespace {
// Output rows [b.oh0, b.oh1) of one channel block from its padded band xp; w: the
// block's packed taps [KH * KW][L]; out / res: the block's output plane; S the column
// stride (0: g.st[1] at run time); K the filter's width when known (its columns
// undilated; 0: g.KW at run time); ACT 1 ReLU, 2 ReLU6, 0 none (or applied after).
// With K, a row of taps loads each input pixel the tile reads once, (RO - 1) * S + K
// loads, and adds it to every pixel whose window holds it, where loading per pixel and
// tap took RO * K; each pixel still sums its taps row by row, then column by column.
template <int VL, int L, int RO, int S, int K, int ACT>
ZENITH_UK_INLINE void dw_band(const NchwcConvGeom& g, const DwBand& b, const float* xp, const float* w,
                              const float* sc, const float* sh, const float* res, float* out) {
  using Vec = F32Vec<VL>;
  using V = typename Vec::V;
  constexpr int BV = L / VL;
  const int64_t sw = S > 0 ? S : g.st[1], row = b.pitch * L;
  V scale[BV], shift[BV];
  for (int v = 0; v < BV; ++v) {
    Vec::load(scale[v], sc + v * VL);
    Vec::load(shift[v], sh + v * VL);
  }
  for (int64_t oh = b.oh0; oh < b.oh1; ++oh) {
    const float* xr = xp + (oh - b.oh0) * g.st[0] * row;
    for (int64_t ow0 = 0; ow0 < g.OW; ow0 += RO) {
      V acc[RO][BV];
#pragma GCC unroll 16
      for (int r = 0; r < RO; ++r)
        for (int v = 0; v < BV; ++v) acc[r][v] = V{};
      for (int64_t kh = 0; kh < g.KH; ++kh) {
        const float* xk = xr + kh * g.dl[0] * row + ow0 * sw * L;
        if constexpr (K > 0) {
          static_assert(S > 0, "a known filter width needs a known stride");
          const float* wr = w + kh * K * L;
          V f[K][BV];
          for (int kw = 0; kw < K; ++kw)
            for (int v = 0; v < BV; ++v) Vec::load(f[kw][v], wr + kw * L + v * VL);
          // Input pixel j of the row feeds output pixel r through tap kw = j - r * S.
#pragma GCC unroll 32
          for (int j = 0; j < (RO - 1) * S + K; ++j) {
            V xv[BV];
            for (int v = 0; v < BV; ++v) Vec::load(xv[v], xk + j * L + v * VL);
#pragma GCC unroll 8
            for (int kw = 0; kw < K; ++kw) {
              const int d = j - kw;
              if (d < 0 || d % S != 0 || d / S >= RO) continue;
              for (int v = 0; v < BV; ++v) acc[d / S][v] += xv[v] * f[kw][v];
            }
          }
          continue;
        }
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          const float* xt = xk + kw * g.dl[1] * L;
          const float* wt = w + (kh * g.KW + kw) * L;
          V f[BV];
          for (int v = 0; v < BV; ++v) Vec::load(f[v], wt + v * VL);
#pragma GCC unroll 16
          for (int r = 0; r < RO; ++r)
            for (int v = 0; v < BV; ++v) {
              V xv;
              Vec::load(xv, xt + r * sw * L + v * VL);
              acc[r][v] += xv * f[v];
            }
        }
      }
      const int64_t mr = std::min<int64_t>(RO, g.OW - ow0);
      for (int r = 0; r < RO; ++r) {
        if (r >= mr) break;
        const int64_t at = (oh * g.OW + ow0 + r) * L;
        for (int v = 0; v < BV; ++v) {
          V y = acc[r][v] * scale[v] + shift[v];
          if (res) {
            V rv;
            Vec::load(rv, res + at + v * VL);
            y += rv;
          }
          register_activation<ACT>(y);
          Vec::store(out + at + v * VL, y);
        }
      }
    }
  }
}

// One instantiation per ISA, block, column stride and in-register activation: 7-pixel
// tiles (MobileNets' maps are multiples of 7 wide) where a pixel is one vector, 4 where
// it is two (L = 16 on AVX2), so the accumulators stay in registers.
#define ZENITH_DW_BAND(name, target, VL, L, RO)                                                                      \
  template <int S, int K, int ACT>                                                                                   \
  target void name(const NchwcConvGeom& g, const DwBand& b, const float* xp, const float* w, const float* sc,       \
                   const float* sh, const float* res, float* out) {                                                  \
    dw_band<VL, L, RO, S, K, ACT>(g, b, xp, w, sc, sh, res, out);                                                    \
  }
#if defined(__x86_64__)
ZENITH_DW_BAND(dw_l16_avx512, ZENITH_UK_TARGET_avx512, 16, 16, 7)
#endif
ZENITH_DW_BAND(dw_l16_avx2, ZENITH_UK_TARGET_avx2, 8, 16, 4)
ZENITH_DW_BAND(dw_l8_avx2, ZENITH_UK_TARGET_avx2, 8, 8, 7)
#undef ZENITH_DW_BAND

template <int S, int K>
DwBandFn pick_dw_act(int64_t L, int act, int64_t* ro) {
  if (L == 16) {
#if defined(__x86_64__)
    if (gemm_detail::kernels_use_avx512()) {
      *ro = 7;
      return act == 1 ? dw_l16_avx512<S, K, 1> : act == 2 ? dw_l16_avx512<S, K, 2> : dw_l16_avx512<S, K, 0>;
    }
#endif
    *ro = 4;
    return act == 1 ? dw_l16_avx2<S, K, 1> : act == 2 ? dw_l16_avx2<S, K, 2> : dw_l16_avx2<S, K, 0>;
  }
  *ro = 7;
  return act == 1 ? dw_l8_avx2<S, K, 1> : act == 2 ? dw_l8_avx2<S, K, 2> : dw_l8_avx2<S, K, 0>;
}
// The filter's width built in (K) for undilated 3-column filters. Zen 4 (family 25
// model 17, 2 threads): one depthwise conv alone in cache 1.25-1.35x faster at stride 1
// (144 channels on 28 x 28 and 56 x 56, 384 on 14 x 14), 1.10x at stride 2, 1.08x on
// 7 x 7; MobileNet V2 (calls interleaved in one process) batch 8 0.976x the time, batch
// 1 0.988x, on the AVX2 kernels batch 8 0.978x. 5 columns ran 1.7-1.8x slower built in
// (left at run time; the cause, likely registers, is not found).
template <int S>
DwBandFn pick_dw_k(const NchwcConvGeom& g, int act, int64_t* ro) {
  if (g.dl[1] == 1 && g.KW == 3) return pick_dw_act<S, 3>(g.L, act, ro);
  return pick_dw_act<S, 0>(g.L, act, ro);
}
}  // namespace

// The band kernel for this conv and its tile's width (*ro).
DwBandFn pick_dw_band(const NchwcConvGeom& g, Activation a, int64_t* ro) {
  const int act = register_act(a);
  return g.st[1] == 1 ? pick_dw_k<1>(g, act, ro) : g.st[1] == 2 ? pick_dw_k<2>(g, act, ro)
                                                                : pick_dw_act<0, 0>(g.L, act, ro);
}

void dw_pad_rows(const NchwcConvGeom& g, const float* plane, int64_t first, int64_t rows, int64_t pitch, float* xp) {
  const int64_t L = g.L;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t ih = first + r - g.pd[0];
    float* d = xp + r * pitch * L;
    if (ih < 0 || ih >= g.H) {
      std::fill_n(d, pitch * L, 0.0f);
      continue;
    }
    std::fill_n(d, g.pd[1] * L, 0.0f);
    std::memcpy(d + g.pd[1] * L, plane + ih * g.W * L, size_t(g.W * L) * sizeof(float));
    std::fill_n(d + (g.pd[1] + g.W) * L, (pitch - g.pd[1] - g.W) * L, 0.0f);
  }
}

// Padded columns: the input's, and every column a row's last tile reads.
int64_t dw_pitch(const NchwcConvGeom& g, int64_t ro) {
  const int64_t tiles = (g.OW + ro - 1) / ro;
  return std::max(g.pd[1] + g.W, (tiles * ro - 1) * g.st[1] + (g.KW - 1) * g.dl[1] + 1);
}

namespace {
void check_dw_geom(const NchwcConvGeom& g) {
  check_geom(g);
  ZENITH_CHECK(g.groups == g.C && g.C == g.OC, "depthwise_nchwc: needs groups == C == OC, got ", g.groups, ", ",
               g.C, " and ", g.OC);
}
}  // namespace
}  // namespace nchwc_detail

PackedOperand depthwise_nchwc_pack(const NchwcConvGeom& g, const float* w) {
  check_dw_geom(g);
  const int64_t L = g.L, CB = (g.C + L - 1) / L, taps = g.KH * g.KW;
  // [CB][taps][L], zero past C.
  PackedOperand p = alloc_packed(PackedOperand::kNchwcDepthwise, g, w, taps, CB * taps * L);
  p.cols = taps;  // a row per channel: [C, 1, KH, KW]
  p.rs = taps;
  float* d = p.data.get();
  std::fill_n(d, CB * taps * L, 0.0f);
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t t = 0; t < taps; ++t) d[(c / L * taps + t) * L + c % L] = w[c * taps + t];
  return p;
}

void depthwise_nchwc(const NchwcConvGeom& g, const float* x, const PackedOperand& w, const float* scale,
                     const float* shift, const float* res, Activation act, float* out) {
  using gemm_detail::AlignedBuf;
  check_dw_geom(g);
  const int64_t L = g.L, CB = (g.C + L - 1) / L, taps = g.KH * g.KW, HW = g.H * g.W, OP = g.OH * g.OW;
  ZENITH_CHECK(w.side == PackedOperand::kNchwcDepthwise && w.isa == uint8_t(L) && w.rows == g.C && w.cols == taps,
               "depthwise_nchwc: the packed filters are not this conv's");
  if (g.N == 0 || g.OH == 0 || g.OW == 0) return;
  int64_t ro = 0;
  const DwBandFn band = pick_dw_band(g, act, &ro);
  const Activation rest = register_act(act) ? Activation::kNone : act;
  std::vector<float> sc, sh;
  channel_scale_shift(scale, shift, g.C, CB * L, sc, sh);
  // Bands: a whole plane per item where the images' blocks give each thread a few,
  // else each plane's rows split so that they do.
  const int64_t bands = std::clamp<int64_t>((4 * num_threads() + g.N * CB - 1) / (g.N * CB), 1, g.OH);
  const int64_t band_rows = (g.OH + bands - 1) / bands;
  const int64_t pitch = dw_pitch(g, ro);
  parallel_for(g.N * CB * bands, 1, [&](int64_t lo, int64_t hi) {
    thread_local AlignedBuf buf;
    for (int64_t it = lo; it < hi; ++it) {
      const int64_t plane = it / bands, cb = plane % CB, oh0 = it % bands * band_rows;
      if (oh0 >= g.OH) continue;
      DwBand b{oh0, std::min(g.OH, oh0 + band_rows), 0, pitch};
      b.rows = (b.oh1 - 1 - oh0) * g.st[0] + (g.KH - 1) * g.dl[0] + 1;
      float* xp = buf.get(size_t(b.rows * pitch * L));
      const float* xs = x + plane * HW * L;
      dw_pad_rows(g, xs, oh0 * g.st[0], b.rows, pitch, xp);
      float* o = out + plane * OP * L;
      band(g, b, xp, w.data.get() + cb * taps * L, sc.data() + cb * L, sh.data() + cb * L,
           res ? res + plane * OP * L : nullptr, o);
      if (rest == Activation::kNone) continue;
      activate_run(rest, o + b.oh0 * g.OW * L, (b.oh1 - b.oh0) * g.OW * L);
    }
    buf.trim(size_t(4) << 20);
  });
  zero_padding_channels(g, out);
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
  const bool codes_in = x.dtype == DType::u8;  // int8 codes [N, H, W, C]
  g.N = x.shape[0], g.H = x.shape[codes_in ? 1 : 2], g.W = x.shape[codes_in ? 2 : 3];
  g.nchw_in = at.block != 0 && !codes_in;  // an NCHW input; the output's block is the attribute
  g.L = at.block ? at.block : x.shape[4];
  g.groups = at.groups;
  if (w.dtype == DType::u8) {  // int8 rows [OC, 4 + C * KH * KW]
    g.OC = w.shape[0], g.KH = at.kernel[0], g.KW = at.kernel[1], g.C = (w.shape[1] - 4) / (g.KH * g.KW);
  } else {
    g.OC = w.shape[0], g.C = w.shape[1] * at.groups, g.KH = w.shape[2], g.KW = w.shape[3];
  }
  const bool codes_out = o.dtype == DType::u8;  // int8 codes [N, OH, OW, OC]
  g.OH = o.shape[codes_out ? 1 : 2], g.OW = o.shape[codes_out ? 2 : 3];
  g.st = at.stride, g.pd = at.padding, g.dl = at.dilation;
  return g;
}

// What prepare_conv2d_nchwc chose: the geometry, and which kernel runs it: Winograd
// over the blocked layout (conv2d_uses_winograd's convs on whole blocks of channels),
// depthwise_nchwc (groups > 1: a depthwise conv), else the direct conv.
// kQ8: an int8 weight, run by conv2d_int8 over the blocked layout in `isa`.
struct NchwcState {
  NchwcConvGeom g;
  PackedOperand::Side side = PackedOperand::kNchwc;
  QIsa isa = QIsa::kScalar;
  Conv2dInt8Geom int8_geom() const {
    return Conv2dInt8Geom{g.N, g.C, g.H, g.W, g.OC, g.KH, g.KW, g.OH, g.OW, g.st, g.pd, g.dl, g.L, g.nchw_in};
  }
};


std::shared_ptr<const PackedOperand> pack_nchwc(const void* state, const void* const* src) {
  const auto& s = *static_cast<const NchwcState*>(state);
  if (s.side == PackedOperand::kQ8)
    return std::make_shared<const PackedOperand>(
        conv2d_int8_pack(s.int8_geom(), static_cast<const uint8_t*>(src[0]), s.isa));
  const float* w = static_cast<const float*>(src[0]);
  switch (s.side) {
    case PackedOperand::kWinograd: return std::make_shared<const PackedOperand>(conv3x3_winograd_nchwc_pack(s.g, w));
    case PackedOperand::kWinograd4:
      return std::make_shared<const PackedOperand>(conv3x3_winograd_nchwc_pack(s.g, w, 4));
    case PackedOperand::kNchwcDepthwise: return std::make_shared<const PackedOperand>(depthwise_nchwc_pack(s.g, w));
    default: return std::make_shared<const PackedOperand>(conv2d_nchwc_pack(s.g, w));  // kNchwc, kNchwcNchwIn
  }
}
}  // namespace

// Whether a Winograd conv runs F(4x4, 3x3) rather than F(2x2, 3x3): where the products
// it saves outweigh the filters it reads on top. Per (input, output) channel pair F(2x2)
// multiplies 16 values per 2x2 tile and F(4x4) 36 per 4x4 tile, and F(4x4)'s filters are
// 20 floats more (36 matrices against 16). In a model whose weights do not stay in L3
// (ResNet-50's 100 MB) every call reads them from memory, where those 20 floats (80
// bytes at ~30 GB/s, 2.7 ns) take as long as about 40 products in each vector lane (2
// cores, 2 FMA pipes each, ~4.5 GHz, ~80% of the FMA rate: Zen 5's figures): F(4x4) when
// 16 T2 - 36 T4 >= 40 L (T2, T4 the calls' tiles of each, L the block's lanes: 16 on
// AVX-512, 8 on AVX2, whose products cost twice as much). Filters that stay in cache
// (a model within L3) would favour F(4x4) more, and the whole-image passes read the
// filters once per pass of images, not per call; neither is modelled (ResNet-50's
// F(4x4) convs take 7 or more images a pass).
// ResNet-50's convs: 14 x 14 maps F(4x4) from batch 4 on AVX-512, from batch 2 on AVX2;
// 7 x 7 maps from batch 6 and batch 3; 28 x 28 and 56 x 56 maps at every batch.
// Zen 5 (family 26 model 2, 2 threads, 2026-12-05), frozen copies interleaved in one
// process (`prep_ab.py`), against F(4x4) on maps of 14 x 14 and up and on 7 x 7 from
// batch 4: AVX-512 batch 1 0.982x and 0.990x the time, batch 4 0.985x, batch 8 1.00x
// (F(2x2) on its 7 x 7 maps 1.008x); the AVX2 path (this CPU held to it) batch 1 1.005x
// and 0.997x, batch 4 with F(2x2) on 7 x 7 maps 1.011x. Alone, with its filters warm,
// F(4x4) took 0.70-0.95x F(2x2)'s time on all four maps (Zen 4, 2026-11-28).
// ZENITH_NO_WINOGRAD4=1 keeps F(2x2) everywhere (its rounding is closer to the direct conv's).
bool winograd4_pays(const NchwcConvGeom& g) {
  static const bool off = std::getenv("ZENITH_NO_WINOGRAD4") != nullptr;
  const auto tiles = [&](int64_t m) { return g.N * ((g.H + m - 1) / m) * ((g.W + m - 1) / m); };
  return !off && 16 * tiles(2) - 36 * tiles(4) >= 40 * g.L;
}

void conv3x3_winograd_nchwc_checked(const NchwcConvGeom& g, const float* x, const PackedOperand& pw, const float* raw,
                                    const float* scale, const float* shift, const float* res, Activation act,
                                    float* out) {
  // Images holding a NaN, an infinity or a huge value (and all, where the filters do)
  // run by the direct conv (see nonfinite_images), its filters packed for this call:
  // such inputs are rare, and eager's answer the one to give.
  const int64_t xi = g.C * g.H * g.W, yi = g.OC * g.OH * g.OW;
  const std::vector<uint8_t> bad =
      pw.winograd_unsafe ? std::vector<uint8_t>(size_t(g.N), 1) : nonfinite_images(x, g.N, xi, kWinogradLimit);
  if (std::find(bad.begin(), bad.end(), 1) == bad.end())
    return conv3x3_winograd_nchwc(g, x, pw, scale, shift, res, act, out);
  const PackedOperand direct = conv2d_nchwc_pack(g, raw);
  for (int64_t a = 0, b; a < g.N; a = b) {  // runs of images alike
    for (b = a + 1; b < g.N && bad[size_t(b)] == bad[size_t(a)];) ++b;
    NchwcConvGeom run = g;
    run.N = b - a;
    const float* r = res ? res + a * yi : nullptr;
    if (bad[size_t(a)])
      conv2d_nchwc(run, x + a * xi, direct, scale, shift, r, act, out + a * yi);
    else
      conv3x3_winograd_nchwc(run, x + a * xi, pw, scale, shift, r, act, out + a * yi);
  }
}

void prepare_conv2d_nchwc(const PrepareCtx& c, PreparedOp* p) {
  auto s = std::make_shared<NchwcState>();
  s->g = nchwc_geom(c.in, c.out, c.a<attrs::conv2d_nchwc>());
  const NchwcConvGeom& g = s->g;
  if (c.in[1].dtype == DType::u8) {  // the int8 GEMM's packing, as conv2d's (the same key)
    s->side = PackedOperand::kQ8;
    s->isa = qisa_default();
    p->weight = WeightPack{{1}, {int64_t(PackedOperand::kQ8), g.OC, g.C, g.KH, g.KW, int64_t(s->isa)}, pack_nchwc};
    p->state = std::move(s);
    return;
  }
  if (g.groups > 1)
    s->side = PackedOperand::kNchwcDepthwise;
  else if (g.nchw_in)
    s->side = PackedOperand::kNchwcNchwIn;
  else if (g.C % g.L == 0 && g.OC % g.L == 0 &&
           conv2d_uses_winograd(1, g.KH, g.KW, g.st, g.pd, g.dl, g.C, g.H, g.W, g.OC))
    s->side = winograd4_pays(g) ? PackedOperand::kWinograd4 : PackedOperand::kWinograd;
  p->weight = WeightPack{{1}, {int64_t(s->side), g.OC, g.C, g.KH * g.KW, g.L}, pack_nchwc};
  p->state = std::move(s);
}

void run_conv2d_nchwc(const KernelCtx& c) {
  TensorRef& o = c.out[0];
  if (o.numel() == 0) return;
  const auto& at = c.a<attrs::conv2d_nchwc>();
  const NchwcState& s = c.st<NchwcState>();
  const NchwcConvGeom& g = s.g;
  std::shared_ptr<const PackedOperand> own;
  const void* w = c.in[1].data;
  if (!c.packed) own = pack_nchwc(&s, &w);
  const PackedOperand& pw = c.packed ? *c.packed : *own;
  std::vector<float> bn_scale, shift;
  const GemmEpilogue ep =
      conv_channel_epilogue(c.in, 2, at.has_bias, at.bn_eps, at.activation, g.OC, bn_scale, shift);
  const float* x = c.in[0].as<float>();
  const float* res = at.has_residual && c.in.back().dtype == DType::f32 ? c.in.back().as<float>() : nullptr;
  switch (s.side) {
    case PackedOperand::kQ8: {
      Conv2dInt8Codes io;  // codes in and out between int8 convs (chain_int8)
      if (c.in[0].dtype == DType::u8) io.x = c.in[0].as<int8_t>(), x = nullptr;
      if (at.r_scale) io.res = c.in.back().as<int8_t>(), io.res_scale = float(*at.r_scale);
      const TensorRef& codes = c.out.back();  // the codes, alone or after the float output (y_float)
      if (codes.dtype == DType::u8) io.y = codes.as<int8_t>(), io.y_scale = float(*at.y_scale);
      return conv2d_int8(s.int8_geom(), s.isa, x, pw, at.x_scale ? std::optional<float>(float(*at.x_scale)) : std::nullopt,
                         ep, res, o.dtype == DType::f32 ? o.as<float>() : nullptr, io);
    }
    case PackedOperand::kWinograd:
    case PackedOperand::kWinograd4:
      return conv3x3_winograd_nchwc_checked(g, x, pw, static_cast<const float*>(c.in[1].data), ep.row_scale,
                                            ep.row_shift, res, at.activation, o.as<float>());
    case PackedOperand::kNchwcDepthwise:
      return depthwise_nchwc(g, x, pw, ep.row_scale, ep.row_shift, res, at.activation, o.as<float>());
    default: return conv2d_nchwc(g, x, pw, ep.row_scale, ep.row_shift, res, at.activation, o.as<float>());
  }
}

void winograd_filter_f4(const float* g, float* u) {
  // G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
  auto g6 = [](double a, double b, double c, double (&v)[6]) {
    v[0] = a / 4;
    v[1] = -(a + b + c) / 6;
    v[2] = -(a - b + c) / 6;
    v[3] = a / 24 + b / 12 + c / 6;
    v[4] = a / 24 - b / 12 + c / 6;
    v[5] = c;
  };
  double t[6][3];  // G g, column by column
  for (int c = 0; c < 3; ++c) {
    double v[6];
    g6(g[c], g[3 + c], g[6 + c], v);
    for (int k = 0; k < 6; ++k) t[k][c] = v[k];
  }
  for (int k = 0; k < 6; ++k) {  // (G g) G^T, row by row
    double v[6];
    g6(t[k][0], t[k][1], t[k][2], v);
    for (int l = 0; l < 6; ++l) u[6 * k + l] = float(v[l]);
  }
}

}  // namespace zenith
