// [models_parity]: every model type trains 20 steps on a device from the same
// weights and the same data as on the CPU, dropout 0: the losses agree to
// 1e-4 relative at every step (issue 11 §1). Weights are drawn once in f64 on
// the CPU and converted (Module::to_), data comes from a fixed seed, the
// optimizer is SGD with momentum (Adam would turn rounding-level gradients
// into full-size steps and make the comparison measure noise).
//
// Without a GPU the device part says so in a WARN and returns; the harness is
// proven here by the same run in f32 against f64 on the CPU, which must agree
// to the same tolerance (so the tolerance is met by f32 rounding alone), and
// by a perturbed run that it must reject.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <remora/remora.h>

#include "../models/bert.h"
#include "../models/relrnn.h"
#include "../models/srupp.h"
#include "../models/starsaber.h"
#include "../models/transformer_xl.h"
#include "../ops/cases/backend_compare.h"

using namespace remora;
using namespace remora::models;

namespace {

constexpr int kSteps = 20;
constexpr double kRel = 1e-4;
constexpr int64_t kV = 37, kB = 2, kL = 12;

RemSpec rem(bool masked) {
  RemSpec s;
  s.regular = 1;
  s.cyclic = 1;
  s.masked = masked;
  return s;
}

// One model type: builds the model (f64 on the CPU), and computes one step's
// loss from (model, step's ids, state carried from the previous step).
struct ModelKind {
  std::string name;
  std::function<std::shared_ptr<nn::Module>(Generator&)> build;
  // Returns the loss; may update *state (sequence models carry memories).
  std::function<Tensor(nn::Module&, const Tensor& ids, const Tensor& targets, SequenceState* state)> loss;
};

Tensor lm_loss(nn::Module& m, const Tensor& ids, const Tensor& targets, SequenceState* st) {
  SequenceOutput o = static_cast<SequenceModel&>(m).run(ids, *st);
  *st = o.state;
  const int64_t V = o.logits.size(-1);
  return cross_entropy(o.logits.reshape({-1, V}), targets.reshape({-1}));
}

std::vector<ModelKind> kinds() {
  std::vector<ModelKind> out;
  for (const char* att : {"softmax", "rsa"}) {
    out.push_back({std::string("xl_") + att + "_memory",
                   [att](Generator& g) {
                     XLConfig c;
                     c.n_token = kV;
                     c.n_layer = 2;
                     c.n_head = 4;
                     c.d_model = 16;
                     c.d_inner = 32;
                     c.mem_len = 8;
                     c.dropout = 0;
                     c.dropatt = 0;
                     c.attention = att;
                     if (std::string(att) == "rsa") {
                       c.rem = rem(true);
                       c.carry = true;  // the REM scan state crosses segments too
                     }
                     return std::make_shared<TransformerXL>(c, DType::f64, &g);
                   },
                   lm_loss});
  }
  for (const char* att : {"softmax", "rsa"}) {
    out.push_back({std::string("bert_") + att,
                   [att](Generator& g) {
                     BertConfig c;
                     c.vocab_size = kV;
                     c.hidden_size = 16;
                     c.num_hidden_layers = 2;
                     c.num_attention_heads = 4;
                     c.intermediate_size = 32;
                     c.max_position_embeddings = 32;
                     c.hidden_dropout_prob = 0;
                     c.attention_probs_dropout_prob = 0;
                     c.attention = att;
                     if (std::string(att) == "rsa") c.rem = rem(false);
                     return std::make_shared<BertForMaskedLM>(c, DType::f64, &g);
                   },
                   [](nn::Module& m, const Tensor& ids, const Tensor& targets, SequenceState*) {
                     // Padding at the end of sequence 1; labels at every third real position.
                     Tensor am = Tensor::ones({kB, kL}, DType::i64, ids.device());
                     am.select(0, 1).slice(0, kL - 3, kL).fill_(0);
                     Tensor keep = Tensor::from_vector(std::vector<int64_t>{1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0,
                                                                            0, 1, 0, 0, 1, 0, 0, 0, 0},
                                                       {kB, kL}, DType::i64)
                                        .to(ids.device());
                     Tensor labels = where(keep, targets, Tensor::full({kB, kL}, -100, DType::i64, ids.device()));
                     Tensor logits = static_cast<EncoderModel&>(m).token_logits(ids, am);
                     return BertForMaskedLM::mlm_loss(logits, labels);
                   }});
  }
  out.push_back({"srupp_memory",
                 [](Generator& g) {
                   SRUppConfig c;
                   c.n_token = kV;
                   c.d_model = 16;
                   c.d_attn = 8;
                   c.n_layer = 2;
                   c.dropout = 0;
                   c.attn_dropout = 0;
                   c.mem_len = 8;
                   return std::make_shared<SRUppLM>(c, DType::f64, &g);
                 },
                 lm_loss});
  out.push_back({"starsaber_causal",
                 [](Generator& g) {
                   StarSaberConfig c;
                   c.vocab_size = kV;
                   c.d_model = 16;
                   c.n_layer = 2;
                   c.causal = true;
                   c.dropout = 0;
                   return std::make_shared<StarSaberLM>(c, DType::f64, &g);
                 },
                 lm_loss});
  for (const char* type : {"rnn", "lstm", "relrnn", "rellstm"}) {
    out.push_back({std::string("recurrent_") + type,
                   [type](Generator& g) {
                     RecurrentConfig c;
                     c.type = type;
                     c.n_token = kV;
                     c.d_model = 16;
                     c.n_layer = c.screened() ? 1 : 2;
                     c.short_term = 3;
                     c.relevant = 3;
                     c.dropout = 0;
                     return std::make_shared<RecurrentLM>(c, DType::f64, &g);
                   },
                   lm_loss});
  }
  return out;
}

// The losses of kSteps SGD steps on (dev, dt): same weights, same data.
std::vector<double> train(const ModelKind& k, Device dev, DType dt, double perturb = 0) {
  Generator g(1234);
  std::shared_ptr<nn::Module> m = k.build(g);
  if (perturb != 0) {
    NoGradGuard ng;
    for (Tensor& p : m->parameters()) p.copy_(p * (1 + perturb));
  }
  m->to_(dt);
  m->to_(dev);
  m->train(true);
  optim::SGD opt(m->parameters(), 0.1, 0.9);
  // A learnable stream: a fixed random sequence of period 7 (so the loss falls).
  Generator data(99);
  const std::vector<double> period = (Tensor::rand({kB, 7}, DType::f64, Device::cpu(), &data) * (kV - 1)).to_vector();
  std::vector<int64_t> sv;
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t t = 0; t < kSteps * kL + 1; ++t) sv.push_back(int64_t(period[size_t(b * 7 + t % 7)]));
  Tensor stream = Tensor::from_vector(sv, {kB, kSteps * kL + 1}, DType::i64);
  SequenceState st;
  std::vector<double> losses;
  for (int s = 0; s < kSteps; ++s) {
    Tensor ids = stream.slice(1, s * kL, (s + 1) * kL).contiguous().to(dev);
    Tensor tgt = stream.slice(1, s * kL + 1, (s + 1) * kL + 1).contiguous().to(dev);
    opt.zero_grad();
    Tensor loss = k.loss(*m, ids, tgt, &st);
    loss.backward();
    opt.step();
    losses.push_back(loss.item());
  }
  return losses;
}

