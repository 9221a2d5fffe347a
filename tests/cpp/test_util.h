// Helpers the C++ test files share.
#pragma once
#include <random>
#include <vector>

// n standard normal floats from a seeded generator.
inline std::vector<float> randn(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
