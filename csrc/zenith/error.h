#pragma once
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

#define ZENITH_CHECK(cond, ...)       \
  do {                                \
    if (!(cond)) ::zenith::fail(__VA_ARGS__); \
  } while (0)

}  // namespace zenith
