// The multiply-add rate of each instruction a GEMM's inner loop is built from, on one
// core: fp32 FMA (AVX2, AVX-512) and the int8 dot products (AVX2's maddubs + madd +
// add, AVX-VNNI, AVX-512 VNNI). Independent accumulators, operands in registers: the
// instruction's throughput and nothing else, the ceiling of any kernel made of it.
//
// Why: how much faster int8 can run than fp32 is set by these rates, and they differ by
// CPU more than by kernel. Zen 5 in AVX2 mode runs maddubs + madd at ~1.6x the FMA's
// multiply-adds; a CPU that issues both integer multiplies on one pipe and FMAs on two
// runs them at parity, and an int8 GEMM there cannot beat fp32 by compute alone. The
// `machine` workload reports them next to the peak SGEMM.
#include <immintrin.h>

#include <chrono>
#include <cstdint>

#include "zenith/kernels/kernels.h"

namespace zenith {
namespace {

using Clock = std::chrono::steady_clock;
double ns_since(Clock::time_point t0) { return std::chrono::duration<double, std::nano>(Clock::now() - t0).count(); }

// Each loop: ten independent chains in named variables, each step one asm statement
// (from intrinsics GCC 12 merged chains alike, copied registers and spilled to the stack
// inside the loop), each chain from its own value, the operands passed through an empty
// asm each iteration so nothing is hoisted; the chains end in a sink.
constexpr int kAcc = 10;
#define ZENITH_EACH_ACC(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9)

__attribute__((target("avx2,fma"))) double fma256(int64_t iters) {
  __m256 a = _mm256_set1_ps(1.0f), b = _mm256_set1_ps(1e-8f);
#define DECL(j) __m256 c##j = _mm256_set1_ps(float(j));
  ZENITH_EACH_ACC(DECL)
#undef DECL
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < iters; ++i) {
#define STEP(j) __asm__("vfmadd231ps %2, %1, %0" : "+x"(c##j) : "x"(a), "x"(b));
    ZENITH_EACH_ACC(STEP)
#undef STEP
    __asm__ volatile("" : "+x"(a), "+x"(b));
  }
  const double ns = ns_since(t0);
  __m256 s = _mm256_setzero_ps();
#define SUM(j) s = _mm256_add_ps(s, c##j);
  ZENITH_EACH_ACC(SUM)
#undef SUM
  volatile float sink = _mm256_cvtss_f32(s);
  (void)sink;
  return double(iters) * kAcc * 8 / ns;
}

__attribute__((target("avx2,fma"))) double maddubs256(int64_t iters) {
  __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(2);
  const __m256i ones = _mm256_set1_epi16(1);
#define DECL(j) __m256i c##j = _mm256_set1_epi32(j);
  ZENITH_EACH_ACC(DECL)
#undef DECL
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < iters; ++i) {
    __m256i t;
#define STEP(j)                                                                              \
  __asm__("vpmaddubsw %[b], %[a], %[t]\n\tvpmaddwd %[one], %[t], %[t]\n\tvpaddd %[t], %[c], %[c]" \
          : [c] "+x"(c##j), [t] "=&x"(t)                                                        \
          : [a] "x"(a), [b] "x"(b), [one] "x"(ones));
    ZENITH_EACH_ACC(STEP)
#undef STEP
    __asm__ volatile("" : "+x"(a), "+x"(b));
  }
  const double ns = ns_since(t0);
  __m256i s = _mm256_setzero_si256();
#define SUM(j) s = _mm256_add_epi32(s, c##j);
  ZENITH_EACH_ACC(SUM)
#undef SUM
  volatile int sink = _mm256_extract_epi32(s, 0);
  (void)sink;
  return double(iters) * kAcc * 32 / ns;
}

__attribute__((target("avx2,fma,avxvnni"))) double avxvnni256(int64_t iters) {
  __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(2);
#define DECL(j) __m256i c##j = _mm256_set1_epi32(j);
  ZENITH_EACH_ACC(DECL)
#undef DECL
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < iters; ++i) {
#define STEP(j) __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(c##j) : "x"(a), "x"(b));
    ZENITH_EACH_ACC(STEP)
#undef STEP
    __asm__ volatile("" : "+x"(a), "+x"(b));
  }
  const double ns = ns_since(t0);
  __m256i s = _mm256_setzero_si256();
#define SUM(j) s = _mm256_add_epi32(s, c##j);
  ZENITH_EACH_ACC(SUM)
#undef SUM
  volatile int sink = _mm256_extract_epi32(s, 0);
  (void)sink;
  return double(iters) * kAcc * 32 / ns;
}

__attribute__((target("avx512f"))) double fma512(int64_t iters) {
  __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(1e-8f);
#define DECL(j) __m512 c##j = _mm512_set1_ps(float(j));
  ZENITH_EACH_ACC(DECL)
#undef DECL
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < iters; ++i) {
#define STEP(j) __asm__("vfmadd231ps %2, %1, %0" : "+v"(c##j) : "v"(a), "v"(b));
    ZENITH_EACH_ACC(STEP)
#undef STEP
    __asm__ volatile("" : "+v"(a), "+v"(b));
  }
  const double ns = ns_since(t0);
  __m512 s = _mm512_setzero_ps();
#define SUM(j) s = _mm512_add_ps(s, c##j);
  ZENITH_EACH_ACC(SUM)
#undef SUM
  volatile float sink = _mm512_cvtss_f32(s);
  (void)sink;
  return double(iters) * kAcc * 16 / ns;
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) double vnni512(int64_t iters) {
  __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(2);
#define DECL(j) __m512i c##j = _mm512_set1_epi32(j);
  ZENITH_EACH_ACC(DECL)
#undef DECL
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < iters; ++i) {
#define STEP(j) __asm__("vpdpbusd %2, %1, %0" : "+v"(c##j) : "v"(a), "v"(b));
    ZENITH_EACH_ACC(STEP)
#undef STEP
    __asm__ volatile("" : "+v"(a), "+v"(b));
  }
  const double ns = ns_since(t0);
  __m512i s = _mm512_setzero_si512();
#define SUM(j) s = _mm512_add_epi32(s, c##j);
  ZENITH_EACH_ACC(SUM)
#undef SUM
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, s);
  volatile int sink = lanes[0];
  (void)sink;
  return double(iters) * kAcc * 64 / ns;
}
#undef ZENITH_EACH_ACC

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
