// Depthwise convolution, one channel plane at a time: conv2d's depthwise path
// (MobileNets, EfficientNets) and its scalar reference.
//
// The plane is first copied into a zero-padded buffer whose rows are split by column
// phase: with column stride s, a padded row holds its columns 0, s, 2s, ... then 1,
// 1 + s, ... and so on (for s = 1, the row as it is). Output column ow of tap column kw
// reads padded column s * ow + kw * dw, which is phase (kw * dw) % s at index
// ow + (kw * dw) / s: every tap is a unit-stride run of the buffer, so one vector loop
// over output columns serves every stride. (Strided gathers had run MobileNet V2's
// stride-2 layers at a third of the stride-1 layers' speed.) Each phase reaches a whole
// vector past the last output column, zero-filled, so the loop has no bounds checks and
// the last, partial vector of a row is computed whole and stored in part.
//
// The loop is written once over the vector width (F32Vec, gemm_internal.h) and compiled
// for AVX2 (8 lanes) and AVX-512 (16 lanes where a row has at least 16 outputs), chosen
// at run time as sgemm's kernels are. Taps are summed in the reference's order (row by
// row, then column), one FMA each.
//
// Small maps (conv2d: output rows under 32 columns) run depthwise_channels instead: a
// group of 8 or 16 channels transposed so that a vector holds one pixel of every
// channel, each output pixel the sum of its taps' vectors, transposed back. No lane is
// padding there, whatever the row's width.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "zenith/error.h"
#include "zenith/kernels/gemm_internal.h"
#include "zenith/kernels/kernels.h"

namespace zenith {

using gemm_detail::F32Vec;
using gemm_detail::kernels_use_avx512;

void ref_depthwise_plane(const DepthwiseGeom& g, const float* x, const float* k, float* out) {
  for (int64_t oh = 0; oh < g.OH; ++oh)
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      float s = 0.0f;
      for (int64_t kh = 0; kh < g.KH; ++kh) {
        int64_t ih = oh * g.sh - g.ph + kh * g.dh;
        if (ih < 0 || ih >= g.H) continue;
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          int64_t iw = ow * g.sw - g.pw + kw * g.dw;
          if (iw >= 0 && iw < g.W) s += x[ih * g.W + iw] * k[kh * g.KW + kw];
        }
      }
      out[oh * g.OW + ow] = s;
    }
}

namespace {

// The register block: R output rows by U vectors of L outputs, R * U accumulators, so
// that many independent FMA chains are in flight (one accumulator per vector was bound
// by the FMA's latency: 9 dependent FMAs per vector of a 3 x 3 kernel).
template <int L, int R, int U>
struct Block {
  static constexpr int kLanes = L, kRows = R, kVecs = U, kCols = U * L;
};

// The padded, phase-split buffer of one plane for blocks of R rows by `cols` outputs:
// `rows` padded rows (every row a block's windows reach: the last block's rows past OH
// read zeros), each `sw` phases of `phase_len` floats: enough for the block's vectors
// and for every column of x, a whole number of 64-byte lines (the first tap column's
// loads are aligned).
struct PhasedPlane {
  int64_t rows, phase_len, pitch;
  PhasedPlane(const DepthwiseGeom& g, int64_t block_rows, int64_t block_cols)
      : rows(((g.OH + block_rows - 1) / block_rows * block_rows - 1) * g.sh + (g.KH - 1) * g.dh + 1),
        phase_len((std::max((g.OW + block_cols - 1) / block_cols * block_cols + (g.KW - 1) * g.dw / g.sw,
                            (g.W + g.pw + g.sw - 1) / g.sw) +  // x's last columns, reached or not
                   15) / 16 * 16),
        pitch(g.sw * phase_len) {}
};

// A thread's buffer: zeroed when the geometry changes, after which each plane writes
// only x's values (the padding is in the same places for every plane of a geometry and
// stays zero). The copies are vector loops of their own: as memcpy and memset calls per
// row, the padding had cost as much as the convolution.
struct PlaneBuffer {
  gemm_detail::AlignedBuf mem;
  DepthwiseGeom geom{};
  int64_t lanes = 0;
  float* get(const DepthwiseGeom& g, int64_t lanes_, const PhasedPlane& pp) {
    const size_t n = size_t(pp.rows * pp.pitch);
    if (lanes != lanes_ || std::memcmp(&geom, &g, sizeof g) != 0 || mem.n < n) {
      std::fill_n(mem.get(n), n, 0.0f);
      geom = g;
      lanes = lanes_;
    }
    return mem.p;
  }
};

// ev[j] = src[2 * j], od[j] = src[2 * j + 1] for j from i while 2 * j + 2 * L <= n, in
// vectors of L; returns the first j not written.
template <int L>
ZENITH_UK_INLINE int64_t deinterleave(const float* src, int64_t n, int64_t i, float* ev, float* od) {
  using V = typename F32Vec<L>::V;
  for (; 2 * i + 2 * L <= n; i += L) {
    V lo, hi, e, o;
    F32Vec<L>::load(lo, src + 2 * i);
    F32Vec<L>::load(hi, src + 2 * i + L);
    if constexpr (L == 8) {
      e = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14);
      o = __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15);
    } else {
      static_assert(L == 16);
      e = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
      o = __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    }
    F32Vec<L>::store(ev + i, e);
    F32Vec<L>::store(od + i, o);
  }
  return i;
}

