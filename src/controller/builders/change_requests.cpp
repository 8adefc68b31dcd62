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

namespace {

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

// The selectors of a JSON request into `out`; returns why they are refused, or "".
std::string parse_selectors(const Json& v, const ChangeKind& kind, ChangeRequest& out) {
  std::string summary;
  auto add_summary = [&](const std::string& part) {
    summary += (summary.empty() ? "" : ", ") + part;
  };
  for (const auto& [key, value] : v.items()) {
    if (key != "request" && key != "requestedBy" && key != "eventIds" && key != "bizType" &&
        key != "from" && key != "to" && key != "fromId" && key != "toId" && key != "all") {
      return "unknown key \"" + (plain_text(key) ? key : std::string("?")) +
             "\" (request, requestedBy, eventIds, bizType, from, to, fromId, toId" +
             (kind.verb == std::string("requeue") ? ", all)" : ")");
    }
  }
  if (v.contains("requestedBy")) {
    if (!v.at("requestedBy").is_string() || !plain_text(v.at("requestedBy").get<std::string>())) {
      return "requestedBy must be a user name of printable characters (at most 253)";
    }
    out.requested_by = v.at("requestedBy").get<std::string>();
  }
  bool all = false;
  if (v.contains("all")) {
    if (kind.verb != std::string("requeue")) {
      return "\"all\" is not offered for a replay: select event ids or a bounded range";
    }
    if (!v.at("all").is_boolean()) {
      return "all must be true or false";
    }
    all = v.at("all").get<bool>();
  }
  bool ids = false;
  if (v.contains("eventIds")) {
    const Json& list = v.at("eventIds");
    if (!list.is_array() || list.empty() || list.size() > kMaxEventIds) {
      return "eventIds must be a list of 1 to " + std::to_string(kMaxEventIds) + " UUIDs";
    }
    for (const Json& id : list) {
      if (!id.is_string() || !is_uuid(id.get<std::string>())) {
        return "eventIds holds something that is not a UUID";
      }
      out.selector_args.push_back("--event-id=" + id.get<std::string>());
    }
    ids = true;
    add_summary(std::to_string(list.size()) + " event id(s)");
  }
  if (v.contains("bizType")) {
    if (!v.at("bizType").is_string() || !plain_text(v.at("bizType").get<std::string>())) {
      return "bizType must be text of printable characters (at most 253)";
    }
    out.selector_args.push_back(builders::flag("biz-type", v.at("bizType").get<std::string>()));
    add_summary("biz_type " + v.at("bizType").get<std::string>());
  }
  for (const char* key : {"from", "to"}) {
    if (!v.contains(key)) {
      continue;
    }
    if (!v.at(key).is_string() || !is_rfc3339(v.at(key).get<std::string>())) {
      return std::string(key) + " must be an RFC 3339 time such as 2026-12-04T10:00:00Z";
    }
    out.selector_args.push_back("--" + std::string(key) + "=" + v.at(key).get<std::string>());
  }
  if (v.contains("from") || v.contains("to")) {
    add_summary("created in [" + v.value("from", std::string("-")) + ", " +
                v.value("to", std::string("-")) + ")");
  }
  for (const auto& [key, option] : {std::pair{"fromId", "from-id"}, std::pair{"toId", "to-id"}}) {
    if (!v.contains(key)) {
      continue;
    }
    if (!v.at(key).is_number_integer() || v.at(key).get<std::int64_t>() < 0) {
      return std::string(key) + " must be a whole number, 0 or more";
    }
    out.selector_args.push_back("--" + std::string(option) + "=" +
                                std::to_string(v.at(key).get<std::int64_t>()));
  }
  if (v.contains("fromId") && v.contains("toId") &&
      v.at("fromId").get<std::int64_t>() > v.at("toId").get<std::int64_t>()) {
    return "fromId is above toId: the range selects nothing";
  }
  if (v.contains("fromId") || v.contains("toId")) {
    add_summary("id in [" + (v.contains("fromId") ? v.at("fromId").dump() : "-") + ", " +
                (v.contains("toId") ? v.at("toId").dump() : "-") + "]");
  }
  if (all) {
    if (!out.selector_args.empty()) {
      return "all selects every FAILED event: give it alone, or selectors without it";
    }
    out.selector_args.push_back("--all");
    add_summary("every FAILED event");
  }
  if (out.selector_args.empty()) {
    return "no events are selected (eventIds, bizType, from/to, fromId/toId" +
           std::string(kind.verb == std::string("requeue") ? ", or all)" : ")");
  }
  const bool time_range = v.contains("from") && v.contains("to");
  const bool id_range = v.contains("fromId") && v.contains("toId");
  if (kind.verb == std::string("replay") && !ids && !time_range && !id_range) {
    return "a replay must be bounded: event ids, or both from and to, or both fromId and toId "
           "(an open range replays everything on one side of it)";
  }
  out.summary = summary;
  return "";
}

}  // namespace

