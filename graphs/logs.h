// TG_LOGS: which pipeline stages print to stderr (graphs, partition, recompiles, cudagraphs, capture,
// fusion).
#pragma once

#include <string_view>

namespace tg::graphs {

// True when TG_LOGS (comma-separated) names `channel` or "all".
bool log_enabled(std::string_view channel);
// Prints "[tapegraph:<channel>] <text>" to stderr when the channel is enabled.
void log_line(std::string_view channel, std::string_view text);

}  // namespace tg::graphs
