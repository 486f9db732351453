// See Note [Data-parallel internals] in docs/data_parallel.md.
#include "distributed/collectives/process_group.h"

#include <mutex>

#include "distributed/collectives/communicator.h"
#include "distributed/rendezvous/store.h"
#include "tensor/cuda_runtime.h"

namespace tg::distributed {
namespace {

std::mutex g_mutex;
std::shared_ptr<ProcessGroup> g_default;

std::string resolve_backend(const std::string& asked) {
  if (asked == "auto") return cuda_is_available() ? "nccl" : "cpu";
  if (asked == "cpu" || asked == "gloo" || asked == "tcp") return "cpu";
  if (asked == "nccl") {
#ifndef TG_WITH_CUDA
    TG_FAIL("[distributed] backend 'nccl' but tapegraph was built without CUDA: expected backend 'cpu' or 'auto'");
#endif
    TG_CHECK(cuda_is_available(), "[distributed] backend 'nccl' but this machine has no CUDA device: expected "
             "backend 'cpu' or 'auto'");
    return "nccl";
  }
  TG_FAIL("[distributed] unknown backend '", asked, "': expected 'auto', 'nccl', 'cpu', 'gloo' or 'tcp'");
}

Device pick_device(const Environment& env, const std::string& backend) {
  if (backend != "nccl") return kCPU;
  TG_CHECK(env.local_rank < cuda_device_count(), "[distributed] LOCAL_RANK=", env.local_rank, " but this machine has ",
           cuda_device_count(), " CUDA device(s): expected one process per device (tgrun --nproc-per-node ",
           cuda_device_count(), ")");
  return cuda_device(env.local_rank);
}

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
  }
  return "?";
}

ProcessGroup::ProcessGroup(const Environment& env, const InitOptions& options)
    : env_(env), options_(options), backend_(resolve_backend(options.backend)), device_(pick_device(env, backend_)) {
  if (env_.world_size > 1)
    store_ = std::make_unique<TcpStore>(env_.master_addr, env_.master_port, env_.world_size, env_.rank == 0,
                                        options_.timeout, env_.rank);
#ifdef TG_WITH_CUDA
  if (device_.is_cuda()) {
    cuda::set_device(device_.index);
    comm_ = make_nccl_communicator(env_.rank, env_.world_size, device_.index, store_.get(), options_.timeout);
    return;
  }
#endif
  if (env_.world_size == 1) {
    comm_ = std::make_unique<SelfCommunicator>();
    return;
  }
  comm_ = make_gloo_communicator(env_.rank, env_.world_size, *store_, options_.timeout, env_.master_addr,
                                 env_.master_port);
  // Nobody leaves before every rank is done with the store: rank 0 serves it, and a collective of no
  // elements (which moves nothing) could otherwise let it exit while a peer still reads an address.
  store_->barrier("tg/gloo/ready");
}

ProcessGroup::~ProcessGroup() = default;

Communicator& ProcessGroup::transport(const Tensor& t) const {
  // A group of one moves nothing: CPU tensors may take part even when the group's device is a GPU.
  static SelfCommunicator self;
  if (world_size() == 1 && t.device() != device_) return self;
  return *comm_;
}

void ProcessGroup::check_operands(const char* what, const Tensor& in, const Tensor& out) const {
  TG_CHECK(in.defined() && out.defined(), "[", what, "] got an undefined tensor");
  for (const Tensor* t : {&in, &out}) {
    TG_CHECK(t->device() == device_ || (world_size() == 1 && t->device() == in.device()), "[", what, "] tensor on ",
             t->device().str(), ", expected the process group's device ", device_.str());
    TG_CHECK(t->is_contiguous(), "[", what, "] expected a contiguous tensor, got strides ", shape_str(t->strides()));
    TG_CHECK(t->dtype() == in.dtype(), "[", what, "] tensors of ", dtype_name(in.dtype()), " and ",
             dtype_name(t->dtype()), ": expected one dtype");
  }
}

void ProcessGroup::all_reduce(const Tensor& in, const Tensor& out, ReduceOp op, bool async) {
  check_operands("all_reduce", in, out);
  TG_CHECK(op != ReduceOp::Avg || is_floating(in.dtype()), "[all_reduce] avg needs a floating dtype, got ",
           dtype_name(in.dtype()));
  if (in.numel() > 0) transport(in).all_reduce(in, out, op, async);
}

void ProcessGroup::all_reduce_into(const TensorList& ins, const Tensor& flat, ReduceOp op, bool async) {
  TG_CHECK(!ins.empty(), "[all_reduce_into] expected at least one tensor");
  int64_t total = 0;
  for (const Tensor& t : ins) {
    check_operands("all_reduce_into", t, flat);
    total += t.numel();
  }
  TG_CHECK(flat.numel() == total, "[all_reduce_into] output of ", flat.numel(), " elements, expected ", total,
           " (the inputs end to end)");
  if (total > 0) transport(flat).all_reduce_into(ins, flat, op, async);
}

void ProcessGroup::broadcast(const Tensor& in, const Tensor& out, int root) {
  check_operands("broadcast", in, out);
  TG_CHECK(root >= 0 && root < world_size(), "[broadcast] root ", root, " is not a rank of a group of ", world_size());
  if (in.numel() > 0) transport(in).broadcast(in, out, root);
}

void ProcessGroup::all_gather(const Tensor& in, const Tensor& out, bool async) {
  check_operands("all_gather", in, out);
  TG_CHECK(out.numel() == in.numel() * world_size(), "[all_gather] output of ", out.numel(), " elements, expected ",
           world_size(), " x ", in.numel());
  if (in.numel() > 0) transport(in).all_gather(in, out, async);
}

void ProcessGroup::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, bool async) {
  check_operands("reduce_scatter", in, out);
  TG_CHECK(in.numel() == out.numel() * world_size(), "[reduce_scatter] input of ", in.numel(), " elements, expected ",
           world_size(), " x ", out.numel());
  if (out.numel() > 0) transport(in).reduce_scatter(in, out, op, async);
}

void ProcessGroup::barrier(const std::string& name) {
  if (store_) store_->barrier(name + "/" + std::to_string(barriers_++));
}

void init(const InitOptions& options) { init(Environment::from_env(), options); }

void init(const Environment& env, const InitOptions& options) {
  std::lock_guard<std::mutex> lock(g_mutex);
  TG_CHECK(!g_default, "[distributed] init() was already called (rank ", g_default ? g_default->rank() : 0, " of ",
           g_default ? g_default->world_size() : 0, "); call destroy() first");
  g_default = std::make_shared<ProcessGroup>(env, options);
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_default != nullptr;
}

std::shared_ptr<ProcessGroup> default_group() {
  std::lock_guard<std::mutex> lock(g_mutex);
  TG_CHECK(g_default, "[distributed] no process group: call tg::distributed::init() first");
  return g_default;
}

void destroy() {
  std::shared_ptr<ProcessGroup> group;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    group = std::move(g_default);
  }
}

int rank() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_default ? g_default->rank() : 0;
}

int world_size() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_default ? g_default->world_size() : 1;
}

}  // namespace tg::distributed
