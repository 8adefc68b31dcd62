#pragma once

#include <string>

// Plain HTTP on loopback for tests and benchmarks: a port to give a server, and a GET of
// what it serves (health, metrics). No TLS, no redirects, no keep-alive.
namespace outbox::testbed {

// A TCP port on 127.0.0.1 that was free a moment ago.
unsigned short free_port();

// The body of GET http://127.0.0.1:<port><path>; empty if nothing answers.
std::string http_get(unsigned short port, const std::string& path);

// Sends `request` as it is to 127.0.0.1:<port> and returns the whole answer (status line,
// headers, body); empty if nothing answers.
std::string http_request(unsigned short port, const std::string& request);

}  // namespace outbox::testbed
