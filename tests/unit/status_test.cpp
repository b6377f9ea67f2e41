#include <gtest/gtest.h>

#include "concord/status.h"

TEST(Status, OkAndError) {
  EXPECT_TRUE(concord::Status::ok().is_ok());
  auto s = concord::Status::not_found("x");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.to_string(), "not found: x");
}
