// Kernel interface. An operator has a life cycle: once per plan (shapes known) it is
// prepared -- its attributes decoded into the op's typed struct (attrs.h), and, for
// the ops with a prepare_<op>, the kernel's own choice of algorithm made and the
// packing of a constant weight described -- then run on every call over dense
// row-major buffers. The runtime never guesses what a kernel will do: it keeps what
// prepare returned and hands it back. Every kernel is found through the op table
// (kernel_for); each fast kernel has a plain scalar reference beside it in the same
// file (ref_*) that the tests compare against.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "zenith/attrs.h"
#include "zenith/error.h"
#include "zenith/ir.h"

namespace zenith {

struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  int rank() const { return int(shape.size()); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  template <typename T> T* as() const { return static_cast<T*>(data); }
};

struct PackedOperand;

struct KernelCtx {
  const Node& node;  // attributes resolved to constants (kernels read `attrs` instead)
  const std::vector<TensorRef>& in;
  std::vector<TensorRef>& out;
  const void* attrs = nullptr;  // the node's attrs::<op>, decoded once per plan
  const void* state = nullptr;  // what prepare_<op> chose for these shapes, or null
  // The constant weights packed the way prepare_<op> asked (WeightPack): one
  // PackedOperand per WeightPack slot, in order, from here on; or null: the kernel then
  // reads the weight inputs itself.
  const PackedOperand* packed = nullptr;

