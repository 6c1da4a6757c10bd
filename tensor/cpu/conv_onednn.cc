#include "tensor/cpu/conv_onednn.h"

#include <omp.h>

#include <array>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "tensor/thread_pool.h"

namespace trainrun {
namespace {

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// Everything that changes the primitive: shapes, stride/pad/dilation, groups
// and whether there is a bias.
using Key = std::array<int64_t, 17>;

struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = 0;
    for (int64_t v : k) h = h * 1000003u ^ std::hash<int64_t>()(v);
    return h;
  }
};

// A compiled convolution and the reorders between PyTorch's plain layouts
// (NCHW, OIHW) and the blocked layouts the JIT kernel chose.
struct ConvPlan {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward conv;
  dnnl::memory::desc user_src, user_weights, user_dst, bias;
  // Empty when the user's layout already is the kernel's.
  std::optional<dnnl::reorder> src_in, weights_in, dst_out;
};

const dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

std::unique_ptr<ConvPlan> make_plan(const Conv2dShape& s, bool has_bias) {
  const int64_t Cg = s.C / s.groups, Og = s.O / s.groups;
  auto plan = std::make_unique<ConvPlan>();
  plan->user_src = dnnl::memory::desc({s.N, s.C, s.H, s.W}, dt::f32, tag::nchw);
  plan->user_dst = dnnl::memory::desc({s.N, s.O, s.Ho, s.Wo}, dt::f32, tag::nchw);
  dims wdims = s.groups == 1 ? dims{s.O, Cg, s.kH, s.kW} : dims{s.groups, Og, Cg, s.kH, s.kW};
  plan->user_weights = dnnl::memory::desc(wdims, dt::f32, s.groups == 1 ? tag::oihw : tag::goihw);
  plan->bias = has_bias ? dnnl::memory::desc({s.O}, dt::f32, tag::x) : dnnl::memory::desc();
  // oneDNN counts dilation from 0 and wants explicit right padding; PyTorch's
  // floor division may leave some of the right padding unused (or negative).
  dims strides{s.stride[0], s.stride[1]}, dil{s.dilation[0] - 1, s.dilation[1] - 1};
  dims pad_l{s.pad[0], s.pad[1]};
  dims pad_r{(s.Ho - 1) * s.stride[0] + (s.kH - 1) * s.dilation[0] + 1 - s.H - s.pad[0],
             (s.Wo - 1) * s.stride[1] + (s.kW - 1) * s.dilation[1] + 1 - s.W - s.pad[1]};
  dnnl::memory::desc any_src({s.N, s.C, s.H, s.W}, dt::f32, tag::any);
  dnnl::memory::desc any_w(wdims, dt::f32, tag::any);
  dnnl::memory::desc any_dst({s.N, s.O, s.Ho, s.Wo}, dt::f32, tag::any);
  auto desc = has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                         dnnl::algorithm::convolution_direct, any_src, any_w,
                                                         plan->bias, any_dst, strides, dil, pad_l, pad_r)
                       : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                         dnnl::algorithm::convolution_direct, any_src, any_w,
                                                         any_dst, strides, dil, pad_l, pad_r);
  // forward_training: the kernel and blocked layouts PyTorch picks (and the
  // ones a backward pass can reuse).
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // ours per call: safe from any thread
  plan->pd = dnnl::convolution_forward::primitive_desc(desc, attr, cpu_engine());
  plan->conv = dnnl::convolution_forward(plan->pd);
  auto reorder = [](const dnnl::memory::desc& from, const dnnl::memory::desc& to) -> std::optional<dnnl::reorder> {
    if (from == to) return std::nullopt;
    return dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to));
  };
  plan->src_in = reorder(plan->user_src, plan->pd.src_desc());
  plan->weights_in = reorder(plan->user_weights, plan->pd.weights_desc());
  plan->dst_out = reorder(plan->pd.dst_desc(), plan->user_dst);
  return plan;
}

// Least-recently-used cache of plans; building one JIT-compiles kernels.
class PlanCache {
 public:
  std::shared_ptr<ConvPlan> get(const Key& key, const Conv2dShape& s, bool has_bias) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      order_.splice(order_.begin(), order_, it->second.second);
      return it->second.first;
    }
    std::shared_ptr<ConvPlan> plan = make_plan(s, has_bias);
    order_.push_front(key);
    map_.emplace(key, std::make_pair(plan, order_.begin()));
    if (map_.size() > kCapacity) {
      map_.erase(order_.back());
      order_.pop_back();
    }
    return plan;
  }

 private:
  static constexpr size_t kCapacity = 64;
  std::mutex mu_;
  std::list<Key> order_;
  std::unordered_map<Key, std::pair<std::shared_ptr<ConvPlan>, std::list<Key>::iterator>, KeyHash> map_;
};

PlanCache& plan_cache() {
  static PlanCache cache;
  return cache;
}

}  // namespace

bool onednn_conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, float* out) {
  const bool has_bias = bias != nullptr;
  Key key{s.N,         s.C,         s.H,         s.W,         s.O,        s.kH,       s.kW,       s.Ho,      s.Wo,
          s.groups,    s.stride[0], s.stride[1], s.pad[0],    s.pad[1],   s.dilation[0], s.dilation[1], has_bias};
  std::shared_ptr<ConvPlan> plan;
  try {
    plan = plan_cache().get(key, s, has_bias);
  } catch (const dnnl::error&) {
    return false;  // no implementation for this shape on this CPU
  }
  // oneDNN runs on OpenMP; keep it to our thread count (one thread when
  // called from inside our own parallel region).
  omp_set_num_threads(in_parallel_region() ? 1 : get_num_threads());

  const dnnl::engine& engine = cpu_engine();
  dnnl::stream stream(engine);
  auto wrap = [&](const dnnl::memory::desc& d, const void* p) {
    return dnnl::memory(d, engine, const_cast<void*>(p));
  };
  dnnl::memory user_src = wrap(plan->user_src, x), user_w = wrap(plan->user_weights, w),
               user_dst = wrap(plan->user_dst, out);
  dnnl::memory src = user_src, weights = user_w, dst = user_dst;
  if (plan->src_in) {
    src = dnnl::memory(plan->pd.src_desc(), engine);
    plan->src_in->execute(stream, user_src, src);
  }
  if (plan->weights_in) {
    weights = dnnl::memory(plan->pd.weights_desc(), engine);
    plan->weights_in->execute(stream, user_w, weights);
  }
  if (plan->dst_out) dst = dnnl::memory(plan->pd.dst_desc(), engine);
  // Uninitialised on purpose: the kernel writes before it reads.
  std::unique_ptr<uint8_t[]> scratch_bytes(new uint8_t[plan->pd.scratchpad_desc().get_size() + 1]);
  dnnl::memory scratch(plan->pd.scratchpad_desc(), engine, scratch_bytes.get());
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, scratch}};
  if (has_bias) args.emplace(DNNL_ARG_BIAS, wrap(plan->bias, bias));
  plan->conv.execute(stream, args);
  if (plan->dst_out) plan->dst_out->execute(stream, dst, user_dst);
  stream.wait();
  return true;
}

}  // namespace trainrun
