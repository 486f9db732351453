#include "autograd/engine.h"

#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/node.h"
#include "autograd/op_node.h"
#include "ops/core/autocast.h"
#include "ops/core/dispatch.h"
#include "ops/factory/factory.h"
#include "tensor/grad_mode.h"

namespace tg {
namespace {

thread_local int64_t t_backward_sequence_nr = -1;

// Publishes the running node's sequence number for the duration of its apply().
class SequenceNrScope {
 public:
  explicit SequenceNrScope(int64_t nr) : previous_(t_backward_sequence_nr) { t_backward_sequence_nr = nr; }
  ~SequenceNrScope() { t_backward_sequence_nr = previous_; }

 private:
  int64_t previous_;
};

// Later nodes (higher sequence numbers) run first, so every consumer runs before its producer.
struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

// Whether the node at `root` alone will see the gradient it starts with: no graph for higher-order
// derivatives is built (it may hand the gradient on), no hook sees it, and grad() does not return it
// (`captured`, the edges differentiated against).
bool only_node_sees(const Edge& root, bool create_graph, const std::vector<Edge>& captured) {
  const Node& node = *root.fn;
  if (create_graph || node.pre_hooks().count(root.input_nr) || node.retain_grad_hooks().count(root.input_nr))
    return false;
  return std::none_of(captured.begin(), captured.end(), [&](const Edge& e) { return e.fn == root.fn; });
}

// The gradient a root starts with: the given one (shape-checked) or 1 for a one-element output (the
// root node's own 1 where it keeps one and only it will see the gradient).
Tensor root_gradient(const Tensor& out, const Edge& root, const Tensor& given, size_t i, bool create_graph,
                     const std::vector<Edge>& captured) {
  if (given.defined()) {
    TG_CHECK(given.sizes() == out.sizes(), "Mismatch in shape: grad_output[", i, "] has a shape of ",
             shape_str(given.sizes()), " and output[", i, "] has a shape of ", shape_str(out.sizes()), ".");
    return given;
  }
  TG_CHECK(out.numel() == 1, "grad can be implicitly created only for scalar outputs (output ", i, " has shape ",
           shape_str(out.sizes()), ")");
  if (only_node_sees(root, create_graph, captured)) {
    Tensor own = root.fn->implicit_root_gradient(root.input_nr);
    if (own.defined()) return own;
  }
  return ones(out.sizes(), {.dtype = out.dtype(), .device = out.device()});
}

// One backward pass over the graph reachable from the roots.
class GraphTask {
 public:
  GraphTask(bool keep_graph, bool create_graph) : keep_graph_(keep_graph), create_graph_(create_graph) {}

  // Gradients arriving at (node, input_nr) are stored in captures_ instead of flowing on.
  void capture(const Edge& e, size_t slot) { capture_slots_[e.fn.get()].emplace_back(e.input_nr, slot); }
  TensorList& captured() { return captured_; }

  void run(const std::vector<Edge>& roots, TensorList root_grads, bool only_captures) {
    AutocastOffGuard autocast_off;  // backward ops run in the dtypes their forward chose
    count_dependencies(roots);
    if (only_captures) mark_needed(roots);
    std::priority_queue<Node*, std::vector<Node*>, LaterFirst> ready;
    for (size_t i = 0; i < roots.size(); ++i) add_gradient(roots[i], std::move(root_grads[i]), ready);
    GradModeGuard mode(create_graph_);
    while (!ready.empty()) {
      Node* node = ready.top();
      ready.pop();
      TensorList grads = std::move(buffers_[node]);
      buffers_.erase(node);
      run_pre_hooks(*node, grads);
      store_captures(*node, grads);
      if (only_captures && !needed_.count(node)) continue;
      if (node->traced_double_backward() && current_op_observer() != nullptr) throw DoubleBackwardError();
      TensorList out;
      {
        SequenceNrScope scope(static_cast<int64_t>(node->sequence_nr()));
        if (!keep_graph_) node->will_release_saved();
        out = node->apply(std::move(grads));
      }
      if (!keep_graph_) node->release_saved();
      const auto& edges = node->next_edges();
      for (size_t i = 0; i < edges.size(); ++i) {
        if (!edges[i].valid()) continue;
        add_gradient(edges[i], i < out.size() ? std::move(out[i]) : Tensor(), ready);
      }
    }
  }

 private:
  // A node runs once every gradient it will receive has arrived: one per edge into it, and one
  // per root that starts at it (several outputs of one node may be roots together).
  void count_dependencies(const std::vector<Edge>& roots) {
    std::vector<Node*> stack;
    std::unordered_set<Node*> seen;
    for (const Edge& e : roots) {
      ++dependencies_[e.fn.get()];
      if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next_edges()) {
        if (!e.valid()) continue;
        ++dependencies_[e.fn.get()];
        if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
      }
    }
  }

