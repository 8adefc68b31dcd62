#pragma once

#include <string>

namespace outbox {

// This host's name; in Kubernetes, the pod's name.
std::string host_name();

// Who this process is, in logs, Leases and Events, when nothing names it:
// "<host>_<pid>". Every long-running command uses this one format.
std::string process_identity();

}  // namespace outbox
