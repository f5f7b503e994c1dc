// SPDX-License-Identifier: BSD-3-Clause
#include "relrnn.h"

#include <cmath>
#include <tuple>

#include "../core/autograd.h"
#include "../nn/init.h"
#include "../ops/ops.h"

namespace remora {
namespace models {

namespace {

// tanh(x) = 2 σ(2x) − 1. The CPU backend's tanh is libm's scalar tanhf (about
// 45% of a RelRNN training step at B 32, K 20, H 128 went to it); its sigmoid is
// several times cheaper. Same values to rounding (|diff| <= 2 ulp of 1).
Tensor tanh_via_sigmoid(const Tensor& x) { return affine(sigmoid(affine(x, 2, 0)), 2, -1); }

// The S ∪ R memory of one sequence batch: slot tensors (with history, so the
// gradient reaches the stored states through α) plus host bookkeeping on
// detached values. See relrnn.h for the rule.
class ScreeningMemory {
 public:
  ScreeningMemory(int64_t B, int64_t H, int64_t nu, int64_t rho, DType dt, Device dev,
                  const ScreeningOptions& opt)
      : B_(B), H_(H), nu_(nu), rho_(rho), K_(nu + rho), opt_(opt),
        cS_(size_t(B * nu), 0.0), cR_(size_t(B * rho), 0.0), tR_(size_t(B * rho), -1) {
    S_ = Tensor::zeros({B, nu, H}, dt, dev);
    UaS_ = Tensor::zeros({B, nu, H}, dt, dev);
    if (rho > 0) {
      R_ = Tensor::zeros({B, rho, H}, dt, dev);
      UaR_ = Tensor::zeros({B, rho, H}, dt, dev);
    }
  }

  // c_t [B, H] at step t >= 1 for the query q = V_a s_{t-1} [B, H] and v [1, H].
  // Also adds the detached α of the S slots to their relevance.
  Tensor read(int64_t t, const Tensor& q, const Tensor& v) {
    Tensor M = rho_ > 0 ? cat({S_, R_}, 1) : S_;        // [B, K, H]
    Tensor UM = rho_ > 0 ? cat({UaS_, UaR_}, 1) : UaS_;  // [B, K, H], U_a h_i
    Tensor E = tanh_via_sigmoid(add(UM, q.unsqueeze(1)));  // [B, K, H]
    Tensor e = matmul(E, v.t()).reshape({B_, K_});      // [B, K]
    std::vector<int64_t> blocked(size_t(B_ * K_), 0);
    for (int64_t b = 0; b < B_; ++b) {
      for (int64_t j = 0; j < nu_; ++j) blocked[size_t(b * K_ + j)] = t - nu_ + j < 0;  // S slot j holds h_{t-ν+j}
      for (int64_t r = 0; r < rho_; ++r) blocked[size_t(b * K_ + nu_ + r)] = tR_[size_t(b * rho_ + r)] < 0;
    }
    Tensor mask = Tensor::from_vector(blocked, {B_, K_}, DType::i64, e.device());
    Tensor alpha = softmax(masked_fill(e, mask, -std::numeric_limits<double>::infinity()), -1);
    Tensor c = matmul(alpha.unsqueeze(1), M).reshape({B_, H_});  // [B, H]

    std::vector<double> a = alpha.detach().to_vector();
    if (opt_.inject_alpha) {
      a = opt_.inject_alpha(t, a);
      REMORA_CHECK(int64_t(a.size()) == B_ * K_, "relevancy screening: inject_alpha returned "
                                                     << a.size() << " values, expected B * K = " << B_ * K_);
    }
    for (int64_t b = 0; b < B_; ++b)
      for (int64_t j = 0; j < nu_; ++j) cS_[size_t(b * nu_ + j)] += a[size_t(b * K_ + j)];
    last_alpha_ = a;
    return c;
  }

