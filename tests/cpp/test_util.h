// Helpers the C++ test files share.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "zenith/ir.h"

// n standard normal floats from a seeded generator, times scale.
inline std::vector<float> randn(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = scale * d(rng);
  return v;
}

// Concrete shapes per value id of a graph with static shapes, as the runtime passes them
// to the memory planner and find_batch_slices.
inline std::vector<std::vector<int64_t>> static_shapes(const zenith::Graph& g) {
  std::vector<std::vector<int64_t>> shapes(g.values.size());
  for (size_t v = 0; v < g.values.size(); ++v)
    for (const auto& d : g.values[v].type.shape) shapes[v].push_back(d.value());
  return shapes;
}

// Blocked-layout candidates that chain_int8 links: six int8 convs (u8 filter rows, static
// x_scale) over two images, 1x1 into 3x3; the 3x3 into a 1x1 with x as its residual, a
// strided 1x1 and, as its residual, a third 1x1; %c returned and read by int8 convs.
// test_quant_conv.cc's chain-pass test and test_batch_slices.cc's int8 slices read it.
inline const char* kInt8ChainGraph = R"(graph(%x: f32[2, 20, 12, 12], %w0: u8[24, 24], %w1: u8[24, 220], %w2: u8[20, 28], %w3: u8[20, 28], %w4: u8[16, 24], %b: f32[24], %w5: u8[24, 20]) {
  %a: f32[2, 24, 12, 12] = conv2d(%x, %w0, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[1], kernel=[1, 1], x_scale=f[0.05], activation=[1]}
  %c: f32[2, 24, 12, 12] = conv2d(%a, %w1, %w1) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], has_bias=[0], kernel=[3, 3], x_scale=f[0.04], activation=[1]}
  %d: f32[2, 20, 12, 12] = conv2d(%c, %w2, %w2, %x) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[0], kernel=[1, 1], x_scale=f[0.3], has_residual=[1], activation=[1]}
  %e: f32[2, 20, 6, 6] = conv2d(%c, %w3, %w3) {stride=[2, 2], padding=[0, 0], dilation=[1, 1], has_bias=[0], kernel=[1, 1], x_scale=f[0.3]}
  %f: f32[2, 16, 12, 12] = conv2d(%d, %w4, %w4) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[0], kernel=[1, 1], x_scale=f[0.02]}
  %h: f32[2, 24, 12, 12] = conv2d(%f, %w5, %b, %c) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[1], kernel=[1, 1], x_scale=f[0.5], has_residual=[1]}
  return (%e, %f, %d, %h, %c)
})";
