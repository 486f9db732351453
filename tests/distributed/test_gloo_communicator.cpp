// The CPU backend (Gloo's collectives) with 1 to 4 ranks as threads of this process: every
// collective against float64 references, uneven and empty sizes, every dtype and reduce op, the
// same bits on every rank, 16-bit floats rounded once, NaN and integer overflow in the reductions
// tapegraph gives Gloo, the store adapter Gloo meets through, the addresses that tell which rank a
// Gloo message is about, SIGPIPE kept from ending the process, and the errors of a rank that never
// comes, one that leaves, ranks that issue different collectives and an address that is not this
// host's.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

#include "distributed/collectives/collectives.h"
#include "distributed/collectives/gloo/peer_addresses.h"
#include "distributed/collectives/gloo/sigpipe_block.h"
#include "distributed/collectives/gloo/store_adapter.h"
#include "distributed/rendezvous/store.h"
#include "support/test_support.h"
#include "support/thread_ranks.h"

namespace tg::distributed {
namespace {

using namespace std::chrono_literals;
using testing::run_ranks;
using testing::run_ranks_collecting;

const std::vector<int64_t> kSizes = {0, 1, 7, 1003};

// Rank r's input: random values exactly representable in `dtype` (integers for integer dtypes).
Tensor rank_input(int r, int64_t n, DType dtype) {
  manual_seed(100 + static_cast<uint64_t>(r) * 7 + static_cast<uint64_t>(n));
  if (is_integral(dtype, false)) return randint(-1000, 1000, {n}).to(dtype);
  if (dtype == kBool) return randint(0, 2, {n}).to(kBool);
  return (randn({n}) * (r + 1.0)).to(dtype);
}

// The reduction over ranks in float64 (ints in int64), as the expected value before rounding.
Tensor reference(const TensorList& inputs, ReduceOp op) {
  const bool integral = !is_floating(inputs[0].dtype());
  Tensor acc = inputs[0].to(integral ? kInt64 : kFloat64);
  for (size_t r = 1; r < inputs.size(); ++r) {
    Tensor x = inputs[r].to(acc.dtype());
    acc = op == ReduceOp::Max ? maximum(acc, x) : acc + x;
  }
  if (op == ReduceOp::Avg) acc = acc / static_cast<double>(inputs.size());
  return acc;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && a.dtype() == b.dtype() &&
         (a.numel() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.numel() * a.element_size()) == 0);
}

void expect_result(const Tensor& got, const Tensor& want, DType dtype, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.dtype(), dtype);
  if (!is_floating(dtype)) {
    EXPECT_TRUE(same_bits(got, want.to(dtype)));
  } else if (dtype == kFloat64) {
    testing::expect_close(got, want, 1e-13, 1e-13);
  } else if (dtype == kFloat32) {
    testing::expect_close(got, want, 1e-6, 1e-5);
  } else {
    // Reduced in float32 (exact for a few 16-bit values) and rounded once: the float64 value rounded.
    testing::expect_close(got.to(kFloat64), want.to(dtype).to(kFloat64), dtype == kFloat16 ? 1e-3 : 8e-3, 1e-6);
  }
}

std::vector<ReduceOp> ops_for(DType dtype) {
  if (is_floating(dtype)) return {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max};
  return {ReduceOp::Sum, ReduceOp::Max};
}

const std::vector<DType> kDtypes = {kFloat32, kFloat64, kBFloat16, kFloat16, kInt32, kInt64};

// One collective's operands on every rank, and what it is called in failure messages.
struct Case {
  std::string what;
  DType dtype;
  ReduceOp op;
  int64_t n;
  TensorList in, out;
};

