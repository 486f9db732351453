// See Note [Launcher and rendezvous] in docs/launcher.md.
#include "distributed/rendezvous/environment.h"

#include <cerrno>
#include <cstdlib>
#include <optional>

#include "tensor/check.h"

namespace tg::distributed {
namespace {

// The variable's value, or nothing when it is unset (an empty value counts as set: it is an error).
std::optional<std::string> read_var(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

// Parses a whole decimal integer; anything else (empty, trailing text, overflow) is an error.
int parse_int(const char* name, const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  long value = std::strtol(begin, &end, 10);
  bool ok = !text.empty() && end == begin + text.size() && errno == 0 && value >= -(1L << 30) &&
            value <= (1L << 30) && text.find_first_of(" \t\n") == std::string::npos;
  TG_CHECK(ok, "[distributed] ", name, "='", text, "' is not a number: expected a decimal integer");
  return static_cast<int>(value);
}

}  // namespace

Environment Environment::from_env() {
  Environment env;
  auto rank = read_var("RANK");
  auto world = read_var("WORLD_SIZE");
  auto local_rank = read_var("LOCAL_RANK");
  auto local_world = read_var("LOCAL_WORLD_SIZE");
  auto addr = read_var("MASTER_ADDR");
  auto port = read_var("MASTER_PORT");
  if (!rank && !world && !local_rank && !local_world && !addr && !port) return env;

  if (!rank || !world) {
    std::string given;
    for (auto [name, value] : {std::pair{"RANK", &rank}, {"WORLD_SIZE", &world}, {"LOCAL_RANK", &local_rank},
                               {"LOCAL_WORLD_SIZE", &local_world}, {"MASTER_ADDR", &addr},
                               {"MASTER_PORT", &port}}) {
      if (*value) given += (given.empty() ? "" : ", ") + std::string(name) + "=" + **value;
    }
    TG_FAIL("[distributed] ", given, " set but ", !rank && !world ? "RANK and WORLD_SIZE are" : !rank ? "RANK is" : "WORLD_SIZE is",
            " not: expected RANK and WORLD_SIZE (a launcher such as tgrun sets all of them), or none of these "
            "variables for a single process");
  }
  env.world_size = parse_int("WORLD_SIZE", *world);
  TG_CHECK(env.world_size >= 1, "[distributed] WORLD_SIZE=", env.world_size, ": expected WORLD_SIZE >= 1");
  env.rank = parse_int("RANK", *rank);
  TG_CHECK(env.rank >= 0 && env.rank < env.world_size, "[distributed] RANK=", env.rank, " but WORLD_SIZE=",
           env.world_size, ": expected 0 <= RANK < WORLD_SIZE");

  env.local_world_size = local_world ? parse_int("LOCAL_WORLD_SIZE", *local_world) : env.world_size;
  TG_CHECK(env.local_world_size >= 1 && env.local_world_size <= env.world_size, "[distributed] LOCAL_WORLD_SIZE=",
           env.local_world_size, " but WORLD_SIZE=", env.world_size, ": expected 1 <= LOCAL_WORLD_SIZE <= WORLD_SIZE");
  env.local_rank = local_rank ? parse_int("LOCAL_RANK", *local_rank) : env.rank % env.local_world_size;
  TG_CHECK(env.local_rank >= 0 && env.local_rank < env.local_world_size, "[distributed] LOCAL_RANK=", env.local_rank,
           " but LOCAL_WORLD_SIZE=", env.local_world_size, ": expected 0 <= LOCAL_RANK < LOCAL_WORLD_SIZE");

  if (addr) {
    TG_CHECK(!addr->empty(), "[distributed] MASTER_ADDR is empty: expected the host name or address of rank 0");
    env.master_addr = *addr;
  }
  if (port) {
    env.master_port = parse_int("MASTER_PORT", *port);
    TG_CHECK(env.master_port >= 1 && env.master_port <= 65535, "[distributed] MASTER_PORT=", env.master_port,
             ": expected a TCP port in 1..65535");
  }
  return env;
}

}  // namespace tg::distributed
