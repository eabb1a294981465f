// The dpv subcommands end to end: what they print and what they write.
#include <cmath>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "engine/io/safetensors.h"
#include "run_dpv.h"

namespace dpv::testing {
namespace {

using CliCommands = CliTest;

std::string loss_line(const std::string& out) {
  std::smatch m;
  static const std::regex re("Loss: ([0-9]+\\.[0-9]{4})\n");
  return std::regex_search(out, m, re) ? m[1].str() : "";
}

TEST_F(CliCommands, DevicesDescribesTheMachine) {
  auto r = run_dpv({"devices"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("CPU workers: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CUDA"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OpenBLAS"), std::string::npos) << r.out;
  // The engine's description speaks of device specs; dpv says which flag takes one.
  EXPECT_NE(r.out.find("Device specs for --devices: cpu:K"), std::string::npos) << r.out;
}

TEST_F(CliCommands, SampleOnOneDevicePrintsWhatTheSeedProgramPrints) {
  auto r = run_dpv({"sample", "--devices", "cpu:1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Using single GPU or CPU\n", 0), 0u) << r.out;
  const std::string loss = loss_line(r.out);
  ASSERT_FALSE(loss.empty()) << r.out;
  // A fresh 2-class linear model starts near ln 2.
  EXPECT_NEAR(std::stod(loss), std::log(2.0), 0.5);
  // "Loss: ..." is the last line, as in the seed program.
  EXPECT_EQ(r.out.substr(r.out.size() - 13), "Loss: " + loss + "\n");
}

TEST_F(CliCommands, SampleOnFourDevicesSplitsTheBatchAndGivesTheSameLoss) {
  auto one = run_dpv({"sample", "--devices", "cpu:1", "--seed", "5"});
  auto four = run_dpv({"sample", "--devices", "cpu:4", "--seed", "5"});
  ASSERT_EQ(four.exit_code, 0) << four.err;
  EXPECT_EQ(four.out.rfind("Using 4 GPUs\n", 0), 0u) << four.out;
  EXPECT_NE(four.out.find("[8, 8, 8, 8]"), std::string::npos) << four.out;
  // A Linear layer has no cross-sample coupling: DataParallel's loss equals the single-device loss.
  EXPECT_EQ(loss_line(one.out), loss_line(four.out));
  auto other_seed = run_dpv({"sample", "--devices", "cpu:1", "--seed", "6"});
  EXPECT_NE(loss_line(one.out), loss_line(other_seed.out));
}

TEST_F(CliCommands, StepWritesOutputLossGradsStateAndStats) {
  const std::string model = write_text("m.json", bn_mlp_json());
  const std::string batch = write_batch("b.safetensors", {12, 2}, DType::Float32, 3);
  const std::string out = path("o.safetensors");
  auto r = run_dpv({"step", "--model", model, "--batch", batch, "--devices", "cpu:2", "--out", out, "--seed", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TensorMap t = load_safetensors(out);
  EXPECT_EQ(t.at("output").shape(), (Shape{12, 3}));
  EXPECT_EQ(t.at("loss").ndim(), 0);
  for (const char* name : {"grad/0.weight", "grad/1.weight", "grad/6.bias", "state/1.running_var",
                           "state/4.num_batches_tracked", "stats/1/dev0/mean", "stats/1/dev1/var", "stats/4/dev1/mean"})
    EXPECT_TRUE(t.contains(name)) << name;
  EXPECT_FALSE(t.contains("stats/1/global/mean"));
  EXPECT_FALSE(t.contains("stats/1/dev2/mean"));
  EXPECT_EQ(t.at("state/1.num_batches_tracked").to_int64().at(0), 1);
  // Per-device statistics differ: each device normalises its own chunk.
  EXPECT_NE(t.at("stats/1/dev0/mean").to_doubles(), t.at("stats/1/dev1/mean").to_doubles());

  const std::string out_sync = path("sync.safetensors");
  r = run_dpv({"step", "--model", model, "--batch", batch, "--devices", "cpu:2", "--out", out_sync, "--seed", "3",
               "--sync-bn"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TensorMap s = load_safetensors(out_sync);
  ASSERT_TRUE(s.contains("stats/1/global/mean"));
  ASSERT_TRUE(s.contains("stats/4/global/var"));
  // The global mean is the count-weighted mean of the two equal chunks' means.
  auto g = s.at("stats/1/global/mean").to_doubles(), m0 = s.at("stats/1/dev0/mean").to_doubles(),
       m1 = s.at("stats/1/dev1/mean").to_doubles();
  for (size_t c = 0; c < g.size(); ++c) EXPECT_NEAR(g[c], 0.5 * (m0[c] + m1[c]), 1e-5);
}

TEST_F(CliCommands, StepWithSyncBnOnOneDeviceWritesGlobalStatsEqualToTheDevices) {
  const std::string model = write_text("m.json", bn_mlp_json());
  const std::string batch = write_batch("b.safetensors", {12, 2}, DType::Float32, 3);
  const std::string out = path("one.safetensors");
  auto r = run_dpv({"step", "--model", model, "--batch", batch, "--devices", "cpu:1", "--out", out, "--seed", "3",
                    "--sync-bn"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TensorMap t = load_safetensors(out);
  for (const std::string layer : {"1", "4"}) {
    for (const std::string what : {"mean", "var"}) {
      const std::string global = "stats/" + layer + "/global/" + what, dev0 = "stats/" + layer + "/dev0/" + what;
      ASSERT_TRUE(t.contains(global)) << global;
      ASSERT_TRUE(t.contains(dev0)) << dev0;
      EXPECT_EQ(t.at(global).shape(), (Shape{16}));
      // One device holds the whole batch: its statistics are the global ones, bit for bit.
      EXPECT_EQ(t.at(global).to_doubles(), t.at(dev0).to_doubles()) << global;
    }
  }
  EXPECT_FALSE(t.contains("stats/1/dev1/mean"));

  // Without --sync-bn there are no global statistics to report, on one device as on several.
  const std::string plain = path("plain.safetensors");
  r = run_dpv({"step", "--model", model, "--batch", batch, "--devices", "cpu:1", "--out", plain, "--seed", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(load_safetensors(plain).contains("stats/1/global/mean"));
}

TEST_F(CliCommands, StepWithoutStateIsDeterministicPerSeed) {
  const std::string model = write_text("m.json", simple_model_json());
  const std::string batch = write_batch("b.safetensors", {32, 10}, DType::Float32);
  auto run = [&](const std::string& seed, const std::string& name) {
    auto r = run_dpv({"step", "--model", model, "--batch", batch, "--devices", "cpu:2", "--seed", seed, "--out", path(name)});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return load_safetensors(path(name)).at("state/0.weight").to_doubles();
  };
  EXPECT_EQ(run("1", "o1.safetensors"), run("1", "o2.safetensors"));
  EXPECT_NE(run("1", "o1.safetensors"), run("2", "o3.safetensors"));
}

TEST_F(CliCommands, StepOutputChainsAsTheNextStepsState) {
  // Two chained single steps (each reading the previous output's state/*) equal --steps 2.
  const std::string model = write_text("m.json", bn_mlp_json());
  const std::string batch = write_batch("b.safetensors", {12, 2}, DType::Float32, 3);
  auto base = std::vector<std::string>{"step", "--model", model, "--batch", batch, "--devices", "cpu:3", "--lr", "0.1"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_dpv(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  };
  with({"--out", path("one.safetensors")});
  with({"--state", path("one.safetensors"), "--out", path("two.safetensors")});
  with({"--steps", "2", "--out", path("both.safetensors")});
  TensorMap chained = load_safetensors(path("two.safetensors")), direct = load_safetensors(path("both.safetensors"));
  for (const auto& [name, t] : direct.items()) {
    if (name.rfind("state/", 0) != 0) continue;
    EXPECT_EQ(t.to_doubles(), chained.at(name).to_doubles()) << name;
  }
  EXPECT_EQ(direct.at("state/1.num_batches_tracked").to_int64().at(0), 2);
}

TEST_F(CliCommands, StepMatchesAPyTorchFixture) {
  // End to end through the CLI: the uneven sync-bn fixture ([4, 4, 4, 1] on cpu:4).
  const std::string dir = fixtures_dir() + "/mlp_syncbn_uneven_cpu4";
  const std::string out = path("o.safetensors");
  auto r = run_dpv({"step", "--model", dir + "/model.json", "--state", dir + "/state.safetensors", "--batch",
                    dir + "/batch.safetensors", "--devices", "cpu:4", "--sync-bn", "--lr", "0.1", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TensorMap got = load_safetensors(out), want = load_safetensors(dir + "/expected.safetensors");
  EXPECT_EQ(got.names(), want.names());
  for (const auto& [name, w] : want.items()) {
    const Tensor* g = got.find(name);
    ASSERT_NE(g, nullptr) << name;
    ASSERT_EQ(g->shape(), w.shape()) << name;
    auto gv = g->to_doubles(), wv = w.to_doubles();
    for (size_t i = 0; i < wv.size(); ++i) EXPECT_NEAR(gv[i], wv[i], 1e-5 + 1e-4 * std::abs(wv[i])) << name << "[" << i << "]";
  }
}

TEST_F(CliCommands, TrainPrintsProgressAndLearnsTheSpiral) {
  const std::string trace = path("trace.json");
  auto r = run_dpv({"train", "--preset", "mlp-bn", "--devices", "cpu:2", "--steps", "200", "--lr", "0.2", "--trace",
                    trace, "--trace-steps", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Not a terminal: plain lines, no carriage returns.
  EXPECT_EQ(r.out.find('\r'), std::string::npos);
  static const std::regex line_re("step +([0-9]+)/200  loss ([0-9.]+)  acc +([0-9.]+)%  [0-9]+ samples/s");
  std::vector<double> losses;
  std::vector<double> accs;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), line_re); it != std::sregex_iterator(); ++it) {
    losses.push_back(std::stod((*it)[2].str()));
    accs.push_back(std::stod((*it)[3].str()));
  }
  ASSERT_GE(losses.size(), 5u) << r.out;
  EXPECT_NE(r.out.find("step 200/200"), std::string::npos) << r.out;
  EXPECT_LT(losses.back(), losses.front()) << r.out;
  EXPECT_GT(accs.back(), 50.0) << r.out;  // three classes: chance is 33%

  std::ifstream in(trace);
  ASSERT_TRUE(in.good());
  auto j = nlohmann::json::parse(in);
  const auto& events = j.is_array() ? j : j.at("traceEvents");
  ASSERT_FALSE(events.empty());
  bool has_forward = false;
  for (const auto& e : events) has_forward = has_forward || e.value("name", "").find("orward") != std::string::npos;
  EXPECT_TRUE(has_forward) << j.dump().substr(0, 400);
}

TEST_F(CliCommands, TrainReadsIdxFiles) {
  auto be32 = [](std::string& s, uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((v >> shift) & 0xff));
  };
  std::string images, labels;
  be32(images, 0x803), be32(images, 32), be32(images, 28), be32(images, 28);
  be32(labels, 0x801), be32(labels, 32);
  for (int i = 0; i < 32; ++i) {
    labels.push_back(static_cast<char>(i % 10));
    for (int p = 0; p < 28 * 28; ++p) images.push_back(static_cast<char>((p * 7 + i * 13 + (i % 10) * 50) % 256));
  }
  auto r = run_dpv({"train", "--preset", "mnist-mlp", "--devices", "cpu:2", "--steps", "3", "--batch", "8",
                    "--idx-images", write_text("img.idx", images), "--idx-labels", write_text("lbl.idx", labels)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("MNIST"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step 3/3"), std::string::npos) << r.out;
}

TEST_F(CliCommands, BenchWritesJsonPerModelAndDeviceCount) {
  const std::string json = path("bench.json");
  auto r = run_dpv({"bench", "--models", "simple", "mlp-large", "--devices", "cpu:1", "cpu:2", "--iters", "2",
                    "--warmup", "0", "--stage-iters", "1", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(json);
  auto j = nlohmann::json::parse(in);
  ASSERT_EQ(j.at("results").size(), 4u);
  for (const auto& res : j.at("results")) {
    EXPECT_GT(res.at("steps_per_s").get<double>(), 0);
    EXPECT_NEAR(res.at("ms_per_step").get<double>() * res.at("steps_per_s").get<double>(), 1000.0, 1e-6);
    EXPECT_FALSE(res.at("stage_ms_per_step").empty());
  }
  EXPECT_EQ(j["results"][1].at("chunks"), nlohmann::json::array({16, 16}));
  EXPECT_TRUE(j["results"][1].contains("speedup_vs_one_device"));
  // DDP on cpu:2 for each model, with its speed relative to DataParallel's.
  ASSERT_EQ(j.at("ddp").size(), 2u);
  EXPECT_EQ(j["ddp"][0].at("devices"), "cpu:2");
  EXPECT_GT(j["ddp"][0].at("ddp_speed_vs_dp").get<double>(), 0);
  // The machine's own reference, measured once for the 2-device rows, and each row's efficiency
  // against it: its speed-up over one device divided by the reference's.
  ASSERT_EQ(j.at("machine_reference").size(), 1u);
  EXPECT_EQ(j["machine_reference"][0].at("workers"), 2);
  const double reference = j["machine_reference"][0].at("speedup").get<double>();
  EXPECT_GT(reference, 0);
  EXPECT_NEAR(reference, j["machine_reference"][0].at("all_workers_passes_per_s").get<double>() /
                             j["machine_reference"][0].at("one_worker_passes_per_s").get<double>(), 1e-9);
  for (const auto& row : {j["results"][1], j["results"][3], j["ddp"][0]}) {
    EXPECT_DOUBLE_EQ(row.at("machine_reference_speedup").get<double>(), reference);
    EXPECT_NEAR(row.at("parallel_efficiency").get<double>(), row.at("speedup_vs_one_device").get<double>() / reference, 1e-9);
  }
  EXPECT_FALSE(j["results"][0].contains("parallel_efficiency")) << "one device has no efficiency";
  ASSERT_TRUE(j.contains("gemm"));
  EXPECT_GT(j["gemm"].at("openblas_gflops").get<double>(), 0.1);
  EXPECT_GT(j["gemm"].at("floor_gflops").get<double>(), 0.1);
  EXPECT_FALSE(j["gemm"].at("gemm_library").get<std::string>().empty());
  // 784-1024-1024-10 at batch 256: forward 2*256*(784*1024 + 1024*1024 + 1024*10) FLOPs, times ~3 for backward.
  const double fwd = 2.0 * 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10);
  EXPECT_NEAR(j["gemm"].at("flops_per_step").get<double>(), 3 * fwd - 2.0 * 256 * 784 * 1024, 1.0);
  // The floor is the faster library on each shape: never slower than either library alone.
  EXPECT_GE(j["gemm"].at("floor_gflops").get<double>(), j["gemm"].at("openblas_gflops").get<double>());
  if (j["gemm"].contains("onednn_gflops"))
    EXPECT_GE(j["gemm"].at("floor_gflops").get<double>(), j["gemm"].at("onednn_gflops").get<double>());
  ASSERT_EQ(j["gemm"].at("shapes").size(), 8u);
  for (const auto& shape : j["gemm"].at("shapes")) {
    const std::string library = shape.at("library");
    EXPECT_TRUE(library == "oneDNN sgemm" || library == "OpenBLAS sgemm") << library;  // every shape was run, so chosen
  }
  // Every CPU row counts the libraries of its Linear products: mlp-large's 8 on one device (its
  // first layer has no input gradient), the same 8 shapes at 128 samples on each of two devices.
  for (const size_t row : {2, 3}) {
    int shapes = 0;
    for (const auto& [library, count] : j["results"][row].at("gemm_libraries").items()) shapes += count.get<int>();
    EXPECT_EQ(shapes, 8) << j["results"][row].dump();
  }
  EXPECT_NE(r.out.find("           GEMM: "), std::string::npos) << r.out;
}

}  // namespace
}  // namespace dpv::testing
