// `dpv step --ddp` as real processes: `dpv launch --nproc-per-node W -- step --ddp ...` writes the
// same file as the in-process `dpv step --ddp --devices cpu:W` (within float tolerance: Gloo's ring
// adds the ranks' gradients in another order) and as real PyTorch DDP over Gloo (the fixtures in
// tests/fixtures/ddp); a model that differs across ranks fails with PyTorch's message.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/io/safetensors.h"
#include "launch_helpers.h"
#include "run_dpv.h"

namespace dpv::testing {
namespace {

using Json = nlohmann::json;

Json read_json(const std::string& path) {
  std::ifstream in(path);
  return Json::parse(in);
}

// The "__metadata__" of a safetensors file.
std::map<std::string, std::string> metadata_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  Json h = Json::parse(header);
  std::map<std::string, std::string> out;
  if (h.contains("__metadata__"))
    for (auto& [k, v] : h["__metadata__"].items()) out[k] = v.get<std::string>();
  return out;
}

// Every tensor of `want` is in `got` with the same shape and values within rtol/atol; no extra names.
void expect_close(const std::string& got_path, const std::string& want_path, double rtol, double atol,
                  const std::string& what) {
  TensorMap got = load_safetensors(got_path), want = load_safetensors(want_path);
  EXPECT_EQ(got.names(), want.names()) << what;
  for (const auto& [name, w] : want.items()) {
    const Tensor* g = got.find(name);
    if (!g) continue;
    ASSERT_EQ(g->shape(), w.shape()) << what << ": " << name;
    const std::vector<double> gv = g->to_doubles(), wv = w.to_doubles();
    for (size_t i = 0; i < wv.size(); ++i) {
      ASSERT_LE(std::abs(gv[i] - wv[i]), atol + rtol * std::abs(wv[i]))
          << what << ": " << name << "[" << i << "] " << gv[i] << " vs " << wv[i];
    }
  }
  EXPECT_EQ(Json::parse(metadata_of(got_path).at("ddp.buckets")), Json::parse(metadata_of(want_path).at("ddp.buckets")))
      << what;
}

std::vector<std::string> step_args(const std::string& folder, const Json& c, const std::string& out) {
  std::vector<std::string> a{"step", "--ddp", "--model", folder + "/model.json", "--state", folder + "/state.safetensors",
                             "--batch", folder + "/batch.safetensors", "--devices", c["devices"].get<std::string>(),
                             "--lr", c["lr"].dump(), "--momentum", c["momentum"].dump(), "--weight-decay",
                             c["weight_decay"].dump(), "--steps", c["steps"].dump(), "--bucket-cap-mb",
                             c["bucket_cap_mb"].dump(), "--out", out};
  if (!c["broadcast_buffers"].get<bool>()) a.push_back("--no-broadcast-buffers");
  return a;
}

class LaunchDdp : public CliTest {};

TEST_F(LaunchDdp, ProcessesMatchInProcessRanksAndPyTorch) {
  int cases = 0;
  for (const auto& entry : std::filesystem::directory_iterator(fixtures_dir() + "/ddp")) {
    const std::string folder = entry.path().string();
    if (!std::filesystem::exists(folder + "/case.json")) continue;
    const Json c = read_json(folder + "/case.json");
    const std::string devices = c["devices"];
    const int world = std::stoi(devices.substr(devices.find(':') + 1));
    if (world < 2) continue;
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    const double rtol = c["dtype"] == "float64" ? 1e-10 : 1e-3, atol = c["dtype"] == "float64" ? 1e-10 : 5e-5;

    const std::string in_process = path(name + "-threads.safetensors");
    RunResult r = run_dpv(step_args(folder, c, in_process));
    ASSERT_EQ(r.exit_code, 0) << r.err;

    const std::string launched = path(name + "-processes.safetensors");
    std::vector<std::string> args{"launch", "--nproc-per-node", std::to_string(world), "--master-port",
                                  std::to_string(free_port()), "--timeout", "60", "--"};
    for (const std::string& a : step_args(folder, c, launched)) args.push_back(a);
    r = run_dpv(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(std::to_string(world) + " launched processes over gloo"), std::string::npos) << r.out;
    EXPECT_EQ(metadata_of(launched).at("world_size"), std::to_string(world));

    expect_close(launched, in_process, rtol, atol, name + ": processes vs in-process ranks");
    expect_close(launched, folder + "/expected.safetensors", rtol, atol, name + ": processes vs PyTorch DDP");
    ++cases;
  }
  EXPECT_GE(cases, 3) << "the DDP fixtures with 2 or more ranks";
}

// `dpv launch --nproc-per-node K [launch options] -- worker...` on a free port.
std::vector<std::string> launched(int nproc, const std::vector<std::string>& worker,
                                  const std::vector<std::string>& launch_options = {}) {
  std::vector<std::string> args{"launch", "--nproc-per-node", std::to_string(nproc), "--master-port",
                                std::to_string(free_port()), "--timeout", "60"};
  args.insert(args.end(), launch_options.begin(), launch_options.end());
  args.push_back("--");
  args.insert(args.end(), worker.begin(), worker.end());
  return args;
}

// `args` less the option `name` and its value.
std::vector<std::string> without_option(std::vector<std::string> args, const std::string& name) {
  const auto at = std::find(args.begin(), args.end(), name);
  if (at != args.end()) args.erase(at, at + 2);
  return args;
}

TEST_F(LaunchDdp, DevicesMustMatchTheJob) {
  const std::string folder = fixtures_dir() + "/ddp/simple_cpu2";
  const Json c = read_json(folder + "/case.json");
  const std::string out = path("out.safetensors");
  auto step_with = [&](const std::string& devices) {
    Json with = c;
    with["devices"] = devices;
    return step_args(folder, with, out);
  };
  struct Case {
    std::vector<std::string> worker, launch_options, needles;
  };
  // The NCCL cases are checked before the NCCL group is made, so a build without CUDA says the same.
  const std::vector<Case> cases{
      {step_with("cpu:3"), {},
       {"ValueError: --devices cpu:3 does not match the launched job", "give --devices cpu:2", "leave --devices out"}},
      {step_with(""), {}, {"ValueError: invalid device spec ''"}},  // given empty is not left out
      {{"train", "--ddp", "--devices", "cpu:3", "--steps", "2", "--batch", "8"}, {},
       {"ValueError: --devices cpu:3 does not match the launched job", "give --devices cpu:2"}},
      {step_with("cuda:0x2"), {"--backend", "nccl"},
       {"--devices cuda:0x2 does not match the launched job: with --backend nccl each rank owns one whole GPU, "
        "cuda:LOCAL_RANK, so the 2 ranks on this node use cuda:0,1"}},
      {{"train", "--ddp", "--devices", "cpu:2", "--steps", "2", "--batch", "8"}, {"--backend", "nccl"},
       {"--devices cpu:2 names CPU devices, but the job runs with --backend nccl", "use --devices cuda"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    RunResult r = run_dpv(launched(2, cases[i].worker, cases[i].launch_options));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    for (const std::string& needle : cases[i].needles) EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_FALSE(exists(out));
  }
}

// The launcher fixes the world size and each rank's device, so --devices may be left out, as with
// torchrun: the file is the one the matching --devices writes, metadata included.
TEST_F(LaunchDdp, WithoutDevicesWritesWhatTheMatchingDevicesWrites) {
  const std::string folder = fixtures_dir() + "/ddp/mlp_bn_no_broadcast_cpu2";
  const Json c = read_json(folder + "/case.json");
  const std::string with = path("with.safetensors"), without = path("without.safetensors");
  RunResult r = run_dpv(launched(2, step_args(folder, c, with)));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_dpv(launched(2, without_option(step_args(folder, c, without), "--devices")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("on cpu:2 (2 launched processes over gloo"), std::string::npos) << r.out;
  expect_close(without, with, 0, 0, "without --devices vs --devices cpu:2");
  EXPECT_EQ(metadata_of(without), metadata_of(with));
}

// One launched rank with --sync-bn writes the global statistics too (the rank's own), as the
// in-process rank does; with --devices cpu:1 or without it.
TEST_F(LaunchDdp, SyncBnOnOneLaunchedRankWritesTheRanksStatisticsAsGlobal) {
  const std::string model = write_text("model.json", bn_mlp_json());
  const std::string batch = write_batch("batch.safetensors", {10, 2}, DType::Float32, 3);
  const std::vector<std::string> step{"step", "--ddp", "--sync-bn", "--model", model, "--batch", batch, "--steps", "2"};
  auto with = [&step](const std::vector<std::string>& extra) {
    std::vector<std::string> args = step;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const std::string threads = path("threads.safetensors");
  RunResult r = run_dpv(with({"--devices", "cpu:1", "--out", threads}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const bool devices : {true, false}) {
    SCOPED_TRACE(devices ? "--devices cpu:1" : "no --devices");
    const std::string procs = path(devices ? "procs.safetensors" : "procs-nodevices.safetensors");
    std::vector<std::string> worker = with({"--out", procs});
    if (devices) worker.insert(worker.end(), {"--devices", "cpu:1"});
    r = run_dpv(launched(1, worker));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const TensorMap t = load_safetensors(procs);
    for (const std::string stat : {"stats/1/global/mean", "stats/1/global/var", "stats/4/global/mean",
                                   "stats/4/global/var"}) {
      ASSERT_TRUE(t.contains(stat)) << stat;
      std::string dev0 = stat;
      dev0.replace(dev0.find("global"), 6, "dev0");
      EXPECT_EQ(t.at(stat).to_doubles(), t.at(dev0).to_doubles()) << stat;
    }
    expect_close(procs, threads, 1e-6, 1e-7, "one launched rank vs one in-process rank");
  }
}

TEST_F(LaunchDdp, AModelThatDiffersAcrossRanksIsPyTorchsError) {
  // Two "nodes" of one rank each, started with different model files: as two machines whose
  // copies of the model spec differ.
  const std::string folder = fixtures_dir() + "/ddp/simple_cpu2";
  const std::string other = write_text(
      "other.json", R"({"layers":[{"type":"linear","in_features":10,"out_features":4},{"type":"relu"},)"
                    R"({"type":"linear","in_features":4,"out_features":2}],"loss":"cross_entropy","dtype":"float32"})");
  const std::string port = std::to_string(free_port());
  auto node = [&](int node_rank, const std::string& model) {
    return std::vector<std::string>{"launch", "--nproc-per-node", "1", "--nnodes", "2", "--node-rank",
                                    std::to_string(node_rank), "--master-port", port, "--timeout", "20", "--",
                                    "step", "--ddp", "--model", model, "--batch", folder + "/batch.safetensors",
                                    "--devices", "cpu:2", "--out", path("out.safetensors")};
  };
  Background node0(node(0, folder + "/model.json"));
  RunResult r1 = run_dpv(node(1, other));
  RunResult r0 = node0.finish(std::chrono::seconds(60));
  EXPECT_EQ(r0.exit_code, 1);
  EXPECT_EQ(r1.exit_code, 1);
  const std::string both = r0.err + r1.err;
  EXPECT_NE(both.find("DDP expects same model across all ranks"), std::string::npos) << both;
  EXPECT_FALSE(exists(path("out.safetensors")));
}

// One "node" started with --no-broadcast-buffers, the other without: the ranks would run different
// collectives (Gloo's raw "enforce fail"); they compare their DDP options first and both say which.
TEST_F(LaunchDdp, DdpOptionsThatDifferAcrossRanksAreNamed) {
  const std::string model = write_text("model.json", bn_mlp_json());
  const std::string batch = write_batch("batch.safetensors", {10, 2}, DType::Float32, 3);
  const std::string port = std::to_string(free_port());
  auto node = [&](int node_rank, std::vector<std::string> extra) {
    std::vector<std::string> args{"launch", "--nproc-per-node", "1", "--nnodes", "2", "--node-rank",
                                  std::to_string(node_rank), "--master-port", port, "--timeout", "20", "--",
                                  "step", "--ddp", "--model", model, "--batch", batch, "--out", path("out.safetensors")};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  Background node0(node(0, {}));
  RunResult r1 = run_dpv(node(1, {"--no-broadcast-buffers"}));
  RunResult r0 = node0.finish(std::chrono::seconds(60));
  EXPECT_EQ(r0.exit_code, 1);
  EXPECT_EQ(r1.exit_code, 1);
  const std::string says = "the ranks' DistributedDataParallel configurations differ: broadcast_buffers is false on rank 1 "
                           "but true on rank 0";
  EXPECT_NE(r0.err.find(says), std::string::npos) << r0.err;
  EXPECT_NE(r1.err.find(says), std::string::npos) << r1.err;
  EXPECT_EQ((r0.err + r1.err).find("enforce fail"), std::string::npos);
  EXPECT_FALSE(exists(path("out.safetensors")));
}

}  // namespace
}  // namespace dpv::testing

namespace dpv::testing {
namespace {

// "loss 0.6675" on the last progress line.
double last_loss(const std::string& out) {
  const size_t at = out.rfind("loss ");
  return at == std::string::npos ? -1 : std::stod(out.substr(at + 5));
}

TEST_F(LaunchDdp, TrainAsProcessesTracesEveryRankAndMatchesInProcessRanks) {
  const std::vector<std::string> train{"train", "--ddp", "--devices", "cpu:2", "--preset", "mlp-bn",
                                       "--steps", "12", "--batch", "32", "--trace-steps", "2"};
  std::vector<std::string> in_process = train;
  in_process.insert(in_process.end(), {"--trace", path("threads.json")});
  RunResult r = run_dpv(in_process);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double want = last_loss(r.out);

  std::vector<std::string> launched{"launch", "--nproc-per-node", "2", "--master-port", std::to_string(free_port()),
                                    "--timeout", "60", "--"};
  launched.insert(launched.end(), train.begin(), train.end());
  launched.insert(launched.end(), {"--trace", path("procs.json")});
  r = run_dpv(launched);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2 launched processes over gloo"), std::string::npos) << r.out;
  size_t headers = 0;
  for (size_t at = 0; (at = r.out.find("dpv train --ddp:", at)) != std::string::npos; ++at) ++headers;
  EXPECT_EQ(headers, 1u) << "rank 0 alone prints: " << r.out;
  EXPECT_NEAR(last_loss(r.out), want, 1e-3) << r.out;

  EXPECT_TRUE(exists(path("procs.rank0.json")));
  EXPECT_TRUE(exists(path("procs.rank1.json")));
  const Json merged = read_json(path("procs.json"));
  std::set<int> pids;
  std::set<std::string> categories;
  int bucket_events = 0;
  for (const Json& e : merged["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e.value("ph", "") != "X") continue;
    categories.insert(e.value("cat", ""));
    if (e.value("cat", "") == "allreduce") ++bucket_events;
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1})) << "a process per rank";
  EXPECT_GE(bucket_events, 2 * 2) << "each rank's bucket all-reduces, 2 traced iterations";
  // The ranks record the stages the in-process ranks record (a launched rank has no Construct or
  // Sample stage of its own: it builds its replica and its shard before the traced iterations).
  std::set<std::string> in_process_categories;
  const Json threads = read_json(path("threads.json"));
  for (const Json& e : threads["traceEvents"])
    if (e.value("ph", "") == "X") in_process_categories.insert(e.value("cat", ""));
  for (const std::string& c : categories) EXPECT_TRUE(in_process_categories.count(c)) << c << " is not a DDP stage of the in-process trace";
  for (const char* c : {"broadcast_buffers", "forward", "loss", "backward", "finalize", "allreduce", "step"})
    EXPECT_TRUE(categories.count(c)) << "the launched trace has no " << c;
}

TEST_F(LaunchDdp, TrainWithoutDevicesRunsARankPerProcess) {
  const std::vector<std::string> train{"train", "--ddp", "--preset", "mlp-bn", "--steps", "12", "--batch", "32"};
  std::vector<std::string> in_process = train;
  in_process.insert(in_process.end(), {"--devices", "cpu:2"});
  RunResult r = run_dpv(in_process);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double want = last_loss(r.out);
  r = run_dpv(launched(2, train));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(2 ranks, DistributedSampler shards 16 samples each)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 launched processes over gloo"), std::string::npos) << r.out;
  EXPECT_NEAR(last_loss(r.out), want, 1e-3) << r.out;
}

}  // namespace
}  // namespace dpv::testing