ChangeRequest change_request(const Json& relay, const ChangeKind& kind) {
  ChangeRequest out;
  const Json annotations = relay.at("metadata").value("annotations", Json::object());
  const auto value = annotations.find(kind.annotation);
  if (value == annotations.end() || !value->is_string()) {
    return out;
  }
  const std::string text = value->get<std::string>();
  auto refuse = [&](const std::string& problem) {
    ChangeRequest refused;
    refused.problem = "annotation " + std::string(kind.annotation) + ": " + problem + ". No " +
                      kind.verb + " runs until it is fixed.";
    return refused;
  };
  std::string token;
  const bool structured = !text.empty() && text.front() == '{';
  if (structured || kind.verb != std::string("requeue")) {
    if (text.size() > kMaxAnnotationValue) {
      return refuse("the value is longer than " + std::to_string(kMaxAnnotationValue) +
                    " characters");
    }
    // Backslashes would let a key be spelt another way ("\u0072equestedBy") and a second
    // "requestedBy" hide behind the first: the admission policy that checks the requester
    // (examples/oncall/requester-policy.yaml) reads the text as written, not as parsed.
    if (text.find('\\') != std::string::npos) {
      return refuse("the value has a backslash (no selector needs one)");
    }
    std::size_t named = 0;
    for (std::size_t at = text.find("\"requestedBy\""); at != std::string::npos;
         at = text.find("\"requestedBy\"", at + 1)) {
      ++named;
    }
    if (named > 1) {
      return refuse("\"requestedBy\" is given more than once");
    }
    const Json v = Json::parse(text, nullptr, false);
    if (v.is_discarded() || !v.is_object()) {
      return refuse(
          "the value is not a JSON object such as {\"request\": "
          "\"2026-12-04T10:00:00Z\", \"eventIds\": [\"...\"]}");
    }
    if (!v.contains("request") || !v.at("request").is_string()) {
      return refuse("\"request\" (the request token) is missing");
    }
    token = v.at("request").get<std::string>();
    if (const std::string problem = requeue_token_problem(token); !problem.empty()) {
      return refuse(problem);
    }
    if (const std::string problem = parse_selectors(v, kind, out); !problem.empty()) {
      return refuse(problem);
    }
  } else {
    token = text;
    if (const std::string problem = requeue_token_problem(token); !problem.empty()) {
      return refuse(problem);
    }
    out.selector_args = {"--all"};
    out.summary = "every FAILED event";
  }
  out.token = token;
  const std::string answered =
      value_at<std::string>(relay, ("/status/" + std::string(kind.field) + "/request").c_str(), "");
  if (answered != token) {
    out.job = relay.at("metadata").at("name").get<std::string>() + "-" + kind.verb + "-" +
              stable_hash(token).substr(0, 8);
  }
  return out;
}

}  // namespace outbox::controller
