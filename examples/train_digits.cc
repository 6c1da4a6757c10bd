// The main job: a classifier of handwritten digits (the 8x8 images, 1,797 of
// them, that Debian's python3-sklearn ships) trained with DDP on every rank
// trainrun starts:
//   trainrun --nproc-per-node 2 --no-python bazel-bin/examples/train_digits [--epochs N]
// Each rank trains on its shard of the training split (reshuffled every
// epoch, the same way on every rank); gradients are averaged across ranks by
// DistributedDataParallel. It prints the loss per epoch and the held-out
// accuracy, saves a checkpoint (safetensors), reloads it into a fresh model
// and checks that the reloaded model scores the same.
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "c10d/ddp/distributed_data_parallel.h"
#include "c10d/distributed.h"
#include "launcher/error_file.h"
#include "nn/layers.h"
#include "nn/optim/adam.h"
#include "nn/optim/lr_scheduler.h"
#include "tensor/ops.h"

using namespace trainrun;

namespace {

const char* kDigits = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";

// Rows of 64 pixel values (0..16) then the label.
std::pair<Tensor, Tensor> load_digits(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  TR_CHECK(f != nullptr, ValueError, "cannot open {} (install python3-sklearn, which ships it)", path);
  std::vector<float> pixels;
  std::vector<int64_t> labels;
  char line[4096];
  while (gzgets(f, line, sizeof(line)) != nullptr) {
    std::vector<double> row;
    for (char* p = line; *p != '\0' && *p != '\n';) {
      char* end = nullptr;
      row.push_back(std::strtod(p, &end));
      if (end == p) break;
      p = *end == ',' ? end + 1 : end;
    }
    if (row.empty()) continue;
    TR_CHECK(row.size() == 65, ValueError, "{}: a row has {} values, expected 65", path, row.size());
    for (int i = 0; i < 64; ++i) pixels.push_back(static_cast<float>(row[i] / 16.0));
    labels.push_back(static_cast<int64_t>(row[64]));
  }
  gzclose(f);
  const int64_t n = static_cast<int64_t>(labels.size());
  return {tensor<float>(pixels, {n, 64}), tensor<int64_t>(labels, {n})};
}

std::shared_ptr<nn::Sequential> make_model() {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(64, 128), std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(0.1),
      std::make_shared<nn::Linear>(128, 10)});
}

double accuracy(nn::Module& model, const Tensor& x, const Tensor& y) {
  NoGradGuard no_grad;
  model.eval();
  Tensor predicted = argmax(model(x), 1);
  model.train();
  return sum(eq(predicted, y).to(DType::Float64)).item<double>() / static_cast<double>(y.numel());
}

int run(int argc, char** argv) {
  int epochs = 30;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--epochs") == 0) epochs = std::atoi(argv[i + 1]);
  const auto start = std::chrono::steady_clock::now();
  c10d::init_process_group();
  auto group = c10d::default_group();
  const int rank = group->rank(), world = group->size();

  // The same shuffled 80/20 split on every rank.
  auto [images, labels] = load_digits(kDigits);
  const int64_t n = labels.numel(), n_test = n / 5, n_train = n - n_test;
  manual_seed(0);
  Tensor order = std::get<1>(sort(rand({n}), 0));
  Tensor train_x = index_select(images, 0, narrow(order, 0, 0, n_train));
  Tensor train_y = index_select(labels, 0, narrow(order, 0, 0, n_train));
  Tensor test_x = index_select(images, 0, narrow(order, 0, n_train, n_test));
  Tensor test_y = index_select(labels, 0, narrow(order, 0, n_train, n_test));
  if (rank == 0)
    std::printf("digits: %lld training and %lld held-out images, %d ranks\n", static_cast<long long>(n_train),
                static_cast<long long>(n_test), world);

  manual_seed(1 + rank);  // different on purpose: DDP starts every rank from rank 0's weights
  auto net = make_model();
  c10d::DistributedDataParallel model(net, group);
  optim::AdamOptions o;
  o.lr = 3e-3;
  o.weight_decay = 1e-4;
  optim::AdamW opt(model.parameters(), o);
  optim::CosineAnnealingLR schedule(opt, epochs);
  const int64_t batch = 32;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    // Like DistributedSampler: one permutation per epoch, each rank a strided shard.
    manual_seed(100 + epoch);
    Tensor perm = std::get<1>(sort(rand({n_train}), 0));
    Tensor mine = slice(perm, 0, rank, std::nullopt, world);
    manual_seed(1000 * (epoch + 1) + rank);  // dropout masks differ per rank
    double loss_sum = 0;
    int64_t steps = 0;
    for (int64_t b = 0; b + batch <= mine.numel(); b += batch) {
      Tensor idx = narrow(mine, 0, b, batch);
      opt.zero_grad();
      Tensor loss = cross_entropy(model(index_select(train_x, 0, idx)), index_select(train_y, 0, idx));
      backward(loss);
      opt.step();
      loss_sum += loss.item<double>();
      ++steps;
    }
    schedule.step();
    // The mean loss over every rank's steps.
    Tensor stats = tensor<double>({loss_sum, static_cast<double>(steps)}, {2});
    group->allreduce(stats)->wait();
    const double mean_loss = stats.select(0, 0).item<double>() / stats.select(0, 1).item<double>();
    if (rank == 0 && (epoch % 5 == 4 || epoch == 0 || epoch == epochs - 1))
      std::printf("epoch %2d  loss %.4f  held-out accuracy %.4f\n", epoch + 1, mean_loss,
                  accuracy(*net, test_x, test_y));
  }
  const double final_accuracy = accuracy(*net, test_x, test_y);

  // Rank 0 writes the checkpoint; every rank reloads it into a fresh model.
  const std::string checkpoint = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                                 "/trainrun_digits_" + std::getenv("TRAINRUN_RUN_ID") + ".safetensors";
  if (rank == 0) {
    nn::StateDict state = net->state_dict();
    save_safetensors(std::map<std::string, Tensor>(state.begin(), state.end()), checkpoint);
  }
  group->barrier()->wait();
  auto reloaded = make_model();
  auto loaded = load_safetensors(checkpoint);
  reloaded->load_state_dict(nn::StateDict(loaded.begin(), loaded.end()));
  const double reloaded_accuracy = accuracy(*reloaded, test_x, test_y);
  TR_CHECK(reloaded_accuracy == final_accuracy, ValueError,
           "the reloaded checkpoint scores {} but the trained model {}", reloaded_accuracy, final_accuracy);
  group->barrier()->wait();
  if (rank == 0) {
    std::remove(checkpoint.c_str());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("held-out accuracy %.4f after %d epochs on %d ranks in %.1f s; checkpoint reloaded: %.4f\n",
                final_accuracy, epochs, world, seconds, reloaded_accuracy);
    TR_CHECK(final_accuracy >= 0.95, ValueError, "held-out accuracy {} is below the 0.95 this job promises",
             final_accuracy);
  }
  c10d::destroy_process_group();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    record_worker_error(e.what());
    std::fprintf(stderr, "train_digits: %s\n", e.what());
    return 1;
  }
}
