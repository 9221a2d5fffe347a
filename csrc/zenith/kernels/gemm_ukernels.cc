// The micro-kernel list at run time, and one kernel run alone over a whole product
// (for the tests and the benchmark; sgemm's drivers are in gemm.cc).
#include "zenith/kernels/gemm_ukernels.h"

#include <algorithm>
#include <cstdlib>

#include "zenith/error.h"
#include "zenith/kernels/gemm_internal.h"

namespace zenith {

using namespace gemm_detail;

const std::vector<GemmUkernelInfo>& gemm_ukernels() {
  static const std::vector<GemmUkernelInfo> list = [] {
    std::vector<GemmUkernelInfo> v;
    for (const GemmUkernelDef& u : kGemmUkernels)
      v.push_back({u.name, gemm_isa_name(u.isa), u.mr, u.nr, u.a == GemmA::rows, u.ka, u.kb,
                   gemm_isa_supported(u.isa)});
    return v;
  }();
  return list;
}

size_t gemm_ukernel_index(const std::string& name) {
  const auto& list = gemm_ukernels();
  std::string known;
  for (size_t i = 0; i < list.size(); ++i) {
    if (name == list[i].name) return i;
    known += (i ? ", " : "") + std::string(list[i].name);
  }
  fail("unknown gemm micro-kernel '", name, "'; known: ", known);
}

namespace {
std::shared_ptr<float> zeroed(int64_t n) {
  size_t bytes = (size_t(std::max<int64_t>(n, 1)) * sizeof(float) + 63) / 64 * 64;
  std::shared_ptr<float> p(static_cast<float*>(std::aligned_alloc(64, bytes)), std::free);
  if (!p) fail_alloc("gemm micro-kernel case: out of memory allocating ", bytes, " bytes");
  std::fill_n(p.get(), bytes / sizeof(float), 0.0f);
  return p;
}
}  // namespace

// Layouts: column panel p of B holds K rows of kb floats at b_ + p * K * kb (columns
// past N zero); row panel q of a packed A holds K steps of ka floats at
// a_ + q * K * ka (rows past M zero); a rows kernel's A is M rows lda apart.
GemmUkernelCase::GemmUkernelCase(size_t kernel, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda,
                                 const float* b, int64_t ldb, int64_t kc)
    : kernel_(kernel), M_(M), N_(N), K_(K), kc_(kc), lda_(lda) {
  ZENITH_CHECK(kernel < gemm_ukernels().size(), "gemm micro-kernel ", kernel, " is past the list (",
               gemm_ukernels().size(), " kernels)");
  const GemmUkernelInfo& u = gemm_ukernels()[kernel];
  ZENITH_CHECK(u.supported, u.name, " needs ", u.isa, ", which this CPU lacks");
  ZENITH_CHECK(M >= 0 && N >= 0 && K >= 0 && kc > 0 && lda >= K && ldb >= N, "gemm micro-kernel case: bad sizes");
  int64_t npanels = (N + u.nr - 1) / u.nr, mpanels = (M + u.mr - 1) / u.mr;
  b_ = zeroed(npanels * K * u.kb);
  for (int64_t p = 0; p < npanels; ++p)
    for (int64_t k = 0; k < K; ++k) {
      const float* src = b + k * ldb + p * u.nr;
      float* dst = b_.get() + (p * K + k) * u.kb;
      for (int64_t j = 0; j < std::min(u.nr, N - p * u.nr); ++j) dst[j] = src[j];
    }
  if (u.a_rows) {
    a_ = zeroed(M * lda);
    std::copy_n(a, M * lda - (M > 0 ? lda - K : 0), a_.get());
    return;
  }
  a_ = zeroed(mpanels * K * u.ka);
  for (int64_t q = 0; q < mpanels; ++q)
    for (int64_t k = 0; k < K; ++k) {
      const float* src = a + q * u.mr * lda + k;
      float* dst = a_.get() + (q * K + k) * u.ka;
      for (int64_t r = 0; r < std::min(u.mr, M - q * u.mr); ++r) dst[r] = src[r * lda];
    }
}

// As sgemm's driver: column panels of B outside, then k blocks, then A's row panels.
void GemmUkernelCase::run(float* c, int64_t ldc, bool accumulate) const {
  const GemmUkernelDef& u = kGemmUkernels[kernel_];
  for (int64_t j0 = 0; j0 < N_; j0 += u.nr)
    for (int64_t pc = 0; pc == 0 || pc < K_; pc += kc_) {  // K = 0 still writes C
      const int64_t kc = std::min(kc_, K_ - pc);
      const float* bp = b_.get() + (j0 / u.nr * K_ + pc) * u.kb;
      for (int64_t i0 = 0; i0 < M_; i0 += u.mr) {
        int64_t mr = std::min<int64_t>(u.mr, M_ - i0), nr = std::min<int64_t>(u.nr, N_ - j0);
        float* ct = c + i0 * ldc + j0;
        bool add = accumulate || pc > 0;
        if (u.a == GemmA::rows)
          u.rows(kc, a_.get() + i0 * lda_ + pc, lda_, bp, u.kb, ct, ldc, mr, nr, add, 0);
        else
          u.packed(kc, a_.get() + (i0 / u.mr * K_ + pc) * u.ka, bp, ct, ldc, mr, nr, add);
      }
    }
}

}  // namespace zenith
