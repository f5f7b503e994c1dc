// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Option builders for layers and optimizers, beside their positional constructors
/// (libtorch's habit):
///
///     optim::AdamW opt(model->parameters(), optim::AdamWOptions(3e-4).weight_decay(0.1));
///     nn::Linear fc(nn::LinearOptions(512, 10).bias(false), DType::f64, &gen);
///     nn::LSTM rnn(nn::LSTMOptions(64, 128).num_layers(2).dropout(0.1));
///
/// Each option has a setter that returns the options (to chain) and a getter of the
/// same name; the defaults are the positional constructors' defaults. The dtype and
/// generator stay constructor arguments, as in the positional forms. The values are
/// checked when a layer or an optimizer takes the options (a remora::Error names
/// the bad one), not by the setters.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

/// REMORA_ARG(T, name): a chained setter name(v), a getter name() and a private
/// member name_ of type T that holds the value.
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

/// Options of nn::Linear (torch::nn::LinearOptions).
struct LinearOptions {
  /// Both widths are required; bias defaults to true.
  LinearOptions(int64_t in_features, int64_t out_features) : in_features_(in_features), out_features_(out_features) {}
  /// Width of the input's last dim (> 0); weight is [out_features, in_features].
  REMORA_ARG(int64_t, in_features);
  /// \fn in_features() const
  /// \copybrief in_features(const int64_t&)

  /// Width of the output's last dim (> 0).
  REMORA_ARG(int64_t, out_features);
  /// \fn out_features() const
  /// \copybrief out_features(const int64_t&)

  /// Whether the layer adds a learned bias [out_features] (default true).
  REMORA_ARG(bool, bias) = true;
  /// \fn bias() const
  /// \copybrief bias(const bool&)
};

/// Options of nn::Embedding (torch::nn::EmbeddingOptions; no max_norm,
/// scale_grad_by_freq or sparse).
struct EmbeddingOptions {
  /// Both sizes are required; padding_idx defaults to -1 (none).
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  /// Number of rows of the table, the vocabulary size V (> 0).
  REMORA_ARG(int64_t, num_embeddings);
  /// \fn num_embeddings() const
  /// \copybrief num_embeddings(const int64_t&)

  /// Width of each row (> 0).
  REMORA_ARG(int64_t, embedding_dim);
  /// \fn embedding_dim() const
  /// \copybrief embedding_dim(const int64_t&)

  /// A row in [0, num_embeddings) that starts at zero and gets no gradient, or -1
  /// (default) for none. Other negative values are an Error (torch counts them
  /// from the end).
  REMORA_ARG(int64_t, padding_idx) = -1;  // -1: none
  /// \fn padding_idx() const
  /// \copybrief padding_idx(const int64_t&)
};

/// Options of nn::LayerNorm (torch::nn::LayerNormOptions with a normalized_shape
/// of one dim, and elementwise_affine always on).
struct LayerNormOptions {
  /// The normalised width d is required; eps defaults to 1e-5.
  explicit LayerNormOptions(int64_t d) : d_(d) {}
  /// Width d of the normalised last dim (> 0).
  REMORA_ARG(int64_t, d);
  /// \fn d() const
  /// \copybrief d(const int64_t&)

  /// Added to the variance before the square root (default 1e-5).
  REMORA_ARG(double, eps) = 1e-5;
  /// \fn eps() const
  /// \copybrief eps(const double&)
};

/// Options of nn::Dropout (torch::nn::DropoutOptions without inplace).
struct DropoutOptions {
  /// p defaults to 0.5.
  explicit DropoutOptions(double p = 0.5) : p_(p) {}
  /// Probability of zeroing an element, in [0, 1) (default 0.5); p = 1 is an
  /// Error, where torch zeroes everything.
  REMORA_ARG(double, p);
  /// \fn p() const
  /// \copybrief p(const double&)
};

/// Options of nn::FeedForward (Remora's Transformer feed-forward block; torch has
/// no such layer).
struct FeedForwardOptions {
  /// Both widths are required; dropout defaults to 0 and activation to "relu".
  FeedForwardOptions(int64_t d, int64_t d_inner) : d_(d), d_inner_(d_inner) {}
  /// Model width d: the input and output are [..., d] (> 0).
  REMORA_ARG(int64_t, d);
  /// \fn d() const
  /// \copybrief d(const int64_t&)

  /// Inner width: fc1 maps d to d_inner, fc2 maps d_inner back to d (> 0).
  REMORA_ARG(int64_t, d_inner);
  /// \fn d_inner() const
  /// \copybrief d_inner(const int64_t&)

