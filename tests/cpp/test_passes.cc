// Each pass: IR in -> expected IR out, with the verifier run after the pass.
#include <gtest/gtest.h>

#include "zenith/error.h"
#include "zenith/ir.h"
#include "zenith/passes/passes.h"

using namespace zenith;

namespace {
std::string run(int (*pass)(Graph&), const std::string& in, int expect_changes) {
  Graph g = parse_graph(in);
  int n = pass(g);
  g.reindex();
  verify(g);
  EXPECT_EQ(n, expect_changes);
  return print_graph(g);
}
std::string canon(const std::string& text) { return print_graph(parse_graph(text)); }
}  // namespace

TEST(Passes, DeadCodeElimination) {
  std::string out = run(dead_code_elimination, R"(graph(%x: f32[4]) {
  %a: f32[4] = relu(%x)
  %b: f32[4] = exp(%x)
  %c: f32[4] = neg(%b)
  return (%a)
})", 2);
  EXPECT_EQ(out, canon(R"(graph(%x: f32[4]) {
  %a: f32[4] = relu(%x)
  return (%a)
})"));
}

TEST(Passes, DeadCodeKeepsEverythingLive) {
  std::string in = R"(graph(%x: f32[4]) {
  %a: f32[4] = relu(%x)
  %b: f32[4] = exp(%a)
  return (%b, %a)
})";
  EXPECT_EQ(run(dead_code_elimination, in, 0), canon(in));
}

TEST(Passes, CommonSubexpressionElimination) {
  Graph g = parse_graph(R"(graph(%x: f32[4], %y: f32[4]) {
  %a: f32[4] = add(%x, %y)
  %b: f32[4] = add(%x, %y)
  %c: f32[4] = mul(%a, %b)
  %d: f32[4] = add(%y, %x)
  return (%c, %d)
})");
  EXPECT_EQ(common_subexpression_elimination(g), 1);  // add(y, x) is a different node on purpose
  EXPECT_EQ(dead_code_elimination(g), 1);
  verify(g);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%x: f32[4], %y: f32[4]) {
  %a: f32[4] = add(%x, %y)
  %c: f32[4] = mul(%a, %a)
  %d: f32[4] = add(%y, %x)
  return (%c, %d)
})"));
}

TEST(Passes, CseRespectsAttributes) {
  std::string in = R"(graph(%x: f32[2, 3]) {
  %a: f32[2] = reduce_sum(%x) {dims=[1], keepdim=[0]}
  %b: f32[3] = reduce_sum(%x) {dims=[0], keepdim=[0]}
  return (%a, %b)
})";
  EXPECT_EQ(run(common_subexpression_elimination, in, 0), canon(in));
}

TEST(Passes, ConstantFolding) {
  Graph g = parse_graph(R"(graph(%x: f32[2]) {
  %c: f32[2] = constant() {dtype=[0], shape=[2]} data=0000803f00000040
  %d: f32[2] = neg(%c)
  %e: f32[2] = add(%x, %d)
  return (%e)
})");
  EXPECT_EQ(constant_folding(g), 1);
  EXPECT_EQ(dead_code_elimination(g), 1);
  verify(g);
  // neg([1, 2]) = [-1, -2]
  EXPECT_EQ(print_graph(g), canon(R"(graph(%x: f32[2]) {
  %d: f32[2] = constant() {dtype=[0], shape=[2]} data=000080bf000000c0
  %e: f32[2] = add(%x, %d)
  return (%e)
})"));
}

TEST(Passes, ConstantFoldingSourcesAndLimits) {
  Graph g = parse_graph(R"(graph(%x: i64[3]) {
  %a: i64[3] = arange() {dtype=[3], size=[3], start=f[0], step=f[1]}
  %b: i64[3] = add(%x, %a)
  %big: f32[1024, 1024] = full() {dtype=[0], shape=[1024, 1024], value=f[1]}
  return (%b, %big)
})");
  EXPECT_EQ(constant_folding(g), 1);  // the 4 MiB full() stays a kernel
  verify(g);
  EXPECT_EQ(g.nodes[0].op, Op::constant);
  EXPECT_EQ(g.nodes[2].op, Op::full);
}

TEST(Passes, ConstantFoldingLeavesSymbolicAlone) {
  std::string in = R"(graph(%x: f32[s0]) {
  %a: f32[s0] = full() {dtype=[0], shape=[s0], value=f[1]}
  %b: f32[s0] = add(%x, %a)
  return (%b)
})";
  EXPECT_EQ(run(constant_folding, in, 0), canon(in));
}

TEST(Passes, Canonicalize) {
  Graph g = parse_graph(R"(graph(%x: f32[2, 3]) {
  %a: f32[2, 3] = copy(%x)
  %b: f32[6] = reshape(%a) {shape=[6]}
  %c: f32[3, 2] = reshape(%b) {shape=[3, 2]}
  %d: f32[3, 2] = permute(%c) {perm=[0, 1]}
  %one: f32[] = constant() {dtype=[0], shape=[]} data=0000803f
  %e: f32[3, 2] = mul(%d, %one)
  %f: f32[3, 2] = cast(%e) {dtype=[0]}
  return (%f)
})");
  EXPECT_EQ(canonicalize(g), 5);
  dead_code_elimination(g);
  verify(g);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%x: f32[2, 3]) {
  %c: f32[3, 2] = reshape(%x) {shape=[3, 2]}
  return (%c)
})"));
}

TEST(Passes, CanonicalizeFoldsTransposeIntoMatmul) {
  Graph g = parse_graph(R"(graph(%x: f32[3, 4], %w: f32[5, 4], %b: f32[5], %v: f32[2, 5, 4], %p: f32[4, 2, 5]) {
  %t: f32[4, 5] = permute(%w) {perm=[1, 0]}
  %y: f32[3, 5] = addmm(%b, %x, %t)
  %u: f32[2, 4, 5] = permute(%v) {perm=[0, 2, 1]}
  %z: f32[2, 3, 5] = matmul(%x, %u)
  %o: f32[2, 4, 5] = permute(%p) {perm=[1, 0, 2]}
  %q: f32[2, 3, 5] = matmul(%x, %o)
  return (%y, %z, %q)
})");
  EXPECT_EQ(canonicalize(g), 2);  // the batch-dim permute (perm 1,0,2) is real work
  dead_code_elimination(g);
  verify(g);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%x: f32[3, 4], %w: f32[5, 4], %b: f32[5], %v: f32[2, 5, 4], %p: f32[4, 2, 5]) {
  %y: f32[3, 5] = addmm(%b, %x, %w) {trans_b=[1]}
  %z: f32[2, 3, 5] = matmul(%x, %v) {trans_b=[1]}
  %o: f32[2, 4, 5] = permute(%p) {perm=[1, 0, 2]}
  %q: f32[2, 3, 5] = matmul(%x, %o)
  return (%y, %z, %q)
})"));
}

