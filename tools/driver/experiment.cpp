#include "experiment.h"
#include "input_checks.h"

#include <cmath>
#include <sstream>

#include "../../core/autograd.h"
#include "../../core/safetensors.h"
#include "../../ops/losses.h"
#include "../../ops/ops.h"
#include "../../models/relrnn.h"
#include "../../models/srupp.h"
#include "../../models/starsaber.h"

namespace remora {
namespace driver {

namespace {

nn::RemInit rem_init_of(const RemConfig& r) {
  nn::RemInit in;
  in.eta_range = r.eta_range;
  in.nu_range = r.nu_range;
  in.theta = r.theta;
  in.mu_range = r.mu_range;
  in.eta = r.eta;
  in.nu = r.nu;
  in.thetas = r.thetas;
  in.mu = r.mu;
  return in;
}

template <typename F>
auto as_input_error(const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const InputError&) {
    throw;
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw InputError(what + ": " + e.what());
  }
}

}  // namespace

Experiment::Experiment(const Config& c, const std::string& vocab_json) : cfg(c), data_gen(c.seed + 7919) {
  manual_seed(cfg.seed);
  if (is_lm()) {
    corpus = as_input_error("data.path", [&] {
      return cfg.data.type == "bytes" ? data::load_byte_corpus(cfg.data.path)
                                      : data::load_char_corpus(cfg.data.path);
    });
    if (!vocab_json.empty()) {
      // A checkpoint must have been trained on the same vocabulary.
      data::Vocab v = as_input_error("checkpoint vocabulary", [&] { return data::Vocab::from_json(vocab_json); });
      if (!(v == corpus.vocab)) {
        throw InputError("checkpoint vocabulary (" + std::to_string(v.size()) +
                         " symbols) differs from the one built from " + cfg.data.path + " (" +
                         std::to_string(corpus.vocab.size()) +
                         " symbols); use the data the checkpoint was trained on");
      }
    }
    const int64_t B = cfg.data.batch_size, T = cfg.data.seq_len;
    train_stream = std::make_unique<data::LMStream>(corpus.train, B, T);
    if (train_stream->num_segments() < 1)
      throw InputError("data: the training split of " + cfg.data.path + " (" +
                       std::to_string(corpus.train.size()) + " tokens) is too short for batch_size " +
                       std::to_string(B) + " x seq_len " + std::to_string(T));
  } else if (is_series()) {
    data::SeriesConfig sc;
    sc.length = cfg.data.length;
    sc.periods = cfg.data.periods;
    sc.amplitudes = cfg.data.amplitudes;
    sc.noise_std = cfg.data.noise_std;
    sc.trend = cfg.data.trend;
    series = data::split_series(data::make_multi_periodic_series(sc, data_gen), 0.7, 0.1, cfg.data.context);
  } else if (is_memory()) {
    memory.task = cfg.data.type;
    memory.delay = cfg.data.delay;
    memory.symbols = cfg.data.symbols;
    memory.length = cfg.data.copy_len;
    // Fixed evaluation sets from their own generators (training batches are
    // drawn fresh from data_gen at every step).
    Generator gv(cfg.seed + 15485863), gt(cfg.seed + 32452843);
    for (int64_t n = 0; n < cfg.data.n_test; n += cfg.data.eval_batch_size) {
      const int64_t b = std::min(cfg.data.eval_batch_size, cfg.data.n_test - n);
      memory_valid.push_back(data::make_memory_batch(memory, b, gv));
      memory_test.push_back(data::make_memory_batch(memory, b, gt));
    }
  } else if (is_classify()) {
    const data::Language lang = data::language_from_name(cfg.data.language);
    member_train = data::make_membership_dataset(lang, cfg.data.n_train, 2, 50, data_gen);
    member_bins.push_back(data::make_membership_dataset(lang, cfg.data.n_test, 2, 50, data_gen));
    member_bins.push_back(data::make_membership_dataset(lang, cfg.data.n_test, 51, 100, data_gen));
    member_bins.push_back(data::make_membership_dataset(lang, cfg.data.n_test, 101, 150, data_gen));
  } else {
    const data::Language lang = data::language_from_name(cfg.data.language);
    formal = data::make_formal_splits(lang, data_gen, cfg.data.n_train, cfg.data.n_test);
    // An in-distribution held-out set (lengths 2..50) for "valid" accuracy.
    formal.test_bins.insert(formal.test_bins.begin(),
                            data::make_formal_dataset(lang, cfg.data.n_test, 2, 50, data_gen));
  }
  build_model();
  if (!cfg.device.is_cpu()) model->to_(cfg.device);
}

// The number of outputs per position of a causal model: the vocabulary (LM,
// copy, denoise), the k-hot targets (regular), one value (timeseries).
namespace {
int64_t causal_outputs(const Experiment& ex) {
  if (ex.is_series()) return 1;
  if (ex.cfg.data.type == "regular") return ex.formal.train.num_targets();
  return ex.vocab_size();
}
}  // namespace

void Experiment::build_model() {
  const ModelConfig& m = cfg.model;
  if (m.type == "bert") {
    bert_cfg.vocab_size = vocab_size();
    bert_cfg.hidden_size = m.d_model;
    bert_cfg.num_hidden_layers = m.n_layer;
    bert_cfg.num_attention_heads = m.n_head;
    bert_cfg.intermediate_size = m.d_inner;
    bert_cfg.hidden_dropout_prob = m.dropout;
    bert_cfg.attention_probs_dropout_prob = m.dropatt;
    bert_cfg.max_position_embeddings = std::max(m.max_len, is_classify() ? int64_t(151) : cfg.data.seq_len);
    bert_cfg.pad_token_id = is_classify() ? member_train.pad_id() : -1;  // LM: fixed-length crops, no padding
    bert_cfg.num_classes = is_classify() ? 2 : 0;
    bert_cfg.attention = m.attention.type;
    if (m.attention.type == "rsa") {
      bert_cfg.rem = m.attention.rem.spec;
      bert_cfg.rem.masked = false;  // bidirectional encoder: the REM is unmasked
      bert_cfg.gate = m.attention.gate;
      bert_cfg.rem_init = rem_init_of(m.attention.rem);
    }
    bert = as_input_error("model", [&] { return std::make_shared<models::BertForMaskedLM>(bert_cfg); });
    enc = bert;
    model = bert;
    return;
  }
  if (m.type == "transformer_xl") {
    model_cfg.n_token = vocab_size();
    model_cfg.n_layer = m.n_layer;
    model_cfg.n_head = m.n_head;
    model_cfg.d_model = m.d_model;
    model_cfg.d_head = m.d_head;
    model_cfg.d_inner = m.d_inner;
    model_cfg.dropout = m.dropout;
    model_cfg.dropatt = m.dropatt;
    model_cfg.mem_len = is_lm() ? m.mem_len : 0;
    model_cfg.clamp_len = m.clamp_len;
    model_cfg.same_length = m.same_length;
    model_cfg.pre_lnorm = m.pre_ln;
    model_cfg.attention = m.attention.type;
    if (m.attention.type == "rsa") {
      model_cfg.rem = m.attention.rem.spec;
      model_cfg.rem.masked = true;  // causal models: the REM is masked
      model_cfg.gate = m.attention.gate;
      model_cfg.rem_init = rem_init_of(m.attention.rem);
      model_cfg.carry = m.attention.carry;
    }
    if (!is_lm()) model_cfg.n_out = causal_outputs(*this);
    if (is_series()) model_cfg.n_in = 1;
    xl = as_input_error("model", [&] { return std::make_shared<models::TransformerXL>(model_cfg); });
    seq = xl;
    model = xl;
    return;
  }
  if (m.type == "srupp") {
    models::SRUppConfig sc;
    sc.n_token = vocab_size();
    sc.d_model = m.d_model;
    sc.d_attn = m.d_attn;
    sc.n_layer = m.n_layer;
    sc.attn_every = m.attn_every;
    sc.dropout = m.dropout;
    sc.attn_dropout = m.dropatt;
    sc.mem_len = is_lm() ? m.mem_len : 0;
    if (!is_lm()) sc.n_out = causal_outputs(*this);
    if (is_series()) sc.n_in = 1;
    auto lm = as_input_error("model", [&] { return std::make_shared<models::SRUppLM>(sc); });
    seq = lm;
    model = lm;
    return;
  }
  if (m.type == "starsaber") {
    models::StarSaberConfig sc;
    sc.vocab_size = vocab_size();
    sc.d_model = m.d_model;
    sc.n_layer = m.n_layer;
    sc.gated = m.gated;
    sc.causal = m.causal;
    sc.dropout = m.dropout;
    sc.num_classes = is_classify() ? 2 : 0;
    sc.pad_token_id = is_classify() ? member_train.pad_id() : -1;
    if (m.causal) {
      auto lm = as_input_error("model", [&] { return std::make_shared<models::StarSaberLM>(sc); });
      seq = lm;
      model = lm;
    } else {
      auto ss = as_input_error("model", [&] { return std::make_shared<models::StarSaber>(sc); });
      enc = ss;
      model = ss;
    }
    return;
  }
  if (m.type == "rnn" || m.type == "lstm" || m.type == "relrnn" || m.type == "rellstm") {
    models::RecurrentConfig rc;
    rc.type = m.type;
    rc.n_token = vocab_size();
    rc.d_model = m.d_model;
    rc.n_layer = m.n_layer;
    rc.short_term = m.short_term;
    rc.relevant = m.relevant;
    rc.dropout = m.dropout;
    rc.n_out = causal_outputs(*this);
    auto r = as_input_error("model", [&] { return std::make_shared<models::RecurrentLM>(rc); });
    seq = r;
    model = r;
    return;
  }
  throw ConfigError("model.type: " + m.type + " is not built into this driver");
}

int64_t Experiment::vocab_size() const {
  // BERT's vocabulary adds [MASK] after the corpus symbols.
  const int64_t extra = cfg.model.is_encoder() ? 1 : 0;
  if (is_lm()) return corpus.vocab.size() + extra;
  if (is_series()) return 1;
  if (is_memory()) return memory.vocab_size();
  if (is_classify()) return member_train.vocab_size();
  return formal.train.vocab_size();
}

int64_t Experiment::mask_id() const { return corpus.vocab.size(); }

DType Experiment::dtype() const { return model->parameters().front().dtype(); }

namespace {
// B windows of L tokens starting at uniformly drawn positions (MLM batches).
Tensor random_crops(const std::vector<int64_t>& toks, int64_t B, int64_t L, Generator& g) {
  std::vector<int64_t> ids;
  const int64_t n = int64_t(toks.size()) - L;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = data::uniform_int(g, n);
    ids.insert(ids.end(), toks.begin() + s, toks.begin() + s + L);
  }
  return Tensor::from_vector(ids, {B, L});
}

// Mean cross-entropy of logits [B, L, V] against targets i64 [B, L] (-100 ignored).
Tensor token_loss(const Tensor& logits, const Tensor& targets) {
  return cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

// Examples idx of a membership dataset as a padded batch; mask [B, L] 1 = real.
std::pair<data::ClassBatch, Tensor> membership_batch(const data::MembershipDataset& ds,
                                                     const std::vector<int64_t>& idx) {
  std::vector<std::vector<int64_t>> seqs;
  std::vector<int64_t> labels;
  for (int64_t i : idx) {
    seqs.push_back(ds.ids[size_t(i)]);
    labels.push_back(ds.labels[size_t(i)]);
  }
  data::ClassBatch b = data::pad_batch(seqs, labels, ds.pad_id());
  Tensor mask = eq(b.key_padding, Tensor::scalar(0.0, DType::i64));
  return {b, mask};
}
}  // namespace

std::string Experiment::vocab_json() const { return is_lm() ? corpus.vocab.to_json() : ""; }

// The LM stream's position for causal language models; the sampling
// generator's offset for everything that draws its batches at random.
int64_t Experiment::data_position() const {
  return is_lm() && !is_encoder() ? train_stream->position() : int64_t(data_gen.offset());
}

void Experiment::set_data_position(int64_t p) {
  if (is_lm() && !is_encoder())
    train_stream->set_position(p);
  else
    data_gen.set_state(data_gen.seed(), uint64_t(p));
}

Tensor Experiment::train_loss(State& state, int64_t* tokens) {
  model->train();
  const Device dev = cfg.device;
  if (is_encoder() && is_lm()) {
    Tensor ids = random_crops(corpus.train, cfg.data.batch_size, cfg.data.seq_len, data_gen);
    auto masked = models::mlm_mask(ids, Tensor(), vocab_size(), mask_id(), data_gen);
    *tokens = ids.numel();
    return token_loss(enc->token_logits(masked.first.to(dev), Tensor()), masked.second.to(dev));
  }
  if (is_classify()) {
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < cfg.data.batch_size; ++i) idx.push_back(data::uniform_int(data_gen, member_train.size()));
    auto b = membership_batch(member_train, idx);
    *tokens = int64_t(sum(b.second).item());
    return cross_entropy(enc->class_logits(b.first.ids.to(dev), b.second.to(dev)), b.first.labels.to(dev));
  }
  if (is_lm()) {
    data::LMBatch b = train_stream->next();
    if (b.segment == 0) state = State{};  // the streams restart: drop carried memory
    models::SequenceOutput out = seq->run(b.x.to(dev), state);
    state = out.state;
    *tokens = b.y.numel();
    return token_loss(out.logits, b.y.to(dev));
  }
  if (is_memory()) {
    data::MemoryBatch b = data::make_memory_batch(memory, cfg.data.batch_size, data_gen);
    *tokens = b.x.numel();
    return token_loss(seq->run(b.x.to(dev), State{}).logits, b.y.to(dev));
  }
  if (is_series()) {
    // One-step-ahead regression over random training windows (teacher forcing).
    data::WindowDataset w(series.train, cfg.data.context, 1);
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < cfg.data.batch_size; ++i) idx.push_back(data::uniform_int(data_gen, w.size()));
    data::ForecastBatch b = w.batch(idx);  // x [B, Lin, 1], y [B, 1, 1]
    Tensor target = cat({b.x.slice(1, 1, cfg.data.context), b.y}, 1).to(dtype()).to(dev);
    Tensor pred = seq->run(b.x.to(dtype()).to(dev), State{}).logits;  // [B, Lin, 1]
    *tokens = b.x.numel();
    return mean(pow(sub(pred, target), 2));
  }
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < cfg.data.batch_size; ++i)
    idx.push_back(data::uniform_int(data_gen, formal.train.size()));
  data::FormalBatch b = data::formal_batch(formal.train, idx);
  Tensor logits = seq->run(b.ids.to(dev), State{}).logits;  // [B, L, K]
  *tokens = int64_t(sum(b.mask).item());
  return binary_cross_entropy_with_logits(logits, b.targets.to(dev), b.mask.unsqueeze(-1).to(dev));
}

