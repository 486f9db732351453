#include "fuzz/fuzz_ops.h"

#include <cstdio>

#include "distributed/collectives/collectives.h"
#include "distributed/fsdp/fsdp_gather.h"

namespace tg::fuzz {
std::string ints(const std::vector<int64_t>& v, size_t from, size_t to) {
  std::string s = "{";
  for (size_t i = from; i < v.size() && i < to; ++i) s += (i > from ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

std::string py_ints(const std::vector<int64_t>& v, size_t from, size_t to) {
  std::string s = ints(v, from, to);
  return "[" + s.substr(1, s.size() - 2) + "]";
}

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string str(int64_t v) { return std::to_string(v); }

Shape slice_of(const std::vector<int64_t>& v, size_t from, size_t to) {
  return Shape(v.begin() + static_cast<ptrdiff_t>(from), v.begin() + static_cast<ptrdiff_t>(to));
}

bool floating(const Tensor& t) { return is_floating(t.dtype()); }

// A process group of this process alone: collectives then trace, capture and run like any op (on
// the GPU through a one-rank NCCL communicator).
const std::shared_ptr<distributed::ProcessGroup>& group_of_one() {
  static const auto group = std::make_shared<distributed::ProcessGroup>(distributed::Environment{},
                                                                        distributed::InitOptions{});
  return group;
}

// A dim of t (t.dim() > 0), drawn.
int64_t some_dim(Rng& rng, const Tensor& t) { return rng.between(0, t.dim() - 1); }

FuzzOp unary(std::string name, std::function<Tensor(const Tensor&)> f, std::string method) {
  return FuzzOp{name, 1, false,
                [](Rng&, const TensorList& x, Attrs&) { return floating(x[0]); },
                [f](TensorList& x, const Attrs&) { return f(x[0]); },
                [method](const Names& n, const Attrs&) { return n[0] + "." + method + "()"; },
                [method](const Names& n, const Attrs&) { return n[0] + "." + method + "()"; }};
}

FuzzOp binary(std::string name, std::function<Tensor(const Tensor&, const Tensor&)> f, std::string method) {
  return FuzzOp{name, 2, false,
                [](Rng&, const TensorList& x, Attrs&) { return floating(x[0]) || floating(x[1]); },
                [f](TensorList& x, const Attrs&) { return f(x[0], x[1]); },
                [method](const Names& n, const Attrs&) { return n[0] + "." + method + "(" + n[1] + ")"; },
                [method](const Names& n, const Attrs&) { return n[0] + "." + method + "(" + n[1] + ")"; }};
}

// Reductions over a drawn subset of dims, with or without keepdim.
FuzzOp reduction(std::string name, Tensor (*f)(const Tensor&, const Shape&, bool)) {
  return FuzzOp{name, 1, false,
                [](Rng& rng, const TensorList& x, Attrs& a) {
                  if (!floating(x[0]) || x[0].dim() == 0) return false;
                  for (int64_t d = 0; d < x[0].dim(); ++d)
                    if (rng.chance(0.5)) a.ints.push_back(d);
                  if (a.ints.empty()) a.ints.push_back(some_dim(rng, x[0]));
                  a.ints.push_back(rng.chance(0.5));  // keepdim, last
                  return true;
                },
                [f](TensorList& x, const Attrs& a) {
                  return f(x[0], slice_of(a.ints, 0, a.ints.size() - 1), a.ints.back() != 0);
                },
                [name](const Names& n, const Attrs& a) {
                  return name + "(" + n[0] + ", " + ints(a.ints, 0, a.ints.size() - 1) + ", " +
                         (a.ints.back() ? "true" : "false") + ")";
                },
                [name](const Names& n, const Attrs& a) {
                  return "torch." + name + "(" + n[0] + ", " + py_ints(a.ints, 0, a.ints.size() - 1) +
                         ", keepdim=" + (a.ints.back() ? "True" : "False") + ")";
                }};
}

// In-place binary updates of operand 0 by operand 1 (broadcast into operand 0's shape).
FuzzOp in_place_binary(std::string name, std::function<Tensor&(Tensor&, const Tensor&)> f, std::string method) {
  return FuzzOp{name, 2, true,
                [](Rng&, const TensorList& x, Attrs&) { return floating(x[0]) && floating(x[1]); },
                [f](TensorList& x, const Attrs&) { return f(x[0], x[1]); },
                [method](const Names& n, const Attrs&) { return n[0] + "." + method + "(" + n[1] + ")"; },
                [method](const Names& n, const Attrs&) { return n[0] + "." + method + "(" + n[1] + ")"; }};
}

std::vector<FuzzOp> make_ops() {
  std::vector<FuzzOp> ops;
  // Elementwise, with broadcasting and type promotion between the operands' dtypes.
  ops.push_back(binary("add", [](const Tensor& a, const Tensor& b) { return a + b; }, "add"));
  ops.push_back(binary("sub", [](const Tensor& a, const Tensor& b) { return a - b; }, "sub"));
  ops.push_back(binary("mul", [](const Tensor& a, const Tensor& b) { return a * b; }, "mul"));
  ops.push_back(binary("div", [](const Tensor& a, const Tensor& b) { return a / b; }, "div"));
  ops.push_back(binary("maximum", [](const Tensor& a, const Tensor& b) { return a.maximum(b); }, "maximum"));
  ops.push_back(FuzzOp{"add_scalar", 1, false,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         a.reals.push_back(static_cast<double>(rng.between(-4, 4)) * 0.5);
                         return floating(x[0]);
                       },
                       [](TensorList& x, const Attrs& a) { return x[0] * a.reals[0] + 1.0; },
                       [](const Names& n, const Attrs& a) { return n[0] + " * " + num(a.reals[0]) + " + 1.0"; }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return n[0] + " * " + num(a.reals[0]) + " + 1.0";
                         };
  ops.push_back(unary("neg", [](const Tensor& x) { return -x; }, "neg"));
  ops.push_back(unary("exp", [](const Tensor& x) { return x.exp(); }, "exp"));
  ops.push_back(unary("tanh", [](const Tensor& x) { return x.tanh(); }, "tanh"));
  ops.push_back(unary("sigmoid", [](const Tensor& x) { return x.sigmoid(); }, "sigmoid"));
  ops.push_back(unary("relu", [](const Tensor& x) { return x.relu(); }, "relu"));
  ops.push_back(unary("sin", [](const Tensor& x) { return x.sin(); }, "sin"));
  ops.push_back(FuzzOp{"erf", 1, false,  // a free function (no Tensor method)
                       [](Rng&, const TensorList& x, Attrs&) { return floating(x[0]); },
                       [](TensorList& x, const Attrs&) { return erf(x[0]); },
                       [](const Names& n, const Attrs&) { return "erf(" + n[0] + ")"; }});
  ops.back().python = [](const Names& n, const Attrs&) { return "torch.erf(" + n[0] + ")"; };
  ops.push_back(unary("abs", [](const Tensor& x) { return x.abs(); }, "abs"));
  ops.push_back(unary("square", [](const Tensor& x) { return x.square(); }, "square"));
  ops.push_back(unary("clone", [](const Tensor& x) { return x.clone(); }, "clone"));
  ops.push_back(unary("contiguous", [](const Tensor& x) { return x.contiguous(); }, "contiguous"));
  ops.push_back(unary("detach", [](const Tensor& x) { return x.detach(); }, "detach"));
  // Reductions.
  ops.push_back(reduction("sum", [](const Tensor& x, const Shape& d, bool k) { return sum(x, d, k); }));
  ops.push_back(reduction("mean", [](const Tensor& x, const Shape& d, bool k) { return mean(x, d, k); }));
  ops.push_back(reduction("amax", [](const Tensor& x, const Shape& d, bool k) { return amax(x, d, k); }));
  ops.push_back(reduction("amin", [](const Tensor& x, const Shape& d, bool k) { return amin(x, d, k); }));
  // Views.
  ops.push_back(FuzzOp{"transpose", 1, false,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         if (x[0].dim() < 2) return false;
                         a.ints = {some_dim(rng, x[0]), some_dim(rng, x[0])};
                         return true;
                       },
                       [](TensorList& x, const Attrs& a) { return x[0].transpose(a.ints[0], a.ints[1]); },
                       [](const Names& n, const Attrs& a) {
                         return n[0] + ".transpose(" + std::to_string(a.ints[0]) + ", " + std::to_string(a.ints[1]) + ")";
                       }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return n[0] + ".transpose(" + str(a.ints[0]) + ", " + str(a.ints[1]) + ")";
                         };
  ops.push_back(FuzzOp{"narrow", 1, false,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         if (x[0].dim() == 0) return false;
                         const int64_t d = some_dim(rng, x[0]), size = x[0].size(d);
                         if (size == 0) return false;
                         const int64_t start = rng.between(0, size - 1);
                         a.ints = {d, start, rng.between(1, size - start)};
                         return true;
                       },
                       [](TensorList& x, const Attrs& a) { return x[0].narrow(a.ints[0], a.ints[1], a.ints[2]); },
                       [](const Names& n, const Attrs& a) {
                         return n[0] + ".narrow(" + std::to_string(a.ints[0]) + ", " + std::to_string(a.ints[1]) + ", " +
                                std::to_string(a.ints[2]) + ")";
                       }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return n[0] + ".narrow(" + str(a.ints[0]) + ", " + str(a.ints[1]) + ", " + str(a.ints[2]) + ")";
                         };
  ops.push_back(FuzzOp{"select", 1, false,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         if (x[0].dim() == 0) return false;
                         const int64_t d = some_dim(rng, x[0]);
                         if (x[0].size(d) == 0) return false;
                         a.ints = {d, rng.between(0, x[0].size(d) - 1)};
                         return true;
                       },
                       [](TensorList& x, const Attrs& a) { return x[0].select(a.ints[0], a.ints[1]); },
                       [](const Names& n, const Attrs& a) {
                         return n[0] + ".select(" + std::to_string(a.ints[0]) + ", " + std::to_string(a.ints[1]) + ")";
                       }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return n[0] + ".select(" + str(a.ints[0]) + ", " + str(a.ints[1]) + ")";
                         };
  ops.push_back(FuzzOp{"unsqueeze", 1, false,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         if (x[0].dim() >= 4) return false;
                         a.ints = {rng.between(0, x[0].dim())};
                         return true;
                       },
                       [](TensorList& x, const Attrs& a) { return x[0].unsqueeze(a.ints[0]); },
                       [](const Names& n, const Attrs& a) { return n[0] + ".unsqueeze(" + std::to_string(a.ints[0]) + ")"; }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return n[0] + ".unsqueeze(" + str(a.ints[0]) + ")";
                         };
  ops.push_back(FuzzOp{"reshape", 1, false,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         // Flatten, or split the element count into two factors.
                         const int64_t n = x[0].numel();
                         if (rng.chance(0.5) || n < 2) {
                           a.ints = {n};
                           return true;
                         }
                         std::vector<int64_t> divisors;
                         for (int64_t d = 1; d <= n; ++d)
                           if (n % d == 0) divisors.push_back(d);
                         const int64_t d = rng.pick(divisors);
                         a.ints = {d, n / d};
                         return true;
                       },
                       [](TensorList& x, const Attrs& a) { return x[0].reshape(a.ints); },
                       [](const Names& n, const Attrs& a) { return n[0] + ".reshape(" + ints(a.ints) + ")"; }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return n[0] + ".reshape(" + py_ints(a.ints) + ")";
                         };
  ops.push_back(FuzzOp{"expand", 1, false,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         // A new leading dim, and size-1 dims grown.
                         if (x[0].dim() >= 4) return false;
                         a.ints = {rng.between(1, 3)};
                         for (int64_t s : x[0].sizes()) a.ints.push_back(s == 1 ? rng.between(1, 3) : s);
                         return true;
                       },
                       [](TensorList& x, const Attrs& a) { return x[0].expand(a.ints); },
                       [](const Names& n, const Attrs& a) { return n[0] + ".expand(" + ints(a.ints) + ")"; }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return n[0] + ".expand(" + py_ints(a.ints) + ")";
                         };
  ops.push_back(FuzzOp{"as_strided", 1, false,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         // A window over a contiguous tensor's storage: sizes, strides and offset in range.
                         if (!x[0].is_contiguous() || x[0].numel() < 2 || x[0].storage_offset() != 0) return false;
                         const int64_t n = x[0].numel();
                         const int64_t rows = rng.between(1, 2), cols = rng.between(1, 2);
                         const int64_t col_stride = rng.between(0, 1), row_stride = rng.between(1, 2);
                         const int64_t span = (rows - 1) * row_stride + (cols - 1) * col_stride + 1;
                         if (span > n) return false;
                         a.ints = {rows, cols, row_stride, col_stride, rng.between(0, n - span)};
                         return true;
                       },
                       [](TensorList& x, const Attrs& a) {
                         return x[0].as_strided({a.ints[0], a.ints[1]}, {a.ints[2], a.ints[3]}, a.ints[4]);
                       },
                       [](const Names& n, const Attrs& a) {
                         return n[0] + ".as_strided(" + ints(a.ints, 0, 2) + ", " + ints(a.ints, 2, 4) + ", " +
                                std::to_string(a.ints[4]) + ")";
                       }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return "_as_strided(" + n[0] + ", " + py_ints(a.ints, 0, 2) + ", " + py_ints(a.ints, 2, 4) + ", " + str(a.ints[4]) + ")";
                         };
  // In-place updates: of intermediates, of inputs, and through views of inputs.
  ops.push_back(in_place_binary("add_", [](Tensor& x, const Tensor& y) -> Tensor& { return x.add_(y); }, "add_"));
  ops.push_back(in_place_binary("mul_", [](Tensor& x, const Tensor& y) -> Tensor& { return x.mul_(y); }, "mul_"));
  ops.push_back(in_place_binary("copy_", [](Tensor& x, const Tensor& y) -> Tensor& { return x.copy_(y); }, "copy_"));
  ops.push_back(FuzzOp{"mul_scalar_", 1, true,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         a.reals = {static_cast<double>(rng.between(-3, 3)) * 0.5};
                         return floating(x[0]);
                       },
                       [](TensorList& x, const Attrs& a) { return x[0].mul_(a.reals[0]); },
                       [](const Names& n, const Attrs& a) { return n[0] + ".mul_(" + num(a.reals[0]) + ")"; }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return n[0] + ".mul_(" + num(a.reals[0]) + ")";
                         };
  // Products, normalizations, joins and dropout.
  ops.push_back(FuzzOp{"matmul_t", 2, false,
                       [](Rng&, const TensorList& x, Attrs&) {
                         return floating(x[0]) && x[0].dim() >= 1 && x[1].dim() >= 2 && x[0].dim() <= 3 &&
                                x[1].dim() <= 3;
                       },
                       [](TensorList& x, const Attrs&) { return x[0].matmul(x[1].transpose(-1, -2)); },
                       [](const Names& n, const Attrs&) { return n[0] + ".matmul(" + n[1] + ".transpose(-1, -2))"; }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return n[0] + ".matmul(" + n[1] + ".transpose(-1, -2))";
                         };
  // linear with a bias cut from the weight, often followed by relu or a tanh gelu: the pairs compiled
  // graphs fuse (with their gradients, in programs compiled with the gradient epilogues).
  ops.push_back(FuzzOp{"linear", 2, false,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         if (!floating(x[0]) || x[0].dim() < 1 || x[1].dim() != 2) return false;
                         const int64_t activation = rng.chance(0.7) ? rng.between(1, 2) : 0;  // none, relu, gelu
                         a.ints = {activation, rng.chance(0.7)};  // then the activation; with a bias
                         return true;
                       },
                       [](TensorList& x, const Attrs& a) {
                         const Tensor bias = a.ints[1] ? x[1].select(1, 0) : Tensor();
                         const Tensor y = linear(x[0], x[1], bias);
                         if (a.ints[0] == 1) return y.relu();
                         return a.ints[0] == 2 ? gelu(y, "tanh") : y;
                       },
                       [](const Names& n, const Attrs& a) {
                         const std::string y =
                             "linear(" + n[0] + ", " + n[1] + (a.ints[1] ? ", " + n[1] + ".select(1, 0))" : ")");
                         if (a.ints[0] == 1) return y + ".relu()";
                         return a.ints[0] == 2 ? "gelu(" + y + ", \"tanh\")" : y;
                       }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           const std::string y = "F.linear(" + n[0] + ", " + n[1] + (a.ints[1] ? ", " + n[1] + ".select(1, 0))" : ")");
                           if (a.ints[0] == 1) return y + ".relu()";
                           return a.ints[0] == 2 ? "F.gelu(" + y + ", approximate='tanh')" : y;
                         };
  ops.push_back(FuzzOp{"softmax", 1, false,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         if (!floating(x[0]) || x[0].dim() == 0) return false;
                         a.ints = {some_dim(rng, x[0]), rng.chance(0.5)};
                         return true;
                       },
                       [](TensorList& x, const Attrs& a) {
                         return a.ints[1] ? log_softmax(x[0], a.ints[0]) : softmax(x[0], a.ints[0]);
                       },
                       [](const Names& n, const Attrs& a) {
                         return std::string(a.ints[1] ? "log_softmax(" : "softmax(") + n[0] + ", " +
                                std::to_string(a.ints[0]) + ")";
                       }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return std::string(a.ints[1] ? "torch.log_softmax(" : "torch.softmax(") + n[0] + ", " + str(a.ints[0]) + ")";
                         };
  ops.push_back(FuzzOp{"cross_entropy", 1, false,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         if (!floating(x[0]) || x[0].dim() != 2 || x[0].size(1) == 0) return false;
                         a.ints = {rng.between(0, 2)};  // reduction: mean, sum, none
                         return true;
                       },
                       [](TensorList& x, const Attrs& a) {
                         // Targets from the logits themselves (a class index per row, int64).
                         const Reduction r = a.ints[0] == 0 ? Reduction::Mean : a.ints[0] == 1 ? Reduction::Sum
                                                                                               : Reduction::None;
                         return cross_entropy(x[0], x[0].detach().argmax(1), r);
                       },
                       [](const Names& n, const Attrs& a) {
                         static const char* const kReductions[] = {"mean", "sum", "none"};
                         return "cross_entropy(" + n[0] + ", " + n[0] + ".argmax(1), " + kReductions[a.ints[0]] +
                                ")";
                       }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           static const char* const kReductions[] = {"mean", "sum", "none"};
                           return "F.cross_entropy(" + n[0] + ", " + n[0] + ".argmax(1), reduction='" + kReductions[a.ints[0]] + "')";
                         };
  ops.push_back(FuzzOp{"all_reduce", 1, false,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         if (!floating(x[0])) return false;
                         // Sum or avg; or an all_gather, or fully_shard's gather of the flattened
                         // value (its saved result, or gathered again in the backward).
                         a.ints = {rng.between(0, 1), rng.chance(0.5), rng.between(0, 2)};
                         return true;
                       },
                       [](TensorList& x, const Attrs& a) {
                         using distributed::ReduceOp;
                         if (a.ints[1] && a.ints[2] > 0)
                           return distributed::gather_shard(x[0].flatten(), group_of_one(), "fuzz", a.ints[2] == 2);
                         if (a.ints[1]) return distributed::all_gather(x[0], group_of_one());
                         return distributed::all_reduce(x[0], a.ints[0] ? ReduceOp::Avg : ReduceOp::Sum, group_of_one());
                       },
                       [](const Names& n, const Attrs& a) {
                         if (a.ints[1] && a.ints[2] > 0)
                           return "distributed::gather_shard(" + n[0] + ".flatten(), group_of_one, \"fuzz\", " +
                                  (a.ints[2] == 2 ? "true" : "false") + ")";
                         if (a.ints[1]) return "distributed::all_gather(" + n[0] + ", group_of_one)";
                         return "distributed::all_reduce(" + n[0] + (a.ints[0] ? ", ReduceOp::Avg" : ", ReduceOp::Sum") +
                                ", group_of_one)";
                       }});
  ops.back().python = [](const Names& n, const Attrs& a) {  // one rank
                           if (a.ints[1] && a.ints[2] > 0) return n[0] + ".flatten().clone()";
                           return a.ints[1] ? "torch.stack([" + n[0] + "])" : n[0] + ".clone()";
                         };
  ops.push_back(FuzzOp{"cat", 2, false,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         if (x[0].dim() == 0) return false;
                         a.ints = {some_dim(rng, x[0]), rng.chance(0.3)};  // dim, stack instead
                         return true;
                       },
                       [](TensorList& x, const Attrs& a) {
                         return a.ints[1] ? stack({x[0], x[1]}, a.ints[0]) : cat({x[0], x[1]}, a.ints[0]);
                       },
                       [](const Names& n, const Attrs& a) {
                         return std::string(a.ints[1] ? "stack({" : "cat({") + n[0] + ", " + n[1] + "}, " +
                                std::to_string(a.ints[0]) + ")";
                       }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return std::string(a.ints[1] ? "torch.stack([" : "torch.cat([") + n[0] + ", " + n[1] + "], " + str(a.ints[0]) + ")";
                         };
  ops.push_back(FuzzOp{"dropout", 1, false,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         a.reals = {rng.chance(0.5) ? 0.5 : 0.2};
                         return floating(x[0]);
                       },
                       [](TensorList& x, const Attrs& a) { return dropout(x[0], a.reals[0], true); },
                       [](const Names& n, const Attrs& a) { return "dropout(" + n[0] + ", " + num(a.reals[0]) + ", true)"; }});
  // Normalization and pooling (pools read [C, H, W] inputs).
  ops.push_back(FuzzOp{"layer_norm", 1, false,
                       [](Rng&, const TensorList& x, Attrs&) { return floating(x[0]) && x[0].dim() >= 1; },
                       [](TensorList& x, const Attrs&) { return layer_norm(x[0], {x[0].size(-1)}); },
                       [](const Names& n, const Attrs&) { return "layer_norm(" + n[0] + ", {" + n[0] + ".size(-1)})"; }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return "F.layer_norm(" + n[0] + ", [" + n[0] + ".size(-1)])";
                         };
  ops.push_back(FuzzOp{"add_layer_norm", 2, false,
                       [](Rng&, const TensorList& x, Attrs&) {
                         return floating(x[0]) && floating(x[1]) && x[0].dim() >= 1 && x[0].sizes() == x[1].sizes();
                       },
                       [](TensorList& x, const Attrs&) {
                         const AddLayerNormResult r = add_layer_norm(x[0], x[1], {x[0].size(-1)});
                         return add(r.normed, r.sum);
                       },
                       [](const Names& n, const Attrs&) {
                         return "[&] { const auto r = add_layer_norm(" + n[0] + ", " + n[1] + ", {" + n[0] +
                                ".size(-1)}); return add(r.normed, r.sum); }()";
                       }});
  ops.back().python = [](const Names& n, const Attrs&) {
    return "(lambda s: F.layer_norm(s, [s.size(-1)]) + s)(" + n[0] + " + " + n[1] + ")";
  };
  ops.push_back(FuzzOp{"batch_norm", 1, false,
                       [](Rng&, const TensorList& x, Attrs&) { return floating(x[0]) && x[0].dim() >= 2; },
                       [](TensorList& x, const Attrs&) { return batch_norm(x[0], Tensor(), Tensor(), Tensor(), Tensor(), true); },
                       [](const Names& n, const Attrs&) {
                         return "batch_norm(" + n[0] + ", Tensor(), Tensor(), Tensor(), Tensor(), true)";
                       }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return "F.batch_norm(" + n[0] + ", None, None, training=True)";
                         };
  ops.push_back(FuzzOp{"group_norm", 1, false,
                       [](Rng&, const TensorList& x, Attrs&) { return floating(x[0]) && x[0].dim() >= 2; },
                       [](TensorList& x, const Attrs&) { return group_norm(x[0], 1); },
                       [](const Names& n, const Attrs&) { return "group_norm(" + n[0] + ", 1)"; }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return "F.group_norm(" + n[0] + ", 1)";
                         };
  ops.push_back(FuzzOp{"pool2d", 1, false,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         if (!floating(x[0]) || x[0].dim() != 3) return false;
                         a.ints = {rng.between(0, 2), rng.between(1, 2)};  // max / avg / adaptive avg, kernel
                         return true;
                       },
                       [](TensorList& x, const Attrs& a) {
                         if (a.ints[0] == 0) return max_pool2d(x[0], {a.ints[1]});
                         if (a.ints[0] == 1) return avg_pool2d(x[0], {a.ints[1]});
                         return adaptive_avg_pool2d(x[0], {a.ints[1]});
                       },
                       [](const Names& n, const Attrs& a) {
                         const char* f = a.ints[0] == 0 ? "max_pool2d(" : a.ints[0] == 1 ? "avg_pool2d(" : "adaptive_avg_pool2d(";
                         return f + n[0] + ", {" + std::to_string(a.ints[1]) + "})";
                       }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           const char* f = a.ints[0] == 0 ? "F.max_pool2d(" : a.ints[0] == 1 ? "F.avg_pool2d(" : "F.adaptive_avg_pool2d(";
                           return f + n[0] + ", " + str(a.ints[1]) + ")";
                         };
  ops.push_back(FuzzOp{"chunk", 1, false,  // one piece of chunk/unbind (views)
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         if (x[0].dim() == 0) return false;
                         const int64_t d = some_dim(rng, x[0]), size = x[0].size(d);
                         if (size == 0) return false;
                         const bool unbind_it = rng.chance(0.3);
                         const int64_t chunks = unbind_it ? size : rng.between(1, 3);
                         const int64_t pieces = static_cast<int64_t>(chunk(x[0], chunks, d).size());
                         a.ints = {d, chunks, rng.between(0, pieces - 1), unbind_it};
                         return true;
                       },
                       [](TensorList& x, const Attrs& a) {
                         const size_t i = static_cast<size_t>(a.ints[2]);
                         const TensorList pieces = a.ints[3] ? unbind(x[0], a.ints[0]) : chunk(x[0], a.ints[1], a.ints[0]);
                         // Drawn for other sizes, the piece may not exist at a call with changed sizes.
                         TG_CHECK(i < pieces.size(), "[fuzz] piece ", i, " of ", pieces.size());
                         return pieces[i];
                       },
                       [](const Names& n, const Attrs& a) {
                         return a.ints[3] ? "unbind(" + n[0] + ", " + std::to_string(a.ints[0]) + ")[" + std::to_string(a.ints[2]) + "]"
                                          : "chunk(" + n[0] + ", " + std::to_string(a.ints[1]) + ", " +
                                                std::to_string(a.ints[0]) + ")[" + std::to_string(a.ints[2]) + "]";
                       }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return a.ints[3] ? "torch.unbind(" + n[0] + ", " + str(a.ints[0]) + ")[" + str(a.ints[2]) + "]"
                                            : "torch.chunk(" + n[0] + ", " + str(a.ints[1]) + ", " + str(a.ints[0]) + ")[" + str(a.ints[2]) + "]";
                         };
  ops.push_back(FuzzOp{"tril", 1, false,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         a.ints = {rng.between(-1, 1), rng.chance(0.5)};
                         return x[0].dim() >= 2;
                       },
                       [](TensorList& x, const Attrs& a) { return a.ints[1] ? triu(x[0], a.ints[0]) : tril(x[0], a.ints[0]); },
                       [](const Names& n, const Attrs& a) {
                         return std::string(a.ints[1] ? "triu(" : "tril(") + n[0] + ", " + std::to_string(a.ints[0]) + ")";
                       }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return std::string(a.ints[1] ? "torch.triu(" : "torch.tril(") + n[0] + ", " + str(a.ints[0]) + ")";
                         };
  ops.push_back(FuzzOp{"masked_fill", 2, false,  // masked where operand 1 exceeds a threshold
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         a.reals = {rng.chance(0.5) ? 0.0 : 0.5, rng.chance(0.5) ? -1.5 : 2.0};
                         return floating(x[0]) && x[1].sizes() == x[0].sizes();
                       },
                       [](TensorList& x, const Attrs& a) { return masked_fill(x[0], gt(x[1], a.reals[0]), a.reals[1]); },
                       [](const Names& n, const Attrs& a) {
                         return "masked_fill(" + n[0] + ", gt(" + n[1] + ", " + num(a.reals[0]) + "), " + num(a.reals[1]) + ")";
                       }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           return "torch.masked_fill(" + n[0] + ", torch.gt(" + n[1] + ", " + num(a.reals[0]) + "), " + num(a.reals[1]) + ")";
                         };
  // A [C, H, W] input convolved with a kxk window of itself as the weight [1, C, k, k], so that the
  // input's gradient gathers both the data and the weight paths.
  ops.push_back(FuzzOp{"conv2d", 1, false,
                       [](Rng& rng, const TensorList& x, Attrs& a) {
                         if (!floating(x[0]) || x[0].dim() != 3) return false;
                         a.ints = {rng.between(1, 2), rng.between(1, 2), rng.between(0, 1)};  // k, stride, padding
                         return x[0].size(0) > 0 && x[0].size(1) >= a.ints[0] && x[0].size(2) >= a.ints[0];
                       },
                       [](TensorList& x, const Attrs& a) {
                         const Tensor w = x[0].narrow(1, 0, a.ints[0]).narrow(2, 0, a.ints[0]).unsqueeze(0);
                         return conv2d(x[0], w, Tensor(), {a.ints[1]}, a.ints[2]);
                       },
                       [](const Names& n, const Attrs& a) {
                         const std::string k = std::to_string(a.ints[0]);
                         return "conv2d(" + n[0] + ", " + n[0] + ".narrow(1, 0, " + k + ").narrow(2, 0, " + k +
                                ").unsqueeze(0), Tensor(), {" + std::to_string(a.ints[1]) + "}, " +
                                std::to_string(a.ints[2]) + ")";
                       }});
  ops.back().python = [](const Names& n, const Attrs& a) {
                           const std::string k = str(a.ints[0]);
                           return "F.conv2d(" + n[0] + ", " + n[0] + ".narrow(1, 0, " + k + ").narrow(2, 0, " + k + ").unsqueeze(0), None, " + str(a.ints[1]) + ", " + str(a.ints[2]) + ")";
                         };
  add_oracle_ops(ops);
  add_extension_ops(ops);
  return ops;
}

}  // namespace

const std::vector<FuzzOp>& fuzz_ops() {
  static const std::vector<FuzzOp> ops = make_ops();
  return ops;
}

size_t legacy_op_count() {
  const auto& ops = fuzz_ops();
  size_t n = 0;
  while (n < ops.size() && !ops[n].oracle_only) ++n;
  return n;
}

size_t oracle_op_count() {
  const auto& ops = fuzz_ops();
  size_t n = 0;
  while (n < ops.size() && !ops[n].extension) ++n;
  return n;
}

int scalar_arg_op() {
  const auto& ops = fuzz_ops();
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].name == "scalar_arg") return static_cast<int>(i);
  return -1;
}

}  // namespace tg::fuzz