// Every dtype, reduce op and size, each rank's inputs made here (tensors are made on this thread).
std::vector<Case> reduction_cases(int world, int64_t in_blocks, int64_t out_blocks) {
  std::vector<Case> cases;
  for (DType dtype : kDtypes) {
    for (ReduceOp op : ops_for(dtype)) {
      for (int64_t n : kSizes) {
        Case c{"world " + std::to_string(world) + " " + std::string(dtype_name(dtype)) + " " + reduce_op_name(op) +
                   " n=" + std::to_string(n),
               dtype, op, n, {}, {}};
        for (int r = 0; r < world; ++r) {
          c.in.push_back(rank_input(r + static_cast<int>(cases.size()) * 10, in_blocks * n, dtype));
          c.out.push_back(empty({out_blocks * n}, {.dtype = dtype}));
        }
        cases.push_back(std::move(c));
      }
    }
  }
  return cases;
}

TEST(GlooCommunicator, AllReduceEveryDtypeOpAndSize) {
  for (int world = 1; world <= 4; ++world) {
    std::vector<Case> cases = reduction_cases(world, 1, 1);
    run_ranks(world, [&](ProcessGroup& g) {
      for (Case& c : cases) g.all_reduce(c.in[g.rank()], c.out[g.rank()], c.op);
    });
    for (const Case& c : cases) {
      const Tensor want = reference(c.in, c.op);
      for (int r = 0; r < world; ++r) {
        expect_result(c.out[r], want, c.dtype, c.what + " rank " + std::to_string(r));
        EXPECT_TRUE(same_bits(c.out[r], c.out[0])) << c.what << ": rank " << r << " differs from rank 0";
      }
    }
  }
}

TEST(GlooCommunicator, AllReduceInPlaceLargeAndBool) {
  const int world = 3;
  const int64_t n = 300'001;  // more than Gloo's 1 MiB segments, and not a multiple of the world size
  TensorList data, in;
  for (int r = 0; r < world; ++r) {
    in.push_back(rank_input(r, n, kFloat32));
    data.push_back(in.back().clone());
  }
  run_ranks(world, [&](ProcessGroup& g) { g.all_reduce(data[g.rank()], data[g.rank()], ReduceOp::Sum); });
  for (int r = 0; r < world; ++r) {
    testing::expect_close(data[r], reference(in, ReduceOp::Sum), 1e-5, 1e-5);
    EXPECT_TRUE(same_bits(data[r], data[0]));
  }
  // Booleans: sum and max are "or" (as NCCL's process groups do).
  TensorList flags = {tensor({true, false, false, false}), tensor({false, false, true, false})};
  TensorList got = {empty({4}, {.dtype = kBool}), empty({4}, {.dtype = kBool})};
  run_ranks(2, [&](ProcessGroup& g) { g.all_reduce(flags[g.rank()], got[g.rank()], ReduceOp::Sum); });
  for (const Tensor& t : got) EXPECT_TRUE(same_bits(t, tensor({true, false, true, false})));
}

TEST(GlooCommunicator, SixteenBitFloatsAreRoundedOnce) {
  // 1 + 2^-11 + 2^-11 is 1 + 2^-10 in float16; rounding after each hop would give 1 twice (ties to even).
  const int world = 3;
  TensorList in, out;
  for (int r = 0; r < world; ++r) {
    in.push_back(tensor({r == 0 ? 1.0f : 0.00048828125f}).to(kFloat16));
    out.push_back(empty({1}, {.dtype = kFloat16}));
  }
  run_ranks(world, [&](ProcessGroup& g) { g.all_reduce(in[g.rank()], out[g.rank()], ReduceOp::Sum); });
  for (const Tensor& t : out) EXPECT_EQ(t.to(kFloat64).item<double>(), 1.0 + 1.0 / 1024);
}

