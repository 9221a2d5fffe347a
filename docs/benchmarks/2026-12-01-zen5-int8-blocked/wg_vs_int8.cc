// One conv (C -> OC on HW x HW, N images, K x K, stride s, padding K / 2, bias + ReLU)
// over the blocked layout: fp32 as conv2d_nchwc runs it (3x3 stride 1 on 64+ channels by
// Winograd: F(4x4) where the runtime picks it, maps of 14+, 7 x 7 from batch 4; else
// F(2x2); other convs direct) against the int8 conv (static scale, qisa_default()),
// paired: each round runs both once, in turn. ./a.out C HW N rounds [OC K s] (OC = C,
// K = 3, s = 1 by default)
// Build: g++ -O2 -std=c++17 -I csrc wg_vs_int8.cc build/cpp/libzenith_core.a -fopenmp
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/quant.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  set_num_threads(2);
  const int64_t C = atoi(argv[1]), HW = atoi(argv[2]), N = atoi(argv[3]), rounds = atoi(argv[4]);
  const int64_t OC = argc > 5 ? atoi(argv[5]) : C, K = argc > 6 ? atoi(argv[6]) : 3, s = argc > 7 ? atoi(argv[7]) : 1;
  const int64_t L = nchwc_block(), CB = (C + L - 1) / L, OCB = (OC + L - 1) / L, P = K / 2, OHW = (HW + 2 * P - K) / s + 1;
  NchwcConvGeom g; g.N = N; g.C = C; g.H = g.W = HW; g.OC = OC; g.OH = g.OW = OHW; g.KH = g.KW = K; g.L = L;
  g.pd = {P, P}; g.st = {s, s};
  Conv2dInt8Geom q{N, C, HW, HW, OC, K, K, OHW, OHW, {s, s}, {P, P}, {1, 1}, L};
  std::vector<float> x(size_t(N * CB * L * HW * HW)), w(size_t(OC * C * K * K)), sc(OC, 1.0f), sh(OC, 0.1f);
  std::vector<float> y(size_t(N * OCB * L * OHW * OHW));
  for (auto& v : x) v = rand() / float(RAND_MAX);
  for (auto& v : w) v = (rand() / float(RAND_MAX) - 0.5f) * 0.1f;
  const bool wino = K == 3 && s == 1 && C >= 64 && OC >= 64 && C % L == 0 && OC % L == 0;
  const int m = !wino ? 0 : (HW >= 14 || (HW >= 7 && N >= 4)) ? 4 : 2;
  PackedOperand pf = wino ? conv3x3_winograd_nchwc_pack(g, w.data(), m) : conv2d_nchwc_pack(g, w.data());
  const int64_t KB = C * K * K;
  std::vector<uint8_t> rows(size_t(OC * (4 + KB)));
  for (int64_t o = 0; o < OC; ++o) {
    const float ws = 0.05f / 127;
    std::memcpy(&rows[size_t(o * (4 + KB))], &ws, 4);
    for (int64_t k = 0; k < KB; ++k) rows[size_t(o * (4 + KB) + 4 + k)] = uint8_t(int8_t(rand() % 255 - 127));
  }
  const QIsa isa = qisa_default();
  PackedOperand pq = conv2d_int8_pack(q, rows.data(), isa);
  GemmEpilogue ep; ep.row_shift = sh.data(); ep.act = Activation::kRelu;
  std::vector<double> tf, ti, ratio;
  auto now = [] { return std::chrono::steady_clock::now(); };
  for (int64_t r = 0; r < rounds + 2; ++r) {
    for (int k = 0; k < 2; ++k) {
      const bool int8 = (k + r) % 2;
      auto t0 = now();
      if (int8) conv2d_int8(q, isa, x.data(), pq, 1.0f / 127, ep, nullptr, y.data());
      else if (wino) conv3x3_winograd_nchwc(g, x.data(), pf, sc.data(), sh.data(), nullptr, Activation::kRelu, y.data());
      else conv2d_nchwc(g, x.data(), pf, sc.data(), sh.data(), nullptr, Activation::kRelu, y.data());
      const double ms = std::chrono::duration<double, std::milli>(now() - t0).count();
      if (r >= 2) (int8 ? ti : tf).push_back(ms);
    }
  }
  for (size_t i = 0; i < tf.size(); ++i) ratio.push_back(ti[i] / tf[i]);
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  printf("%ldx%ld/%ld C%ld OC%ld HW%ld N%ld L%ld: fp32 %s%d %.3f ms, int8 (%s) %.3f ms, int8 / fp32 %.3f\n", K, K, s, C,
         OC, HW, N, L, m ? "Winograd F" : "direct", m, med(tf), qisa_name(isa), med(ti), med(ratio));
}
