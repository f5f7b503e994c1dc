// SPDX-License-Identifier: BSD-3-Clause
// Data-parallel training with dist::DataParallel (PyTorch's
// DistributedDataParallel design): every rank holds the whole model, runs its
// own rows of each global batch, and the gradients are averaged over the ranks
// before the optimizer step.
//
//   data_parallel                      # a world of one
//   mpirun -np 2 data_parallel         # two ranks, 32 rows each of a 64-row batch
//
// Exits non-zero unless: the ranks end with identical parameters; they equal a
// one-process reference trained on the whole batch (the property that makes
// data parallelism transparent: the mean of equal shards' mean gradients is the
// whole batch's gradient); and the loss ends below 0.01.
#include <remora/distributed/data_parallel.h>
#include <remora/distributed/dist.h>
#include <remora/remora.h>

#include <algorithm>
#include <cstdio>

using namespace remora;
namespace F = remora::nn::functional;

// The regression target: y = x . w + 0.5, w = (1, -2, 0.5, 3) / 2.
static std::pair<Tensor, Tensor> batch(int step, int64_t n) {
  Generator g(uint64_t(1000 + step));  // the same global batch on every rank
  Tensor x = Tensor::randn({n, 4}, DType::f32, Device::cpu(), &g);
  Tensor w = Tensor::from_vector(std::vector<double>{0.5, -1.0, 0.25, 1.5}, {4, 1});
  return {x, x.matmul(w) + 0.5};
}

static std::shared_ptr<nn::Sequential> make_model() {
  return std::make_shared<nn::Sequential>(nn::Linear(4, 32), nn::Tanh(), nn::Linear(32, 1));
}

int main(int argc, char** argv) {
  dist::init(&argc, &argv);
  const int rank = dist::rank(), world = dist::world_size();
  const int64_t global = 64;
  if (global % world != 0) {
    std::fprintf(stderr, "the world size must divide %lld\n", static_cast<long long>(global));
    return 2;
  }
  const int64_t rows = global / world;

  manual_seed(uint64_t(17 + rank));  // different draws per rank: rank 0's weights win
  auto model = make_model();
  dist::DataParallel dp(model);  // broadcasts rank 0's parameters, checks they agree

  // The reference: the same start, trained on the whole batch in this process.
  auto reference = make_model();
  reference->load_state_dict(model->state_dict());

  optim::SGD opt(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  double loss_value = 0;
  for (int step = 0; step < 300; ++step) {
    auto [x, y] = batch(step, global);
    // This rank's rows of the global batch.
    Tensor xs = x.narrow(0, rank * rows, rows).contiguous(), ys = y.narrow(0, rank * rows, rows).contiguous();
    opt.zero_grad();
    Tensor loss = F::mse_loss(model->forward(xs), ys);  // mean over the local rows
    dp.backward(loss);  // loss.backward(), then the gradients averaged over the ranks
    opt.step();

    ref_opt.zero_grad();
    Tensor ref_loss = F::mse_loss(reference->forward(x), y);
    ref_loss.backward();
    ref_opt.step();
    loss_value = ref_loss.item();
  }

  int failures = 0;
  try {
    dist::check_same_parameters(*model, "the trained parameters");
  } catch (const Error& e) {
    std::fprintf(stderr, "FAIL (rank %d): %s\n", rank, e.what());
    ++failures;
  }
  double worst = 0;
  auto mine = model->named_parameters(), ref = reference->named_parameters();
  for (const auto& item : mine) worst = std::max(worst, (item.value() - ref[item.key()]).abs().max().item());
  auto [x, y] = batch(9999, global);
  NoGradGuard no_grad;
  const double final_loss = F::mse_loss(model->forward(x), y).item();
  std::printf("rank %d of %d: final mse %.5f (reference %.5f), max |data parallel - one process| = %.2e\n", rank, world,
              final_loss, loss_value, worst);
  if (!(worst < 1e-4)) std::fprintf(stderr, "FAIL: rank %d differs from the one-process run\n", rank), ++failures;
  if (!(final_loss < 0.01)) std::fprintf(stderr, "FAIL: the loss %.5f is not below 0.01\n", final_loss), ++failures;
  if (failures) return 1;
  if (rank == 0) std::printf("OK\n");
  dist::finalize();
  return 0;
}
