// The log sink: what library code reports reaches the sink a front end installs, once where said once, with the
// thread's context prefix.
#include "util/log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

namespace eaglet {
namespace {

using ::testing::ElementsAre;

TEST(Log, ACaptureReceivesEveryLevelWithItsPrefix) {
  ScopedLogCapture capture;
  log_info("loaded");
  log_note("a note");
  log_warning("a warning");
  EXPECT_THAT(capture.lines(), ElementsAre("loaded", "note: a note", "warning: a warning"));
  EXPECT_EQ(capture.text(), "loaded\nnote: a note\nwarning: a warning\n");
}

TEST(Log, TheSinkIsRestoredWhenACaptureEnds) {
  ScopedLogCapture outer;
  {
    ScopedLogCapture inner;
    log_info("inner");
    EXPECT_EQ(inner.count("inner"), 1);
  }
  log_info("outer");
  EXPECT_THAT(outer.lines(), ElementsAre("outer"));
}

TEST(Log, ANoteSaidOnceIsLoggedOnce) {
  ScopedLogCapture capture;
  for (int i = 0; i < 3; ++i) log_note_once("log_test: the same note");
  log_note_once("log_test: another note");
  EXPECT_EQ(capture.count("log_test: the same note"), 1);
  EXPECT_EQ(capture.count("log_test: another note"), 1);
}

TEST(Log, AContextPrefixesThisThreadsLinesOnly) {
  ScopedLogCapture capture;
  {
    const LogContext request("request 7: ");
    log_info("prompt 3 tokens");
    std::thread other([] { log_info("from another thread"); });
    other.join();
    {
      const LogContext nested("request 8: ");
      log_info("nested");
    }
    log_info("back");
  }
  log_info("after");
  EXPECT_THAT(capture.lines(), ElementsAre("request 7: prompt 3 tokens", "from another thread", "request 8: nested",
                                           "request 7: back", "after"));
}

TEST(Log, ProgressLinesNeverReachASink) {
  ScopedLogCapture capture;
  log_progress("extract: 10 / 100 tokens");
  log_progress_done();
  EXPECT_TRUE(capture.lines().empty());
}

TEST(Log, StrprintfFormatsAnyLength) {
  EXPECT_EQ(strprintf("%d-%s", 42, "x"), "42-x");
  const std::string long_text(1000, 'a');
  EXPECT_EQ(strprintf("%s!", long_text.c_str()), long_text + "!");
  EXPECT_EQ(strprintf("%s", ""), "");
}

}  // namespace
}  // namespace eaglet
