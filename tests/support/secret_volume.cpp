#include "support/secret_volume.hpp"

#include <fstream>

#include "support/testbed.hpp"

namespace outbox::testbed {

namespace fs = std::filesystem;

SecretVolume::SecretVolume() : dir_(fs::temp_directory_path() / unique_name("secret-volume")) {
  fs::create_directories(dir_);
}

SecretVolume::~SecretVolume() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void SecretVolume::publish(const std::map<std::string, std::string>& files) {
  const std::string version = "..version_" + std::to_string(++versions_);
  fs::create_directory(dir_ / version);
  for (const auto& [name, content] : files) {
    std::ofstream(dir_ / version / name) << content;
  }
  fs::create_directory_symlink(version, dir_ / "..data_tmp");
  fs::rename(dir_ / "..data_tmp", dir_ / "..data");
  for (const auto& [name, content] : files) {
    if (!fs::is_symlink(dir_ / name)) {
      fs::create_symlink(fs::path("..data") / name, dir_ / name);
    }
  }
}

std::string SecretVolume::path(const std::string& name) const {
  return (name.empty() ? dir_ : dir_ / name).string();
}

}  // namespace outbox::testbed
