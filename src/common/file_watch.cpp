#include "common/file_watch.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>

namespace outbox {
namespace {

// FNV-1a, 64 bits: stable across builds and standard libraries, and enough to tell one version
// of a small file from the next (nobody chooses the content to collide with its predecessor).
class Fingerprint {
 public:
  void add(std::string_view bytes) {
    for (const char c : bytes) {
      hash_ ^= static_cast<unsigned char>(c);
      hash_ *= 0x100000001b3ULL;
    }
  }
  // A field separator: "ab" + "c" and "a" + "bc" differ.
  void end_field() { add(std::string_view("\0", 1)); }
  std::uint64_t value() const { return hash_; }

 private:
  std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

// Adds the file's bytes; false when it cannot be read.
bool add_file(const std::filesystem::path& path, Fingerprint& fp) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return false;
  }
  char buffer[4096];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    fp.add(std::string_view(buffer, static_cast<std::size_t>(in.gcount())));
  }
  return !in.bad();
}

std::uint64_t fingerprint(const std::string& path) {
  namespace fs = std::filesystem;
  Fingerprint fp;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> files;
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      // is_regular_file follows symlinks: the kubelet's visible files point into ..data.
      if (!name.starts_with(".") && it->is_regular_file(ec)) {
        files.push_back(it->path());
      }
    }
    std::sort(files.begin(), files.end());
    fp.add("directory");
    for (const fs::path& file : files) {
      fp.end_field();
      fp.add(file.filename().string());
      fp.end_field();
      if (!add_file(file, fp)) {
        fp.add("unreadable");
      }
    }
    return fp.value();
  }
  fp.add("file");
  fp.end_field();
  if (!add_file(path, fp)) {
    Fingerprint missing;
    missing.add("missing");
    return missing.value();
  }
  return fp.value();
}

}  // namespace

FileWatch::FileWatch(std::vector<std::string> paths) : paths_(std::move(paths)) {
  reset();
}

std::vector<std::string> FileWatch::changed() {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < paths_.size(); ++i) {
    if (const std::uint64_t now = fingerprint(paths_[i]); now != fingerprints_[i]) {
      fingerprints_[i] = now;
      out.push_back(paths_[i]);
    }
  }
  return out;
}

void FileWatch::reset() {
  fingerprints_.clear();
  std::transform(paths_.begin(), paths_.end(), std::back_inserter(fingerprints_), fingerprint);
}

}  // namespace outbox
