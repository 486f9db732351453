// tgrun: ranks started with the right variables meet through TcpStore (one host, and two "hosts"
// on loopback); a rank killed by a signal or exiting non-zero stops the job with its code; a rank
// that ignores SIGTERM is killed; SIGINT stops every rank; bad arguments print the usage.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "distributed/launcher/launcher.h"
#include "distributed/rendezvous/socket.h"
#include "support/test_support.h"

namespace tg::distributed {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// How a finished process ended: its exit code (128 + signal when killed) and what it printed.
struct Finished {
  int code = -1;
  std::string out, err;
  Clock::duration took{};
};

class Tgrun : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tg_tgrun_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Starts tgrun with `args`, its output going to files named after `tag`.
  pid_t start(const std::vector<std::string>& args, const std::string& tag = "tgrun") {
    std::vector<std::string> all{TG_TGRUN_PATH};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string out = dir_ + "/" + tag + ".out", err = dir_ + "/" + tag + ".err";
    pid_t pid = fork();
    if (pid == 0) {
      int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(o, STDOUT_FILENO);
      dup2(e, STDERR_FILENO);
      execv(argv[0], argv.data());
      _exit(126);
    }
    started_[pid] = {tag, Clock::now()};
    return pid;
  }

  // Waits for a started tgrun (killing it after `limit`, a test failure).
  Finished finish(pid_t pid, Clock::duration limit = 20s) {
    auto [tag, began] = started_.at(pid);
    Finished f;
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (Clock::now() - began > limit) {
        ADD_FAILURE() << "tgrun did not finish within the limit; killing it";
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(10ms);
    }
    f.took = Clock::now() - began;
    f.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    f.out = read_file(dir_ + "/" + tag + ".out");
    f.err = read_file(dir_ + "/" + tag + ".err");
    return f;
  }

  Finished run(const std::vector<std::string>& args) { return finish(start(args)); }

  std::vector<std::string> worker(const std::string& mode, const std::string& code = "") {
    std::vector<std::string> a{TG_DIST_WORKER_PATH, mode, dir_};
    if (!code.empty()) a.push_back(code);
    return a;
  }
  std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  std::string rank_file(int rank) { return read_file(dir_ + "/rank" + std::to_string(rank) + ".txt"); }

  std::string dir_;
  std::map<pid_t, std::pair<std::string, Clock::time_point>> started_;
};

TEST_F(Tgrun, TwoRanksMeetThroughTheStore) {
  Finished f = run(cat({"--nproc-per-node", "2"}, worker("rendezvous")));
  EXPECT_EQ(f.code, 0) << f.err;
  EXPECT_EQ(rank_file(0), "rank=0 world_size=2 local_rank=0 local_world_size=2 peers=0,1\n");
  EXPECT_EQ(rank_file(1), "rank=1 world_size=2 local_rank=1 local_world_size=2 peers=0,1\n");
}

TEST_F(Tgrun, TwoNodesOnLoopback) {
  const std::string port = std::to_string(net::find_free_port());
  auto node = [&](const std::string& node_rank) {
    return start(cat({"--nnodes", "2", "--node-rank", node_rank, "--nproc-per-node", "1", "--master-addr", "127.0.0.1",
                      "--master-port", port},
                     worker("rendezvous")),
                 "node" + node_rank);
  };
  pid_t second = node("1");  // the non-master host may start first: it retries
  pid_t first = node("0");
  Finished f0 = finish(first), f1 = finish(second);
  EXPECT_EQ(f0.code, 0) << f0.err;
  EXPECT_EQ(f1.code, 0) << f1.err;
  EXPECT_EQ(rank_file(0), "rank=0 world_size=2 local_rank=0 local_world_size=1 peers=0,1\n");
  EXPECT_EQ(rank_file(1), "rank=1 world_size=2 local_rank=0 local_world_size=1 peers=0,1\n");
}

