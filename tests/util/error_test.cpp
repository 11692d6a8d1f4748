// eaglet::Error messages are one line, whatever the file put in the values they quote.
#include "util/error.h"

#include <gtest/gtest.h>

namespace eaglet {
namespace {

// Found by fuzzing (fuzz/regressions/model_config, safetensors_header): a hidden_act or dtype string holding a
// line break made a two-line error.
TEST(Error, LineBreaksInQuotedValuesAreEscaped) {
  try {
    fail("config.json: hidden_act '", "si\nlu\r", "' is not supported");
    FAIL() << "fail() did not throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "config.json: hidden_act 'si\\nlu\\r' is not supported");
  }
}

}  // namespace
}  // namespace eaglet
