// SPDX-License-Identifier: BSD-3-Clause
// Cases of the StarSaber layer (plain and gated, with padding, w.r.t. h, x
// and every parameter, α != 0; the causal layer) and of the whole model's
// heads w.r.t. every parameter (the model's own tensors, moved to the case's
// device and dtype).
#include <memory>

#include "../core/autograd.h"
#include "../models/starsaber.h"
#include "../ops/ops.h"
#include "cases.h"

namespace remora::cases {

namespace {

// key_padding [3, 4]: row 0 none, row 1 the last position, row 2 all but the
// first (its only real token has no admissible key: a_0 = 0).
Tensor padding(Maker& m) { return m.floats({0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1}, {3, 4}); }

void add_layer_case(const std::string& variant, bool gated, bool scale_scores) {
  const int64_t B = 3, L = 4, d = 3;
  // inputs: h, x, W_b, W_past, W_future, U, b, then alpha (plain) or W_z, b_z
  // (gated), then the key padding.
  add("starsaber_layer", variant,
      [=](Maker& m) {
        Inputs in{m.leaf({B, L, d}), m.leaf({B, L, d}), m.scaled_leaf({d, d}, 0.6), m.scaled_leaf({d, d}, 0.6),
                  m.scaled_leaf({d, d}, 0.6), m.scaled_leaf({d, d}, 0.6), m.scaled_leaf({d}, 0.3)};
        if (gated) {
          in.push_back(m.scaled_leaf({d, 2 * d}, 0.6));
          in.push_back(m.scaled_leaf({d}, 0.3));
        } else {
          // α != 0: at α = 0 the layer is the identity and hides every other path.
          in.push_back(Maker::grad_leaf(m.floats({0.7}, {1})));
        }
        in.push_back(padding(m));
        return in;
      },
      [=](const Inputs& x) {
        return models::starsaber_layer(x[0], x[1], x.back(), x[2], x[3], x[4], x[5], x[6],
                                       gated ? Tensor() : x[7], gated ? x[7] : Tensor(),
                                       gated ? x[8] : Tensor(), scale_scores);
      });
}

// The causal layer (no W_future; keys j < i only), plain, with padding.
void add_causal_layer_case() {
  const int64_t B = 3, L = 4, d = 3;
  add("starsaber_layer", "causal_padding",
      [=](Maker& m) {
        return Inputs{m.leaf({B, L, d}), m.leaf({B, L, d}), m.scaled_leaf({d, d}, 0.6),
                      m.scaled_leaf({d, d}, 0.6), m.scaled_leaf({d, d}, 0.6), m.scaled_leaf({d}, 0.3),
                      Maker::grad_leaf(m.floats({0.7}, {1})), padding(m)};
      },
      [](const Inputs& x) {  // h, x, W_b, W_past, U, b, alpha, padding
        return models::starsaber_layer(x[0], x[1], x[7], x[2], x[3], Tensor(), x[4], x[5], x[6], Tensor(),
                                       Tensor(), true);
      });
}

// The whole model (embeddings, two layers, both heads, mean pooling over real
// tokens) w.r.t. every parameter; the parameters are the model's own tensors.
void add_model_case(bool gated) {
  add_instance("starsaber_model", std::string(gated ? "gated" : "plain") + "_heads", [gated](Maker& mk) {
    models::StarSaberConfig c;
    c.vocab_size = 5;
    c.d_model = 3;
    c.n_layer = 2;
    c.gated = gated;
    c.dropout = 0;
    c.num_classes = 2;
    c.pad_token_id = 0;
    Generator g(gated ? 71 : 70);
    auto model = std::make_shared<models::StarSaber>(c, DType::f64, &g);
    models::StarSaber& m = *model;
    m.eval();
    {
      NoGradGuard ng;
      for (size_t l = 0; l < m.layers->size(); ++l) {
        auto layer = m.layers->at<models::StarSaberLayer>(l);
        if (layer->alpha.defined()) layer->alpha.fill_(0.5 + 0.3 * double(l));
        layer->input->bias.copy_(Tensor::randn({3}, DType::f64, Device::cpu(), &g) * 0.3);
      }
    }
    m.to_(mk.dt);
    m.to_(mk.dev);
    Inputs in = m.parameters();
    in.push_back(mk.ids({1, 2, 3, 4, 4, 3, 0, 0}, {2, 4}));
    in.push_back(mk.ids({1, 1, 1, 1, 1, 1, 0, 0}, {2, 4}));
    GradFn fn = [model](const Inputs& x) {
      const Tensor& ids = x[x.size() - 2];
      const Tensor& mask = x.back();
      models::StarSaber::Output o = model->forward(ids, mask);
      // Token logits at real positions only: a padded position's logits depend on
      // the padding row of the embeddings, which nn::Embedding freezes.
      Tensor real = mask.to(o.token_logits.dtype()).unsqueeze(2);
      return cat({mul(o.token_logits, real).reshape({-1}), o.class_logits.reshape({-1})}, 0);
    };
    return CaseInstance{in, fn};
  });
}

}  // namespace

void register_starsaber_cases() {
  add_layer_case("plain_padding", false, true);
  add_layer_case("plain_padding_unscaled", false, false);
  add_layer_case("gated_padding", true, true);
  add_causal_layer_case();
  add_model_case(false);
  add_model_case(true);
}

}  // namespace remora::cases