TEST(GlooCommunicator, AllReduceIntoPacksAndAverages) {
  const int world = 3;
  std::vector<TensorList> ins(world);
  TensorList flat;
  for (int r = 0; r < world; ++r) {
    ins[r] = {rank_input(r, 5, kFloat32).view({5}), rank_input(r + 10, 6, kFloat32).view({2, 3}),
              rank_input(r + 20, 1, kFloat32)};
    flat.push_back(empty({12}));
  }
  run_ranks(world, [&](ProcessGroup& g) { g.all_reduce_into(ins[g.rank()], flat[g.rank()], ReduceOp::Avg); });
  for (int r = 0; r < world; ++r) {
    int64_t offset = 0;
    for (size_t k = 0; k < ins[0].size(); ++k) {
      TensorList parts;
      for (int q = 0; q < world; ++q) parts.push_back(ins[q][k].reshape({-1}));
      const int64_t n = parts[0].numel();
      testing::expect_close(flat[r].narrow(0, offset, n), reference(parts, ReduceOp::Avg), 1e-6, 1e-6);
      offset += n;
    }
    EXPECT_TRUE(same_bits(flat[r], flat[0]));
  }
}

TEST(GlooCommunicator, BroadcastFromEveryRootSmallAndLarge) {
  for (int world = 1; world <= 4; ++world) {
    std::vector<Case> cases;
    for (int root : {0, world - 1}) {
      for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{600'000}}) {  // 600k float32: 2.4 MB
        Case c{"world " + std::to_string(world) + " root " + std::to_string(root) + " n=" + std::to_string(n),
               kFloat32, ReduceOp::Sum, root, {}, {}};
        for (int r = 0; r < world; ++r) {
          c.in.push_back(rank_input(r, n, kFloat32));
          c.out.push_back(zeros({n}));
        }
        cases.push_back(std::move(c));
      }
    }
    run_ranks(world, [&](ProcessGroup& g) {
      for (Case& c : cases) g.broadcast(c.in[g.rank()], c.out[g.rank()], static_cast<int>(c.n));
    });
    for (const Case& c : cases)
      for (int r = 0; r < world; ++r) EXPECT_TRUE(same_bits(c.out[r], c.in[c.n])) << c.what << " rank " << r;
  }
}

TEST(GlooCommunicator, AllGatherAndReduceScatter) {
  for (int world = 1; world <= 4; ++world) {
    std::vector<Case> gathers;
    for (DType dtype : kDtypes) {
      for (int64_t n : kSizes) {
        Case c{std::string(dtype_name(dtype)) + " n=" + std::to_string(n), dtype, ReduceOp::Sum, n, {}, {}};
        for (int r = 0; r < world; ++r) {
          c.in.push_back(rank_input(r, n, dtype));
          c.out.push_back(empty({world * n}, {.dtype = dtype}));
        }
        gathers.push_back(std::move(c));
      }
    }
    std::vector<Case> scatters = reduction_cases(world, world, 1);
    run_ranks(world, [&](ProcessGroup& g) {
      for (Case& c : gathers) g.all_gather(c.in[g.rank()], c.out[g.rank()]);
      for (Case& c : scatters) g.reduce_scatter(c.in[g.rank()], c.out[g.rank()], c.op);
    });
    for (const Case& c : gathers)
      for (int r = 0; r < world; ++r) EXPECT_TRUE(same_bits(c.out[r], cat(c.in, 0))) << "all_gather " << c.what;
    for (const Case& c : scatters) {
      const Tensor want = reference(c.in, c.op);
      for (int r = 0; r < world; ++r)
        expect_result(c.out[r], want.narrow(0, r * c.n, c.n), c.dtype,
                      "reduce_scatter " + c.what + " rank " + std::to_string(r));
    }
  }
}

