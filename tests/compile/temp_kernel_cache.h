#pragma once
// A test fixture with a fresh folder per test (dir_) that is also the
// generated-kernel cache (TRAINRUN_KERNEL_CACHE): each test compiles its
// loops afresh and leaves nothing behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace trainrun::compile {

class TempKernelCache : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           (std::string(info->test_suite_name()) + "-" + std::to_string(getpid()) + "-" + info->name());
    std::filesystem::remove_all(dir_);
    setenv("TRAINRUN_KERNEL_CACHE", (dir_ / "cache").c_str(), 1);
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    unsetenv("TRAINRUN_KERNEL_CACHE");
  }
  std::filesystem::path dir_;
};

}  // namespace trainrun::compile
