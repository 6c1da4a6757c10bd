#include "tensor/cpu/conv_onednn.h"

#include <memory>
#include <optional>
#include <unordered_map>

#include "tensor/cpu/onednn_common.h"

namespace trainrun {
namespace {

using onednn::cpu_engine;
using onednn::Buffer;
using onednn::set_omp_threads;
using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// Everything that changes the primitive: shapes, stride/pad/dilation, groups
// and whether there is a bias.
using Key = onednn::Key<17>;
template <typename Plan>
using PlanCache = onednn::PlanCache<Plan, 17>;

// A compiled convolution, with the plain layouts (NCHW, OIHW) callers use;
// arguments are reordered to and from the blocked layouts the JIT kernel chose.
struct ConvPlan {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward conv;
  dnnl::memory::desc user_src, user_weights, user_dst, bias;
};

// The shape-independent part of every convolution descriptor. oneDNN counts
// dilation from 0 and wants explicit right padding; PyTorch's floor division
// may leave some of the right padding unused (or negative). `any` layouts let
// the kernel choose its blocked formats.
struct Geometry {
  explicit Geometry(const Conv2dShape& s)
      : strides{s.stride[0], s.stride[1]},
        dil{s.dilation[0] - 1, s.dilation[1] - 1},
        pad_l{s.pad[0], s.pad[1]},
        pad_r{(s.Ho - 1) * s.stride[0] + (s.kH - 1) * s.dilation[0] + 1 - s.H - s.pad[0],
              (s.Wo - 1) * s.stride[1] + (s.kW - 1) * s.dilation[1] + 1 - s.W - s.pad[1]},
        any_src({s.N, s.C, s.H, s.W}, dt::f32, tag::any),
        any_w(weight_dims(s), dt::f32, tag::any),
        any_dst({s.N, s.O, s.Ho, s.Wo}, dt::f32, tag::any) {}
  static dims weight_dims(const Conv2dShape& s) {
    const int64_t Cg = s.C / s.groups, Og = s.O / s.groups;
    return s.groups == 1 ? dims{s.O, Cg, s.kH, s.kW} : dims{s.groups, Og, Cg, s.kH, s.kW};
  }
  dims strides, dil, pad_l, pad_r;
  dnnl::memory::desc any_src, any_w, any_dst;
};

std::unique_ptr<ConvPlan> make_plan(const Conv2dShape& s, bool has_bias) {
  auto plan = std::make_unique<ConvPlan>();
  plan->user_src = dnnl::memory::desc({s.N, s.C, s.H, s.W}, dt::f32, tag::nchw);
  plan->user_dst = dnnl::memory::desc({s.N, s.O, s.Ho, s.Wo}, dt::f32, tag::nchw);
  dims wdims = Geometry::weight_dims(s);
  plan->user_weights = dnnl::memory::desc(wdims, dt::f32, s.groups == 1 ? tag::oihw : tag::goihw);
  plan->bias = has_bias ? dnnl::memory::desc({s.O}, dt::f32, tag::x) : dnnl::memory::desc();
  Geometry g(s);
  auto desc = has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                         dnnl::algorithm::convolution_direct, g.any_src, g.any_w,
                                                         plan->bias, g.any_dst, g.strides, g.dil, g.pad_l, g.pad_r)
                       : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                         dnnl::algorithm::convolution_direct, g.any_src, g.any_w,
                                                         g.any_dst, g.strides, g.dil, g.pad_l, g.pad_r);
  // forward_training: the kernel and blocked layouts PyTorch picks (and the
  // ones a backward pass can reuse).
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // ours per call: safe from any thread
  plan->pd = dnnl::convolution_forward::primitive_desc(desc, attr, cpu_engine());
  plan->conv = dnnl::convolution_forward(plan->pd);
  return plan;
}

// The backward primitives of one convolution; oneDNN builds them from the
// forward's primitive descriptor (the hint fixes the kernel family).
struct BackwardPlan {
  std::unique_ptr<ConvPlan> forward;
  dnnl::convolution_backward_data::primitive_desc data_pd;
  dnnl::convolution_backward_data data;
  dnnl::convolution_backward_weights::primitive_desc weights_pd;
  dnnl::convolution_backward_weights weights;
};

std::unique_ptr<BackwardPlan> make_backward_plan(const Conv2dShape& s, bool has_bias) {
  auto plan = std::make_unique<BackwardPlan>();
  plan->forward = make_plan(s, has_bias);
  Geometry g(s);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::convolution_backward_data::desc data_desc(dnnl::algorithm::convolution_direct, g.any_src, g.any_w, g.any_dst,
                                                  g.strides, g.dil, g.pad_l, g.pad_r);
  plan->data_pd = dnnl::convolution_backward_data::primitive_desc(data_desc, attr, cpu_engine(), plan->forward->pd);
  plan->data = dnnl::convolution_backward_data(plan->data_pd);
  auto weights_desc =
      has_bias ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, g.any_src, g.any_w,
                                                          plan->forward->bias, g.any_dst, g.strides, g.dil, g.pad_l,
                                                          g.pad_r)
               : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, g.any_src, g.any_w,
                                                          g.any_dst, g.strides, g.dil, g.pad_l, g.pad_r);
  plan->weights_pd =
      dnnl::convolution_backward_weights::primitive_desc(weights_desc, attr, cpu_engine(), plan->forward->pd);
  plan->weights = dnnl::convolution_backward_weights(plan->weights_pd);
  return plan;
}

