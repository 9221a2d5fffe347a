// Model files (model_file.h) and the safetensors reader and writer under them: a graph
// with a weight and a large constant saved, loaded and run against a scalar reference;
// every kind of damaged or mismatched file a clear zenith::Error.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <new>
#include <random>
#include <typeinfo>
#include <string>
#include <vector>

#include "zenith/error.h"
#include "zenith/model_file.h"
#include "zenith/safetensors.h"

using namespace zenith;

namespace {

// relu(x @ w + c): x [3, 4] the model's input (rows s0 if symbolic), w [4, 160] bound, c
// [160] a constant of 640 bytes (past the text's inline limit, so it goes to the file as const/0).
struct Case {
  std::vector<float> w = std::vector<float>(4 * 160), c = std::vector<float>(160), x = std::vector<float>(12);
  Graph g;
  explicit Case(bool symbolic = false) {
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i % 7) - 3) * 0.25f;
    for (size_t i = 0; i < c.size(); ++i) c[i] = float(int(i % 5) - 2);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.5f - 2.0f;
    const SymInt rows = symbolic ? parse_symint("s0", &g.symbols) : SymInt(3);
    TensorType xt{DType::f32, {rows, SymInt(4)}}, wt{DType::f32, {SymInt(4), SymInt(160)}};
    const int xv = g.add_input("x", xt), wv = g.add_input("w", wt);
    const int cv = g.add_constant(TensorType{DType::f32, {SymInt(160)}}, c.data(), c.size() * 4, nullptr);
    const int y = g.add_node(Op::matmul, {xv, wv})[0];
    const int z = g.add_node(Op::add, {y, cv})[0];
    g.outputs = {g.add_node(Op::relu, {z})[0]};
  }
  std::map<std::string, InTensor> bound() const { return {{"w", InTensor{w.data(), DType::f32, {4, 160}}}}; }
  float expect(int r, int j) const { return expect(x.data(), r, j); }
  float expect(const float* xs, int r, int j) const {
    float s = 0;
    for (int k = 0; k < 4; ++k) s += xs[r * 4 + k] * w[size_t(k * 160 + j)];
    s += c[size_t(j)];
    return s > 0 ? s : 0;
  }
};

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "zenith_model_" + name; }

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

// The zenith::Error a load of `path` raises (fails the test if it loads).
std::string load_error(const std::string& path) {
  try {
    Model m(path);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << path << " loaded";
  return "";
}

}  // namespace

TEST(ModelFile, SavedGraphLoadsAndRunsAsTheGraph) {
  Case k;
  const std::string path = temp_path("roundtrip.zenith");
  save_model(path, k.g, k.bound(), {{"zenith.note", "test"}});
  const Model m(path);
  ASSERT_EQ(m.inputs().size(), 1u);
  EXPECT_EQ(m.inputs()[0].name, "x");
  EXPECT_EQ(m.inputs()[0].shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(m.metadata().at("zenith.note"), "test");
  EXPECT_EQ(m.metadata().at("zenith.format"), kModelFormat);
  for (int call = 0; call < 2; ++call) {  // (a second call reuses the first's plan)
    auto out = m.run({{k.x.data(), DType::f32, {3, 4}}});
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].shape, (std::vector<int64_t>{3, 160}));
    const float* o = static_cast<const float*>(out[0].data);
    for (int r = 0; r < 3; ++r)
      for (int j = 0; j < 160; ++j) ASSERT_NEAR(o[r * 160 + j], k.expect(r, j), 1e-5f) << r << "," << j;
  }
  // Any safetensors reader sees the weight and the constant with their types.
  const SafeTensorsFile f = read_safetensors(path);
  ASSERT_EQ(f.tensors.count("input/w"), 1u);
  ASSERT_EQ(f.tensors.count("const/0"), 1u);
  EXPECT_EQ(f.tensors.at("const/0").shape, (std::vector<int64_t>{160}));
  EXPECT_EQ(0, std::memcmp(f.tensors.at("input/w").data, k.w.data(), k.w.size() * 4));
  std::remove(path.c_str());
}

