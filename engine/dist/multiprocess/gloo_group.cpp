#include "engine/dist/multiprocess/gloo_group.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <csignal>
#include <functional>

#include "engine/dist/multiprocess/gloo_store.h"
#include "engine/dist/multiprocess/socket.h"
#include "engine/dist/multiprocess/tcp_store.h"
#include "engine/error.h"

namespace dpv::dist {
namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

ReduceFn sum_of(DType dtype) {
  switch (dtype) {
    case DType::Float32: return &gloo::sum<float>;
    case DType::Float64: return &gloo::sum<double>;
    case DType::Int64: return &gloo::sum<int64_t>;
  }
  throw Error("gloo all_reduce: unsupported dtype");
}

class GlooGroup final : public ProcessGroup {
 public:
  GlooGroup(std::shared_ptr<gloo::Context> context, std::chrono::milliseconds timeout)
      : context_(std::move(context)), timeout_(timeout) {}

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  std::string backend() const override { return "gloo"; }

  CollectiveReport all_reduce_sum(Tensor& buf, std::vector<RingStep>* steps) override {
    if (steps) steps->clear();  // Gloo does not expose its ring steps
    check_host(buf, "all_reduce");
    return run("all_reduce", buf.nbytes(), [&] {
      gloo::AllreduceOptions opts(context_);
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      set_output(opts, buf);
      opts.setReduceFunction(sum_of(buf.dtype()));
      opts.setTag(next_tag());
      opts.setTimeout(timeout_);
      gloo::allreduce(opts);
    });
  }

  CollectiveReport broadcast(Tensor& buf, int root) override {
    check_host(buf, "broadcast");
    check(root >= 0 && root < size(), "broadcast: root " + std::to_string(root) + " is not a rank of this group of " +
                                          std::to_string(size()));
    return run("broadcast", buf.nbytes(), [&] {
      gloo::BroadcastOptions opts(context_);
      set_output(opts, buf);
      opts.setRoot(root);
      opts.setTag(next_tag());
      opts.setTimeout(timeout_);
      gloo::broadcast(opts);
    });
  }

  CollectiveReport all_gather(const Tensor& in, Tensor& out) override {
    check_host(in, "all_gather");
    check_host(out, "all_gather");
    check(in.dtype() == out.dtype() && out.numel() == in.numel() * size(),
          "all_gather: the output must hold world size x the input's elements of the same dtype (got " +
              std::to_string(out.numel()) + " for " + std::to_string(in.numel()) + " x " + std::to_string(size()) + ")");
    return run("all_gather", out.nbytes(), [&] {
      gloo::AllgatherOptions opts(context_);
      opts.setInput(static_cast<char*>(in.raw()), in.nbytes());
      opts.setOutput(static_cast<char*>(out.raw()), out.nbytes());
      opts.setTag(next_tag());
      opts.setTimeout(timeout_);
      gloo::allgather(opts);
    });
  }

  void barrier() override {
    run("barrier", 0, [&] {
      gloo::BarrierOptions opts(context_);
      opts.setTag(next_tag());
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
    });
  }

 private:
  template <typename Options>
  static void set_output(Options& opts, Tensor& buf) {
    switch (buf.dtype()) {
      case DType::Float32: opts.setOutput(buf.data<float>(), static_cast<size_t>(buf.numel())); break;
      case DType::Float64: opts.setOutput(buf.data<double>(), static_cast<size_t>(buf.numel())); break;
      case DType::Int64: opts.setOutput(buf.data<int64_t>(), static_cast<size_t>(buf.numel())); break;
    }
  }

  static void check_host(const Tensor& t, const char* op) {
    check(t.defined() && t.on_host_memory(),
          std::string("gloo ") + op + ": the tensor must be in CPU memory (Gloo moves CPU tensors; use --backend nccl "
                                      "for GPU tensors)");
  }

  uint32_t next_tag() { return tag_++; }

  CollectiveReport run(const char* op, size_t bytes, const std::function<void()>& body) {
    CollectiveReport r;
    r.op = op;
    r.ranks = size();
    r.bytes = bytes;
    const auto start = Clock::now();
    try {
      body();
    } catch (const dpv::Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error(std::string("gloo ") + op + " of " + std::to_string(bytes) + " bytes failed on rank " +
                  std::to_string(rank()) + " of " + std::to_string(size()) + " (timeout " +
                  describe_seconds(timeout_) + "; did another rank stop?): " + e.what());
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    finish_report(r);
    return r;
  }

  std::shared_ptr<gloo::Context> context_;
  std::chrono::milliseconds timeout_;
  uint32_t tag_ = 0;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_gloo_group(TcpStore& store, int rank, int world_size, const GlooOptions& options) {
  // Gloo writes to its peers' sockets without MSG_NOSIGNAL: a peer that died would kill this
  // process with SIGPIPE instead of letting the collective throw a clear error.
  std::signal(SIGPIPE, SIG_IGN);
  gloo::transport::tcp::attr attr;
  if (!options.iface.empty()) {
    attr.iface = options.iface;
  } else {
    attr.hostname = local_address_towards(options.master_addr);
  }
  std::shared_ptr<gloo::transport::Device> device;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw Error("gloo cannot open its TCP transport on " +
                (options.iface.empty() ? "address " + attr.hostname : "interface '" + options.iface + "'") + ": " +
                e.what() + " (name an existing interface with --iface / GLOO_SOCKET_IFNAME, see `ip link`)");
  }
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, world_size);
  context->setTimeout(options.timeout);
  GlooStore gloo_store(store);
  gloo::rendezvous::PrefixStore prefixed(options.prefix, gloo_store);
  try {
    context->connectFullMesh(prefixed, device);
  } catch (const dpv::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("gloo could not connect rank " + std::to_string(rank) + " to its " + std::to_string(world_size - 1) +
                " peers within " + describe_seconds(options.timeout) + ": " + e.what());
  }
  return std::make_unique<GlooGroup>(std::move(context), options.timeout);
}

}  // namespace dpv::dist
