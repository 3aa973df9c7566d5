// A small Expected<T>: a value or an error message (g++ 12 has no std::expected).
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace sc {

/// An error message for a failure that is not about a located spec object (I/O, options).
struct Error {
  std::string message;
};

/// Either a T or an Error. Check with `ok()` (or operator bool) before `value()`.
template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}
  Expected(Error e) : v_(std::move(e)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { assert(ok()); return std::get<0>(v_); }
  const T& value() const { assert(ok()); return std::get<0>(v_); }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  const std::string& error() const { assert(!ok()); return std::get<1>(v_).message; }

 private:
  std::variant<T, Error> v_;
};

}  // namespace sc
