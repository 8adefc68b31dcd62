#pragma once

#include <map>
#include <string>

namespace outbox::relay {

// Chooses the topic of an event: an explicit route for its biz_type, else the
// default template with {biz_type} substituted (e.g. "outbox.{biz_type}").
class TopicRouter {
 public:
  TopicRouter(std::string default_template, std::map<std::string, std::string> routes)
      : template_(std::move(default_template)), routes_(std::move(routes)) {}

  const std::string& default_template() const { return template_; }

  std::string topic_for(const std::string& biz_type) const {
    if (auto it = routes_.find(biz_type); it != routes_.end()) {
      return it->second;
    }
    std::string out = template_;
    static const std::string kPlaceholder = "{biz_type}";
    for (auto pos = out.find(kPlaceholder); pos != std::string::npos;
         pos = out.find(kPlaceholder, pos + biz_type.size())) {
      out.replace(pos, kPlaceholder.size(), biz_type);
    }
    return out;
  }

 private:
  std::string template_;
  std::map<std::string, std::string> routes_;
};

}  // namespace outbox::relay
