// fuzz_oracle: runs the fuzzer's programs through tapegraph and writes them, with their inputs and
// tapegraph's outputs and gradients, as one JSON file that tests/fuzz/torch_oracle.py checks against
// PyTorch. The rule there: every output, gradient and input after the call must satisfy
//   |tg_i - truth_i| <= 4 * max(|yard_i - truth_i|, rms_j |yard_j - truth_j|, floor_i)
// where truth is the program in float64, yard PyTorch at the program's dtypes (or under autocast),
// and floor_i = 8 ulps of the dtype at the values' scale (PyTorch's error may be 0); autocast
// programs may also be 2 ulps of the autocast dtype off.
//
//   fuzz_oracle --first S --count N --device cpu|cuda --backend eager|aot_eager|cudagraphs
//               [--autocast bfloat16|float16] [--known-broken] --out FILE
//
// --known-broken (or TG_ORACLE_KNOWN_BROKEN=1) makes the runner fail, not skip, programs that
// PyTorch refuses but tapegraph runs.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "autograd/zero_grad.h"
#include "fuzz/fuzz_generator.h"
#include "fuzz/fuzz_ops.h"

namespace tg::fuzz {
namespace {

using nlohmann::json;

// Values as JSON numbers (doubles print so that they read back exactly); NaN and infinities,
// which JSON lacks, as the strings "nan", "inf" and "-inf" (Python's float() reads them).
json values_of(const Tensor& t) {
  json out = json::array();
  if (t.numel() == 0) return out;
  for (double v : t.detach().to(kCPU).to(kFloat64).contiguous().to_vector<double>()) {
    if (std::isnan(v)) out.push_back("nan");
    else if (std::isinf(v)) out.push_back(v > 0 ? "inf" : "-inf");
    else out.push_back(v);
  }
  return out;
}

json sizes_of(const Shape& s) {
  json out = json::array();
  for (int64_t d : s) out.push_back(d);
  return out;
}

std::string name_of(DType t) { return std::string(dtype_name(t)); }

// The fixed weights of the backward: sum(out * w), w_i in {-1, -7/8, ..., 1} (exact in every dtype).
std::vector<double> weights_for(uint64_t seed, size_t k, int64_t numel) {
  Rng rng(seed * 1000003ull + k * 7919ull + 11);
  std::vector<double> w(static_cast<size_t>(numel));
  for (double& x : w) x = static_cast<double>(rng.between(-8, 8)) / 8.0;
  return w;
}

struct Run {
  TensorList inputs, outputs, params;
};

// One call: fresh inputs, cleared parameter gradients, the program, backward of sum(out * w).
Run call_once(const Program& p, Device device, const std::function<TensorList(const TensorList&)>& fn) {
  Run r;
  r.params = program_parameters(p);
  zero_grad(r.params);
  r.inputs = make_inputs(p, device);
  manual_seed(p.seed);
  r.outputs = fn(r.inputs);
  TensorList diff, weights;
  for (size_t k = 0; k < r.outputs.size(); ++k) {
    const Tensor& out = r.outputs[k];
    if (!out.requires_grad()) continue;
    diff.push_back(out);
    weights.push_back(
        from_vector(weights_for(p.seed, k, out.numel()), out.sizes(), {.dtype = kFloat64, .device = device}).to(out.dtype()));
  }
  if (!diff.empty()) backward(diff, weights);
  return r;
}

json tensor_entry(const std::string& name, const Tensor& t, bool requires_grad, bool transposed) {
  // Values in the order they were drawn (a transposed input is stored untransposed).
  const Tensor drawn = transposed ? t.detach().transpose(-1, -2) : t.detach();
  return {{"name", name}, {"dtype", name_of(t.dtype())}, {"sizes", sizes_of(drawn.sizes())},
          {"transposed", transposed}, {"requires_grad", requires_grad}, {"values", values_of(drawn)}};
}

json program_json(const Program& p, Device device, const std::string& backend) {
  const auto& ops = fuzz_ops();
  json j;
  j["seed"] = p.seed;
  const TensorList inputs = make_inputs(p, device);
  j["inputs"] = json::array();
  for (size_t i = 0; i < inputs.size(); ++i)
    j["inputs"].push_back(tensor_entry("v" + std::to_string(i), inputs[i], p.inputs[i].requires_grad, p.inputs[i].transposed));
  j["params"] = json::array();
  const TensorList params = program_parameters(p);
  for (size_t i = 0; i < params.size(); ++i) j["params"].push_back(tensor_entry("p" + std::to_string(i), params[i], true, false));
  j["body"] = json::array();
  int next = static_cast<int>(p.inputs.size());
  for (const Statement& s : p.body) {
    const FuzzOp& op = ops[static_cast<size_t>(s.op)];
    Names names;
    for (int v : s.operands) names.push_back("v" + std::to_string(v));
    j["body"].push_back({{"name", "v" + std::to_string(next++)}, {"op", op.name}, {"python", op.python(names, s.attrs)},
                         {"in_place", op.in_place}, {"dtype", name_of(s.dtype)}});
  }
  j["outputs"] = json::array();
  for (int v : p.outputs) j["outputs"].push_back("v" + std::to_string(v));

  json tg;
  try {
    std::function<TensorList(const TensorList&)> fn = [&p](const TensorList& xs) { return run_program(p, xs); };
    Run r;
    if (backend == "eager") {
      r = call_once(p, device, fn);
    } else {
      CompileOptions options;
      options.backend = backend;
      options.fuse_gradient_epilogues = p.gradient_epilogues;
      graphs::CompiledFunction compiled(fn, options);
      // Three calls: tracing, then (cudagraphs) recording and replay; the last one is checked.
      for (int call = 0; call < 3; ++call)
        r = call_once(p, device, [&compiled](const TensorList& xs) { return compiled.call(xs); });
    }
    tg["outputs"] = json::array();
    for (size_t k = 0; k < r.outputs.size(); ++k) {
      const Tensor& out = r.outputs[k];
      tg["outputs"].push_back({{"dtype", name_of(out.dtype())}, {"sizes", sizes_of(out.sizes())},
                               {"requires_grad", out.requires_grad()}, {"values", values_of(out)},
                               {"weights", weights_for(p.seed, k, out.numel())}});
    }
    tg["inputs_after"] = json::array();
    for (const Tensor& x : r.inputs) tg["inputs_after"].push_back(values_of(x));
    tg["grads"] = json::object();
    for (size_t i = 0; i < r.inputs.size(); ++i)
      if (p.inputs[i].requires_grad)
        tg["grads"]["v" + std::to_string(i)] = r.inputs[i].grad().defined() ? values_of(r.inputs[i].grad()) : json();
    for (size_t i = 0; i < r.params.size(); ++i)
      tg["grads"]["p" + std::to_string(i)] = r.params[i].grad().defined() ? values_of(r.params[i].grad()) : json();
  } catch (const std::exception& e) {
    tg = {{"error", e.what()}};
  }
  j["tg"] = tg;
  return j;
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

int run(int argc, char** argv) {
  uint64_t first = 1, count = 100;
  std::string device_name = "cpu", backend = "eager", out_path, autocast;
  OracleOptions options;
  options.known_broken = env_flag("TG_ORACLE_KNOWN_BROKEN");
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("fuzz_oracle: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--first") first = std::stoull(value());
    else if (a == "--count") count = std::stoull(value());
    else if (a == "--device") device_name = value();
    else if (a == "--backend") backend = value();
    else if (a == "--autocast") autocast = value();
    else if (a == "--out") out_path = value();
    else if (a == "--known-broken") options.known_broken = true;
    else throw std::runtime_error("fuzz_oracle: unknown argument " + a);
  }
  if (out_path.empty()) throw std::runtime_error("fuzz_oracle: --out FILE is required");
  if (device_name != "cpu" && device_name != "cuda")
    throw std::runtime_error("fuzz_oracle: --device takes cpu or cuda, got " + device_name);
  if (backend != "eager" && backend != "aot_eager" && backend != "cudagraphs")
    throw std::runtime_error("fuzz_oracle: --backend takes eager, aot_eager or cudagraphs, got " + backend);
  const Device device = device_name == "cuda" ? cuda_device() : Device(kCPU);
  if (!autocast.empty()) {
    if (autocast != "bfloat16" && autocast != "float16")
      throw std::runtime_error("fuzz_oracle: --autocast takes bfloat16 or float16, got " + autocast);
    options.autocast = autocast == "bfloat16" ? kBFloat16 : kFloat16;
  }
  json doc;
  doc["device"] = device_name;
  doc["backend"] = backend;
  doc["autocast"] = autocast.empty() ? json() : json(autocast);
  doc["known_broken"] = options.known_broken;
  doc["programs"] = json::array();
  for (uint64_t seed = first; seed < first + count; ++seed) {
    const Program p = generate_oracle_program(seed, options);
    move_modules(p, device);
    doc["programs"].push_back(program_json(p, device, backend));
  }
  std::ofstream out(out_path);
  out << doc.dump() << "\n";
  return out.good() ? 0 : 1;
}

}  // namespace
}  // namespace tg::fuzz

int main(int argc, char** argv) {
  try {
    return tg::fuzz::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
}
