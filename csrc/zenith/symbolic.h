// Symbolic integers: the dims and integer attributes of a graph compiled with
// dynamic shapes. A SymInt is a constant or a small expression tree over named
// symbols (s0, s1, ...), which PyTorch's shape environment produced; the runtime
// binds the symbols from the actual input shapes and evaluates the trees once
// per new input signature.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zenith {

struct SymExpr;
using SymExprPtr = std::shared_ptr<const SymExpr>;

struct SymExpr {
  enum Kind : uint8_t { kConst, kSym, kAdd, kSub, kMul, kFloorDiv, kMod, kMax, kMin, kNeg };
  Kind kind = kConst;
  int64_t value = 0;  // kConst: the value; kSym: the symbol index in the SymbolTable
  SymExprPtr a, b;
};

// The symbols of one graph; indices are stable.
struct SymbolTable {
  std::vector<std::string> names;
  int intern(const std::string& name);
  int find(const std::string& name) const;  // -1 if absent
};

class SymInt {
 public:
  SymInt(int64_t v = 0) : value_(v) {}  // NOLINT: implicit from a constant on purpose
  explicit SymInt(SymExprPtr e);
  bool is_const() const { return expr_ == nullptr; }
  int64_t value() const { return value_; }  // valid only if is_const()
  const SymExprPtr& expr() const { return expr_; }
  // Evaluates with `bindings[i]` the value of symbol i.
  int64_t eval(const std::vector<int64_t>& bindings) const;
  // If this is a bare symbol, its index, else -1.
  int symbol_index() const;
  std::string str(const SymbolTable& t) const;
  bool same(const SymInt& o) const;

 private:
  int64_t value_ = 0;
  SymExprPtr expr_;
};

// Parses "12*s0 + 3", "(s0//2)", "Max(1, s1)"; new symbols are interned into `t`.
// Throws zenith::Error on malformed text.
SymInt parse_symint(const std::string& text, SymbolTable* t);

}  // namespace zenith
