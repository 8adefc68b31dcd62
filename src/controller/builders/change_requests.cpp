#include "controller/builders/change_requests.hpp"

#include <algorithm>
#include <cstdint>
#include <regex>
#include <string_view>

#include "controller/builders/arguments.hpp"

namespace outbox::controller {
namespace {

// A request token names its Job through a hash, but is passed as it is in --request.
constexpr std::size_t kMaxRequeueToken = 63;
constexpr std::size_t kMaxAnnotationValue = 8192;
constexpr std::size_t kMaxEventIds = 100;
constexpr std::size_t kMaxText = 253;

bool is_uuid(const std::string& s) {
  static const std::regex uuid(
      "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
      "[0-9a-fA-F]{12}$");
  return std::regex_match(s, uuid);
}

bool is_rfc3339(const std::string& s) {
  static const std::regex time(
      R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$)");
  return std::regex_match(s, time);
}

// Printable ASCII without quotes or backslashes: what reaches an argument or an Event message
// reads as it is.
bool plain_text(const std::string& s) {
  return !s.empty() && s.size() <= kMaxText && std::all_of(s.begin(), s.end(), [](char c) {
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '`';
  });
}

bool is_requeue(const ChangeKind& kind) {
  return kind.verb == std::string("requeue");
}

// What the selectors of a JSON request come to, gathered key by key.
struct Selection {
  std::string requested_by;
  bool all = false;  // "all": true, applied once every other selector is read
  bool ids = false;  // eventIds given
  std::vector<std::string> args;
  std::string summary;

