// The f32 GEMM micro-kernels as a list to iterate (tests, `zenith bench gemm-sweep`):
// the rows of gemm_ukernels.def with whether this CPU runs each, and a way to run one
// kernel alone over a whole product. sgemm itself picks its kernels from the same list
// at compile time (gemm_internal.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zenith {

struct GemmUkernelInfo {
  const char* name;  // dtype_op_MRxNR__isa[_variant], e.g. f32_gemm_6x16__avx2
  const char* isa;   // "avx2" or "avx512"
  int64_t mr, nr;    // the tile of C it computes
  bool a_rows;       // reads A's rows in place; else A packed in panels ka wide
  int64_t ka, kb;    // A's packed panel width (0 for a_rows), B's panel width
  bool supported;    // this CPU has the ISA
};

// Every micro-kernel built into this library, in gemm_ukernels.def's order.
const std::vector<GemmUkernelInfo>& gemm_ukernels();
// The index of the kernel with this name; throws naming the known ones.
size_t gemm_ukernel_index(const std::string& name);

// C (+)= A @ B (M x N x K; A, B and C row-major with leading dimensions lda, ldb,
// ldc) computed by one micro-kernel of the list alone, on the calling thread, k in
// blocks of kc: A and B are copied into the kernel's layouts when the case is made
// (B in kb-wide panels, A in ka-wide panels or, for a rows kernel, as rows lda
// apart), so run() times the kernel and nothing else. Throws for an index past the
// list or a kernel this CPU does not run.
class GemmUkernelCase {
 public:
  GemmUkernelCase(size_t kernel, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
                  int64_t ldb, int64_t kc = 256);
  void run(float* c, int64_t ldc, bool accumulate) const;
  const GemmUkernelInfo& kernel() const { return gemm_ukernels()[kernel_]; }
  int64_t rows() const { return M_; }  // C's
  int64_t cols() const { return N_; }

 private:
  size_t kernel_;
  int64_t M_, N_, K_, kc_, lda_;
  std::shared_ptr<float> a_, b_;  // A and B in the kernel's layouts
};

}  // namespace zenith