TEST(ModelFile, WrongInputsAreClearErrors) {
  Case k;
  const std::string path = temp_path("inputs.zenith");
  save_model(path, k.g, k.bound(), {});
  const Model m(path);
  std::vector<float> big(20);
  auto run_error = [&](const std::vector<InTensor>& ins) -> std::string {
    try {
      m.run(ins);
    } catch (const Error& e) {
      return e.what();
    }
    return "ran";
  };
  EXPECT_NE(run_error({}).find("0 inputs given, the model takes 1"), std::string::npos);
  EXPECT_NE(run_error({{big.data(), DType::f32, {4, 5}}}).find("(x) is f32[4, 5], the model takes f32[3, 4]"),
            std::string::npos);
  EXPECT_NE(run_error({{big.data(), DType::i32, {3, 4}}}).find("is i32[3, 4]"), std::string::npos);
  EXPECT_NE(run_error({{nullptr, DType::f32, {3, 4}}}).find("has no data"), std::string::npos);
  std::remove(path.c_str());
}

TEST(ModelFile, SaveChecksWhatItIsGiven) {
  Case k;
  std::vector<float> small(4);
  EXPECT_THROW(save_model(temp_path("x"), k.g, {{"v", InTensor{k.w.data(), DType::f32, {4, 160}}}}, {}), Error);
  EXPECT_THROW(save_model(temp_path("x"), k.g, {{"w", InTensor{small.data(), DType::f32, {2, 2}}}}, {}), Error);
  EXPECT_THROW(save_model("/nonexistent-dir/m.zenith", k.g, k.bound(), {}), Error);
}

TEST(ModelFile, DamagedFilesAreClearErrors) {
  Case k;
  const std::string good = temp_path("good.zenith"), bad = temp_path("bad.zenith");
  save_model(good, k.g, k.bound(), {});
  const std::string bytes = read_all(good);
  auto expect_error = [&](const std::string& content, const char* says) {
    write_all(bad, content);
    const std::string e = load_error(bad);
    EXPECT_NE(e.find(says), std::string::npos) << "error: " << e << "\nwanted: " << says;
  };
  EXPECT_NE(load_error(temp_path("missing.zenith")).find("cannot open"), std::string::npos);
  expect_error("", "too short");
  expect_error(bytes.substr(0, bytes.size() / 2), "fall outside");                  // truncated data
  expect_error(bytes.substr(0, 40), "does not fit");                                // truncated header
  std::string huge = bytes;
  huge[7] = char(0x7f);
  expect_error(huge, "does not fit");
  std::string not_json = bytes;
  not_json[8] = 'x';
  expect_error(not_json, "not valid JSON");
  std::string graph_text = bytes;  // an op name the parser does not know
  const size_t at = graph_text.find("relu(");
  ASSERT_NE(at, std::string::npos);
  graph_text.replace(at, 4, "relv");
  expect_error(graph_text, "its graph does not load");

  // Files whose tensors do not match their graph, written as valid safetensors.
  std::vector<float> w2(4 * 160);
  const std::string text = read_safetensors(good).metadata.at("zenith.graph");
  const std::map<std::string, std::string> meta{{"zenith.format", "1"}, {"zenith.graph", text}, {"zenith.inputs", "x"}};
  auto with = [&](const std::vector<SafeTensorOut>& ts, std::map<std::string, std::string> m, const char* says) {
    write_safetensors(bad, ts, m);
    const std::string e = load_error(bad);
    EXPECT_NE(e.find(says), std::string::npos) << "error: " << e << "\nwanted: " << says;
  };
  const SafeTensorOut w{"input/w", DType::f32, {4, 160}, k.w.data()}, c{"const/0", DType::f32, {160}, k.c.data()};
  with({w, c}, {}, "not a Zenith model file");
  with({w, c}, {{"zenith.format", "2"}}, "model file format 2");
  with({w}, meta, "constant @const/0 has no tensor");
  with({c}, meta, "a weight's tensor is missing");
  with({{"input/w", DType::f32, {160, 4}, k.w.data()}, c}, meta, "is f32[160, 4], the graph's input f32[4, 160]");
  with({w, {"const/0", DType::f32, {16, 10}, k.c.data()}}, meta, "the graph's constant f32[160]");
  with({w, c, {"extra", DType::f32, {4}, k.c.data()}}, meta, "tensor extra is read by no part of the graph");
  auto m2 = meta;
  m2.erase("zenith.graph");
  with({w, c}, m2, "has no zenith.graph");
  auto edited = [&](const std::string& from, const std::string& to) {
    auto m3 = meta;
    std::string& t = m3["zenith.graph"];
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) t.replace(at, from.size(), to);
    return m3;
  };
  // A constant printed opaque would load as zeros: a model file refuses it.
  with({w, c}, edited("data=@const/0", "data=opaque"), "printed opaque has no data");
  // Inline constant data that is short, not hexadecimal, or missing; a bad dtype code.
  with({w, c}, edited("return", "%k: f32[2] = constant() {dtype=f32, shape=[2]} data=0000\n  return"),
       "constant data holds 2 bytes, its type needs 8");
  with({w, c}, edited("return", "%k: f32[1] = constant() {dtype=f32, shape=[1]} data=zz000000\n  return"),
       "constant data holds 0 bytes, its type needs 4");
  with({w, c}, edited("return", "%k: f32[1] = constant() {dtype=f32, shape=[1]} data=-\n  return"),
       "no bytes");
  with({w, c}, edited("return", "%k: f32[1] = constant() {dtype=[9], shape=[1]} data=-\n  return"),
       "names no dtype");
  with({w, c}, edited("return", "%k: f32[1] = constant() {dtype=f32, shape=[1099511627776, 1099511627776]} data=opaque\n  return"),
       "too large");
  // Sizes: nesting bounded (no recursion without limit), numbers within int64, every
  // symbol a whole dim of some model input (else nothing binds it).
  with({w, c}, edited("f32[3, 4]", "f32[" + std::string(5000, '(') + "3" + std::string(5000, ')') + ", 4]"),
       "nests deeper than 64 levels");
  with({w, c}, edited("f32[3, 4]", "f32[99999999999999999999, 4]"), "number out of range");
  with({w, c}, edited("f32[4, 160]) {", "f32[4, 160], %extra: f32[(2*s5)]) {"),
       "symbol s5 is no whole dim of any model input");
  // Sizes that fit int64 but not memory are refused before any pass or plan multiplies them.
  with({w, c}, edited("f32[4, 160]) {", "f32[4, 160], %big: f32[4611686018427387904, 4]) {"),
       "past 2^48 bytes");
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

