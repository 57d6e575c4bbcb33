// Which invocation log is current where: a tool's log for every thread of
// its process, a JIT compile's own log only on the thread that compiles
// (another thread's compile once took it, and wrote into it after it was
// destroyed: a crash in kiln-stress).
#include "kiln/InvocationLog.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

namespace fs = std::filesystem;
using kiln::InvocationLog;

namespace {

struct InvocationLogTest : ::testing::Test {
  std::string dir;
  void SetUp() override {
    char tmpl[] = "/tmp/kiln-log-test-XXXXXX";
    ASSERT_TRUE(mkdtemp(tmpl));
    dir = tmpl;
    setenv("KILN_LOG_DIR", dir.c_str(), 1);
    unsetenv("KILN_LOG");
    ASSERT_EQ(InvocationLog::current(), nullptr);
  }
  void TearDown() override {
    unsetenv("KILN_LOG_DIR");
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  static InvocationLog *currentOnAnotherThread() {
    InvocationLog *seen = nullptr;
    std::thread([&] { seen = InvocationLog::current(); }).join();
    return seen;
  }
};

TEST_F(InvocationLogTest, AThreadLogIsCurrentOnlyOnItsThread) {
  auto log = InvocationLog::begin("jit", {"test"}, InvocationLog::Scope::Thread);
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(InvocationLog::current(), log.get());
  EXPECT_EQ(currentOnAnotherThread(), nullptr);
  log.reset();
  EXPECT_EQ(InvocationLog::current(), nullptr);
}

TEST_F(InvocationLogTest, AProcessLogIsCurrentEverywhereAndAThreadLogOverridesIt) {
  auto tool = InvocationLog::begin("tool", {"test"});
  ASSERT_NE(tool, nullptr);
  EXPECT_EQ(currentOnAnotherThread(), tool.get());
  {
    auto jit = InvocationLog::begin("jit", {"test"}, InvocationLog::Scope::Thread);
    ASSERT_NE(jit, nullptr);
    EXPECT_EQ(InvocationLog::current(), jit.get());
    EXPECT_EQ(currentOnAnotherThread(), tool.get());
  }
  EXPECT_EQ(InvocationLog::current(), tool.get());
  tool.reset();
  EXPECT_EQ(InvocationLog::current(), nullptr);
  EXPECT_EQ(currentOnAnotherThread(), nullptr);
}

} // namespace