  void describe(const std::string& part) { summary += (summary.empty() ? "" : ", ") + part; }
};

// Each step reads its keys of the request `v` into the selection, in this order (the first
// refusal is the one reported); returns why they are refused, or "".
using SelectorStep = std::string (*)(const Json& v, const ChangeKind& kind, Selection& s);

std::string known_keys_only(const Json& v, const ChangeKind& kind, Selection&) {
  for (const auto& [key, value] : v.items()) {
    if (key != "request" && key != "requestedBy" && key != "eventIds" && key != "bizType" &&
        key != "from" && key != "to" && key != "fromId" && key != "toId" && key != "all") {
      return "unknown key \"" + (plain_text(key) ? key : std::string("?")) +
             "\" (request, requestedBy, eventIds, bizType, from, to, fromId, toId" +
             (is_requeue(kind) ? ", all)" : ")");
    }
  }
  return {};
}

std::string read_requested_by(const Json& v, const ChangeKind&, Selection& s) {
  if (v.contains("requestedBy")) {
    if (!v.at("requestedBy").is_string() || !plain_text(v.at("requestedBy").get<std::string>())) {
      return "requestedBy must be a user name of printable characters (at most 253)";
    }
    s.requested_by = v.at("requestedBy").get<std::string>();
  }
  return {};
}

std::string read_all(const Json& v, const ChangeKind& kind, Selection& s) {
  if (v.contains("all")) {
    if (!is_requeue(kind)) {
      return "\"all\" is not offered for a replay: select event ids or a bounded range";
    }
    if (!v.at("all").is_boolean()) {
      return "all must be true or false";
    }
    s.all = v.at("all").get<bool>();
  }
  return {};
}

std::string read_event_ids(const Json& v, const ChangeKind&, Selection& s) {
  if (!v.contains("eventIds")) {
    return {};
  }
  const Json& list = v.at("eventIds");
  if (!list.is_array() || list.empty() || list.size() > kMaxEventIds) {
    return "eventIds must be a list of 1 to " + std::to_string(kMaxEventIds) + " UUIDs";
  }
  for (const Json& id : list) {
    if (!id.is_string() || !is_uuid(id.get<std::string>())) {
      return "eventIds holds something that is not a UUID";
    }
    s.args.push_back("--event-id=" + id.get<std::string>());
  }
  s.ids = true;
  s.describe(std::to_string(list.size()) + " event id(s)");
  return {};
}

std::string read_biz_type(const Json& v, const ChangeKind&, Selection& s) {
  if (v.contains("bizType")) {
    if (!v.at("bizType").is_string() || !plain_text(v.at("bizType").get<std::string>())) {
      return "bizType must be text of printable characters (at most 253)";
    }
    s.args.push_back(builders::flag("biz-type", v.at("bizType").get<std::string>()));
    s.describe("biz_type " + v.at("bizType").get<std::string>());
  }
  return {};
}

std::string read_time_range(const Json& v, const ChangeKind&, Selection& s) {
  for (const char* key : {"from", "to"}) {
    if (!v.contains(key)) {
      continue;
    }
    if (!v.at(key).is_string() || !is_rfc3339(v.at(key).get<std::string>())) {
      return std::string(key) + " must be an RFC 3339 time such as 2026-12-04T10:00:00Z";
    }
    s.args.push_back("--" + std::string(key) + "=" + v.at(key).get<std::string>());
  }
  if (v.contains("from") || v.contains("to")) {
    s.describe("created in [" + v.value("from", std::string("-")) + ", " +
               v.value("to", std::string("-")) + ")");
  }
  return {};
}

std::string read_id_range(const Json& v, const ChangeKind&, Selection& s) {
  for (const auto& [key, option] : {std::pair{"fromId", "from-id"}, std::pair{"toId", "to-id"}}) {
    if (!v.contains(key)) {
      continue;
    }
    if (!v.at(key).is_number_integer() || v.at(key).get<std::int64_t>() < 0) {
      return std::string(key) + " must be a whole number, 0 or more";
    }
    s.args.push_back("--" + std::string(option) + "=" +
                     std::to_string(v.at(key).get<std::int64_t>()));
  }
  if (v.contains("fromId") && v.contains("toId") &&
      v.at("fromId").get<std::int64_t>() > v.at("toId").get<std::int64_t>()) {
    return "fromId is above toId: the range selects nothing";
  }
  if (v.contains("fromId") || v.contains("toId")) {
    s.describe("id in [" + (v.contains("fromId") ? v.at("fromId").dump() : "-") + ", " +
               (v.contains("toId") ? v.at("toId").dump() : "-") + "]");
  }
  return {};
}

// `all` last: it must stand alone.
std::string apply_all(const Json&, const ChangeKind&, Selection& s) {
  if (s.all) {
    if (!s.args.empty()) {
      return "all selects every FAILED event: give it alone, or selectors without it";
    }
    s.args.push_back("--all");
    s.describe("every FAILED event");
  }
  return {};
}

// Something is selected, and a replay is bounded.
std::string selection_bounded(const Json& v, const ChangeKind& kind, Selection& s) {
  if (s.args.empty()) {
    return "no events are selected (eventIds, bizType, from/to, fromId/toId" +
           std::string(is_requeue(kind) ? ", or all)" : ")");
  }
  const bool time_range = v.contains("from") && v.contains("to");
  const bool id_range = v.contains("fromId") && v.contains("toId");
  if (!is_requeue(kind) && !s.ids && !time_range && !id_range) {
    return "a replay must be bounded: event ids, or both from and to, or both fromId and toId "
           "(an open range replays everything on one side of it)";
  }
  return {};
}

// The selectors of a JSON request into `out`; returns why they are refused, or "".
std::string parse_selectors(const Json& v, const ChangeKind& kind, ChangeRequest& out) {
  Selection s;
  for (SelectorStep step :
       {known_keys_only, read_requested_by, read_all, read_event_ids, read_biz_type,
        read_time_range, read_id_range, apply_all, selection_bounded}) {
    if (std::string problem = step(v, kind, s); !problem.empty()) {
      return problem;
    }
  }
  out.requested_by = std::move(s.requested_by);
  out.selector_args = std::move(s.args);
  out.summary = std::move(s.summary);
  return {};
}

// Why the text of a JSON request is refused before it is parsed, or "". Backslashes would let
// a key be spelt another way ("\u0072equestedBy") and a second "requestedBy" hide behind the
// first: the admission policy that checks the requester (examples/oncall/requester-policy.yaml)
// reads the text as written, not as parsed.
std::string text_problem(const std::string& text) {
  if (text.size() > kMaxAnnotationValue) {
    return "the value is longer than " + std::to_string(kMaxAnnotationValue) + " characters";
  }
  if (text.find('\\') != std::string::npos) {
    return "the value has a backslash (no selector needs one)";
  }
  std::size_t named = 0;
  for (std::size_t at = text.find("\"requestedBy\""); at != std::string::npos;
       at = text.find("\"requestedBy\"", at + 1)) {
    ++named;
  }
  if (named > 1) {
    return "\"requestedBy\" is given more than once";
  }
  return {};
}

// A request written as a JSON object: its token and selectors into `out`; returns why it is
// refused, or "".
std::string read_structured(const std::string& text, const ChangeKind& kind, ChangeRequest& out) {
  if (std::string problem = text_problem(text); !problem.empty()) {
    return problem;
  }
  const Json v = Json::parse(text, nullptr, false);
  if (v.is_discarded() || !v.is_object()) {
    return "the value is not a JSON object such as {\"request\": "
           "\"2026-12-04T10:00:00Z\", \"eventIds\": [\"...\"]}";
  }
  if (!v.contains("request") || !v.at("request").is_string()) {
    return "\"request\" (the request token) is missing";
  }
  out.token = v.at("request").get<std::string>();
  if (std::string problem = requeue_token_problem(out.token); !problem.empty()) {
    return problem;
  }
  return parse_selectors(v, kind, out);
}

// A requeue's plain form: the token alone, for every FAILED event.
std::string read_plain(const std::string& text, ChangeRequest& out) {
  out.token = text;
  if (std::string problem = requeue_token_problem(out.token); !problem.empty()) {
    return problem;
  }
  out.selector_args = {"--all"};
  out.summary = "every FAILED event";
  return {};
}

// A refused request: no token, no Job, the reason naming the annotation.
ChangeRequest refused(const ChangeKind& kind, const std::string& problem) {
  ChangeRequest out;
  out.problem = "annotation " + std::string(kind.annotation) + ": " + problem + ". No " +
                kind.verb + " runs until it is fixed.";
  return out;
}

}  // namespace

std::string requeue_token_problem(const std::string& token) {
  if (token.empty()) {
    return "the request token is empty";
  }
  if (token.size() > kMaxRequeueToken) {
    return "the request token is " + std::to_string(token.size()) + " characters long (at most " +
           std::to_string(kMaxRequeueToken) + ")";
  }
  for (char c : token) {
    // ASCII only, whatever the locale (std::isalnum is not).
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && std::string_view(":._+-").find(c) == std::string_view::npos) {
      return "the request token has a character other than A-Z a-z 0-9 : . _ + - (a timestamp "
             "such as 2026-12-04T10:00:00Z is the convention)";
    }
  }
  return {};
}

