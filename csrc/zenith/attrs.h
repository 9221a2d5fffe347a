// Typed node attributes, generated from the attribute column of ops.def.
//
// In the graph a node's attributes are untyped (Attr: ints that may be symbolic, or
// floats), which is what passes, the text form and the Python importer build. Every
// attribute an op takes is declared in its ops.def row with a kind and a default;
// check_attrs() (run by Graph::add_node and verify()) rejects undeclared or ill-typed
// ones, and decode_attrs() turns a node whose symbols are resolved into the op's struct
// attrs::<op>, once per plan, so kernels read `a.groups`, never a string.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zenith/ir.h"

namespace zenith {

// Activations a producer may apply to its output in place (a fused epilogue: addmm's
// and conv2d's `activation`). Same math as the standalone ops.
enum class Activation : int64_t {
  kNone = 0,
  kRelu = 1,
  kGelu = 2,
  kGeluTanh = 3,
  kSilu = 4,
  kTanh = 5,
  kRelu6 = 6,  // clamp(x, 0, 6): MobileNet V2's ReLU6
  kHardswish = 7,
  kHardsigmoid = 8,
};
enum class GeluApprox : int64_t { kNone = 0, kTanh = 1 };           // gelu's `approximate`
enum class Rounding : int64_t { kTrue = 0, kFloor = 1, kTrunc = 2 };  // div's `rounding`
enum class Resize : int64_t { kNearest = 0, kBilinear = 1, kNearestExact = 2 };  // upsample2d's `mode`
enum class SdpaLayout : int64_t {                                     // sdpa's `layout`
  kBHLE = 0,  // q, k, v and the output are (batch, heads, length, head dim)
  kBLHE = 1,  // all are (batch, length, heads, head dim): read and written in place
};

// Quantized weight formats (quant_formats.def): qmatmul's and qembedding's `format`.
// The enumerators are the names the text form and the bindings use.
enum class QFormat : int64_t {
#define QFORMAT(name, elems, bytes) name,
#include "zenith/quant_formats.def"
#undef QFORMAT
};
struct QFormatInfo {
  const char* name;
  int64_t block_elems;  // 0: the whole row is one block (int8)
  int64_t block_bytes;  // for int8: the row's bytes beyond its K values (the scale)
};
const QFormatInfo& qformat_info(QFormat f);
// Returns false if `s` names no format.
bool parse_qformat(const std::string& s, QFormat* out);
// K of a row of `row_bytes` bytes, or -1 if that is not a whole number of blocks.
int64_t qformat_row_elems(QFormat f, int64_t row_bytes);
// The bytes of a row of K values, or -1 if K is not a whole number of blocks.
int64_t qformat_row_bytes(QFormat f, int64_t K);

// An enum's names in value order, as the text form prints them.
struct EnumNames {
  const char* const* names;
  int count;
};
template <class E> EnumNames enum_names();

enum class AttrKind : uint8_t { kInt, kBool, kEnum, kDType, kInts, kPair, kFloat };
struct AttrSpec {
  const char* name;
  AttrKind kind;
  bool required;
  EnumNames enums;  // kEnum only
};
// The attributes `op` declares (empty for none).
const std::vector<AttrSpec>& attr_specs(Op op);
const AttrSpec* find_attr_spec(Op op, const std::string& name);

// Checks n's attributes against its op's declaration: every one declared, of the
// declared kind (one constant int for int/bool/enum/dtype kinds, in range; one or two
// for a pair; one float for a float), and every required one present. Throws
// zenith::Error naming the op and the attribute.
void check_attrs(const Node& n);
// Int-valued attributes declared as floats become floats (the importer and the text
// form may write `value=0`).
void normalize_attrs(Op op, std::map<std::string, Attr>& attrs);

namespace attrs {
#define A_INT(n) int64_t n = 0;
#define A_INT_DEF(n, d) int64_t n = d;
#define A_INT_OPT(n) std::optional<int64_t> n;
#define A_BOOL(n, d) bool n = d;
#define A_ENUM(n, E, d) E n = E::d;
#define A_ENUM_REQ(n, E) E n{};
#define A_DTYPE(n) DType n = DType::f32;
#define A_INTS(n) std::vector<int64_t> n;
#define A_INTS_OPT(n) std::optional<std::vector<int64_t>> n;
#define A_PAIR(n) std::array<int64_t, 2> n{};
#define A_PAIR_DEF(n, d) std::array<int64_t, 2> n{d, d};
#define A_FLOAT(n) double n = 0;
#define A_FLOAT_DEF(n, d) double n = d;
#define A_FLOAT_OPT(n) std::optional<double> n;
#define OP(name, nin, nout, traits, fields) \
  struct name {                             \
    static constexpr Op op = Op::name;      \
    fields                                  \
  };
#include "zenith/ops.def"
#undef OP
#include "zenith/attr_macros_end.inc"
}  // namespace attrs

// A node's decoded attributes: an attrs::<op> struct, type-erased. Requires every
// symbolic int to be resolved (the runtime decodes plan nodes).
using AttrsPtr = std::shared_ptr<const void>;
AttrsPtr decode_attrs(const Node& n);

}  // namespace zenith
