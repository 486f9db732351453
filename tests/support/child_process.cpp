#include "support/child_process.h"

#include <sys/wait.h>

#include <array>

namespace tg::testing {

StartedProcess start_command(const std::string& command) {
  return {popen((command + " 2>&1").c_str(), "r"), std::chrono::steady_clock::now()};
}

ProcessResult finish_command(StartedProcess started) {
  ProcessResult r;
  if (!started.pipe) return r;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), static_cast<int>(buffer.size()), started.pipe)) r.output += buffer.data();
  const int status = pclose(started.pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started.began).count();
  return r;
}

ProcessResult run_command(const std::string& command) { return finish_command(start_command(command)); }

}  // namespace tg::testing