TEST(Safetensors, HeaderChecks) {
  const std::string path = temp_path("st.safetensors");
  auto header_file = [&](const std::string& json, size_t data_bytes) {
    std::string s(8, '\0');
    for (int b = 0; b < 8; ++b) s[size_t(b)] = char(uint64_t(json.size()) >> (8 * b));
    write_all(path, s + json + std::string(data_bytes, '\0'));
  };
  auto error = [&]() -> std::string {
    try {
      read_safetensors(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "read";
  };
  header_file(R"({"a": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", 8);
  EXPECT_NE(error().find("dtype F64 is not one Zenith reads"), std::string::npos);
  header_file(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8);
  EXPECT_NE(error().find("holds 8 bytes, its dtype and shape need 12"), std::string::npos);
  header_file(R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8);
  EXPECT_NE(error().find("negative dimension"), std::string::npos);
  header_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8);
  EXPECT_NE(error().find("fall outside"), std::string::npos);
  header_file(R"({"a": {"dtype": "F32", "shape": [2]}})", 8);
  EXPECT_NE(error().find("needs dtype"), std::string::npos);
  header_file(R"({"__metadata__": {"k": 3}})", 0);
  EXPECT_NE(error().find("metadata k is not a string"), std::string::npos);
  header_file(R"([1, 2])", 0);
  EXPECT_NE(error().find("not a JSON object"), std::string::npos);
  // A misaligned tensor (another writer's layout) is read through an aligned copy.
  {
    const std::string json =
        R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [1, 5]}})";
    std::string s(8, '\0');
    for (int b = 0; b < 8; ++b) s[size_t(b)] = char(uint64_t(json.size()) >> (8 * b));
    const float value = 3.25f;
    std::string data(5, '\7');
    std::memcpy(&data[1], &value, 4);
    write_all(path, s + json + data);
  }
  const SafeTensorsFile f = read_safetensors(path);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f.tensors.at("b").data) % 4, 0u);
  EXPECT_EQ(*static_cast<const float*>(f.tensors.at("b").data), 3.25f);
  EXPECT_EQ(*static_cast<const uint8_t*>(f.tensors.at("a").data), 7u);
  EXPECT_EQ((f.names), (std::vector<std::string>{"a", "b"}));
  std::remove(path.c_str());
}