  // After h_t [B, H] (and ua_h = U_a h_t) is computed: screens h_{t-ν}, which
  // leaves S now, then pushes h_t.
  void push(int64_t t, const Tensor& h, const Tensor& ua_h) {
    ScreeningTrace* tr = opt_.trace;
    if (t - nu_ >= 0 && rho_ > 0) {
      std::vector<int64_t> repl(size_t(B_ * rho_), 0);
      bool any = false;
      for (int64_t b = 0; b < B_; ++b) {
        const double c_leave = cS_[size_t(b * nu_)];
        double* cR = &cR_[size_t(b * rho_)];
        int64_t* tR = &tR_[size_t(b * rho_)];
        int64_t pos = -1;
        for (int64_t r = 0; r < rho_; ++r)
          if (tR[r] < 0) { pos = r; break; }  // the first empty slot
        if (pos >= 0) {
          if (tr) ++tr->admissions;
        } else {
          int64_t m = 0;  // argmin, the first of equal minima
          for (int64_t r = 1; r < rho_; ++r)
            if (cR[r] < cR[m]) m = r;
          double margin = std::fabs(c_leave - cR[m]);
          if (c_leave > cR[m]) {
            pos = m;
            for (int64_t r = 0; r < rho_; ++r)
              if (r != m) margin = std::min(margin, cR[r] - cR[m]);
            if (tr) ++tr->replacements;
          } else if (tr) {
            ++tr->rejections;
          }
          if (tr) tr->min_margin = std::min(tr->min_margin, margin);
        }
        if (pos >= 0) {
          repl[size_t(b * rho_ + pos)] = 1;
          cR[pos] = c_leave;
          tR[pos] = t - nu_;
          any = true;
        }
      }
      if (any) {
        Tensor cond = Tensor::from_vector(repl, {B_, rho_, 1}, DType::i64, h.device());
        R_ = where(cond, S_.slice(1, 0, 1), R_);  // [B, ρ, H]: the leaving state h_{t-ν} broadcast
        UaR_ = where(cond, UaS_.slice(1, 0, 1), UaR_);
      }
    }
    // Shift S: drop slot 0, append h_t.
    S_ = nu_ > 1 ? cat({S_.slice(1, 1, nu_), h.unsqueeze(1)}, 1) : h.unsqueeze(1);
    UaS_ = nu_ > 1 ? cat({UaS_.slice(1, 1, nu_), ua_h.unsqueeze(1)}, 1) : ua_h.unsqueeze(1);
    for (int64_t b = 0; b < B_; ++b) {
      double* cS = &cS_[size_t(b * nu_)];
      for (int64_t j = 0; j + 1 < nu_; ++j) cS[j] = cS[j + 1];
      cS[nu_ - 1] = 0;
    }
    if (tr) record(t, *tr);
  }

 private:
  void record(int64_t t, ScreeningTrace& tr) {
    std::vector<int64_t> times(size_t(B_ * K_));
    std::vector<double> rel(size_t(B_ * K_));
    for (int64_t b = 0; b < B_; ++b) {
      for (int64_t j = 0; j < nu_; ++j) {
        const int64_t tj = t - nu_ + 1 + j;  // after the push, S slot j holds h_{t-ν+1+j}
        times[size_t(b * K_ + j)] = tj >= 0 ? tj : -1;
        rel[size_t(b * K_ + j)] = cS_[size_t(b * nu_ + j)];
      }
      for (int64_t r = 0; r < rho_; ++r) {
        times[size_t(b * K_ + nu_ + r)] = tR_[size_t(b * rho_ + r)];
        rel[size_t(b * K_ + nu_ + r)] = cR_[size_t(b * rho_ + r)];
      }
    }
    tr.slot_time.push_back(times);
    tr.relevance.push_back(rel);
    tr.alpha.push_back(t == 0 ? std::vector<double>(size_t(B_ * K_), 0.0) : last_alpha_);
    tr.slots.push_back((rho_ > 0 ? cat({S_.detach(), R_.detach()}, 1) : S_.detach()).contiguous());
  }

