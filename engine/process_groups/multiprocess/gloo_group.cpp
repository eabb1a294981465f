#include "engine/process_groups/multiprocess/gloo_group.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <functional>
#include <list>
#include <mutex>
#include <tuple>
#include <vector>

#include "engine/process_groups/multiprocess/gloo_store.h"
#include "engine/process_groups/multiprocess/process_group_backend.h"
#include "engine/process_groups/multiprocess/socket.h"
#include "engine/process_groups/multiprocess/store.h"
#include "engine/error.h"

namespace dpv::dist {
namespace {

// All-reduces (but large ones among three ranks or more, see kAsyncAllreduceMinBytes) run on a
// second Gloo context whose pairs are in Gloo's synchronous mode: the thread that makes the
// collective reads its own socket (a blocking recv) instead of waiting for Gloo's
// event-loop thread to read it and wake it. Gloo's asynchronous path (gloo::allreduce, the one
// PyTorch uses) costs two thread hand-offs per received segment, and its loop thread spins on
// epoll while the caller holds the pair's lock; on a busy 2-core machine a 4 KiB all-reduce took
// 0.5-10 ms that way, against 50-300 us synchronously (docs/performance.md).
// A synchronous send blocks until the data fits in the sockets' buffers, and every rank sends
// before it receives, so a message is cut into pieces of at most kSyncAllreducePieceBytes: one
// piece's ring keeps at most two chunks of bytes/(2W) in flight per socket, which fits in the
// default buffers of any Linux machine (wmem_max 208 KiB, rmem 128 KiB and up): no send waits
// for its reader, so the ring cannot deadlock.
// (Whole messages of 1-4 MiB this way stalled for 0.3-0.4 s at world=4. Pieces of 512 KiB and 1 MiB
// at world=4 on 2 cores: a 64 MiB all-reduce took 0.5-1.5 s, as a send that waits for its reader often
// waits for a process that has no core; 1 MiB at world=2 was faster than 256 KiB, but not safe in general.)
// A message of one piece or less runs on a ring kept ready over a staging buffer (the copies are
// cheaper than registering buffers anew); a larger one runs in place, one ring made per piece
// over the tensor's own memory: two staging copies of 64 MiB cost 20-35 ms on this machine, a
// third of the all-reduce at world=2.
constexpr size_t kSyncAllreducePieceBytes = 256 * 1024;
// From this size on, with three ranks or more, an all-reduce runs Gloo's asynchronous ring
// (gloo::allreduce on the other context, as PyTorch does) instead of synchronous pieces. A large
// message pays the async path's hand-offs once per big segment, while pieces pay a blocking
// exchange per 256 KiB / (2W) chunk; with more processes than cores, each such exchange often waits
// for a peer to get a core. Measured on 2 cores (busbw GB/s, 3 A/B runs): world=4 sync 0.63-0.72 at
// 8-64 MiB, async 0.78-0.93; world=3 from 8 MiB async 1.01-1.24, sync 0.84-0.95; at 4 MiB they were
// even at world=3 and world=4 (async worse in one run of three), and at world=2 sync was as fast or faster
// at every size, so world=2 keeps the pieces.
constexpr size_t kAsyncAllreduceMinBytes = 8u << 20;
constexpr int kAsyncAllreduceMinRanks = 3;
// Broadcasts up to this size go over the synchronous pairs too (BatchNorm buffers every step under
// broadcast_buffers=True); larger ones (the model's state, once) use Gloo's asynchronous
// broadcast, so no large staging buffer stays allocated. Only the root sends, so no size can deadlock.
constexpr size_t kSyncBroadcastMaxBytes = 256 * 1024;
// Distinct collectives kept ready (their buffers registered with the peers); least recently used
// first out.
constexpr size_t kSyncCollectiveCacheSize = 16;

// A Gloo algorithm object (Gloo's older API, the one that runs on synchronous pairs) over a
// staging buffer owned here, for messages of at most one piece. It registers its buffers with the
// peers once and is reused; it works on its own staging buffer, not the caller's tensor, so
// whether a call finds one ready depends
// only on what every rank passes alike (the collective, dtype, numel, root), and every rank
// creates the same objects in the same order (Gloo pairs them by creation order).
class SyncCollective {
 public:
  virtual ~SyncCollective() noexcept(false) = default;  // as gloo::Algorithm's
  virtual void run(void* data) = 0;                     // data: numel elements, in and out
};

template <typename T, typename Algorithm>
class StagedCollective final : public SyncCollective {
 public:
  template <typename... Args>
  StagedCollective(const std::shared_ptr<gloo::Context>& context, int64_t numel, Args... args)
      : staging_(static_cast<size_t>(numel)), algorithm_(context, {staging_.data()}, numel, args...) {}
  void run(void* data) override {
    const size_t bytes = staging_.size() * sizeof(T);
    std::memcpy(staging_.data(), data, bytes);
    algorithm_.run();
    std::memcpy(data, staging_.data(), bytes);
  }