// One file for every batch size in the range torch.export gave: the symbol binds from the
// input's dim, each size runs, sizes outside the range and conflicting bindings are errors.
TEST(ModelFile, SymbolicDimsRunEverySizeInTheirRange) {
  Case k(/*symbolic=*/true);
  const std::string path = temp_path("symbolic.zenith");
  save_model(path, k.g, k.bound(), {{"zenith.symbols", R"({"s0": {"min": 1, "max": 8}})"}});
  const Model m(path);
  ASSERT_EQ(m.inputs().size(), 1u);
  EXPECT_EQ(m.inputs()[0].shape, (std::vector<int64_t>{-1, 4}));
  EXPECT_EQ(m.inputs()[0].type_str(), "f32[s0, 4]");
  ASSERT_EQ(m.symbols().size(), 1u);
  EXPECT_EQ(m.symbols()[0].name, "s0");
  EXPECT_EQ(m.symbols()[0].bound_by, "x dim 0");
  EXPECT_EQ(m.symbols()[0].min, 1);
  EXPECT_EQ(m.symbols()[0].max, 8);
  for (int rows : {1, 3, 8, 5, 3}) {
    std::vector<float> x(size_t(rows) * 4);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7 % 11) - 5) * 0.5f;
    auto out = m.run({{x.data(), DType::f32, {rows, 4}}});
    ASSERT_EQ(out[0].shape, (std::vector<int64_t>{rows, 160}));
    const float* o = static_cast<const float*>(out[0].data);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < 160; ++j) ASSERT_NEAR(o[r * 160 + j], k.expect(x.data(), r, j), 1e-5f) << rows;
  }
  std::vector<float> big(9 * 5);
  auto run_error = [&](std::vector<int64_t> shape) -> std::string {
    try {
      m.run({{big.data(), DType::f32, shape}});
    } catch (const Error& e) {
      return e.what();
    }
    return "ran";
  };
  EXPECT_NE(run_error({9, 4}).find("its dim 0 (s0) takes sizes 1..8"), std::string::npos);
  EXPECT_NE(run_error({0, 4}).find("its dim 0 (s0) takes sizes 1..8"), std::string::npos);
  EXPECT_NE(run_error({3, 5}).find("is f32[3, 5], the model takes f32[s0, 4]"), std::string::npos);
  EXPECT_NE(run_error({3}).find("the model takes f32[s0, 4]"), std::string::npos);
  std::remove(path.c_str());
}

