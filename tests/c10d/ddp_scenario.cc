// The "ddp" scenario of c10d_worker: DistributedDataParallel against one
// process on the concatenated batch, no_sync, gradient_as_bucket_view with
// the fp16 hook, unused parameters, and ranks whose models differ.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "c10d/ddp/distributed_data_parallel.h"
#include "c10d/distributed.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "tests/c10d/worker_checks.h"

namespace trainrun {
namespace c10d {
namespace {

// A model whose second layer is used only when asked (for find_unused_parameters).
class Branchy : public nn::Module {
 public:
  Branchy() : nn::Module("Branchy") {
    a = register_module("a", std::make_shared<nn::Linear>(6, 4));
    b = register_module("b", std::make_shared<nn::Linear>(4, 4));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = (*a)(x);
    return use_b ? (*b)(h) : h;
  }
  std::shared_ptr<nn::Linear> a, b;
  bool use_b = true;
};

std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed, int64_t hidden = 32) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(
      std::vector<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(10, hidden), std::make_shared<nn::ReLU>(),
                                               std::make_shared<nn::Linear>(hidden, hidden),
                                               std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(hidden, 3)});
}

// Rank r's batch (every rank can build every rank's).
std::pair<Tensor, Tensor> batch_of(int r, int step) {
  manual_seed(1000 + 10 * r + step);
  return {randn({8, 10}), randint(0, 3, {8})};
}

void expect_grads_close(nn::Module& ddp_inner, nn::Module& ref, double tol, const std::string& what) {
  auto a = ddp_inner.named_parameters(), b = ref.named_parameters();
  expect(a.size() == b.size(), what + ": parameter count");
  for (size_t i = 0; i < a.size(); ++i)
    expect(allclose(grad(a[i].second), grad(b[i].second), tol, tol),
           fmt::format("{}: gradient of {} differs", what, a[i].first));
}

}  // namespace

