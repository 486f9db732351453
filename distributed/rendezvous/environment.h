// Where this process sits in a data-parallel job, read from the variables a launcher sets
// (tgrun, torchrun): RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
#pragma once

#include <string>

namespace tg::distributed {

// The job layout as seen by one process; the defaults describe a single process on this host.
struct Environment {
  int rank = 0;                           // this process's index among all processes, 0 .. world_size-1
  int world_size = 1;                     // processes in the whole job, over all hosts
  int local_rank = 0;                     // index among the processes of this host (picks the GPU)
  int local_world_size = 1;               // processes on this host
  std::string master_addr = "127.0.0.1";  // host of rank 0, where the rendezvous store listens
  int master_port = 29500;                // port of the rendezvous store

  // Reads the launcher's variables. With none of them set, a single process (the defaults above);
  // otherwise RANK and WORLD_SIZE are required, LOCAL_WORLD_SIZE defaults to WORLD_SIZE (one host),
  // LOCAL_RANK to RANK modulo LOCAL_WORLD_SIZE, MASTER_ADDR/MASTER_PORT to the defaults. Malformed or
  // inconsistent values throw tg::Error naming the variable, its value and what was expected.
  static Environment from_env();
};

}  // namespace tg::distributed
