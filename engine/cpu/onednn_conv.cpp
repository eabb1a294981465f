#include "engine/cpu/onednn_conv.h"

#include <dnnl.hpp>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "engine/cpu/onednn_gemm.h"
#include "engine/cpu/blocked_layout.h"
#include "engine/error.h"

namespace dpv::cpu {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

enum class PassKind { Forward, BackwardData, BackwardWeights };

// One argument of a primitive: the caller's plain (NCHW / OIHW) buffer, and when oneDNN prefers
// another layout, a buffer in that layout with the reorder between the two.
struct Operand {
  int arg = 0;          // DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, ...
  bool output = false;  // written by the primitive (reordered back to the caller's layout after it)
  memory user;          // wraps the caller's pointer (set_data_handle per call)
  memory staged;        // in the primitive's layout; == user when the layouts agree
  dnnl::reorder reorder;
  std::unordered_map<int, memory> reorder_args;  // built once: executing allocates nothing
  bool reordered = false;
  // An output staged in nChw16c goes back through nchw16c_to_nchw (blocked_layout.h) rather than
  // `reorder`; these are its [N, C, H * W].
  bool unblock = false;
  int64_t n = 0, c = 0, hw = 0;
};

struct Pass {
  dnnl::primitive primitive;
  std::vector<Operand> operands;
  memory scratchpad;
  std::unordered_map<int, memory> args;  // the staged buffers and the scratchpad, built once
};

using Key = std::tuple<int, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;

}  // namespace