 private:
  std::vector<T> staging_;  // [numel]
  Algorithm algorithm_;
};

// Gloo's chunked ring: reduce-scatter, then the reduced chunks around the ring again, so every
// rank ends with the same bits.
template <typename T>
using SyncAllreduceOf = StagedCollective<T, gloo::AllreduceRingChunked<T>>;
// The root sends its buffer to every other rank once each clears it to send.
template <typename T>
using SyncBroadcastOf = StagedCollective<T, gloo::BroadcastOneToAll<T>>;

enum class SyncKind { AllReduce, Broadcast };

class GlooGroup final : public ProcessGroup {
 public:
  GlooGroup(std::shared_ptr<gloo::Context> context, std::shared_ptr<gloo::Context> sync_context,
            std::chrono::milliseconds timeout)
      : context_(std::move(context)), sync_context_(std::move(sync_context)), timeout_(timeout) {}

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  std::string backend() const override { return name(ProcessGroupBackend::Gloo); }

  CollectiveReport all_reduce_sum(Tensor& buf, std::vector<RingStep>* steps) override {
    if (steps) steps->clear();  // Gloo does not expose its ring steps
    check_host(buf, "all_reduce");
    return run(CollectiveOp::AllReduce, buf.nbytes(), [&] {
      if (size() == 1 || buf.numel() == 0) return;
      if (buf.nbytes() <= kSyncAllreducePieceBytes) {
        std::lock_guard<std::mutex> lock(sync_mutex_);  // a synchronous pair serves one thread at a time
        sync_collective_for(SyncKind::AllReduce, buf.dtype(), buf.numel(), 0).run(buf.raw());
        return;
      }
      switch (buf.dtype()) {
        case DType::Float32: all_reduce_large(buf.data<float>(), buf.numel()); break;
        case DType::Float64: all_reduce_large(buf.data<double>(), buf.numel()); break;
        case DType::Int64: all_reduce_large(buf.data<int64_t>(), buf.numel()); break;
      }
    });
  }

  // Gloo's own float16 all-reduce, the call torch 1.13's ProcessGroupGloo makes for a float16
  // tensor (gloo::allreduce with gloo::float16 and gloo::sum<gloo::float16>, on the asynchronous
  // pairs): its bits are Gloo's by construction, and 2 bytes per element cross the wire. Never the
  // synchronous chunked ring of all_reduce_sum: that one adds in another order, other bits.
  CollectiveReport all_reduce_sum_float16(uint16_t* halves, int64_t n) override {
    check(n >= 0 && (n == 0 || halves != nullptr), "gloo float16 all_reduce: no buffer for " + std::to_string(n) + " elements");
    return run(CollectiveOp::AllReduce, static_cast<size_t>(n) * sizeof(gloo::float16), [&] {
      if (size() == 1 || n == 0) return;
      // gloo::float16 is the 16-bit pattern itself (one uint16_t member, alignas(2)), as at::Half
      // is when PyTorch hands Gloo a float16 tensor's memory.
      static_assert(sizeof(gloo::float16) == sizeof(uint16_t) && alignof(gloo::float16) == alignof(uint16_t));
      all_reduce_async(reinterpret_cast<gloo::float16*>(halves), n);
    });
  }

  CollectiveReport broadcast(Tensor& buf, int root) override {
    check_host(buf, "broadcast");
    check(root >= 0 && root < size(), "broadcast: root " + std::to_string(root) + " is not a rank of this group of " +
                                          std::to_string(size()));
    if (size() > 1 && buf.numel() > 0 && buf.nbytes() <= kSyncBroadcastMaxBytes) {
      return run(CollectiveOp::Broadcast, buf.nbytes(), [&] {
        std::lock_guard<std::mutex> lock(sync_mutex_);
        sync_collective_for(SyncKind::Broadcast, buf.dtype(), buf.numel(), root).run(buf.raw());
      });
    }
    return run(CollectiveOp::Broadcast, buf.nbytes(), [&] {
      gloo::BroadcastOptions opts(context_);
      set_output(opts, buf);
      opts.setRoot(root);
      opts.setTag(next_tag());
      opts.setTimeout(timeout_);
      gloo::broadcast(opts);
    });
  }