TEST(GlooCommunicator, CollectiveOpsAndGradientsAcrossThreads) {
  const int world = 2;
  TensorList x(world), summed(world), grads(world), gathered(world);
  for (int r = 0; r < world; ++r) x[r] = rank_input(r, 4, kFloat64).requires_grad_(true);
  run_ranks(world, [&](ProcessGroup& g) {
    auto self = std::shared_ptr<ProcessGroup>(&g, [](ProcessGroup*) {});
    const int r = g.rank();
    const Tensor s = all_reduce(x[r], ReduceOp::Sum, self);
    (s * s).sum().backward();  // d/dx_r = all_reduce(2 * sum) = 2 * world * sum
    summed[r] = s.detach();    // no graph outlives the group
    grads[r] = x[r].grad();
    gathered[r] = all_gather(x[r].detach(), self);
  });
  const Tensor sum = reference({x[0].detach(), x[1].detach()}, ReduceOp::Sum);
  for (int r = 0; r < world; ++r) {
    testing::expect_close(summed[r], sum, 1e-13, 1e-13);
    testing::expect_close(grads[r], sum * (2.0 * world), 1e-12, 1e-12);
    EXPECT_EQ(gathered[r].sizes(), (Shape{2, 4}));
    testing::expect_close(gathered[r][1], x[1].detach(), 0, 0);
  }
}

TEST(GlooCommunicator, RankThatNeverArrivesIsNamedAfterTheTimeout) {
  std::atomic<bool> done{false};
  Tensor a = ones({3}), b = ones({3});
  const auto errors = run_ranks_collecting(
      2,
      [&](ProcessGroup& g) {
        g.all_reduce(g.rank() == 0 ? a : b, g.rank() == 0 ? a : b, ReduceOp::Sum);  // #1 works
        if (g.rank() == 1) {
          while (!done) std::this_thread::sleep_for(5ms);  // alive, but never joins #2
          return;
        }
        const auto start = std::chrono::steady_clock::now();
        EXPECT_THROW_MSG(g.all_reduce(a, a, ReduceOp::Sum),
                         "rank 0: all_reduce #2 timed out after 300 ms waiting for data from rank 1");
        EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
        // The ranks are out of step now: later collectives fail at once, naming the failed one.
        EXPECT_THROW_MSG(g.broadcast(a, a, 0), "all_reduce #2 failed before it");
        done = true;
      },
      testing::thread_rank_options(300ms));
  EXPECT_FALSE(errors[0]);
  EXPECT_FALSE(errors[1]);
  EXPECT_EQ(a.sum().item<float>(), 6.0f);
}

TEST(GlooCommunicator, RankThatLeavesIsNamed) {
  Tensor a = ones({100});
  const auto errors = run_ranks_collecting(2, [&](ProcessGroup& g) {
    if (g.rank() == 0) return;  // rank 0 leaves: its sockets close
    std::this_thread::sleep_for(100ms);
    EXPECT_THROW_MSG(g.all_reduce(a, a, ReduceOp::Sum), "rank 1: all_reduce #1 lost rank 0");
  });
  for (const auto& e : errors) EXPECT_FALSE(e);
}

TEST(GlooCommunicator, MismatchedCollectivesNameBothSides) {
  TensorList t = {ones({4}), ones({4})};
  const auto errors = run_ranks_collecting(2, [&](ProcessGroup& g) {
    if (g.rank() == 0) {
      EXPECT_THROW_MSG(g.all_reduce(t[0], t[0], ReduceOp::Sum),
                       "rank 0 issued all_reduce #1 of 4 float32 elements, sum but rank 1 issued broadcast #1 of 4 "
                       "float32 elements, root 0");
    } else {
      EXPECT_THROW_MSG(g.broadcast(t[1], t[1], 0), "rank 1 issued broadcast #1");
    }
  });
  for (const auto& e : errors) EXPECT_FALSE(e);
}

