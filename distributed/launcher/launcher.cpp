// See Note [Launcher and rendezvous] in docs/launcher.md.
#include "distributed/launcher/launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "distributed/rendezvous/socket.h"
#include "tensor/check.h"

extern char** environ;

namespace tg::distributed {
namespace {

using Clock = std::chrono::steady_clock;

int parse_int_arg(const std::string& flag, const std::string& text, int lo, int hi, const char* expected) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text.c_str(), &end, 10);
  bool ok = !text.empty() && *end == '\0' && errno == 0 && v >= lo && v <= hi;
  TG_CHECK(ok, "[tgrun] ", flag, "='", text, "': expected ", expected);
  return static_cast<int>(v);
}

double parse_seconds_arg(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  TG_CHECK(!text.empty() && *end == '\0' && std::isfinite(v) && v >= 0 && v <= 86400, "[tgrun] ", flag, "='", text,
           "': expected a number of seconds in 0..86400");
  return v;
}

// One started rank.
struct Child {
  pid_t pid;
  int rank;
  bool alive = true;
};

std::string describe_signal(int sig) {
  const char* name = strsignal(sig);
  return "signal " + std::to_string(sig) + " (" + (name ? name : "unknown") + ")";
}

// This process's environment with the job's variables replaced, as execve wants it.
std::vector<std::string> child_environment(const std::vector<std::pair<std::string, std::string>>& vars) {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    bool replaced = false;
    for (const auto& [name, value] : vars) replaced |= entry.compare(0, name.size() + 1, name + "=") == 0;
    if (!replaced) out.push_back(std::move(entry));
  }
  for (const auto& [name, value] : vars) out.push_back(name + "=" + value);
  return out;
}

// Forks and execs one rank; everything it needs is prepared before fork (no allocation after).
pid_t start_rank(const LaunchOptions& o, int local_rank, int port, const sigset_t& original_mask) {
  int rank = o.node_rank * o.nproc_per_node + local_rank;
  std::vector<std::string> env = child_environment({
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(o.nproc_per_node * o.nnodes)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(port)},
  });
  std::vector<char*> envp, argv;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> command = o.command;
  for (auto& s : command) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::string exec_failed = "tgrun: cannot run '" + o.command[0] + "': ";
  pid_t parent = getpid();

  pid_t pid = fork();
  TG_CHECK(pid >= 0, "[tgrun] fork failed for rank ", rank, ": ", std::strerror(errno));
  if (pid > 0) return pid;
  // The child stays in tgrun's process group, so Ctrl-C in a terminal reaches every rank.
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGTERM);  // a rank does not outlive a launcher killed outright
  if (getppid() != parent) _exit(128 + SIGTERM);
#endif
  signal(SIGCHLD, SIG_DFL);
  sigprocmask(SIG_SETMASK, &original_mask, nullptr);
  execvpe(argv[0], argv.data(), envp.data());
  int err = errno;
  ssize_t ignored = write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
  const char* reason = strerror(err);
  ignored = write(STDERR_FILENO, reason, strlen(reason));
  ignored = write(STDERR_FILENO, "\n", 1);
  (void)ignored;
  _exit(127);
}

}  // namespace

std::string launch_usage() {
  return "usage: tgrun [options] program [args...]\n"
         "Starts one process per local rank of a data-parallel job and stops them all when one fails.\n"
         "  --nproc-per-node N  processes on this host, one per GPU (default 1)\n"
         "  --nnodes M          hosts in the job, each running tgrun (default 1)\n"
         "  --node-rank K       this host's index, 0..M-1 (default 0)\n"
         "  --master-addr A     host of node 0, where rank 0's rendezvous store listens (default 127.0.0.1;\n"
         "                      required when M > 1)\n"
         "  --master-port P     its port (default: a free port when M is 1, 29500 otherwise)\n"
         "  --kill-timeout S    seconds from SIGTERM to SIGKILL when stopping ranks (default 10)\n"
         "  -h, --help          print this text\n"
         "Each process gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT.\n";
}

LaunchOptions parse_launch_args(int argc, const char* const* argv) {
  LaunchOptions o;
  bool addr_given = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      return o;
    }
    if (arg.rfind("-", 0) != 0) break;  // the program: everything from here on is its own
    std::string flag = arg, value;
    bool inline_value = false;
    if (auto eq = arg.find('='); eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inline_value = true;
    }
    for (char& c : flag) c = c == '_' ? '-' : c;  // torchrun also spells them with underscores
    static const char* known[] = {"--nproc-per-node", "--nnodes", "--node-rank", "--master-addr", "--master-port",
                                  "--kill-timeout"};
    bool is_known = false;
    for (const char* k : known) is_known |= flag == k;
    TG_CHECK(is_known, "[tgrun] unknown option '", arg, "': expected one of the options below before the program");
    if (!inline_value) {
      TG_CHECK(i + 1 < argc, "[tgrun] ", flag, " needs a value");
      value = argv[++i];
    }
    if (flag == "--nproc-per-node") {
      o.nproc_per_node = parse_int_arg(flag, value, 1, 4096, "a process count in 1..4096");
    } else if (flag == "--nnodes") {
      o.nnodes = parse_int_arg(flag, value, 1, 65536, "a host count in 1..65536");
    } else if (flag == "--node-rank") {
      o.node_rank = parse_int_arg(flag, value, 0, 65535, "a host index >= 0");
    } else if (flag == "--master-addr") {
      TG_CHECK(!value.empty(), "[tgrun] --master-addr is empty: expected the host name or address of node 0");
      o.master_addr = value;
      addr_given = true;
    } else if (flag == "--master-port") {
      o.master_port = parse_int_arg(flag, value, 1, 65535, "a TCP port in 1..65535");
    } else {
      o.kill_timeout_s = parse_seconds_arg(flag, value);
    }
  }
  for (; i < argc; ++i) o.command.emplace_back(argv[i]);
  TG_CHECK(!o.command.empty(), "[tgrun] no program given: expected the program to run (and its arguments) after the "
                               "options");
  TG_CHECK(o.node_rank < o.nnodes, "[tgrun] --node-rank ", o.node_rank, " with --nnodes ", o.nnodes,
           ": expected 0 <= node rank < nnodes");
  TG_CHECK(o.nnodes == 1 || addr_given, "[tgrun] --nnodes ", o.nnodes,
           " needs --master-addr: expected the address of node 0, reachable from every host");
  TG_CHECK(static_cast<int64_t>(o.nproc_per_node) * o.nnodes <= (1 << 24), "[tgrun] ", o.nproc_per_node, " x ",
           o.nnodes, " processes: expected a world size of at most 16777216");
  return o;
}

