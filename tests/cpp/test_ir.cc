// IR building, the verifier, the text form and shape inference.
#include <gtest/gtest.h>

#include "zenith/error.h"
#include "zenith/ir.h"

using namespace zenith;

namespace {
TensorType tt(DType d, std::vector<SymInt> s) { return TensorType{d, std::move(s)}; }
}  // namespace

TEST(Symbolic, ParseEvalPrint) {
  SymbolTable t;
  SymInt a = parse_symint("12*s0 + 3", &t);
  EXPECT_FALSE(a.is_const());
  EXPECT_EQ(a.eval({5}), 63);
  SymInt b = parse_symint("(s0//2) - Max(s1, 4) % 3", &t);
  EXPECT_EQ(t.names.size(), 2u);
  EXPECT_EQ(b.eval({9, 7}), 4 - 7 % 3);
  SymInt c = parse_symint(a.str(t), &t);  // printed text parses back to the same tree
  EXPECT_TRUE(c.same(a));
  EXPECT_EQ(parse_symint("-7//2", &t).eval({0, 0}), -4);  // floor division, as Python
  EXPECT_TRUE(parse_symint("42", &t).is_const());
  EXPECT_THROW(parse_symint("s0 +", &t), Error);
  EXPECT_THROW(parse_symint("foo(1, 2)", &t), Error);
}

TEST(IR, BuildInfersTypes) {
  Graph g;
  SymbolTable& s = g.symbols;
  int x = g.add_input("x", tt(DType::f32, {parse_symint("s0", &s), 4}));
  int w = g.add_input("w", tt(DType::f32, {4, 8}));
  int b = g.add_input("b", tt(DType::f32, {8}));
  int y = g.add_node(Op::matmul, {x, w})[0];
  int z = g.add_node(Op::add, {y, b})[0];
  g.outputs = {z};
  EXPECT_EQ(g.type(z).shape.size(), 2u);
  EXPECT_EQ(g.type(z).shape[0].str(s), "s0");
  EXPECT_EQ(g.type(z).shape[1].value(), 8);
  EXPECT_NO_THROW(verify(g));
}

TEST(IR, InferenceRejectsBadShapes) {
  Graph g;
  int a = g.add_input("a", tt(DType::f32, {3, 4}));
  int b = g.add_input("b", tt(DType::f32, {5, 6}));
  int i = g.add_input("i", tt(DType::i64, {3}));
  EXPECT_THROW(g.add_node(Op::matmul, {a, b}), Error);
  EXPECT_THROW(g.add_node(Op::add, {a, b}), Error);
  EXPECT_THROW(g.add_node(Op::add, {a, i}), Error);  // dtypes must agree
  Node n;
  n.set_ints("perm", {0, 0});
  EXPECT_THROW(g.add_node(Op::permute, {a}, n.attrs), Error);
  n.set_ints("shape", {5, 5});
  EXPECT_THROW(g.add_node(Op::reshape, {a}, n.attrs), Error);
  EXPECT_THROW(g.add_node(Op::relu, {a, a}), Error);  // arity
}

TEST(IR, ShapeInferencePerOp) {
  Graph g;
  int x = g.add_input("x", tt(DType::f32, {2, 3, 4}));
  Node n;
  n.set_ints("dims", {-1});
  n.set_int("keepdim", 1);
  EXPECT_EQ(g.type(g.add_node(Op::reduce_sum, {x}, n.attrs)[0]).shape[2].value(), 1);
  Node p;
  p.set_ints("perm", {2, 0, 1});
  auto t = g.type(g.add_node(Op::permute, {x}, p.attrs)[0]);
  EXPECT_EQ(t.shape[0].value(), 4);
  Node sl;
  sl.set_int("dim", 2);
  sl.set_int("start", 1);
  sl.set_int("end", 100);
  sl.set_int("step", 2);
  EXPECT_EQ(g.type(g.add_node(Op::slice, {x}, sl.attrs)[0]).shape[2].value(), 2);
  Node c;
  c.set_int("dim", 1);
  EXPECT_EQ(g.type(g.add_node(Op::cat, {x, x}, c.attrs)[0]).shape[1].value(), 6);
  Node cmp;
  EXPECT_EQ(g.type(g.add_node(Op::lt, {x, x})[0]).dtype, DType::b8);
  int img = g.add_input("img", tt(DType::f32, {1, 3, 9, 9}));
  int wt = g.add_input("wt", tt(DType::f32, {8, 3, 3, 3}));
  Node cv;
  cv.set_ints("stride", {2, 2});
  cv.set_ints("padding", {1, 1});
  cv.set_ints("dilation", {1, 1});
  cv.set_int("groups", 1);
  auto ct = g.type(g.add_node(Op::conv2d, {img, wt, wt}, cv.attrs)[0]);
  EXPECT_EQ(ct.shape[1].value(), 8);
  EXPECT_EQ(ct.shape[2].value(), 5);
  Node mp;
  mp.set_ints("kernel", {3, 3});
  mp.set_ints("stride", {2, 2});
  mp.set_ints("padding", {0, 0});
  mp.set_int("ceil_mode", 1);
  EXPECT_EQ(g.type(g.add_node(Op::max_pool2d, {img}, mp.attrs)[0]).shape[2].value(), 4);
}

TEST(IR, VerifierCatchesBrokenGraphs) {
  Graph g;
  int x = g.add_input("x", tt(DType::f32, {2, 2}));
  int y = g.add_node(Op::relu, {x})[0];
  g.outputs = {y};
  EXPECT_NO_THROW(verify(g));
  Graph use_before_def = g;
  use_before_def.nodes[0].inputs = {y};
  EXPECT_THROW(verify(use_before_def), Error);
  Graph wrong_type = g;
  wrong_type.values[size_t(y)].type.shape[0] = 3;
  EXPECT_THROW(verify(wrong_type), Error);
  Graph bad_out = g;
  bad_out.outputs = {42};
  EXPECT_THROW(verify(bad_out), Error);
  Graph dup = g;
  dup.values[size_t(y)].name = "x";
  EXPECT_THROW(verify(dup), Error);
}

TEST(IR, TextRoundTrip) {
  const char* text = R"(graph(%x: f32[s0, 4], %w: f32[4, 4]) {
  %y: f32[s0, 4] = matmul(%x, %w)
  %c: f32[2] = constant() {dtype=[0], shape=[2]} data=0000803f00000040
  %r: f32[(s0*2), 2] = reshape(%y) {shape=[(s0*2), 2]}
  %s: f32[(s0*2), 2] = mul(%r, %c)
  %t: f32[(s0*2), 2] = clamp(%s) {max=f[6], min=f[0]}
  return (%t, %y)
}
)";
  Graph g = parse_graph(text);
  EXPECT_NO_THROW(verify(g));
  std::string printed = print_graph(g);
  EXPECT_EQ(printed, text);
  Graph again = parse_graph(printed);
  EXPECT_EQ(print_graph(again), printed);
}

TEST(IR, TextErrorsNameTheLine) {
  try {
    parse_graph("graph(%x: f32[2]) {\n  %y: f32[2] = nosuchop(%x)\n  return (%y)\n}\n");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos);
  }
  EXPECT_THROW(parse_graph("graph(%x: f32[2]) {\n  return (%z)\n}\n"), Error);
}

TEST(IR, OpTableIsComplete) {
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& info = op_info(Op(i));
    ASSERT_NE(info.name, nullptr);
    ASSERT_NE(info.infer, nullptr);
    Op back;
    ASSERT_TRUE(parse_op(info.name, &back));
    EXPECT_EQ(int(back), i);
  }
}