  int64_t B_, H_, nu_, rho_, K_;
  const ScreeningOptions& opt_;
  Tensor S_, UaS_, R_, UaR_;                  // [B, ν, H], [B, ρ, H]
  std::vector<double> cS_, cR_, last_alpha_;  // [B, ν], [B, ρ], [B, K]
  std::vector<int64_t> tR_;                   // [B, ρ], -1 = empty
};

void check_cell_args(const char* who, int64_t I, int64_t H, int64_t nu, int64_t rho, DType dt) {
  REMORA_CHECK(I > 0 && H > 0, who << ": input_size and hidden_size must be > 0, got " << I << " and " << H);
  REMORA_CHECK(nu >= 1, who << ": short_term (ν) must be >= 1 (S always holds h_{t-1}), got " << nu);
  REMORA_CHECK(rho >= 0, who << ": relevant (ρ) must be >= 0, got " << rho);
  REMORA_CHECK(is_floating(dt), who << ": dtype must be floating, got " << dtype_name(dt));
}

void check_seq(const char* who, const Tensor& x, int64_t I, const Tensor& w) {
  REMORA_CHECK(x.defined() && x.dim() == 3 && x.size(2) == I && x.dtype() == w.dtype(),
               who << "::forward: x must be " << dtype_name(w.dtype()) << " [B, L, " << I
                   << "] (batch first), got " << (x.defined() ? x.str() : "undefined"));
}

void check_state(const char* who, const char* name, const Tensor& s, int64_t B, int64_t H) {
  if (!s.defined()) return;
  REMORA_CHECK(s.dim() == 2 && s.size(0) == B && s.size(1) == H,
               who << "::forward: " << name << " " << shape_str(s.shape()) << " must be [B, H] = [" << B
                   << ", " << H << "]");
}

void uniform_all(nn::Module& m, int64_t H, Generator* gen) {
  const double k = 1.0 / std::sqrt(double(H));
  for (auto& kv : m.named_parameters()) nn::init::uniform_(kv.second, -k, k, gen);
}

// torch.nn.init.xavier_normal_ / kaiming_normal_ (fan_in mode, gain √2) with the
// fans given (a gate's Linear in the official LSTM spans I + H inputs).
void xavier_normal(Tensor& w, int64_t fan_in, int64_t fan_out, Generator* g) {
  nn::init::normal_(w, 0, std::sqrt(2.0 / double(fan_in + fan_out)), g);
}
void input_weight(Tensor& w, const std::string& kind, int64_t I, int64_t H, Generator* g) {
  if (kind == "xavier")
    xavier_normal(w, I, H, g);
  else
    nn::init::normal_(w, 0, std::sqrt(2.0 / double(I)), g);  // kaiming
}
void bound_uniform(Tensor& t, int64_t fan_in, Generator* g) {
  const double k = 1.0 / std::sqrt(double(fan_in));
  nn::init::uniform_(t, -k, k, g);
}

// ids i64 [B, L] -> one-hot [B, L, V] of dtype dt, on the ids' device.
Tensor one_hot(const Tensor& ids, int64_t V, DType dt) {
  const std::vector<int64_t> iv = ids.to_i64_vector();
  std::vector<double> oh(iv.size() * size_t(V), 0.0);
  for (size_t i = 0; i < iv.size(); ++i) {
    REMORA_CHECK(iv[i] >= 0 && iv[i] < V,
                 "recurrent (input onehot): id " << iv[i] << " is outside the vocabulary [0, " << V << ")");
    oh[i * size_t(V) + size_t(iv[i])] = 1.0;
  }
  return Tensor::from_vector(oh, {ids.size(0), ids.size(1), V}, dt, ids.device());
}

}  // namespace

// ---- RelRNN ----

RelRNNCell::RelRNNCell(int64_t I, int64_t H, int64_t nu, int64_t rho, DType dt, Generator* g)
    : input_size(I), hidden_size(H), short_term(nu), relevant(rho) {
  check_cell_args("RelRNNCell", I, H, nu, rho, dt);
  v = register_parameter("v", Tensor::empty({1, H}, dt));
  U = register_module("U", std::make_shared<nn::Linear>(I, H, true, dt, g));
  V = register_module("V", std::make_shared<nn::Linear>(H, H, false, dt, g));
  Ua = register_module("Ua", std::make_shared<nn::Linear>(H, H, false, dt, g));
  Va = register_module("Va", std::make_shared<nn::Linear>(H, H, false, dt, g));
  reset_parameters(g);
}

void RelRNNCell::reset_parameters(Generator* g) { uniform_all(*this, hidden_size, g); }

RelRNNCell::Output RelRNNCell::forward(const Tensor& x, const Tensor& h0,
                                       const ScreeningOptions& opt) const {
  check_seq("RelRNNCell", x, input_size, v);
  const int64_t B = x.size(0), L = x.size(1), H = hidden_size;
  check_state("RelRNNCell", "h0", h0, B, H);
  if (opt.trace) *opt.trace = ScreeningTrace{};
  std::vector<Tensor> xp = nn::unbind_steps(nn::recurrent_input_projection(x, U->weight, U->bias, Tensor()));  // L x [B, H]
  ScreeningMemory mem(B, H, short_term, relevant, x.dtype(), x.device(), opt);
  Tensor h = h0.defined() ? h0 : Tensor::zeros({B, H}, x.dtype(), x.device());
  Tensor s = h;  // s_0 = h_{-1}: step 0 is a plain RNN step
  std::vector<Tensor> hs;
  for (int64_t t = 0; t < L; ++t) {
    if (t > 0) s = affine(add(h, mem.read(t, linear(s, Va->weight), v)), 0.5, 0);  // ½(h_{t-1} + c_t)
    h = tanh(add(xp[size_t(t)], linear(s, V->weight)));                          // [B, H]
    mem.push(t, h, linear(h, Ua->weight));
    hs.push_back(h);
  }
  return {stack(hs, 1), h};
}

// ---- RelLSTM ----

RelLSTMCell::RelLSTMCell(int64_t I, int64_t H, int64_t nu, int64_t rho, DType dt, Generator* g)
    : input_size(I), hidden_size(H), short_term(nu), relevant(rho) {
  check_cell_args("RelLSTMCell", I, H, nu, rho, dt);
  weight_ih = register_parameter("weight_ih", Tensor::empty({4 * H, I}, dt));
  weight_hh = register_parameter("weight_hh", Tensor::empty({4 * H, H}, dt));
  bias_ih = register_parameter("bias_ih", Tensor::empty({4 * H}, dt));
  bias_hh = register_parameter("bias_hh", Tensor::empty({4 * H}, dt));
  v = register_parameter("v", Tensor::empty({1, H}, dt));
  Ua = register_module("Ua", std::make_shared<nn::Linear>(H, H, false, dt, g));
  Va = register_module("Va", std::make_shared<nn::Linear>(H, H, false, dt, g));
  reset_parameters(g);
}

void RelLSTMCell::reset_parameters(Generator* g) { uniform_all(*this, hidden_size, g); }

RelLSTMCell::Output RelLSTMCell::forward(const Tensor& x, const Tensor& h0, const Tensor& c0,
                                         const ScreeningOptions& opt) const {
  check_seq("RelLSTMCell", x, input_size, v);
  const int64_t B = x.size(0), L = x.size(1), H = hidden_size;
  REMORA_CHECK(h0.defined() == c0.defined(), "RelLSTMCell::forward: give both h0 and c0, or neither");
  check_state("RelLSTMCell", "h0", h0, B, H);
  check_state("RelLSTMCell", "c0", c0, B, H);
  if (opt.trace) *opt.trace = ScreeningTrace{};
  std::vector<Tensor> xp = nn::unbind_steps(nn::recurrent_input_projection(x, weight_ih, bias_ih, bias_hh));  // L x [B, 4H]
  ScreeningMemory mem(B, H, short_term, relevant, x.dtype(), x.device(), opt);
  Tensor h = h0.defined() ? h0 : Tensor::zeros({B, H}, x.dtype(), x.device());
  Tensor c = c0.defined() ? c0 : Tensor::zeros({B, H}, x.dtype(), x.device());
  Tensor s = h;  // s_0 = h_{-1}
  std::vector<Tensor> hs;
  for (int64_t t = 0; t < L; ++t) {
    if (t > 0) s = affine(add(h, mem.read(t, linear(s, Va->weight), v)), 0.5, 0);
    std::tie(h, c) = nn::lstm_step(xp[size_t(t)], s, c, weight_hh);
    mem.push(t, h, linear(h, Ua->weight));
    hs.push_back(h);
  }
  return {stack(hs, 1), h, c};
}

// ---- the official initialisation ----

void official_recurrent_init_(Tensor& w, const std::string& kind, Generator* g) {
  REMORA_CHECK(w.dim() == 2 && w.size(0) == w.size(1), "official_recurrent_init_: w must be square, got " << w.str());
  const int64_t H = w.size(0);
  if (kind == "xavier") {
    xavier_normal(w, H, H, g);
    return;
  }
  if (kind == "kaiming") {
    nn::init::normal_(w, 0, std::sqrt(2.0 / double(H)), g);
    return;
  }
  REMORA_CHECK(kind == "henaff" || kind == "cayley",
               "recurrent_init must be \"henaff\", \"cayley\", \"xavier\" or \"kaiming\", got \"" << kind << "\"");
  // expm of the skew matrix with A[2k, 2k+1] = θ_k = -A[2k+1, 2k]: 2x2 blocks
  // [[cos θ, sin θ], [-sin θ, cos θ]] on the diagonal (common.py create_diag).
  const double pi = std::acos(-1.0);
  std::vector<double> m(size_t(H * H), 0.0);
  const int64_t nb = H / 2;
  std::vector<double> u;
  if (nb > 0) {
    Tensor draw = Tensor::empty({nb}, DType::f64);
    if (kind == "henaff")
      nn::init::uniform_(draw, -pi, 0, g);
    else
      nn::init::uniform_(draw, 0, pi / 2, g);
    u = draw.to_vector();
  }
  for (int64_t k = 0; k < nb; ++k) {
    const double th = kind == "henaff" ? u[size_t(k)] : -std::tan(u[size_t(k)] / 2);  // = -sqrt((1-cos)/(1+cos))
    const int64_t i = 2 * k;
    m[size_t(i * H + i)] = std::cos(th);
    m[size_t(i * H + i + 1)] = std::sin(th);
    m[size_t((i + 1) * H + i)] = -std::sin(th);
    m[size_t((i + 1) * H + i + 1)] = std::cos(th);
  }
  if (H % 2 == 1) m[size_t(H * H - 1)] = 1.0;
  NoGradGuard ng;
  w.copy_(Tensor::from_vector(m, {H, H}, w.dtype(), w.device()));
}

void RecurrentLM::official_init(Generator* g) {
  const int64_t H = cfg.d_model, I = cfg.input_width();
  const std::string& ri = cfg.recurrent_init;
  const std::string& ii = cfg.input_init;
  if (rnn) {
    for (int64_t l = 0; l < cfg.n_layer; ++l) {
      const int64_t Il = l == 0 ? I : H;
      input_weight(rnn->weight_ih[size_t(l)], ii, Il, H, g);
      official_recurrent_init_(rnn->weight_hh[size_t(l)], ri, g);
      if (rnn->bias_ih[size_t(l)].defined()) bound_uniform(rnn->bias_ih[size_t(l)], Il, g);
      if (rnn->bias_hh[size_t(l)].defined()) nn::init::zeros_(rnn->bias_hh[size_t(l)]);
    }
  } else if (lstm) {
    for (int64_t l = 0; l < cfg.n_layer; ++l) {
      const int64_t Il = l == 0 ? I : H;
      xavier_normal(lstm->weight_ih[size_t(l)], Il + H, H, g);
      xavier_normal(lstm->weight_hh[size_t(l)], Il + H, H, g);
      if (lstm->bias_ih[size_t(l)].defined()) bound_uniform(lstm->bias_ih[size_t(l)], Il + H, g);
      if (lstm->bias_hh[size_t(l)].defined()) nn::init::zeros_(lstm->bias_hh[size_t(l)]);
    }
  } else if (relrnn) {
    input_weight(relrnn->U->weight, ii, I, H, g);
    bound_uniform(relrnn->U->bias, I, g);
    official_recurrent_init_(relrnn->V->weight, ri, g);
    bound_uniform(relrnn->Ua->weight, H, g);
    bound_uniform(relrnn->Va->weight, H, g);
    xavier_normal(relrnn->v, H, 1, g);
  } else {
    xavier_normal(rellstm->weight_ih, I + H, H, g);
    xavier_normal(rellstm->weight_hh, I + H, H, g);
    bound_uniform(rellstm->bias_ih, I + H, g);
    nn::init::zeros_(rellstm->bias_hh);
    bound_uniform(rellstm->Ua->weight, H, g);
    bound_uniform(rellstm->Va->weight, H, g);
    xavier_normal(rellstm->v, H, 1, g);
  }
  if (encoder) {  // PTBtask.py init_weights
    nn::init::uniform_(encoder->weight, -0.1, 0.1, g);
    nn::init::uniform_(decoder->weight, -0.1, 0.1, g);
    nn::init::zeros_(decoder->bias);
  } else {  // copytask.py Model: xavier_normal lin.weight, default bias
    xavier_normal(decoder->weight, H, cfg.out_width(), g);
    bound_uniform(decoder->bias, H, g);
  }
}

// ---- the model ----

double RecurrentConfig::parameter_count() const {
  const double d = double(d_model), L = double(n_layer), V = double(n_token);
  const double out = double(out_width()), g = type == "rnn" || type == "relrnn" ? 1 : 4;
  const double in = input == "onehot" ? V : d;
  double p = (input == "onehot" ? 0 : V * d) + g * (in * d + d * d + 2 * d) + (L - 1) * g * (2 * d * d + 2 * d) +
             out * d + out;
  if (screened()) p += 2 * d * d + 2 * d;
  return p;
}

// Kept for backward: every step's states (training); without gradients the
// relevancy memory of one step at a time.
RecurrentConfig::ActivationBytes RecurrentConfig::activation_bytes(const ActivationShape& s) const {
  const double d = double(d_model), L = double(n_layer), V = double(n_token), out = double(out_width());
  const double g = type == "rnn" || type == "relrnn" ? 1 : 4;
  const double B = double(s.batch), T = double(s.seq_len), steps = s.train ? T : 1;
  ActivationBytes a;
  a.states = 4.0 * (s.train ? 3 : 2) * B * T * L * g * d;
  if (screened()) a.relevancy = 4.0 * 2 * steps * B * double(short_term + relevant) * d;
  if (input == "onehot") a.onehot = 4.0 * B * T * V;
  a.logits = 4.0 * (s.train ? 3 : 2) * B * T * out;
  return a;
}

void RecurrentConfig::validate() const {
  REMORA_CHECK(type == "rnn" || type == "lstm" || type == "relrnn" || type == "rellstm",
               "recurrent: type must be \"rnn\", \"lstm\", \"relrnn\" or \"rellstm\", got \"" << type << "\"");
  REMORA_CHECK(n_token >= 1, "recurrent: n_token must be >= 1, got " << n_token);
  REMORA_CHECK(d_model >= 1, "recurrent: d_model (the hidden size) must be >= 1, got " << d_model);
  REMORA_CHECK(n_layer >= 1, "recurrent: n_layer must be >= 1, got " << n_layer);
  REMORA_CHECK(!screened() || n_layer == 1,
               "recurrent: n_layer must be 1 for type \"" << type << "\" (one screened cell), got " << n_layer);
  if (screened()) {
    REMORA_CHECK(short_term >= 1, "recurrent: short_term (ν) must be >= 1 for type \"" << type
                                                                                        << "\", got " << short_term);
    REMORA_CHECK(relevant >= 0, "recurrent: relevant (ρ) must be >= 0, got " << relevant);
  }
  REMORA_CHECK(dropout >= 0 && dropout < 1, "recurrent: dropout must be in [0, 1), got " << dropout);
  REMORA_CHECK(n_out >= 0, "recurrent: n_out must be >= 0 (0: the vocabulary, n_token), got " << n_out);
  REMORA_CHECK(input == "embedding" || input == "onehot",
               "recurrent: input must be \"embedding\" or \"onehot\", got \"" << input << "\"");
  REMORA_CHECK(init.empty() || init == "uniform" || init == "official",
               "recurrent: init must be \"uniform\" or \"official\" (or empty: the type's default), got \""
                   << init << "\"");
  REMORA_CHECK(recurrent_init == "henaff" || recurrent_init == "cayley" || recurrent_init == "xavier" ||
                   recurrent_init == "kaiming",
               "recurrent: recurrent_init must be \"henaff\", \"cayley\", \"xavier\" or \"kaiming\", got \""
                   << recurrent_init << "\"");
  REMORA_CHECK(input_init == "xavier" || input_init == "kaiming",
               "recurrent: input_init must be \"xavier\" or \"kaiming\", got \"" << input_init << "\"");
}

RecurrentLM::RecurrentLM(const RecurrentConfig& c, DType dt, Generator* g) : cfg(c), gen(g) {
  cfg.validate();
  const int64_t H = c.d_model, I = cfg.input_width();
  if (c.input == "embedding")
    encoder = register_module("encoder", std::make_shared<nn::Embedding>(c.n_token, H, -1, dt, g));
  if (c.type == "rnn")
    rnn = register_module("rnn", std::make_shared<nn::RNN>(I, H, c.n_layer, "tanh", true, c.dropout, dt, g));
  else if (c.type == "lstm")
    lstm = register_module("rnn", std::make_shared<nn::LSTM>(I, H, c.n_layer, true, c.dropout, dt, g));
  else if (c.type == "relrnn")
    relrnn = register_module("rnn", std::make_shared<RelRNNCell>(I, H, c.short_term, c.relevant, dt, g));
  else
    rellstm = register_module("rnn", std::make_shared<RelLSTMCell>(I, H, c.short_term, c.relevant, dt, g));
  decoder = register_module("decoder", std::make_shared<nn::Linear>(H, c.out_width(), true, dt, g));
  if (cfg.resolved_init() == "official") official_init(g);
}

Tensor RecurrentLM::loss(const Tensor& logits, const Tensor& targets) {
  return cross_entropy(logits, targets);
}

RecurrentLM::Output RecurrentLM::forward(const Tensor& ids, const SequenceState& state,
                                         const ScreeningOptions& opt) const {
  REMORA_CHECK(ids.defined() && ids.dtype() == DType::i64 && ids.dim() == 2,
               "recurrent: ids must be i64 [B, L], got " << (ids.defined() ? ids.str() : "undefined"));
  const int64_t B = ids.size(0), H = cfg.d_model, nl = cfg.n_layer;
  const size_t want = cfg.type == "rnn" ? size_t(nl) : cfg.type == "lstm" ? size_t(2 * nl)
                      : cfg.type == "relrnn" ? 1 : 2;
  REMORA_CHECK(state.cells.empty() || state.cells.size() == want,
               "recurrent (" << cfg.type << "): the state has " << state.cells.size() << " cells, expected "
                             << want << " (or none at the start of a stream)");
  for (const Tensor& t : state.cells)
    REMORA_CHECK(t.dim() == 2 && t.size(0) == B && t.size(1) == H,
                 "recurrent (" << cfg.type << "): a carried cell is " << shape_str(t.shape())
                               << ", expected [B, H] = [" << B << ", " << H << "]; the batch size must "
                               << "stay the same along a stream");
  const bool tr = is_training();
  const bool carried = !state.cells.empty();
  auto cell = [&](size_t i) { return carried ? state.cells[i] : Tensor(); };
  Tensor x = encoder ? encoder->forward(ids) : one_hot(ids, cfg.n_token, decoder->weight.dtype());
  x = dropout(x, cfg.dropout, tr, gen);  // [B, L, H] (embedding) or [B, L, V] (onehot)

  Output out;
  Tensor hid;
  if (rnn) {
    Tensor h0 = carried ? stack(state.cells, 0) : Tensor();
    nn::RNN::Output o = rnn->forward(x, h0);
    hid = o.output;
    for (int64_t l = 0; l < nl; ++l) out.state.cells.push_back(o.h_n.select(0, l).detach());
  } else if (lstm) {
    Tensor h0, c0;
    if (carried) {
      std::vector<Tensor> hs, cs;
      for (int64_t l = 0; l < nl; ++l) {
        hs.push_back(state.cells[size_t(2 * l)]);
        cs.push_back(state.cells[size_t(2 * l + 1)]);
      }
      h0 = stack(hs, 0);
      c0 = stack(cs, 0);
    }
    nn::LSTM::Output o = lstm->forward(x, h0, c0);
    hid = o.output;
    for (int64_t l = 0; l < nl; ++l) {
      out.state.cells.push_back(o.h_n.select(0, l).detach());
      out.state.cells.push_back(o.c_n.select(0, l).detach());
    }
  } else if (relrnn) {
    RelRNNCell::Output o = relrnn->forward(x, cell(0), opt);
    hid = o.output;
    out.state.cells.push_back(o.h_n.detach());
  } else {
    RelLSTMCell::Output o = rellstm->forward(x, cell(0), cell(1), opt);
    hid = o.output;
    out.state.cells.push_back(o.h_n.detach());
    out.state.cells.push_back(o.c_n.detach());
  }
  out.hidden = hid;
  out.logits = decoder->forward(dropout(hid, cfg.dropout, tr, gen));  // [B, L, n_out]
  return out;
}

}  // namespace models
}  // namespace remora
