// One int8 conv (conv2d_int8, blocked layout, static scale, bias + ReLU, optionally a residual) in three variants,
// interleaved call by call; median ms of `iters` calls each.
//   out: mode 0 writes floats, mode 1 codes alone, mode 2 floats and codes (Conv2dInt8Codes::y)
//   in:  mode 0 reads and writes floats, mode 1 reads codes (Conv2dInt8Codes::x), mode 2 codes in and out
// ./codes_io out|in N C H OC K stride res iters threads L
// (build: g++ -O2 -std=c++17 -I csrc codes_io.cc build/cpp/libzenith_core.a -fopenmp -o codes_io)
// Built from ../2026-12-01-zen5-int8-blocked/qconv.cc's setup.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/quant.h"
#include "zenith/threadpool.h"
using namespace zenith;

int main(int argc, char** argv) {
  if (argc < 12) return std::fprintf(stderr, "usage: codes_io out|in N C H OC K stride res iters threads L\n"), 2;
  const bool codes_in = std::string(argv[1]) == "in";
  const int64_t N = atoi(argv[2]), C = atoi(argv[3]), H = atoi(argv[4]), OC = atoi(argv[5]), KK = atoi(argv[6]),
                s = atoi(argv[7]), L = atoi(argv[11]);
  const bool res = atoi(argv[8]);
  const int iters = atoi(argv[9]);
  set_num_threads(atoi(argv[10]));
  Conv2dInt8Geom g;
  g.N = N, g.C = C, g.H = g.W = H, g.OC = OC, g.KH = g.KW = KK, g.L = L;
  const int64_t p = KK / 2;
  g.pd = {p, p}, g.st = {s, s};
  g.OH = g.OW = (H + 2 * p - KK) / s + 1;
  const int64_t K = g.K(), P = g.OH * g.OW;
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> d(-127, 127);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<uint8_t> w(size_t(OC * (4 + K)));
  for (int64_t o = 0; o < OC; ++o) {
    const float sc = 0.01f;
    std::memcpy(&w[size_t(o * (4 + K))], &sc, 4);
    for (int64_t k = 0; k < K; ++k) w[size_t(o * (4 + K) + 4 + k)] = uint8_t(int8_t(d(rng)));
  }
  const QIsa isa = qisa_default();
  const PackedOperand pk = conv2d_int8_pack(g, w.data(), isa);
  const int64_t Cp = (C + L - 1) / L * L, OCp = (OC + L - 1) / L * L;
  std::vector<float> x(size_t(N * Cp * H * H)), y(size_t(N * OCp * P)), r(y.size()), bias(size_t(OC), 0.1f);
  for (auto& v : x) v = u(rng);
  for (auto& v : r) v = u(rng) - 0.5f;
  GemmEpilogue ep;
  ep.row_shift = bias.data();
  ep.act = Activation::kRelu;
  std::vector<int8_t> yq(size_t(N * P * OC)), xq(size_t(N * H * H * C));
  for (size_t i = 0; i < xq.size(); ++i) xq[i] = int8_t(i * 7 % 100);
  std::vector<double> all[3];
  for (int i = 0; i < iters * 3; ++i) {
    const int mode = i % 3;
    Conv2dInt8Codes io;
    if (codes_in && mode >= 1) io.x = xq.data();
    if (mode == 2 || (!codes_in && mode == 1)) io.y = yq.data(), io.y_scale = 0.05f;
    const bool floats_out = codes_in ? mode < 2 : mode != 1;
    const auto t0 = std::chrono::steady_clock::now();
    conv2d_int8(g, isa, x.data(), pk, 0.01f, ep, res ? r.data() : nullptr, floats_out ? y.data() : nullptr, io);
    all[mode].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const double gop = 2.0 * N * P * OC * K / 1e9;
  for (int mode = 0; mode < 3; ++mode) {
    auto& ts = all[mode];
    std::sort(ts.begin(), ts.end());
    const double ms = ts[ts.size() / 2];
    std::printf("%s mode%d L%ld %s N%ld C%ld H%ld OC%ld K%ld s%ld res%d: %.3f ms  %.0f GOP/s\n", codes_in ? "in" : "out",
                mode, long(L), qisa_name(isa), long(N), long(C), long(H), long(OC), long(KK), long(s), int(res), ms,
                gop / ms * 1e3);
  }
}
