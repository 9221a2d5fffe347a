// The blocked-layout conv's building blocks shared by conv2d_nchwc.cc (the convs one at
// a time) and conv2d_pw_dw_nchwc.cc (an inverted-residual block over the blocked
// layout, its three convs band by band): the register tiles of the direct conv and of
// the depthwise conv, and the epilogue helpers. Internal to the kernels; not part of
// kernels.h.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "zenith/kernels/kernels.h"

namespace zenith::nchwc_detail {

constexpr int kNB = 2;  // output channel blocks per tile (and per group of packed filters)

// The activation a kernel applies in registers: 1 ReLU, 2 ReLU6, 0 none (the others
// over the stored run, activate_run).
int register_act(Activation a);
void activate_run(Activation act, float* o, int64_t n);

// What a large-filter conv's kernels prefetch into L2 while they compute (the thread's
// next group of filters): `lines` cache lines from `at` per channel block step, `at`
// moving on, never past `end`; nothing when `at` is null.
struct Prefetch {
  const float* at = nullptr;
  const float* end = nullptr;
  int lines = 0;
};

// The direct conv's register tile: output pixels [p0, p0 + mr) of one image (its
// pixels numbered over the output map, g.OH x g.OW; input channel blocks g.H * g.W * L
// floats apart, output blocks g.OH * g.OW * L) by the output blocks [0, nblk) of a
// group of packed filters (conv2d_nchwc_pack: groups of kNB blocks, group_floats each).
using TileFn = void (*)(const NchwcConvGeom&, const float*, int64_t, int64_t, int, const float*, const float*,
                        const float*, const float*, Activation, float*, Prefetch);
struct Tile {
  TileFn fn[2], tail[2];  // [nblk > 1]
  int64_t ro, tail_ro;
  // Pixels [p0, p0 + mr), mr <= ro: the full tile, or tail tiles where they compute fewer rows.
  // The rest: (w, scale, shift, res, act, out, prefetch).
  template <class... Args>
  void operator()(const NchwcConvGeom& g, const float* x, int64_t p0, int64_t mr, int nblk, Args... rest) const {
    const int k = nblk > 1;
    if (mr > ro - tail_ro) return fn[k](g, x, p0, mr, nblk, rest...);
    for (int64_t q = 0; q < mr; q += tail_ro) tail[k](g, x, p0 + q, std::min(tail_ro, mr - q), nblk, rest...);
  }
};
Tile pick_tile(const NchwcConvGeom& g, Activation act);
// The arguments of the 1x1 run kernel (pw_run, conv2d_nchwc.cc): a 1x1 conv over `count`
// consecutive pixels (of one image; of a strided conv's copied pixels; of a strided
// conv's copied patches, taps x channel blocks as its blocks; of Winograd's transformed
// tiles): input pixel p of block cb at x + cb * x_plane + p * L, its C channels (a last
// block's channels past C not read); output block b's pixel p at out + b * o_plane + p * L
// (res alike); w, scale, shift: a group's packed filters and its nblk blocks' epilogue,
// as the tile's.
struct PwRun {
  const float* x;
  int64_t x_plane, C;
  const float *w, *scale, *shift, *res;
  Activation act;
  float* out;
  int64_t o_plane, count;
  int nblk;
  Prefetch pf;  // the next group's filters
};
struct PwRunFns {
  void (*fn[2])(const PwRun&);  // [nblk > 1]
  int64_t ro;                   // its tile's pixels (Prefetch::lines are per block step of each)
  int64_t tail_ro;              // its tail tiles' (a run's last mr <= ro - tail_ro pixels), as Tile's
  void operator()(const PwRun& a) const { fn[a.nblk > 1](a); }
};
// The run kernel for this ISA, block and activation.
PwRunFns pick_pw_run(int64_t L, Activation act);
// Floats of one group of a conv's packed filters.
int64_t packed_group_floats(const NchwcConvGeom& g);

// The depthwise conv's band: output rows [oh0, oh1) of one channel block from the
// thread's padded copy of their input, `rows` rows of `pitch` pixels of L floats
// (padded column c holding input column c - pw; padded row r input row oh0 * sh + r - ph).
struct DwBand {
  int64_t oh0, oh1, rows, pitch;
};
// (g, band, padded input, the block's packed taps, scale, shift, residual, the block's
// output plane: row oh at oh * g.OW * L)
using DwBandFn = void (*)(const NchwcConvGeom&, const DwBand&, const float*, const float*, const float*,
                          const float*, const float*, float*);
// The band kernel for this conv, and its tile's width (*ro: a row's last tile may read
// up to ro pixels past the row, so the padded copy's pitch covers them).
DwBandFn pick_dw_band(const NchwcConvGeom& g, Activation a, int64_t* ro);
// Copies `rows` padded rows from padded row `first` on (input row first + r - ph) of one
// channel block's input plane into xp, `pitch` pixels a row, the padding as zeros.
void dw_pad_rows(const NchwcConvGeom& g, const float* plane, int64_t first, int64_t rows, int64_t pitch, float* xp);
// The padded copy's pitch for conv g with band tiles of `ro` pixels.
int64_t dw_pitch(const NchwcConvGeom& g, int64_t ro);

// The epilogue's scale and shift per output channel (null: 1 and 0), zero past OC up to
// `n` channels (the padding channels come out 0 * sum + 0).
void channel_scale_shift(const float* scale, const float* shift, int64_t OC, int64_t n, std::vector<float>& sc,
                         std::vector<float>& sh);
// Zeroes the output's channels past OC (in the last block of each of g.N images).
void zero_padding_channels(const NchwcConvGeom& g, float* out);

}  // namespace zenith::nchwc_detail
