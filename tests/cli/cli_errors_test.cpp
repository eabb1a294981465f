// Every bad input to `dpv` gives one clear line on stderr, exit status 1 (2 for command-line
// parse errors), and no output file. Each test runs the real binary.
#include <fstream>

#include "engine/io/safetensors.h"
#include "run_dpv.h"

namespace dpv::testing {
namespace {

class CliErrors : public CliTest {
 protected:
  // `dpv step` on a model text and a batch file, writing to out.safetensors.
  RunResult step(const std::string& model_text, const std::string& batch, const std::string& devices = "cpu:1",
                 std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"step", "--model", write_text("model.json", model_text), "--batch", batch,
                                  "--devices", devices, "--out", out()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_dpv(args);
  }
  std::string out() const { return path("out.safetensors"); }
};

TEST_F(CliErrors, Float64InputToFloat32ModelIsADtypeMismatchInPyTorchsWords) {
  auto r = step(simple_model_json(), write_batch("b.safetensors", {8, 10}, DType::Float64), "cpu:2");
  expect_error(r, {"mat1 and mat2 must have the same dtype, but got Double and Float"}, out());
}

TEST_F(CliErrors, ShapesThatDoNotFitNameBothShapes) {
  auto r = step(simple_model_json(), write_batch("b.safetensors", {8, 7}, DType::Float32));
  expect_error(r, {"8x7", "10x2"}, out());
}

TEST_F(CliErrors, OneSampleBatchNormChunkFailsInTheLastReplica) {
  // 10 samples on 4 devices: torch.chunk gives [3, 3, 3, 1]; plain BatchNorm cannot train on 1 value.
  auto r = step(bn_mlp_json(), write_batch("b.safetensors", {10, 2}, DType::Float32, 3), "cpu:4");
  expect_error(r,
               {"Caught ValueError in replica 3 on device 3.",
                "Expected more than 1 value per channel when training, got input size torch.Size([1, 16])"},
               out());
}

TEST_F(CliErrors, SyncBatchNormAcceptsTheOneSampleChunk) {
  auto r = step(bn_mlp_json(), write_batch("b.safetensors", {10, 2}, DType::Float32, 3), "cpu:4", {"--sync-bn"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(exists(out()));
}

TEST_F(CliErrors, EmptyBatch) {
  auto r = step(simple_model_json(), write_batch("b.safetensors", {0, 10}, DType::Float32));
  expect_error(r, {"empty batch"}, out());
}

TEST_F(CliErrors, BadDeviceSpecs) {
  const std::string batch = write_batch("b.safetensors", {8, 10}, DType::Float32);
  for (const std::string spec : {"gpu:2", "cpu:0", "cpu:", "cpu:-1", "cpu:two", ""}) {
    SCOPED_TRACE("--devices '" + spec + "'");
    auto r = step(simple_model_json(), batch, spec);
    expect_error(r, {"device spec", "'" + spec + "'"}, out());
  }
}

// The engine speaks of the device spec; dpv adds the flag that gave it. cuda:63 fails on every
// machine: no CUDA here, or no 64th GPU.
TEST_F(CliErrors, DeviceErrorsNameTheDevicesFlag) {
  const std::string batch = write_batch("b.safetensors", {8, 10}, DType::Float32);
  auto r = step(simple_model_json(), batch, "cuda:63");
  expect_error(r, {"--devices: ", "device spec 'cuda:63'"}, out());
}

TEST_F(CliErrors, MalformedModelJson) {
  const std::string batch = write_batch("b.safetensors", {8, 10}, DType::Float32);
  const std::string full = simple_model_json();
  struct Case { std::string text, needle; };
  for (const Case& c : {Case{full.substr(0, full.size() / 2), "not valid JSON"}, Case{"", "empty"},
                        Case{"[1, 2]", "JSON object"},
                        Case{R"({"layers": [{"type": "lstm", "input_size": 3}]})", "lstm"},
                        Case{R"({"layers": [{"type": "linear", "in_features": 10}]})", "out_features"},
                        Case{R"({"layers": []})", "empty"}}) {
    SCOPED_TRACE(c.text);
    auto r = step(c.text, batch);
    expect_error(r, {"model.json", c.needle}, out());
  }
}

TEST_F(CliErrors, MissingModelFileIsNamed) {
  auto r = run_dpv({"step", "--model", path("nope.json"), "--batch", write_batch("b.safetensors", {4, 10}, DType::Float32),
                    "--devices", "cpu:1", "--out", out()});
  expect_error(r, {"nope.json"}, out());
}

TEST_F(CliErrors, TruncatedAndCorruptSafetensors) {
  const std::string good = write_batch("good.safetensors", {8, 10}, DType::Float32);
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 40u);
  const std::string huge_header = std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) + "{}";
  struct Case { std::string name, bytes; };
  for (const Case& c : {Case{"truncated_data.safetensors", bytes.substr(0, bytes.size() - 5)},
                        Case{"truncated_header.safetensors", bytes.substr(0, 20)},
                        Case{"tiny.safetensors", bytes.substr(0, 3)},
                        Case{"huge_header.safetensors", huge_header},
                        Case{"not_json.safetensors", std::string("\x04\x00\x00\x00\x00\x00\x00\x00", 8) + "abcd"}}) {
    SCOPED_TRACE(c.name);
    auto r = step(simple_model_json(), write_text(c.name, c.bytes));
    expect_error(r, {c.name}, out());
  }
}

TEST_F(CliErrors, MissingTensorsInTheBatch) {
  TensorMap no_target;
  no_target.set("input", Tensor::zeros({4, 10}, DType::Float32));
  auto r = step(simple_model_json(), write_tensors("b.safetensors", no_target));
  expect_error(r, {"target", "b.safetensors"}, out());

  TensorMap no_input;
  no_input.set("target", Tensor::from_int64({4}, {0, 1, 0, 1}));
  r = step(simple_model_json(), write_tensors("b2.safetensors", no_input));
  expect_error(r, {"input", "b2.safetensors"}, out());
}

TEST_F(CliErrors, FloatTargetsAreRejected) {
  TensorMap batch;
  batch.set("input", Tensor::zeros({4, 10}, DType::Float32));
  batch.set("target", Tensor::zeros({4}, DType::Float32));
  auto r = step(simple_model_json(), write_tensors("b.safetensors", batch));
  expect_error(r, {"Long", "target"}, out());
}

TEST_F(CliErrors, StateWithMissingOrWronglyNamedParameters) {
  const std::string batch = write_batch("b.safetensors", {8, 10}, DType::Float32);
  TensorMap missing_bias;
  missing_bias.set("0.weight", Tensor::zeros({2, 10}, DType::Float32));
  auto r = step(simple_model_json(), batch, "cpu:1", {"--state", write_tensors("s1.safetensors", missing_bias)});
  expect_error(r, {"Missing key(s) in state_dict", "0.bias"}, out());

  TensorMap prefixed;  // a DataParallel checkpoint: every name carries "module."
  prefixed.set("module.0.weight", Tensor::zeros({2, 10}, DType::Float32));
  prefixed.set("module.0.bias", Tensor::zeros({2}, DType::Float32));
  r = step(simple_model_json(), batch, "cpu:1", {"--state", write_tensors("s2.safetensors", prefixed)});
  expect_error(r, {"Missing key(s) in state_dict", "0.weight"}, out());

  TensorMap wrong_shape;
  wrong_shape.set("0.weight", Tensor::zeros({10, 2}, DType::Float32));
  wrong_shape.set("0.bias", Tensor::zeros({2}, DType::Float32));
  r = step(simple_model_json(), batch, "cpu:1", {"--state", write_tensors("s3.safetensors", wrong_shape)});
  expect_error(r, {"size mismatch for 0.weight"}, out());
}

TEST_F(CliErrors, UnwritableOutputPath) {
  const std::string bad_out = path("no_such_folder/out.safetensors");
  auto r = run_dpv({"step", "--model", write_text("m.json", simple_model_json()), "--batch",
                    write_batch("b.safetensors", {8, 10}, DType::Float32), "--devices", "cpu:1", "--out", bad_out});
  expect_error(r, {"no_such_folder"}, bad_out);
}

// MNIST-format files: magic, sizes and the file length are all checked.
std::string idx_header(uint32_t magic, std::vector<uint32_t> dims) {
  std::string s;
  auto put = [&s](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((v >> shift) & 0xff));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  return s;
}

TEST_F(CliErrors, BadIdxFiles) {
  const std::string labels = write_text("labels.idx", idx_header(0x801, {4}) + std::string(4, '\1'));
  const std::string full_images = idx_header(0x803, {4, 28, 28}) + std::string(4 * 28 * 28, '\x10');
  struct Case { std::string name, bytes; };
  for (const Case& c : {Case{"truncated.idx", full_images.substr(0, full_images.size() - 100)},
                        Case{"bad_magic.idx", idx_header(0x1234, {4, 28, 28}) + std::string(4 * 28 * 28, '\0')},
                        Case{"short.idx", full_images.substr(0, 6)}}) {
    SCOPED_TRACE(c.name);
    auto r = run_dpv({"train", "--preset", "mnist-mlp", "--devices", "cpu:1", "--steps", "1", "--batch", "2",
                      "--idx-images", write_text(c.name, c.bytes), "--idx-labels", labels});
    expect_error(r, {c.name});
  }
  // Counts that disagree between the two files.
  const std::string images = write_text("images.idx", full_images);
  auto r = run_dpv({"train", "--preset", "mnist-mlp", "--devices", "cpu:1", "--steps", "1", "--batch", "2",
                    "--idx-images", images, "--idx-labels",
                    write_text("labels3.idx", idx_header(0x801, {3}) + std::string(3, '\1'))});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err_lines(), 1) << r.err;
}

TEST_F(CliErrors, UnknownPresetAndBadTrace) {
  auto r = run_dpv({"train", "--preset", "resnet9000", "--steps", "1"});
  expect_error(r, {"resnet9000"});
  const std::string bad_trace = path("missing_dir/trace.json");
  r = run_dpv({"train", "--preset", "simple", "--steps", "2", "--trace", bad_trace});
  expect_error(r, {"missing_dir"}, bad_trace);
}

TEST_F(CliErrors, CommandLineParseErrorsExitWithStatus2) {
  const std::string batch = write_batch("b.safetensors", {8, 10}, DType::Float32);
  const std::string model = write_text("m.json", simple_model_json());
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {},
           {"frobnicate"},
           {"step", "--model", model, "--batch", batch, "--devices", "cpu:1"},  // no --out
           {"step", "--model", model, "--batch", batch, "--devices", "cpu:1", "--out", out(), "--steps", "0"},
           {"step", "--model", model, "--batch", batch, "--devices", "cpu:1", "--out", out(), "--lr", "fast"},
           {"sample", "--no-such-flag"},
       }) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    SCOPED_TRACE(joined);
    auto r = run_dpv(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_FALSE(r.err.empty());
    EXPECT_FALSE(exists(out()));
  }
}

}  // namespace
}  // namespace dpv::testing