struct OnednnConv::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::mutex mutex;  // one backend serves one device, but a device may be driven from several threads
  std::map<Key, Pass> passes;
  // The fresh gradient of an accumulating weight pass (oneDNN overwrites its outputs), added to
  // the caller's afterwards; grown once, reused.
  std::vector<float> fresh_dw;

  struct Descs {
    memory::desc src, weights, dst, bias;      // the caller's plain layouts (bias: empty without one)
    memory::desc any_src, any_weights, any_dst;  // let oneDNN choose
    memory::dims strides, pad_l, pad_r;
  };

  // The staged layouts, pass by pass. oneDNN's own choice (Tag::any) is its blocked nChw16c for
  // every activation, zero-padded when the channels are not a multiple of 16, and its reorders
  // into and out of a padded layout are its generic (slow) ones. Measured on the cnn preset
  // (batch 32, thread CPU time per pass including the reorders, medians of 80; oneDNN 2.6):
  //   forward, 3 -> 8 channels:         any (nChw16c, padded) 0.39 ms, nChw8c 0.33 ms
  //   backward data, 16 -> 8 channels:  any 0.49 ms, input gradient in nChw8c 0.38 ms, nhwc 0.37 ms
  //   backward weights, 8 -> 16:        any / nChw8c 0.39 ms, nhwc 0.25 ms
  // The forward keeps oneDNN's nChw16c output (its AVX-512 kernel: 0.21 ms where the AVX2 one
  // into nChw8c took 0.28), copied back by nchw16c_to_nchw instead of oneDNN's reorder (the
  // CNN's first convolution forward 0.37 -> 0.33 ms). An output gradient of 8 (24, 40, ...)
  // channels is read in nChw8c, not padded (the first convolution's weight gradient: reorder +
  // kernel 0.116 + 0.187 ms padded, 0.079 + 0.178 ms in nChw8c; DNNL_VERBOSE, medians over 60
  // steps of `dpv bench`).
  static memory::desc gradient_desc(const memory::dims& dims) {
    const int64_t channels = dims[1];
    const Tag tag = channels % 16 != 0 && channels % 8 == 0 ? Tag::nChw8c : Tag::any;
    return memory::desc(dims, memory::data_type::f32, tag);
  }
  // The weight gradient reads the input and the output gradient in channels-last (nhwc) when
  // the input has 8 or more channels in blocks of 8 (oneDNN's AVX-512 kernel then reduces over
  // whole vectors of channels); an input of a few channels (an image's 3) stays as oneDNN
  // chooses. The input gradient then runs in nhwc too (as fast as in nChw8c, see above), so that
  // both passes read the output gradient staged once.
  static bool backward_channels_last(const Geometry& g) { return g.C % 8 == 0; }

  static Descs descs(PassKind kind, bool bias, int64_t O, const Geometry& g) {
    const auto f32 = memory::data_type::f32;
    Descs d;
    const memory::dims src{g.N, g.C, g.H, g.W}, wei{O, g.C, g.kh, g.kw}, dst{g.N, O, g.OH, g.OW};
    d.src = memory::desc(src, f32, Tag::nchw);
    d.weights = memory::desc(wei, f32, Tag::oihw);
    d.dst = memory::desc(dst, f32, Tag::nchw);
    if (bias) d.bias = memory::desc({O}, f32, Tag::x);
    // Blocked layouts chosen by oneDNN (nChw8c/16c) beat the plain ones even counting the
    // reorders: measured 2x on the cnn preset, where plain layouts gain little over im2col.
    d.any_weights = memory::desc(wei, f32, Tag::any);
    if (kind == PassKind::BackwardWeights || (kind == PassKind::BackwardData && backward_channels_last(g))) {
      const bool channels_last = backward_channels_last(g);
      d.any_src = memory::desc(src, f32, channels_last ? Tag::nhwc : Tag::any);
      d.any_dst = channels_last ? memory::desc(dst, f32, Tag::nhwc) : gradient_desc(dst);
    } else {
      d.any_src = memory::desc(src, f32, Tag::any);
      d.any_dst = memory::desc(dst, f32, Tag::any);
    }
    d.strides = {g.stride, g.stride};
    d.pad_l = {g.pad, g.pad};
    // The right/bottom padding that yields PyTorch's output size exactly (may be less than pad
    // when the stride skips the last columns).
    d.pad_r = {(g.OH - 1) * g.stride + g.kh - g.H - g.pad, (g.OW - 1) * g.stride + g.kw - g.W - g.pad};
    return d;
  }

  dnnl::convolution_forward::primitive_desc forward_pd(const Descs& d, const dnnl::primitive_attr& attr) const {
    const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                               d.any_src, d.any_weights, d.bias, d.any_dst, d.strides, d.pad_l,
                                               d.pad_r);
    return {desc, attr, engine};
  }

  Operand operand(int arg, bool output, const memory::desc& user_desc, const memory::desc& wanted) {
    Operand o;
    o.arg = arg;
    o.output = output;
    o.user = memory(user_desc, engine, DNNL_MEMORY_NONE);
    if (wanted == user_desc) {
      o.staged = o.user;
      return o;
    }
    o.reordered = true;
    o.staged = memory(wanted, engine);  // allocated once, kept with the pass
    const memory::dims dims = user_desc.dims();
    if (output && dims.size() == 4 && wanted == memory::desc(dims, memory::data_type::f32, Tag::nChw16c)) {
      o.unblock = true;
      o.n = dims[0], o.c = dims[1], o.hw = dims[2] * dims[3];
      return o;
    }
    o.reorder = output ? dnnl::reorder(o.staged, o.user) : dnnl::reorder(o.user, o.staged);
    o.reorder_args = {{DNNL_ARG_FROM, output ? o.staged : o.user}, {DNNL_ARG_TO, output ? o.user : o.staged}};
    return o;
  }

  Pass build(PassKind kind, bool bias, int64_t O, const Geometry& g) {
    const Descs d = descs(kind, bias, O, g);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    Pass p;
    memory::desc scratch;
    if (kind == PassKind::Forward) {
      const auto pd = forward_pd(d, attr);
      p.primitive = dnnl::convolution_forward(pd);
      p.operands.push_back(operand(DNNL_ARG_SRC, false, d.src, pd.src_desc()));
      p.operands.push_back(operand(DNNL_ARG_WEIGHTS, false, d.weights, pd.weights_desc()));
      if (bias) p.operands.push_back(operand(DNNL_ARG_BIAS, false, d.bias, pd.bias_desc()));
      p.operands.push_back(operand(DNNL_ARG_DST, true, d.dst, pd.dst_desc()));
      scratch = pd.scratchpad_desc();
    } else if (kind == PassKind::BackwardData) {
      const auto hint = forward_pd(d, attr);
      const dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, d.any_src, d.any_weights,
                                                       d.any_dst, d.strides, d.pad_l, d.pad_r);
      const dnnl::convolution_backward_data::primitive_desc pd(desc, attr, engine, hint);
      p.primitive = dnnl::convolution_backward_data(pd);
      p.operands.push_back(operand(DNNL_ARG_DIFF_DST, false, d.dst, pd.diff_dst_desc()));
      p.operands.push_back(operand(DNNL_ARG_WEIGHTS, false, d.weights, pd.weights_desc()));
      p.operands.push_back(operand(DNNL_ARG_DIFF_SRC, true, d.src, pd.diff_src_desc()));
      scratch = pd.scratchpad_desc();
    } else {
      const auto hint = forward_pd(descs(PassKind::Forward, false, O, g), attr);
      const dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, d.any_src,
                                                          d.any_weights, d.any_dst, d.strides, d.pad_l, d.pad_r);
      const dnnl::convolution_backward_weights::primitive_desc pd(desc, attr, engine, hint);
      p.primitive = dnnl::convolution_backward_weights(pd);
      p.operands.push_back(operand(DNNL_ARG_SRC, false, d.src, pd.src_desc()));
      p.operands.push_back(operand(DNNL_ARG_DIFF_DST, false, d.dst, pd.diff_dst_desc()));
      p.operands.push_back(operand(DNNL_ARG_DIFF_WEIGHTS, true, d.weights, pd.diff_weights_desc()));
      scratch = pd.scratchpad_desc();
    }
    p.scratchpad = memory(scratch, engine);
    for (const Operand& o : p.operands) p.args.emplace(o.arg, o.staged);
    p.args.emplace(DNNL_ARG_SCRATCHPAD, p.scratchpad);
    return p;
  }

  // Runs one pass on the caller's buffers, in operand order, skipping null ones (the bias's, when
  // `bias` is not set). `staged`: an input another pass of the same call has already staged (the
  // backward's output gradient), used as it is when this pass wants that layout. The caller holds
  // the mutex.
  Pass& run(PassKind kind, bool bias, int64_t O, const Geometry& g, std::initializer_list<const float*> buffers,
            const Operand* staged = nullptr) {
    const Key key{static_cast<int>(kind), bias, O, g.N, g.C, g.H, g.W, g.kh, g.kw, g.stride, g.pad};
    auto it = passes.find(key);
    if (it == passes.end()) it = passes.emplace(key, build(kind, bias, O, g)).first;
    Pass& p = it->second;
    auto buffer = buffers.begin();
    for (Operand& o : p.operands) {
      while (*buffer == nullptr) ++buffer;
      o.user.set_data_handle(const_cast<float*>(*buffer++));
    }
    for (Operand& o : p.operands) {
      if (!o.reordered || o.output) continue;
      const bool shared = staged && staged->arg == o.arg && staged->reordered &&
                          staged->staged.get_desc() == o.staged.get_desc();
      p.args[o.arg] = shared ? staged->staged : o.staged;  // replaces a handle: allocates nothing
      if (!shared) o.reorder.execute(stream, o.reorder_args);
    }
    p.primitive.execute(stream, p.args);
    stream.wait();
    for (Operand& o : p.operands) {
      if (!o.reordered || !o.output) continue;
      if (o.unblock)
        nchw16c_to_nchw(static_cast<const float*>(o.staged.get_data_handle()),
                        static_cast<float*>(o.user.get_data_handle()), o.n, o.c, o.hw);
      else
        o.reorder.execute(stream, o.reorder_args);
    }
    stream.wait();
    return p;
  }

  Pass& guarded(PassKind kind, bool bias, int64_t O, const Geometry& g, std::initializer_list<const float*> buffers,
                const Operand* staged = nullptr) {
    try {
      return run(kind, bias, O, g, buffers, staged);
    } catch (const dnnl::error& e) {
      throw Error(std::string("oneDNN convolution failed (") + e.what() + ", status " + std::to_string(e.status) +
                  ") for input [" + std::to_string(g.N) + ", " + std::to_string(g.C) + ", " + std::to_string(g.H) +
                  ", " + std::to_string(g.W) + "], " + std::to_string(O) + " output channels, kernel " +
                  std::to_string(g.kh) + ", stride " + std::to_string(g.stride) + ", padding " +
                  std::to_string(g.pad));
    }
  }
};

