#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>

#include "common/file_watch.hpp"
#include "outbox/cluster_move.hpp"
#include "outbox/store.hpp"

namespace outbox::relay {

// What the relay's last database session found, for the resource's status.database.
struct DatabaseReport {
  // How it verified the server (outbox::tls_verification: verify-full, verify-ca, unverified,
  // off); empty before the first session.
  std::string tls;
  // Log mode: the last move of the table to another PostgreSQL cluster that a rebase recorded
  // (by this relay or by whoever noticed first: a writer, another relay, migrate --rebase).
  std::optional<RecordedMove> cluster_move;
};

// What /healthz, /readyz and the status report read of a relay, from their own threads: whether
// it is ready, why not, its last backlog measurement, what its database session found (how it
// verified the server, a move of the table), and when its loop last made progress. The relay's
// thread writes it; it outlives the relay and exists without one (stay_not_ready()). Thread-safe.
class RelayHealth {
 public:
  RelayHealth();

  bool ready() const { return ready_.load(); }
  // Why the relay is not working, in words for /readyz and status; empty when fine.
  std::string problem() const;
  // The problem's reason in one CamelCase word when it has one of its own (DatabaseMoved),
  // for the resource's Degraded condition; else empty.
  std::string problem_reason() const;
  // Milliseconds since the loop last made progress (for /healthz).
  std::chrono::milliseconds since_last_beat() const;
  // The backlog last measured on the current database session; nullopt while the
  // session is down or before its first measurement.
  std::optional<Backlog> backlog() const;
  DatabaseReport database() const;

  void beat();
  void set_ready(bool ready) { ready_ = ready; }
  // Sets the problem and its reason; returns the problem it replaced when that was another.
  std::optional<std::string> set_problem(const std::string& problem, const std::string& reason);
  void set_backlog(const std::optional<Backlog>& backlog);
  void set_database(DatabaseReport report);

 private:
  std::atomic<bool> ready_{false};
  std::atomic<long long> last_beat_ms_{0};
  mutable std::mutex mu_;  // guards the rest
  std::string problem_;
  std::string problem_reason_;
  std::optional<Backlog> backlog_;
  DatabaseReport database_;
};

// Why Relay::run, or stay_not_ready, returned.
enum class RunEnd {
  kStopped,  // the stop token was requested
  // A Kafka credential file changed (CredentialFiles::kafka): librdkafka reads them only when
  // the producer is created, so the process should exit for its supervisor to start it again.
  kKafkaCredentialsChanged,
};

// Nothing can be published with Kafka properties the producer refused (Relay's constructor
// throws KafkaRefused), and they are read only at start. Keeps `health` not ready with
// `problem` (and beating) until `stop`, or until a file of `kafka_files` changes (the Secret
// fixed: the kubelet rewrote it): the reason stays on /readyz, and so in the resource's
// status, until then, instead of a crash loop.
RunEnd stay_not_ready(RelayHealth& health, const std::string& problem, FileWatch kafka_files,
                      std::stop_token stop);

}  // namespace outbox::relay
