// nonfinite_images on one image of ResNet-50's Winograd conv inputs, 8 MiB touched between calls (the
// input out of L2, in L3); median of 200. Build: g++ -O2 -march=x86-64-v3 -std=c++17 -Icsrc scanbench.cc
// build/cpp/libzenith_core.a -lgomp -lpthread; argument: 1 thread (else 2).
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char**) {
  set_num_threads(argc > 1 ? 1 : 2);
  struct S { int64_t C, HW; } ss[] = {{64, 56}, {128, 28}, {256, 14}, {512, 7}};
  for (auto s : ss) {
    const int64_t img = s.C * s.HW * s.HW;
    std::vector<float> x(size_t(img), 1.0f), flush(size_t(8 << 20), 1.0f);
    std::vector<double> t;
    for (int r = 0; r < 200; ++r) {
      for (size_t i = 0; i < flush.size(); i += 16) flush[i] += 1;  // x out of L2 (still in L3)
      auto a = std::chrono::steady_clock::now();
      auto b = nonfinite_images(x.data(), 1, img);
      auto e = std::chrono::steady_clock::now();
      if (b[0]) return 1;
      t.push_back(std::chrono::duration<double, std::micro>(e - a).count());
    }
    std::sort(t.begin(), t.end());
    std::printf("C %ld HW %ld: %.1f us (%.1f GB/s)\n", long(s.C), long(s.HW), t[100], img * 4 / t[100] / 1e3);
  }
}