TEST(GlooCommunicator, EveryRankSeesEveryHeaderSoAMismatchFailsEverywhereAtOnce) {
  // Rank 0 disagrees with ranks 1 and 2, which agree with each other: every rank compares its header
  // with every other rank's, so all three fail at once, each naming the first rank that differs.
  TensorList t = {ones({4}), ones({4}), ones({4})};
  const auto start = std::chrono::steady_clock::now();
  const auto errors = run_ranks_collecting(3, [&](ProcessGroup& g) {
    Tensor& x = t[g.rank()];
    if (g.rank() == 0) EXPECT_THROW_MSG(g.all_reduce(x, x, ReduceOp::Sum), "but rank 1 issued broadcast #1");
    if (g.rank() == 1) EXPECT_THROW_MSG(g.broadcast(x, x, 0), "but rank 0 issued all_reduce #1");
    if (g.rank() == 2) EXPECT_THROW_MSG(g.broadcast(x, x, 0), "rank 2 issued broadcast #1 of 4 float32 elements, root 0 "
                                                               "but rank 0 issued all_reduce #1");
  });
  for (const auto& e : errors) EXPECT_FALSE(e);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(GlooCommunicator, MaxLetsNaNWinAndIntegerSumsWrap) {
  // Gloo has no bfloat16 and no NaN-propagating max: these are the reductions tapegraph gives it.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  TensorList floats = {tensor({nan, 1.0f, 2.0f}), tensor({0.0f, nan, 3.0f})};
  TensorList halves = {floats[0].to(kBFloat16), floats[1].to(kBFloat16)};
  const int32_t big = std::numeric_limits<int32_t>::max();
  TensorList ints = {tensor({big, -5}).to(kInt32), tensor({1, 2}).to(kInt32)};
  TensorList max_f(2), max_h(2), sum_i(2);
  run_ranks(2, [&](ProcessGroup& g) {
    const int r = g.rank();
    max_f[r] = empty({3});
    max_h[r] = empty({3}, {.dtype = kBFloat16});
    sum_i[r] = empty({2}, {.dtype = kInt32});
    g.all_reduce(floats[r], max_f[r], ReduceOp::Max);
    g.all_reduce(halves[r], max_h[r], ReduceOp::Max);
    g.all_reduce(ints[r], sum_i[r], ReduceOp::Sum);
  });
  for (int r = 0; r < 2; ++r) {
    for (const Tensor& got : {max_f[r], max_h[r].to(kFloat32)}) {
      EXPECT_TRUE(std::isnan(got[0].item<float>()));
      EXPECT_TRUE(std::isnan(got[1].item<float>()));
      EXPECT_EQ(got[2].item<float>(), 3.0f);
    }
    EXPECT_TRUE(same_bits(sum_i[r], tensor({std::numeric_limits<int32_t>::min(), -3}).to(kInt32)));
  }
}

TEST(GlooCommunicator, StoreAdapterPrefixesKeysAndBoundsWaits) {
  TcpStore store("127.0.0.1", 0, 1, true, 2s, 0);
  GlooStoreAdapter adapter(store, "tg/gloo/");
  adapter.set("0", {'a', '\0', 'b'});
  EXPECT_EQ(store.get("tg/gloo/0"), std::string("a\0b", 3));  // NUL bytes survive
  EXPECT_EQ(adapter.get("0"), (std::vector<char>{'a', '\0', 'b'}));
  EXPECT_FALSE(store.check("0"));
  adapter.wait({"0"}, std::chrono::milliseconds(100));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW_MSG(adapter.wait({"0", "1"}, std::chrono::milliseconds(200)), "waiting for key 'tg/gloo/1'");
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 150ms);
  EXPECT_LT(waited, 1s);  // Gloo's timeout, not the store's 2 s
}

