// The pure parts of the outbox component: table names, PostgreSQL array literals and the
// on-call commands' selections.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "outbox/operations.hpp"
#include "outbox/store.hpp"
#include "outbox/table.hpp"

namespace outbox {
namespace {

TEST(TableName, AcceptsPlainAndQualifiedNames) {
  EXPECT_EQ(TableName::parse("outbox_event").quoted(), "\"public\".\"outbox_event\"");
  auto t = TableName::parse("orders.outbox_event");
  EXPECT_EQ(t.schema(), "orders");
  EXPECT_EQ(t.quoted_with_suffix("_enqueue"), "\"orders\".\"outbox_event_enqueue\"");
}

TEST(TableName, RefusesAnythingThatCouldBreakOutOfAQuotedIdentifier) {
  for (const char* bad : {"", "Outbox", "outbox;drop table x", "a\"b", "1abc", "a.b.c", "a-b",
                          "public.", ".t", "x y"}) {
    EXPECT_THROW(TableName::parse(bad), std::invalid_argument) << bad;
  }
  EXPECT_THROW(TableName::parse(std::string(49, 'a')), std::invalid_argument);
  try {
    TableName::parse("outbox;drop");
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("invalid character"), std::string::npos);
  }
}

TEST(PgArray, TextLiteralsQuoteEveryElement) {
  EXPECT_EQ(pg_text_array({}), "{}");
  EXPECT_EQ(pg_text_array({"a", "b\"c", "d\\e", "{,}"}), R"({"a","b\"c","d\\e","{,}"})");
}

TEST(PgArray, RendersIntegerArrayLiterals) {
  EXPECT_EQ(pg_int_array(std::vector<int>{}), "{}");
  EXPECT_EQ(pg_int_array(std::vector<long>{1, -2, 3}), "{1,-2,3}");
}

// A requeue or replay changes nothing it was not told to: no selector is an error, and --all
// (every row of the state) is said on purpose and alone, never mixed with a narrower selector
// that it would silently override.
TEST(Selection, NeedsASelectorOrAllAlone) {
  Selection none;
  EXPECT_TRUE(none.empty());
  EXPECT_THROW(none.validate(), std::invalid_argument);
  Selection all;
  all.all = true;
  EXPECT_TRUE(all.empty()) << "all is not a narrowing selector";
  EXPECT_NO_THROW(all.validate());
  Selection mixed = all;
  mixed.biz_type = "order";
  EXPECT_FALSE(mixed.empty());
  try {
    mixed.validate();
    ADD_FAILURE() << "--all with --biz-type was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--all"), std::string::npos) << e.what();
  }
  Selection from_id;
  from_id.id_from = 0;
  EXPECT_NO_THROW(from_id.validate());
}

}  // namespace
}  // namespace outbox