// x's row ih into padded row ih + ph of the buffer (its columns c = iw + pw go to
// phase c % sw, index c / sw). S: the column stride as a constant (1, 2) or 0 (g.sw).
template <int L, int S>
ZENITH_UK_INLINE void copy_row(const DepthwiseGeom& g, const PhasedPlane& pp, const float* src, float* row) {
  using Vec = F32Vec<L>;
  using V = typename Vec::V;
  const int64_t sw = S > 0 ? S : g.sw;
  if (sw == 1) {
    float* d = row + g.pw;
    int64_t i = 0;
    for (; i + L <= g.W; i += L) {
      V v;
      Vec::load(v, src + i);
      Vec::store(d + i, v);
    }
    for (; i < g.W; ++i) d[i] = src[i];
    return;
  }
  if (S == 2) {
    // Even columns of x to phase pw % 2 from index pw / 2, odd ones to the other phase
    // from (pw + 1) / 2: two vectors of x make one vector of each (16 lanes, then 8,
    // then one by one).
    float* ev = row + (g.pw % 2) * pp.phase_len + g.pw / 2;
    float* od = row + ((g.pw + 1) % 2) * pp.phase_len + (g.pw + 1) / 2;
    int64_t i = 0;
    if constexpr (L == 16) i = deinterleave<16>(src, g.W, i, ev, od);
    i = deinterleave<8>(src, g.W, i, ev, od);
    // Not (iw % 2 ? od : ev)[iw / 2]: GCC 12 with -fsanitize=undefined
    // -fno-sanitize-recover (the sanitizer CI build) miscompiles that form (wrong values,
    // then a wild pointer), found by the clean-clone CI.
    for (int64_t iw = 2 * i; iw < g.W; ++iw) {
      if (iw % 2)
        od[iw / 2] = src[iw];
      else
        ev[iw / 2] = src[iw];
    }
    return;
  }
  for (int64_t iw = 0; iw < g.W; ++iw) {
    const int64_t c = iw + g.pw;
    row[(c % sw) * pp.phase_len + c / sw] = src[iw];
  }
}

// What becomes of the sums as they are stored: conv2d's epilogue, given as row ep_row
// of a GEMM-shaped output whose columns are the plane's pixels. A per-channel scale
// and shift with no activation, ReLU or ReLU6 (MobileNets' batch-norm and ReLU6) are
// applied in registers before the store (kRegs), the activation as clamp_f's two
// selects (NaN stays NaN, -0 stays -0, as relu_f and relu6_f); any
// other epilogue runs over each block's rows once they are written (in L1). As a pass
// of its own the epilogue had cost a third as much as a 3 x 3 convolution with AVX-512.
struct Post {
  const GemmEpilogue* ep = nullptr;  // the rows pass, when not in registers
  int64_t ep_row = 0;
  bool in_regs = false;
  float scale = 1.0f, shift = 0.0f, lo = -INFINITY, hi = INFINITY;

  Post(const GemmEpilogue* e, int64_t row) : ep(e), ep_row(row) {
    if (!e || e->residual || e->col_shift ||
        (e->act != Activation::kNone && e->act != Activation::kRelu && e->act != Activation::kRelu6))
      return;
    in_regs = true;
    ep = nullptr;
    scale = e->row_scale ? e->row_scale[row] : 1.0f;
    shift = e->row_shift ? e->row_shift[row] : 0.0f;
    if (e->act != Activation::kNone) lo = 0.0f;
    if (e->act == Activation::kRelu6) hi = 6.0f;
  }

