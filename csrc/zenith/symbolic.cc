#include "zenith/symbolic.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>

#include "zenith/error.h"

namespace zenith {

int SymbolTable::intern(const std::string& name) {
  int i = find(name);
  if (i >= 0) return i;
  names.push_back(name);
  return int(names.size()) - 1;
}

int SymbolTable::find(const std::string& name) const {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return int(i);
  return -1;
}

namespace {

int64_t floordiv(int64_t a, int64_t b) {
  ZENITH_CHECK(b != 0, "symbolic expression divides by zero");
  ZENITH_CHECK(b != -1 || a != std::numeric_limits<int64_t>::lowest(), "symbolic expression overflows: ", a, " // -1");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// a op b, or an error if it overflows int64.
template <typename Op>
int64_t checked(int64_t a, int64_t b, Op op) {
  int64_t r;
  ZENITH_CHECK(!op(a, b, &r), "symbolic expression overflows int64");
  return r;
}
constexpr auto add = [](int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); };
constexpr auto sub = [](int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); };
constexpr auto mul = [](int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); };

int64_t eval_expr(const SymExpr& e, const std::vector<int64_t>& bind) {
  switch (e.kind) {
    case SymExpr::kConst: return e.value;
    case SymExpr::kSym:
      ZENITH_CHECK(size_t(e.value) < bind.size(), "symbol ", e.value, " is unbound");
      return bind[size_t(e.value)];
    case SymExpr::kAdd: return checked(eval_expr(*e.a, bind), eval_expr(*e.b, bind), add);
    case SymExpr::kSub: return checked(eval_expr(*e.a, bind), eval_expr(*e.b, bind), sub);
    case SymExpr::kMul: return checked(eval_expr(*e.a, bind), eval_expr(*e.b, bind), mul);
    case SymExpr::kFloorDiv: return floordiv(eval_expr(*e.a, bind), eval_expr(*e.b, bind));
    case SymExpr::kMod: {
      int64_t b = eval_expr(*e.b, bind);
      int64_t a = eval_expr(*e.a, bind);
      ZENITH_CHECK(b != 0, "symbolic expression divides by zero");
      if (b == -1) return 0;  // (a % -1 traps at the lowest a)
      const int64_t m = a % b;
      return m != 0 && ((m < 0) != (b < 0)) ? m + b : m;
    }
    case SymExpr::kMax: return std::max(eval_expr(*e.a, bind), eval_expr(*e.b, bind));
    case SymExpr::kMin: return std::min(eval_expr(*e.a, bind), eval_expr(*e.b, bind));
    case SymExpr::kNeg: return checked(0, eval_expr(*e.a, bind), sub);
  }
  return 0;
}

std::string expr_str(const SymExpr& e, const SymbolTable& t) {
  auto bin = [&](const char* op) { return "(" + expr_str(*e.a, t) + op + expr_str(*e.b, t) + ")"; };
  switch (e.kind) {
    case SymExpr::kConst: return std::to_string(e.value);
    case SymExpr::kSym:
      return size_t(e.value) < t.names.size() ? t.names[size_t(e.value)] : "?" + std::to_string(e.value);
    case SymExpr::kAdd: return bin(" + ");
    case SymExpr::kSub: return bin(" - ");
    case SymExpr::kMul: return bin("*");
    case SymExpr::kFloorDiv: return bin("//");
    case SymExpr::kMod: return bin("%");
    case SymExpr::kMax: return "Max(" + expr_str(*e.a, t) + ", " + expr_str(*e.b, t) + ")";
    case SymExpr::kMin: return "Min(" + expr_str(*e.a, t) + ", " + expr_str(*e.b, t) + ")";
    case SymExpr::kNeg: return "(-" + expr_str(*e.a, t) + ")";
  }
  return "?";
}

bool expr_same(const SymExpr& x, const SymExpr& y) {
  if (x.kind != y.kind || x.value != y.value) return false;
  if (bool(x.a) != bool(y.a) || bool(x.b) != bool(y.b)) return false;
  if (x.a && !expr_same(*x.a, *y.a)) return false;
  if (x.b && !expr_same(*x.b, *y.b)) return false;
  return true;
}

SymExprPtr make(SymExpr::Kind k, SymExprPtr a, SymExprPtr b = nullptr) {
  auto e = std::make_shared<SymExpr>();
  e->kind = k;
  e->a = std::move(a);
  e->b = std::move(b);
  return e;
}

// Recursive descent over: expr := term (('+'|'-') term)*; term := unary (('*'|'//'|'%'|'/') unary)*;
// unary := '-' unary | atom; atom := int | name | name '(' expr ',' expr ')' | '(' expr ')'.
// The text may come from a file (a model file's graph): nesting and the tree's size are
// bounded, so neither this parser nor the recursive walks over the tree (evaluation,
// printing, destruction) can exhaust the stack. PyTorch's expressions are far smaller.
constexpr int kMaxNesting = 64;
constexpr int kMaxNodes = 1024;
struct Parser {
  const std::string& s;
  size_t i = 0;
  SymbolTable* t;
  int depth = 0, nodes = 0;
  struct Nest {  // one level of '(' or unary '-' for the scope's life
    Parser& p;
    explicit Nest(Parser& q) : p(q) {
      if (++p.depth > kMaxNesting) p.error("nests deeper than 64 levels");
    }
    ~Nest() { --p.depth; }
  };
  SymExprPtr node(SymExpr::Kind k, SymExprPtr a, SymExprPtr b = nullptr) {
    if (++nodes > kMaxNodes) error("more than 1024 terms");
    return make(k, std::move(a), std::move(b));
  }

