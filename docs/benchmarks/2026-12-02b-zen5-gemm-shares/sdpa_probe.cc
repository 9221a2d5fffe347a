// sdpa alone at all-MiniLM-L6-v2's shapes (12 heads, 128 tokens, head 32; a neutral float mask), 2 threads, through
// Executable: median us. With VAR, a temporary switch read per call is set and unset in turns of 20 calls.
// (g++ -O2 -std=c++17 -I csrc sdpa_probe.cc build/cpp/libzenith_core.a -fopenmp -o sdpa_probe; ./sdpa_probe iters [VAR])
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
#include <algorithm>
#include "zenith/runtime.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  int iters = atoi(argv[1]);
  set_num_threads(2);
  Executable exe(parse_graph(R"(graph(%q: f32[1, 12, 128, 32], %k: f32[1, 12, 128, 32], %v: f32[1, 12, 128, 32], %m: f32[1, 1, 128, 128]) {
  %o: f32[1, 12, 128, 32] = sdpa(%q, %k, %v, %m) {has_mask=[1]}
  return (%o)
})"));
  std::mt19937 rng(1); std::normal_distribution<float> nd;
  std::vector<float> q(12 * 128 * 32), k(q.size()), v(q.size()), m(128 * 128, 0.0f);
  for (auto* x : {&q, &k, &v}) for (auto& t : *x) t = nd(rng);
  std::vector<InTensor> ins{{q.data(), DType::f32, {1, 12, 128, 32}}, {k.data(), DType::f32, {1, 12, 128, 32}},
                            {v.data(), DType::f32, {1, 12, 128, 32}}, {m.data(), DType::f32, {1, 1, 128, 128}}};
  const char* var = argc > 2 ? argv[2] : nullptr;
  std::vector<double> ts[2];
  for (int i = 0; i < iters; ++i) {
    const int side = var ? (i / 20) % 2 : 0;
    if (var) { if (side) setenv(var, "1", 1); else unsetenv(var); }
    auto t0 = std::chrono::steady_clock::now();
    exe.run(ins, {});
    ts[side].push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  for (int s = 0; s < (var ? 2 : 1); ++s) {
    std::sort(ts[s].begin(), ts[s].end());
    printf("sdpa %s median %.1f us\n", s ? "set" : "unset", ts[s][ts[s].size() / 2]);
  }
}
