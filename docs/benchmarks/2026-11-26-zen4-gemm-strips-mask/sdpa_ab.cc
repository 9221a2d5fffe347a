// In-process A/B of sdpa's mask handling at encoder shapes: B 1, 12 heads, L = S = 128,
// a (1, 1, L, S) bool mask, layout (B, L, H, E): of ones (what transformers passes for
// an unpadded input: skipped since this change) or with the last `padded` keys false
// (applied either way: a control). Rounds interleaved, 20 calls each; ZM set applies
// every mask, as before (ab_switches.diff). Build as gemm_ab.cc, then
//   [ZENITH_NO_AVX512=1] /tmp/sdpa_ab 2 <head dim: 32 MiniLM, 64 BERT-base> [padded]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "zenith/ir.h"
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
using namespace zenith;
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  set_num_threads(argc > 1 ? atoi(argv[1]) : 2);
  const int64_t B = 1, H = 12, L = 128, S = L, E = argc > 2 ? atol(argv[2]) : 32;
  std::mt19937 rng(0);
  std::normal_distribution<float> nd;
  std::vector<float> q(size_t(B * L * H * E)), k(q.size()), v(q.size()), o(q.size());
  for (auto* p : {&q, &k, &v})
    for (auto& x : *p) x = nd(rng);
  std::unique_ptr<bool[]> mask(new bool[size_t(L * S)]);
  const int64_t padded = argc > 3 ? atol(argv[3]) : 0;
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < S; ++j) mask[size_t(i * S + j)] = j < S - padded;
  std::vector<TensorRef> in = {{q.data(), DType::f32, {B, L, H, E}},
                               {k.data(), DType::f32, {B, S, H, E}},
                               {v.data(), DType::f32, {B, S, H, E}},
                               {mask.get(), DType::b8, {1, 1, L, S}}};
  Node n;
  n.op = Op::sdpa;
  n.set_int("layout", 1);
  n.set_int("has_mask", 1);
  std::vector<TensorRef> out = {{o.data(), DType::f32, {B, L, H, E}}};
  std::vector<double> tnew, told, ratio;
  for (int r = 0; r < 41; ++r) {
    setenv("ZM", "1", 1);
    double t0 = now();
    for (int i = 0; i < 20; ++i) run_node(n, in, out);
    double t1 = now();
    unsetenv("ZM");
    for (int i = 0; i < 20; ++i) run_node(n, in, out);
    double t2 = now();
    told.push_back((t1 - t0) / 20);
    tnew.push_back((t2 - t1) / 20);
    ratio.push_back((t2 - t1) / (t1 - t0));
  }
  for (auto* x : {&told, &tnew, &ratio}) std::sort(x->begin(), x->end());
  std::printf("sdpa H%ld L%ld E%ld, mask with %ld keys false: old %.1f us, new %.1f us; new/old %.3f (p25 %.3f, p75 %.3f)\n", long(H),
              long(L), long(E), long(padded), told[20] * 1e6, tnew[20] * 1e6, ratio[20], ratio[10], ratio[30]);
}
