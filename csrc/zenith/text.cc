// The IR's text form:
//   graph(%x: f32[s0, 4], %w: f32[4, 4]) {
//     %y: f32[s0, 4] = matmul(%x, %w)
//     %c: f32[2] = constant() {dtype=f32, shape=[2]} data=0000803f00000040
//     return (%y)
//   }
// Int attributes print as [a, b] (entries may be symbolic), float attributes as f[a, b],
// enum and dtype attributes (attrs.h) by name: {activation=relu6, dtype=f16}.
#include <cctype>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>

#include "zenith/attrs.h"
#include "zenith/error.h"
#include "zenith/ir.h"

namespace zenith {
namespace {

constexpr size_t kMaxInlineBytes = 64 * 8;

std::string type_str(const Graph& g, const TensorType& t) {
  std::string s = dtype_name(t.dtype);
  s += "[";
  for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? ", " : "") + t.shape[i].str(g.symbols);
  return s + "]";
}

std::string float_str(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::string print_graph(const Graph& g, std::vector<ExternalConstant>* external) {
  std::ostringstream os;
  auto val = [&](int v) { return "%" + g.value_name(v); };
  os << "graph(";
  for (size_t i = 0; i < g.inputs.size(); ++i)
    os << (i ? ", " : "") << val(g.inputs[i]) << ": " << type_str(g, g.type(g.inputs[i]));
  os << ") {\n";
  for (const Node& n : g.nodes) {
    os << "  ";
    for (size_t k = 0; k < n.outputs.size(); ++k)
      os << (k ? ", " : "") << val(n.outputs[k]) << ": " << type_str(g, g.type(n.outputs[k]));
    os << " = " << op_info(n.op).name << "(";
    for (size_t k = 0; k < n.inputs.size(); ++k) os << (k ? ", " : "") << val(n.inputs[k]);
    os << ")";
    if (!n.attrs.empty()) {
      os << " {";
      bool first = true;
      for (const auto& [k, a] : n.attrs) {
        os << (first ? "" : ", ") << k << "=";
        first = false;
        const AttrSpec* spec = find_attr_spec(n.op, k);
        if (spec && a.kind == Attr::kInts && a.ints.size() == 1 && a.ints[0].is_const() &&
            (spec->kind == AttrKind::kEnum || spec->kind == AttrKind::kDType)) {  // by name
          int64_t v = a.ints[0].value();
          if (spec->kind == AttrKind::kDType && v >= 0 && v < kNumDTypes) os << dtype_name(DType(v));
          else if (spec->kind == AttrKind::kEnum && v >= 0 && v < spec->enums.count) os << spec->enums.names[v];
          else os << "[" << v << "]";  // out of range: verify() reports it
        } else if (a.kind == Attr::kInts) {
          os << "[";
          for (size_t j = 0; j < a.ints.size(); ++j) os << (j ? ", " : "") << a.ints[j].str(g.symbols);
          os << "]";
        } else if (a.kind == Attr::kFloats) {
          os << "f[";
          for (size_t j = 0; j < a.floats.size(); ++j) os << (j ? ", " : "") << float_str(a.floats[j]);
          os << "]";
        } else {
          os << '"' << a.str << '"';
        }
      }
      os << "}";
    }
    if (n.constant) {
      if (n.constant->nbytes <= kMaxInlineBytes) {
        os << " data=";
        const auto* p = static_cast<const unsigned char*>(n.constant->data);
        char hex[3];
        for (size_t b = 0; b < n.constant->nbytes; ++b) {
          std::snprintf(hex, sizeof hex, "%02x", p[b]);
          os << hex;
        }
        if (n.constant->nbytes == 0) os << "-";
      } else if (external) {
        std::string key = "const/" + std::to_string(external->size());
        os << " data=@" << key;
        external->push_back({std::move(key), g.type(n.outputs[0]), n.constant});
      } else {
        os << " data=opaque";
      }
    }
    os << "\n";
  }
  os << "  return (";
  for (size_t i = 0; i < g.outputs.size(); ++i) os << (i ? ", " : "") << val(g.outputs[i]);
  os << ")\n}\n";
  return os.str();
}

namespace {

struct TextParser {
  const std::string& s;
  const ConstantResolver* resolve = nullptr;
  size_t i = 0;
  Graph g;
  std::map<std::string, int> ids;

  // With a resolver the text comes from a file (a model file): see parse_graph.
  bool from_file() const { return resolve && *resolve; }

  [[noreturn]] void error(const std::string& what) {
    size_t line = 1;
    for (size_t k = 0; k < i && k < s.size(); ++k) line += s[k] == '\n';
    fail("IR text, line ", line, ": ", what);
  }
  void ws() {
    while (i < s.size() && std::isspace((unsigned char)s[i])) ++i;
  }
  bool eat(const char* t) {
    ws();
    size_t n = std::strlen(t);
    if (s.compare(i, n, t) == 0) {
      i += n;
      return true;
    }
    return false;
  }
  void expect(const char* t) {
    if (!eat(t)) error(std::string("expected '") + t + "'");
  }
  std::string ident() {
    ws();
    size_t j = i;
    while (j < s.size() && (std::isalnum((unsigned char)s[j]) || s[j] == '_' || s[j] == '.')) ++j;
    if (j == i) error("expected a name");
    std::string r = s.substr(i, j - i);
    i = j;
    return r;
  }
  // Text up to the next ',' or ']' at bracket depth 0.
  std::string list_item() {
    ws();
    int depth = 0;
    size_t j = i;
    while (j < s.size()) {
      char c = s[j];
      if (c == '(' || c == '[') ++depth;
      else if ((c == ')' || c == ']') && depth > 0) --depth;
      else if ((c == ',' || c == ']') && depth == 0) break;
      ++j;
    }
    std::string r = s.substr(i, j - i);
    i = j;
    while (!r.empty() && std::isspace((unsigned char)r.back())) r.pop_back();
    return r;
  }
  std::vector<SymInt> symint_list() {
    expect("[");
    std::vector<SymInt> r;
    if (eat("]")) return r;
    do {
      const std::string item = list_item();
      r.push_back(parse_symint(item, &g.symbols));  // (bounded: the text may come from a file)
    } while (eat(","));
    expect("]");
    return r;
  }
  TensorType type() {
    TensorType t;
    std::string d = ident();
    if (!parse_dtype(d, &t.dtype)) error("unknown dtype '" + d + "'");
    t.shape = symint_list();
    return t;
  }
  int use() {
    expect("%");
    std::string n = ident();
    auto it = ids.find(n);
    if (it == ids.end()) error("unknown value %" + n);
    return it->second;
  }

  void parse() {
    expect("graph");
    expect("(");
    if (!eat(")")) {
      do {
        expect("%");
        std::string n = ident();
        expect(":");
        int v = g.add_input(n, type());
        ids[n] = v;
      } while (eat(","));
      expect(")");
    }
    expect("{");
    while (!eat("return")) statement();
    expect("(");
    if (!eat(")")) {
      do g.outputs.push_back(use());
      while (eat(","));
      expect(")");
    }
    expect("}");
  }

  void statement() {
    std::vector<std::pair<std::string, TensorType>> outs;
    do {
      expect("%");
      std::string n = ident();
      expect(":");
      outs.push_back({n, type()});
    } while (eat(","));
    expect("=");
    std::string opname = ident();
    Op op;
    if (!parse_op(opname, &op)) error("unknown op '" + opname + "'");
    expect("(");
    std::vector<int> ins;
    if (!eat(")")) {
      do ins.push_back(use());
      while (eat(","));
      expect(")");
    }
    std::map<std::string, Attr> attrs;
    if (eat("{")) {
      do {
        std::string k = ident();
        expect("=");
        Attr a;
        ws();
        if (eat("f[")) {
          a.kind = Attr::kFloats;
          if (!eat("]")) {
            do a.floats.push_back(std::strtod(list_item().c_str(), nullptr));
            while (eat(","));
            expect("]");
          }
        } else if (eat("\"")) {
          a.kind = Attr::kStr;
          size_t j = s.find('"', i);
          if (j == std::string::npos) error("unterminated string");
          a.str = s.substr(i, j - i);
          i = j + 1;
        } else if (i < s.size() && std::isalpha((unsigned char)s[i])) {  // an enum or dtype by name
          std::string name = ident();
          const AttrSpec* spec = find_attr_spec(op, k);
          int64_t v = -1;
          if (spec && spec->kind == AttrKind::kDType) {
            DType d;
            if (parse_dtype(name, &d)) v = int64_t(d);
          } else if (spec && spec->kind == AttrKind::kEnum) {
            for (int e = 0; e < spec->enums.count; ++e)
              if (name == spec->enums.names[e]) v = e;
          }
          if (v < 0) error("attribute '" + k + "' of " + opname + " has no value named '" + name + "'");
          a.ints = {SymInt(v)};
        } else {
          a.ints = symint_list();
        }
        attrs[k] = std::move(a);
      } while (eat(","));
      expect("}");
    }
    std::vector<int> vs;
    if (op == Op::constant) {
      expect("data=");
      Node tmp;
      tmp.attrs = attrs;
      TensorType t;
      if (!tmp.has("dtype") || !tmp.has("shape")) error("a constant needs dtype and shape");
      const int64_t code = tmp.i("dtype");
      if (code < 0 || code >= kNumDTypes) error("a constant's dtype code " + std::to_string(code) + " names no dtype");
      t.dtype = DType(code);
      t.shape = tmp.ints("shape");
      if (!t.is_static()) error("a constant's shape must be static");
      uint64_t nbytes = 0;  // (text may come from a file: no overflow, no negative sizes)
      if (!bounded_nbytes(t, uint64_t(1) << 48, &nbytes)) error("a constant's shape is negative or too large");
      std::vector<unsigned char> bytes;
      if (eat("@")) {  // bytes kept outside the text (print_graph's `external`)
        size_t j = i;
        while (j < s.size() && !std::isspace((unsigned char)s[j])) ++j;
        const std::string key = s.substr(i, j - i);
        i = j;
        if (!from_file()) error("constant data @" + key + " is kept outside the text, and no store was given");
        std::shared_ptr<ConstData> cd = (*resolve)(key, t);
        if (!cd || cd->nbytes != nbytes) error("constant data @" + key + " does not hold the constant's bytes");
        vs = {g.add_constant(t, cd->data, cd->nbytes, cd->owner)};
      } else if (eat("opaque")) {
        // Large constants do not round-trip; they parse as zeros, except where the bytes
        // are kept outside the text (a model file), which must not load zeros silently.
        if (from_file()) error("a constant printed opaque has no data (a model file keeps it as @const/<i>)");
        bytes.assign(nbytes, 0);
      } else if (!eat("-")) {
        ws();
        size_t j = i;
        while (j < s.size() && std::isxdigit((unsigned char)s[j])) ++j;
        if (j - i != 2 * nbytes)
          error("constant data holds " + std::to_string((j - i) / 2) + " bytes, its type needs " +
                std::to_string(nbytes));
        bytes.resize(nbytes);
        auto hex = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
        for (size_t b = 0; b < nbytes; ++b, i += 2) bytes[b] = (unsigned char)(hex(s[i]) << 4 | hex(s[i + 1]));
      } else if (nbytes) {
        error("constant data '-' (no bytes) for a constant of " + std::to_string(nbytes) + " bytes");
      }
      if (vs.empty()) vs = {g.add_owned_constant(t, bytes.data(), size_t(nbytes))};
    } else {
      vs = g.add_node(op, ins, attrs);
    }
    if (vs.size() != outs.size()) error("output count differs from the op's");
    for (size_t k = 0; k < vs.size(); ++k) {
      if (ids.count(outs[k].first)) error("value %" + outs[k].first + " defined twice");
      g.values[size_t(vs[k])].name = outs[k].first;
      g.values[size_t(vs[k])].type = outs[k].second;  // keep the stated type; verify() checks it
      ids[outs[k].first] = vs[k];
    }
  }
};

}  // namespace

Graph parse_graph(const std::string& text, const ConstantResolver& resolve) {
  TextParser p{text, &resolve, 0, {}, {}};
  p.parse();
  return std::move(p.g);
}

}  // namespace zenith
