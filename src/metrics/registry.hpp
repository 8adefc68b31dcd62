#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace outbox::metrics {

using Labels = std::map<std::string, std::string>;

class Counter {
 public:
  void inc(double by = 1.0);
  double value() const { return value_.load(); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v); }
  void add(double by);
  double value() const { return value_.load(); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  // Cumulative counts per bound, then +Inf; and the sum.
  std::vector<std::uint64_t> cumulative_counts() const;
  double sum() const { return sum_.load(); }

 private:
  std::vector<double> bounds_;
  std::deque<std::atomic<std::uint64_t>> counts_;  // one per bound, plus +Inf
  std::atomic<double> sum_{0};
};

// Metrics in the Prometheus text exposition format (version 0.0.4). Metric
// objects live as long as the registry; registering the same name and labels
// twice returns the same object.
class Registry {
 public:
  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                       const Labels& labels = {});
  // A counter family whose series appear later (their labels are known only then, e.g. a
  // topic): rendered with its HELP and TYPE and no sample until counter() adds one.
  void describe_counter(const std::string& name, const std::string& help);
  // Runs `collect` before every render(), one render at a time: for figures read when
  // scraped (metrics/process.hpp), which it sets on metrics registered beforehand.
  void add_collector(std::function<void()> collect);
  std::string render() const;

 private:
  struct Family {
    std::string type;
    std::string help;
    std::map<std::string, Counter*> counters;  // keyed by rendered labels
    std::map<std::string, Gauge*> gauges;
    std::map<std::string, Histogram*> histograms;
  };
  Family& family(const std::string& name, const std::string& type, const std::string& help);

  mutable std::mutex collect_mu_;  // held while the collectors run; taken before mu_
  std::vector<std::function<void()>> collectors_;
  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
  std::deque<Counter> counter_store_;
  std::deque<Gauge> gauge_store_;
  std::deque<Histogram> histogram_store_;
};

// Latency buckets in seconds, 1 ms to 30 s.
std::vector<double> latency_buckets();

}  // namespace outbox::metrics
