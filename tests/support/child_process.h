// Child processes for the tests that start tgrun and workers: run a shell command and collect its
// output, exit status and wall time.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace tg::testing {

// How a command ended: its exit status (128 + the signal when killed), its output and errors
// together, and how long it ran.
struct ProcessResult {
  int status = -1;
  std::string output;
  double seconds = 0;
};

// A command started in the background, its output and errors through one pipe.
struct StartedProcess {
  FILE* pipe = nullptr;
  std::chrono::steady_clock::time_point began;
};

// Starts `command` under the shell without waiting for it.
StartedProcess start_command(const std::string& command);
// Reads the started command's output to its end and waits for it.
ProcessResult finish_command(StartedProcess started);
// Runs `command` to its end.
ProcessResult run_command(const std::string& command);

}  // namespace tg::testing
