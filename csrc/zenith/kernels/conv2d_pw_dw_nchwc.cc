// conv2d_pw_dw over the blocked layout: an inverted-residual block (MobileNet V2's
// expand 1x1 -> depthwise -> project 1x1) whose input and output are blocked
// [N, ceil(C / L), H, W, L], computed band of output rows by band with conv2d_nchwc's
// own register tiles, so neither the expanded tensor nor the depthwise output reaches
// memory.
//
// Why: with every MobileNet V2 conv blocked, the blocks on 112 x 112 and 56 x 56 maps ran
// near memory speed at batch 8 (Zen 4, 2 threads, `zenith.profile`): 16 -> 96 expanded
// at 87 GFLOP/s writing 38.5 MB, its stride-2 depthwise conv reading that back at
// 21 GB/s (1.8 ms for 43 MFLOP), the 144-channel ones on 56 x 56 likewise; those blocks
// took 16.8 of the model's 36.8 ms. conv2d_pw_dw's NCHW kernel (conv2d_pw_dw.cc) keeps
// the data in L2 but runs the plain GEMM and depthwise kernels, which lost to the
// blocked ones.
//
// Each worker takes (image, chunk of output rows) items and walks the chunk in bands.
// For a band it keeps a window of the expanded rows the band's depthwise windows read
// (every channel block, [EB][cap][pitch][L], laid out as the depthwise band kernel's
// padded input: zero columns beside each row, zero rows above and below the image; the
// rows the last band also needed are kept, not recomputed) and computes the rows the
// window lacks with the expand's run kernel (group of output blocks after group, row by
// row over the image's columns, reading the input rows from L2); the depthwise band kernel reads the
// window in place (a copy of each block's rows had cost MobileNet V2's 16 -> 96 block
// 7% at batch 8) and writes a band of depthwise output ([EB][band][OW][L]), which the
// projection's run kernel reads to write the block's output rows (with its residual). The
// math and rounding are each conv's own kernel's; the channels past each conv's count
// reach no real channel (the depthwise kernel works lane by lane, the 1x1 tiles read a
// last block's real channels only), and
// the output's are zeroed as conv2d_nchwc does.
#include <algorithm>
#include <cstring>

#include "zenith/error.h"
#include "zenith/kernels/conv2d_nchwc_internal.h"
#include "zenith/kernels/gemm_internal.h"
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"