// The first step where |a - b| > kRel |b|, or -1.
int first_disagreement(const std::vector<double>& a, const std::vector<double>& b, double* worst) {
  *worst = 0;
  int first = -1;
  for (size_t i = 0; i < a.size(); ++i) {
    const double rel = std::fabs(a[i] - b[i]) / std::fabs(b[i]);
    *worst = std::max(*worst, std::isnan(rel) ? INFINITY : rel);
    if (!(rel <= kRel) && first < 0) first = int(i);
  }
  return first;
}

std::string show(const std::vector<double>& a, const std::vector<double>& b) {
  std::string s;
  char buf[96];
  for (size_t i = 0; i < a.size(); ++i) {
    std::snprintf(buf, sizeof buf, "\n  step %2zu: %.9f vs %.9f", i, a[i], b[i]);
    s += buf;
  }
  return s;
}

}  // namespace

TEST_CASE("models parity: CPU f32 training follows CPU f64 to 1e-4 at every step", "[models_parity]") {
  for (const ModelKind& k : kinds()) {
    DYNAMIC_SECTION(k.name) {
      const std::vector<double> ref = train(k, Device::cpu(), DType::f64);
      const std::vector<double> got = train(k, Device::cpu(), DType::f32);
      double worst;
      const int bad = first_disagreement(got, ref, &worst);
      INFO(k.name << ": worst relative difference " << worst << show(got, ref));
      CHECK(bad == -1);
      CHECK(ref.back() < ref.front());  // it trains
    }
  }
}

TEST_CASE("models parity: a run from other weights is told apart", "[models_parity]") {
  const ModelKind k = kinds().front();
  const std::vector<double> ref = train(k, Device::cpu(), DType::f64);
  const std::vector<double> got = train(k, Device::cpu(), DType::f64, 1e-2);
  double worst;
  CHECK(first_disagreement(got, ref, &worst) >= 0);
  CHECK(worst > kRel);
}

TEST_CASE("models parity: every model type trains the same on the device as on the CPU", "[models_parity][cuda]") {
  std::string why;
  const std::vector<Device> devs = cases::accelerators(&why);
  if (devs.empty()) {
    WARN("skipped: no device other than the CPU: " << why);
    return;
  }
  for (Device dev : devs)
    for (const ModelKind& k : kinds())
      for (DType dt : {DType::f32, DType::f64}) {
        const std::vector<double> ref = train(k, Device::cpu(), dt);
        const std::vector<double> got = train(k, dev, dt);
        double worst;
        const int bad = first_disagreement(got, ref, &worst);
        std::printf("models_parity: %s %s %s: worst relative loss difference %.3g over %d steps%s\n",
                    dev.str().c_str(), k.name.c_str(), dtype_name(dt), worst, kSteps, bad < 0 ? "" : " FAIL");
        INFO(dev.str() << " " << k.name << " " << dtype_name(dt) << ": worst " << worst << show(got, ref));
        CHECK(bad == -1);
      }
}
