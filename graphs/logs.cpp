// See Note [Compile pipeline] in docs/compile_pipeline.md.
#include "graphs/logs.h"

#include <cstdlib>
#include <iostream>
#include <string>

namespace tg::graphs {

bool log_enabled(std::string_view channel) {
  const char* env = std::getenv("TG_LOGS");
  if (!env) return false;
  std::string_view all(env);
  while (!all.empty()) {
    const size_t comma = all.find(',');
    const std::string_view item = all.substr(0, comma);
    if (item == channel || item == "all") return true;
    if (comma == std::string_view::npos) break;
    all.remove_prefix(comma + 1);
  }
  return false;
}

void log_line(std::string_view channel, std::string_view text) {
  if (!log_enabled(channel)) return;
  std::cerr << "[tapegraph:" << channel << "] " << text << (text.ends_with('\n') ? "" : "\n");
}

}  // namespace tg::graphs
