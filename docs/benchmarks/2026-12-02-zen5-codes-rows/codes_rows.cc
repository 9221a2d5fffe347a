// One int8 conv as ResNet-50's int8 graph runs it between int8 convs: codes in, codes out alone, the residual as
// codes (res 1) or none, bias + ReLU, blocked (L 16 on AVX-512, else 8). Two variants interleaved call by call:
// the write-out block by block (ZENITH_EXP_PM_OFF set: the temporary switch of pm_switch.diff, which this needs
// applied) and pixel by pixel (the committed code). Median ms of `iters` calls each.
// ./codes_rows N C H OC K res iters     (build: g++ -O2 -std=c++17 -I csrc codes_rows.cc build/cpp/libzenith_core.a -fopenmp)
#include <algorithm>
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
int main(int argc, char** argv) {
  if (argc < 8) return std::fprintf(stderr, "usage: codes_rows N C H OC K res iters\n"), 2;
  const int64_t N = atoi(argv[1]), C = atoi(argv[2]), H = atoi(argv[3]), OC = atoi(argv[4]), KK = atoi(argv[5]);
  const bool res = atoi(argv[6]);
  const int iters = atoi(argv[7]);
  const char* var = argc > 8 ? argv[8] : "ZENITH_EXP_PM_OFF";
  set_num_threads(2);
  const QIsa isa = qisa_default();
  const int64_t L = isa == QIsa::kAvx512 ? 16 : 8;
  Conv2dInt8Geom g;
  g.N = N, g.C = C, g.H = g.W = H, g.OC = OC, g.KH = g.KW = KK, g.L = L;
  const int64_t p = KK / 2;
  g.pd = {p, p}, g.st = {1, 1}, g.OH = g.OW = H;
  const int64_t K = g.K(), P = g.OH * g.OW;
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> d(-127, 127);
  std::vector<uint8_t> w(size_t(OC * (4 + K)));
  for (int64_t o = 0; o < OC; ++o) {
    const float sc = 0.01f;
    std::memcpy(&w[size_t(o * (4 + K))], &sc, 4);
    for (int64_t k = 0; k < K; ++k) w[size_t(o * (4 + K) + 4 + k)] = uint8_t(int8_t(d(rng)));
  }
  const PackedOperand pk = conv2d_int8_pack(g, w.data(), isa);
  std::vector<float> bias(size_t(OC), 0.1f);
  GemmEpilogue ep;
  ep.row_shift = bias.data();
  ep.act = Activation::kRelu;
  std::vector<int8_t> yq(size_t(N * P * OC)), xq(size_t(N * H * H * C)), rq(yq.size());
  for (size_t i = 0; i < xq.size(); ++i) xq[i] = int8_t(i * 7 % 100);
  for (size_t i = 0; i < rq.size(); ++i) rq[i] = int8_t(i * 13 % 120);
  std::vector<double> all[2];
  for (int i = 0; i < iters * 2; ++i) {
    const int v = i % 2;  // 0 off, 1 on
    if (v == 0) setenv(var, "1", 1);
    else unsetenv(var);
    Conv2dInt8Codes io;
    io.x = xq.data(), io.y = yq.data(), io.y_scale = 0.05f;
    if (res) io.res = rq.data(), io.res_scale = 0.02f;
    const auto t0 = std::chrono::steady_clock::now();
    conv2d_int8(g, isa, nullptr, pk, 0.01f, ep, nullptr, nullptr, io);
    all[v].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  double ms[2];
  for (int v = 0; v < 2; ++v) {
    std::sort(all[v].begin(), all[v].end());
    ms[v] = all[v][all[v].size() / 2];
  }
  std::printf("%s N%ld C%ld H%ld OC%ld K%ld res%d: %s set %.3f ms, unset %.3f ms (%.2fx)\n", qisa_name(isa), long(N),
              long(C), long(H), long(OC), long(KK), int(res), var, ms[0], ms[1], ms[1] / ms[0]);
}
