// safetensors files: PyTorch-written fixtures, the byte layout of written files, round trips, and
// every damaged-file case as a clear error that changes nothing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "io/safetensors.h"
#include "nn/nn.h"
#include "support/test_support.h"
#include "support/values.h"
#include "tapegraph.h"

namespace tg {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) { return std::string(TG_TEST_DATA_DIR) + "/" + name; }

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A fresh temporary folder per test.
class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tg_safetensors_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(Safetensors, ReadsEveryDtypeWrittenByPyTorch) {
  SafetensorsFile f = load_safetensors(fixture("dtypes.safetensors"));
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"note", "fixture"}}));
  ASSERT_EQ(f.tensors.size(), 7u);
  EXPECT_EQ(f.tensors["f32"].dtype(), kFloat32);
  EXPECT_EQ(f.tensors["f32"].sizes(), (Shape{2, 3}));
  testing::expect_values(f.tensors["f32"], {0, 0.5, 1, 1.5, 2, 2.5}, 0);
  EXPECT_EQ(f.tensors["f64"].dtype(), kFloat64);
  testing::expect_values(f.tensors["f64"], {0, 1.0 / 3, 2.0 / 3, 1}, 0);
  EXPECT_EQ(f.tensors["i64"].to_vector<int64_t>(), (std::vector<int64_t>{-2, -1, 0, 1, 2}));
  EXPECT_EQ(f.tensors["i32"].dtype(), kInt32);
  EXPECT_EQ(f.tensors["i32"].to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3, 4}));
  EXPECT_EQ(f.tensors["flags"].dtype(), kBool);
  EXPECT_EQ(f.tensors["flags"].to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(f.tensors["scalar"].dim(), 0);
  EXPECT_EQ(f.tensors["scalar"].item<float>(), 3.25f);
  EXPECT_EQ(f.tensors["empty"].sizes(), (Shape{0, 3}));
}

TEST_F(Safetensors, PyTorchMlpWeightsGiveTheSameOutput) {
  nn::Sequential mlp{std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(3, 2)};
  mlp.load_state_dict(load_safetensors(fixture("mlp.safetensors")).tensors);
  SafetensorsFile io = load_safetensors(fixture("mlp_io.safetensors"));
  NoGradGuard no_grad;
  testing::expect_close(mlp(io.tensors["x"]), io.tensors["y"], 1e-5, 1e-6);
}

TEST_F(Safetensors, LoadsOntoCuda) {
  TG_REQUIRE_CUDA();
  SafetensorsFile f = load_safetensors(fixture("dtypes.safetensors"), cuda_device(0));
  EXPECT_TRUE(f.tensors["f32"].is_cuda());
  testing::expect_values(f.tensors["f32"].cpu(), {0, 0.5, 1, 1.5, 2, 2.5}, 0);
}

// The tensors check_in_torch.py expects (it loads this file in PyTorch).
TensorDict known_tensors() {
  return {{"a.f32", arange(12, {.dtype = kFloat32}).reshape({3, 4}).div(4.0)},
          {"b.f64", arange(5, {.dtype = kFloat64}).mul(-1.5)},
          {"c.i64", arange(4, {.dtype = kInt64}).mul(1000000000000)},
          {"d.i32", from_vector(std::vector<int32_t>{7, -8}, {2})},
          {"e.bool", from_vector(std::vector<bool>{false, true, true}, {3})},
          {"f.transposed", arange(6, {.dtype = kFloat32}).reshape({2, 3}).t()}};
}

TEST_F(Safetensors, WrittenLayoutFollowsTheFormat) {
  const char* keep = std::getenv("TG_SAFETENSORS_WRITE_DIR");
  const std::string p = keep ? std::string(keep) + "/known.safetensors" : path("known.safetensors");
  save_safetensors(p, known_tensors(), {{"format", "pt"}, {"writer", "tapegraph"}});
  const std::string bytes = read_bytes(p);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  EXPECT_EQ(n % 8, 0u) << "header padded to 8 bytes";
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.front(), '{');
  EXPECT_NE(header.find("\"__metadata__\":{\"format\":\"pt\",\"writer\":\"tapegraph\"}"), std::string::npos) << header;
  EXPECT_NE(header.find("\"a.f32\":{\"data_offsets\":[0,48],\"dtype\":\"F32\",\"shape\":[3,4]}"), std::string::npos)
      << header;
  EXPECT_EQ(header.find_last_not_of(' ') + 1, header.rfind('}') + 1);
  // Data: 48 + 40 + 32 + 8 + 3 + 24 bytes after the header.
  EXPECT_EQ(bytes.size(), 8 + n + 155);
  EXPECT_FALSE(fs::exists(p + ".tmp"));
  SafetensorsFile back = load_safetensors(p);
  for (auto& [k, t] : known_tensors()) {
    EXPECT_EQ(back.tensors[k].dtype(), t.dtype()) << k;
    EXPECT_EQ(back.tensors[k].sizes(), t.sizes()) << k;
    EXPECT_TRUE(back.tensors[k].ne(t).sum().item<int64_t>() == 0) << k;
  }
}

