// Experiment: a direct conv over the blocked layout (NCHWc), general taps/stride/padding, tile = RO flattened
// output pixels x NB channel blocks; against Winograd / sgemm on NCHW.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
#include <algorithm>
#include <random>
#include <omp.h>
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
#include "zenith/kernels/gemm_internal.h"
using namespace zenith;
using namespace zenith::gemm_detail;

struct Geo { int64_t C, H, W, OC, OH, OW, KH, KW, s, p; };
alignas(64) static float kZeros[64];

template <int L, int RO, int NB>
ZENITH_UK_INLINE void blk_tile(const Geo& g, const float* x, int64_t p0, int64_t mr, const float* w, float* out,
                               const float* scale, const float* shift, const float* res, bool relu) {
  using Vec = F32Vec<L>;
  using V = typename Vec::V;
  V acc[RO][NB];
  for (int r = 0; r < RO; ++r)
    for (int v = 0; v < NB; ++v) acc[r][v] = V{};
  const int64_t P = g.H * g.W, CB = (g.C + L - 1) / L, OP = g.OH * g.OW;
  int64_t oh[RO], ow[RO];
  for (int r = 0; r < RO; ++r) { int64_t q = p0 + (r < mr ? r : 0); oh[r] = q / g.OW; ow[r] = q % g.OW; }
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      int64_t off[RO];
      for (int r = 0; r < RO; ++r) {
        int64_t ih = oh[r] * g.s - g.p + kh, iw = ow[r] * g.s - g.p + kw;
        off[r] = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W ? (ih * g.W + iw) * L : -1;
      }
      const float* wt = w + (kh * g.KW + kw) * CB * L * L * NB;
      for (int64_t cb = 0; cb < CB; ++cb) {
        const float* xr[RO];
        for (int r = 0; r < RO; ++r) xr[r] = off[r] >= 0 ? x + cb * P * L + off[r] : kZeros;
        const float* wc = wt + cb * L * L * NB;
#pragma GCC unroll 4
        for (int k = 0; k < L; ++k) {
          V b[NB];
          for (int v = 0; v < NB; ++v) Vec::load(b[v], wc + k * L * NB + v * L);
#pragma GCC unroll 16
          for (int r = 0; r < RO; ++r) {
            const float a = xr[r][k];
            for (int v = 0; v < NB; ++v) Vec::fma(acc[r][v], a, b[v]);
          }
        }
      }
    }
  for (int v = 0; v < NB; ++v) {
    V sc, sh;
    Vec::load(sc, scale + v * L); Vec::load(sh, shift + v * L);
    for (int r = 0; r < RO; ++r) {
      if (r >= mr) break;
      float* o = out + v * OP * L + (p0 + r) * L;
      V y = acc[r][v] * sc + sh;
      if (res) { V rr; Vec::load(rr, res + v * OP * L + (p0 + r) * L); y += rr; }
      if (relu) y = y > V{} ? y : V{};
      Vec::store(o, y);
    }
  }
}

template <int L, int RO, int NB>
__attribute__((target("avx512f"))) void tile512(const Geo& g, const float* x, int64_t p0, int64_t mr, const float* w, float* out,
                               const float* scale, const float* shift, const float* res, bool relu) {
  blk_tile<L, RO, NB>(g, x, p0, mr, w, out, scale, shift, res, relu);
}
template <int L, int RO, int NB>
__attribute__((target("avx2,fma"))) void tile256(const Geo& g, const float* x, int64_t p0, int64_t mr, const float* w, float* out,
                               const float* scale, const float* shift, const float* res, bool relu) {
  blk_tile<L, RO, NB>(g, x, p0, mr, w, out, scale, shift, res, relu);
}

template <int L, int RO, int NB, bool AVX512>
void conv_blocked(const Geo& g, const float* x, const float* wp, float* out, const float* scale, const float* shift,
                  const float* res, bool relu) {
  const int64_t OP = g.OH * g.OW, CB = (g.C + L - 1) / L;
  const int64_t G = g.OC / (L * NB), T = (OP + RO - 1) / RO;
  const bool g_outer = g.KH * g.KW * g.C * g.OC > g.C * g.H * g.W;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < G * T; ++i) {
    int64_t gi = g_outer ? i / T : i % G, t = g_outer ? i % T : i / G;
    auto f = AVX512 ? tile512<L, RO, NB> : tile256<L, RO, NB>;
    f(g, x, t * RO, std::min<int64_t>(RO, OP - t * RO), wp + gi * g.KH * g.KW * CB * L * L * NB, out + gi * NB * OP * L,
      scale + gi * NB * L, shift + gi * NB * L, res ? res + gi * NB * OP * L : nullptr, relu);
  }
}

