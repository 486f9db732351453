// The graph IR: values with tensor metadata, op nodes over them, and the graph's inputs and outputs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ops/core/op.h"

namespace tg::graphs {

// Index of a value in Graph::values.
using ValueId = int32_t;

// Which half of a joint graph a node belongs to.
enum class Phase : uint8_t { Forward, Backward };

// Why a value is a graph input.
enum class InputKind : uint8_t {
  Argument,  // a tensor the caller passes
  Lifted,    // a real tensor the traced function captured (a module parameter): passed by identity
  Tangent,   // the gradient of a forward output (backward inputs)
  Saved,     // a forward value saved for the backward graph
};

// One tensor-valued SSA value.
struct Value {
  TensorMeta meta;
  int32_t producer = -1;   // node index, or -1 for graph inputs and constants
  int32_t output_index = 0;
  std::string name;        // "arg0", "add_3", "tangent0", ...
  bool requires_grad = false;
};

// One op application.
struct GraphNode {
  OpPtr op;
  std::vector<ValueId> inputs;   // -1 for an absent optional argument (an undefined tensor)
  std::vector<ValueId> outputs;
  Phase phase = Phase::Forward;
  // Forward nodes: the tape sequence number of the op; backward nodes: that of the forward op
  // whose backward produced them (-1 when unknown).
  int64_t sequence_nr = -1;
  // Forward nodes recorded inside tg::checkpoint(): the region's id (-1: none). The partitioner
  // recomputes such nodes in the backward instead of saving their outputs.
  int32_t checkpoint_region = -1;
};

// A graph input: which value it feeds and where the caller's tensor comes from.
struct GraphInput {
  ValueId value = -1;
  InputKind kind = InputKind::Argument;
  int32_t index = 0;  // argument/tangent/saved position, or lifted-tensor index
};

// A straight-line graph of ops in execution order.
class Graph {
 public:
  std::vector<Value> values;
  std::vector<GraphNode> nodes;
  std::vector<GraphInput> inputs;
  std::vector<ValueId> outputs;  // -1 for an absent output (a gradient the function does not produce)
  // Values whose data is fixed at trace time (CPU constants made inside the function, folded results).
  std::map<ValueId, Tensor> constants;

  // Adds a value and returns its id.
  ValueId add_value(TensorMeta meta, std::string name);
  // Appends a node computing `outputs` from `inputs` (sets each output's producer).
  int32_t add_node(OpPtr op, std::vector<ValueId> inputs, std::vector<ValueId> outputs, Phase phase,
                   int64_t sequence_nr);
  // Marks a value as a graph input.
  void add_input(ValueId v, InputKind kind, int32_t index);
  // Number of nodes per op name (what compile() counters report).
  std::map<std::string, int> op_counts() const;
  // Readable text: one line per node, "%add_3 : f32[4, 5] = add(%arg0, %arg1)  # seq 12".
  std::string to_text() const;
  // Graphviz DOT with forward nodes and backward nodes in different colours.
  std::string to_dot(const std::string& title = "graph") const;
};

// "f32[4, 5]" for a value's metadata (with the device when not the CPU).
std::string meta_str(const TensorMeta& m);

}  // namespace tg::graphs