Metrics Experiment::evaluate(const std::string& split, int64_t max_batches) {
  NoGradGuard ng;
  const bool was_training = model->is_training();
  model->eval();
  const Device dev = cfg.device;
  Metrics m;
  if (is_encoder() && is_lm()) {
    // MLM on consecutive windows of the split, masked by a generator seeded the
    // same way at every evaluation so that the numbers are comparable.
    const std::vector<int64_t>& toks = split == "test" ? corpus.test : corpus.valid;
    const int64_t B = cfg.data.eval_batch_size, L = cfg.data.seq_len;
    const int64_t windows = int64_t(toks.size()) / L;
    const int64_t n = max_batches > 0 ? std::min(windows, max_batches * B) : windows;
    if (n < 1) {
      model->train(was_training);
      throw InputError("data: the " + split + " split is shorter than seq_len " + std::to_string(L));
    }
    Generator g(cfg.seed + 104729);
    double loss = 0;
    int64_t predicted = 0, correct = 0;
    for (int64_t w0 = 0; w0 < n; w0 += B) {
      const int64_t b = std::min(B, n - w0);
      std::vector<int64_t> ids(toks.begin() + w0 * L, toks.begin() + (w0 + b) * L);
      auto masked = models::mlm_mask(Tensor::from_vector(ids, {b, L}), Tensor(), vocab_size(), mask_id(), g);
      Tensor logits = enc->token_logits(masked.first.to(dev), Tensor());  // [b, L, V]
      const std::vector<int64_t> lab = masked.second.to_i64_vector();
      const std::vector<int64_t> pred = argmax(logits, -1).to_i64_vector();
      int64_t k = 0;
      for (size_t i = 0; i < lab.size(); ++i)
        if (lab[i] != -100) {
          ++k;
          correct += pred[i] == lab[i];
        }
      if (k > 0) loss += token_loss(logits, masked.second.to(dev)).item() * double(k);
      predicted += k;
    }
    m.loss = loss / double(std::max<int64_t>(1, predicted));
    m.accuracy = double(correct) / double(std::max<int64_t>(1, predicted));
    m.tokens = predicted;
  } else if (is_classify()) {
    // bins[0] is the in-distribution held-out set; the rest are the length bins.
    for (size_t bi = 0; bi < member_bins.size(); ++bi) {
      const data::MembershipDataset& ds = member_bins[bi];
      int64_t correct = 0;
      double loss = 0;
      for (int64_t i0 = 0; i0 < ds.size(); i0 += cfg.data.eval_batch_size) {
        std::vector<int64_t> idx;
        for (int64_t i = i0; i < std::min(ds.size(), i0 + cfg.data.eval_batch_size); ++i) idx.push_back(i);
        auto b = membership_batch(ds, idx);
        Tensor logits = enc->class_logits(b.first.ids.to(dev), b.second.to(dev));  // [B, 2]
        loss += cross_entropy(logits, b.first.labels.to(dev)).item() * double(idx.size());
        const std::vector<int64_t> pred = argmax(logits, -1).to_i64_vector();
        for (size_t i = 0; i < idx.size(); ++i) correct += pred[i] == ds.labels[size_t(idx[i])];
      }
      const double acc = double(correct) / double(ds.size());
      if (bi == 0) {
        m.accuracy = acc;
        m.loss = loss / double(ds.size());
        m.tokens = ds.size();
      } else {
        m.bin_accuracy.push_back(acc);
      }
    }
  } else if (is_lm()) {
    const std::vector<int64_t>& toks = split == "test" ? corpus.test : corpus.valid;
    data::LMStream s(toks, cfg.data.eval_batch_size, cfg.data.seq_len);
    if (s.num_segments() < 1) {
      model->train(was_training);
      throw InputError("data: the " + split + " split (" + std::to_string(toks.size()) +
                       " tokens) is too short for eval_batch_size " +
                       std::to_string(cfg.data.eval_batch_size) + " x seq_len " +
                       std::to_string(cfg.data.seq_len));
    }
    const int64_t n = max_batches > 0 ? std::min(max_batches, s.num_segments()) : s.num_segments();
    State st;
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      data::LMBatch b = s.next();
      models::SequenceOutput out = seq->run(b.x.to(dev), st);
      st = out.state;
      total += token_loss(out.logits, b.y.to(dev)).item() * double(b.y.numel());
      m.tokens += b.y.numel();
    }
    m.loss = total / double(m.tokens);
    m.bpc = m.loss / std::log(2.0);
  } else if (is_memory()) {
    const std::vector<data::MemoryBatch>& set = split == "test" ? memory_test : memory_valid;
    const int64_t n = max_batches > 0 ? std::min<int64_t>(max_batches, int64_t(set.size())) : int64_t(set.size());
    double loss = 0;
    int64_t correct = 0, answers = 0, targets = 0;
    for (int64_t i = 0; i < n; ++i) {
      const data::MemoryBatch& b = set[size_t(i)];
      Tensor logits = seq->run(b.x.to(dev), State{}).logits;  // [B, L, V]
      const int64_t k = int64_t(sum(ne(b.y, Tensor::scalar(-100.0, DType::i64))).item());
      loss += token_loss(logits, b.y.to(dev)).item() * double(k);
      targets += k;
      auto c = data::memory_num_correct(memory, logits, b);
      correct += c.first;
      answers += c.second;
    }
    m.loss = loss / double(std::max<int64_t>(1, targets));
    m.accuracy = double(correct) / double(std::max<int64_t>(1, answers));
    m.tokens = answers;
  } else if (is_series()) {
    // Forecast `horizon` steps autoregressively from each window's context.
    const std::vector<double>& sr = split == "test" ? series.test : series.valid;
    const int64_t H = cfg.data.horizon, Lin = cfg.data.context;
    data::WindowDataset w(sr, Lin, H, H);
    const int64_t n = max_batches > 0 ? std::min(w.size(), max_batches * cfg.data.eval_batch_size) : w.size();
    double se = 0, ae = 0;
    for (int64_t i0 = 0; i0 < n; i0 += cfg.data.eval_batch_size) {
      std::vector<int64_t> idx;
      for (int64_t i = i0; i < std::min(n, i0 + cfg.data.eval_batch_size); ++i) idx.push_back(i);
      data::ForecastBatch b = w.batch(idx);
      Tensor sq = b.x.to(dtype()).to(dev);  // [B, Lin + t, 1]
      std::vector<Tensor> preds;
      for (int64_t t = 0; t < H; ++t) {
        Tensor next = seq->run(sq, State{}).logits.slice(1, -1, sq.size(1));  // [B, 1, 1]
        preds.push_back(next);
        sq = cat({sq, next}, 1);
      }
      Tensor pred = cat(preds, 1).to(DType::f32).to(Device::cpu());  // [B, H, 1]
      const double k = double(b.y.numel());
      se += data::mse(pred, b.y) * k;
      ae += data::mae(pred, b.y) * k;
      m.tokens += b.y.numel();
    }
    m.mse = se / double(std::max<int64_t>(1, m.tokens));
    m.mae = ae / double(std::max<int64_t>(1, m.tokens));
    m.loss = m.mse;
  } else {
    // bins[0] is the in-distribution held-out set; the rest are the length bins.
    for (size_t bi = 0; bi < formal.test_bins.size(); ++bi) {
      const data::FormalDataset& ds = formal.test_bins[bi];
      int64_t correct = 0;
      double loss = 0;
      int64_t counted = 0;
      const int64_t B = cfg.data.eval_batch_size;
      for (int64_t i0 = 0; i0 < ds.size(); i0 += B) {
        std::vector<int64_t> idx;
        for (int64_t i = i0; i < std::min(ds.size(), i0 + B); ++i) idx.push_back(i);
        data::FormalBatch b = data::formal_batch(ds, idx);
        Tensor logits = seq->run(b.ids.to(dev), State{}).logits.to(Device::cpu());
        correct += data::formal_num_correct(logits, b);
        const int64_t n = int64_t(sum(b.mask).item()) * ds.num_targets();
        loss += binary_cross_entropy_with_logits(logits, b.targets, b.mask.unsqueeze(-1)).item() * double(n);
        counted += n;
      }
      const double acc = double(correct) / double(std::max<int64_t>(1, ds.size()));
      if (bi == 0) {
        m.accuracy = acc;
        m.loss = loss / double(std::max<int64_t>(1, counted));
        m.tokens = counted;
      } else {
        m.bin_accuracy.push_back(acc);
      }
    }
  }
  model->train(was_training);
  return m;
}