  // acc, the outputs [j, j + L) of output row o, clipped to OW columns.
  template <bool kRegs, int L, class V>
  ZENITH_UK_INLINE void store(float* o, int64_t j, int64_t OW, const V& acc) const {
    V v = acc;
    if constexpr (kRegs) {
      const V zero{}, vlo = zero + lo, vhi = zero + hi;
      v = v * scale + shift;
      v = v < vlo ? vlo : v;
      v = v > vhi ? vhi : v;
    }
    if (j + L <= OW) {
      F32Vec<L>::store(o + j, v);
    } else if (j < OW) {
      float tail[L];
      std::memcpy(tail, &v, sizeof tail);
      std::memcpy(o + j, tail, size_t(OW - j) * sizeof(float));
    }
  }
  // A block's accumulators (rows oh.., columns ow..), clipped to the plane.
  template <class B, bool kRegs, class V>
  ZENITH_UK_INLINE void store_block(const DepthwiseGeom& g, float* out, int64_t oh, int64_t ow,
                                    const V (&acc)[B::kRows][B::kVecs]) const {
    for (int r = 0; r < B::kRows && oh + r < g.OH; ++r)
      for (int u = 0; u < B::kVecs; ++u)
        store<kRegs, B::kLanes>(out + (oh + r) * g.OW, ow + u * B::kLanes, g.OW, acc[r][u]);
  }
  // Output rows [oh, oh + rows) of the plane at out are stored.
  void rows(const DepthwiseGeom& g, float* out, int64_t oh, int64_t rows) const {
    if (ep) sgemm_epilogue_block(*ep, out + oh * g.OW, g.OH * g.OW, ep_row, oh * g.OW, 1, rows * g.OW);
  }
};

// Output rows of the plane from the padded buffer p, any kernel, stride and dilation:
// out[oh][ow] = sum over taps t of k[t] * p[oh * sh * pitch + off[t] + ow], a block of
// R rows by U vectors at a time.
template <class B, bool kRegs>
ZENITH_UK_INLINE void conv_rows_any(const DepthwiseGeom& g, const PhasedPlane& pp, const float* p, const float* k,
                                    float* out, const Post& post) {
  constexpr int L = B::kLanes, R = B::kRows, U = B::kVecs;
  using V = typename F32Vec<L>::V;
  const int64_t taps = g.KH * g.KW, row_step = g.sh * pp.pitch;
  std::vector<int64_t> off(static_cast<size_t>(taps));
  std::vector<float> w(k, k + taps);  // a local copy: the output could alias k
  for (int64_t kh = 0, t = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw, ++t) {
      const int64_t c = kw * g.dw;
      off[size_t(t)] = kh * g.dh * pp.pitch + (c % g.sw) * pp.phase_len + c / g.sw;
    }
  for (int64_t oh = 0; oh < g.OH; oh += R) {
    const float* base = p + oh * row_step;
    for (int64_t ow = 0; ow < g.OW; ow += U * L) {
      V acc[R][U];
      for (int r = 0; r < R; ++r)
        for (int u = 0; u < U; ++u) acc[r][u] = V{};
      for (int64_t t = 0; t < taps; ++t) {
        const float wt = w[size_t(t)];
        const float* src = base + off[size_t(t)] + ow;
        for (int r = 0; r < R; ++r)
          for (int u = 0; u < U; ++u) {
            V x;
            F32Vec<L>::load(x, src + r * row_step + u * L);
            acc[r][u] += wt * x;
          }
      }
      post.store_block<B, kRegs>(g, out, oh, ow, acc);
    }
    post.rows(g, out, oh, std::min<int64_t>(R, g.OH - oh));
  }
}

