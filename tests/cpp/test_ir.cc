// IR building, the verifier, the text form and shape inference.
#include <gtest/gtest.h>

#include <limits>
#include <set>

#include "zenith/error.h"
#include "zenith/attrs.h"
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

// Text from a file (a model file's graph) cannot exhaust the stack or overflow silently.
TEST(Symbolic, LimitsOnTextFromFiles) {
  SymbolTable t;
  auto error = [&](const std::string& text, std::vector<int64_t> bind = {}) -> std::string {
    try {
      parse_symint(text, &t).eval(bind);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  const std::string deep = std::string(100, '(') + "s0" + std::string(100, ')');
  EXPECT_NE(error(deep).find("nests deeper than 64 levels"), std::string::npos);
  EXPECT_NE(error(std::string(100, '-') + "3").find("nests deeper than 64 levels"), std::string::npos);
  EXPECT_LT(error(deep).size(), 300u);  // the message quotes the text's start only
  std::string chain = "s0";
  for (int k = 0; k < 2000; ++k) chain += "+s0";
  EXPECT_NE(error(chain).find("more than 1024 terms"), std::string::npos);
  EXPECT_NE(error("99999999999999999999").find("number out of range"), std::string::npos);
  EXPECT_NE(error("-9223372036854775809").find("number out of range"), std::string::npos);
  EXPECT_EQ(parse_symint("-9223372036854775808", &t).value(), std::numeric_limits<int64_t>::lowest());  // prints so
  EXPECT_EQ(parse_symint("s0 + -3", &t).eval({5}), 2);
  EXPECT_EQ(parse_symint("2 - -3 * s0", &t).eval({2}), 8);
  EXPECT_EQ(parse_symint(std::string(60, '(') + "s0" + std::string(60, ')'), &t).eval({7}), 7);
  // Arithmetic that leaves int64 is an error, not a wrapped size.
  EXPECT_NE(error("s0*s0*s0*s0*s0", {int64_t(1) << 16}).find("overflows int64"), std::string::npos);
  EXPECT_NE(error("s0 + 9223372036854775807", {1}).find("overflows int64"), std::string::npos);
  EXPECT_NE(error("-s0 - 9223372036854775807", {2}).find("overflows int64"), std::string::npos);
  EXPECT_EQ(parse_symint("s0*s0*s0", &t).eval({int64_t(1) << 20}), int64_t(1) << 60);
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
  %c: f32[2] = constant() {dtype=f32, shape=[2]} data=0000803f00000040
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

TEST(IR, TextPrintsEnumsByNameAndRoundTrips) {
  const char* text = R"(graph(%x: f32[2, 8], %w: f32[8, 8], %b: f32[8], %q: f32[1, 4, 2, 8]) {
  %y: f32[2, 8] = addmm(%b, %x, %w) {activation=relu6}
  %g: f32[2, 8] = gelu(%y) {approximate=tanh}
  %d: f32[2, 8] = div(%g, %y) {rounding=floor}
  %h: bf16[2, 8] = cast(%d) {dtype=bf16}
  %a: f32[1, 4, 2, 8] = sdpa(%q, %q, %q, %q) {layout=blhe}
  return (%h, %a)
}
)";
  Graph g = parse_graph(text);
  EXPECT_NO_THROW(verify(g));
  EXPECT_EQ(print_graph(g), text);
  EXPECT_EQ(g.nodes[0].i("activation"), int64_t(Activation::kRelu6));
  EXPECT_EQ(g.nodes[4].i("layout"), int64_t(SdpaLayout::kBLHE));
  // The numeric form still parses (and prints by name).
  Graph old = parse_graph(R"(graph(%x: f32[2]) {
  %h: f16[2] = cast(%x) {dtype=[1]}
  return (%h)
}
)");
  EXPECT_NE(print_graph(old).find("{dtype=f16}"), std::string::npos);
  // A name the enum lacks, or a name for a non-enum attribute, is an error naming it.
  for (const char* bad : {"addmm(%b, %x, %w) {activation=relu7}", "addmm(%b, %x, %w) {alpha=relu}"}) {
    std::string t = std::string("graph(%x: f32[2, 8], %w: f32[8, 8], %b: f32[8]) {\n  %y: f32[2, 8] = ") + bad +
                    "\n  return (%y)\n}\n";
    try {
      parse_graph(t);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("relu"), std::string::npos) << e.what();
    }
  }
}