TEST(Passes, CanonicalizeFoldsTransposeIntoMatmulA) {
  // Backward graphs multiply transposed activations and gradients (dW = dy^T x): the
  // transpose of A becomes trans_a; both operands at once, and a transpose of both
  // sides of an addmm.
  Graph g = parse_graph(R"(graph(%dy: f32[6, 5], %x: f32[6, 4], %b: f32[4], %v: f32[2, 3, 5]) {
  %t: f32[5, 6] = permute(%dy) {perm=[1, 0]}
  %w: f32[5, 4] = matmul(%t, %x)
  %u: f32[2, 5, 3] = permute(%v) {perm=[0, 2, 1]}
  %xt: f32[4, 6] = permute(%x) {perm=[1, 0]}
  %z: f32[2, 5, 5] = matmul(%u, %v)
  %y: f32[5, 4] = addmm(%b, %t, %xt) {trans_b=[1]}
  return (%w, %z, %y)
})");
  EXPECT_EQ(canonicalize(g), 4);
  dead_code_elimination(g);
  verify(g);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%dy: f32[6, 5], %x: f32[6, 4], %b: f32[4], %v: f32[2, 3, 5]) {
  %w: f32[5, 4] = matmul(%dy, %x) {trans_a=[1]}
  %z: f32[2, 5, 5] = matmul(%v, %v) {trans_a=[1]}
  %y: f32[5, 4] = addmm(%b, %dy, %x) {trans_a=[1], trans_b=[0]}
  return (%w, %z, %y)
})"));
}

TEST(Passes, CanonicalizeComposesPermutes) {
  // transpose of a transpose is x itself; a 3-cycle applied twice is one permute;
  // a permute of a permute feeding a matmul ends as trans_b on the original.
  Graph g = parse_graph(R"(graph(%x: f32[2, 3], %y: f32[2, 3, 4], %w: f32[5, 4]) {
  %a: f32[3, 2] = permute(%x) {perm=[1, 0]}
  %b: f32[2, 3] = permute(%a) {perm=[-1, 0]}
  %c: f32[3, 4, 2] = permute(%y) {perm=[1, 2, 0]}
  %d: f32[4, 2, 3] = permute(%c) {perm=[1, 2, 0]}
  %e: f32[4, 5] = permute(%w) {perm=[1, 0]}
  %f: f32[5, 4] = permute(%e) {perm=[1, 0]}
  %h: f32[4, 5] = permute(%f) {perm=[1, 0]}
  %m: f32[2, 3, 5] = matmul(%y, %h)
  return (%b, %d, %m)
})");
  EXPECT_GE(canonicalize(g), 4);
  dead_code_elimination(g);
  verify(g);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%x: f32[2, 3], %y: f32[2, 3, 4], %w: f32[5, 4]) {
  %d: f32[4, 2, 3] = permute(%y) {perm=[2, 0, 1]}
  %m: f32[2, 3, 5] = matmul(%y, %w) {trans_b=[1]}
  return (%x, %d, %m)
})"));
}

// x + 0 is not x for a float x of -0 (-0 + 0 is +0): only x + (-0) and x - (+0) go;
// x + (+0), x - (-0) stay, and an integer x + 0 goes.
TEST(Passes, CanonicalizeKeepsTheSignOfZero) {
  std::string keeps = R"(graph(%x: f32[2, 3]) {
  %z: f32[] = constant() {dtype=[0], shape=[]} data=00000000
  %n: f32[] = constant() {dtype=[0], shape=[]} data=00000080
  %a: f32[2, 3] = add(%x, %z)
  %b: f32[2, 3] = add(%z, %x)
  %c: f32[2, 3] = sub(%x, %n)
  return (%a, %b, %c)
})";
  EXPECT_EQ(run(canonicalize, keeps, 0), canon(keeps));
  Graph g = parse_graph(R"(graph(%x: f32[2, 3], %i: i64[4]) {
  %z: f32[] = constant() {dtype=[0], shape=[]} data=00000000
  %n: f32[] = constant() {dtype=[0], shape=[]} data=00000080
  %k: i64[] = constant() {dtype=[3], shape=[]} data=0000000000000000
  %a: f32[2, 3] = add(%x, %n)
  %b: f32[2, 3] = sub(%a, %z)
  %j: i64[4] = add(%i, %k)
  return (%b, %j)
})");
  EXPECT_EQ(canonicalize(g), 3);
  dead_code_elimination(g);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%x: f32[2, 3], %i: i64[4]) {
  return (%x, %i)
})"));
}

TEST(Passes, CanonicalizeKeepsRealWork) {
  std::string in = R"(graph(%x: f32[2, 3]) {
  %two: f32[] = constant() {dtype=[0], shape=[]} data=00000040
  %a: f32[2, 3] = mul(%x, %two)
  %b: f32[3, 2] = permute(%a) {perm=[1, 0]}
  %c: f32[1, 2, 3] = expand(%x) {shape=[1, 2, 3]}
  return (%b, %c)
})";
  EXPECT_EQ(run(canonicalize, in, 0), canon(in));
}