  // Gloo's own reduce-scatter (recursive halving, then each rank's piece sent where it belongs).
  // (PyTorch 1.13's Gloo group has no reduce_scatter; later ones emulate it with an all-reduce,
  // twice the bytes.) It runs on the synchronous pairs, in pieces, as the all-reduce does: on the
  // asynchronous pairs its sends return before the bytes left, and a rank then copies its result
  // over the start of the same buffer while the send of that part may still be reading it (the
  // peer summed the rank's result instead of its input: wrong sums at the end of rank 0's chunk,
  // now and then). A synchronous send has written its bytes before it returns.
  CollectiveReport reduce_scatter_sum(const Tensor& in, Tensor& out, std::vector<RingStep>* steps) override {
    if (steps) steps->clear();  // Gloo does not expose its steps
    check_host(in, "reduce_scatter");
    check_host(out, "reduce_scatter");
    check(in.dtype() == out.dtype() && in.numel() == out.numel() * size(),
          "reduce_scatter: the input must hold world size x the output's elements of the same dtype (got " +
              std::to_string(in.numel()) + " for " + std::to_string(out.numel()) + " x " + std::to_string(size()) +
              "); pad the input to a multiple of the world size before the call");
    return run(CollectiveOp::ReduceScatter, in.nbytes(), [&] {
      switch (in.dtype()) {
        case DType::Float32: reduce_scatter_of<float>(in, out); break;
        case DType::Float64: reduce_scatter_of<double>(in, out); break;
        case DType::Int64: reduce_scatter_of<int64_t>(in, out); break;
      }
    });
  }

  CollectiveReport all_gather(const Tensor& in, Tensor& out, std::vector<RingStep>* steps) override {
    if (steps) steps->clear();  // Gloo does not expose its steps
    check_host(in, "all_gather");
    check_host(out, "all_gather");
    check(in.dtype() == out.dtype() && out.numel() == in.numel() * size(),
          "all_gather: the output must hold world size x the input's elements of the same dtype (got " +
              std::to_string(out.numel()) + " for " + std::to_string(in.numel()) + " x " + std::to_string(size()) + ")");
    return run(CollectiveOp::AllGather, out.nbytes(), [&] {
      gloo::AllgatherOptions opts(context_);
      opts.setInput(static_cast<char*>(in.raw()), in.nbytes());
      opts.setOutput(static_cast<char*>(out.raw()), out.nbytes());
      opts.setTag(next_tag());
      opts.setTimeout(timeout_);
      gloo::allgather(opts);
    });
  }

