// Modules (registry, state_dict, hooks, modes), layers, losses, optimizers
// (with state round-trips), clipping and schedulers.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "nn/attention.h"
#include "nn/batch_norm.h"
#include "nn/containers.h"
#include "nn/conv_pool.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/optim/adam.h"
#include "nn/optim/clip_grad.h"
#include "nn/optim/lr_scheduler.h"
#include "nn/optim/sgd.h"
#include "tensor/ops.h"
#include "tests/tensor/test_util.h"

namespace trainrun {
namespace {

using nn::Linear;
using nn::Sequential;

std::shared_ptr<Sequential> mlp() {
  return std::make_shared<Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<Linear>(4, 8), std::make_shared<nn::ReLU>(), std::make_shared<Linear>(8, 3)});
}

TEST(Module, RegistryNamesStateDictAndErrors) {
  manual_seed(1);
  auto net = mlp();
  std::vector<std::string> names;
  for (auto& [n, p] : net->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(net->named_modules().size(), 4u);
  nn::StateDict sd = net->state_dict();
  manual_seed(2);
  auto other = mlp();
  Tensor x = randn({5, 4});
  EXPECT_FALSE(allclose((*net)(x), (*other)(x)));
  other->load_state_dict(sd);
  EXPECT_TRUE(allclose((*net)(x), (*other)(x)));
  nn::StateDict missing = sd;
  missing.erase("2.bias");
  missing["extra"] = zeros({1});
  expect_error<ValueError>([&] { other->load_state_dict(missing); }, {"missing keys [2.bias]", "unexpected keys [extra]"});
  other->load_state_dict(missing, /*strict=*/false);
  nn::StateDict wrong = sd;
  wrong["0.weight"] = zeros({2, 2});
  expect_error<ValueError>([&] { other->load_state_dict(wrong, false); }, {"0.weight", "[2, 2]", "[8, 4]"});
  expect_error<ValueError>([&] { net->register_parameter("bad.name", zeros({1})); }, {"not a valid name"});
  expect_error<ValueError>([&] { (*net)(randn({5, 3})); }, {"Linear(4, 8)", "[5, 3]"});
}

// Attention-style: (x, mask) in, (output, weights) out.
class MaskedScale : public nn::Module {
 public:
  MaskedScale() : nn::Module("MaskedScale") {}
  TensorList forward(const TensorList& in) override {
    TR_CHECK(in.size() == 2, ValueError, "MaskedScale takes (x, mask), got {} tensors", in.size());
    return {mul(in[0], in[1]), sum(in[1])};
  }
};

TEST(Module, ForwardAndHooksOverListsOfTensors) {
  MaskedScale m;
  TensorList out = m({full({3}, 2.0), tensor<float>({1, 0, 1}, {3})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(allclose(out[0], tensor<float>({2, 0, 2}, {3})));
  EXPECT_EQ(out[1].item<float>(), 2.0f);
  // Hooks see every argument and every output, and may replace either;
  // prepend runs first; a removed hook no longer runs.
  std::vector<std::string> order;
  auto pre = m.register_forward_pre_hook([&](nn::Module&, const TensorList& args) -> std::optional<TensorList> {
    order.push_back("pre " + std::to_string(args.size()));
    return TensorList{args[0], ones({3})};  // unmask
  });
  m.register_forward_pre_hook(
      [&](nn::Module&, const TensorList&) -> std::optional<TensorList> {
        order.push_back("first");
        return std::nullopt;
      },
      /*prepend=*/true);
  auto post = m.register_forward_hook(
      [&](nn::Module&, const TensorList& args, const TensorList& outs) -> std::optional<TensorList> {
        order.push_back("post " + std::to_string(args.size()) + "->" + std::to_string(outs.size()));
        return TensorList{outs[0]};  // drop the weights
      });
  out = m({full({3}, 2.0), zeros({3})});
  EXPECT_EQ(order, (std::vector<std::string>{"first", "pre 2", "post 2->2"}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(allclose(out[0], full({3}, 2.0)));
  EXPECT_TRUE(m.remove_hook(pre));
  EXPECT_TRUE(m.remove_hook(post));
  EXPECT_FALSE(m.remove_hook(post));
  EXPECT_EQ(m({ones({3}), zeros({3})}).size(), 2u);
  // One tensor in where forward returns two: the error says so.
  expect_error<ValueError>([&] { m(ones({3})); }, {"MaskedScale", "takes (x, mask)"});
  // A one-tensor layer works through the list form too.
  Linear lin(2, 2);
  TensorList one = lin(TensorList{ones({1, 2})});
  EXPECT_TRUE(allclose(one[0], lin(ones({1, 2}))));
  expect_error<TypeError>([&] { lin(TensorList{ones({1, 2}), ones({1, 2})}); }, {"Linear", "takes one tensor, got 2"});
  // A module that overrides neither form fails by name instead of recursing.
  nn::Module bare("Bare");
  expect_error<NotImplementedError>([&] { bare(ones({1})); }, {"Bare: forward is not implemented"});
  expect_error<NotImplementedError>([&] { bare.forward(ones({1})); }, {"Bare: forward is not implemented"});
}

TEST(Module, ReplaceParameterTrainEvalHooksAndZeroGrad) {
  manual_seed(3);
  auto lin = std::make_shared<Linear>(3, 2);
  Tensor w = zeros({2, 3});
  set_requires_grad(w);
  lin->replace_parameter("weight", w);
  EXPECT_TRUE(allclose((*lin)(ones({1, 3})), reshape(lin->param("bias"), {1, 2})));
  expect_error<ValueError>([&] { lin->replace_parameter("weight", zeros({3, 3})); }, {"weight", "[3, 3]"});
  std::vector<std::string> order;
  lin->register_forward_pre_hook([&](nn::Module&, const TensorList& in) -> std::optional<TensorList> {
    order.push_back("pre");
    return TensorList{mul(in[0], 2.0)};
  });
  lin->register_forward_hook([&](nn::Module& m, const TensorList&, const TensorList&) -> std::optional<TensorList> {
    order.push_back("post " + m.type_name());
    return std::nullopt;
  });
  (*lin)(ones({1, 3}));
  EXPECT_EQ(order, (std::vector<std::string>{"pre", "post Linear"}));
  auto drop = std::make_shared<nn::Dropout>(0.5);
  auto seq = std::make_shared<Sequential>(std::vector<std::shared_ptr<nn::Module>>{drop});
  seq->eval();
  EXPECT_FALSE(drop->is_training());
  Tensor x = randn({100});
  EXPECT_TRUE(allclose((*seq)(x), x));
  seq->train();
  Tensor y = (*seq)(ones({1000}));
  double kept = sum(ne(y, 0.0).to(DType::Float64)).item<double>();
  EXPECT_NEAR(kept, 500, 80);
  EXPECT_TRUE(allclose(mul(y, ne(y, 0.0).to(DType::Float32)), mul(ne(y, 0.0).to(DType::Float32), 2.0)));
  backward(sum((*lin)(ones({1, 3}))));
  EXPECT_TRUE(grad(lin->param("weight")).defined());
  lin->zero_grad();
  EXPECT_FALSE(grad(lin->param("weight")).defined());
}

TEST(Losses, MatchClosedForms) {
  Tensor a = tensor<float>({1, 2, 3}, {3}), b = tensor<float>({1, 0, 5}, {3});
  EXPECT_NEAR(nn::mse_loss(a, b).item<double>(), (0 + 4 + 4) / 3.0, 1e-6);
  EXPECT_NEAR(nn::l1_loss(a, b, "sum").item<double>(), 4.0, 1e-6);
  Tensor x = tensor<float>({-30, 0, 2}, {3}), t = tensor<float>({0, 1, 1}, {3});
  double expect = (std::log1p(std::exp(-30.0)) + std::log(2.0) + std::log1p(std::exp(-2.0))) / 3;
  EXPECT_NEAR(nn::binary_cross_entropy_with_logits(x, t).item<double>(), expect, 1e-6);
  expect_error<ValueError>([&] { nn::mse_loss(a, ones({2})); }, {"mse_loss", "[3]", "[2]"});
  expect_error<ValueError>([&] { nn::l1_loss(a, b, "avg"); }, {"reduction", "avg"});
}

// A parameter p with a fixed gradient g, stepped by hand and by the optimizer.
TEST(Optim, SGDMomentumNesterovWeightDecay) {
  Tensor p = tensor<float>({1.0f, -2.0f}, {2});
  set_requires_grad(p);
  optim::SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.nesterov = true;
  o.weight_decay = 0.01;
  optim::SGD sgd({p}, o);
  std::vector<double> ref = {1.0, -2.0}, buf = {0, 0};
  for (int step = 0; step < 3; ++step) {
    set_grad(p, tensor<float>({0.5f, 0.25f}, {2}));
    sgd.step();
    for (int i = 0; i < 2; ++i) {
      double g = (i == 0 ? 0.5 : 0.25) + 0.01 * ref[i];
      buf[i] = step == 0 ? g : 0.9 * buf[i] + g;
      ref[i] -= 0.1 * (g + 0.9 * buf[i]);
    }
  }
  std::vector<double> got = values(p);
  EXPECT_NEAR(got[0], ref[0], 1e-5);
  EXPECT_NEAR(got[1], ref[1], 1e-5);
}

// Dampening scales each new gradient into the momentum buffer (not the first:
// PyTorch seeds the buffer with the gradient itself); maximize steps uphill.
TEST(Optim, SGDDampeningAndMaximize) {
  for (bool maximize : {false, true}) {
    SCOPED_TRACE(maximize ? "maximize" : "minimize");
    Tensor p = tensor<float>({1.0f, -2.0f}, {2});
    set_requires_grad(p);
    optim::SGDOptions o;
    o.lr = 0.1;
    o.momentum = 0.9;
    o.dampening = 0.5;
    o.maximize = maximize;
    optim::SGD sgd({p}, o);
    std::vector<double> ref = {1.0, -2.0}, buf = {0, 0};
    for (int step = 0; step < 3; ++step) {
      set_grad(p, tensor<float>({0.5f, -0.25f}, {2}));
      sgd.step();
      for (int i = 0; i < 2; ++i) {
        const double g = (i == 0 ? 0.5 : -0.25) * (maximize ? -1 : 1);
        buf[i] = step == 0 ? g : 0.9 * buf[i] + 0.5 * g;
        ref[i] -= 0.1 * buf[i];
      }
    }
    std::vector<double> got = values(p);
    EXPECT_NEAR(got[0], ref[0], 1e-6);
    EXPECT_NEAR(got[1], ref[1], 1e-6);
  }
}

TEST(Optim, AdamWMatchesTheAlgorithmAndStateRoundTrips) {
  Tensor p = tensor<float>({1.0f}, {1});
  set_requires_grad(p);
  optim::AdamOptions o;
  o.lr = 0.01;
  o.weight_decay = 0.1;
  optim::AdamW adam({p}, o);
  double ref = 1.0, m = 0, v = 0;
  for (int step = 1; step <= 3; ++step) {
    double g = 0.3 * step;
    set_grad(p, full({1}, g));
    adam.step();
    ref *= 1 - 0.01 * 0.1;
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    double mh = m / (1 - std::pow(0.9, step)), vh = v / (1 - std::pow(0.999, step));
    ref -= 0.01 * mh / (std::sqrt(vh) + 1e-8);
  }
  EXPECT_NEAR(p.item<double>(), ref, 1e-6);
  // A second optimizer loaded from the first's state makes the same next step.
  Tensor q = clone(detach(p));
  set_requires_grad(q);
  optim::AdamW twin({q}, o);
  twin.load_state_dict(adam.state_dict());
  set_grad(p, full({1}, 0.7));
  set_grad(q, full({1}, 0.7));
  adam.step();
  twin.step();
  EXPECT_EQ(p.item<float>(), q.item<float>());
  optim::OptimizerState bad = adam.state_dict();
  bad.state.push_back({});
  expect_error<ValueError>([&] { twin.load_state_dict(bad); }, {"state for 2 parameters, expected 1"});
}

TEST(Optim, FusedAdamMatchesTheOpByOpForm) {
  manual_seed(9);
  for (DType dt : {DType::Float32, DType::Float64})
    for (bool decoupled : {false, true})
      for (bool amsgrad : {false, true})
        for (bool maximize : {false, true}) {
          Tensor a = randn({300, 70}, dt), b = clone(a);
          set_requires_grad(a), set_requires_grad(b);
          optim::AdamOptions o;
          o.lr = 0.05, o.weight_decay = 0.1, o.amsgrad = amsgrad, o.maximize = maximize;
          optim::AdamOptions slow = o;
          slow.fused = false;
          std::unique_ptr<optim::Optimizer> fa, sa;
          if (decoupled) {
            fa = std::make_unique<optim::AdamW>(std::vector<Tensor>{a}, o);
            sa = std::make_unique<optim::AdamW>(std::vector<Tensor>{b}, slow);
          } else {
            fa = std::make_unique<optim::Adam>(std::vector<Tensor>{a}, o);
            sa = std::make_unique<optim::Adam>(std::vector<Tensor>{b}, slow);
          }
          for (int step = 0; step < 5; ++step) {
            // Gradients that shrink, so that amsgrad's maximum matters.
            Tensor g = mul(randn({300, 70}, dt), 1.0 / (1 + step));
            set_grad(a, clone(g));
            set_grad(b, clone(g));
            fa->step();
            sa->step();
          }
          const double tol = dt == DType::Float32 ? 1e-6 : 1e-12;
          EXPECT_TRUE(allclose(a, b, tol, tol)) << dtype_name(dt) << " decoupled=" << decoupled
                                                 << " amsgrad=" << amsgrad << " maximize=" << maximize;
          EXPECT_FALSE(allclose(a, clone(detach(b)).fill_(0)));  // it did move
        }
  Tensor p = zeros({4}), g = zeros({3}), m = zeros({4}), v = zeros({4}), none;
  expect_error<ValueError>([&] { fused_adam_(p, g, m, v, none, {0.1, 0.9, 0.999, 1e-8, 0, 1, false, false, true}); },
                           {"fused_adam_", "grad", "shape [4]"});
}

TEST(Optim, ClipGradAndSchedulers) {
  Tensor a = zeros({2}), b = zeros({1});
  set_requires_grad(a);
  set_requires_grad(b);
  set_grad(a, tensor<float>({3, 0}, {2}));
  set_grad(b, tensor<float>({4}, {1}));
  EXPECT_NEAR(optim::clip_grad_norm_({a, b}, 1.0).item<double>(), 5.0, 1e-6);
  EXPECT_NEAR(values(grad(a))[0], 0.6, 1e-5);
  optim::clip_grad_value_({b}, 0.1);
  EXPECT_NEAR(values(grad(b))[0], 0.1, 1e-6);

  optim::SGDOptions o;
  o.lr = 1.0;
  optim::SGD sgd({a}, o);
  optim::StepLR step_lr(sgd, 2, 0.5);
  std::vector<double> lrs;
  for (int i = 0; i < 4; ++i) {
    step_lr.step();
    lrs.push_back(step_lr.get_last_lr()[0]);
  }
  EXPECT_EQ(lrs, (std::vector<double>{1.0, 0.5, 0.5, 0.25}));
  optim::SGD sgd2({b}, o);
  auto warm = std::make_shared<optim::LinearLR>(sgd2, 0.1, 1.0, 2);
  auto cosine = std::make_shared<optim::CosineAnnealingLR>(sgd2, 4);
  optim::SequentialLR seq(sgd2, {warm, cosine}, {2});
  EXPECT_NEAR(seq.get_last_lr()[0], 0.1, 1e-12);
  seq.step();
  EXPECT_NEAR(seq.get_last_lr()[0], 0.55, 1e-12);
  seq.step();
  EXPECT_NEAR(seq.get_last_lr()[0], 1.0, 1e-12);  // cosine at its start
  seq.step();
  seq.step();
  EXPECT_NEAR(seq.get_last_lr()[0], 0.5, 1e-12);  // cosine half way (epoch 2 of 4)
}

TEST(Training, AnMLPLearnsToAFallingLoss) {
  manual_seed(4);
  auto net = mlp();
  Tensor x = randn({64, 4});
  Tensor target = argmax(add(mm(x, randn({4, 3})), 0.1), 1);
  optim::AdamOptions o;
  o.lr = 0.05;
  optim::Adam adam(net->parameters(), o);
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    adam.zero_grad();
    Tensor loss = cross_entropy((*net)(x), target);
    backward(loss);
    adam.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first * 0.3) << "loss went from " << first << " to " << last;
}

TEST(ConvPool, LayersMatchTheFunctionsAndACnnLearns) {
  manual_seed(5);
  nn::Conv2d conv(4, 6, {3, 2}, {2}, {1}, {1}, 2);
  auto names = conv.named_parameters();
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0].first, "weight");
  EXPECT_EQ(names[0].second.sizes(), (IntList{6, 2, 3, 2}));
  EXPECT_EQ(names[1].second.sizes(), (IntList{6}));
  // PyTorch's default init bound: 1/sqrt(fan_in) for the bias, fan_in = 2*3*2.
  EXPECT_LE(amax(abs(conv.param("bias"))).item<double>(), 1.0 / std::sqrt(12.0));
  Tensor x = randn({2, 4, 7, 6});
  EXPECT_TRUE(allclose(conv(x), conv2d(x, conv.param("weight"), conv.param("bias"), {2, 2}, {1, 1}, {1, 1}, 2)));
  expect_error<ValueError>([&] { conv(randn({2, 3, 7, 6})); }, {"Conv2d(4, 6)", "[2, 3, 7, 6]"});
  expect_error<ValueError>([] { nn::Conv2d(4, 6, {3}, {1}, {0}, {1}, 4); }, {"divisible by groups"});
  EXPECT_EQ(nn::MaxPool2d({2})(x).sizes(), (IntList{2, 4, 3, 3}));   // stride defaults to the kernel
  EXPECT_EQ(nn::AvgPool2d({3}, {1})(x).sizes(), (IntList{2, 4, 5, 4}));
  EXPECT_EQ(nn::Flatten()(x).sizes(), (IntList{2, 4 * 7 * 6}));
  EXPECT_TRUE(allclose(nn::Softmax(1)(x), softmax(x, 1)));

  // Tell apart images whose bright blob sits left or right.
  Tensor images = mul(randn({32, 1, 8, 8}), 0.3);
  Tensor labels = empty({32}, DType::Int64);
  for (int64_t i = 0; i < 32; ++i) {
    const int64_t side = i % 2;
    Tensor label = select(labels, 0, i);
    fill_(label, side);
    Tensor blob = slice(slice(select(images, 0, i), 1, 2, 6), 2, side * 4, side * 4 + 4);
    add_(blob, 1.0);
  }
  auto net = std::make_shared<Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(1, 4, IntList{3}, IntList{1}, IntList{1}), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::MaxPool2d>(IntList{2}), std::make_shared<nn::Flatten>(),
      std::make_shared<Linear>(4 * 4 * 4, 2)});
  optim::AdamOptions o;
  o.lr = 0.02;
  optim::Adam adam(net->parameters(), o);
  double first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    adam.zero_grad();
    Tensor loss = cross_entropy((*net)(images), labels);
    backward(loss);
    adam.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first * 0.2) << "loss went from " << first << " to " << last;
}

