// Error type and the TG_CHECK macro used for every user-facing validation.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace tg {

// Thrown for every invalid use of the library; the message says what was given and what was expected.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown when code needs the value of a tensor that has no data (a fake tensor during tracing).
class DataDependentError : public Error {
 public:
  using Error::Error;
};

// Thrown when a compiled function's backward would itself have to be differentiated.
class DoubleBackwardError : public Error {
 public:
  DoubleBackwardError()
      : Error("torch.compile with aot_autograd does not currently support double backward (tapegraph: the "
              "backward of a compiled function cannot itself be differentiated; run the function eagerly "
              "for higher-order gradients)") {}
};

namespace detail {
// Concatenates any streamable arguments into one message.
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void throw_error(const std::string& msg);
}  // namespace detail

}  // namespace tg

// Throws tg::Error built from the remaining arguments when cond is false.
#define TG_CHECK(cond, ...)                                         \
  do {                                                              \
    if (!(cond)) [[unlikely]] {                                     \
      ::tg::detail::throw_error(::tg::detail::concat(__VA_ARGS__)); \
    }                                                               \
  } while (0)

// Throws tg::Error unconditionally.
#define TG_FAIL(...) ::tg::detail::throw_error(::tg::detail::concat(__VA_ARGS__))
