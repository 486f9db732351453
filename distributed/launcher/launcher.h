// The tgrun launcher: starts one process per local rank of a data-parallel job with the variables
// Environment::from_env() reads, and supervises them (one failure stops the whole job).
#pragma once

#include <string>
#include <vector>

namespace tg::distributed {

// What tgrun was asked to do, from its command line.
struct LaunchOptions {
  int nproc_per_node = 1;               // processes started on this host (one per GPU)
  int nnodes = 1;                       // hosts in the job, each running its own tgrun
  int node_rank = 0;                    // this host's index among them
  std::string master_addr = "127.0.0.1";  // host of node 0, where rank 0's rendezvous store listens
  int master_port = 0;                  // 0: a free port (one host) or 29500 (several hosts)
  double kill_timeout_s = 10;           // grace between SIGTERM and SIGKILL when stopping ranks
  bool help = false;                    // -h/--help: print the usage and start nothing
  std::vector<std::string> command;     // the program and its arguments
};

// Parses tgrun's arguments (argv[0] is tgrun itself); throws tg::Error saying what was wrong.
LaunchOptions parse_launch_args(int argc, const char* const* argv);
// The usage text printed for --help and after an argument error.
std::string launch_usage();
// Starts the processes and waits for them; returns tgrun's exit code: 0 when all ranks exit 0,
// otherwise the first failing rank's code (128 + signal for a rank killed by a signal).
int launch(const LaunchOptions& options);
// tgrun's whole main: parse (usage and exit code 2 on bad arguments), then launch.
int tgrun_main(int argc, const char* const* argv);

}  // namespace tg::distributed