  void ws() {
    while (i < s.size() && std::isspace((unsigned char)s[i])) ++i;
  }
  bool eat(const char* tok) {
    ws();
    size_t n = std::char_traits<char>::length(tok);
    if (s.compare(i, n, tok) == 0) {
      i += n;
      return true;
    }
    return false;
  }
  [[noreturn]] void error(const char* what) {
    fail("cannot parse symbolic int '", s.size() > 80 ? s.substr(0, 80) + "..." : s, "' at ", i, ": ", what);
  }

  SymExprPtr expr() {
    SymExprPtr l = term();
    for (;;) {
      if (eat("+")) l = node(SymExpr::kAdd, l, term());
      else if (eat("-")) l = node(SymExpr::kSub, l, term());
      else return l;
    }
  }
  SymExprPtr term() {
    SymExprPtr l = unary();
    for (;;) {
      if (eat("//")) l = node(SymExpr::kFloorDiv, l, unary());
      else if (eat("*")) l = node(SymExpr::kMul, l, unary());
      else if (eat("%")) l = node(SymExpr::kMod, l, unary());
      else if (eat("/")) l = node(SymExpr::kFloorDiv, l, unary());  // only exact divisions reach us
      else return l;
    }
  }
  SymExprPtr unary() {
    ws();
    if (i + 1 < s.size() && s[i] == '-' && std::isdigit((unsigned char)s[i + 1])) return number();  // (int64's lowest too)
    if (eat("-")) {
      Nest n(*this);
      return node(SymExpr::kNeg, unary());
    }
    return atom();
  }
  // Digits, with a '-' before them if there is one: one constant.
  SymExprPtr number() {
    size_t j = i + (s[i] == '-');
    while (j < s.size() && std::isdigit((unsigned char)s[j])) ++j;
    auto e = std::make_shared<SymExpr>();
    e->kind = SymExpr::kConst;
    errno = 0;
    e->value = std::strtoll(s.c_str() + i, nullptr, 10);
    if (errno == ERANGE) error("number out of range");
    i = j;
    return e;
  }
  SymExprPtr atom() {
    ws();
    if (eat("(")) {
      Nest n(*this);
      SymExprPtr e = expr();
      if (!eat(")")) error("expected ')'");
      return e;
    }
    if (i < s.size() && std::isdigit((unsigned char)s[i])) return number();
    if (i < s.size() && (std::isalpha((unsigned char)s[i]) || s[i] == '_')) {
      size_t j = i;
      while (j < s.size() && (std::isalnum((unsigned char)s[j]) || s[j] == '_')) ++j;
      std::string name = s.substr(i, j - i);
      i = j;
      if (eat("(")) {
        Nest n(*this);
        SymExpr::Kind k;
        if (name == "Max") k = SymExpr::kMax;
        else if (name == "Min") k = SymExpr::kMin;
        else if (name == "FloorDiv") k = SymExpr::kFloorDiv;
        else if (name == "Mod" || name == "PythonMod") k = SymExpr::kMod;
        else error("unknown function");
        SymExprPtr a = expr();
        if (!eat(",")) error("expected ','");
        SymExprPtr b = expr();
        if (!eat(")")) error("expected ')'");
        return node(k, a, b);
      }
      auto e = std::make_shared<SymExpr>();
      e->kind = SymExpr::kSym;
      e->value = t->intern(name);
      return e;
    }
    error("expected a number, a symbol or '('");
  }
};

}  // namespace

namespace {
bool has_symbols(const SymExpr& e) {
  if (e.kind == SymExpr::kSym) return true;
  return (e.a && has_symbols(*e.a)) || (e.b && has_symbols(*e.b));
}
}  // namespace

SymInt::SymInt(SymExprPtr e) : expr_(std::move(e)) {
  if (expr_ && !has_symbols(*expr_)) {  // constant subtrees fold to a plain constant
    value_ = eval_expr(*expr_, {});
    expr_ = nullptr;
  }
}

int64_t SymInt::eval(const std::vector<int64_t>& bindings) const {
  return expr_ ? eval_expr(*expr_, bindings) : value_;
}

int SymInt::symbol_index() const { return expr_ && expr_->kind == SymExpr::kSym ? int(expr_->value) : -1; }

std::string SymInt::str(const SymbolTable& t) const {
  if (!expr_) return std::to_string(value_);
  std::string r = expr_str(*expr_, t);
  return r;
}

bool SymInt::same(const SymInt& o) const {
  if (is_const() != o.is_const()) return false;
  if (is_const()) return value_ == o.value_;
  return expr_same(*expr_, *o.expr_);
}

SymInt parse_symint(const std::string& text, SymbolTable* t) {
  Parser p{text, 0, t};
  SymExprPtr e = p.expr();
  p.ws();
  if (p.i != text.size()) p.error("trailing text");
  return SymInt(e);
}

}  // namespace zenith
