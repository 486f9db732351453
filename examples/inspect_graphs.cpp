// Compiles the mlp_small training loss and writes its joint, forward and backward graphs as text and
// Graphviz DOT (render with `dot -Tpng joint.dot -o joint.png`), then compares the saved bytes of
// the default and min-cut partitioners on a model with an elementwise chain between matmuls.
//   inspect_graphs [OUTDIR]   (default: the current directory)
#include <fstream>
#include <iostream>
#include <string>

#include "tapegraph.h"

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  std::cout << "wrote " << path << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  tg::manual_seed(0);
  auto model = std::make_shared<tg::nn::Sequential>();
  const int64_t widths[] = {128, 256, 256, 10};
  for (int i = 0; i < 3; ++i) {
    model->push_back(std::make_shared<tg::nn::Linear>(widths[i], widths[i + 1]));
    if (i < 2) model->push_back(std::make_shared<tg::nn::ReLU>());
  }
  auto loss = tg::compile([&](const tg::Tensor& x, const tg::Tensor& y) { return tg::cross_entropy((*model)(x), y); });
  loss(tg::randn({64, 128}), tg::randint(0, 10, {64})).backward();
  const tg::graphs::JointGraph& joint = *loss.last_joint();
  const tg::graphs::Partition& part = *loss.last_partition();
  write(dir + "/joint.txt", joint.graph.to_text());
  write(dir + "/joint.dot", joint.graph.to_dot("mlp_small joint graph"));
  write(dir + "/forward.dot", part.forward.to_dot("mlp_small forward"));
  write(dir + "/backward.dot", part.backward.to_dot("mlp_small backward"));

  // x @ w1, GELU/tanh/sigmoid chain, @ w2, relu^2, sum (the shapes of the anchors' partitioner probe).
  tg::Tensor w1 = tg::randn({512, 1024}).requires_grad_(true), w2 = tg::randn({1024, 512}).requires_grad_(true);
  auto chain = [&](const tg::Tensor& x) {
    tg::Tensor h = x.mm(w1);
    h = h.gelu().tanh().sigmoid() * h;
    tg::Tensor o = h.mm(w2).relu();
    return (o * o).sum();
  };
  tg::Tensor x = tg::randn({256, 512});
  for (const char* p : {"default", "min_cut"}) {
    auto f = tg::compile(chain, tg::CompileOptions{.partitioner = p});
    f(x).backward();
    std::cout << p << " partitioner: " << f.counters().saved_bytes << " bytes saved for backward, "
              << f.counters().recomputed_nodes << " forward nodes recomputed\n";
  }
  return 0;
}
