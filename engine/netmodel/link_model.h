#pragma once
// The alpha-beta cost of a collective on one link: every message pays the link's latency (alpha)
// and its bytes at the link's bandwidth (1/beta). The algorithms are the ones Gloo runs for
// PyTorch 1.13's ProcessGroupGloo on CPU tensors:
//   ring all-reduce     2(W-1) steps of n/W bytes      2(W-1)(a + n/(W b))
//   reduce-scatter       (W-1) steps of n/W bytes       (W-1)(a + n/(W b))
//   all-gather           (W-1) steps of n/W bytes       (W-1)(a + n/(W b))
//   broadcast           gloo::broadcast's binomial tree: ceil(log2 W) rounds, each a whole message
//                       ceil(log2 W)(a + n/b)
// (dpv's Gloo group runs a reduce-scatter as Gloo's halving-doubling: the same bandwidth term, only
// log2 W latency terms for a power-of-two W. DDP's buckets, what the lab measures, are all-reduces.)
// n is the nccl-tests "size" (CollectiveReport::bytes): the buffer for all-reduce and broadcast,
// the whole input of a reduce-scatter, the whole output of an all-gather. In a ring every rank
// sends and receives at once, so the slowest link of the ring (the shaped one) sets each step.
#include <cstddef>
#include <string>

namespace dpv::netmodel {

struct Link {
  double latency_s = 0;             // alpha: one message's fixed cost (the link's one-way delay)
  double bandwidth_bytes_per_s = 0; // 1/beta: bytes per second on the link (> 0)
};

enum class CollectiveKind { AllReduce, ReduceScatter, AllGather, Broadcast };
const char* collective_kind_name(CollectiveKind kind);  // "all-reduce", "reduce-scatter", ...

// Seconds of one collective of `bytes` over `world` ranks on `link`; 0 for one rank or no bytes.
// Throws dpv::Error (ValueError) for world < 1 or a link without bandwidth.
double collective_seconds(CollectiveKind kind, int world, size_t bytes, const Link& link);

// The messages one rank sends in the collective (the alpha count above): 2(W-1), W-1 or ceil(log2 W).
int collective_messages(CollectiveKind kind, int world);

// A rate as tc writes it, in bits per second: "10mbit", "1gbit", "500kbit", "1000bit", or in bytes
// per second "1mbps" (tc's SI units: k = 1000). Throws dpv::Error (ValueError) naming `what` and
// the accepted forms otherwise, or for a rate under 8 kbit/s or over 400 gbit/s.
double parse_rate_bits_per_s(const std::string& text, const std::string& what);
// A delay as tc/netem writes it: "0", "10ms", "500us", "1s", "1.5ms". Throws dpv::Error (ValueError)
// naming `what` otherwise, or over 10 s.
double parse_delay_s(const std::string& text, const std::string& what);

// 10e6 -> "10mbit", 1.5e9 -> "1.5gbit"; 0.002 -> "2ms", 0 -> "0ms" (the forms tc takes back).
std::string rate_text(double bits_per_s);
std::string delay_text(double seconds);

}  // namespace dpv::netmodel