TEST_F(Tgrun, RankKilledBySignalStopsTheJob) {
  Finished f = run(cat({"--nproc-per-node", "2", "--kill-timeout", "5"}, worker("sigkill")));
  EXPECT_EQ(f.code, 137) << f.err;
  EXPECT_LT(f.took, 8s);
  EXPECT_NE(f.err.find("tgrun: rank 1 (pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find(") was killed by signal 9 (Killed); stopping the other ranks"), std::string::npos) << f.err;
  EXPECT_FALSE(rank_file(0).empty());  // both got through the rendezvous first
  EXPECT_FALSE(rank_file(1).empty());
}

TEST_F(Tgrun, NonzeroExitCodePropagates) {
  Finished f = run(cat({"--nproc-per-node", "2"}, worker("exit", "3")));
  EXPECT_EQ(f.code, 3) << f.err;
  EXPECT_LT(f.took, 8s);
  EXPECT_NE(f.err.find(") exited with code 3; stopping the other ranks"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("tgrun: rank 1 (pid "), std::string::npos) << f.err;
}

TEST_F(Tgrun, RankIgnoringSigtermIsKilledAfterTheTimeout) {
  Finished f = run(cat({"--nproc-per-node", "2", "--kill-timeout", "0.5"}, worker("stubborn", "4")));
  EXPECT_EQ(f.code, 4) << f.err;
  EXPECT_LT(f.took, 8s);
  EXPECT_NE(f.err.find("tgrun: rank 0 (pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("did not stop within 0.5 s of SIGTERM; sending SIGKILL"), std::string::npos) << f.err;
}

TEST_F(Tgrun, InterruptStopsEveryRank) {
  pid_t pid = start(cat({"--nproc-per-node", "2"}, worker("sleep")));
  auto began = Clock::now();
  while ((rank_file(0).empty() || rank_file(1).empty()) && Clock::now() - began < 15s)
    std::this_thread::sleep_for(20ms);
  ASSERT_FALSE(rank_file(1).empty());
  kill(pid, SIGINT);
  Finished f = finish(pid);
  EXPECT_EQ(f.code, 130) << f.err;
  EXPECT_NE(f.err.find("tgrun: received signal 2 (Interrupt); stopping all ranks"), std::string::npos) << f.err;
}

TEST_F(Tgrun, MissingProgramExits127) {
  Finished f = run({dir_ + "/no_such_program"});
  EXPECT_EQ(f.code, 127) << f.err;
  EXPECT_NE(f.err.find("cannot run '" + dir_ + "/no_such_program'"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("tgrun: rank 0 (pid "), std::string::npos) << f.err;
}

TEST_F(Tgrun, BadArgumentsPrintUsageAndExit2) {
  auto expect_usage = [&](const std::vector<std::string>& args, const std::string& message) {
    Finished f = run(args);
    EXPECT_EQ(f.code, 2) << f.err;
    EXPECT_NE(f.err.find("tgrun: error: " + message), std::string::npos) << f.err;
    EXPECT_NE(f.err.find("usage: tgrun [options] program [args...]"), std::string::npos) << f.err;
  };
  expect_usage({}, "no program given");
  expect_usage({"--nproc-per-node", "two", "prog"}, "--nproc-per-node='two': expected a process count in 1..4096");
  expect_usage({"--nproc-per-node", "0", "prog"}, "--nproc-per-node='0': expected a process count");
  expect_usage({"--bogus", "prog"}, "unknown option '--bogus'");
  expect_usage({"--master-port"}, "--master-port needs a value");
  expect_usage({"--master-port=99999", "prog"}, "--master-port='99999': expected a TCP port in 1..65535");
  expect_usage({"--nnodes", "2", "prog"}, "--nnodes 2 needs --master-addr");
  expect_usage({"--nnodes", "2", "--node-rank", "2", "--master-addr", "h", "prog"},
               "--node-rank 2 with --nnodes 2: expected 0 <= node rank < nnodes");
  expect_usage({"--kill-timeout", "-1", "prog"}, "--kill-timeout='-1': expected a number of seconds");
  Finished help = run({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("usage: tgrun"), std::string::npos);
}

TEST(TgrunArgs, OptionsStopAtTheProgram) {
  const char* argv[] = {"tgrun", "--nproc_per_node=4", "--master-port", "1234", "--kill-timeout=2.5",
                        "prog",  "--nproc-per-node",   "x",             "-v"};
  LaunchOptions o = parse_launch_args(9, argv);
  EXPECT_EQ(o.nproc_per_node, 4);
  EXPECT_EQ(o.master_port, 1234);
  EXPECT_EQ(o.kill_timeout_s, 2.5);
  EXPECT_EQ(o.nnodes, 1);
  EXPECT_EQ(o.command, (std::vector<std::string>{"prog", "--nproc-per-node", "x", "-v"}));
  const char* dashdash[] = {"tgrun", "--", "-weird-name"};
  EXPECT_EQ(parse_launch_args(3, dashdash).command, std::vector<std::string>{"-weird-name"});
}

}  // namespace
}  // namespace tg::distributed
