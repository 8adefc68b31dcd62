// Per-key order is the writers' commit order, also when writers contend on a key (issue 30).
// Each writer transaction first bumps its key's counter row (UPDATE ... RETURNING v), then
// enqueues an event carrying v, then commits: the row lock serialises a key's transactions,
// so v is the key's commit order, and the consumer must see each key's events in v order.
// Real PostgreSQL, real Kafka, the topic read back. CMake runs these in both table modes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "relay_fixture.hpp"
#include "support/testbed.hpp"

namespace outbox {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::consume_all;
using testing::Consumed;
using testing::eventually;
using testing::OutboxTestTable;
using testing::ProcessRelay;
using testing::ThreadRelay;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string hot_key(int i) {
  std::string key = "hot-";
  key += std::to_string(i);
  return key;
}

// The hot keys' counter rows, <table>_keys: v counts the key's committed transactions.
class KeyCounters {
 public:
  KeyCounters(const OutboxTestTable& t, int keys)
      : t_(t), name_(t.table.quoted_with_suffix("_keys")) {
    pqxx::connection conn(t_.dsn);
    pqxx::work tx(conn);
    tx.exec("CREATE TABLE " + name_ + " (k text PRIMARY KEY, v bigint NOT NULL)");
    for (int i = 0; i < keys; ++i) {
      tx.exec_params("INSERT INTO " + name_ + " (k, v) VALUES ($1, 0)", hot_key(i));
    }
    tx.commit();
  }

  // Bumps `key`'s row, then enqueues its event {"key", "v"} plus `extra`'s fields, in `tx`.
  // The UPDATE must stay the transaction's first statement: it assigns the transaction id
  // (log mode's order) and takes the row lock that orders the key's commits. Returns v.
  long long bump_and_enqueue(pqxx::work& tx, const std::string& key,
                             const nlohmann::json& extra = nlohmann::json::object()) const {
    const long long v =
        tx.exec_params1("UPDATE " + name_ + " SET v = v + 1 WHERE k = $1 RETURNING v", key)[0]
            .as<long long>();
    tx.exec_params("SELECT " + t_.table.quoted_with_suffix("_enqueue") +
                       "('contended', $1, jsonb_build_object('key', $1::text, 'v', $2::bigint) "
                       "|| $3::jsonb)",
                   key, v, extra.dump());
    return v;
  }

  // Each key's v now: how many events of the key were committed, and the highest v.
  std::map<std::string, long long> final_counts() const {
    pqxx::connection conn(t_.dsn);
    pqxx::nontransaction tx(conn);
    std::map<std::string, long long> out;
    for (const auto& r : tx.exec("SELECT k, v FROM " + name_)) {
      out[r[0].as<std::string>()] = r[1].as<long long>();
    }
    return out;
  }

