#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "kafka/producer.hpp"

namespace outbox::relay {

// Chooses the topic of an event: an explicit route for its biz_type, else the
// default template with {biz_type} substituted (e.g. "outbox.{biz_type}").
class TopicRouter {
 public:
  TopicRouter(std::string default_template, std::map<std::string, std::string> routes)
      : template_(std::move(default_template)), routes_(std::move(routes)) {}

  const std::string& default_template() const { return template_; }

  // "biz_type=topic" -> {biz_type, topic}. Split at the last '=', because a topic
  // name cannot hold one while a biz_type (any text in the table) can:
  // "ORDER=PAID=payments" routes biz_type "ORDER=PAID". Throws
  // std::invalid_argument saying what is wrong with `route`.
  static std::pair<std::string, std::string> parse_route(std::string_view route) {
    const auto eq = route.rfind('=');
    if (eq == std::string_view::npos || eq == 0) {
      throw std::invalid_argument("route \"" + std::string(route) +
                                  "\" must look like biz_type=topic");
    }
    std::string biz_type(route.substr(0, eq));
    std::string topic(route.substr(eq + 1));
    if (std::string problem = kafka::topic_name_problem(substitute(topic, biz_type));
        !problem.empty()) {
      throw std::invalid_argument("route \"" + std::string(route) + "\": " + problem);
    }
    return {std::move(biz_type), std::move(topic)};
  }

  // The route's topic, or else the default template, with {biz_type} substituted
  // (the CRD allows the placeholder in a route's topic too).
  std::string topic_for(const std::string& biz_type) const {
    auto it = routes_.find(biz_type);
    return substitute(it != routes_.end() ? it->second : template_, biz_type);
  }

  static std::string substitute(std::string topic, const std::string& biz_type) {
    static const std::string kPlaceholder = "{biz_type}";
    for (auto pos = topic.find(kPlaceholder); pos != std::string::npos;
         pos = topic.find(kPlaceholder, pos + biz_type.size())) {
      topic.replace(pos, kPlaceholder.size(), biz_type);
    }
    return topic;
  }

 private:
  std::string template_;
  std::map<std::string, std::string> routes_;
};

}  // namespace outbox::relay
