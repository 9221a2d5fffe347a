#include "zenith/ir.h"
#include "zenith/runtime.h"
#include "zenith/threadpool.h"
#include <chrono>
#include <cstdio>
#include <vector>
#include <random>
#include <algorithm>
using namespace zenith;
int main() {
  set_num_threads(2);
  Executable exe(parse_graph(R"(graph(%x: f32[128, 768], %y: f32[128, 768], %w: f32[768], %b: f32[768]) {
  %n: f32[128, 768] = layer_norm(%x, %w, %b, %y) {eps=f[1e-05], normalized_ndim=[1]}
  return (%n)
})"));
  std::mt19937 g(1); std::uniform_real_distribution<float> d(-1, 1);
  const int NB = 32; std::vector<std::vector<float>> xs(NB, std::vector<float>(128*768)), ys = xs; std::vector<float> w(768), b(768);
  for (auto& v : xs) for (auto& e : v) e = d(g);
  for (auto& v : ys) for (auto& e : v) e = d(g);
  for (auto* v : {&w, &b}) for (auto& e : *v) e = d(g);
  std::vector<double> ts;
  for (int it = 0; it < 2000; ++it) {
    auto t0 = std::chrono::steady_clock::now();
    auto& x = xs[it % NB]; auto& y = ys[it % NB];
    auto out = exe.run({{x.data(), DType::f32, {128, 768}}, {y.data(), DType::f32, {128, 768}}, {w.data(), DType::f32, {768}}, {b.data(), DType::f32, {768}}}, {});
    auto t1 = std::chrono::steady_clock::now();
    ts.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  std::sort(ts.begin(), ts.end());
  printf("layer_norm+res 128x768: median %.1f us p10 %.1f\n", ts[1000]*1e6, ts[200]*1e6);
}