// The same for a KH x KW kernel, row stride SH and row dilation 1 known at compile
// time (MobileNets' and EfficientNets' 3 x 3 and 5 x 5, strides 1 and 2): every loop
// unrolls, the weights stay in registers, and each vector of a padded row is loaded
// once per block and added into every output row whose window holds that row ((R - 1)
// * SH + KH rows loaded instead of R * KH: the loads, not the FMAs, had bound the loop).
// Each output still sums its taps in the reference's order, row by row.
template <class B, bool kRegs, int KH, int KW, int SH>
ZENITH_UK_INLINE void conv_rows_fixed(const DepthwiseGeom& g, const PhasedPlane& pp, const float* p, const float* k,
                                      float* out, const Post& post) {
  constexpr int L = B::kLanes, R = B::kRows, U = B::kVecs, kInRows = (R - 1) * SH + KH;
  using V = typename F32Vec<L>::V;
  float w[KH * KW];
  int64_t coff[KW];
  for (int t = 0; t < KH * KW; ++t) w[t] = k[t];
  for (int kw = 0; kw < KW; ++kw) {
    const int64_t c = kw * g.dw;
    coff[kw] = (c % g.sw) * pp.phase_len + c / g.sw;
  }
  const int64_t pitch = pp.pitch;
  for (int64_t oh = 0; oh < g.OH; oh += R) {
    const float* base = p + oh * SH * pitch;
    for (int64_t ow = 0; ow < g.OW; ow += U * L) {
      V acc[R][U];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u) acc[r][u] = V{};
#pragma GCC unroll 16
      for (int i = 0; i < kInRows; ++i)
#pragma GCC unroll 8
        for (int kw = 0; kw < KW; ++kw)
#pragma GCC unroll 4
          for (int u = 0; u < U; ++u) {
            V x;
            F32Vec<L>::load(x, base + i * pitch + coff[kw] + ow + u * L);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
              const int kh = i - r * SH;
              if (kh >= 0 && kh < KH) acc[r][u] += w[kh * KW + kw] * x;
            }
          }
      post.store_block<B, kRegs>(g, out, oh, ow, acc);
    }
    post.rows(g, out, oh, std::min<int64_t>(R, g.OH - oh));
  }
}

template <class B, bool kRegs>
ZENITH_UK_INLINE void conv_rows(const DepthwiseGeom& g, const PhasedPlane& pp, const float* p, const float* k,
                                float* out, const Post& post) {
  const bool fixed = g.dh == 1 && (g.sh == 1 || g.sh == 2);
  if (fixed && g.KH == 3 && g.KW == 3) {
    if (g.sh == 1) conv_rows_fixed<B, kRegs, 3, 3, 1>(g, pp, p, k, out, post);
    else conv_rows_fixed<B, kRegs, 3, 3, 2>(g, pp, p, k, out, post);
  } else if (fixed && g.KH == 5 && g.KW == 5) {
    if (g.sh == 1) conv_rows_fixed<B, kRegs, 5, 5, 1>(g, pp, p, k, out, post);
    else conv_rows_fixed<B, kRegs, 5, 5, 2>(g, pp, p, k, out, post);
  } else {
    conv_rows_any<B, kRegs>(g, pp, p, k, out, post);
  }
}

template <class B>
ZENITH_UK_INLINE void plane_blocked(const DepthwiseGeom& g, const float* x, const float* k, float* out,
                                    const GemmEpilogue* ep, int64_t ep_row) {
  constexpr int L = B::kLanes;
  const PhasedPlane pp(g, B::kRows, B::kCols);
  thread_local PlaneBuffer buf;
  float* p = buf.get(g, L, pp);
  // x's rows that some window reaches (padded rows < pp.rows).
  const int64_t ih_end = std::min(g.H, pp.rows - g.ph);
  for (int64_t ih = std::max<int64_t>(0, -g.ph); ih < ih_end; ++ih) {
    float* row = p + (ih + g.ph) * pp.pitch;
    if (g.sw == 1) copy_row<L, 1>(g, pp, x + ih * g.W, row);
    else if (g.sw == 2) copy_row<L, 2>(g, pp, x + ih * g.W, row);
    else copy_row<L, 0>(g, pp, x + ih * g.W, row);
  }
  const Post post(ep, ep_row);
  if (post.in_regs) conv_rows<B, true>(g, pp, p, k, out, post);
  else conv_rows<B, false>(g, pp, p, k, out, post);
  buf.mem.trim(size_t(1) << 20);  // keep at most 4 MiB per thread
}

ZENITH_UK_TARGET_avx2 void plane_avx2(const DepthwiseGeom& g, const float* x, const float* k, float* out,
                                      const GemmEpilogue* ep, int64_t ep_row) {
  plane_blocked<Block<8, 4, 2>>(g, x, k, out, ep, ep_row);
}

#if defined(__x86_64__)
ZENITH_UK_TARGET_avx512 void plane_avx512(const DepthwiseGeom& g, const float* x, const float* k, float* out,
                                          const GemmEpilogue* ep, int64_t ep_row) {
  if (g.OW >= 16) plane_blocked<Block<16, 4, 2>>(g, x, k, out, ep, ep_row);
  else plane_blocked<Block<8, 4, 2>>(g, x, k, out, ep, ep_row);  // a 7- or 14-wide row would waste most of 16 lanes
}
#endif

