// SPDX-License-Identifier: BSD-3-Clause
// Option builders for layers and optimizers, beside their positional constructors
// (libtorch's habit):
//
//   optim::AdamW opt(model->parameters(), optim::AdamWOptions(3e-4).weight_decay(0.1));
//   nn::Linear fc(nn::LinearOptions(512, 10).bias(false), DType::f64, &gen);
//   nn::LSTM rnn(nn::LSTMOptions(64, 128).num_layers(2).dropout(0.1));
//
// Each option has a setter that returns the options (to chain) and a getter of the
// same name; the defaults are the positional constructors' defaults. The dtype and
// generator stay constructor arguments, as in the positional forms.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

// REMORA_ARG(T, name): a chained setter name(v), a getter name() and a member name##_.
#define REMORA_ARG(T, name)                    \
 public:                                       \
  auto& name(const T& new_value) {             \
    name##_ = new_value;                       \
    return *this;                              \
  }                                            \
  const T& name() const { return name##_; }    \
                                               \
 private:                                      \
  T name##_

namespace remora {
namespace nn {

struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features) : in_features_(in_features), out_features_(out_features) {}
  REMORA_ARG(int64_t, in_features);
  REMORA_ARG(int64_t, out_features);
  REMORA_ARG(bool, bias) = true;
};

struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  REMORA_ARG(int64_t, num_embeddings);
  REMORA_ARG(int64_t, embedding_dim);
  REMORA_ARG(int64_t, padding_idx) = -1;  // -1: none
};

struct LayerNormOptions {
  explicit LayerNormOptions(int64_t d) : d_(d) {}
  REMORA_ARG(int64_t, d);
  REMORA_ARG(double, eps) = 1e-5;
};

struct DropoutOptions {
  explicit DropoutOptions(double p = 0.5) : p_(p) {}
  REMORA_ARG(double, p);
};

struct FeedForwardOptions {
  FeedForwardOptions(int64_t d, int64_t d_inner) : d_(d), d_inner_(d_inner) {}
  REMORA_ARG(int64_t, d);
  REMORA_ARG(int64_t, d_inner);
  REMORA_ARG(double, dropout) = 0;
  REMORA_ARG(std::string, activation) = "relu";  // relu | gelu
};

struct RNNOptions {
  RNNOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  REMORA_ARG(int64_t, input_size);
  REMORA_ARG(int64_t, hidden_size);
  REMORA_ARG(int64_t, num_layers) = 1;
  REMORA_ARG(std::string, nonlinearity) = "tanh";  // tanh | relu
  REMORA_ARG(bool, bias) = true;
  REMORA_ARG(double, dropout) = 0;
};

struct LSTMOptions {
  LSTMOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  REMORA_ARG(int64_t, input_size);
  REMORA_ARG(int64_t, hidden_size);
  REMORA_ARG(int64_t, num_layers) = 1;
  REMORA_ARG(bool, bias) = true;
  REMORA_ARG(double, dropout) = 0;
};

}  // namespace nn

namespace optim {

/// The base of every optimizer's options (torch::optim::OptimizerOptions): what a
/// parameter group holds, so a scheduler can read and set its learning rate.
struct OptimizerOptions {
  virtual ~OptimizerOptions() = default;
  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
};

// get_lr / set_lr / clone of an options class whose learning rate is lr_.
#define REMORA_OPTIMIZER_OPTIONS(Name)                                                                 \
 public:                                                                                               \
  double get_lr() const override { return lr_; }                                                       \
  void set_lr(double v) override { lr_ = v; }                                                          \
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<Name>(*this); }

struct SGDOptions : OptimizerOptions {
  explicit SGDOptions(double lr) : lr_(lr) {}
  REMORA_OPTIMIZER_OPTIONS(SGDOptions)
  REMORA_ARG(double, lr);
  REMORA_ARG(double, momentum) = 0;
  REMORA_ARG(double, dampening) = 0;
  REMORA_ARG(double, weight_decay) = 0;
  REMORA_ARG(bool, nesterov) = false;
};

struct AdamOptions : OptimizerOptions {
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  REMORA_OPTIMIZER_OPTIONS(AdamOptions)
  REMORA_ARG(double, lr);
  REMORA_ARG(double, beta1) = 0.9;
  REMORA_ARG(double, beta2) = 0.999;
  REMORA_ARG(double, eps) = 1e-8;
  REMORA_ARG(double, weight_decay) = 0;

 public:
  AdamOptions& betas(double b1, double b2) {
    beta1_ = b1;
    beta2_ = b2;
    return *this;
  }
  /// torch's spelling: betas({0.9, 0.98}).
  AdamOptions& betas(const std::tuple<double, double>& b) { return betas(std::get<0>(b), std::get<1>(b)); }
  std::tuple<double, double> betas() const { return {beta1_, beta2_}; }
};

/// AdamOptions with AdamW's default weight decay (0.01, decoupled).
struct AdamWOptions : OptimizerOptions {
  explicit AdamWOptions(double lr = 1e-3) : lr_(lr) {}
  REMORA_OPTIMIZER_OPTIONS(AdamWOptions)
  REMORA_ARG(double, lr);
  REMORA_ARG(double, beta1) = 0.9;
  REMORA_ARG(double, beta2) = 0.999;
  REMORA_ARG(double, eps) = 1e-8;
  REMORA_ARG(double, weight_decay) = 0.01;

 public:
  AdamWOptions& betas(double b1, double b2) {
    beta1_ = b1;
    beta2_ = b2;
    return *this;
  }
  AdamWOptions& betas(const std::tuple<double, double>& b) { return betas(std::get<0>(b), std::get<1>(b)); }
  std::tuple<double, double> betas() const { return {beta1_, beta2_}; }
};

struct RMSpropOptions : OptimizerOptions {
  explicit RMSpropOptions(double lr = 1e-2) : lr_(lr) {}
  REMORA_OPTIMIZER_OPTIONS(RMSpropOptions)
  REMORA_ARG(double, lr);
  REMORA_ARG(double, alpha) = 0.99;
  REMORA_ARG(double, eps) = 1e-8;
  REMORA_ARG(double, weight_decay) = 0;
  REMORA_ARG(double, momentum) = 0;
  REMORA_ARG(bool, centered) = false;
};

}  // namespace optim
}  // namespace remora