Key key_of(const Conv2dShape& s, bool has_bias) {
  return Key{s.N,      s.C,         s.H,         s.W,      s.O,      s.kH,          s.kW,          s.Ho, s.Wo,
             s.groups, s.stride[0], s.stride[1], s.pad[0], s.pad[1], s.dilation[0], s.dilation[1], has_bias};
}

// One argument of a primitive: the caller's plain buffer and, when the
// kernel wants another layout, a temporary in that layout plus the reorder
// between the two (run before the primitive for inputs, after for outputs).
struct Arg {
  dnnl::memory user, kernel;
  std::optional<onednn::Buffer> blocked;  // kernel's memory, when it is not the user's
  std::optional<dnnl::reorder> reorder;
};

Arg bind(const dnnl::memory::desc& user_desc, const dnnl::memory::desc& kernel_desc, const void* p, bool is_input) {
  const dnnl::engine& engine = cpu_engine();
  Arg a;
  a.user = dnnl::memory(user_desc, engine, const_cast<void*>(p));
  if (user_desc == kernel_desc) {
    a.kernel = a.user;
    return a;
  }
  a.blocked.emplace(kernel_desc);
  a.kernel = a.blocked->memory;
  a.reorder = is_input ? dnnl::reorder(a.user, a.kernel) : dnnl::reorder(a.kernel, a.user);
  return a;
}

void run_in(Arg& a, dnnl::stream& stream) {
  if (a.reorder) a.reorder->execute(stream, a.user, a.kernel);
}
void run_out(Arg& a, dnnl::stream& stream) {
  if (a.reorder) a.reorder->execute(stream, a.kernel, a.user);
}

}  // namespace

bool onednn_conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, float* out) {
  static PlanCache<ConvPlan> cache;
  const bool has_bias = bias != nullptr;
  std::shared_ptr<ConvPlan> plan;
  try {
    plan = cache.get(key_of(s, has_bias), [&] { return make_plan(s, has_bias); });
  } catch (const dnnl::error&) {
    return false;  // no implementation for this shape on this CPU
  }
  set_omp_threads();
  dnnl::stream stream(cpu_engine());
  Arg src = bind(plan->user_src, plan->pd.src_desc(), x, true);
  Arg weights = bind(plan->user_weights, plan->pd.weights_desc(), w, true);
  Arg dst = bind(plan->user_dst, plan->pd.dst_desc(), out, false);
  run_in(src, stream);
  run_in(weights, stream);
  Buffer scratch(plan->pd.scratchpad_desc());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src.kernel},
                                             {DNNL_ARG_WEIGHTS, weights.kernel},
                                             {DNNL_ARG_DST, dst.kernel},
                                             {DNNL_ARG_SCRATCHPAD, scratch.memory}};
  if (has_bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(plan->bias, cpu_engine(), const_cast<float*>(bias)));
  plan->conv.execute(stream, args);
  run_out(dst, stream);
  stream.wait();
  return true;
}

bool onednn_conv2d_backward(const Conv2dShape& s, const float* x, const float* w, const float* grad_out, float* grad_x,
                            float* grad_w, float* grad_b) {
  static PlanCache<BackwardPlan> cache;
  const bool has_bias = grad_b != nullptr;
  std::shared_ptr<BackwardPlan> plan;
  try {
    plan = cache.get(key_of(s, has_bias), [&] { return make_backward_plan(s, has_bias); });
  } catch (const dnnl::error&) {
    return false;
  }
  set_omp_threads();
  dnnl::stream stream(cpu_engine());
  const ConvPlan& f = *plan->forward;
  if (grad_x != nullptr) {
    const auto& pd = plan->data_pd;
    Arg dy = bind(f.user_dst, pd.diff_dst_desc(), grad_out, true);
    Arg weights = bind(f.user_weights, pd.weights_desc(), w, true);
    Arg dx = bind(f.user_src, pd.diff_src_desc(), grad_x, false);
    run_in(dy, stream);
    run_in(weights, stream);
    Buffer scratch(pd.scratchpad_desc());
    plan->data.execute(stream, {{DNNL_ARG_DIFF_DST, dy.kernel},
                                {DNNL_ARG_WEIGHTS, weights.kernel},
                                {DNNL_ARG_DIFF_SRC, dx.kernel},
                                {DNNL_ARG_SCRATCHPAD, scratch.memory}});
    run_out(dx, stream);
  }
  if (grad_w != nullptr) {
    const auto& pd = plan->weights_pd;
    Arg src = bind(f.user_src, pd.src_desc(), x, true);
    Arg dy = bind(f.user_dst, pd.diff_dst_desc(), grad_out, true);
    Arg dw = bind(f.user_weights, pd.diff_weights_desc(), grad_w, false);
    run_in(src, stream);
    run_in(dy, stream);
    Buffer scratch(pd.scratchpad_desc());
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src.kernel},
                                               {DNNL_ARG_DIFF_DST, dy.kernel},
                                               {DNNL_ARG_DIFF_WEIGHTS, dw.kernel},
                                               {DNNL_ARG_SCRATCHPAD, scratch.memory}};
    std::optional<Arg> db;
    if (has_bias) {
      db = bind(f.bias, pd.diff_bias_desc(), grad_b, false);
      args.emplace(DNNL_ARG_DIFF_BIAS, db->kernel);
    }
    plan->weights.execute(stream, args);
    run_out(dw, stream);
    if (db) run_out(*db, stream);
  }
  stream.wait();
  return true;
}

}  // namespace trainrun
