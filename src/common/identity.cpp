#include "common/identity.hpp"

#include <unistd.h>

namespace outbox {

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

std::string process_identity() {
  return host_name() + "_" + std::to_string(::getpid());
}

}  // namespace outbox
