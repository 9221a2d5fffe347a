// The multiply-add rate of each instruction a GEMM's inner loop is built from, on one
// core: fp32 FMA (AVX2, AVX-512) and the int8 dot products (AVX2's maddubs + madd +
// add, AVX-VNNI, AVX-512 VNNI). Independent accumulators, operands in registers: the
// instruction's throughput and nothing else, the ceiling of any kernel made of it.
//
// Why: how much faster int8 can run than fp32 is set by these rates, and they differ by
// CPU more than by kernel. Zen 5 runs maddubs + madd at 2.0-2.1x the AVX2 FMA's
// multiply-adds and VNNI at 4x; a CPU that issued both integer multiplies on one pipe and
// FMAs on two would run them at parity, and an int8 GEMM there could not beat fp32 by
// compute alone. The `machine` workload reports them next to the peak SGEMM.
#include <immintrin.h>

#include <chrono>
#include <cstdint>

#include "zenith/kernels/kernels.h"

namespace zenith {
namespace {

using Clock = std::chrono::steady_clock;
double ns_since(Clock::time_point t0) { return std::chrono::duration<double, std::nano>(Clock::now() - t0).count(); }

// One loop for every instruction: ten independent chains, each step one asm statement
// (from intrinsics GCC 12 merged chains that started alike, copied registers and
// spilled to the stack inside the loop), each chain from its own value, the operands
// passed through an empty volatile asm every iteration (`keep`) so nothing is hoisted,
// and the chains through it after the clock stops, so none is dead. macs: per step.
constexpr int kAcc = 10;

template <class V, class Start, class Step, class Keep>
__attribute__((always_inline)) inline double chains(int64_t iters, const V& a0, const V& b0, Start start, Step step,
                                                    Keep keep, int macs) {
  V a = a0, b = b0, c[kAcc];
#pragma GCC unroll 10
  for (int j = 0; j < kAcc; ++j) start(c[j], j);
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 10
    for (int j = 0; j < kAcc; ++j) step(c[j], a, b);
    keep(a);
    keep(b);
  }
  const double ns = ns_since(t0);
#pragma GCC unroll 10
  for (int j = 0; j < kAcc; ++j) keep(c[j]);
  return double(iters) * kAcc * macs / ns;
}

__attribute__((target("avx2,fma"))) double fma256(int64_t iters) {
  return chains(
      iters, _mm256_set1_ps(1.0f), _mm256_set1_ps(1e-8f), [](__m256& c, int j) { c = _mm256_set1_ps(float(j)); },
      [](__m256& c, __m256 a, __m256 b) { __asm__("vfmadd231ps %2, %1, %0" : "+x"(c) : "x"(a), "x"(b)); },
      [](__m256& v) { __asm__ volatile("" : "+x"(v)); }, 8);
}

__attribute__((target("avx2,fma"))) double maddubs256(int64_t iters) {
  const __m256i ones = _mm256_set1_epi16(1);
  return chains(
      iters, _mm256_set1_epi8(1), _mm256_set1_epi8(2), [](__m256i& c, int j) { c = _mm256_set1_epi32(j); },
      [ones](__m256i& c, __m256i a, __m256i b) {
        __m256i t;
        __asm__("vpmaddubsw %[b], %[a], %[t]\n\tvpmaddwd %[one], %[t], %[t]\n\tvpaddd %[t], %[c], %[c]"
                : [c] "+x"(c), [t] "=&x"(t)
                : [a] "x"(a), [b] "x"(b), [one] "x"(ones));
      },
      [](__m256i& v) { __asm__ volatile("" : "+x"(v)); }, 32);
}

__attribute__((target("avx2,fma,avxvnni"))) double avxvnni256(int64_t iters) {
  return chains(
      iters, _mm256_set1_epi8(1), _mm256_set1_epi8(2), [](__m256i& c, int j) { c = _mm256_set1_epi32(j); },
      [](__m256i& c, __m256i a, __m256i b) { __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(c) : "x"(a), "x"(b)); },
      [](__m256i& v) { __asm__ volatile("" : "+x"(v)); }, 32);
}

__attribute__((target("avx512f"))) double fma512(int64_t iters) {
  return chains(
      iters, _mm512_set1_ps(1.0f), _mm512_set1_ps(1e-8f),
      [](__m512& c, int j) __attribute__((target("avx512f"))) { c = _mm512_set1_ps(float(j)); },
      [](__m512& c, __m512 a, __m512 b) __attribute__((target("avx512f"))) {
        __asm__("vfmadd231ps %2, %1, %0" : "+v"(c) : "v"(a), "v"(b));
      },
      [](__m512& v) __attribute__((target("avx512f"))) { __asm__ volatile("" : "+v"(v)); }, 16);
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) double vnni512(int64_t iters) {
  return chains(
      iters, _mm512_set1_epi8(1), _mm512_set1_epi8(2),
      [](__m512i& c, int j) __attribute__((target("avx512f"))) { c = _mm512_set1_epi32(j); },
      [](__m512i& c, __m512i a, __m512i b) __attribute__((target("avx512f"))) {
        __asm__("vpdpbusd %2, %1, %0" : "+v"(c) : "v"(a), "v"(b));
      },
      [](__m512i& v) __attribute__((target("avx512f"))) { __asm__ volatile("" : "+v"(v)); }, 64);
}

// The best of `runs` timings of iters iterations (the first run also warms the clock up).
double best_of(double (*f)(int64_t), int64_t iters, int runs) {
  double best = 0;
  for (int r = 0; r < runs; ++r) {
    const double x = f(iters);
    best = x > best ? x : best;
  }
  return best;
}

}  // namespace

std::vector<IsaRate> isa_mac_rates(int64_t iters, int runs) {
  ZENITH_CHECK(iters >= 1 && runs >= 1, "isa_mac_rates: iters and runs must be at least 1, got ", iters, " and ",
               runs);
  std::vector<IsaRate> out;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool bw_vnni = avx512 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
  const bool avxvnni = avx2 && __builtin_cpu_supports("avxvnni");
  auto add = [&](const char* name, bool ok, double (*f)(int64_t)) {
    out.push_back({name, ok, ok ? best_of(f, iters, runs) : 0.0});
  };
  add("fp32 fma (avx2)", avx2, fma256);
  add("int8 maddubs+madd (avx2)", avx2, maddubs256);
  add("int8 dpbusd (avx-vnni)", avxvnni, avxvnni256);
  add("fp32 fma (avx512)", avx512, fma512);
  add("int8 dpbusd (avx512-vnni)", bw_vnni, vnni512);
  return out;
}

}  // namespace zenith
