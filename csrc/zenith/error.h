#pragma once
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>

namespace zenith {

// Every failure the core reports is a zenith::Error with a message that names
// the op, value or input involved. The bindings turn it into a Python RuntimeError.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw Error(os.str());
}

// A failed allocation (arena, output, packed weight, kernel scratch). It is a
// std::bad_alloc, so code that handles allocation failure generically still sees
// one; the bindings turn it into a Python MemoryError with this message.
struct OutOfMemory : std::bad_alloc {
  explicit OutOfMemory(std::string msg) : msg_(std::move(msg)) {}
  const char* what() const noexcept override { return msg_.c_str(); }

 private:
  std::string msg_;
};

template <typename... Args>
[[noreturn]] void fail_alloc(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw OutOfMemory(os.str());
}

#define ZENITH_CHECK(cond, ...)       \
  do {                                \
    if (!(cond)) ::zenith::fail(__VA_ARGS__); \
  } while (0)

}  // namespace zenith