TEST(IR, VerifierChecksAttributesAgainstTheOpTable) {
  Graph g;
  int x = g.add_input("x", tt(DType::f32, {2, 8}));
  int w = g.add_input("w", tt(DType::f32, {8, 8}));
  int b = g.add_input("b", tt(DType::f32, {8}));
  int y = g.add_node(Op::addmm, {b, x, w})[0];
  g.outputs = {y};
  EXPECT_NO_THROW(verify(g));
  auto rejects = [&](const std::string& key, Attr a, const std::string& what) {
    Graph bad = g;
    bad.nodes[0].attrs[key] = a;
    try {
      verify(bad);
      ADD_FAILURE() << key << " accepted";
    } catch (const Error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find(key), std::string::npos) << m;
      EXPECT_NE(m.find(what), std::string::npos) << m;
    }
    // Graph building checks too, before inference.
    std::map<std::string, Attr> attrs = {{key, a}};
    EXPECT_THROW(bad.add_node(Op::addmm, {b, x, w}, attrs), Error) << key;
  };
  Attr i1;
  i1.ints = {SymInt(int64_t(1))};
  Attr i9 = i1;
  i9.ints = {SymInt(int64_t(9))};
  Attr i2 = i1;
  i2.ints = {SymInt(int64_t(2))};
  Attr two_ints = i1;
  two_ints.ints = {SymInt(int64_t(0)), SymInt(int64_t(1))};
  Attr fl;
  fl.kind = Attr::kFloats;
  fl.floats = {0.5};
  Attr str;
  str.kind = Attr::kStr;
  str.str = "relu";
  rejects("bogus", i1, "unknown attribute");
  rejects("bogus", i1, "alpha, beta, trans_a, trans_b, activation");  // the known ones, in table order
  rejects("activation", i9, "got code 9");                            // enum out of range
  rejects("activation", fl, "enum");                                  // a float for an enum
  rejects("activation", str, "enum");                                 // a string
  rejects("trans_a", i2, "bool");                                     // a bool is 0 or 1
  rejects("trans_b", two_ints, "2 values");                           // a scalar takes one value
  rejects("alpha", two_ints, "float");                                // symbolic-free ints become floats only one by one
  // A missing required attribute, and a symbolic value where a constant is needed.
  Graph no_dim;
  int v = no_dim.add_input("v", tt(DType::f32, {2, 3}));
  EXPECT_THROW(no_dim.add_node(Op::softmax, {v}, {}), Error);
  Graph sym;
  int s0 = sym.add_input("s", tt(DType::f32, {2, 3}));
  Attr symbolic;
  symbolic.ints = {parse_symint("s0", &sym.symbols)};
  EXPECT_THROW(sym.add_node(Op::gelu, {s0}, {{"approximate", symbolic}}), Error);
  // Ints given for a float attribute are accepted as floats (the importer writes value=0).
  Graph full;
  Attr shape;
  shape.ints = {SymInt(int64_t(2))};
  Attr dt;
  dt.ints = {SymInt(int64_t(0))};
  int f = full.add_node(Op::full, {}, {{"shape", shape}, {"value", i1}, {"dtype", dt}})[0];
  full.outputs = {f};
  EXPECT_NO_THROW(verify(full));
  EXPECT_EQ(full.nodes[0].f("value"), 1.0);
}

TEST(IR, AttributeTableDecodesTypedStructs) {
  Graph g = parse_graph(R"(graph(%x: f32[1, 3, 8, 8], %w: f32[4, 3, 3, 3], %b: f32[4]) {
  %y: f32[1, 4, 4, 4] = conv2d(%x, %w, %b) {activation=silu, dilation=[1, 1], groups=[1], has_bias=[1], padding=[1], stride=[2, 2]}
  return (%y)
}
)");
  AttrsPtr p = decode_attrs(g.nodes[0]);
  const auto& a = *static_cast<const attrs::conv2d*>(p.get());
  EXPECT_EQ(a.activation, Activation::kSilu);
  EXPECT_EQ(a.groups, 1);
  EXPECT_TRUE(a.has_bias);
  EXPECT_FALSE(a.has_residual);
  EXPECT_FALSE(a.bn_eps.has_value());
  EXPECT_EQ(a.stride, (std::array<int64_t, 2>{2, 2}));
  EXPECT_EQ(a.padding, (std::array<int64_t, 2>{1, 1}));  // one value stands for both
  // Every op's attributes are declared once: names are unique per op.
  for (int i = 0; i < kNumOps; ++i) {
    std::set<std::string> names;
    for (const auto& s : attr_specs(Op(i))) EXPECT_TRUE(names.insert(s.name).second) << op_info(Op(i)).name;
  }
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