using PlaneFn = void (*)(const DepthwiseGeom&, const float*, const float*, float*, const GemmEpilogue*, int64_t);
PlaneFn pick_plane() {
#if defined(__x86_64__)
  if (kernels_use_avx512()) return plane_avx512;
#endif
  return plane_avx2;
}

// ---- Channel groups: the vectors across L channels of one output pixel ----

// One thread's buffers for a channel group: the padded input, pixels of L channels
// side by side (zeroed when the geometry changes; each call writes only x's pixels, so
// the padding stays zero), and the output tile, the same way round.
struct ChannelBuffers {
  gemm_detail::AlignedBuf in, out;
  DepthwiseGeom geom{};
  int64_t lanes = 0;
  std::vector<float> wt;     // the group's filters, tap t of channel c at t * L + c
  std::vector<int64_t> off;  // each tap's offset in the padded buffer
};

// The epilogues applied to a pixel's vector before it is stored (the group's channels
// are its lanes): Post's per-channel scale, shift and clamp bounds in lanes, applied as
// Post::store does (clamp_f's selects).
template <int L>
struct ChannelPost {
  using V = typename F32Vec<L>::V;
  V scale, shift, lo, hi;
};
template <int L>
ZENITH_UK_INLINE void channel_post(const ChannelPost<L>& cp, typename F32Vec<L>::V& v) {
  using V = typename F32Vec<L>::V;
  v = v * cp.scale + cp.shift;
  v = v < cp.lo ? cp.lo : v;
  v = v > cp.hi ? cp.hi : v;
}

template <int L>
ZENITH_UK_INLINE void channels_blocked(const DepthwiseGeom& g, const float* x, int64_t x_stride, const float* k,
                                       float* out, int64_t out_stride, int64_t nch, const GemmEpilogue* ep,
                                       int64_t ep_row) {
  using Vec = F32Vec<L>;
  using V = typename Vec::V;
  // Padded rows and columns: every one a window reaches (past x's last, zeros: the
  // geometry's padding below and right is whatever the windows reach) and x's own.
  const int64_t Hp = std::max((g.OH - 1) * g.sh + (g.KH - 1) * g.dh + 1, g.ph + g.H),
                Wp = std::max((g.OW - 1) * g.sw + (g.KW - 1) * g.dw + 1, g.pw + g.W), taps = g.KH * g.KW,
                plane = g.OH * g.OW;
  thread_local ChannelBuffers buf;
  const size_t n_in = size_t(Hp * Wp * L);
  if (buf.lanes != L || std::memcmp(&buf.geom, &g, sizeof g) != 0 || buf.in.n < n_in) {
    std::fill_n(buf.in.get(n_in), n_in, 0.0f);
    buf.geom = g;
    buf.lanes = L;
  }
  float* p = buf.in.p;
  float* q = buf.out.get(size_t(std::max(plane, g.H * g.W) * L));
  // x's pixels into the buffer, channel c in lane c (lanes from nch zero; their sums are
  // never stored): transposed whole (transpose_block) into q, then row by row into the
  // padding.
  if (nch < L) std::fill_n(q, g.H * g.W * L, 0.0f);  // defined values in the unused lanes
  gemm_detail::transpose_block(x, x_stride, q, L, nch, g.H * g.W);
  for (int64_t ih = 0; ih < g.H; ++ih)
    std::memcpy(p + ((ih + g.ph) * Wp + g.pw) * L, q + ih * g.W * L, size_t(g.W * L) * sizeof(float));
  // The filters the same way round: tap t of channel c in lane c of wt[t].
  std::vector<float>& wt = buf.wt;
  std::vector<int64_t>& off = buf.off;
  wt.assign(static_cast<size_t>(taps * L), 0.0f);
  off.resize(static_cast<size_t>(taps));
  for (int64_t c = 0; c < nch; ++c)
    for (int64_t t = 0; t < taps; ++t) wt[size_t(t * L + c)] = k[c * taps + t];
  for (int64_t kh = 0, t = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw, ++t) off[size_t(t)] = (kh * g.dh * Wp + kw * g.dw) * L;
  // A scale and shift with none, ReLU or ReLU6 (MobileNets' bn + ReLU6) in registers,
  // as Post decides and computes them per channel (lanes from nch repeat the last
  // channel's: never stored); any other epilogue over the group's rows once written.
  const Post first(ep, ep_row);
  const bool regs = first.in_regs;
  ChannelPost<L> cp;
  if (regs) {
    float sc[L], sf[L], lo[L], hi[L];
    for (int64_t c = 0; c < L; ++c) {
      const Post pc(ep, ep_row + std::min(c, nch - 1));
      sc[c] = pc.scale;
      sf[c] = pc.shift;
      lo[c] = pc.lo;
      hi[c] = pc.hi;
    }
    Vec::load(cp.scale, sc);
    Vec::load(cp.shift, sf);
    Vec::load(cp.lo, lo);
    Vec::load(cp.hi, hi);
  }
  // Each output pixel sums its taps in the reference's order, eight pixels of a row at
  // a time (independent FMA chains).
  constexpr int P = 8;
  const int64_t col_step = g.sw * L;
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const float* base = p + oh * g.sh * Wp * L;
    float* qrow = q + oh * g.OW * L;
    int64_t ow = 0;
    for (; ow + P <= g.OW; ow += P) {
      V acc[P];
      for (int j = 0; j < P; ++j) acc[j] = V{};
      for (int64_t t = 0; t < taps; ++t) {
        V w;
        Vec::load(w, wt.data() + t * L);
        const float* src = base + off[size_t(t)] + ow * col_step;
        for (int j = 0; j < P; ++j) {
          V v;
          Vec::load(v, src + j * col_step);
          acc[j] += w * v;
        }
      }
      for (int j = 0; j < P; ++j) {
        if (regs) channel_post<L>(cp, acc[j]);
        Vec::store(qrow + (ow + j) * L, acc[j]);
      }
    }
    for (; ow < g.OW; ++ow) {
      V acc{};
      for (int64_t t = 0; t < taps; ++t) {
        V w, v;
        Vec::load(w, wt.data() + t * L);
        Vec::load(v, base + off[size_t(t)] + ow * col_step);
        acc += w * v;
      }
      if (regs) channel_post<L>(cp, acc);
      Vec::store(qrow + ow * L, acc);
    }
  }
  gemm_detail::transpose_block(q, L, out, out_stride, plane, nch);
  if (ep && !regs) sgemm_epilogue_block(*ep, out, out_stride, ep_row, 0, nch, plane);
  buf.in.trim(size_t(1) << 20);
  buf.out.trim(size_t(1) << 20);
}

