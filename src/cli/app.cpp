#include "cli/app.hpp"

#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <string>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "common/log.hpp"
#include "common/redact.hpp"
#include "common/version.hpp"
#include "outbox/connection.hpp"

namespace outbox::cli {

namespace {

// The options before the command: logging and the settings file.
void add_global_options(CLI::App& app, std::string& log_level, std::string& log_format) {
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->envname("OUTBOX_LOG_LEVEL")
      ->capture_default_str();
  app.add_option("--log-format", log_format, "text or json")
      ->envname("OUTBOX_LOG_FORMAT")
      ->capture_default_str();
  // Settings from a file: one TOML section per command, flags by their long
  // names ([relay] batch-size = 1000). Flags on the command line win over the
  // file, and the file over the environment. A key no command knows is an
  // error, not silently ignored.
  app.set_config("--config", "",
                 "settings file (TOML; a [relay] section holds relay flags, e.g. "
                 "batch-size = 1000); give it before the command");
  app.allow_config_extras(CLI::config_extras_mode::error);
}

// Adds every subcommand; returns the action of each.
std::map<CLI::App*, Action> add_commands(CLI::App& app) {
  std::map<CLI::App*, Action> actions;
  auto add = [&](Action (*adder)(CLI::App&)) {
    auto before = app.get_subcommands({});
    Action action = adder(app);
    for (CLI::App* sub : app.get_subcommands({})) {
      if (std::find(before.begin(), before.end(), sub) == before.end()) {
        actions[sub] = std::move(action);
      }
    }
  };
  add(add_migrate_command);
  add(add_relay_command);
  add(add_compensate_command);
  add(add_cleanup_command);
  add(add_inspect_command);
  add(add_requeue_command);
  add(add_replay_command);
  add(add_controller_command);
  return actions;
}

// The first word of the command line that is not an option (nor an option's value), if it
// names no command. CLI11 reports a mistyped command as "A subcommand is required".
std::optional<std::string> unknown_command(CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--log-level" || arg == "--log-format" || arg == "--config") {
      ++i;
    } else if (!arg.empty() && arg[0] != '-') {
      auto subs = app.get_subcommands({});
      bool known =
          std::any_of(subs.begin(), subs.end(), [&](CLI::App* s) { return s->check_name(arg); });
      if (!known) {
        return arg;
      }
      break;
    }
  }
  return std::nullopt;
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{"outbox-operator: runs the transactional outbox pattern on Kubernetes"};
  app.set_version_flag("--version", std::string("outbox-operator ") + kVersion);
  app.require_subcommand(1);
  std::string log_level = "info";
  std::string log_format = "text";
  add_global_options(app, log_level, log_format);
  std::map<CLI::App*, Action> actions = add_commands(app);

  if (const auto unknown = unknown_command(app, argc, argv)) {
    std::cerr << "unknown command \"" << *unknown << "\"; run with --help to see the commands\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!configure_logging(log_level, log_format, log_fields_from_environment())) {
    std::cerr << "invalid --log-level or --log-format\n";
    return 2;
  }
  for (CLI::App* sub : app.get_subcommands()) {
    try {
      return actions.at(sub)();
    } catch (const std::exception& e) {
      // One line (libpq ends its messages with a newline, which the text log would spell out
      // as "\n"), without the secrets the command read (libpq quotes the part of a DSN it cannot
      // parse).
      spdlog::error("{}: {}", sub->get_name(), redact(one_line(e.what())));
      return 1;
    }
  }
  return 2;
}

}  // namespace outbox::cli