TEST(Attention, CausalSelfAttentionIsCausalAndTheBlockTrains) {
  manual_seed(12);
  auto attn = std::make_shared<nn::CausalSelfAttention>(8, 2);
  Tensor x = randn({2, 5, 8});
  Tensor y = (*attn)(x);
  EXPECT_EQ(y.sizes(), (IntList{2, 5, 8}));
  // Changing the last position must not change earlier outputs.
  Tensor x2 = clone(x);
  {
    NoGradGuard no_grad;
    Tensor last = select(x2, 1, 4);
    fill_(last, 3.0);
  }
  Tensor y2 = (*attn)(x2);
  EXPECT_TRUE(allclose(narrow(y, 1, 0, 4), narrow(y2, 1, 0, 4), 1e-5, 1e-6));
  EXPECT_FALSE(allclose(narrow(y, 1, 4, 1), narrow(y2, 1, 4, 1)));
  expect_error<ValueError>([] { nn::CausalSelfAttention(10, 3); }, {"not divisible"});

  auto block = std::make_shared<nn::TransformerBlock>(16, 4);
  std::vector<std::string> names;
  for (auto& [n, _] : block->named_parameters()) names.push_back(n);
  EXPECT_EQ(names.front(), "ln_1.weight");
  EXPECT_EQ(names.back(), "mlp.2.bias");
  Tensor xb = randn({2, 6, 16}), target = randn({2, 6, 16});
  optim::AdamOptions o;
  o.lr = 1e-2;
  optim::AdamW opt(block->parameters(), o);
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    opt.zero_grad();
    Tensor loss = nn::mse_loss((*block)(xb), target);
    backward(loss);
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first * 0.5);
}