  /// Dropout probability after the activation, in [0, 1) (default 0).
  REMORA_ARG(double, dropout) = 0;
  /// \fn dropout() const
  /// \copybrief dropout(const double&)

  /// "relu" (default) or "gelu" (exact, erf); another name is an Error when the
  /// layer is built.
  REMORA_ARG(std::string, activation) = "relu";  // relu | gelu
  /// \fn activation() const
  /// \copybrief activation(const std::string&)
};

/// Options of nn::RNN (torch::nn::RNNOptions). The layer is always batch first
/// and one-directional: there is no batch_first or bidirectional option.
struct RNNOptions {
  /// Both sizes are required; the rest default to one tanh layer with biases and
  /// no dropout.
  RNNOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  /// Width I of the input's last dim (> 0).
  REMORA_ARG(int64_t, input_size);
  /// \fn input_size() const
  /// \copybrief input_size(const int64_t&)

  /// Width H of the hidden state (> 0).
  REMORA_ARG(int64_t, hidden_size);
  /// \fn hidden_size() const
  /// \copybrief hidden_size(const int64_t&)

  /// Number of stacked layers n (> 0, default 1).
  REMORA_ARG(int64_t, num_layers) = 1;
  /// \fn num_layers() const
  /// \copybrief num_layers(const int64_t&)

  /// "tanh" (default) or "relu"; another name is an Error when the layer is built.
  REMORA_ARG(std::string, nonlinearity) = "tanh";  // tanh | relu
  /// \fn nonlinearity() const
  /// \copybrief nonlinearity(const std::string&)

  /// Whether each layer has bias_ih and bias_hh (default true).
  REMORA_ARG(bool, bias) = true;
  /// \fn bias() const
  /// \copybrief bias(const bool&)

  /// Dropout probability on the output of every layer but the last, in training
  /// mode, in [0, 1) (default 0).
  REMORA_ARG(double, dropout) = 0;
  /// \fn dropout() const
  /// \copybrief dropout(const double&)
};

/// Options of nn::LSTM (torch::nn::LSTMOptions). The layer is always batch first
/// and one-directional; there is no batch_first, bidirectional or proj_size.
struct LSTMOptions {
  /// Both sizes are required; the rest default to one layer with biases and no
  /// dropout.
  LSTMOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  /// Width I of the input's last dim (> 0).
  REMORA_ARG(int64_t, input_size);
  /// \fn input_size() const
  /// \copybrief input_size(const int64_t&)

  /// Width H of the hidden and cell states (> 0).
  REMORA_ARG(int64_t, hidden_size);
  /// \fn hidden_size() const
  /// \copybrief hidden_size(const int64_t&)

  /// Number of stacked layers n (> 0, default 1).
  REMORA_ARG(int64_t, num_layers) = 1;
  /// \fn num_layers() const
  /// \copybrief num_layers(const int64_t&)

  /// Whether each layer has bias_ih and bias_hh (default true).
  REMORA_ARG(bool, bias) = true;
  /// \fn bias() const
  /// \copybrief bias(const bool&)

  /// Dropout probability on the output of every layer but the last, in training
  /// mode, in [0, 1) (default 0).
  REMORA_ARG(double, dropout) = 0;
  /// \fn dropout() const
  /// \copybrief dropout(const double&)
};

}  // namespace nn

namespace optim {

/// The base of every optimizer's options (torch::optim::OptimizerOptions): what a
/// parameter group holds, so a scheduler can read and set its learning rate.
struct OptimizerOptions {
  virtual ~OptimizerOptions() = default;
  /// The learning rate.
  virtual double get_lr() const = 0;
  /// Sets the learning rate. Not checked here: a negative rate is an Error when
  /// an optimizer applies the options.
  virtual void set_lr(double lr) = 0;
  /// A copy of the same options class.
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
};

/// get_lr / set_lr / clone of an options class whose learning rate is lr_.
#define REMORA_OPTIMIZER_OPTIONS(Name)                                                                 \
 public:                                                                                               \
  double get_lr() const override { return lr_; }                                                       \
  void set_lr(double v) override { lr_ = v; }                                                          \
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<Name>(*this); }

