// Attribute declarations (ops.def) as data: specs for the verifier and the text
// form, and one decoder per op into its typed struct.
#include "zenith/attrs.h"

#include "zenith/error.h"

namespace zenith {

namespace {
const char* const kActivationNames[] = {"none", "relu", "gelu", "gelu_tanh", "silu",
                                        "tanh", "relu6", "hardswish", "hardsigmoid"};
const char* const kGeluNames[] = {"none", "tanh"};
const char* const kRoundingNames[] = {"true", "floor", "trunc"};
const char* const kLayoutNames[] = {"bhle", "blhe"};
const char* const kResizeNames[] = {"nearest", "bilinear", "nearest_exact"};
template <size_t N> EnumNames names_of(const char* const (&a)[N]) { return {a, int(N)}; }
const QFormatInfo kQFormats[] = {
#define QFORMAT(name, elems, bytes) {#name, elems, bytes},
#include "zenith/quant_formats.def"
#undef QFORMAT
};
const char* const kQFormatNames[] = {
#define QFORMAT(name, elems, bytes) #name,
#include "zenith/quant_formats.def"
#undef QFORMAT
};
}  // namespace

const QFormatInfo& qformat_info(QFormat f) { return kQFormats[size_t(f)]; }

bool parse_qformat(const std::string& s, QFormat* out) {
  for (size_t i = 0; i < sizeof(kQFormats) / sizeof(kQFormats[0]); ++i)
    if (s == kQFormats[i].name) {
      *out = QFormat(i);
      return true;
    }
  return false;
}

int64_t qformat_row_elems(QFormat f, int64_t row_bytes) {
  const QFormatInfo& q = qformat_info(f);
  if (row_bytes < 0) return -1;
  if (q.block_elems == 0) return row_bytes >= q.block_bytes ? row_bytes - q.block_bytes : -1;
  return row_bytes % q.block_bytes == 0 ? row_bytes / q.block_bytes * q.block_elems : -1;
}

int64_t qformat_row_bytes(QFormat f, int64_t K) {
  const QFormatInfo& q = qformat_info(f);
  if (K < 0) return -1;
  if (q.block_elems == 0) return K + q.block_bytes;
  return K % q.block_elems == 0 ? K / q.block_elems * q.block_bytes : -1;
}

template <> EnumNames enum_names<Activation>() { return names_of(kActivationNames); }
template <> EnumNames enum_names<GeluApprox>() { return names_of(kGeluNames); }
template <> EnumNames enum_names<Rounding>() { return names_of(kRoundingNames); }
template <> EnumNames enum_names<SdpaLayout>() { return names_of(kLayoutNames); }
template <> EnumNames enum_names<Resize>() { return names_of(kResizeNames); }
template <> EnumNames enum_names<QFormat>() { return names_of(kQFormatNames); }

namespace {
#define A_INT(n) {#n, AttrKind::kInt, true, {}},
#define A_INT_DEF(n, d) {#n, AttrKind::kInt, false, {}},
#define A_INT_OPT(n) {#n, AttrKind::kInt, false, {}},
#define A_BOOL(n, d) {#n, AttrKind::kBool, false, {}},
#define A_ENUM(n, E, d) {#n, AttrKind::kEnum, false, enum_names<E>()},
#define A_ENUM_REQ(n, E) {#n, AttrKind::kEnum, true, enum_names<E>()},
#define A_DTYPE(n) {#n, AttrKind::kDType, true, {}},
#define A_INTS(n) {#n, AttrKind::kInts, true, {}},
#define A_INTS_OPT(n) {#n, AttrKind::kInts, false, {}},
#define A_PAIR(n) {#n, AttrKind::kPair, true, {}},
#define A_PAIR_DEF(n, d) {#n, AttrKind::kPair, false, {}},
#define A_FLOAT(n) {#n, AttrKind::kFloat, true, {}},
#define A_FLOAT_DEF(n, d) {#n, AttrKind::kFloat, false, {}},
#define A_FLOAT_OPT(n) {#n, AttrKind::kFloat, false, {}},
const std::vector<AttrSpec>* const kSpecs[] = {
#define OP(name, nin, nout, traits, fields) new std::vector<AttrSpec>{fields},
#include "zenith/ops.def"
#undef OP
};
#include "zenith/attr_macros_end.inc"
static_assert(sizeof(kSpecs) / sizeof(kSpecs[0]) == size_t(Op::kCount), "attribute table and op table disagree");

const char* kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::kInt: return "an int";
    case AttrKind::kBool: return "a bool (0 or 1)";
    case AttrKind::kEnum: return "an enum name";
    case AttrKind::kDType: return "a dtype";
    case AttrKind::kInts: return "a list of ints";
    case AttrKind::kPair: return "one or two ints";
    case AttrKind::kFloat: return "a float";
  }
  return "?";
}
}  // namespace

const std::vector<AttrSpec>& attr_specs(Op op) { return *kSpecs[size_t(op)]; }

