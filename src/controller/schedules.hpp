#pragma once

#include <chrono>
#include <string>

// The CronJobs' schedules for a fleet: each OutboxRelay's runs at minutes and hours picked by a
// stable hash of its namespace and name, so hundreds of them never start their Jobs together,
// and the compensation CronJob runs rarely while relays are alive and every minute while none is.
namespace outbox::controller {

// The compensation CronJob's schedule while a relay of the resource is alive: three runs a day,
// at a minute and hours spread by the hash ("17 5,13,21 * * *"). A fleet of 500 healthy
// OutboxRelays starts about 63 compensation pods an hour. The runs only release claims of
// relays that died and resend what no live relay owns, which live relays already do.
std::string spread_compensation_schedule(const std::string& ns, const std::string& name);

// While no relay of the resource is alive: every minute, so an event whose relays all died is
// published at most `staleAfter` plus about two minutes later (docs/install.md, "A fleet").
inline const char kRescueCompensationSchedule[] = "*/1 * * * *";

// The retention CronJob's schedule: once a day at a minute and hour spread by the hash over the
// whole day ("41 9 * * *"), about 21 pods an hour for 500 OutboxRelays.
std::string spread_retention_schedule(const std::string& ns, const std::string& name);

}  // namespace outbox::controller
