// json_parse: every kind of malformed text is an error naming its source, never an exception.
#include <gtest/gtest.h>

#include "common/json.h"

namespace golinear {
namespace {

// Found by fuzz/safetensors and fuzz/checkpoint_index (corpus crash_number_overflow*): a number
// past double's range made the re-parse throw out_of_range past json_parse.
TEST(JsonParse, ANumberOutOfRangeIsAnError) {
  for (const char* text : {"{\"a\": 104E576}", "8888888888888888888888888888888888888888e888888888888888",
                           "[1, 2", "{\"a\": nul}", ""}) {
    SCOPED_TRACE(text);
    Result<Json> parsed = json_parse(text, "x.json");
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.error().rfind("x.json: malformed JSON", 0), 0u) << parsed.error();
  }
  EXPECT_TRUE(json_parse("{\"a\": 1e300}", "x.json").ok());
}

}  // namespace
}  // namespace golinear