TEST(ModelFile, SymbolsAreCheckedWhenSavedLoadedAndRun) {
  const std::string path = temp_path("symbols.zenith");
  // Two inputs sharing a symbol: the second must agree with what the first bound.
  const Graph two = parse_graph(R"(graph(%x: f32[s0, 4], %y: f32[s0, 4]) {
  %z: f32[s0, 4] = add(%x, %y)
  return (%z)
}
)");
  save_model(path, two, {}, {});
  {
    const Model m(path);
    EXPECT_EQ(m.symbols()[0].max, -1);  // not listed: any size
    std::vector<float> a(12, 1.0f), b(12, 2.0f);
    auto out = m.run({{a.data(), DType::f32, {3, 4}}, {b.data(), DType::f32, {3, 4}}});
    EXPECT_EQ(static_cast<const float*>(out[0].data)[11], 3.0f);
    try {
      m.run({{a.data(), DType::f32, {3, 4}}, {b.data(), DType::f32, {2, 4}}});
      ADD_FAILURE() << "ran";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("its dim 0 is s0, which x dim 0 made 3"), std::string::npos) << e.what();
    }
  }
  auto save_error = [&](const Graph& g, const std::string& symbols) -> std::string {
    try {
      save_model(path, g, {}, {{"zenith.symbols", symbols}});
    } catch (const Error& e) {
      return e.what();
    }
    return "saved";
  };
  EXPECT_NE(save_error(two, "{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(save_error(two, "[1]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(save_error(two, R"({"s7": {}})").find("names s7, which is no symbol of the graph"), std::string::npos);
  EXPECT_NE(save_error(two, R"({"s0": {"min": 5, "max": 2}})").find("max 2 below min 5"), std::string::npos);
  EXPECT_NE(save_error(two, R"({"s0": {"min": -1}})").find("whole number >= 0"), std::string::npos);
  EXPECT_NE(save_error(two, R"({"s0": {"max": "9"}})").find("whole number >= 0"), std::string::npos);
  EXPECT_NE(save_error(parse_graph("graph(%x: f32[(2*s0), 4]) {\n  %y: f32[(2*s0), 4] = relu(%x)\n  return (%y)\n}\n"),
                       "{}")
                .find("symbol s0 is no whole dim of any model input"),
            std::string::npos);
  // The loader checks a file's ranges as the writer does.
  write_safetensors(path, {}, {{"zenith.format", "1"}, {"zenith.inputs", "x,y"}, {"zenith.graph", print_graph(two)},
                               {"zenith.symbols", R"({"s0": {"min": 4, "max": 3}})"}});
  try {
    Model m(path);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max 3 below min 4"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

// A graph may size its values by any expression of the inputs' sizes: one past 2^48 bytes
// is an OutOfMemory (Python's MemoryError) when the sizes are known, before anything is
// allocated for them.
TEST(ModelFile, SizesFromSymbolsAreBoundedAtRunTime) {
  const std::string path = temp_path("cube.zenith");
  const Graph cube = parse_graph(R"(graph(%x: f32[s0]) {
  %a: f32[s0, 1, 1] = reshape(%x) {shape=[s0, 1, 1]}
  %b: f32[1, s0, 1] = reshape(%x) {shape=[1, s0, 1]}
  %c: f32[1, 1, s0] = reshape(%x) {shape=[1, 1, s0]}
  %ab: f32[s0, s0, 1] = mul(%a, %b)
  %abc: f32[s0, s0, s0] = mul(%ab, %c)
  return (%abc)
}
)");
  save_model(path, cube, {}, {});
  const Model m(path);
  std::vector<float> x{1.0f, 2.0f, 3.0f};
  auto out = m.run({{x.data(), DType::f32, {3}}});
  ASSERT_EQ(out[0].shape, (std::vector<int64_t>{3, 3, 3}));
  EXPECT_EQ(static_cast<const float*>(out[0].data)[26], 27.0f);
  EXPECT_EQ(static_cast<const float*>(out[0].data)[5], 1.0f * 2.0f * 3.0f);  // [0][1][2]
  std::vector<float> wide(65537, 1.0f);  // 65537^3 floats: past 2^48 bytes
  try {
    m.run({{wide.data(), DType::f32, {65537}}});
    ADD_FAILURE() << "ran";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("value %abc: past 2^48 bytes with these input sizes"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(m.run({{x.data(), DType::f32, {3}}})[0].shape, (std::vector<int64_t>{3, 3, 3}));  // (and runs after)
  std::remove(path.c_str());
}

// Mutated files (a fixed seed, so a failure reproduces): every load either succeeds or
// throws zenith::Error (or OutOfMemory, a std::bad_alloc), and a file that loads runs on
// inputs of its declared shapes (a symbolic dim sized 1..4) or refuses them the same way.
// Under ASan (make test-sanitize) this is the memory-safety net for the file reader, the
// IR text parser and the loader's checks. Two kinds: raw byte flips and truncations of
// the whole file (the header's JSON, offsets, sizes), and edits of the graph's text inside
// a well-formed file (sizes, names, attributes, constants).
TEST(ModelFile, MutatedFilesLoadOrFailCleanly) {
  Case k(/*symbolic=*/true);
  const std::string good = temp_path("fuzz_good.zenith"), bad = temp_path("fuzz_bad.zenith");
  save_model(good, k.g, k.bound(), {{"zenith.symbols", R"({"s0": {"min": 1, "max": 8}})"}});
  const std::string bytes = read_all(good);
  const SafeTensorsFile f = read_safetensors(good);
  const std::string text = f.metadata.at("zenith.graph");
  std::mt19937 rng(20261207);
  auto pick = [&](size_t n) { return size_t(rng() % std::max<size_t>(n, 1)); };
  int loaded = 0, refused = 0;
  auto attempt = [&](const std::string& what) {
    try {
      Model m(bad);
      ++loaded;
      std::vector<std::vector<float>> data;
      std::vector<InTensor> ins;
      for (const auto& in : m.inputs()) {
        std::vector<int64_t> shape = in.shape;
        int64_t n = 1;
        for (auto& d : shape) n *= (d = d < 0 ? int64_t(1 + pick(4)) : d);
        if (n > (int64_t(1) << 20)) return;  // (a size edited large: not worth the memory here)
        data.emplace_back(size_t(n) * 2, 0.5f);  // enough bytes for any dtype up to 8 bytes
        ins.push_back({data.back().data(), in.dtype, shape});
      }
      m.run(ins);
    } catch (const Error&) {
      ++refused;
    } catch (const std::bad_alloc&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": threw a " << typeid(e).name() << ", not a zenith::Error: " << e.what();
    }
  };
  const char* tokens[] = {"0", "1", "-1", "9", "99999999999", "s0", "s1", "(", ")", "[", "]", ",", "%", "=", " ",
                          "\n", "x", "f32", "i64", "u8", "*", "//", "Max(", "@const/0", "data=", "opaque", "{", "}"};
  for (int iter = 0; iter < 400; ++iter) {
    if (iter % 2 == 0) {  // the file's bytes
      std::string b = bytes;
      if (iter % 10 == 0) {
        b.resize(pick(b.size()));
      } else {
        const size_t head = std::min(b.size(), size_t(8) + 600);  // mostly the length and the header's JSON
        for (size_t e = 0, edits = 1 + pick(4); e < edits; ++e)
          b[pick(iter % 4 == 0 ? b.size() : head)] = char(rng());
      }
      write_all(bad, b);
      attempt("byte mutation " + std::to_string(iter));
    } else {  // the graph's text, in a well-formed file
      std::string t = text;
      for (size_t e = 0, edits = 1 + pick(3); e < edits; ++e) {
        const size_t at = pick(t.size()), len = pick(4);
        t.replace(at, std::min(len, t.size() - at), tokens[pick(sizeof tokens / sizeof *tokens)]);
      }
      write_safetensors(bad,
                        {{"input/w", DType::f32, {4, 160}, k.w.data()}, {"const/0", DType::f32, {160}, k.c.data()}},
                        {{"zenith.format", "1"}, {"zenith.inputs", "x"}, {"zenith.graph", t},
                         {"zenith.symbols", R"({"s0": {"min": 1, "max": 8}})"}});
      attempt("text mutation " + std::to_string(iter) + ":\n" + t);
    }
  }
  std::printf("400 mutated files: %d loaded (and ran or refused their inputs), %d refused\n", loaded, refused);
  EXPECT_GT(refused, 100);  // the mutations do reach the checks
  EXPECT_GT(loaded, 0);     // and some still load (an edit of a name, a space) and run
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

// The runtime plans a value by its stated type: a file whose stated size is not what
// its op computes (a static size over a symbolic input) is refused at load, and an
// Executable given such a graph directly refuses the call, before any kernel runs.
TEST(ModelFile, StatedSizesMustBeWhatTheOpsCompute) {
  const std::string path = temp_path("stated.zenith");
  const std::string text = "graph(%x: f32[s0, 4]) {\n  %y: f32[65536, 4] = neg(%x)\n  return (%y)\n}\n";
  write_safetensors(path, {}, {{"zenith.format", "1"}, {"zenith.inputs", "x"}, {"zenith.graph", text}});
  EXPECT_NE(load_error(path).find("output %y has a type that disagrees with inference"), std::string::npos);
  Executable exe(parse_graph(text));  // (verify's default: static dims only)
  std::vector<float> x(12, 1.0f);
  try {
    exe.run({{x.data(), DType::f32, {3, 4}}}, {});
    ADD_FAILURE() << "ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("%y is stated as [65536, 4] but is [3, 4]"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}