TEST(Passes, FuseEpilogueHardActivations) {
  // MobileNet's: ReLU6 (clamp 0..6), hardswish and hardsigmoid join the conv before
  // them; a clamp with other bounds stays an op.
  Graph g = parse_graph(R"(graph(%x: f32[1, 2, 5, 5], %w: f32[3, 2, 1, 1], %b: f32[3]) {
  %c: f32[1, 3, 5, 5] = conv2d(%x, %w, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  %r: f32[1, 3, 5, 5] = clamp(%c) {min=f[0], max=f[6]}
  %d: f32[1, 3, 5, 5] = conv2d(%x, %w, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  %h: f32[1, 3, 5, 5] = hardswish(%d)
  %e: f32[1, 3, 5, 5] = conv2d(%x, %w, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  %s: f32[1, 3, 5, 5] = hardsigmoid(%e)
  %f: f32[1, 3, 5, 5] = conv2d(%x, %w, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  %k: f32[1, 3, 5, 5] = clamp(%f) {min=f[-1], max=f[1]}
  return (%r, %h, %s, %k)
})");
  EXPECT_EQ(fuse_epilogue(g), 3);
  dead_code_elimination(g);
  verify(g);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%x: f32[1, 2, 5, 5], %w: f32[3, 2, 1, 1], %b: f32[3]) {
  %c: f32[1, 3, 5, 5] = conv2d(%x, %w, %b) {activation=[6], dilation=[1, 1], groups=[1], has_bias=[1], padding=[0, 0], stride=[1, 1]}
  %d: f32[1, 3, 5, 5] = conv2d(%x, %w, %b) {activation=[7], dilation=[1, 1], groups=[1], has_bias=[1], padding=[0, 0], stride=[1, 1]}
  %e: f32[1, 3, 5, 5] = conv2d(%x, %w, %b) {activation=[8], dilation=[1, 1], groups=[1], has_bias=[1], padding=[0, 0], stride=[1, 1]}
  %f: f32[1, 3, 5, 5] = conv2d(%x, %w, %b) {dilation=[1, 1], groups=[1], has_bias=[1], padding=[0, 0], stride=[1, 1]}
  %k: f32[1, 3, 5, 5] = clamp(%f) {max=f[1], min=f[-1]}
  return (%c, %d, %e, %k)
})"));
}

TEST(Passes, FuseEpilogue) {
  Graph g = parse_graph(R"(graph(%x: f32[3, 4], %w: f32[4, 5], %b: f32[5]) {
  %y: f32[3, 5] = addmm(%b, %x, %w)
  %z: f32[3, 5] = gelu(%y) {approximate=[0]}
  %u: f32[3, 5] = addmm(%b, %x, %w) {alpha=f[2]}
  %v: f32[3, 5] = relu(%u)
  %t: f32[3, 5] = tanh(%u)
  %m: f32[3, 5] = addmm(%b, %x, %w) {beta=f[0]}
  %r: f32[1, 15] = reshape(%m) {shape=[1, 15]}
  %s: f32[1, 15] = silu(%r)
  return (%z, %v, %t, %s)
})");
  EXPECT_EQ(fuse_epilogue(g), 2);  // %u feeds two activations: its raw value is needed
  dead_code_elimination(g);
  verify(g);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%x: f32[3, 4], %w: f32[4, 5], %b: f32[5]) {
  %y: f32[3, 5] = addmm(%b, %x, %w) {activation=[2]}
  %u: f32[3, 5] = addmm(%b, %x, %w) {alpha=f[2]}
  %v: f32[3, 5] = relu(%u)
  %t: f32[3, 5] = tanh(%u)
  %m: f32[3, 5] = addmm(%b, %x, %w) {activation=[4], beta=f[0]}
  %r: f32[1, 15] = reshape(%m) {shape=[1, 15]}
  return (%y, %v, %t, %r)
})"));
}