const ChangeKind kRequeueKind{kRequeueAnnotation, "requeue", "lastRequeue", "requeued", "Requeue"};
const ChangeKind kReplayKind{kReplayAnnotation, "replay", "lastReplay", "replayed", "Replay"};

ChangeRequest change_request(const Json& relay, const ChangeKind& kind) {
  const Json annotations = relay.at("metadata").value("annotations", Json::object());
  const auto value = annotations.find(kind.annotation);
  if (value == annotations.end() || !value->is_string()) {
    return {};
  }
  const std::string text = value->get<std::string>();
  // A requeue's value is a plain token unless it is a JSON object; a replay's always is one.
  const bool structured = (!text.empty() && text.front() == '{') || !is_requeue(kind);
  ChangeRequest out;
  if (const std::string problem =
          structured ? read_structured(text, kind, out) : read_plain(text, out);
      !problem.empty()) {
    return refused(kind, problem);
  }
  const std::string answered =
      value_at<std::string>(relay, ("/status/" + std::string(kind.field) + "/request").c_str(), "");
  if (answered != out.token) {
    out.job = relay.at("metadata").at("name").get<std::string>() + "-" + kind.verb + "-" +
              stable_hash(out.token).substr(0, 8);
  }
  return out;
}

}  // namespace outbox::controller
