// Build: g++ -O2 -std=c++17 -Icsrc <this> build/cpp/libzenith_core.a -fopenmp; args: C E P H stride (default MobileNet V2 block 2); T=threads
// MobileNet V2's second block (16 -> 96 on 112 x 112, depthwise stride 2, -> 24), batch 8,
// 2 threads: the fused blocked kernel and its parts.
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
using namespace zenith;
template <class F> double best_ms(F f, int reps = 15) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now(); f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}
int main(int argc, char** argv) {
  set_num_threads(getenv("T") ? atoi(getenv("T")) : 2);
  const int64_t N = 8, L = 8, C = argc > 1 ? atoi(argv[1]) : 16, E = argc > 2 ? atoi(argv[2]) : 96, P = argc > 3 ? atoi(argv[3]) : 24,
                H = argc > 4 ? atoi(argv[4]) : 112, S = argc > 5 ? atoi(argv[5]) : 2;
  NchwcConvGeom gd; gd.N = N; gd.L = L; gd.C = gd.OC = gd.groups = E; gd.H = gd.W = H; gd.KH = gd.KW = 3;
  gd.st = {S, S}; gd.pd = {1, 1}; gd.OH = gd.OW = (H + 2 - 3) / S + 1;
  NchwcConvGeom ge = gd; ge.groups = 1; ge.C = C; ge.KH = ge.KW = 1; ge.st = {1, 1}; ge.pd = {0, 0}; ge.OH = ge.OW = H;
  NchwcConvGeom gp = gd; gp.groups = 1; gp.C = E; gp.OC = P; gp.H = gp.W = gd.OH; gp.KH = gp.KW = 1; gp.st = {1, 1}; gp.pd = {0, 0};
  std::vector<float> w(E * 200, 0.01f), sc(E * 2, 1.0f), sh(E * 2, 0.1f);
  auto p1 = conv2d_nchwc_pack(ge, w.data()); auto p2 = depthwise_nchwc_pack(gd, w.data()); auto p3 = conv2d_nchwc_pack(gp, w.data());
  const int64_t EB = (E + L - 1) / L, CB = (C + L - 1) / L, OB = (P + L - 1) / L, OP = gd.OH * gd.OW;
  std::vector<float> x(N * CB * L * H * H, 0.5f), e(N * EB * L * H * H), d(N * EB * L * OP), o(N * OB * L * OP);
  auto act = Activation::kRelu6;
  double f_full = best_ms([&] { conv2d_pw_dw_nchwc(gd, C, P, {&p1, sc.data(), sh.data(), act}, {&p2, sc.data(), sh.data(), act}, {&p3, sc.data(), sh.data(), Activation::kNone}, x.data(), nullptr, o.data()); });
  double f_nop = best_ms([&] { conv2d_pw_dw_nchwc(gd, C, E, {&p1, sc.data(), sh.data(), act}, {&p2, sc.data(), sh.data(), act}, {nullptr}, x.data(), nullptr, d.data()); });
  double s_e = best_ms([&] { conv2d_nchwc(ge, x.data(), p1, sc.data(), sh.data(), nullptr, act, e.data()); });
  double s_d = best_ms([&] { depthwise_nchwc(gd, e.data(), p2, sc.data(), sh.data(), nullptr, act, d.data()); });
  double s_p = best_ms([&] { conv2d_nchwc(gp, d.data(), p3, sc.data(), sh.data(), nullptr, Activation::kNone, o.data()); });
  // expand alone at batch 1 x 8 (its input and output per image in L2/L3)
  NchwcConvGeom ge1 = ge; ge1.N = 1;
  double s_e1 = best_ms([&] { for (int i = 0; i < 8; ++i) conv2d_nchwc(ge1, x.data() + i * CB * L * H * H, p1, sc.data(), sh.data(), nullptr, act, e.data()); });
  double s_e_same = best_ms([&] { for (int i = 0; i < 8; ++i) conv2d_nchwc(ge1, x.data(), p1, sc.data(), sh.data(), nullptr, act, e.data()); });
  NchwcConvGeom gsm = ge1; gsm.H = gsm.W = gsm.OH = gsm.OW = 28;  // a 28 x 28 map: input 50 KB, output 300 KB
  double s_small = best_ms([&] { for (int i = 0; i < 128; ++i) conv2d_nchwc(gsm, x.data(), p1, sc.data(), sh.data(), nullptr, act, e.data()); });
  std::printf("expand same image x8 %.3f (%.0f GFLOP/s); 28x28 x128 %.3f (%.0f GFLOP/s)\n", s_e_same, 2.0 * 8 * E * H * H * C / 1e6 / s_e_same, s_small, 2.0 * 128 * E * 784 * C / 1e6 / s_small);
  const double fe = 2.0 * N * E * H * H * C / 1e6, fd = 2.0 * N * E * OP * 9 / 1e6, fp = 2.0 * N * P * OP * E / 1e6;
  std::printf("threads %d  C %ld E %ld P %ld H %ld s %ld\n", num_threads(), C, E, P, H, S);
  std::printf("fused full %.3f ms (%.0f GFLOP/s)  fused no-proj %.3f\n", f_full, (fe + fd + fp) / f_full, f_nop);
  std::printf("separate: expand %.3f (%.0f GFLOP/s) dw %.3f proj %.3f (%.0f) sum %.3f; expand image by image %.3f (%.0f)\n", s_e, fe / s_e, s_d, s_p, fp / s_p, s_e + s_d + s_p, s_e1, fe / s_e1);
}