std::unique_ptr<optim::Optimizer> Experiment::make_optimizer() const {
  const OptimizerConfig& o = cfg.train.optimizer;
  std::vector<Tensor> p = model->parameters();
  if (o.type == "sgd") return std::make_unique<optim::SGD>(p, o.lr, o.momentum, 0.0, o.weight_decay, o.nesterov);
  if (o.type == "adam") return std::make_unique<optim::Adam>(p, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
  return std::make_unique<optim::AdamW>(p, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
}

optim::LRSchedule Experiment::schedule() const {
  optim::LRSchedule s;
  const ScheduleConfig& c = cfg.train.schedule;
  s.kind = c.type == "cosine" ? optim::LRSchedule::warmup_cosine
           : c.type == "linear" ? optim::LRSchedule::warmup_linear
                                : optim::LRSchedule::constant;
  s.warmup_steps = c.warmup;
  s.total_steps = cfg.train.steps;
  s.min_lr_ratio = c.min_lr_ratio;
  return s;
}

// ---- checkpoints ----

void save_checkpoint(const std::string& path, const Experiment& ex, const optim::Optimizer* opt,
                     const Experiment::State& state, const Checkpoint& info) {
  std::vector<std::pair<std::string, Tensor>> t = ex.model->state_dict();
  if (opt)
    for (auto& kv : opt->state()) t.emplace_back("optimizer." + kv.first, kv.second);
  for (size_t l = 0; l < state.mems.size(); ++l) t.emplace_back("state.mems." + std::to_string(l), state.mems[l]);
  for (size_t l = 0; l < state.rem_states.size(); ++l)
    t.emplace_back("state.rem." + std::to_string(l), state.rem_states[l]);
  for (size_t l = 0; l < state.cells.size(); ++l)
    t.emplace_back("state.cells." + std::to_string(l), state.cells[l]);
  std::ostringstream best;
  best.precision(17);
  best << info.best_valid;
  std::map<std::string, std::string> meta{{"format", "remora-checkpoint"},
                                          {"version", "1"},
                                          {"step", std::to_string(info.step)},
                                          {"rng_seed", std::to_string(info.rng_seed)},
                                          {"rng_offset", std::to_string(info.rng_offset)},
                                          {"data_position", std::to_string(info.data_position)},
                                          {"best_valid", best.str()},
                                          {"vocab", info.vocab_json},
                                          {"config", info.config_json}};
  save_safetensors(path, t, meta);
}

namespace {
// A tensor on the model's device (a no-op on cpu).
Tensor dev(const nn::Module& m, const Tensor& t) { return t.to(m.parameters().front().device()); }

int64_t meta_int(const Safetensors& st, const std::string& path, const std::string& key) {
  auto it = st.metadata.find(key);
  if (it == st.metadata.end()) throw InputError(path + ": not a Remora checkpoint (no \"" + key + "\" metadata)");
  try {
    size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    if (used != it->second.size()) throw std::invalid_argument("trailing");
    return int64_t(v);
  } catch (const std::exception&) {
    throw InputError(path + ": metadata \"" + key + "\" is not an integer: " + it->second);
  }
}

Checkpoint info_of(const Safetensors& st, const std::string& path) {
  auto f = st.metadata.find("format");
  if (f == st.metadata.end() || f->second == "pt") {
    Checkpoint bare;
    bare.weights_only = true;
    return bare;
  }
  if (f->second != "remora-checkpoint")
    throw InputError(path + ": not a Remora checkpoint (metadata format is \"" + f->second +
                     "\"; expected \"remora-checkpoint\", or no format for a bare weights file)");
  Checkpoint c;
  c.step = meta_int(st, path, "step");
  c.rng_seed = uint64_t(meta_int(st, path, "rng_seed"));
  c.rng_offset = uint64_t(meta_int(st, path, "rng_offset"));
  c.data_position = meta_int(st, path, "data_position");
  auto b = st.metadata.find("best_valid");
  c.best_valid = b == st.metadata.end() ? 0 : std::atof(b->second.c_str());
  auto v = st.metadata.find("vocab");
  c.vocab_json = v == st.metadata.end() ? "" : v->second;
  auto cf = st.metadata.find("config");
  c.config_json = cf == st.metadata.end() ? "" : cf->second;
  return c;
}

Safetensors read_file(const std::string& path) {
  try {
    return load_safetensors(path);
  } catch (const Error& e) {
    throw InputError(std::string("checkpoint: ") + e.what());
  }
}
}  // namespace

Checkpoint read_checkpoint_info(const std::string& path) { return info_of(read_file(path), path); }

Checkpoint load_checkpoint(const std::string& path, Experiment& ex, optim::Optimizer* opt,
                           Experiment::State* state) {
  Safetensors st = read_file(path);
  Checkpoint c = info_of(st, path);
  check_finite(st.tensors, path);  // NaN / Inf weights, optimizer or carried state: exit 2 naming the tensor
  if (c.weights_only && (opt || state))
    throw InputError(path + ": a bare weights file (no \"format\": \"remora-checkpoint\" metadata) has no "
                     "optimizer state, step or RNG state to resume from");
  nn::NamedTensors weights, optim_state;
  std::map<std::string, Tensor> carried;
  for (auto& kv : st.tensors) {
    if (kv.first.rfind("optimizer.", 0) == 0) optim_state.emplace_back(kv.first.substr(10), kv.second);
    else if (kv.first.rfind("state.", 0) == 0) carried[kv.first.substr(6)] = kv.second;
    else weights.push_back(kv);
  }
  as_input_error(path + " does not fit the config", [&] {
    ex.model->load_state_dict(weights);
    return 0;
  });
  if (opt) {
    if (optim_state.empty()) throw InputError(path + ": has no optimizer state to resume from");
    as_input_error(path + ": optimizer state", [&] {
      opt->load_state(optim_state);
      return 0;
    });
  }
  if (state) {
    std::vector<std::pair<std::string, Tensor>> named;  // the carried tensors, in layer order
    for (const char* kind : {"mems.", "rem.", "cells."})
      for (int64_t l = 0; carried.count(kind + std::to_string(l)); ++l)
        named.emplace_back(std::string("state.") + kind + std::to_string(l),
                           dev(*ex.model, carried.at(kind + std::to_string(l)).to(ex.dtype())));
    check_carried_state(ex, named, path);  // wrong shapes: exit 2 naming the tensors, not a failed step
    *state = Experiment::State{};
    for (int64_t l = 0;; ++l) {
      auto it = carried.find("mems." + std::to_string(l));
      if (it == carried.end()) break;
      state->mems.push_back(dev(*ex.model, it->second.to(ex.dtype())));
    }
    for (int64_t l = 0;; ++l) {
      auto it = carried.find("rem." + std::to_string(l));
      if (it == carried.end()) break;
      state->rem_states.push_back(dev(*ex.model, it->second.to(ex.dtype())));
    }
    for (int64_t l = 0;; ++l) {
      auto it = carried.find("cells." + std::to_string(l));
      if (it == carried.end()) break;
      state->cells.push_back(dev(*ex.model, it->second.to(ex.dtype())));
    }
  }
  return c;
}

}  // namespace driver
}  // namespace remora