  template <class A> const A& a() const {
    ZENITH_CHECK(node.op == A::op && attrs, op_info(node.op).name, ": kernel read another op's attributes");
    return *static_cast<const A*>(attrs);
  }
  template <class S> const S& st() const {
    ZENITH_CHECK(state, op_info(node.op).name, ": kernel run without its prepared state");
    return *static_cast<const S*>(state);
  }
};

using KernelFn = void (*)(const KernelCtx&);

// The weight inputs a prepared kernel reads packed when the caller marks them all
// constant: which input slots, a key naming the packed form (equal keys mean equal
// bytes, so a copy can be kept across plans), and the function making it from the
// inputs' data (src[i] is slot i's): one PackedOperand per slot, in slot order, the
// returned pointer at the first (a fused block's several filters are packed together).
struct WeightPack {
  std::vector<int> slots;  // empty: the kernel reads no packed weight
  std::vector<int64_t> key;
  std::shared_ptr<const PackedOperand> (*pack)(const void* state, const void* const* src) = nullptr;
};

// What prepare_<op> sees: the node (attributes resolved), its typed attributes, and
// its operands' dtypes and shapes (no data).
struct PrepareCtx {
  const Node& node;
  const void* attrs;
  const std::vector<TensorRef>& in;
  const std::vector<TensorRef>& out;
  template <class A> const A& a() const { return *static_cast<const A*>(attrs); }
};
// A node prepared for one set of shapes.
struct PreparedOp {
  KernelFn run = nullptr;  // null: no kernel work (reshape, constant)
  AttrsPtr attrs;
  std::shared_ptr<const void> state;  // the kernel's own choices; opaque to the runtime
  WeightPack weight;
  KernelCtx ctx(const Node& n, const std::vector<TensorRef>& in, std::vector<TensorRef>& out,
                const PackedOperand* packed = nullptr) const {
    return KernelCtx{n, in, out, attrs.get(), state.get(), packed};
  }
};
using PrepareFn = void (*)(const PrepareCtx&, PreparedOp*);

// Prepares `n` (symbols resolved) for operands of these dtypes and shapes.
PreparedOp prepare_node(const Node& n, const std::vector<TensorRef>& in, const std::vector<TensorRef>& out);
// Prepares and runs once (tests, constant folding): no packed weight.
void run_node(const Node& n, const std::vector<TensorRef>& in, std::vector<TensorRef>& out);

// The kernel for `op`, or nullptr for ops without kernel work (reshape, constant).
KernelFn kernel_for(Op op);

// ---- GEMM, used by matmul, addmm, conv2d and sdpa ----
// C[m, n] = alpha * sum_k A(m, k) B(k, n) + (accumulate ? C[m, n] : 0), with A(m, k) at
// a[m * a_rs + k * a_cs] and B(k, n) at b[k * b_rs + n * b_cs]; C is row-major with leading dim ldc.
// A GEMM operand packed once into the panels sgemm's blocked driver reads, for one
// that does not change between calls (weights at inference: B of a linear layer, A of
// a convolution). `src`, the sizes and the strides identify the operand it was made
// from; sgemm checks them.
struct PackedOperand {
  // kWinograd: a 3x3 conv's filters as conv3x3_winograd's 16 transformed matrices.
  // kQ8: an int8 qmatmul weight [N rows, K] as the int8 GEMM tile of one ISA reads it
  // (qmatmul_pack_int8: the bytes behind `data`; `isa` the QIsa).
  // kNchwc: a conv's filters as conv2d_nchwc reads them (`isa` the channel block);
  // kNchwcDepthwise: a depthwise conv's, as depthwise_nchwc reads them; kNchwcNchwIn: a
  // conv's over an NCHW input (NchwcConvGeom::nchw_in), as conv2d_nchwc reads them.
  // kWinograd4: conv3x3_winograd_nchwc's filters for F(4x4, 3x3), 36 matrices.
  enum Side : uint8_t { kA, kB, kWinograd, kQ8, kNchwc, kNchwcDepthwise, kNchwcNchwIn, kWinograd4 } side = kB;
  uint8_t isa = 0;
  // kQ8: the largest |code| of the weight (<= 63: 7-bit codes, which AVX2's w7 tiles take)
  uint8_t q8_max = 127;
  // kWinograd, kWinograd4: the filters held a value nonfinite_images flags (their
  // transforms would spread it): the convs run by the direct conv.
  bool winograd_unsafe = false;
  std::shared_ptr<float> data;
  const float* src = nullptr;
  int64_t rows = 0, cols = 0, rs = 0, cs = 0;  // A: M x K; B: K x N
  size_t source_bytes() const { return size_t(rows * cols) * (side == kQ8 ? 1 : sizeof(float)); }
};
PackedOperand sgemm_pack_a(int64_t M, int64_t K, const float* a, int64_t a_rs, int64_t a_cs);
PackedOperand sgemm_pack_b(int64_t K, int64_t N, const float* b, int64_t b_rs, int64_t b_cs);
// Whether sgemm with these rows and layouts, given a packed operand, runs the blocked
// driver (which reads it) rather than a few-row kernel that streams B in place.
bool sgemm_reads_packed(int64_t M, int64_t b_rs, int64_t b_cs);
// The strides sgemm reads matmul/addmm operands with, A (M x K) and B (K x N) stored
// row-major or, with trans_a / trans_b, transposed: one definition for the kernels and
// for the runtime, which packs a weight B in the layout the kernel will read.
struct GemmStrides {
  int64_t a_rs, a_cs, b_rs, b_cs;
};
inline GemmStrides gemm_strides(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K) {
  return {trans_a ? 1 : K, trans_a ? M : 1, trans_b ? 1 : N, trans_b ? K : 1};
}
// What sgemm does to each output value once its sum is complete:
//   C[m, n] = act(sum * row_scale[m] + row_shift[m] + col_shift[n] + residual[m * ld_residual + n])
// (a null pointer: scale 1, shift 0, no residual), where sum includes C's old value when
// accumulating. The blocked driver applies it to each register tile right after the
// tile's last k block, while the tile is in L1 (the in-place weight driver, to its
// strip before writing it), so bias and activation cost no pass over the output: addmm's bias is col_shift, a convolution's bias and folded
// batch-norm are row_scale / row_shift (output channels are rows), its fused residual
// add (a ResNet block's identity) is `residual`. The residual must not alias C.
struct GemmEpilogue {
  const float* row_scale = nullptr;
  const float* row_shift = nullptr;
  const float* col_shift = nullptr;
  const float* residual = nullptr;
  int64_t ld_residual = 0;
  Activation act = Activation::kNone;
  bool empty() const { return !row_scale && !row_shift && !col_shift && !residual && act == Activation::kNone; }
};

// `packed`, when given, stands in for packing that operand during the call (the
// few-row kernels still read B itself, in place). `ep`, when given, is applied to C.
void sgemm(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
           int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, bool accumulate, const PackedOperand* packed = nullptr,
           const GemmEpilogue* ep = nullptr);
// Whether sgemm reads B = W^T in place as W's rows (x @ W^T with more rows than the
// skinny kernels take: the weight-rows driver), where sgemm_ct writes C^T with no
// transposes and sgemm_parts runs several weights as one GEMM.
bool sgemm_reads_weight_in_place(int64_t M, int64_t b_rs, int64_t b_cs);
// C written transposed, ct[n * ldct + m] = C[m, n] as sgemm computes it (not
// accumulating). Where sgemm reads W in place, its strips are C^T's rows and are
// computed where they go, with no transposes (addmm's trans_c); elsewhere C is computed,
// then transposed.
void sgemm_ct(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
              int64_t b_rs, int64_t b_cs, float* ct, int64_t ldct, const PackedOperand* packed = nullptr,
              const GemmEpilogue* ep = nullptr);
// A feed-forward pair's hand-off as panels (gemm_handoff_transposed's `panels`): h, M x K,
// written by x @ W1^T and read by h @ W2^T (both W in place), laid out as the second
// GEMM's weight-rows driver reads X^T: panel p (h's rows [p * NR, p * NR + NR), NR the
// ISA's GEMM tile width) at p * K * NR, h^T's rows within it NR apart. The same M * K
// floats as h, where this says it goes so: the weight-rows driver and h's rows in whole
// panels. The first GEMM writes it (sgemm_ct_panels, in place of sgemm_ct), the second
// reads it with no packing (sgemm_panels_a).
bool sgemm_handoff_panels(int64_t M, int64_t K);
// C = alpha * A @ W^T (W [N, K] rows ldw apart), epilogue applied, stored as the panels of
// an M x N hand-off.
void sgemm_ct_panels(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs,
                     const float* w, int64_t ldw, float* ct, const GemmEpilogue* ep = nullptr);
// C (+)= X @ W^T with X (M x K) given as the panels of a hand-off; C row-major, ldc.
void sgemm_panels_a(int64_t M, int64_t N, int64_t K, const float* xt, const float* w, int64_t ldw, float* c,
                    int64_t ldc, bool accumulate, const GemmEpilogue* ep = nullptr);
// C_i = x @ W_i^T + bias_i for weights sharing x (a transformer's Q, K and V; addmm_parts):
// W_i [n, K] row-major, read in place, C_i [M, n], bias_i [n] or null. Where sgemm reads
// W in place as rows, one GEMM over all the weights' rows: x^T is packed once, one split
// of the work across threads, one wait; elsewhere (few rows) weight by weight.
struct GemmPart {
  const float* w;
  int64_t n;
  float* c;
  const float* bias;
};
void sgemm_parts(int64_t M, int64_t K, const float* x, int64_t ldx, const GemmPart* parts, int64_t nparts);
// B produced panel by panel instead of read from memory (an implicit GEMM: a
// convolution's im2col columns written straight into the packed panels, never as a
// whole matrix). pack(self, k0, kc, n0, nr, nr_max, dst) writes rows [k0, k0 + kc) and
// columns [n0, n0 + nr) of B as dst[k * nr_max + j], zero for j in [nr, nr_max).
struct GemmBSource {
  void (*pack)(const void* self, int64_t k0, int64_t kc, int64_t n0, int64_t nr, int64_t nr_max, float* dst);
  const void* self;
};
// C = A @ B (alpha 1; C overwritten, or added to with `accumulate`) with B from `b`; A
// may be packed in advance.
void sgemm_b_source(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const GemmBSource& b,
                    float* c, int64_t ldc, const PackedOperand* packed_a = nullptr, const GemmEpilogue* ep = nullptr,
                    bool accumulate = false);
// A 3x3, stride-1, padding-1 convolution of one image (x: C x H x W, w: OC x C x 3 x 3,
// out: OC x H x W) by Winograd's F(2x2, 3x3) (winograd.cc); `ep` as sgemm's, one row per
// output channel (residual rows ld_residual apart). `filters`, when given, is w made by
// conv3x3_winograd_pack (the runtime keeps it for a constant weight); else w is
// transformed during the call.
void conv3x3_winograd(const float* x, int64_t C, int64_t H, int64_t W, const float* w, int64_t OC, float* out,
                      const GemmEpilogue& ep, const PackedOperand* filters = nullptr);
PackedOperand conv3x3_winograd_pack(int64_t OC, int64_t C, const float* w);
// Whether conv2d runs a conv that conv2d_uses_winograd, over N images of H x W, by
// Winograd when its filters arrive unpacked (not constant: transformed for the call);
// else by a GEMM. The importer asks it too (an input gradient as a conv2d or not).
bool conv2d_winograd_per_call(int64_t N, int64_t H, int64_t W);
// One (output, input) channel pair's Winograd filters U = G g G^T from its 9 taps g,
// row-major over the transformed tile: F(2x2, 3x3)'s 16 values (winograd.cc), F(4x4,
// 3x3)'s 36, summed in double (conv2d_nchwc.cc).
void winograd_filter_f2(const float* g, float* u);
void winograd_filter_f4(const float* g, float* u);
// Which of N images of `image` floats each (x + n * image) hold a NaN or a value of
// magnitude over `limit` (FLT_MAX: the infinities): flags[n] = 1 for those (both threads
// scan). Winograd's transforms add and subtract a patch's inputs, so one non-finite input
// reaches every output of its tile (and inf - inf is NaN) where the direct conv confines
// it to the windows that read it, and they grow values up to ~100x, so huge finite ones
// could overflow where the direct conv's sums do not: conv2d and conv2d_nchwc run images
// flagged at kWinogradLimit (and every image, where the filters are) by the direct conv.
// ref_nonfinite_images is the reference (std::isnan, std::fabs).
constexpr float kWinogradLimit = 0x1p100f;
std::vector<uint8_t> nonfinite_images(const float* x, int64_t N, int64_t image, float limit = 3.40282347e38f);
std::vector<uint8_t> ref_nonfinite_images(const float* x, int64_t N, int64_t image, float limit = 3.40282347e38f);
// Whether conv2d runs a convolution with these parameters through conv3x3_winograd: 3x3,
// stride 1, padding 1, no dilation or groups, maps of 49 pixels (7 x 7) and 64 channels (in and
// out) up; below that the transforms cost more than the multiplies they save.
bool conv2d_uses_winograd(int64_t groups, int64_t KH, int64_t KW, const std::array<int64_t, 2>& stride,
                          const std::array<int64_t, 2>& padding, const std::array<int64_t, 2>& dilation, int64_t C,
                          int64_t H, int64_t W, int64_t OC);
// The blocked channel layout, NCHWc (conv2d_nchwc.cc): a tensor [N, C, H, W] as
// [N, ceil(C / L), H, W, L], each pixel's L channels of a block contiguous, the channels
// past C zero. nchwc_block() is the block this machine's kernels want: 16 where the
// AVX-512 kernels run at full width, else 8 (Zen 4 included; 8 and 16 both run
// everywhere).
int64_t nchwc_block();
void nchw_to_nchwc(const float* x, int64_t N, int64_t C, int64_t HW, int64_t L, float* out);
void nchwc_to_nchw(const float* x, int64_t N, int64_t C, int64_t HW, int64_t L, float* out);
// An ungrouped conv over blocked input and output (L the block of both; or an NCHW input,
// NchwcConvGeom::nchw_in, and a blocked output): filters OIHW
// [OC, C, KH, KW] packed once by conv2d_nchwc_pack; the epilogue per output channel
// out = act(sum * scale[oc] + shift[oc] + res) (null scale: 1, shift: 0, res: none; res
// blocked like out). The channels past OC come out zero. `groups`: 1, or C == OC for a
// depthwise conv (filters [C, 1, KH, KW]: depthwise_nchwc).
struct NchwcConvGeom {
  int64_t N = 0, C = 0, H = 0, W = 0, OC = 0, OH = 0, OW = 0, KH = 0, KW = 0, L = 0, groups = 1;
  std::array<int64_t, 2> st{1, 1}, pd{0, 0}, dl{1, 1};
  // The input is NCHW [N, C, H, W] rather than blocked (a stem's image: 3 channels
  // padded to a block would multiply 16 / 3 times the work); the output is blocked.
  // The direct conv only (groups 1).
  bool nchw_in = false;
};
PackedOperand conv2d_nchwc_pack(const NchwcConvGeom& g, const float* w);
void conv2d_nchwc(const NchwcConvGeom& g, const float* x, const PackedOperand& w, const float* scale,
                  const float* shift, const float* res, Activation act, float* out);
// The same conv (3x3, stride 1, padding 1, C and OC whole blocks) by Winograd's
// F(m x m, 3x3) over the blocked layout, m 2 or 4, the filters transformed and packed
// once by conv3x3_winograd_nchwc_pack (which m the packed filters say). `into`, when
// given, holds winograd_nchwc_packed_floats(g, m) floats and keeps the packed filters
// (the PackedOperand does not own it); else they are allocated.
PackedOperand conv3x3_winograd_nchwc_pack(const NchwcConvGeom& g, const float* w, int m = 2, float* into = nullptr);
int64_t winograd_nchwc_packed_floats(const NchwcConvGeom& g, int m);
void conv3x3_winograd_nchwc(const NchwcConvGeom& g, const float* x, const PackedOperand& w, const float* scale,
                            const float* shift, const float* res, Activation act, float* out);
// The same, except that images holding a NaN, an infinity or a huge value (all of them
// where the filters do: w.winograd_unsafe) run by the direct conv over `raw`, the
// filters as OIHW, packed for this call (see nonfinite_images).
void conv3x3_winograd_nchwc_checked(const NchwcConvGeom& g, const float* x, const PackedOperand& w, const float* raw,
                                    const float* scale, const float* shift, const float* res, Activation act,
                                    float* out);
// Whether a blocked Winograd conv of this geometry runs F(4x4, 3x3) rather than F(2x2,
// 3x3): where the products it saves outweigh the filters it reads on top (conv2d_nchwc.cc).
bool winograd4_pays(const NchwcConvGeom& g);
// The depthwise conv (groups == C == OC) over the blocked layout, the filters packed
// once by depthwise_nchwc_pack; the epilogue as conv2d_nchwc's.
PackedOperand depthwise_nchwc_pack(const NchwcConvGeom& g, const float* w);
void depthwise_nchwc(const NchwcConvGeom& g, const float* x, const PackedOperand& w, const float* scale,
                     const float* shift, const float* res, Activation act, float* out);
// An inverted-residual block over the blocked layout (conv2d_pw_dw with a blocked x;
// conv2d_pw_dw_nchwc.cc): the expand 1x1 conv (C -> g.C channels), the depthwise conv g
// and the projection 1x1 conv (g.C -> P), each with its packed filters and epilogue,
// band of output rows by band. expand.w null: x is the depthwise conv's input (C ==
// g.C); project.w null: the depthwise output is the block's; res: the projection's
// residual, blocked like out.
struct NchwcConvPart {
  const PackedOperand* w = nullptr;  // conv2d_nchwc_pack's (1x1) or depthwise_nchwc_pack's
  const float* scale = nullptr;
  const float* shift = nullptr;
  Activation act = Activation::kNone;
};
void conv2d_pw_dw_nchwc(const NchwcConvGeom& g, int64_t C, int64_t P, const NchwcConvPart& expand,
                        const NchwcConvPart& dw, const NchwcConvPart& project, const float* x, const float* res,
                        float* out);
// Output rows per band of conv2d_pw_dw, either layout (conv2d_pw_dw.cc): as many as keep
// the window of expanded rows (`window_row` floats per input row, every channel; a band
// reads (band - 1) * stride + reach rows) near 512 KiB, half of it with a projection,
// whose band of depthwise output takes at most as much again; without an expand there
// is no window and the band of depthwise output (`out_row` floats a row) takes the budget.
int64_t pw_dw_band_rows(bool expand, bool project, int64_t window_row, int64_t out_row, int64_t reach, int64_t stride,
                        int64_t OH);
// The scalar reference of all three (groups 1 or C).
void ref_conv2d_nchwc(const NchwcConvGeom& g, const float* x, const float* w, const float* scale, const float* shift,
                      const float* res, Activation act, float* out);
// Whether conv2d computes an ungrouped convolution of one image with `cols` output
// pixels as C^T = columns^T W^T: pixels as the micro-kernel's rows, output channels as
// its column panels, the filters packed as B (W^T). It does where pixels padded to the
// column panels' width waste much more than padded to the row tile (AVX-512, 7 x 7
// maps: 49 columns compute 64, 49 rows compute 56); prepare_conv2d then asks for
// constant filters packed as B (sgemm_pack_b of W^T).
bool conv2d_pixel_rows(int64_t images, int64_t groups, int64_t cols, bool winograd);
// Whether sgemm's blocked driver packs each panel of B once for M x N (so producing B
// panel by panel, a GemmBSource, costs no repeated work).
bool sgemm_packs_b_once(int64_t M, int64_t N);
// The GEMM epilogue applied to an mr x nr block of C at c whose first value is
// C[m0, n0] (paths that finish C outside the driver: depthwise, transposed results).
void sgemm_epilogue_block(const GemmEpilogue& ep, float* c, int64_t ldc, int64_t m0, int64_t n0, int64_t mr,
                          int64_t nr);
// The micro-kernel sgemm runs on this machine: "avx512" or "avx2" (chosen at run
// time; ZENITH_NO_AVX512=1 forces the AVX2 one).
const char* sgemm_isa();
// One instruction's multiply-add rate on the calling thread's core (isa_rates.cc): the
// ceiling of any kernel built from it. Not supported by this CPU: rate 0.
struct IsaRate {
  const char* name;  // e.g. "int8 maddubs+madd (avx2)"
  bool supported;
  double macs_per_ns;
};
// fp32 FMA and the int8 dot products of every ISA, each the best of `runs` loops of
// `iters` iterations (10 independent instructions each); both must be at least 1.
std::vector<IsaRate> isa_mac_rates(int64_t iters, int runs);
void ref_sgemm(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t a_rs, int64_t a_cs,
               const float* b, int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, bool accumulate);

// A convolution's epilogue per output channel (a row of its GEMM): the bias at
// in[bias_slot] when has_bias, a fused inference batch-norm (its weight, bias, running
// mean and var in the next four slots, when bn_eps is set) folded with the bias into a
// scale and shift ((y + bias) * s + t = y * s + (bias * s + t)), and the activation.
// scale and shift receive the folded values the result points to.
GemmEpilogue conv_channel_epilogue(const std::vector<TensorRef>& in, size_t bias_slot, bool has_bias,
                                   const std::optional<double>& bn_eps, Activation act, int64_t channels,
                                   std::vector<float>& scale, std::vector<float>& shift);

// One channel of a depthwise convolution: out (OH x OW) = x (H x W) correlated with
// k (KH x KW), with conv2d's strides, padding and dilation.
// depthwise_plane is conv2d's depthwise path (depthwise.cc: a zero-padded copy split by
// column phase, vector loops along output rows, AVX2 or AVX-512 chosen at run time);
// ref_depthwise_plane is its scalar reference (taps bounds-checked).
struct DepthwiseGeom {
  int64_t H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw;
};
// ep, when given, is applied to the plane as row ep_row of a GEMM's output whose
// columns are the plane's pixels (conv2d's per-channel epilogue), a few rows at a time
// as they are written.
void depthwise_plane(const DepthwiseGeom& g, const float* x, const float* k, float* out,
                     const GemmEpilogue* ep = nullptr, int64_t ep_row = 0);
void ref_depthwise_plane(const DepthwiseGeom& g, const float* x, const float* k, float* out);
// Channels [0, nch) of a depthwise convolution at once (nch <= depthwise_channel_lanes()),
// for small planes, where depthwise_plane's vectors along a row would be mostly padding
// (a 7-wide row in 16 lanes): channel c's plane at x + c * x_stride, its filter at
// k + c * KH * KW, its output at out + c * out_stride (out_stride >= OH * OW). The
// vectors run across the channels of one output pixel. ep, when given, as
// depthwise_plane's: channel c as row ep_row + c, its pixels as columns from 0.
void depthwise_channels(const DepthwiseGeom& g, const float* x, int64_t x_stride, const float* k, float* out,
                        int64_t out_stride, int64_t nch, const GemmEpilogue* ep = nullptr, int64_t ep_row = 0);
int64_t depthwise_channel_lanes();  // 16 with AVX-512, else 8

// conv2d computed directly, for few input channels (the stems: conv2d_direct_fits):
// image x (C planes of H x W) against w (OC x C x KH x KW) into out (OC planes of
// OH x OW), g giving one plane's geometry (the same for every channel); ep, when
// given, per output channel (a row) and pixel (a column), as sgemm's epilogue
// (conv2d_direct.cc).
bool conv2d_direct_fits(int64_t C, int64_t KH, int64_t KW, int64_t groups);
void conv2d_direct(const DepthwiseGeom& g, int64_t C, int64_t OC, const float* x, const float* w, float* out,
                   const GemmEpilogue* ep = nullptr);

// A convolution's backward (conv2d_grad.cc), in the forward conv's terms: input x
// [N, C, H, W], output gradient gy [N, OC, OH, OW], filters w [OC, C / G, KH, KW].
// conv2d_input_grad: dx [N, C, H, W] = the gradient of x, plus bias[c] when given (it is
// conv_transpose2d: ConvTranspose2d's forward, its x as gy). conv2d_weight_grad: dw
// [OC, C / G, KH, KW] = the gradient of the filters. The ref_ versions are their scalar
// references (sums in double).
struct ConvGradGeom {
  int64_t N, C, H, W, OC, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, G;
};
void conv2d_input_grad(const ConvGradGeom& g, const float* gy, const float* w, const float* bias, float* dx);
void conv2d_weight_grad(const ConvGradGeom& g, const float* gy, const float* x, float* dw);
void ref_conv2d_input_grad(const ConvGradGeom& g, const float* gy, const float* w, const float* bias, float* dx);
void ref_conv2d_weight_grad(const ConvGradGeom& g, const float* gy, const float* x, float* dw);

// Scalar reference of run_sdpa (attention.cc), same node and operands; sums in double.
void ref_sdpa(const KernelCtx& c);
// Scalar reference of run_max_pool2d (movement.cc): each window's taps in turn.
void ref_max_pool2d(const KernelCtx& c);
// Scalar reference of run_max_pool2d_with_indices (movement.cc): each output's window in
// turn, the first maximum (or the last NaN) and its index in the plane.
void ref_max_pool2d_with_indices(const KernelCtx& c);
// Scalar reference of run_max_pool2d_nchwc (movement.cc): each value's window in turn.
void ref_max_pool2d_nchwc(const KernelCtx& c);
// Scalar reference of run_max_pool2d_codes (movement.cc): each code's window in turn.
void ref_max_pool2d_codes(const KernelCtx& c);

// Inference batch-norm of one channel as y = x * scale + shift: one definition for
// batch_norm and for the epilogue conv2d runs when a norm is fused into it.
inline void batch_norm_affine(float w, float b, float mean, float var, float eps, float* scale, float* shift) {
  *scale = w / std::sqrt(var + eps);
  *shift = b - mean * *scale;
}

// Copies the strided view (shape, strides in elements, base pointer) into dst, dense.
void strided_copy(void* dst, const void* src, size_t elem, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides);

// Dense row-major strides of `shape`.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);

// Per-op kernels, declared for the table in kernels.cc.
#define OP(name, nin, nout, traits, attrs) void run_##name(const KernelCtx&);
#include "zenith/ops.def"
#undef OP
// The ops that choose their algorithm once per plan (the rest only decode attributes).
void prepare_matmul(const PrepareCtx&, PreparedOp*);
void prepare_addmm(const PrepareCtx&, PreparedOp*);
void prepare_conv2d(const PrepareCtx&, PreparedOp*);
void prepare_conv2d_nchwc(const PrepareCtx&, PreparedOp*);
void prepare_conv2d_pw_dw(const PrepareCtx&, PreparedOp*);
void prepare_sdpa(const PrepareCtx&, PreparedOp*);
void prepare_fused(const PrepareCtx&, PreparedOp*);
void prepare_qmatmul(const PrepareCtx&, PreparedOp*);

}  // namespace zenith
