#include "metrics/registry.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace outbox::metrics {
namespace {

void atomic_add(std::atomic<double>& target, double by) {
  double cur = target.load();
  while (!target.compare_exchange_weak(cur, cur + by)) {
  }
}

std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string render_labels(const Labels& labels) {
  if (labels.empty()) {
    return {};
  }
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    out += (first ? "" : ",") + k + "=\"" + escape_label(v) + "\"";
    first = false;
  }
  return out + "}";
}

std::string number(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

}  // namespace

void Counter::inc(double by) {
  if (by < 0) {
    throw std::invalid_argument("a counter only goes up");
  }
  atomic_add(value_, by);
}

void Gauge::add(double by) {
  atomic_add(value_, by);
}

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  std::sort(bounds_.begin(), bounds_.end());
  counts_.resize(bounds_.size() + 1);
}

void Histogram::observe(double v) {
  auto it = std::lower_bound(bounds_.begin(), bounds_.end(), v);
  counts_[static_cast<std::size_t>(it - bounds_.begin())].fetch_add(1);
  atomic_add(sum_, v);
}

std::vector<std::uint64_t> Histogram::cumulative_counts() const {
  std::vector<std::uint64_t> out;
  std::uint64_t total = 0;
  for (const auto& c : counts_) {
    total += c.load();
    out.push_back(total);
  }
  return out;
}

Registry::Family& Registry::family(const std::string& name, const std::string& type,
                                   const std::string& help) {
  auto& f = families_[name];
  if (f.type.empty()) {
    f.type = type;
    f.help = help;
  } else if (f.type != type) {
    throw std::logic_error("metric " + name + " registered as " + f.type + " and " + type);
  }
  return f;
}

Counter& Registry::counter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, "counter", help).counters[render_labels(labels)];
  if (slot == nullptr) {
    slot = &counter_store_.emplace_back();
  }
  return *slot;
}

void Registry::describe_counter(const std::string& name, const std::string& help) {
  std::lock_guard lock(mu_);
  family(name, "counter", help);
}

Gauge& Registry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, "gauge", help).gauges[render_labels(labels)];
  if (slot == nullptr) {
    slot = &gauge_store_.emplace_back();
  }
  return *slot;
}

Histogram& Registry::histogram(const std::string& name, const std::string& help,
                               std::vector<double> bounds, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& f = family(name, "histogram", help);
  auto& slot = f.histograms[render_labels(labels)];
  if (slot == nullptr) {
    slot = &histogram_store_.emplace_back(std::move(bounds));
  }
  return *slot;
}

void Registry::add_collector(std::function<void()> collect) {
  std::lock_guard lock(collect_mu_);
  collectors_.push_back(std::move(collect));
}

std::string Registry::render() const {
  {
    std::lock_guard collecting(collect_mu_);
    for (const auto& collect : collectors_) {
      collect();
    }
  }
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + f.type + "\n";
    for (const auto& [labels, c] : f.counters) {
      out += name + labels + " " + number(c->value()) + "\n";
    }
    for (const auto& [labels, g] : f.gauges) {
      out += name + labels + " " + number(g->value()) + "\n";
    }
    for (const auto& [labels, h] : f.histograms) {
      // Splice "le" into the already rendered label set.
      std::string inner = labels.empty() ? "" : labels.substr(1, labels.size() - 2) + ",";
      auto counts = h->cumulative_counts();
      for (std::size_t i = 0; i < h->bounds().size(); ++i) {
        out += name + "_bucket{" + inner + "le=\"" + number(h->bounds()[i]) + "\"} " +
               std::to_string(counts[i]) + "\n";
      }
      out += name + "_bucket{" + inner + "le=\"+Inf\"} " + std::to_string(counts.back()) + "\n";
      out += name + "_sum" + labels + " " + number(h->sum()) + "\n";
      out += name + "_count" + labels + " " + std::to_string(counts.back()) + "\n";
    }
  }
  return out;
}

std::vector<double> latency_buckets() {
  return {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}

}  // namespace outbox::metrics
