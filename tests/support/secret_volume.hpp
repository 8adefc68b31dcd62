#pragma once

#include <filesystem>
#include <map>
#include <string>

namespace outbox::testbed {

// A directory laid out as the kubelet lays out a Secret volume, for tests of what notices a
// rotation: each version in a timestamped directory, `..data` a symlink to the current one, each
// visible file a symlink through it. publish() writes a new version beside the old one and swaps
// `..data` to it with one rename, as the kubelet does when the Secret changes (and, with the same
// content, at its periodic resync). Removed on destruction.
class SecretVolume {
 public:
  SecretVolume();
  ~SecretVolume();
  SecretVolume(const SecretVolume&) = delete;
  SecretVolume& operator=(const SecretVolume&) = delete;

  // Makes `files` (name -> content) the volume's content.
  void publish(const std::map<std::string, std::string>& files);
  // The visible path of one file, or of the directory when `name` is empty.
  std::string path(const std::string& name = "") const;

 private:
  std::filesystem::path dir_;
  int versions_ = 0;
};

}  // namespace outbox::testbed
