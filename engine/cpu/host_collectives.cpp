// Collectives over host threads for simulated devices. A broadcast's copies and a reduce's sums are
// cut into one part of rows per device, each part on its own device thread (a CPU device's work may
// run on any thread: HandoffPool's stealing), so the memory-bound copy or sum that a GPU's copy
// engine or kernel does at once does not run on one core while the others wait (every part inline
// in the calling thread when the copies are smaller than a hand-off, DeviceSet::kInlineBytes). Reductions follow
// torch.cuda.comm.reduce_add's left fold in device order for every element, so the result is the
// same bit for bit whichever thread computes which rows.
#include <chrono>

#include "engine/backend.h"
#include "engine/core_backends.h"
#include "engine/collectives.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/index.h"

namespace dpv {

void finish_report(CollectiveReport& r) {
  if (r.seconds <= 0) return;
  r.algbw = static_cast<double>(r.bytes) / r.seconds / 1e9;
  const double n = r.ranks;
  double factor = 1.0;
  if (r.op == CollectiveOp::AllReduce) factor = n > 0 ? 2.0 * (n - 1) / n : 0.0;
  if (r.op == CollectiveOp::AllGather || r.op == CollectiveOp::ReduceScatter) factor = n > 0 ? (n - 1) / n : 0.0;
  r.busbw = r.algbw * factor;
}

namespace {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Bytes copied by `copies` copies of `bytes` each: the size hint that lets small collectives run
// inline instead of handing tiny copies to the device threads.
int64_t moved(size_t bytes, size_t copies) { return static_cast<int64_t>(bytes * copies); }

// Part `part` of `parts` of a tensor: rows [begin, end) of its first dimension, the parts as even
// as the rows allow (empty when there are fewer rows than parts). A 0-dimensional tensor is one
// part, the first.
Tensor part_of(const Tensor& t, int part, int parts) {
  if (t.ndim() == 0) return part == 0 ? t : Tensor();
  const int64_t rows = t.dim(0);
  const int64_t begin = rows * part / parts, end = rows * (part + 1) / parts;
  return begin < end ? t.slice0(begin, end) : Tensor();
}

void check_buffers(const std::vector<Tensor>& bufs, const char* op) {
  check(!bufs.empty(), std::string(op) + ": no buffers");
  for (size_t i = 0; i < bufs.size(); ++i) {
    check(bufs[i].numel() == bufs[0].numel() && bufs[i].dtype() == bufs[0].dtype(),
          std::string(op) + ": input " + std::to_string(i) + " has invalid size: got " + shape_str(bufs[i].shape()) +
              ", but expected " + shape_str(bufs[0].shape()));
  }
}

class HostCollectives final : public Collectives {
 public:
  explicit HostCollectives(std::shared_ptr<DeviceSet> devices) : devices_(std::move(devices)) {}
  std::string transport() const override { return "host threads"; }

  CollectiveReport broadcast(std::vector<Tensor>& bufs, int root) override {
    check_buffers(bufs, "broadcast");
    CollectiveReport r = start(CollectiveOp::Broadcast, bufs.size(), bufs[0].nbytes());
    const int parts = static_cast<int>(bufs.size());
    devices_->run_parallel(parts, [&](int part) {
      const Tensor from = part_of(bufs[ix(root)], part, parts);
      if (!from.defined()) return;
      for (int i = 0; i < parts; ++i)
        if (i != root) part_of(bufs[ix(i)], part, parts).copy_from(from);
    }, moved(bufs[0].nbytes(), bufs.size() - 1));
    return finish(r);
  }

  CollectiveReport reduce_add(std::vector<Tensor>& bufs, int root) override {
    check_buffers(bufs, "reduce_add");
    CollectiveReport r = start(CollectiveOp::ReduceAdd, bufs.size(), bufs[0].nbytes());
    Tensor& dst = bufs[ix(root)];
    const int parts = static_cast<int>(bufs.size());
    // Each part's fold, in device order, into the root's rows of that part.
    devices_->run_parallel(parts, [&](int part) {
      Tensor into = part_of(dst, part, parts);
      if (!into.defined()) return;
      for (int j = 0; j < parts; ++j)
        if (j != root) dst.device()->backend().add_inplace(into, part_of(bufs[ix(j)], part, parts));
    }, moved(bufs[0].nbytes(), bufs.size()));
    return finish(r);
  }

  CollectiveReport all_reduce(std::vector<Tensor>& bufs) override {
    check_buffers(bufs, "all_reduce");
    CollectiveReport r = start(CollectiveOp::AllReduce, bufs.size(), bufs[0].nbytes());
    Tensor sum = bufs[0].clone();
    devices_->run_parallel(1, [&](int) {
      for (size_t j = 1; j < bufs.size(); ++j) sum.device()->backend().add_inplace(sum, bufs[j]);
    });
    devices_->run_parallel(static_cast<int>(bufs.size()), [&](int i) { bufs[ix(i)].copy_from(sum); },
                           moved(sum.nbytes(), bufs.size()));
    return finish(r);
  }

  CollectiveReport all_gather(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    check_buffers(in, "all_gather");
    check(out.size() == in.size(), "all_gather: " + std::to_string(out.size()) + " outputs for " +
                                       std::to_string(in.size()) + " inputs");
    const int64_t piece = in[0].numel();
    for (auto& o : out)
      check(o.numel() == piece * static_cast<int64_t>(in.size()), "all_gather: output of " + shape_str(o.shape()) +
                                                                      " cannot hold " + std::to_string(in.size()) +
                                                                      " pieces of " + std::to_string(piece));
    CollectiveReport r = start(CollectiveOp::AllGather, in.size(), in[0].nbytes() * in.size());
    devices_->run_parallel(static_cast<int>(in.size()), [&](int i) {
      Tensor flat = out[ix(i)].reshape({out[ix(i)].numel()});
      for (size_t j = 0; j < in.size(); ++j)
        flat.slice0(static_cast<int64_t>(j) * piece, static_cast<int64_t>(j + 1) * piece).copy_from(in[j]);
    }, moved(in[0].nbytes() * in.size(), in.size()));
    return finish(r);
  }

 private:
  CollectiveReport start(CollectiveOp op, size_t ranks, size_t bytes) {
    CollectiveReport r;
    r.op = op;
    r.ranks = static_cast<int>(ranks);
    r.bytes = bytes;
    r.seconds = -wall_seconds();
    return r;
  }
  static CollectiveReport finish(CollectiveReport& r) {
    r.seconds += wall_seconds();
    finish_report(r);
    return r;
  }

  std::shared_ptr<DeviceSet> devices_;
};

}  // namespace

std::unique_ptr<Collectives> make_host_collectives(std::shared_ptr<DeviceSet> devices) {
  return std::make_unique<HostCollectives>(std::move(devices));
}

}  // namespace dpv