  void barrier() override {
    run(CollectiveOp::Barrier, 0, [&] {
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
    if (!t.defined() || !t.on_host_memory())
      throw Error(std::string("gloo ") + op + ": the tensor must be in CPU memory (Gloo moves CPU tensors; use the nccl "
                                              "backend for GPU tensors, DPV_BACKEND=nccl)")
          .about_settings({"DPV_BACKEND"});
  }

  uint32_t next_tag() { return tag_++; }

  // Per piece: every rank's part of it gathered into one staging buffer ([world * part]), summed
  // there by Gloo's algorithm, which leaves this rank's part at the buffer's start. A piece moves at
  // most kSyncAllreducePieceBytes in all, so each synchronous send (half of it, in the first step)
  // fits in the socket buffers (size_send_buffers) while both sides send before they receive.
  template <typename T>
  void reduce_scatter_of(const Tensor& in, Tensor& out) {
    const int64_t piece = out.numel(), world = size();
    if (world == 1 || piece == 0) {  // every rank alike: nothing to exchange
      if (piece > 0) out.copy_from(in);
      return;
    }
    const T* src = in.data<T>();  // [world * piece]
    T* dst = out.data<T>();       // [piece]
    const int64_t part_max = std::max<int64_t>(1, static_cast<int64_t>(kSyncAllreducePieceBytes / sizeof(T)) / world);
    std::lock_guard<std::mutex> lock(sync_mutex_);  // a synchronous pair serves one thread at a time
    std::vector<T> staging;                         // [world * part]
    for (int64_t first = 0; first < piece; first += part_max) {
      const int64_t part = std::min(part_max, piece - first);
      staging.resize(static_cast<size_t>(world * part));
      for (int64_t w = 0; w < world; ++w)
        std::copy(src + w * piece + first, src + w * piece + first + part, staging.begin() + w * part);
      const std::vector<int> parts(static_cast<size_t>(world), static_cast<int>(part));
      gloo::ReduceScatterHalvingDoubling<T> algorithm(sync_context_, {staging.data()}, static_cast<int>(staging.size()), parts);
      algorithm.run();
      std::copy(staging.begin(), staging.begin() + part, dst + first);
    }
  }

  // An all-reduce of more than one piece, in place over data: Gloo's asynchronous ring from
  // kAsyncAllreduceMinBytes among kAsyncAllreduceMinRanks or more, else Gloo's chunked ring on the
  // synchronous pairs, piece by piece. Every rank makes the same rings in the same order, so their
  // slots match; a ring's buffers are registered before it runs, and this thread reads its sockets
  // only inside run(), which reads exactly the messages the peers' same ring sends, so a message
  // never arrives for a ring not yet made.
  template <typename T>
  void all_reduce_large(T* data, int64_t numel) {  // data: [numel]
    if (size() >= kAsyncAllreduceMinRanks && static_cast<size_t>(numel) * sizeof(T) >= kAsyncAllreduceMinBytes) {
      all_reduce_async(data, numel);
      return;
    }
    std::lock_guard<std::mutex> lock(sync_mutex_);  // a synchronous pair serves one thread at a time
    const int64_t piece = static_cast<int64_t>(kSyncAllreducePieceBytes / sizeof(T));
    for (int64_t first = 0; first < numel; first += piece) {
      const int n = static_cast<int>(std::min(piece, numel - first));
      gloo::AllreduceRingChunked<T> ring(sync_context_, {data + first}, n);
      ring.run();
    }
  }

  // Gloo's asynchronous ring over data itself, with its own reduce-scatter and all-gather
  // segments; every rank ends with the same bits.
  template <typename T>
  void all_reduce_async(T* data, int64_t numel) {  // data: [numel]
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, static_cast<size_t>(numel));
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<T>));
    opts.setTag(next_tag());
    opts.setTimeout(timeout_);
    gloo::allreduce(opts);
  }

  SyncCollective& sync_collective_for(SyncKind kind, DType dtype, int64_t numel, int root) {
    const SyncKey key{kind, dtype, numel, root};
    for (auto it = sync_collectives_.begin(); it != sync_collectives_.end(); ++it) {
      if (it->first == key) {
        sync_collectives_.splice(sync_collectives_.begin(), sync_collectives_, it);
        return *sync_collectives_.front().second;
      }
    }
    if (sync_collectives_.size() >= kSyncCollectiveCacheSize) sync_collectives_.pop_back();
    sync_collectives_.emplace_front(key, make_sync_collective(kind, dtype, numel, root));
    return *sync_collectives_.front().second;
  }

  template <typename T>
  std::unique_ptr<SyncCollective> make_sync_collective_of(SyncKind kind, int64_t numel, int root) {
    if (kind == SyncKind::AllReduce) return std::make_unique<SyncAllreduceOf<T>>(sync_context_, numel);
    return std::make_unique<SyncBroadcastOf<T>>(sync_context_, numel, root, 0);
  }

  std::unique_ptr<SyncCollective> make_sync_collective(SyncKind kind, DType dtype, int64_t numel, int root) {
    switch (dtype) {
      case DType::Float32: return make_sync_collective_of<float>(kind, numel, root);
      case DType::Float64: return make_sync_collective_of<double>(kind, numel, root);
      case DType::Int64: return make_sync_collective_of<int64_t>(kind, numel, root);
    }
    throw Error("gloo: unsupported dtype");
  }

  CollectiveReport run(CollectiveOp op, size_t bytes, const std::function<void()>& body) {
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
      throw Error(std::string("gloo ") + collective_op_name(op) + " of " + std::to_string(bytes) + " bytes failed on rank " +
                  std::to_string(rank()) + " of " + std::to_string(size()) + " (timeout " +
                  describe_seconds(timeout_) + "; did another rank stop?): " + e.what());
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    finish_report(r);
    return r;
  }

