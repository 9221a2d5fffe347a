// The Zenith IR: a graph of nodes in topological order over typed values.
// Values are produced once (by a node, or as a graph input) and carry a dtype and a
// shape whose dims may be symbolic. Every value is dense and row-major (contiguous);
// ops that PyTorch expresses as strided views (permute, expand, slice) are explicit
// nodes that produce contiguous results, and reshape aliases its input's memory.
// Constants are `constant` nodes whose data may be borrowed (weights owned by the
// caller, no copy) or owned (results of constant folding).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zenith/dtype.h"
#include "zenith/symbolic.h"

namespace zenith {

enum class Op : uint16_t {
#define OP(name, nin, nout, traits, attrs) name,
#include "zenith/ops.def"
#undef OP
  kCount
};
inline constexpr int kNumOps = int(Op::kCount);

enum OpTraits : uint32_t {  // see ops.def
  kElementwise = 1,
  kCommutative = 2,
  kAlias = 4,
  kSource = 8,
  kDtypeGeneric = 16,
  kFusable = 32,
  kTakesActivation = 64,
};

struct TensorType;
struct Node;
struct Graph;

// Shape and dtype inference: reads the node's inputs' types and attributes,
// returns the output types, or throws zenith::Error naming the op and the problem.
using InferFn = std::vector<TensorType> (*)(const Graph&, const Node&);

struct OpInfo {
  const char* name;
  int num_inputs;  // -1: variadic
  int num_outputs;  // -1: one or more (the op's inference says how many)
  uint32_t traits;
  InferFn infer;
};

const OpInfo& op_info(Op op);
inline bool has_trait(Op op, uint32_t t) { return (op_info(op).traits & t) != 0; }
bool parse_op(const std::string& name, Op* out);

using Shape = std::vector<SymInt>;

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;
  int rank() const { return int(shape.size()); }
  bool is_static() const;
  int64_t static_numel() const;  // requires is_static()
  std::vector<int64_t> static_dims() const;  // requires is_static()
};

// The bytes of a type whose dims are constants >= 0 and whose size is at most `limit`, in
// *bytes; false if it is not (a type read from a file, checked before anything multiplies
// its dims unchecked).
bool bounded_nbytes(const TensorType& t, uint64_t limit, uint64_t* bytes);
// The same for concrete dims (a runtime input's, a plan's).
bool bounded_nbytes(DType dtype, const std::vector<int64_t>& dims, uint64_t limit, uint64_t* bytes);
// "[3, 4]": dims as error messages print them.
std::string dims_str(const std::vector<int64_t>& dims);

// A node attribute: a list of symbolic ints, a float list, or a string.
struct Attr {
  enum Kind : uint8_t { kInts, kFloats, kStr } kind = kInts;
  std::vector<SymInt> ints;
  std::vector<double> floats;
  std::string str;
};

struct ConstData {
  const void* data = nullptr;
  size_t nbytes = 0;
  std::shared_ptr<void> owner;  // null when the memory is borrowed from the caller
};

struct Node {
  Op op;
  std::vector<int> inputs;   // value ids
  std::vector<int> outputs;  // value ids
  std::map<std::string, Attr> attrs;
  std::shared_ptr<ConstData> constant;  // op == constant only

  bool has(const std::string& k) const { return attrs.count(k) != 0; }
  int64_t i(const std::string& k) const;                    // a constant int attribute
  int64_t i(const std::string& k, int64_t dflt) const;
  const std::vector<SymInt>& ints(const std::string& k) const;
  std::vector<int64_t> const_ints(const std::string& k) const;  // all entries constant
  double f(const std::string& k) const;
  double f(const std::string& k, double dflt) const;
  void set_ints(const std::string& k, std::vector<SymInt> v);
  void set_int(const std::string& k, int64_t v) { set_ints(k, {SymInt(v)}); }
  void set_floats(const std::string& k, std::vector<double> v);
  void set_float(const std::string& k, double v) { set_floats(k, {v}); }
};

struct Value {
  std::string name;
  TensorType type;
  int producer = -1;  // index into Graph::nodes at build time; -1 for a graph input
};

struct Graph {
  SymbolTable symbols;
  std::vector<Value> values;
  std::vector<Node> nodes;   // topological order
  std::vector<int> inputs;   // value ids
  std::vector<int> outputs;  // value ids (may repeat, may name an input)

  int add_input(const std::string& name, TensorType t);
  // Appends a node; infers its output types; returns the output value ids.
  std::vector<int> add_node(Op op, std::vector<int> inputs, std::map<std::string, Attr> attrs = {});
  // A constant over `data` (borrowed if owner is null).
  int add_constant(TensorType t, const void* data, size_t nbytes, std::shared_ptr<void> owner);
  // A 0-d or any-shape constant that the graph owns, copied from `data`.
  int add_owned_constant(TensorType t, const void* data, size_t nbytes);

  const TensorType& type(int v) const { return values[size_t(v)].type; }
  // Recomputes Value::producer after passes reorder or drop nodes.
  void reindex();
  // Number of uses of each value (graph outputs count as uses).
  std::vector<int> use_counts() const;
  std::string value_name(int v) const;
};

// Checks structure (ids, order, arity, single definition) and that every node's
// recorded output types agree with inference: their static dims, or with `exact` every
// dim, a symbolic one the same expression (a graph read from a file, whose stated types
// the runtime plans by). Throws zenith::Error describing the first problem found.
void verify(const Graph& g, bool exact = false);

// The text form. print() output parses back with parse_graph() into an equal graph,
// except that a constant over 512 bytes prints as an opaque blob (which parses as
// zeros), unless `external` is given: then it prints as data=@const/<i> and its data is
// appended to `external` (a model file stores those bytes beside the text), and
// parse_graph asks `resolve` for them (without one, @key is an error).
struct ExternalConstant {
  std::string key;
  TensorType type;
  std::shared_ptr<ConstData> data;
};
std::string print_graph(const Graph& g, std::vector<ExternalConstant>* external = nullptr);
// The bytes of constant `key` of type t (null or a wrong size: a parse error). With a
// resolver the text is taken to come from a file (a model file): an opaque constant is
// an error. (Sizes may be symbolic: parse_symint bounds what a file's text can nest.)
using ConstantResolver = std::function<std::shared_ptr<ConstData>(const std::string& key, const TensorType& t)>;
Graph parse_graph(const std::string& text, const ConstantResolver& resolve = {});

// Numpy-style broadcasting of two shapes (symbolic dims: equal exprs match,
// a constant 1 stretches).
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace zenith