namespace zenith {

using namespace nchwc_detail;

void conv2d_pw_dw_nchwc(const NchwcConvGeom& g, int64_t C, int64_t P, const NchwcConvPart& ex,
                        const NchwcConvPart& dw, const NchwcConvPart& pj, const float* x, const float* res,
                        float* out) {
  using gemm_detail::AlignedBuf;
  const bool expand = ex.w != nullptr, project = pj.w != nullptr;
  const int64_t L = g.L, E = g.C, N = g.N, H = g.H, W = g.W, OH = g.OH, OW = g.OW, OP = OH * OW;
  const int64_t EB = (E + L - 1) / L, CB = expand ? (C + L - 1) / L : EB, OB = project ? (P + L - 1) / L : EB;
  const int64_t taps = g.KH * g.KW, sh = g.st[0], ph = g.pd[0], reach = (g.KH - 1) * g.dl[0] + 1;
  ZENITH_CHECK((L == 8 || L == 16) && g.groups == E && g.OC == E && E > 0 && (!expand || C > 0) &&
                   (!project || P > 0) && (expand || project),
               "conv2d_pw_dw_nchwc: bad geometry");
  ZENITH_CHECK(dw.w && dw.w->side == PackedOperand::kNchwcDepthwise && dw.w->isa == uint8_t(L) && dw.w->rows == E &&
                   dw.w->cols == taps,
               "conv2d_pw_dw_nchwc: the depthwise filters are not this conv's");
  ZENITH_CHECK(!expand || (ex.w->side == PackedOperand::kNchwc && ex.w->isa == uint8_t(L) && ex.w->rows == E &&
                           ex.w->cols == C),
               "conv2d_pw_dw_nchwc: the expand filters are not this conv's");
  ZENITH_CHECK(!project || (pj.w->side == PackedOperand::kNchwc && pj.w->isa == uint8_t(L) && pj.w->rows == P &&
                            pj.w->cols == E),
               "conv2d_pw_dw_nchwc: the projection's filters are not this conv's");
  ZENITH_CHECK(!res || project, "conv2d_pw_dw_nchwc: a residual needs the projection");
  if (N == 0 || OH == 0 || OW == 0) return;

  int64_t ro = 0;
  const DwBandFn dw_fn = pick_dw_band(g, dw.act, &ro);
  const Activation dw_rest = register_act(dw.act) ? Activation::kNone : dw.act;
  const int64_t pitch = dw_pitch(g, ro), pw = g.pd[1];
  // Output rows per band, as conv2d_pw_dw's NCHW kernel (pw_dw_band_rows): the window
  // holds every channel's `cap` padded rows of `pitch` pixels.
  const int64_t band = pw_dw_band_rows(expand, project, EB * L * pitch, EB * L * OW, reach, sh, OH);
  const int64_t cap = (band - 1) * sh + reach;  // padded rows a band reads

  // The 1x1 convs as runs of consecutive pixels (PwRun): the expand writes each image
  // row's W columns into the interior of a window row (`pitch` pixels, input column c at
  // c + pw; the band's first row, ph above the image's, at row 0), the projection reads
  // the band of depthwise output (band rows of OW) and writes the image's rows.
  NchwcConvGeom ge, gp;  // their filters' geometry, for the packed groups' size
  ge.L = gp.L = L;
  ge.KH = ge.KW = gp.KH = gp.KW = 1;
  ge.C = C, gp.C = E;
  const PwRunFns te = pick_pw_run(L, ex.act), tp = pick_pw_run(L, pj.act);
  const int64_t ge_floats = expand ? packed_group_floats(ge) : 0, gp_floats = project ? packed_group_floats(gp) : 0;
  const int64_t e_groups = (EB + kNB - 1) / kNB, p_groups = (OB + kNB - 1) / kNB;
  std::vector<float> s1, t1, s2, t2, s3, t3;  // padded to whole groups / blocks
  if (expand) channel_scale_shift(ex.scale, ex.shift, E, e_groups * kNB * L, s1, t1);
  channel_scale_shift(dw.scale, dw.shift, E, EB * L, s2, t2);
  if (project) channel_scale_shift(pj.scale, pj.shift, P, p_groups * kNB * L, s3, t3);
  const float *w1 = expand ? ex.w->data.get() : nullptr, *w2 = dw.w->data.get(),
              *w3 = project ? pj.w->data.get() : nullptr;
  const int64_t block_floats = cap * pitch * L;  // one channel block of the window (or of xp)

  // Work items: (image, chunk of output rows), as many chunks per image as there are
  // threads left after the images.
  const int64_t chunks = std::min(OH, std::max<int64_t>(1, (num_threads() + N - 1) / N));
  parallel_for(N * chunks, 1, [&](int64_t lo, int64_t hi) {
    thread_local AlignedBuf window, mid;
    // The window: every block's padded rows (with an expand), or one block's copy of x's.
    float* win = window.get(size_t((expand ? EB : 1) * block_floats));
    float* dwo = project ? mid.get(size_t(EB * band * OW * L)) : nullptr;
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t n = item / chunks, ch = item % chunks;
      const int64_t r_begin = OH * ch / chunks, r_end = OH * (ch + 1) / chunks;
      const float* xn = x + n * CB * H * W * L;
      int64_t w_lo = 0, w_hi = 0;  // the padded rows the window holds (row r: input row r - ph), at its rows 0..
      for (int64_t b0 = r_begin; b0 < r_end; b0 += band) {
        const int64_t b1 = std::min(r_end, b0 + band);
        const int64_t lo_p = b0 * sh, hi_p = (b1 - 1) * sh + reach;  // the padded rows the band reads
        const DwBand bd{0, b1 - b0, hi_p - lo_p, pitch};            // output rows b0.. as rows 0..
        if (expand) {
          // Keep the rows of the window this band needs again, at the top.
          int64_t keep_lo = std::max(w_lo, lo_p), keep_hi = std::min(w_hi, hi_p);
          if (keep_hi <= keep_lo) keep_lo = keep_hi = lo_p;
          if (keep_lo > w_lo && keep_hi > keep_lo)
            for (int64_t eb = 0; eb < EB; ++eb)
              std::memmove(win + eb * block_floats, win + eb * block_floats + (keep_lo - w_lo) * pitch * L,
                           size_t((keep_hi - keep_lo) * pitch * L) * sizeof(float));
          // The padded rows the window lacks, [keep_hi, hi_p): the image's [a, b) by the
          // expand's run kernel (padded row r: input row r - ph, at window row r - lo_p),
          // zeros above and below.
          const int64_t a = std::clamp(ph, keep_hi, hi_p), b = std::clamp(H + ph, a, hi_p);
          for (int64_t eb = 0; eb < EB; ++eb) {
            float* wb = win + eb * block_floats;
            std::fill(wb + (keep_hi - lo_p) * pitch * L, wb + (a - lo_p) * pitch * L, 0.0f);
            std::fill(wb + (b - lo_p) * pitch * L, wb + (hi_p - lo_p) * pitch * L, 0.0f);
          }
          if (b > a) {
            // Each image row's W columns (input row r - ph) into the window row's interior.
            for (int64_t grp = 0; grp < e_groups; ++grp) {
              const int64_t ob = grp * kNB;
              const int nblk = int(std::min<int64_t>(kNB, EB - ob));
              for (int64_t r = a; r < b; ++r)
                te({xn + (r - ph) * W * L, H * W * L, C, w1 + grp * ge_floats, s1.data() + ob * L, t1.data() + ob * L,
                    nullptr, ex.act, win + ob * block_floats + ((r - lo_p) * pitch + pw) * L, block_floats, W, nblk,
                    Prefetch{}});
            }
            // The columns outside the image: zero.
            for (int64_t eb = 0; eb < EB; ++eb)
              for (int64_t r = a; r < b; ++r) {
                float* row = win + eb * block_floats + (r - lo_p) * pitch * L;
                std::fill_n(row, pw * L, 0.0f);
                std::fill(row + (pw + W) * L, row + pitch * L, 0.0f);
              }
          }
          w_lo = lo_p;
          w_hi = hi_p;
        }
        // The depthwise conv of the band, block by block, from the window in place, or
        // without an expand from a copy of x's rows with their padding; into the band of
        // depthwise output (with a projection) or the output's rows.
        for (int64_t eb = 0; eb < EB; ++eb) {
          const float* xp = win + eb * block_floats;
          if (!expand) {
            dw_pad_rows(g, xn + eb * H * W * L, lo_p, bd.rows, pitch, win);
            xp = win;
          }
          float* o = project ? dwo + eb * band * OW * L : out + ((n * EB + eb) * OH + b0) * OW * L;
          dw_fn(g, bd, xp, w2 + eb * taps * L, s2.data() + eb * L, t2.data() + eb * L, nullptr, o);
          if (dw_rest != Activation::kNone) activate_run(dw_rest, o, (b1 - b0) * OW * L);
        }
        if (!project) continue;
        // The projection of the band: output rows b0..b1 of image n (and its residual's).
        const int64_t pixels = (b1 - b0) * OW, at = n * OB * OP * L + b0 * OW * L;
        for (int64_t grp = 0; grp < p_groups; ++grp) {
          const int64_t ob = grp * kNB;
          const int nblk = int(std::min<int64_t>(kNB, OB - ob));
          tp({dwo, band * OW * L, E, w3 + grp * gp_floats, s3.data() + ob * L, t3.data() + ob * L,
              res ? res + at + ob * OP * L : nullptr, pj.act, out + at + ob * OP * L, OP * L, pixels, nblk,
              Prefetch{}});
        }
      }
    }
    window.trim(size_t(4) << 20);
    mid.trim(size_t(4) << 20);
  });
  // The output's channels past its count: zero, as the layout promises.
  NchwcConvGeom go;
  go.N = N, go.OC = project ? P : E, go.OH = OH, go.OW = OW, go.L = L;
  zero_padding_channels(go, out);
}

}  // namespace zenith