  // A node is needed when running it can reach a captured edge.
  void mark_needed(const std::vector<Edge>& roots) {
    std::unordered_map<Node*, bool> memo;
    std::function<bool(Node*)> visit = [&](Node* n) -> bool {
      auto it = memo.find(n);
      if (it != memo.end()) return it->second;
      memo[n] = false;
      bool needed = false;
      for (const Edge& e : n->next_edges()) {
        if (!e.valid()) continue;
        if (capture_slots_.count(e.fn.get())) needed = true;
        if (visit(e.fn.get())) needed = true;
      }
      memo[n] = needed;
      if (needed) needed_.insert(n);
      return needed;
    };
    for (const Edge& e : roots) visit(e.fn.get());
  }

  void add_gradient(const Edge& e, Tensor g, std::priority_queue<Node*, std::vector<Node*>, LaterFirst>& ready) {
    Node* n = e.fn.get();
    TensorList& buf = buffers_[n];
    if (buf.size() <= e.input_nr) buf.resize(std::max<size_t>(e.input_nr + 1, n->output_metas().size()));
    if (g.defined()) buf[e.input_nr] = buf[e.input_nr].defined() ? buf[e.input_nr] + g : std::move(g);
    keep_alive_.push_back(e.fn);
    auto dep = dependencies_.find(n);
    if (dep == dependencies_.end() || --dep->second == 0) ready.push(n);
  }

  void run_pre_hooks(const Node& node, TensorList& grads) {
    for (const auto& [slot, hooks] : node.pre_hooks()) {
      if (slot >= grads.size() || !grads[slot].defined()) continue;
      for (const GradHook& hook : hooks) {
        Tensor replaced = hook(grads[slot]);
        if (replaced.defined()) grads[slot] = replaced;
      }
    }
    for (const auto& [slot, hook] : node.retain_grad_hooks())
      if (slot < grads.size() && grads[slot].defined()) hook(grads[slot]);
  }

  void store_captures(const Node& node, const TensorList& grads) {
    auto it = capture_slots_.find(&node);
    if (it == capture_slots_.end()) return;
    for (auto [input_nr, slot] : it->second)
      if (input_nr < grads.size() && grads[input_nr].defined())
        captured_[slot] = captured_[slot].defined() ? captured_[slot] + grads[input_nr] : grads[input_nr];
  }

 public:
  void resize_captures(size_t n) { captured_.resize(n); }

 private:
  bool keep_graph_;
  bool create_graph_;
  std::unordered_map<Node*, int> dependencies_;
  std::unordered_map<Node*, TensorList> buffers_;
  std::unordered_map<const Node*, std::vector<std::pair<uint32_t, size_t>>> capture_slots_;
  std::unordered_set<Node*> needed_;
  std::vector<std::shared_ptr<Node>> keep_alive_;
  TensorList captured_;
};

// Root edges and starting gradients for a set of outputs.
std::pair<std::vector<Edge>, TensorList> collect_roots(const TensorList& outputs, const TensorList& grad_outputs,
                                                       bool create_graph, const std::vector<Edge>& captured = {}) {
  TG_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), "[backward] got ", outputs.size(),
           " outputs but ", grad_outputs.size(), " grad_outputs; pass one gradient per output (or none)");
  std::vector<Edge> roots;
  TensorList grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    TG_CHECK(out.defined(), "[backward] output ", i, " is undefined");
    TG_CHECK(out.requires_grad(), "element ", i, " of tensors does not require grad and does not have a grad_fn");
    roots.push_back(gradient_edge(out));
    grads.push_back(root_gradient(out, roots.back(), grad_outputs.empty() ? Tensor() : grad_outputs[i], i,
                                  create_graph, captured));
  }
  return {std::move(roots), std::move(grads)};
}

}  // namespace

int64_t current_backward_sequence_nr() { return t_backward_sequence_nr; }

void backward(const TensorList& outputs, const TensorList& grad_outputs, bool retain_graph, bool create_graph) {
  auto [roots, grads] = collect_roots(outputs, grad_outputs, create_graph);
  GraphTask task(retain_graph || create_graph, create_graph);
  task.run(roots, std::move(grads), /*only_captures=*/false);
}

TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs,
                std::optional<bool> retain_graph, bool create_graph, bool allow_unused) {
  std::vector<Edge> edges;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TG_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "[grad] input ", i,
             " does not require grad; only tensors with requires_grad=true can be differentiated against");
    edges.push_back(gradient_edge(inputs[i]));
  }
  return grad_at_edges(outputs, edges, grad_outputs, retain_graph.value_or(create_graph), create_graph, allow_unused);
}

TensorList grad_at_edges(const TensorList& outputs, const std::vector<Edge>& inputs, const TensorList& grad_outputs,
                         bool retain_graph, bool create_graph, bool allow_unused) {
  auto [roots, grads] = collect_roots(outputs, grad_outputs, create_graph, inputs);
  GraphTask task(retain_graph, create_graph);
  task.resize_captures(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) task.capture(inputs[i], i);
  task.run(roots, std::move(grads), /*only_captures=*/true);
  TensorList result = std::move(task.captured());
  for (size_t i = 0; i < result.size(); ++i) {
    TG_CHECK(result[i].defined() || allow_unused, "[grad] one of the differentiated tensors (input ", i,
             ") appears to not have been used in the graph. Set allow_unused=true if this is the desired behavior.");
  }
  return result;
}

}  // namespace tg
