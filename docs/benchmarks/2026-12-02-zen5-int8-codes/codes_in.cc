// One int8 conv (conv2d_int8), static scale, bias + ReLU (+ residual), interleaved: mode 0 reads and writes floats,
// mode 1 reads codes (Conv2dInt8Codes::x) and writes floats, mode 2 codes in and out; median ms of `iters` calls each.
// ./codes_in N C H OC K stride res iters threads L   (build: g++ -O2 -std=c++17 -I csrc codes_in.cc build/cpp/libzenith_core.a -fopenmp -o codes_in)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/quant.h"
#include "zenith/threadpool.h"
using namespace zenith;
// args: N C H OC K stride res iters threads
int main(int argc, char** argv) {
  int64_t N = atoi(argv[1]), C = atoi(argv[2]), H = atoi(argv[3]), OC = atoi(argv[4]), KK = atoi(argv[5]), s = atoi(argv[6]);
  bool res = atoi(argv[7]); int iters = atoi(argv[8]); set_num_threads(atoi(argv[9])); int64_t L = argc > 10 ? atoi(argv[10]) : 0;
  Conv2dInt8Geom g; g.N = N; g.C = C; g.H = H; g.W = H; g.OC = OC; g.KH = g.KW = KK;
  int64_t p = KK / 2; g.pd = {p, p}; g.st = {s, s};
  g.OH = (H + 2 * p - KK) / s + 1; g.OW = g.OH; g.L = L;
  int64_t K = g.K();
  std::mt19937 rng(1); std::uniform_int_distribution<int> d(-127, 127); std::uniform_real_distribution<float> u(0, 1);
  std::vector<uint8_t> w(OC * (4 + K));
  for (int64_t o = 0; o < OC; ++o) { float sc = 0.01f; memcpy(&w[o * (4 + K)], &sc, 4); for (int64_t k = 0; k < K; ++k) w[o * (4 + K) + 4 + k] = uint8_t(int8_t(d(rng))); }
  QIsa isa = qisa_default();
  PackedOperand pk = conv2d_int8_pack(g, w.data(), isa);
  int64_t Cp = L ? (C + L - 1) / L * L : C, OCp = L ? (OC + L - 1) / L * L : OC;
  std::vector<float> x(N * Cp * H * H), y(N * OCp * g.OH * g.OW), r(y.size()), bias(OC, 0.1f);
  for (auto& v : x) v = u(rng); for (auto& v : r) v = u(rng) - 0.5f;
  GemmEpilogue ep; ep.row_shift = bias.data(); ep.act = Activation::kRelu;
  std::vector<int8_t> yq(N * g.OH * g.OW * OC), xq(N * H * H * C);
  for (size_t i = 0; i < xq.size(); ++i) xq[i] = int8_t(i * 7 % 100);
  std::vector<double> all[3];
  for (int i = 0; i < iters * 3; ++i) {
    const int mode = i % 3; Conv2dInt8Codes io; if (mode == 1) io.x = xq.data(); if (mode == 2) { io.x = xq.data(); io.y = yq.data(); io.y_scale = 0.05f; }
    auto& ts = all[mode];
    auto t0 = std::chrono::steady_clock::now();
    conv2d_int8(g, isa, x.data(), pk, 0.01f, ep, res ? r.data() : nullptr, mode == 2 ? nullptr : y.data(), io);
    ts.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  for (int mode = 0; mode < 3; ++mode) { auto& ts = all[mode];
  std::sort(ts.begin(), ts.end());
  double gop = 2.0 * N * g.OH * g.OW * OC * K / 1e9;
  printf("mode%d L%ld %s N%ld C%ld H%ld OC%ld K%ld s%ld res%d: %.3f ms  %.0f GOP/s\n", mode, L, qisa_name(isa), N, C, H, OC, KK, s, res, ts[ts.size() / 2], gop / ts[ts.size() / 2] * 1e3); }
}
