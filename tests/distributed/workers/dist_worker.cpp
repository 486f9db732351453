// A rank for the launcher tests: meets its peers through TcpStore as tgrun's variables describe,
// writes what it saw to <outdir>/rank<R>.txt, then behaves as the mode asks:
//   rendezvous  exit 0
//   sigkill     rank 1 kills itself with SIGKILL; rank 0 blocks in a get that never returns
//   exit CODE   rank 1 exits with CODE; rank 0 sleeps
//   stubborn CODE  like exit, but the ranks ignore SIGTERM (only SIGKILL stops them)
//   sleep       no rendezvous; every rank writes its file and sleeps (to be interrupted)
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "distributed/rendezvous/environment.h"
#include "distributed/rendezvous/store.h"

namespace {

using namespace std::chrono_literals;

// Writes the file whole (a rename), so the test never reads half of it.
void write_result(const std::string& dir, int rank, const std::string& text) {
  std::string path = dir + "/rank" + std::to_string(rank) + ".txt";
  {
    std::ofstream out(path + ".tmp");
    out << text;
  }
  std::rename((path + ".tmp").c_str(), path.c_str());
}

// Bounded, so a worker left behind by a broken test still goes away.
void sleep_long() {
  for (int i = 0; i < 600; ++i) usleep(100 * 1000);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: dist_worker MODE OUTDIR [CODE]\n");
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  const int code = argc > 3 ? std::atoi(argv[3]) : 0;
  if (mode == "stubborn") signal(SIGTERM, SIG_IGN);  // from the start: a stop may come at any time
  try {
    auto env = tg::distributed::Environment::from_env();
    std::string line = "rank=" + std::to_string(env.rank) + " world_size=" + std::to_string(env.world_size) +
                       " local_rank=" + std::to_string(env.local_rank) +
                       " local_world_size=" + std::to_string(env.local_world_size);
    if (mode == "sleep") {
      write_result(dir, env.rank, line + "\n");
      sleep_long();
      return 0;
    }
    auto store = tg::distributed::TcpStore::from_environment(env, 20s);
    store->set("rank/" + std::to_string(env.rank), std::to_string(env.rank));
    std::string peers;
    for (int r = 0; r < env.world_size; ++r) peers += (r ? "," : "") + store->get("rank/" + std::to_string(r));
    store->barrier("rendezvous");
    write_result(dir, env.rank, line + " peers=" + peers + "\n");
    if (mode == "rendezvous") return 0;
    if (env.rank == 1) {
      store->get("written/0");  // fail only once rank 0's file is complete
      if (mode == "sigkill") kill(getpid(), SIGKILL);
      return code;
    }
    store->set("written/0", "");
    if (mode == "sigkill") store->get("never_set");  // blocks for the store's whole timeout
    sleep_long();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_worker: %s\n", e.what());
    return 1;
  }
}