static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int main(int argc, char** argv) {
  const bool avx512 = argc > 1 && std::atoi(argv[1]);
  zenith::set_num_threads(2);
  struct S { int64_t C, OC, H, K, s; bool res; };
  std::vector<S> shapes = {{64, 256, 56, 1, 1, true}, {256, 64, 56, 1, 1, false}, {1024, 256, 14, 1, 1, false}, {2048, 512, 7, 1, 1, false},
                           {64, 64, 56, 3, 1, false}, {128, 128, 28, 3, 1, false}, {256, 256, 14, 3, 1, false}, {512, 512, 7, 3, 1, false},
                           {128, 128, 56, 3, 2, false}, {256, 256, 28, 3, 2, false}, {512, 512, 14, 3, 2, false}, {256, 512, 56, 1, 2, false}};
  std::mt19937 rng(0);
  std::normal_distribution<float> nd;
  for (auto s : shapes) {
    const int L = avx512 ? 16 : 8, NB = 2;
    Geo g{s.C, s.H, s.H, s.OC, 0, 0, s.K, s.K, s.s, s.K / 2};
    g.OH = (g.H + 2 * g.p - g.KH) / g.s + 1; g.OW = g.OH;
    const int64_t C = s.C, OC = s.OC, P = s.H * s.H, OP = g.OH * g.OW, T = s.K * s.K;
    std::vector<float> x(C * P), w(OC * C * T), sc(OC), sh(OC), res(OC * OP), o1(OC * OP), o2(OC * OP), xb(C * P),
        wb(OC * C * T), rb(OC * OP);
    for (auto& v : x) v = nd(rng);
    for (auto& v : w) v = nd(rng) * 0.1f;
    for (auto& v : sc) v = 1 + 0.1f * nd(rng);
    for (auto& v : sh) v = nd(rng);
    for (auto& v : res) v = nd(rng);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < P; ++p) xb[(c / L) * P * L + p * L + c % L] = x[c * P + p];
    for (int64_t c = 0; c < OC; ++c)
      for (int64_t p = 0; p < OP; ++p) rb[(c / L) * OP * L + p * L + c % L] = res[c * OP + p];
    const int64_t CB = C / L;
    for (int64_t oc = 0; oc < OC; ++oc)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t t = 0; t < T; ++t)
          wb[(oc / (L * NB)) * T * CB * L * L * NB + t * CB * L * L * NB + c * L * NB + oc % (L * NB)] = w[(oc * C + c) * T + t];
    GemmEpilogue ep;
    ep.row_scale = sc.data(); ep.row_shift = sh.data(); ep.act = Activation::kRelu;
    if (s.res) { ep.residual = res.data(); ep.ld_residual = OP; }
    std::function<void()> fa;
    PackedOperand pa;
    std::vector<float> col;
    const char* what = "sgemm";
    if (s.K == 1 && s.s == 1) {
      pa = sgemm_pack_a(OC, C, w.data(), C, 1);
      fa = [&] { sgemm(OC, P, C, 1.0f, w.data(), C, 1, x.data(), P, 1, o1.data(), P, false, &pa, &ep); };
    } else if (s.K == 3 && s.s == 1) {
      pa = conv3x3_winograd_pack(OC, C, w.data()); what = "winograd";
      fa = [&] { conv3x3_winograd(x.data(), C, s.H, s.H, w.data(), OC, o1.data(), ep, &pa); };
    } else {  // im2col + sgemm (not Zenith's implicit path; an upper bound of its cost)
      pa = sgemm_pack_a(OC, C * T, w.data(), C * T, 1); what = "im2col+sgemm";
      col.resize(C * T * OP);
      fa = [&] {
        zenith::parallel_for(C * T, 1, [&](int64_t lo, int64_t hi) {
          for (int64_t row = lo; row < hi; ++row) {
            int64_t c = row / T, kh = (row % T) / s.K, kw = row % s.K;
            for (int64_t oh = 0; oh < g.OH; ++oh)
              for (int64_t ow = 0; ow < g.OW; ++ow) {
                int64_t ih = oh * g.s - g.p + kh, iw = ow * g.s - g.p + kw;
                col[row * OP + oh * g.OW + ow] = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W ? x[c * P + ih * g.W + iw] : 0.f;
              }
          }
        });
        sgemm(OC, OP, C * T, 1.0f, w.data(), C * T, 1, col.data(), OP, 1, o1.data(), OP, false, &pa, &ep);
      };
    }
    auto fb = [&] {
      const float* r = s.res ? rb.data() : nullptr;
      if (avx512) conv_blocked<16, 12, 2, true>(g, xb.data(), wb.data(), o2.data(), sc.data(), sh.data(), r, true);
      else conv_blocked<8, 6, 2, false>(g, xb.data(), wb.data(), o2.data(), sc.data(), sh.data(), r, true);
    };
    fa(); fb();
    double maxerr = 0;
    for (int64_t c = 0; c < OC; ++c)
      for (int64_t p = 0; p < OP; ++p) maxerr = std::max(maxerr, (double)std::fabs(o1[c * OP + p] - o2[(c / L) * OP * L + p * L + c % L]));
    std::vector<double> ta, tb;
    for (int rep = 0; rep < 40; ++rep) {
      double t0 = now(); fa(); double t1 = now(); fb(); double t2 = now();
      ta.push_back(t1 - t0); tb.push_back(t2 - t1);
    }
    std::sort(ta.begin(), ta.end()); std::sort(tb.begin(), tb.end());
    double fl = 2.0 * C * OC * OP * T;
    printf("%5ld->%-5ld %2ldx%-2ld k%ld s%ld res=%d  %-12s %.3f ms %4.0f GF/s | blocked %.3f ms %4.0f GF/s  ratio %.2f err %.1e\n", C, OC, s.H, s.H, s.K, s.s, s.res,
           what, ta[20] * 1e3, fl / ta[20] / 1e9, tb[20] * 1e3, fl / tb[20] / 1e9, tb[20] / ta[20], maxerr);
  }
}