int launch(const LaunchOptions& o) {
  int port = o.master_port != 0 ? o.master_port : (o.nnodes == 1 ? net::find_free_port() : 29500);
  // Signals are taken synchronously (sigtimedwait) so that the supervisor has no handlers to race with.
  sigset_t watched, original;
  sigemptyset(&watched);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&watched, s);
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &dfl, nullptr);  // an inherited SIG_IGN would reap the ranks behind our back
  sigprocmask(SIG_BLOCK, &watched, &original);

  std::vector<Child> children;
  int exit_code = 0;
  bool stopping = false, killed = false;
  Clock::time_point kill_deadline{};
  auto stop_all = [&](int sig) {
    for (Child& c : children)
      if (c.alive) kill(c.pid, sig);
    stopping = true;
    kill_deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o.kill_timeout_s * 1000));
  };
  try {
    for (int local = 0; local < o.nproc_per_node; ++local)
      children.push_back({start_rank(o, local, port, original), o.node_rank * o.nproc_per_node + local});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tgrun: %s; stopping the ranks already started\n", e.what());
    exit_code = 1;
    stop_all(SIGTERM);
  }

  while (true) {
    int alive = 0;
    for (Child& c : children) {
      int status = 0;
      if (c.alive && waitpid(c.pid, &status, WNOHANG) == c.pid) {
        c.alive = false;
        bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (failed && !stopping) {
          bool others = false;
          for (const Child& d : children) others |= d.alive;
          std::string how = WIFSIGNALED(status) ? "was killed by " + describe_signal(WTERMSIG(status))
                                                : "exited with code " + std::to_string(WEXITSTATUS(status));
          std::fprintf(stderr, "tgrun: rank %d (pid %d) %s%s\n", c.rank, static_cast<int>(c.pid), how.c_str(),
                       others ? "; stopping the other ranks" : "");
          exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
          stop_all(SIGTERM);
        }
      }
      alive += c.alive ? 1 : 0;
    }
    if (alive == 0) break;
    if (stopping && !killed && Clock::now() >= kill_deadline) {
      for (const Child& c : children) {
        if (!c.alive) continue;
        std::fprintf(stderr, "tgrun: rank %d (pid %d) did not stop within %g s of SIGTERM; sending SIGKILL\n", c.rank,
                     static_cast<int>(c.pid), o.kill_timeout_s);
        kill(c.pid, SIGKILL);
      }
      killed = true;
    }
    // Wake up for a signal, at the kill deadline, or once a second to look again regardless.
    auto wait = std::chrono::milliseconds(1000);
    if (stopping && !killed)
      wait = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(kill_deadline - Clock::now()),
                        std::chrono::milliseconds(1), wait);
    timespec ts{static_cast<time_t>(wait.count() / 1000), static_cast<long>(wait.count() % 1000) * 1000000L};
    int sig = sigtimedwait(&watched, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      if (!stopping) {
        std::fprintf(stderr, "tgrun: received %s; stopping all ranks\n", describe_signal(sig).c_str());
        exit_code = 128 + sig;
        stop_all(sig);
      } else if (!killed) {
        std::fprintf(stderr, "tgrun: received %s again; killing all ranks\n", describe_signal(sig).c_str());
        kill_deadline = Clock::now();
      }
    }
  }
  sigprocmask(SIG_SETMASK, &original, nullptr);
  return exit_code;
}

int tgrun_main(int argc, const char* const* argv) {
  LaunchOptions options;
  try {
    options = parse_launch_args(argc, argv);
  } catch (const std::exception& e) {
    std::string message = e.what();
    if (message.rfind("[tgrun] ", 0) == 0) message.erase(0, 8);
    std::fprintf(stderr, "tgrun: error: %s\n%s", message.c_str(), launch_usage().c_str());
    return 2;
  }
  if (options.help) {
    std::fputs(launch_usage().c_str(), stdout);
    return 0;
  }
  try {
    return launch(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tgrun: %s\n", e.what());
    return 1;
  }
}

}  // namespace tg::distributed