OnednnConv::OnednnConv() : impl_(std::make_unique<Impl>()) {}
OnednnConv::~OnednnConv() = default;

void OnednnConv::forward(const float* x, const float* w, const float* bias, float* y, int64_t O, const Geometry& g) {
  onednn_single_thread();
  std::lock_guard lock(impl_->mutex);
  impl_->guarded(PassKind::Forward, bias != nullptr, O, g, {x, w, bias, y});
}

void OnednnConv::backward(const float* x, const float* dy, const float* w, float* dw, bool accumulate, float* dx,
                          int64_t O, const Geometry& g) {
  onednn_single_thread();
  std::lock_guard lock(impl_->mutex);
  const size_t count = static_cast<size_t>(O * g.C * g.kh * g.kw);
  std::vector<float>& fresh = impl_->fresh_dw;
  if (accumulate) fresh.resize(count);
  Pass& weights = impl_->guarded(PassKind::BackwardWeights, false, O, g, {x, dy, accumulate ? fresh.data() : dw});
  if (accumulate)
    for (size_t i = 0; i < count; ++i) dw[i] += fresh[i];
  if (!dx) return;
  // The output gradient as the weight pass staged it (operand 1, DNNL_ARG_DIFF_DST).
  impl_->guarded(PassKind::BackwardData, false, O, g, {dy, w, dx}, &weights.operands[1]);
}

}  // namespace dpv::cpu
