// tgrun: launches a data-parallel job's processes on this host (see launcher.h and the README).
// See Note [Launcher and rendezvous] in docs/launcher.md.
#include "distributed/launcher/launcher.h"

int main(int argc, char** argv) { return tg::distributed::tgrun_main(argc, argv); }
