#pragma once

namespace outbox {
// Set by CMake from project(VERSION); one place to bump.
inline constexpr const char* kVersion = OUTBOX_VERSION;
}  // namespace outbox