/// Options of optim::SGD (torch::optim::SGDOptions). The learning rate has no
/// default, as in torch.
struct SGDOptions : OptimizerOptions {
  /// lr is required; the rest default to plain SGD (no momentum, no decay).
  explicit SGDOptions(double lr) : lr_(lr) {}
  REMORA_OPTIMIZER_OPTIONS(SGDOptions)
  /// Learning rate (>= 0).
  REMORA_ARG(double, lr);
  /// \fn lr() const
  /// \copybrief lr(const double&)

  /// Momentum factor (>= 0; default 0, no momentum buffer).
  REMORA_ARG(double, momentum) = 0;
  /// \fn momentum() const
  /// \copybrief momentum(const double&)

  /// Dampening of the momentum: buf = momentum * buf + (1 - dampening) * d (default 0).
  REMORA_ARG(double, dampening) = 0;
  /// \fn dampening() const
  /// \copybrief dampening(const double&)

  /// L2 penalty added to the gradient, g + weight_decay * p (>= 0, default 0).
  REMORA_ARG(double, weight_decay) = 0;
  /// \fn weight_decay() const
  /// \copybrief weight_decay(const double&)

  /// Nesterov momentum (default false); needs momentum > 0 and dampening = 0.
  REMORA_ARG(bool, nesterov) = false;
  /// \fn nesterov() const
  /// \copybrief nesterov(const bool&)
};

/// Options of optim::Adam (torch::optim::AdamOptions; no amsgrad).
struct AdamOptions : OptimizerOptions {
  /// lr defaults to 1e-3.
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  REMORA_OPTIMIZER_OPTIONS(AdamOptions)
  /// Learning rate (>= 0, default 1e-3).
  REMORA_ARG(double, lr);
  /// \fn lr() const
  /// \copybrief lr(const double&)

  /// Decay of the first-moment average, in [0, 1) (default 0.9).
  REMORA_ARG(double, beta1) = 0.9;
  /// \fn beta1() const
  /// \copybrief beta1(const double&)

  /// Decay of the second-moment average, in [0, 1) (default 0.999).
  REMORA_ARG(double, beta2) = 0.999;
  /// \fn beta2() const
  /// \copybrief beta2(const double&)

  /// Added to the bias-corrected sqrt(v) in the denominator (>= 0, default 1e-8).
  REMORA_ARG(double, eps) = 1e-8;
  /// \fn eps() const
  /// \copybrief eps(const double&)

  /// L2 penalty added to the gradient, g + weight_decay * p (>= 0, default 0).
  REMORA_ARG(double, weight_decay) = 0;
  /// \fn weight_decay() const
  /// \copybrief weight_decay(const double&)

 public:
  /// Sets beta1 and beta2.
  AdamOptions& betas(double b1, double b2) {
    beta1_ = b1;
    beta2_ = b2;
    return *this;
  }
  /// torch's spelling: betas({0.9, 0.98}).
  AdamOptions& betas(const std::tuple<double, double>& b) { return betas(std::get<0>(b), std::get<1>(b)); }
  /// (beta1, beta2).
  std::tuple<double, double> betas() const { return {beta1_, beta2_}; }
};

/// Options of optim::AdamW (torch::optim::AdamWOptions; no amsgrad): AdamOptions
/// with AdamW's default weight decay (0.01, decoupled).
struct AdamWOptions : OptimizerOptions {
  /// lr defaults to 1e-3.
  explicit AdamWOptions(double lr = 1e-3) : lr_(lr) {}
  REMORA_OPTIMIZER_OPTIONS(AdamWOptions)
  /// Learning rate (>= 0, default 1e-3).
  REMORA_ARG(double, lr);
  /// \fn lr() const
  /// \copybrief lr(const double&)

  /// Decay of the first-moment average, in [0, 1) (default 0.9).
  REMORA_ARG(double, beta1) = 0.9;
  /// \fn beta1() const
  /// \copybrief beta1(const double&)

  /// Decay of the second-moment average, in [0, 1) (default 0.999).
  REMORA_ARG(double, beta2) = 0.999;
  /// \fn beta2() const
  /// \copybrief beta2(const double&)

  /// Added to the bias-corrected sqrt(v) in the denominator (>= 0, default 1e-8).
  REMORA_ARG(double, eps) = 1e-8;
  /// \fn eps() const
  /// \copybrief eps(const double&)

  /// Decoupled weight decay: p *= 1 - lr * weight_decay before each update
  /// (>= 0, default 0.01).
  REMORA_ARG(double, weight_decay) = 0.01;
  /// \fn weight_decay() const
  /// \copybrief weight_decay(const double&)

