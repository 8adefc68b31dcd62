#pragma once

#include <functional>
#include <string>

namespace CLI {
class App;
}

namespace outbox::cli {

// Parses the command line and runs the chosen subcommand; returns the process exit code.
int run(int argc, char** argv);

// Each subcommand file defines one of these; app.cpp lists them.
// The returned action runs after parsing (and after logging is configured).
using Action = std::function<int()>;
Action add_migrate_command(CLI::App& app);
Action add_relay_command(CLI::App& app);
Action add_compensate_command(CLI::App& app);
Action add_cleanup_command(CLI::App& app);
Action add_inspect_command(CLI::App& app);
Action add_requeue_command(CLI::App& app);
Action add_replay_command(CLI::App& app);
Action add_controller_command(CLI::App& app);

}  // namespace outbox::cli
