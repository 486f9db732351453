#include "graphs/ir/graph.h"

#include <sstream>

namespace tg::graphs {
namespace {

const char* short_dtype(DType d) {
  switch (d) {
    case DType::Bool: return "b8";
    case DType::Int32: return "i32";
    case DType::Int64: return "i64";
    case DType::Float16: return "f16";
    case DType::BFloat16: return "bf16";
    case DType::Float32: return "f32";
    case DType::Float64: return "f64";
  }
  return "?";
}

const char* kind_name(InputKind k) {
  switch (k) {
    case InputKind::Argument: return "arg";
    case InputKind::Lifted: return "lifted";
    case InputKind::Tangent: return "tangent";
    case InputKind::Saved: return "saved";
  }
  return "?";
}

std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string meta_str(const TensorMeta& m) {
  std::string s = short_dtype(m.dtype) + shape_str(m.sizes);
  if (!m.device.is_cpu()) s += "@" + m.device.str();
  return s;
}

ValueId Graph::add_value(TensorMeta meta, std::string name) {
  values.push_back(Value{std::move(meta), -1, 0, std::move(name), false});
  return static_cast<ValueId>(values.size() - 1);
}

int32_t Graph::add_node(OpPtr op, std::vector<ValueId> ins, std::vector<ValueId> outs, Phase phase,
                        int64_t sequence_nr) {
  const auto index = static_cast<int32_t>(nodes.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    values[static_cast<size_t>(outs[i])].producer = index;
    values[static_cast<size_t>(outs[i])].output_index = static_cast<int32_t>(i);
  }
  nodes.push_back(GraphNode{std::move(op), std::move(ins), std::move(outs), phase, sequence_nr});
  return index;
}

void Graph::add_input(ValueId v, InputKind kind, int32_t index) { inputs.push_back(GraphInput{v, kind, index}); }

std::map<std::string, int> Graph::op_counts() const {
  std::map<std::string, int> counts;
  for (const GraphNode& n : nodes) ++counts[std::string(n.op->name())];
  return counts;
}

std::string Graph::to_text() const {
  std::ostringstream os;
  // An absent optional argument or gradient (an undefined tensor) has no value: it prints as None.
  auto ref = [&](ValueId v) { return v < 0 ? std::string("None") : "%" + values[static_cast<size_t>(v)].name; };
  os << "graph(";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = values[static_cast<size_t>(inputs[i].value)];
    os << (i ? ", " : "") << ref(inputs[i].value) << " : " << meta_str(v.meta) << " [" << kind_name(inputs[i].kind)
       << "]";
  }
  os << "):\n";
  for (const auto& [id, t] : constants)
    os << "  " << ref(id) << " : " << meta_str(values[static_cast<size_t>(id)].meta) << " = constant\n";
  for (const GraphNode& n : nodes) {
    os << "  ";
    for (size_t i = 0; i < n.outputs.size(); ++i)
      os << (i ? ", " : "") << ref(n.outputs[i]) << " : " << meta_str(values[static_cast<size_t>(n.outputs[i])].meta);
    os << (n.outputs.empty() ? "" : " = ") << n.op->name() << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << ref(n.inputs[i]);
    const std::string attrs = n.op->attrs();
    if (!attrs.empty()) os << (n.inputs.empty() ? "" : ", ") << attrs;
    os << ")";
    if (n.phase == Phase::Backward) os << "  # backward of seq " << n.sequence_nr;
    os << "\n";
  }
  os << "  return (";
  for (size_t i = 0; i < outputs.size(); ++i) os << (i ? ", " : "") << ref(outputs[i]);
  os << ")\n";
  return os.str();
}

std::string Graph::to_dot(const std::string& title) const {
  std::ostringstream os;
  os << "digraph \"" << dot_escape(title) << "\" {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  for (const GraphInput& in : inputs) {
    const Value& v = values[static_cast<size_t>(in.value)];
    os << "  v" << in.value << " [shape=ellipse, style=filled, fillcolor=\"#eeeeee\", label=\"" << dot_escape(v.name)
       << "\\n" << dot_escape(meta_str(v.meta)) << "\"];\n";
  }
  for (const auto& [id, t] : constants) {
    os << "  v" << id << " [shape=note, label=\"" << dot_escape(values[static_cast<size_t>(id)].name)
       << "\\nconstant\"];\n";
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const GraphNode& n = nodes[i];
    const char* colour = n.phase == Phase::Forward ? "#cfe2ff" : "#ffd8b1";
    os << "  n" << i << " [shape=box, style=filled, fillcolor=\"" << colour << "\", label=\""
       << dot_escape(std::string(n.op->name()));
    if (!n.outputs.empty()) os << "\\n" << dot_escape(meta_str(values[static_cast<size_t>(n.outputs[0])].meta));
    os << "\"];\n";
    for (ValueId in : n.inputs) {
      if (in < 0) continue;  // an absent optional argument
      const Value& v = values[static_cast<size_t>(in)];
      if (v.producer >= 0) {
        os << "  n" << v.producer << " -> n" << i << ";\n";
      } else {
        os << "  v" << in << " -> n" << i << ";\n";
      }
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    os << "  out" << i << " [shape=ellipse, style=filled, fillcolor=\"#d1e7dd\", label=\"output " << i
       << (outputs[i] < 0 ? " (None)" : "") << "\"];\n";
    if (outputs[i] < 0) continue;  // a gradient that is absent
    const Value& v = values[static_cast<size_t>(outputs[i])];
    os << "  " << (v.producer >= 0 ? "n" + std::to_string(v.producer) : "v" + std::to_string(outputs[i])) << " -> out"
       << i << ";\n";
  }
  os << "  legend [shape=plaintext, label=\"blue: forward   orange: backward\"];\n}\n";
  return os.str();
}

}  // namespace tg::graphs
