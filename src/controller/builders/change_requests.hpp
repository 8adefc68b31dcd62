#pragma once

#include <string>
#include <vector>

#include "controller/builders/common.hpp"

// A change of events asked for through an annotation: a requeue (kRequeueAnnotation) or a replay
// (kReplayAnnotation). A request is answered once its token is status.<field>.request, which
// the Job writes when it ends (or the operator, for a Job that ended without doing so).
//
// The requeue annotation's value is a request token (every FAILED event), or a JSON object; the
// replay annotation's is a JSON object:
//   {"request": "<token>", "requestedBy": "<who>", "eventIds": ["<uuid>", ...], "bizType": "t",
//    "from": "<RFC 3339>", "to": "<RFC 3339>", "fromId": 1, "toId": 9, "all": true}
// `all` (every FAILED event) only for a requeue. A replay must be bounded: event ids, or both
// ends of a time or id range (bizType alone would replay that type's whole history). Anything
// else (an unknown key, a malformed id or time, an empty selection) is refused with the reason
// in `problem`, and no Job runs. The Job itself is jobs.hpp's change_job().
namespace outbox::controller {

// What is wrong with `token` as a request token, or "" when nothing is: 1 to 63 characters of
// A-Z a-z 0-9 : . _ + -, so it passes as one command-line argument as it is (no `$` for
// Kubernetes to expand, no space, no `=`). The value itself is not quoted back: it may be long
// or not printable.
std::string requeue_token_problem(const std::string& token);

struct ChangeRequest {
  std::string token;         // the request token once validated; empty: none, or refused
  std::string requested_by;  // as the annotation says (unverified); empty when it names none
  std::vector<std::string> selector_args;  // --all, --event-id=..., --biz-type=..., ...
  std::string summary;                     // the selection in words, for the Event
  std::string job;      // "<name>-<verb>-<hash of token>" while unanswered; else empty
  std::string problem;  // why the value is refused, naming the annotation; else empty
};
using RequeueRequest = ChangeRequest;

// What each kind of request is: its annotation, its Job's verb and component, its status field
// and the count its Job reports.
struct ChangeKind {
  const char* annotation;
  const char* verb;        // "requeue", "replay": the subcommand and the Job name's infix
  const char* field;       // "lastRequeue", "lastReplay"
  const char* count;       // "requeued", "replayed"
  const char* event_noun;  // "Requeue", "Replay": Event reasons <noun>Requested
};
extern const ChangeKind kRequeueKind;
extern const ChangeKind kReplayKind;

// The request of `kind` that `relay` carries in its annotations, checked against its status.
ChangeRequest change_request(const Json& relay, const ChangeKind& kind);
inline ChangeRequest requeue_request(const Json& relay) {
  return change_request(relay, kRequeueKind);
}
inline ChangeRequest replay_request(const Json& relay) {
  return change_request(relay, kReplayKind);
}

}  // namespace outbox::controller