TEST(GlooCommunicator, PeerAddressesNameTheRankAGlooMessageIsAbout) {
  // Gloo names a lost connection by the remote end's address: the socket's remote end, or the
  // address the peer listened on where it dialled in first. Both name the same rank.
  PeerAddresses names(3);
  names.add(1, "[127.0.0.1]:4123");  // rank 1's end of its connection to this rank
  names.add(1, "[127.0.0.3]:9143");  // the address rank 1 listened on for it
  names.add(2, "[127.0.0.1]:41234");
  names.add(2, "");  // no name: ignored
  EXPECT_EQ(names.find("[pair.cc:589] Read error [127.0.0.1]:41234: Connection reset by peer"), 2);
  EXPECT_EQ(names.find("[pair.cc:589] Read error [127.0.0.1]:4123: Connection reset by peer"), 1);
  EXPECT_EQ(names.find("[pair.cc:598] Connection closed by peer [127.0.0.3]:9143"), 1);
  EXPECT_EQ(names.find("[pair.cc:598] Connection closed by peer [127.0.0.3]:91430"), -1);  // a longer port
  EXPECT_EQ(names.find("Timed out waiting 300ms for recv operation to complete"), -1);
  EXPECT_THROW_MSG(names.add(3, "[127.0.0.1]:1"), "address '[127.0.0.1]:1' for rank 3: expected a rank in [0, 3)");
}

TEST(GlooCommunicator, AnAddressOfAnotherHostIsAClearError) {
  // TG_SOCKET_ADDR names this host's address; one it does not have cannot be listened on.
  ASSERT_EQ(setenv("TG_SOCKET_ADDR", "192.0.2.1", 1), 0);  // TEST-NET-1: never a local address
  const auto errors = run_ranks_collecting(2, [](ProcessGroup&) {}, testing::thread_rank_options(500ms));
  unsetenv("TG_SOCKET_ADDR");
  ASSERT_TRUE(errors[0]);
  EXPECT_THROW_MSG(std::rethrow_exception(errors[0]), "rank 0 could not open a Gloo TCP device on '192.0.2.1'");
  EXPECT_TRUE(errors[1]);  // the same, or the store's error once rank 0 (its server) is gone
}

TEST(GlooCommunicator, SigpipeBlockTurnsAWriteToAClosedPeerIntoAnError) {
  // Gloo writes without MSG_NOSIGNAL: inside the scope such a write fails with EPIPE instead of
  // ending the process, and the scope leaves no SIGPIPE pending and the signal mask as it was.
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ::close(fds[1]);
  sigset_t before, after, pending;
  pthread_sigmask(SIG_SETMASK, nullptr, &before);
  {
    SigpipeBlock scope;
    errno = 0;
    EXPECT_EQ(::write(fds[0], "x", 1), -1);
    EXPECT_EQ(errno, EPIPE);
  }
  ::close(fds[0]);
  pthread_sigmask(SIG_SETMASK, nullptr, &after);
  EXPECT_EQ(sigismember(&after, SIGPIPE), sigismember(&before, SIGPIPE));
  ASSERT_EQ(sigpending(&pending), 0);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0);
}

TEST(GlooCommunicator, BackendChoice) {
  InitOptions options;
  options.backend = "cpu";
  ProcessGroup one(Environment{}, options);
  EXPECT_EQ(one.backend(), "cpu");
  EXPECT_EQ(one.device(), kCPU);
  options.backend = "tcp";
  EXPECT_EQ(ProcessGroup(Environment{}, options).backend(), "cpu");
  options.backend = "gloo";
  EXPECT_EQ(ProcessGroup(Environment{}, options).backend(), "cpu");
  options.backend = "mpi";
  EXPECT_THROW_MSG(ProcessGroup(Environment{}, options),
                   "unknown backend 'mpi': expected 'auto', 'nccl', 'cpu', 'gloo' or 'tcp'");
  options.backend = "auto";
  EXPECT_EQ(ProcessGroup(Environment{}, options).backend(), cuda_is_available() ? "nccl" : "cpu");
  if (!cuda_is_available()) {
    options.backend = "nccl";
    EXPECT_THROW_MSG(ProcessGroup(Environment{}, options), "backend 'nccl' but");
  }
  // The CPU backend keeps CPU tensors even where CUDA devices exist.
  run_ranks(2, [](ProcessGroup& g) {
    EXPECT_EQ(g.device(), kCPU);
    EXPECT_EQ(g.backend(), "cpu");
  });
}

}  // namespace
}  // namespace tg::distributed