TEST_F(Safetensors, RoundTripFromCuda) {
  TG_REQUIRE_CUDA();
  Tensor t = arange(10, {.dtype = kFloat32, .device = cuda_device(0)}).mul(0.25);
  save_safetensors(path("c.safetensors"), {{"t", t}});
  testing::expect_values(load_safetensors(path("c.safetensors")).tensors["t"], t.cpu().to_vector<double>(), 0);
}

TEST_F(Safetensors, RejectsReservedAndUndefinedNames) {
  EXPECT_THROW_MSG(save_safetensors(path("x"), {{"__metadata__", zeros({1})}}), "\"__metadata__\" is reserved");
  EXPECT_THROW_MSG(save_safetensors(path("x"), {{"w", Tensor()}}), "tensor \"w\" is undefined");
  EXPECT_FALSE(fs::exists(path("x")));
}

// A model, its state before a load, and a checker that nothing changed.
struct Victim {
  nn::Sequential model{std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::Linear>(3, 2)};
  std::map<std::string, Tensor> before;
  Victim() {
    for (auto& [k, t] : model.state_dict()) before[k] = t.clone();
  }
  void expect_unchanged() {
    for (auto& [k, t] : model.state_dict()) EXPECT_TRUE(t.ne(before[k]).sum().item<int64_t>() == 0) << k << " was modified";
  }
};

// Writes a file whose header is `header` (padded) and whose data is `data`.
void write_raw(const std::string& p, std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  write_bytes(p, bytes + header + data);
}

TEST_F(Safetensors, DamagedFilesAreClearErrorsAndChangeNothing) {
  Victim v;
  // A good file of another model's weights, then damaged copies of it.
  nn::Sequential other{std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(3, 2)};
  save_safetensors(path("good"), other.state_dict());
  const std::string good = read_bytes(path("good"));
  auto load_into = [&](const std::string& p) { v.model.load_state_dict(load_safetensors(p).tensors); };

  write_bytes(path("truncated"), good.substr(0, good.size() - 5));
  EXPECT_THROW_MSG(load_into(path("truncated")), "beyond the");
  EXPECT_THROW_MSG(load_into(path("truncated")), "(truncated file?)");
  write_bytes(path("short"), good.substr(0, 5));
  EXPECT_THROW_MSG(load_into(path("short")), "too short for the 8-byte header length");
  write_bytes(path("headerless"), good.substr(0, 40));
  EXPECT_THROW_MSG(load_into(path("headerless")), "exceeds the file");
  std::string garbled = good;
  garbled[9] = '#';
  write_bytes(path("garbled"), garbled);
  EXPECT_THROW_MSG(load_into(path("garbled")), "the header is not valid JSON");
  write_raw(path("dtype"), R"({"0.weight":{"dtype":"F8_E4M3","shape":[3,4],"data_offsets":[0,12]}})", std::string(12, '\0'));
  EXPECT_THROW_MSG(load_into(path("dtype")), "tensor \"0.weight\" has dtype \"F8_E4M3\"; expected one of");
  write_raw(path("half"), R"({"0.weight":{"dtype":"F16","shape":[3,4],"data_offsets":[0,24]}})", std::string(24, '\0'));
  EXPECT_THROW_MSG(load_into(path("half")), "entry \"0.weight\" has dtype float16 but the module's tensor has dtype float32");
  write_raw(path("offsets"), R"({"0.bias":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'));
  EXPECT_THROW_MSG(load_into(path("offsets")), "tensor \"0.bias\" of shape [3] and dtype F32 needs 12 bytes");
  write_raw(path("fields"), R"({"0.bias":{"dtype":"F32","shape":[3]}})", "");
  EXPECT_THROW_MSG(load_into(path("fields")), "tensor \"0.bias\" lacks dtype, shape or data_offsets");
  write_raw(path("bool"), R"({"b":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", std::string("\x01\x07", 2));
  EXPECT_THROW_MSG(load_into(path("bool")), "tensor \"b\" holds a BOOL byte of value 7");
  EXPECT_THROW_MSG(load_into(path("missing-file")), "cannot open");
  v.expect_unchanged();
}

TEST_F(Safetensors, MismatchedEntriesNameTheKeyAndChangeNothing) {
  Victim v;
  std::map<std::string, Tensor> sd;
  for (auto& [k, t] : v.model.state_dict()) sd[k] = t.clone().add(1.0);

  auto wrong_shape = sd;
  wrong_shape["2.weight"] = zeros({2, 4});
  save_safetensors(path("shape"), wrong_shape);
  EXPECT_THROW_MSG(v.model.load_state_dict(load_safetensors(path("shape")).tensors),
                   "entry \"2.weight\" has shape [2, 4] but the module's tensor has shape [2, 3]");
  auto wrong_dtype = sd;
  wrong_dtype["0.bias"] = zeros({3}, {.dtype = kFloat64});
  save_safetensors(path("dtype"), wrong_dtype);
  EXPECT_THROW_MSG(v.model.load_state_dict(load_safetensors(path("dtype")).tensors),
                   "entry \"0.bias\" has dtype float64 but the module's tensor has dtype float32");
  auto missing = sd;
  missing.erase("2.bias");
  save_safetensors(path("missing"), missing);
  EXPECT_THROW_MSG(v.model.load_state_dict(load_safetensors(path("missing")).tensors), "missing key \"2.bias\"");
  auto extra = sd;
  extra["3.weight"] = zeros({1});
  save_safetensors(path("extra"), extra);
  EXPECT_THROW_MSG(v.model.load_state_dict(load_safetensors(path("extra")).tensors), "unexpected key \"3.weight\"");
  v.expect_unchanged();

  // Not strict: the missing and unexpected keys are skipped, the rest is loaded.
  v.model.load_state_dict(load_safetensors(path("extra")).tensors, false);
  v.model.load_state_dict(missing, false);
  for (auto& [k, t] : v.model.state_dict()) EXPECT_TRUE(t.ne(sd[k]).sum().item<int64_t>() == 0) << k;
}

TEST_F(Safetensors, FailedWriteLeavesThePreviousFile) {
  save_safetensors(path("ckpt"), {{"a", ones({2})}});
  const std::string before = read_bytes(path("ckpt"));
  EXPECT_THROW_MSG(save_safetensors(path("ckpt"), {{"a", ones({2})}, {"b", Tensor()}}), "tensor \"b\" is undefined");
  EXPECT_EQ(read_bytes(path("ckpt")), before);
  EXPECT_THROW_MSG(save_safetensors(path("no-such-dir/ckpt"), {{"a", ones({2})}}), "cannot open");
}

}  // namespace
}  // namespace tg