ZENITH_UK_TARGET_avx2 void channels_avx2(const DepthwiseGeom& g, const float* x, int64_t x_stride, const float* k,
                                         float* out, int64_t out_stride, int64_t nch, const GemmEpilogue* ep,
                                         int64_t ep_row) {
  channels_blocked<8>(g, x, x_stride, k, out, out_stride, nch, ep, ep_row);
}
#if defined(__x86_64__)
ZENITH_UK_TARGET_avx512 void channels_avx512(const DepthwiseGeom& g, const float* x, int64_t x_stride,
                                             const float* k, float* out, int64_t out_stride, int64_t nch,
                                             const GemmEpilogue* ep, int64_t ep_row) {
  channels_blocked<16>(g, x, x_stride, k, out, out_stride, nch, ep, ep_row);
}
#endif

}  // namespace

int64_t depthwise_channel_lanes() { return kernels_use_avx512() ? 16 : 8; }

void depthwise_channels(const DepthwiseGeom& g, const float* x, int64_t x_stride, const float* k, float* out,
                        int64_t out_stride, int64_t nch, const GemmEpilogue* ep, int64_t ep_row) {
  ZENITH_CHECK(nch >= 0 && nch <= depthwise_channel_lanes(), "depthwise_channels: ", nch, " channels, at most ",
               depthwise_channel_lanes());
  ZENITH_CHECK(nch <= 1 || out_stride >= g.OH * g.OW, "depthwise_channels: output planes ", out_stride,
               " apart overlap (", g.OH * g.OW, " pixels each)");
  if (nch == 0) return;
  ep = ep && !ep->empty() ? ep : nullptr;
#if defined(__x86_64__)
  if (kernels_use_avx512()) return channels_avx512(g, x, x_stride, k, out, out_stride, nch, ep, ep_row);
#endif
  channels_avx2(g, x, x_stride, k, out, out_stride, nch, ep, ep_row);
}

void depthwise_plane(const DepthwiseGeom& g, const float* x, const float* k, float* out, const GemmEpilogue* ep,
                     int64_t ep_row) {
  static const PlaneFn fn = pick_plane();
  fn(g, x, k, out, ep && !ep->empty() ? ep : nullptr, ep_row);
}

}  // namespace zenith