 private:
  const OutboxTestTable& t_;
  std::string name_;
};

// Runs `body(writer)` on `writers` threads and joins them. Returns the first exception's
// message ("" when none): an exception must not escape a thread, and the test should say
// what a writer hit rather than abort.
std::string run_writers(int writers, const std::function<void(int)>& body) {
  std::mutex mutex;
  std::string error;
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      try {
        body(w);
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        if (error.empty()) {
          error = "writer " + std::to_string(w) + ": " + e.what();
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  return error;
}

// What the consumer read, checked against each key's final v.
struct DeliveryCheck {
  std::size_t messages = 0;
  std::size_t duplicates = 0;  // deliveries after the first of their event (kill -9 resends)
  long long lost = 0;          // committed events never delivered
  std::string lost_examples;
  // First deliveries that arrived after a later event of their key (a higher v): each is
  // one event the consumer saw out of commit order.
  std::size_t out_of_order = 0;
  std::string out_of_order_examples;
  std::size_t unexpected = 0;  // a key or v no writer committed, or a key on two partitions
  std::string unexpected_examples;
};

void append_example(std::string& examples, std::size_t count, const std::string& example) {
  constexpr std::size_t kExamples = 5;
  if (count <= kExamples) {
    examples += "\n    " + example;
  }
}

// Reads the messages partition by partition in offset order (a key lives on one partition,
// where offset order is the order every consumer reads) and checks, per key, the first
// delivery of each v against the highest v first delivered before it.
DeliveryCheck check_delivery(std::vector<Consumed> messages,
                             const std::map<std::string, long long>& final_v) {
  std::stable_sort(messages.begin(), messages.end(), [](const Consumed& a, const Consumed& b) {
    return std::tie(a.partition, a.offset) < std::tie(b.partition, b.offset);
  });
  DeliveryCheck c;
  c.messages = messages.size();
  struct Highest {
    long long v = 0;
    long long offset = -1;
  };
  std::map<std::string, std::set<long long>> seen;
  std::map<std::string, Highest> highest;
  std::map<std::string, int> partition_of;
  for (const auto& m : messages) {
    const auto payload = nlohmann::json::parse(m.payload);
    const long long v = payload.at("v").get<long long>();
    const auto known = final_v.find(m.key);
    const int partition = partition_of.try_emplace(m.key, m.partition).first->second;
    if (known == final_v.end() || v < 1 || v > known->second || partition != m.partition) {
      append_example(c.unexpected_examples, ++c.unexpected,
                     "key " + m.key + " v " + std::to_string(v) + " at partition " +
                         std::to_string(m.partition) + " offset " + std::to_string(m.offset));
      continue;
    }
    if (!seen[m.key].insert(v).second) {
      ++c.duplicates;
      continue;
    }
    Highest& h = highest[m.key];
    if (v < h.v) {
      append_example(c.out_of_order_examples, ++c.out_of_order,
                     "key " + m.key + ": v " + std::to_string(v) + " first arrived at partition " +
                         std::to_string(m.partition) + " offset " + std::to_string(m.offset) +
                         ", after v " + std::to_string(h.v) + " (committed later) at offset " +
                         std::to_string(h.offset));
    } else {
      h = {v, m.offset};
    }
  }
  for (const auto& [key, last] : final_v) {
    const auto& got = seen[key];
    for (long long v = 1; v <= last; ++v) {
      if (got.count(v) == 0) {
        append_example(c.lost_examples, static_cast<std::size_t>(++c.lost),
                       "key " + key + " v " + std::to_string(v) + " of " + std::to_string(last));
      }
    }
  }
  return c;
}

long long total(const std::map<std::string, long long>& final_v) {
  long long n = 0;
  for (const auto& [key, v] : final_v) {
    n += v;
  }
  return n;
}

// The assertions every contention test makes on a DeliveryCheck.
void expect_all_delivered_in_commit_order(const DeliveryCheck& c, long long events) {
  EXPECT_EQ(c.lost, 0) << c.lost << " of " << events
                       << " committed events never delivered:" << c.lost_examples;
  EXPECT_EQ(c.unexpected, 0u) << c.unexpected
                              << " messages no writer committed as read:" << c.unexpected_examples;
  EXPECT_EQ(c.out_of_order, 0u)
      << c.out_of_order << " of " << events
      << " events first arrived after a later-committed event of their key (per key, the v of "
         "first deliveries must never decrease in partition order); first ones:"
      << c.out_of_order_examples;
}

// Waits until the table has every event sent, then reads the topic back.
std::vector<Consumed> delivered(OutboxTestTable& t, long long events, std::chrono::seconds within,
                                std::chrono::milliseconds settle = 3s) {
  EXPECT_TRUE(eventually([&] { return t.count("status = 1") == events; }, within))
      << t.count("status = 1") << " of " << events << " events sent within " << within.count()
      << " s";
  return consume_all({t.topic}, static_cast<std::size_t>(events), 60s, settle);
}

// 16 writers on 3 hot keys: most transactions queue for a key's row lock, and PostgreSQL
// does not grant it in the order the waiters took their transaction ids (a waiter woken by a
// commit re-checks the row while newer arrivals may take it first). Two replicas publish
// while the writers run.
TEST(OrderContention, ContendedKeysArePublishedInTheirCommitOrderByTwoReplicas) {
  constexpr int kKeys = 3;
  constexpr int kWriters = 16;
  constexpr int kPerWriter = 625;  // 10,000 transactions
  OutboxTestTable t;
  KeyCounters keys(t, kKeys);
  ThreadRelay a(t.relay_config());
  ThreadRelay b(t.relay_config());
  std::this_thread::sleep_for(1s);  // the replicas split the shards before the load starts
  const auto started = Clock::now();
  const std::string error = run_writers(kWriters, [&](int w) {
    pqxx::connection conn(t.dsn);
    for (int i = 0; i < kPerWriter; ++i) {
      pqxx::work tx(conn);
      keys.bump_and_enqueue(tx, hot_key((w + i) % kKeys));
      tx.commit();
    }
  });
  ASSERT_EQ(error, "");
  const double wrote = seconds_since(started);
  const auto final_v = keys.final_counts();
  const long long events = total(final_v);
  ASSERT_EQ(events, kWriters * kPerWriter);
  const auto check = check_delivery(delivered(t, events, 120s), final_v);
  std::cout << "[ info ] " << events << " transactions by " << kWriters << " writers on " << kKeys
            << " keys in " << wrote << " s; all sent " << seconds_since(started)
            << " s after the start; " << check.messages << " messages, " << check.duplicates
            << " duplicates, " << check.out_of_order << " out of commit order\n";
  expect_all_delivered_in_commit_order(check, events);
  EXPECT_EQ(check.duplicates, 0u) << "no replica died: nothing is sent twice";
  // The relays' own watch agrees: a key's events went out in id order, which is commit order
  // for writers that lock the key before inserting.
  const std::string table = t.table.plain();
  EXPECT_EQ(testing::metric(a, "outbox_order_anomalies_total", table) +
                testing::metric(b, "outbox_order_anomalies_total", table),
            0.0);
}

// Transaction B takes its transaction id first (it writes another table), then waits
// while A bumps the key, enqueues and commits; B commits after A. A's event is first in
// commit order (and in v), although B holds the older transaction id.
TEST(OrderContention, AnEventCommittedFirstIsPublishedFirstThoughItsTransactionIdIsNewer) {
  constexpr int kPairs = 20;
  OutboxTestTable t;
  KeyCounters keys(t, 1);
  const std::string side = t.table.quoted_with_suffix("_side");
  {
    pqxx::connection conn(t.dsn);
    pqxx::nontransaction(conn).exec("CREATE TABLE " + side + " (pair integer NOT NULL)");
  }
  ThreadRelay relay(t.relay_config());
  pqxx::connection conn_a(t.dsn);
  pqxx::connection conn_b(t.dsn);
  for (int pair = 0; pair < kPairs; ++pair) {
    pqxx::work b(conn_b);
    b.exec_params("INSERT INTO " + side + " (pair) VALUES ($1)", pair);
    const auto xid_b = b.exec1("SELECT pg_current_xact_id()::text")[0].as<std::uint64_t>();
    pqxx::work a(conn_a);
    keys.bump_and_enqueue(a, hot_key(0), {{"pair", pair}, {"tx", "A"}});
    const auto xid_a = a.exec1("SELECT pg_current_xact_id()::text")[0].as<std::uint64_t>();
    a.commit();
    keys.bump_and_enqueue(b, hot_key(0), {{"pair", pair}, {"tx", "B"}});
    b.commit();
    ASSERT_LT(xid_b, xid_a) << "pair " << pair << ": B must hold the older transaction id";
  }
  const auto got = delivered(t, 2 * kPairs, 60s);
  // Each pair's first deliveries, in partition order.
  std::map<int, std::pair<long long, long long>> offsets;  // pair -> (A's offset, B's offset)
  for (const auto& m : got) {
    const auto payload = nlohmann::json::parse(m.payload);
    auto& [a, b] = offsets.try_emplace(payload.at("pair").get<int>(), -1, -1).first->second;
    long long& offset = payload.at("tx") == "A" ? a : b;
    offset = offset < 0 ? m.offset : std::min(offset, m.offset);
  }
  int reversed = 0;
  std::string examples;
  for (const auto& [pair, ab] : offsets) {
    if (ab.first >= 0 && ab.second >= 0 && ab.second < ab.first) {
      append_example(examples, static_cast<std::size_t>(++reversed),
                     "pair " + std::to_string(pair) + ": B (committed second) at offset " +
                         std::to_string(ab.second) + ", A (committed first) at offset " +
                         std::to_string(ab.first));
    }
  }
  std::size_t complete = 0;
  for (const auto& [pair, ab] : offsets) {
    complete += ab.first >= 0 && ab.second >= 0 ? 1 : 0;
  }
  EXPECT_EQ(complete, static_cast<std::size_t>(kPairs)) << "pairs with both events delivered";
  EXPECT_EQ(reversed, 0) << reversed << " of " << kPairs
                         << " pairs published B (older transaction id, committed second) before "
                            "A (committed first):"
                         << examples;
}

// kill -9 of a replica every 3 s while 6 writers contend on 5 keys: the survivor and the
// restarted process resend what the killed one had published but not recorded (duplicates are
// allowed), but no event is lost and first deliveries stay in each key's commit order.
TEST(OrderContention, ReplicasKilledEveryFewSecondsLoseNothingAndKeepEachKeysCommitOrder) {
  constexpr int kKeys = 5;
  constexpr int kWriters = 6;
  constexpr auto kWriting = 20s;
  constexpr auto kKillEvery = 3s;
  OutboxTestTable t;
  KeyCounters keys(t, kKeys);
  const auto config = t.relay_config();
  auto start_relay = [&](int i) {
    return std::make_unique<ProcessRelay>(
        config, "/tmp/" + testbed::unique_name("order-chaos-" + std::to_string(i)) + ".log");
  };
  std::vector<std::unique_ptr<ProcessRelay>> relays;
  relays.push_back(start_relay(0));
  relays.push_back(start_relay(1));
  std::this_thread::sleep_for(1s);
  const auto started = Clock::now();
  std::atomic<bool> writing{true};
  int kills = 0;
  std::thread chaos([&] {
    while (writing) {
      std::this_thread::sleep_for(kKillEvery);
      if (!writing) {
        break;
      }
      // Alternate the victim, so each replica's shards move now and then.
      const int victim = kills++ % 2;
      relays[static_cast<std::size_t>(victim)]->kill9();
      std::this_thread::sleep_for(300ms);  // long enough for the survivor to take some shards
      relays[static_cast<std::size_t>(victim)] = start_relay(victim);
    }
  });
  const std::string error = run_writers(kWriters, [&](int w) {
    pqxx::connection conn(t.dsn);
    for (int i = 0; Clock::now() - started < kWriting; ++i) {
      pqxx::work tx(conn);
      keys.bump_and_enqueue(tx, hot_key((w + i) % kKeys));
      tx.commit();
    }
  });
  writing = false;
  chaos.join();
  ASSERT_EQ(error, "");
  const auto final_v = keys.final_counts();
  const long long events = total(final_v);
  // Duplicates count toward consume_all's target: settle long enough for the rest.
  const auto check = check_delivery(delivered(t, events, 120s, 10s), final_v);
  std::cout << "[ info ] " << events << " transactions by " << kWriters << " writers on " << kKeys
            << " keys in " << std::chrono::duration<double>(kWriting).count() << " s, " << kills
            << " kill -9s; " << check.messages << " messages, " << check.duplicates
            << " duplicates, " << check.lost << " lost, " << check.out_of_order
            << " out of commit order\n";
  expect_all_delivered_in_commit_order(check, events);
}

}  // namespace
}  // namespace outbox