TEST(Passes, FuseConvBatchNorm) {
  // %c feeds only its norm: fused, then its relu joins through fuse_epilogue. %d is
  // returned raw as well, so its norm stays a separate op.
  Graph g = parse_graph(R"(graph(%x: f32[1, 3, 5, 5], %w: f32[4, 3, 3, 3], %b: f32[4], %g: f32[4], %h: f32[4], %m: f32[4], %v: f32[4]) {
  %c: f32[1, 4, 3, 3] = conv2d(%x, %w, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  %n: f32[1, 4, 3, 3] = batch_norm(%c, %g, %h, %m, %v) {eps=f[0.001]}
  %r: f32[1, 4, 3, 3] = relu(%n)
  %d: f32[1, 4, 3, 3] = conv2d(%x, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %e: f32[1, 4, 3, 3] = batch_norm(%d, %g, %h, %m, %v) {eps=f[0.001]}
  return (%r, %e, %d)
})");
  EXPECT_EQ(fuse_conv_bn(g), 1);
  EXPECT_EQ(fuse_epilogue(g), 1);
  dead_code_elimination(g);
  verify(g);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%x: f32[1, 3, 5, 5], %w: f32[4, 3, 3, 3], %b: f32[4], %g: f32[4], %h: f32[4], %m: f32[4], %v: f32[4]) {
  %c: f32[1, 4, 3, 3] = conv2d(%x, %w, %b, %g, %h, %m, %v) {activation=[1], bn_eps=f[0.001], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  %d: f32[1, 4, 3, 3] = conv2d(%x, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %e: f32[1, 4, 3, 3] = batch_norm(%d, %g, %h, %m, %v) {eps=f[0.001]}
  return (%c, %e, %d)
})"));
}

TEST(Passes, FuseConvPwDw) {
  // %e (1x1, bn folded, relu6) feeds only the depthwise %d on a 28 x 28 map: one
  // conv2d_pw_dw, the 1x1 conv's inputs first and its epilogue as pw_*. Left alone: %f
  // is also returned (its raw value is needed), %s's map is 27 x 27, and %t's padding
  // (3) reaches past its 3 x 3 window.
  Graph g = parse_graph(R"(graph(%x: f32[2, 3, 28, 28], %y: f32[1, 3, 27, 27], %w: f32[8, 3, 1, 1], %k: f32[8, 1, 3, 3], %b: f32[8], %g: f32[8], %h: f32[8], %m: f32[8], %v: f32[8]) {
  %e: f32[2, 8, 28, 28] = conv2d(%x, %w, %w, %g, %h, %m, %v) {activation=[7], bn_eps=f[0.001], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %d: f32[2, 8, 14, 14] = conv2d(%e, %k, %b) {activation=[1], stride=[2, 2], padding=[1, 1], dilation=[1, 1], groups=[8], has_bias=[1]}
  %f: f32[2, 8, 28, 28] = conv2d(%x, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %j: f32[2, 8, 28, 28] = conv2d(%f, %k, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[8], has_bias=[1]}
  %r: f32[1, 8, 27, 27] = conv2d(%y, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %s: f32[1, 8, 27, 27] = conv2d(%r, %k, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[8], has_bias=[1]}
  %p: f32[2, 8, 28, 28] = conv2d(%x, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %t: f32[2, 8, 32, 32] = conv2d(%p, %k, %b) {stride=[1, 1], padding=[3, 3], dilation=[1, 1], groups=[8], has_bias=[1]}
  return (%d, %j, %f, %s, %t)
})");
  EXPECT_EQ(fuse_conv_pw_dw(g), 1);
  verify(g);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%x: f32[2, 3, 28, 28], %y: f32[1, 3, 27, 27], %w: f32[8, 3, 1, 1], %k: f32[8, 1, 3, 3], %b: f32[8], %g: f32[8], %h: f32[8], %m: f32[8], %v: f32[8]) {
  %d: f32[2, 8, 14, 14] = conv2d_pw_dw(%x, %w, %w, %g, %h, %m, %v, %k, %b) {activation=[1], pw_activation=[7], pw_bn_eps=f[0.001], pw_has_bias=[0], stride=[2, 2], padding=[1, 1], dilation=[1, 1], has_bias=[1]}
  %f: f32[2, 8, 28, 28] = conv2d(%x, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %j: f32[2, 8, 28, 28] = conv2d(%f, %k, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[8], has_bias=[1]}
  %r: f32[1, 8, 27, 27] = conv2d(%y, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %s: f32[1, 8, 27, 27] = conv2d(%r, %k, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[8], has_bias=[1]}
  %p: f32[2, 8, 28, 28] = conv2d(%x, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %t: f32[2, 8, 32, 32] = conv2d(%p, %k, %b) {stride=[1, 1], padding=[3, 3], dilation=[1, 1], groups=[8], has_bias=[1]}
  return (%d, %j, %f, %s, %t)
})"));
}

TEST(Passes, FuseConvPwDwBlocked) {
  // The blocked layout's convs (conv2d_nchwc over blocked inputs) fuse as blocked
  // conv2d_pw_dw nodes: expand %e (16 -> 20 channels, 3 blocks of 8) -> depthwise %d ->
  // projection %p (with its residual %x) become one node whose output is blocked. A
  // stem's conv2d_nchwc over an NCHW image (`block`), though 1x1, is no expand: its
  // depthwise %sd and projection %sp fuse without one (expand=0). A depthwise conv whose
  // input comes through to_nchwc from an NCHW 1x1 conv %n stays apart from it.
  Graph g = parse_graph(R"(graph(%x: f32[2, 2, 28, 28, 8], %img: f32[2, 3, 28, 28], %w: f32[20, 16, 1, 1], %k: f32[20, 1, 3, 3], %b: f32[20], %u: f32[16, 20, 1, 1], %c: f32[16], %ws: f32[20, 3, 1, 1], %y: f32[2, 16, 28, 28], %wn: f32[20, 16, 1, 1]) {
  %e: f32[2, 3, 28, 28, 8] = conv2d_nchwc(%x, %w, %w) {activation=[7], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %d: f32[2, 3, 28, 28, 8] = conv2d_nchwc(%e, %k, %b) {activation=[7], stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[20], has_bias=[1]}
  %p: f32[2, 2, 28, 28, 8] = conv2d_nchwc(%d, %u, %c, %x) {has_residual=[1], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  %s: f32[2, 3, 28, 28, 8] = conv2d_nchwc(%img, %ws, %ws) {block=[8], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %sd: f32[2, 3, 14, 14, 8] = conv2d_nchwc(%s, %k, %b) {stride=[2, 2], padding=[1, 1], dilation=[1, 1], groups=[20], has_bias=[1]}
  %sp: f32[2, 2, 14, 14, 8] = conv2d_nchwc(%sd, %u, %c) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  %n: f32[2, 20, 28, 28] = conv2d(%y, %wn, %wn) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %nb: f32[2, 3, 28, 28, 8] = to_nchwc(%n) {block=[8]}
  %nd: f32[2, 3, 28, 28, 8] = conv2d_nchwc(%nb, %k, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[20], has_bias=[1]}
  return (%p, %sp, %nd)
})");
  EXPECT_EQ(fuse_conv_pw_dw(g), 3);
  verify(g);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%x: f32[2, 2, 28, 28, 8], %img: f32[2, 3, 28, 28], %w: f32[20, 16, 1, 1], %k: f32[20, 1, 3, 3], %b: f32[20], %u: f32[16, 20, 1, 1], %c: f32[16], %ws: f32[20, 3, 1, 1], %y: f32[2, 16, 28, 28], %wn: f32[20, 16, 1, 1]) {
  %p: f32[2, 2, 28, 28, 8] = conv2d_pw_dw(%x, %w, %w, %k, %b, %u, %c, %x) {activation=[7], dilation=[1, 1], has_bias=[1], has_residual=[1], padding=[1, 1], pj_has_bias=[1], project=[1], pw_activation=[7], pw_has_bias=[0], stride=[1, 1]}
  %s: f32[2, 3, 28, 28, 8] = conv2d_nchwc(%img, %ws, %ws) {block=[8], dilation=[1, 1], groups=[1], has_bias=[0], padding=[0, 0], stride=[1, 1]}
  %sp: f32[2, 2, 14, 14, 8] = conv2d_pw_dw(%s, %k, %b, %u, %c) {dilation=[1, 1], expand=[0], has_bias=[1], padding=[1, 1], pj_has_bias=[1], project=[1], stride=[2, 2]}
  %n: f32[2, 20, 28, 28] = conv2d(%y, %wn, %wn) {dilation=[1, 1], groups=[1], has_bias=[0], padding=[0, 0], stride=[1, 1]}
  %nb: f32[2, 3, 28, 28, 8] = to_nchwc(%n) {block=[8]}
  %nd: f32[2, 3, 28, 28, 8] = conv2d_nchwc(%nb, %k, %b) {dilation=[1, 1], groups=[20], has_bias=[1], padding=[1, 1], stride=[1, 1]}
  return (%p, %sp, %nd)
})"));
  // A blocked input whose blocks do not hold the depthwise conv's channels: refused.
  try {
    verify(parse_graph(R"(graph(%x: f32[1, 2, 28, 28, 8], %k: f32[20, 1, 3, 3], %u: f32[16, 20, 1, 1]) {
  %y: f32[1, 2, 28, 28, 8] = conv2d_pw_dw(%x, %k, %k, %u, %u) {expand=[0], project=[1], stride=[1, 1], padding=[1, 1], dilation=[1, 1]}
  return (%y)
})"));
    ADD_FAILURE() << "accepted 20 channels in 2 blocks of 8";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("channels are not the input's"), std::string::npos) << e.what();
  }
}

TEST(Passes, FuseConvPwDwProjection) {
  // Two inverted residual blocks on 28 x 28 maps. The first's projection %p (1x1, bn
  // folded, its residual add %x fused) reads only the expand + depthwise pair's output:
  // all three become one conv2d_pw_dw with project=1, the projection's inputs last and
  // its epilogue as pj_*. The second's depthwise output %d2 is also returned, so its
  // projection %q stays a conv2d; %s (1x1 with stride 2) is not a projection either. The
  // depthwise %l has no expand before it: it and its projection %lp become one node with
  // expand=0, the depthwise conv's inputs and attributes first.
  Graph g = parse_graph(R"(graph(%x: f32[2, 8, 28, 28], %w: f32[8, 8, 1, 1], %k: f32[8, 1, 3, 3], %b: f32[8], %g: f32[8], %h: f32[8], %m: f32[8], %v: f32[8]) {
  %e: f32[2, 8, 28, 28] = conv2d(%x, %w, %w) {activation=[7], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %d: f32[2, 8, 28, 28] = conv2d(%e, %k, %b) {activation=[7], stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[8], has_bias=[1]}
  %p: f32[2, 8, 28, 28] = conv2d(%d, %w, %w, %g, %h, %m, %v, %x) {bn_eps=f[0.001], has_residual=[1], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %e2: f32[2, 8, 28, 28] = conv2d(%p, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %d2: f32[2, 8, 28, 28] = conv2d(%e2, %k, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[8], has_bias=[1]}
  %q: f32[2, 8, 28, 28] = conv2d(%d2, %w, %b) {activation=[1], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  %s: f32[2, 8, 14, 14] = conv2d(%q, %w, %b) {stride=[2, 2], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  %l: f32[2, 8, 14, 14] = conv2d(%x, %k, %b) {activation=[7], stride=[2, 2], padding=[1, 1], dilation=[1, 1], groups=[8], has_bias=[1]}
  %lp: f32[2, 8, 14, 14] = conv2d(%l, %w, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  return (%s, %d2, %lp)
})");
  EXPECT_EQ(fuse_conv_pw_dw(g), 4);
  verify(g);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%x: f32[2, 8, 28, 28], %w: f32[8, 8, 1, 1], %k: f32[8, 1, 3, 3], %b: f32[8], %g: f32[8], %h: f32[8], %m: f32[8], %v: f32[8]) {
  %p: f32[2, 8, 28, 28] = conv2d_pw_dw(%x, %w, %w, %k, %b, %w, %w, %g, %h, %m, %v, %x) {activation=[7], has_residual=[1], pj_bn_eps=f[0.001], pj_has_bias=[0], project=[1], pw_activation=[7], pw_has_bias=[0], stride=[1, 1], padding=[1, 1], dilation=[1, 1], has_bias=[1]}
  %d2: f32[2, 8, 28, 28] = conv2d_pw_dw(%p, %w, %w, %k, %b) {pw_has_bias=[0], stride=[1, 1], padding=[1, 1], dilation=[1, 1], has_bias=[1]}
  %q: f32[2, 8, 28, 28] = conv2d(%d2, %w, %b) {activation=[1], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  %s: f32[2, 8, 14, 14] = conv2d(%q, %w, %b) {stride=[2, 2], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  %lp: f32[2, 8, 14, 14] = conv2d_pw_dw(%x, %k, %b, %w, %b) {activation=[7], expand=[0], has_bias=[1], pj_has_bias=[1], project=[1], stride=[2, 2], padding=[1, 1], dilation=[1, 1]}
  return (%s, %d2, %lp)
})"));
  // Malformed nodes get a clear error from the verifier, not a run.
  auto refused = [](const char* text, const char* why) {
    try {
      verify(parse_graph(text));
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  // A projection weight that is not a 1x1 conv's over the depthwise channels.
  refused(R"(graph(%x: f32[1, 8, 28, 28], %w: f32[8, 8, 1, 1], %k: f32[8, 1, 3, 3], %u: f32[8, 8, 3, 3]) {
  %y: f32[1, 8, 28, 28] = conv2d_pw_dw(%x, %w, %w, %k, %k, %u, %u) {project=[1], stride=[1, 1], padding=[1, 1], dilation=[1, 1]}
  return (%y)
})",
          "projection's weight must be a 1x1 conv's");
  // expand=0 alone would be a depthwise conv.
  refused(R"(graph(%x: f32[1, 8, 28, 28], %k: f32[8, 1, 3, 3]) {
  %y: f32[1, 8, 28, 28] = conv2d_pw_dw(%x, %k, %k) {expand=[0], stride=[1, 1], padding=[1, 1], dilation=[1, 1]}
  return (%y)
})",
          "expand=0 needs `project`");
}

TEST(Passes, FuseConvResidual) {
  // A block with a downsample branch: add(%a, %b) joins the later conv (%b), reading %a;
  // its relu then joins through fuse_epilogue. add(%c, %x) joins %c. Left alone: a conv
  // also returned raw (%d), an add that broadcasts (%e + %p), a conv with an activation
  // already (%f), and an add whose other operand is computed after the conv (%h + %i).
  Graph g = parse_graph(R"(graph(%x: f32[1, 4, 3, 3], %w: f32[4, 4, 1, 1], %p: f32[4, 1, 1]) {
  %a: f32[1, 4, 3, 3] = conv2d(%x, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %b: f32[1, 4, 3, 3] = conv2d(%x, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %s: f32[1, 4, 3, 3] = add(%a, %b)
  %r: f32[1, 4, 3, 3] = relu(%s)
  %c: f32[1, 4, 3, 3] = conv2d(%r, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %t: f32[1, 4, 3, 3] = add(%c, %x)
  %d: f32[1, 4, 3, 3] = conv2d(%t, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %u: f32[1, 4, 3, 3] = add(%d, %x)
  %e: f32[1, 4, 3, 3] = conv2d(%u, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %v: f32[1, 4, 3, 3] = add(%e, %p)
  %f: f32[1, 4, 3, 3] = conv2d(%v, %w, %w) {activation=[1], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %y: f32[1, 4, 3, 3] = add(%f, %x)
  %h: f32[1, 4, 3, 3] = conv2d(%y, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %i: f32[1, 4, 3, 3] = mul(%y, %y)
  %z: f32[1, 4, 3, 3] = add(%h, %i)
  return (%z, %d, %i)
})");
  EXPECT_EQ(fuse_conv_residual(g), 2);
  EXPECT_EQ(fuse_epilogue(g), 1);
  dead_code_elimination(g);
  verify(g);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%x: f32[1, 4, 3, 3], %w: f32[4, 4, 1, 1], %p: f32[4, 1, 1]) {
  %a: f32[1, 4, 3, 3] = conv2d(%x, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %b: f32[1, 4, 3, 3] = conv2d(%x, %w, %w, %a) {activation=[1], has_residual=[1], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %c: f32[1, 4, 3, 3] = conv2d(%b, %w, %w, %x) {has_residual=[1], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %d: f32[1, 4, 3, 3] = conv2d(%c, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %u: f32[1, 4, 3, 3] = add(%d, %x)
  %e: f32[1, 4, 3, 3] = conv2d(%u, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %v: f32[1, 4, 3, 3] = add(%e, %p)
  %f: f32[1, 4, 3, 3] = conv2d(%v, %w, %w) {activation=[1], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %y: f32[1, 4, 3, 3] = add(%f, %x)
  %h: f32[1, 4, 3, 3] = conv2d(%y, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %i: f32[1, 4, 3, 3] = mul(%y, %y)
  %z: f32[1, 4, 3, 3] = add(%h, %i)
  return (%z, %d, %i)
})"));
}

// A symbolic batch fuses as a static one: the residual's shape is the same expressions
// (s0, not another symbol that may differ), and the MobileNet block's map is static.
TEST(Passes, FusionsTakeASymbolicBatch) {
  Graph g = parse_graph(R"(graph(%x: f32[s0, 8, 28, 28], %y: f32[s1, 8, 28, 28], %w: f32[8, 8, 1, 1], %k: f32[8, 1, 3, 3], %b: f32[8]) {
  %a: f32[s0, 8, 28, 28] = conv2d(%x, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %s: f32[s0, 8, 28, 28] = add(%a, %x)
  %c: f32[s0, 8, 28, 28] = conv2d(%s, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %t: f32[s0, 8, 28, 28] = add(%c, %y)
  %e: f32[s0, 8, 28, 28] = conv2d(%t, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %d: f32[s0, 8, 28, 28] = conv2d(%e, %k, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[8], has_bias=[1]}
  return (%d)
})");
  EXPECT_EQ(fuse_conv_residual(g), 1);  // %a + %x; not %c + %y (s1 may differ from s0 at run time)
  EXPECT_EQ(fuse_conv_pw_dw(g), 1);     // %e -> %d
  dead_code_elimination(g);
  verify(g);
  std::map<Op, int> ops;
  for (const Node& n : g.nodes) ++ops[n.op];
  EXPECT_EQ(ops[Op::add], 1);
  EXPECT_EQ(ops[Op::conv2d], 2);
  EXPECT_EQ(ops[Op::conv2d_pw_dw], 1);
}

TEST(Passes, FuseAttentionLayout) {
  // Self-attention as transformers write it: fused. A second sdpa whose result is also
  // returned in (B, H, L, E) is left alone.
  const char* in = R"(graph(%q: f32[1, 5, 2, 3], %k: f32[1, 5, 2, 3], %v: f32[1, 5, 2, 4]) {
  %a: f32[1, 2, 5, 3] = permute(%q) {perm=[0, 2, 1, 3]}
  %b: f32[1, 2, 5, 3] = permute(%k) {perm=[0, 2, 1, 3]}
  %c: f32[1, 2, 5, 4] = permute(%v) {perm=[0, 2, 1, 3]}
  %s: f32[1, 2, 5, 4] = sdpa(%a, %b, %c, %a) {has_mask=[0], is_causal=[1]}
  %o: f32[1, 5, 2, 4] = permute(%s) {perm=[0, 2, 1, 3]}
  %t: f32[1, 2, 5, 4] = sdpa(%a, %b, %c, %a) {has_mask=[0], is_causal=[0]}
  %u: f32[1, 5, 2, 4] = permute(%t) {perm=[0, 2, 1, 3]}
  return (%o, %u, %t)
})";
  Graph g = parse_graph(in);
  EXPECT_EQ(fuse_attention_layout(g), 1);
  verify(g);  // before dce too: the pipeline verifies after every pass (found by the fuzzer)
  dead_code_elimination(g);
  verify(g);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%q: f32[1, 5, 2, 3], %k: f32[1, 5, 2, 3], %v: f32[1, 5, 2, 4]) {
  %a: f32[1, 2, 5, 3] = permute(%q) {perm=[0, 2, 1, 3]}
  %b: f32[1, 2, 5, 3] = permute(%k) {perm=[0, 2, 1, 3]}
  %c: f32[1, 2, 5, 4] = permute(%v) {perm=[0, 2, 1, 3]}
  %s: f32[1, 5, 2, 4] = sdpa(%q, %k, %v, %q) {has_mask=[0], is_causal=[1], layout=[1]}
  %t: f32[1, 2, 5, 4] = sdpa(%a, %b, %c, %a) {has_mask=[0], is_causal=[0]}
  %u: f32[1, 5, 2, 4] = permute(%t) {perm=[0, 2, 1, 3]}
  return (%s, %u, %t)
})"));
}

TEST(Passes, FuseElementwiseChains) {
  // GELU (tanh) written out, as GPT-2 does: one chain over a scalar constant and a
  // broadcast bias; the shared x*x*x input (x read by three steps) enters once. A value
  // also returned (%h) ends its chain; a value read outside (%s by the matmul) too; a
  // smaller intermediate (%n, [5]) that would broadcast up stays out; a lone op stays.
  Graph g = parse_graph(R"(graph(%x: f32[3, 5], %b: f32[5], %w: f32[5, 2], %v: f32[5]) {
  %k: f32[] = constant() {dtype=[0], shape=[]} data=0000003f
  %xb: f32[3, 5] = add(%x, %b)
  %c: f32[3, 5] = pow(%xb, %k)
  %m: f32[3, 5] = mul(%c, %k)
  %i: f32[3, 5] = add(%xb, %m)
  %t: f32[3, 5] = tanh(%i)
  %h: f32[3, 5] = mul(%xb, %t)
  %s: f32[3, 5] = sigmoid(%h)
  %e: f32[3, 5] = exp(%s)
  %mm: f32[3, 2] = matmul(%s, %w)
  %n: f32[5] = neg(%v)
  %o: f32[3, 5] = sub(%e, %n)
  %z: f32[3, 2] = relu(%mm)
  return (%o, %h, %z)
})");
  EXPECT_EQ(fuse_elementwise(g), 2);
  dead_code_elimination(g);
  verify(g);
  // program: (op, x, y, flag) per step; registers are the inputs, then one per step.
  auto step = [](Op op, int x, int y) {
    return std::to_string(int(op)) + ", " + std::to_string(x) + ", " + std::to_string(y) + ", 0";
  };
  std::string gelu = step(Op::add, 0, 1) + ", " + step(Op::pow, 3, 2) + ", " + step(Op::mul, 4, 2) + ", " +
                     step(Op::add, 3, 5) + ", " + step(Op::tanh, 6, -1) + ", " + step(Op::mul, 3, 7);
  std::string tail = step(Op::exp, 0, -1) + ", " + step(Op::sub, 2, 1);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%x: f32[3, 5], %b: f32[5], %w: f32[5, 2], %v: f32[5]) {
  %k: f32[] = constant() {dtype=[0], shape=[]} data=0000003f
  %h: f32[3, 5] = fused(%x, %b, %k) {program=[)" + gelu + R"(]}
  %s: f32[3, 5] = sigmoid(%h)
  %mm: f32[3, 2] = matmul(%s, %w)
  %n: f32[5] = neg(%v)
  %o: f32[3, 5] = fused(%s, %n) {program=[)" + tail + R"(]}
  %z: f32[3, 2] = relu(%mm)
  return (%o, %h, %z)
})"));
}

TEST(Passes, FuseResidualNorm) {
  // Post-norm: LayerNorm(x + y) takes y as its residual and the add goes. A sum that is
  // also returned (pre-norm's next residual) stays, as does one that broadcasts.
  Graph g = parse_graph(R"(graph(%x: f32[4, 6], %y: f32[4, 6], %w: f32[6], %b: f32[6]) {
  %s: f32[4, 6] = add(%x, %y)
  %n: f32[4, 6] = layer_norm(%s, %w, %b) {eps=f[1e-05], normalized_ndim=[1]}
  %t: f32[4, 6] = add(%n, %y)
  %m: f32[4, 6] = layer_norm(%t, %w, %b) {eps=f[1e-05], normalized_ndim=[1]}
  %u: f32[4, 6] = add(%m, %b)
  %k: f32[4, 6] = layer_norm(%u, %w, %b) {eps=f[1e-05], normalized_ndim=[1]}
  return (%k, %t)
})");
  EXPECT_EQ(fuse_residual_norm(g), 1);
  dead_code_elimination(g);
  verify(g);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%x: f32[4, 6], %y: f32[4, 6], %w: f32[6], %b: f32[6]) {
  %n: f32[4, 6] = layer_norm(%x, %w, %b, %y) {eps=f[1e-05], normalized_ndim=[1]}
  %t: f32[4, 6] = add(%n, %y)
  %m: f32[4, 6] = layer_norm(%t, %w, %b) {eps=f[1e-05], normalized_ndim=[1]}
  %u: f32[4, 6] = add(%m, %b)
  %k: f32[4, 6] = layer_norm(%u, %w, %b) {eps=f[1e-05], normalized_ndim=[1]}
  return (%k, %t)
})"));
}

TEST(Passes, PipelineVerifiesEachPass) {
  Graph g = parse_graph(R"(graph(%x: f32[4]) {
  %a: f32[4] = copy(%x)
  %b: f32[4] = relu(%a)
  %c: f32[4] = relu(%x)
  %d: f32[4] = add(%b, %c)
  return (%d)
})");
  auto reports = run_default_pipeline(g, true);
  ASSERT_EQ(reports.size(), 18u);
  EXPECT_EQ(reports[0].name, "canonicalize");
  EXPECT_EQ(reports[0].changes, 1);
  EXPECT_EQ(reports[2].name, "cse");
  EXPECT_EQ(reports[2].changes, 1);
  EXPECT_EQ(reports[16].name, "fuse_elementwise");  // relu(x) + relu(x), one node after cse
  EXPECT_EQ(reports[16].changes, 1);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op, Op::fused);
}

TEST(Passes, PipelineKeepsDefinitionsBeforeUses) {
  // The importer adds a get_attr weight where it is first read, so the norm's
  // parameters (%g2, computed here, as any value defined after the conv) come after
  // the conv the norm joins: the pipeline moves them ahead of it rather than leave
  // a conv reading values not yet made (the verifier named that until it did).
  Graph g = parse_graph(R"(graph(%x: f32[1, 3, 5, 5], %w: f32[4, 3, 3, 3], %b: f32[4], %g: f32[4], %h: f32[4], %m: f32[4], %v: f32[4]) {
  %c: f32[1, 4, 3, 3] = conv2d(%x, %w, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  %g2: f32[4] = exp(%g)
  %n: f32[1, 4, 3, 3] = batch_norm(%c, %g2, %h, %m, %v) {eps=f[0.001]}
  return (%n)
})");
  auto reports = run_default_pipeline(g, true);
  EXPECT_EQ(reports[4].name, "fuse_conv_bn");
  EXPECT_EQ(reports[4].changes, 1);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%x: f32[1, 3, 5, 5], %w: f32[4, 3, 3, 3], %b: f32[4], %g: f32[4], %h: f32[4], %m: f32[4], %v: f32[4]) {
  %g2: f32[4] = exp(%g)
  %c: f32[1, 4, 3, 3] = conv2d(%x, %w, %b, %g2, %h, %m, %v) {bn_eps=f[0.001], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  return (%c)
})"));
}

TEST(Passes, TopologicalOrderMovesOnlyWhatItMust) {
  Graph g = parse_graph(R"(graph(%x: f32[4]) {
  %a: f32[4] = relu(%x)
  %b: f32[4] = exp(%x)
  %c: f32[4] = neg(%x)
  return (%a, %b, %c)
})");
  EXPECT_FALSE(restore_topological_order(g));  // already ordered: untouched
  g.nodes[0].inputs[0] = g.nodes[2].outputs[0];  // %a reads %c, defined after it
  EXPECT_TRUE(restore_topological_order(g));
  verify(g);
  EXPECT_EQ(print_graph(g), canon(R"(graph(%x: f32[4]) {
  %b: f32[4] = exp(%x)
  %c: f32[4] = neg(%x)
  %a: f32[4] = relu(%c)
  return (%a, %b, %c)
})"));
  g.nodes[1].inputs[0] = g.nodes[2].outputs[0];  // %c reads %a, which reads %c
  try {
    restore_topological_order(g);
    FAIL() << "a cycle was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos) << e.what();
  }
}

TEST(Passes, GemmHandoffTransposed) {
  // %h (GELU fused) reaches the second addmm only, through two reshapes back to its own
  // shape: handed over transposed, the reshapes left to dce. Left alone: %h2, also
  // returned; %h3, read by two nodes; %h4, 4 rows (the skinny kernels: no weight-rows
  // strips to write as they are); %h5, reshaped to another shape; %h6, a bias per row and
  // column; %h7, a weight computed in the graph. %h8 goes transposed but not as panels:
  // its reader's bias is per row and column (it is no x @ W^T + bias in place).
  Graph g = parse_graph(R"(graph(%x: f32[40, 16], %x4: f32[4, 16], %w1: f32[24, 16], %b1: f32[24], %w2: f32[8, 24], %b2: f32[8], %w5: f32[8, 48], %bb: f32[40, 24], %bb8: f32[40, 8]) {
  %h: f32[40, 24] = addmm(%b1, %x, %w1) {trans_b=[1], activation=gelu}
  %r: f32[1, 40, 24] = reshape(%h) {shape=[1, 40, 24]}
  %s: f32[40, 24] = reshape(%r) {shape=[40, 24]}
  %y: f32[40, 8] = addmm(%b2, %s, %w2) {trans_b=[1]}
  %h2: f32[40, 24] = addmm(%b1, %x, %w1) {trans_b=[1]}
  %y2: f32[40, 8] = addmm(%b2, %h2, %w2) {trans_b=[1]}
  %h3: f32[40, 24] = addmm(%b1, %x, %w1) {trans_b=[1]}
  %y3: f32[40, 8] = addmm(%b2, %h3, %w2) {trans_b=[1]}
  %z3: f32[40, 24] = relu(%h3)
  %h4: f32[4, 24] = addmm(%b1, %x4, %w1) {trans_b=[1]}
  %y4: f32[4, 8] = addmm(%b2, %h4, %w2) {trans_b=[1]}
  %h5: f32[40, 24] = addmm(%b1, %x, %w1) {trans_b=[1]}
  %r5: f32[20, 48] = reshape(%h5) {shape=[20, 48]}
  %y5: f32[20, 8] = addmm(%b2, %r5, %w5) {trans_b=[1]}
  %h6: f32[40, 24] = addmm(%bb, %x, %w1) {trans_b=[1]}
  %y6: f32[40, 8] = addmm(%b2, %h6, %w2) {trans_b=[1]}
  %w7: f32[24, 16] = relu(%w1)
  %h7: f32[40, 24] = addmm(%b1, %x, %w7) {trans_b=[1]}
  %y7: f32[40, 8] = addmm(%b2, %h7, %w2) {trans_b=[1]}
  %h8: f32[40, 24] = addmm(%b1, %x, %w1) {trans_b=[1]}
  %y8: f32[40, 8] = addmm(%bb8, %h8, %w2) {trans_b=[1]}
  return (%y, %y2, %h2, %y3, %z3, %y4, %y5, %y6, %y7, %y8)
})");
  EXPECT_EQ(gemm_handoff_transposed(g), 2);
  verify(g);  // before dce too: the pipeline verifies after every pass
  dead_code_elimination(g);
  verify(g);
  const std::string out = print_graph(g);
  EXPECT_NE(out.find("%h: f32[24, 40] = addmm(%b1, %x, %w1) {activation=gelu, panels=[1], trans_b=[1], trans_c=[1]}"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("%y: f32[40, 8] = addmm(%b2, %h, %w2) {panels=[1], trans_a=[1], trans_b=[1]}"), std::string::npos)
      << out;
  EXPECT_NE(out.find("%h8: f32[24, 40] = addmm(%b1, %x, %w1) {trans_b=[1], trans_c=[1]}"), std::string::npos) << out;
  EXPECT_NE(out.find("%y8: f32[40, 8] = addmm(%bb8, %h8, %w2) {trans_a=[1], trans_b=[1]}"), std::string::npos) << out;
  EXPECT_EQ(out.find("%r:"), std::string::npos) << out;
  size_t trans_c = 0, trans_a = 0;
  for (size_t at = out.find("trans_c"); at != std::string::npos; at = out.find("trans_c", at + 1)) ++trans_c;
  for (size_t at = out.find("trans_a"); at != std::string::npos; at = out.find("trans_a", at + 1)) ++trans_a;
  EXPECT_EQ(trans_c, 2u) << out;  // %h and %h8 only
  EXPECT_EQ(trans_a, 2u) << out;
}

TEST(Passes, GemmHandoffPanelsOnlyForItsPair) {
  // ZENITH_GEMM_HANDOFF=transposed hands h over transposed, not as panels. verify holds
  // a graph to the panels' contract: the writer's result read by one reader marked so, as
  // its A, and no graph output; panels on an addmm that is neither writer nor reader.
  const std::string head = "graph(%x: f32[32, 16], %w1: f32[24, 16], %b1: f32[24], %w2: f32[8, 24], %b2: f32[8]) {\n";
  const std::string pair = head +
      "  %h: f32[32, 24] = addmm(%b1, %x, %w1) {trans_b=[1]}\n"
      "  %y: f32[32, 8] = addmm(%b2, %h, %w2) {trans_b=[1]}\n"
      "  return (%y)\n}";
  setenv("ZENITH_GEMM_HANDOFF", "transposed", 1);
  Graph g = parse_graph(pair);
  const int rewritten = gemm_handoff_transposed(g);
  unsetenv("ZENITH_GEMM_HANDOFF");
  EXPECT_EQ(rewritten, 1);
  EXPECT_EQ(print_graph(g).find("panels"), std::string::npos) << print_graph(g);
  Graph p = parse_graph(pair);
  EXPECT_EQ(gemm_handoff_transposed(p), 1);
  EXPECT_NE(print_graph(p).find("panels"), std::string::npos) << print_graph(p);
  const std::string writer = "  %h: f32[24, 32] = addmm(%b1, %x, %w1) {trans_b=[1], trans_c=[1], panels=[1]}\n";
  const std::string reader = "  %y: f32[32, 8] = addmm(%b2, %h, %w2) {trans_a=[1], trans_b=[1], panels=[1]}\n";
  const std::string plain = "  %y: f32[32, 8] = addmm(%b2, %h, %w2) {trans_a=[1], trans_b=[1]}\n";
  const std::string second = "  %z: f32[32, 8] = addmm(%b2, %h, %w2) {trans_a=[1], trans_b=[1], panels=[1]}\n";
  EXPECT_NO_THROW(verify(parse_graph(head + writer + reader + "  return (%y)\n}")));
  for (const auto& [text, says] : {std::pair<std::string, std::string>{head + writer + plain + "  return (%y)\n}",
                                                                      "only its addmm reads"},
                                   {head + writer + reader + second + "  return (%y, %z)\n}", "second reader"},
                                   {head + writer + reader + "  return (%y, %h)\n}", "is a hand-off as panels"},
                                   {head + "  %h: f32[24, 32] = addmm(%b1, %x, %w1) {trans_b=[1], trans_c=[1]}\n" +
                                        reader + "  return (%y)\n}",
                                    "does not write"},
                                   {head + "  %h: f32[32, 24] = addmm(%b1, %x, %w1) {trans_b=[1], panels=[1]}\n" +
                                        "  return (%h)\n}",
                                    "needs trans_c"}}) {
    try {
      verify(parse_graph(text));
      ADD_FAILURE() << "accepted:\n" << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

TEST(Passes, FuseAddmmSiblings) {
  // %q, %k and %v read %x as x @ W^T: one addmm_parts, outputs keeping their ids. Apart:
  // %g (an activation), %o (another x), %s (a weight computed in the graph), %t (alpha 2),
  // %e (a bias computed in the graph), %f (a bias per row and column), and %u, %u2 (4
  // rows: the skinny kernels, which stream W part by part anyway).
  Graph g = parse_graph(R"(graph(%x: f32[40, 16], %x2: f32[40, 16], %x4: f32[4, 16], %wq: f32[24, 16], %wk: f32[13, 16], %wv: f32[40, 16], %bq: f32[24], %bk: f32[13], %bv: f32[40], %bf: f32[40, 24]) {
  %q: f32[40, 24] = addmm(%bq, %x, %wq) {trans_b=[1]}
  %k: f32[40, 13] = addmm(%bk, %x, %wk) {trans_b=[1]}
  %g: f32[40, 24] = addmm(%bq, %x, %wq) {trans_b=[1], activation=gelu}
  %v: f32[40, 40] = addmm(%bv, %x, %wv) {trans_b=[1]}
  %o: f32[40, 24] = addmm(%bq, %x2, %wq) {trans_b=[1]}
  %w: f32[24, 16] = relu(%wq)
  %s: f32[40, 24] = addmm(%bq, %x, %w) {trans_b=[1]}
  %t: f32[40, 24] = addmm(%bq, %x, %wq) {trans_b=[1], alpha=f[2]}
  %u: f32[4, 24] = addmm(%bq, %x4, %wq) {trans_b=[1]}
  %u2: f32[4, 13] = addmm(%bk, %x4, %wk) {trans_b=[1]}
  %be: f32[24] = relu(%bq)
  %e: f32[40, 24] = addmm(%be, %x, %wq) {trans_b=[1]}
  %f: f32[40, 24] = addmm(%bf, %x, %wq) {trans_b=[1]}
  return (%q, %k, %g, %v, %o, %s, %t, %u, %u2, %e, %f)
})");
  EXPECT_EQ(fuse_addmm_siblings(g), 1);
  verify(g);
  const std::string out = print_graph(g);
  EXPECT_NE(out.find("%q: f32[40, 24], %k: f32[40, 13], %v: f32[40, 40] = addmm_parts(%x, %wq, %wk, %wv, %bq, %bk, "
                     "%bv) {parts=[3]}"),
            std::string::npos)
      << out;
  int addmms = 0;
  for (const Node& n : g.nodes) addmms += n.op == Op::addmm;
  EXPECT_EQ(addmms, 8) << out;  // g, o, s, t, u, u2, e, f
}