 public:
  /// Sets beta1 and beta2.
  AdamWOptions& betas(double b1, double b2) {
    beta1_ = b1;
    beta2_ = b2;
    return *this;
  }
  /// torch's spelling: betas({0.9, 0.98}).
  AdamWOptions& betas(const std::tuple<double, double>& b) { return betas(std::get<0>(b), std::get<1>(b)); }
  /// (beta1, beta2).
  std::tuple<double, double> betas() const { return {beta1_, beta2_}; }
};

/// Options of optim::RAdam (torch.optim.RAdam's arguments; libtorch has no RAdam).
struct RAdamOptions : OptimizerOptions {
  /// lr defaults to 1e-3.
  explicit RAdamOptions(double lr = 1e-3) : lr_(lr) {}
  REMORA_OPTIMIZER_OPTIONS(RAdamOptions)
  /// Learning rate (>= 0, default 1e-3).
  REMORA_ARG(double, lr);
  /// \fn lr() const
  /// \copybrief lr(const double&)

  /// Decay of the first-moment average, in [0, 1) (default 0.9).
  REMORA_ARG(double, beta1) = 0.9;
  /// \fn beta1() const
  /// \copybrief beta1(const double&)

  /// Decay of the second-moment average, in [0, 1) (default 0.999).
  REMORA_ARG(double, beta2) = 0.999;
  /// \fn beta2() const
  /// \copybrief beta2(const double&)

  /// Added to sqrt(v) in the rectified step's denominator, before the bias
  /// correction (>= 0, default 1e-8).
  REMORA_ARG(double, eps) = 1e-8;
  /// \fn eps() const
  /// \copybrief eps(const double&)

  /// Weight decay factor (>= 0, default 0): an L2 penalty added to the gradient,
  /// g + weight_decay * p, or with decoupled_weight_decay p *= 1 - lr * weight_decay
  /// before the update.
  REMORA_ARG(double, weight_decay) = 0;
  /// \fn weight_decay() const
  /// \copybrief weight_decay(const double&)

  /// Apply weight_decay as AdamW does, p *= 1 - lr * weight_decay before the
  /// update (the original RAdam code), instead of as an L2 penalty on the
  /// gradient (default false).
  REMORA_ARG(bool, decoupled_weight_decay) = false;
  /// \fn decoupled_weight_decay() const
  /// \copybrief decoupled_weight_decay(const bool&)

 public:
  /// Sets beta1 and beta2.
  RAdamOptions& betas(double b1, double b2) {
    beta1_ = b1;
    beta2_ = b2;
    return *this;
  }
  /// torch's spelling: betas({0.9, 0.98}).
  RAdamOptions& betas(const std::tuple<double, double>& b) { return betas(std::get<0>(b), std::get<1>(b)); }
  /// (beta1, beta2).
  std::tuple<double, double> betas() const { return {beta1_, beta2_}; }
};

/// Options of optim::RMSprop (torch::optim::RMSpropOptions).
struct RMSpropOptions : OptimizerOptions {
  /// lr defaults to 1e-2.
  explicit RMSpropOptions(double lr = 1e-2) : lr_(lr) {}
  REMORA_OPTIMIZER_OPTIONS(RMSpropOptions)
  /// Learning rate (>= 0, default 1e-2).
  REMORA_ARG(double, lr);
  /// \fn lr() const
  /// \copybrief lr(const double&)

  /// Decay of the squared-gradient average, in [0, 1] (default 0.99).
  REMORA_ARG(double, alpha) = 0.99;
  /// \fn alpha() const
  /// \copybrief alpha(const double&)

  /// Added to the denominator after the square root (>= 0, default 1e-8).
  REMORA_ARG(double, eps) = 1e-8;
  /// \fn eps() const
  /// \copybrief eps(const double&)

  /// L2 penalty added to the gradient, g + weight_decay * p (>= 0, default 0).
  REMORA_ARG(double, weight_decay) = 0;
  /// \fn weight_decay() const
  /// \copybrief weight_decay(const double&)

  /// Momentum factor (>= 0, default 0). Every parameter group must agree on
  /// whether it is > 0.
  REMORA_ARG(double, momentum) = 0;
  /// \fn momentum() const
  /// \copybrief momentum(const double&)

  /// Normalise by an estimate of the variance, v - avg(g)^2, instead of v
  /// (default false). Every parameter group must agree on it.
  REMORA_ARG(bool, centered) = false;
  /// \fn centered() const
  /// \copybrief centered(const bool&)
};

}  // namespace optim
}  // namespace remora
