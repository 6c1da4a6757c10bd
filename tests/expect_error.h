#pragma once
// expect_error<E>(f, {fragments}): runs f and checks that it throws E whose
// message contains every fragment. Shared by the C++ test suites.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

namespace trainrun {

template <typename E, typename F>
void expect_error(F f, std::initializer_list<const char*> fragments) {
  try {
    f();
    ADD_FAILURE() << "expected an exception";
  } catch (const E& e) {
    std::string msg = e.what();
    for (const char* frag : fragments)
      EXPECT_NE(msg.find(frag), std::string::npos) << "message: " << msg << "\nmissing: " << frag;
  }
}

}  // namespace trainrun