  std::shared_ptr<gloo::Context> context_;       // asynchronous pairs: large broadcasts, all-gather, barrier
  std::shared_ptr<gloo::Context> sync_context_;  // synchronous pairs: all-reduce, small broadcasts, reduce-scatter
  std::chrono::milliseconds timeout_;
  uint32_t tag_ = 0;
  std::mutex sync_mutex_;
  using SyncKey = std::tuple<SyncKind, DType, int64_t, int>;  // collective, dtype, numel, root
  std::list<std::pair<SyncKey, std::unique_ptr<SyncCollective>>> sync_collectives_;  // most recent first
};

// Gloo sizes a pair's socket send buffer (SO_SNDBUF) to the largest message sent on it so far,
// and Linux makes it at least ~4.6 KB. A synchronous ring keeps two chunks in flight, so after a
// first all-reduce of 4 KiB, the two 4 KiB chunks of a 16 KiB one did not fit: the second send
// waited for the peer's TCP to acknowledge the first, which it may delay (up to 40 ms), and at
// world=2 now and then a 16 KiB all-reduce took 2-19 ms on average instead of 60 us. So every
// synchronous pair first carries one message of kSyncSendBufferBytes each way, which sizes its
// send buffer for any two chunks of a piece and any synchronous broadcast. Pairs go in the same
// order on every rank (the lower rank sends first), so no send waits on a peer that is itself
// sending.
constexpr size_t kSyncSendBufferBytes = std::max(kSyncAllreducePieceBytes, kSyncBroadcastMaxBytes);

void size_send_buffers(gloo::Context& context) {
  std::vector<char> out(kSyncSendBufferBytes), in(kSyncSendBufferBytes);
  const int slot = context.nextSlot();
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer == context.rank) continue;
    auto& pair = context.getPair(peer);
    auto send = pair->createSendBuffer(slot, out.data(), out.size());
    auto recv = pair->createRecvBuffer(slot, in.data(), in.size());
    if (context.rank < peer) {
      send->send();
      recv->waitRecv();
    } else {
      recv->waitRecv();
      send->send();
    }
    send->waitSend();
  }
}

// One full mesh of Gloo pairs over `device`, its ranks meeting under `prefix` in the store.
std::shared_ptr<gloo::rendezvous::Context> connect_mesh(Store& store, const std::string& prefix, int rank,
                                                        int world_size, std::shared_ptr<gloo::transport::Device>& device,
                                                        std::chrono::milliseconds timeout) {
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, world_size);
  context->setTimeout(timeout);
  GlooStore gloo_store(store);
  gloo::rendezvous::PrefixStore prefixed(prefix, gloo_store);
  try {
    context->connectFullMesh(prefixed, device);
  } catch (const dpv::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("gloo could not connect rank " + std::to_string(rank) + " to its " + std::to_string(world_size - 1) +
                " peers within " + describe_seconds(timeout) + ": " + e.what());
  }
  return context;
}

}  // namespace

std::unique_ptr<ProcessGroup> make_gloo_group(Store& store, int rank, int world_size, const GlooOptions& options) {
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
                e.what() + " (name an existing interface with GLOO_SOCKET_IFNAME, see `ip link`)").about_settings({"GLOO_SOCKET_IFNAME"});
  }
  auto context = connect_mesh(store, options.prefix, rank, world_size, device, options.timeout);
  auto sync_context = connect_mesh(store, options.prefix + "/sync", rank, world_size, device, options.timeout);
  // Blocking reads in the caller's thread (not busy polling: ranks share cores with each other).
  // A peer that dies closes the socket and the read fails; one that hangs trips the socket
  // timeout, which Gloo set from the context's timeout.
  for (int peer = 0; peer < world_size; ++peer) {
    if (peer != rank) sync_context->getPair(peer)->setSync(true, false);
  }
  try {
    size_send_buffers(*sync_context);
  } catch (const std::exception& e) {
    throw Error("gloo rank " + std::to_string(rank) + " could not exchange its first message with its " +
                std::to_string(world_size - 1) + " peers within " + describe_seconds(options.timeout) + ": " + e.what());
  }
  return std::make_unique<GlooGroup>(std::move(context), std::move(sync_context), options.timeout);
}

}  // namespace dpv::dist