void ddp_scenario() {
  auto pg = default_group();
  // Ranks start from different weights; DDP takes rank 0's.
  auto net = make_mlp(7 + g_rank);
  DDPOptions o;
  o.bucket_cap_mb = 0.002;  // several buckets (the hidden layer alone is 4 KiB)
  o.first_bucket_mb = 0.001;
  DistributedDataParallel model(net, pg, o);
  expect(model.reducer().bucket_indices().size() >= 3, "several buckets");
  auto ref = make_mlp(7);  // rank 0's initial weights
  for (size_t i = 0; i < net->parameters().size(); ++i)
    expect(allclose(net->parameters()[i], ref->parameters()[i]), "parameters broadcast from rank 0");
  expect(model.named_parameters()[0].first == "module.0.weight", "state_dict keys under module.");

  // Gradients equal those of one process on the concatenated batch.
  for (int step = 0; step < 2; ++step) {
    model.zero_grad();
    ref->zero_grad();
    auto [x, y] = batch_of(g_rank, step);
    backward(cross_entropy(model(x), y));
    std::vector<Tensor> xs, ys;
    for (int r = 0; r < g_world; ++r) {
      auto [xr, yr] = batch_of(r, step);
      xs.push_back(xr);
      ys.push_back(yr);
    }
    backward(cross_entropy((*ref)(cat(xs, 0)), cat(ys, 0)));
    expect_grads_close(*net, *ref, 1e-5, fmt::format("DDP step {}", step));
  }

  // no_sync: the first micro-batch accumulates locally, the second syncs both.
  model.zero_grad();
  ref->zero_grad();
  {
    auto guard = model.no_sync();
    auto [x, y] = batch_of(g_rank, 5);
    backward(cross_entropy(model(x), y));
  }
  auto [x6, y6] = batch_of(g_rank, 6);
  backward(cross_entropy(model(x6), y6));
  for (int r = 0; r < g_world; ++r)
    for (int step : {5, 6}) {
      auto [xr, yr] = batch_of(r, step);
      backward(div(cross_entropy((*ref)(xr), yr), static_cast<double>(g_world)));
    }
  expect_grads_close(*net, *ref, 1e-5, "no_sync accumulation");

  // Buckets follow the parameters in reverse (the order backward produces
  // their gradients), and the first all-reduce starts while backward is still
  // working: before the first layer's weight, the last gradient computed, has
  // one. That overlap is what DDP's buckets exist for.
  {
    const auto buckets = model.reducer().bucket_indices();
    const size_t last_param = net->parameters().size() - 1;
    expect(std::find(buckets.front().begin(), buckets.front().end(), last_param) != buckets.front().end(),
           "the first bucket holds the last parameter");
    expect(std::find(buckets.back().begin(), buckets.back().end(), size_t{0}) != buckets.back().end(),
           "the last bucket holds the first parameter");
    for (size_t b = 1; b < buckets.size(); ++b)
      expect(*std::min_element(buckets[b - 1].begin(), buckets[b - 1].end()) >
                 *std::max_element(buckets[b].begin(), buckets[b].end()),
             "buckets in reverse parameter order");
    auto first_weight_done = std::make_shared<bool>(false);
    auto seen_at_launch = std::make_shared<std::vector<bool>>();
    register_hook(net->parameters()[0], [first_weight_done](const Tensor& g) {
      *first_weight_done = true;
      return g;
    });
    model.register_comm_hook([first_weight_done, seen_at_launch](ProcessGroup& group, Tensor& bucket) {
      seen_at_launch->push_back(*first_weight_done);
      return group.allreduce(bucket, ReduceOp::AVG);
    });
    model.zero_grad();
    auto [x, y] = batch_of(g_rank, 9);
    backward(cross_entropy(model(x), y));
    expect(seen_at_launch->size() == buckets.size(), "one launch per bucket");
    expect(!seen_at_launch->empty() && !seen_at_launch->front(),
           "the first bucket's all-reduce started before backward reached the first layer");
    expect(*first_weight_done, "the first layer's gradient was computed");
  }

  // gradient_as_bucket_view and the fp16 compression hook.
  {
    auto net2 = make_mlp(3);
    DDPOptions v;
    v.gradient_as_bucket_view = true;
    DistributedDataParallel m2(net2, pg, v);
    m2.register_comm_hook(fp16_compress_hook());
    auto ref2 = make_mlp(3);
    for (int step = 0; step < 2; ++step) {
      m2.zero_grad(/*set_to_none=*/false);
      ref2->zero_grad();
      auto [x, y] = batch_of(g_rank, step);
      backward(cross_entropy(m2(x), y));
      std::vector<Tensor> xs, ys;
      for (int r = 0; r < g_world; ++r) {
        auto [xr, yr] = batch_of(r, step);
        xs.push_back(xr);
        ys.push_back(yr);
      }
      backward(cross_entropy((*ref2)(cat(xs, 0)), cat(ys, 0)));
      expect_grads_close(*net2, *ref2, 2e-3, "fp16-compressed DDP");
    }
  }

  // Unused parameters: an error naming them, unless find_unused_parameters.
  {
    auto br = std::make_shared<Branchy>();
    DistributedDataParallel strict(br, pg);
    br->use_b = false;
    try {
      backward(sum(strict(ones({2, 6}))));
      fail("a step without b's gradients was accepted");
    } catch (const ValueError& e) {
      expect(std::strstr(e.what(), "module.b.weight") != nullptr || std::strstr(e.what(), "b.weight") != nullptr,
             e.what());
    }
    auto br2 = std::make_shared<Branchy>();
    DDPOptions f;
    f.find_unused_parameters = true;
    DistributedDataParallel lenient(br2, pg, f);
    br2->use_b = g_rank % 2 == 0;  // used on some ranks only
    backward(sum(lenient(ones({2, 6}))));
    expect(grad(br2->a->param("weight")).defined(), "used parameters get gradients");
    if (g_rank % 2 == 0) {
      // b's gradient averages this rank's with the zeros of the ranks that did not use it.
      const int users = (g_world + 1) / 2;
      Tensor local = full({4}, 2.0);  // d sum / d b.bias = batch size
      expect(allclose(grad(br2->b->param("bias")), mul(local, static_cast<double>(users) / g_world)),
             "a parameter unused on some ranks averages with zeros");
    }
  }

  // Ranks whose models differ are told so.
  try {
    auto odd = make_mlp(1, g_rank == 0 ? 32 : 16);
    DistributedDataParallel bad(odd, pg);
    fail("DDP accepted different models");
  } catch (const ValueError& e) {
    expect(std::strstr(e.what(), "model differs from rank 0's") != nullptr, e.what());
  }
  pg->barrier()->wait();
}

}  // namespace c10d
}  // namespace trainrun