const AttrSpec* find_attr_spec(Op op, const std::string& name) {
  for (const auto& s : attr_specs(op))
    if (name == s.name) return &s;
  return nullptr;
}

void normalize_attrs(Op op, std::map<std::string, Attr>& attrs) {
  for (auto& [k, a] : attrs) {
    const AttrSpec* s = find_attr_spec(op, k);
    if (!s || s->kind != AttrKind::kFloat || a.kind != Attr::kInts) continue;
    bool all_const = true;
    for (const auto& v : a.ints) all_const = all_const && v.is_const();
    if (!all_const) continue;
    a.kind = Attr::kFloats;
    for (const auto& v : a.ints) a.floats.push_back(double(v.value()));
    a.ints.clear();
  }
}

void check_attrs(const Node& n) {
  const char* op = op_info(n.op).name;
  const auto& specs = attr_specs(n.op);
  for (const auto& [k, a] : n.attrs) {
    const AttrSpec* s = find_attr_spec(n.op, k);
    if (!s) {
      std::string known;
      for (const auto& x : specs) known += (known.empty() ? "" : ", ") + std::string(x.name);
      fail(op, ": unknown attribute '", k, "' (", op, " takes ", known.empty() ? "no attributes" : known, ")");
    }
    auto bad = [&](const std::string& why) { fail(op, ": attribute '", k, "' must be ", kind_name(s->kind), why); };
    if (s->kind == AttrKind::kFloat) {
      if (a.kind != Attr::kFloats || a.floats.size() != 1) bad("");
      continue;
    }
    if (a.kind != Attr::kInts) bad("");
    if (s->kind == AttrKind::kInts) continue;
    if (s->kind == AttrKind::kPair) {
      if (a.ints.size() != 1 && a.ints.size() != 2) bad(", got " + std::to_string(a.ints.size()) + " values");
      for (const auto& v : a.ints)
        if (!v.is_const()) bad(", not symbolic");
      continue;
    }
    if (a.ints.size() != 1) bad(", got " + std::to_string(a.ints.size()) + " values");
    if (!a.ints[0].is_const()) {
      if (s->kind == AttrKind::kInt) continue;  // a symbolic int (resolved per plan)
      bad(", not symbolic");
    }
    int64_t v = a.ints[0].value();
    if (s->kind == AttrKind::kBool && v != 0 && v != 1) bad(", got " + std::to_string(v));
    if (s->kind == AttrKind::kEnum && (v < 0 || v >= s->enums.count)) bad(", got code " + std::to_string(v));
    if (s->kind == AttrKind::kDType && (v < 0 || v >= kNumDTypes)) bad(", got code " + std::to_string(v));
  }
  for (const auto& s : specs)
    ZENITH_CHECK(!s.required || n.attrs.count(s.name), op, ": missing attribute '", s.name, "'");
}

namespace {
std::array<int64_t, 2> pair_of(const Node& n, const char* k) {
  auto v = n.const_ints(k);
  return v.size() == 1 ? std::array<int64_t, 2>{v[0], v[0]} : std::array<int64_t, 2>{v[0], v[1]};
}
#define A_INT(n) a->n = node.i(#n);
#define A_INT_DEF(n, d) a->n = node.i(#n, d);
#define A_INT_OPT(n) \
  if (node.has(#n)) a->n = node.i(#n);
#define A_BOOL(n, d) a->n = node.i(#n, d) != 0;
#define A_ENUM(n, E, d) a->n = E(node.i(#n, int64_t(E::d)));
#define A_ENUM_REQ(n, E) a->n = E(node.i(#n));
#define A_DTYPE(n) a->n = DType(node.i(#n));
#define A_INTS(n) a->n = node.const_ints(#n);
#define A_INTS_OPT(n) \
  if (node.has(#n)) a->n = node.const_ints(#n);
#define A_PAIR(n) a->n = pair_of(node, #n);
#define A_PAIR_DEF(n, d) \
  if (node.has(#n)) a->n = pair_of(node, #n);
#define A_FLOAT(n) a->n = node.f(#n);
#define A_FLOAT_DEF(n, d) a->n = node.f(#n, d);
#define A_FLOAT_OPT(n) \
  if (node.has(#n)) a->n = node.f(#n);
#define OP(name, nin, nout, traits, fields)                 \
  AttrsPtr decode_##name([[maybe_unused]] const Node& node) { \
    auto a = std::make_shared<attrs::name>();                \
    fields return a;                                         \
  }
#include "zenith/ops.def"
#undef OP

#include "zenith/attr_macros_end.inc"

using DecodeFn = AttrsPtr (*)(const Node&);
const DecodeFn kDecoders[] = {
#define OP(name, nin, nout, traits, fields) decode_##name,
#include "zenith/ops.def"
#undef OP
};
}  // namespace

AttrsPtr decode_attrs(const Node& n) { return kDecoders[size_t(n.op)](n); }

}  // namespace zenith
