// The one way the unit tests expect a dp::Error: run a callable, require that
// it throws a dp::Error with the given code whose message contains each
// needle, and hand back the message for any further checks.
#pragma once

#include <doctest/doctest.h>

#include <initializer_list>
#include <string>

#include "core/error.h"

namespace dp::testing {

// fn() must throw a dp::Error with `code` whose message contains every needle
// (a test failure otherwise; one that throws nothing ends the test case).
// Returns the message ("" when fn threw nothing).
template <typename Fn>
std::string ExpectError(Fn&& fn, Code code, std::initializer_list<std::string> needles = {}) {
  try {
    fn();
  } catch (const Error& e) {
    CHECK_MESSAGE(e.code() == code, "got ", std::string(CodeName(e.code())), " (", e.message(), "), want ",
                  std::string(CodeName(code)));
    for (const auto& n : needles)
      CHECK_MESSAGE(e.message().find(n) != std::string::npos, "\"", e.message(), "\" lacks \"", n, "\"");
    return e.message();
  }
  FAIL("expected a dp::Error with code ", std::string(CodeName(code)));
  return {};
}

}  // namespace dp::testing