TEST(Containers, ModuleListAndModuleDict) {
  nn::ModuleList list({std::make_shared<Linear>(2, 3), std::make_shared<nn::ReLU>()});
  list.append(std::make_shared<Linear>(3, 1));
  EXPECT_EQ(list.size(), 3u);
  EXPECT_EQ(list.at(2)->type_name(), "Linear");
  expect_error<IndexError>([&] { list.at(3); }, {"index 3", "3 modules"});
  std::vector<std::string> names;
  for (auto& [n, _] : list.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  nn::ModuleDict dict;
  dict.insert("encoder", std::make_shared<Linear>(4, 4)).insert("act", std::make_shared<nn::GELU>());
  EXPECT_TRUE(dict.contains("act"));
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"encoder", "act"}));
  expect_error<ValueError>([&] { dict.at("decoder"); }, {"'decoder'", "encoder, act"});
  expect_error<ValueError>([&] { dict.insert("act", std::make_shared<nn::ReLU>()); }, {"already registered"});
}


TEST(BatchNorm, TrainingNormalizesAndTracksRunningStatistics) {
  manual_seed(21);
  nn::BatchNorm2d bn(3);
  Tensor x = add(mul(randn({4, 3, 5, 5}), 2.0), 1.0);
  Tensor y = bn(x);
  Tensor per_channel_mean = mean(y, {0, 2, 3});
  EXPECT_TRUE(allclose(per_channel_mean, zeros({3}), 1e-5, 1e-5));
  Tensor centered = sub(x, mean(x, {0, 2, 3}, true));
  Tensor batch_var = div(sum(mul(centered, centered), {0, 2, 3}), 99.0);  // unbiased, n = 100
  EXPECT_TRUE(allclose(bn.buffer("running_mean"), mul(mean(x, {0, 2, 3}), 0.1), 1e-5, 1e-6));
  EXPECT_TRUE(allclose(bn.buffer("running_var"), add(mul(batch_var, 0.1), 0.9), 1e-4, 1e-6));
  EXPECT_EQ(bn.buffer("num_batches_tracked").item<int64_t>(), 1);
  // eval uses the running statistics.
  bn.eval();
  Tensor rm = reshape(bn.buffer("running_mean"), {1, 3, 1, 1}), rv = reshape(bn.buffer("running_var"), {1, 3, 1, 1});
  EXPECT_TRUE(allclose(bn(x), div(sub(x, rm), sqrt(add(rv, 1e-5))), 1e-4, 1e-5));
  // Gradients flow to the input and to weight/bias.
  bn.train();
  Tensor xin = randn({6, 3});
  set_requires_grad(xin);
  nn::BatchNorm1d bn1(3);
  backward(sum(mul(bn1(xin), randn({6, 3}))));
  EXPECT_TRUE(grad(xin).defined());
  EXPECT_TRUE(grad(bn1.param("weight")).defined());
  EXPECT_TRUE(allclose(sum(grad(xin), {0}), zeros({3}), 1e-4, 1e-5));  // normalisation removes the mean direction
  expect_error<ValueError>([&] { bn1(randn({1, 3})); }, {"more than 1 value per channel"});
  expect_error<ValueError>([&] { bn1(randn({2, 4})); }, {"BatchNorm1d(3)", "[2, 4]"});
}

}  // namespace
}  // namespace trainrun