namespace tg {
namespace {

// A module with a buffer, nested: keys as in PyTorch ("block.scale", "block.running_mean").
class WithBuffer : public nn::Module {
 public:
  WithBuffer() {
    register_parameter("scale", ones({3}));
    register_buffer("running_mean", zeros({3}));
  }
  Tensor forward(const Tensor& x) override { return x * parameter("scale"); }
  std::string type_name() const override { return "WithBuffer"; }
};

class Outer : public nn::Module {
 public:
  Outer() { register_module("block", std::make_shared<WithBuffer>()); }
  Tensor forward(const Tensor& x) override { return x; }
  std::string type_name() const override { return "Outer"; }
};

TEST(StateDict, IncludesBuffersUnderPyTorchNames) {
  Outer m;
  auto sd = m.state_dict();
  EXPECT_EQ(sd.size(), 2u);
  ASSERT_EQ(sd.count("block.scale"), 1u);
  ASSERT_EQ(sd.count("block.running_mean"), 1u);
  EXPECT_FALSE(sd["block.scale"].requires_grad()) << "entries are detached";
  m.load_state_dict({{"block.scale", full({3}, 2.0)}, {"block.running_mean", full({3}, 5.0)}});
  testing::expect_values(m.parameter("block.running_mean"), {5, 5, 5}, 0);
  testing::expect_values(m.parameter("block.scale"), {2, 2, 2}, 0);
  EXPECT_TRUE(m.parameter("block.scale").requires_grad()) << "a load keeps the parameter a trainable leaf";
}

TEST(StateDict, BatchNormBuffersRoundTripThroughAFile) {
  nn::Sequential m{std::make_shared<nn::Linear>(2, 3), std::make_shared<nn::BatchNorm1d>(3)};
  m(randn({4, 2}));  // training mode: updates the running statistics
  auto sd = m.state_dict();
  for (const char* k : {"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
                        "1.num_batches_tracked"}) {
    EXPECT_EQ(sd.count(k), 1u) << k;
  }
  const auto p = (fs::temp_directory_path() / "tg_test_bn.safetensors").string();
  save_safetensors(p, sd);
  nn::Sequential copy{std::make_shared<nn::Linear>(2, 3), std::make_shared<nn::BatchNorm1d>(3)};
  copy.load_state_dict(load_safetensors(p).tensors);
  fs::remove(p);
  for (auto& [k, t] : copy.state_dict()) EXPECT_EQ(t.ne(sd[k]).sum().item<int64_t>(), 0) << k;
  EXPECT_EQ(copy.state_dict()["1.num_batches_tracked"].item<int64_t>(), 1);
}

}  // namespace
}  // namespace tg
