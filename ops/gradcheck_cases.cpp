// The float64 gradient-check cases of every differentiable op, including
// broadcasting and non-contiguous inputs. `remora gradcheck` and the test
// suite both run this list.
#include <functional>
#include <limits>

#include "../core/generator.h"
#include "gradcheck.h"
#include "ops.h"
#include "rem.h"

namespace remora {

namespace {

using Inputs = std::vector<Tensor>;
using Maker = std::function<Inputs(Generator&)>;

// A leaf N(0,1) (or U[lo, hi) when lo < hi) in f64 that requires grad.
Tensor leaf(Generator& g, const Shape& s, double lo = 0, double hi = 0) {
  Tensor t = lo < hi ? Tensor::rand(s, DType::f64, Device::cpu(), &g) * (hi - lo) + lo
                     : Tensor::randn(s, DType::f64, Device::cpu(), &g);
  return t.detach().requires_grad_();
}

// A non-contiguous leaf of shape s: the transpose of a [s reversed] buffer.
Tensor strided_leaf(Generator& g, const Shape& s, double lo = 0, double hi = 0) {
  Shape rev(s.rbegin(), s.rend()), perm;
  for (int64_t i = int64_t(s.size()) - 1; i >= 0; --i) perm.push_back(i);
  Tensor base = leaf(g, rev, lo, hi).detach();
  return base.permute(perm).detach().requires_grad_();
}

// Values bounded away from zero (for relu and abs kinks): sign * U[0.2, 1.5).
Tensor away_from_zero(Generator& g, const Shape& s) {
  Tensor mag = Tensor::rand(s, DType::f64, Device::cpu(), &g) * 1.3 + 0.2;
  Tensor sign = Tensor::rand(s, DType::f64, Device::cpu(), &g);
  Tensor x = where(gt(sign, Tensor::scalar(0.5, DType::f64)), mag, neg(mag));
  return x.detach().requires_grad_();
}

Tensor ids(const std::vector<int64_t>& v, const Shape& s = {}) {
  return Tensor::from_vector(v, s, DType::i64);
}

void add(const char* op, const std::string& variant, Maker make, GradFn fn,
         GradcheckOptions opt = {}) {
  const std::string name = std::string(op) + "/" + variant;
  const uint64_t seed = std::hash<std::string>{}(name);
  register_gradcheck({op, name,
                      [make, seed]() {
                        Generator g(seed);
                        return make(g);
                      },
                      std::move(fn), opt});
}

void elementwise_cases() {
  add("add", "same_shape", [](Generator& g) { return Inputs{leaf(g, {3, 4}), leaf(g, {3, 4})}; },
      [](const Inputs& x) { return x[0] + x[1]; });
  add("add", "broadcast", [](Generator& g) { return Inputs{leaf(g, {3, 1, 4}), leaf(g, {2, 4})}; },
      [](const Inputs& x) { return x[0] + x[1]; });
  add("add", "noncontiguous",
      [](Generator& g) { return Inputs{strided_leaf(g, {3, 4}), leaf(g, {4})}; },
      [](const Inputs& x) { return x[0] + x[1]; });
  add("sub", "broadcast", [](Generator& g) { return Inputs{leaf(g, {2, 3}), leaf(g, {3, 2, 1})}; },
      [](const Inputs& x) { return x[0] - x[1]; });
  add("mul", "broadcast", [](Generator& g) { return Inputs{leaf(g, {2, 3, 4}), leaf(g, {3, 1})}; },
      [](const Inputs& x) { return x[0] * x[1]; });
  add("mul", "noncontiguous",
      [](Generator& g) { return Inputs{strided_leaf(g, {2, 3, 4}), strided_leaf(g, {2, 3, 4})}; },
      [](const Inputs& x) { return x[0] * x[1]; });
  add("mul", "same_input", [](Generator& g) { return Inputs{leaf(g, {5})}; },
      [](const Inputs& x) { return x[0] * x[0]; });
  add("div", "broadcast",
      [](Generator& g) { return Inputs{leaf(g, {2, 3}), leaf(g, {3}, 0.5, 2.0)}; },
      [](const Inputs& x) { return x[0] / x[1]; });
  add("div", "scalar_numerator", [](Generator& g) { return Inputs{leaf(g, {4}, 0.5, 2.0)}; },
      [](const Inputs& x) { return 2.0 / x[0]; });
  add("maximum", "broadcast", [](Generator& g) { return Inputs{leaf(g, {3, 4}), leaf(g, {4})}; },
      [](const Inputs& x) { return maximum(x[0], x[1]); });
  add("minimum", "broadcast", [](Generator& g) { return Inputs{leaf(g, {3, 4}), leaf(g, {3, 1})}; },
      [](const Inputs& x) { return minimum(x[0], x[1]); });
  add("affine", "scalars", [](Generator& g) { return Inputs{strided_leaf(g, {3, 2})}; },
      [](const Inputs& x) { return 3.0 - x[0] * 2.0 + 1.0; });
  add("neg", "basic", [](Generator& g) { return Inputs{leaf(g, {4})}; },
      [](const Inputs& x) { return -x[0]; });
  add("pow", "fractional", [](Generator& g) { return Inputs{leaf(g, {3, 3}, 0.5, 2.0)}; },
      [](const Inputs& x) { return pow(x[0], 2.5); });
  add("pow", "cube", [](Generator& g) { return Inputs{leaf(g, {6})}; },
      [](const Inputs& x) { return pow(x[0], 3.0); });
  add("exp", "basic", [](Generator& g) { return Inputs{strided_leaf(g, {3, 4})}; },
      [](const Inputs& x) { return exp(x[0]); });
  add("log", "basic", [](Generator& g) { return Inputs{leaf(g, {3, 4}, 0.3, 3.0)}; },
      [](const Inputs& x) { return log(x[0]); });
  add("sqrt", "basic", [](Generator& g) { return Inputs{leaf(g, {3, 4}, 0.3, 3.0)}; },
      [](const Inputs& x) { return sqrt(x[0]); });
  add("tanh", "basic", [](Generator& g) { return Inputs{strided_leaf(g, {3, 4})}; },
      [](const Inputs& x) { return tanh(x[0]); });
  add("sigmoid", "basic", [](Generator& g) { return Inputs{leaf(g, {3, 4}, -6, 6)}; },
      [](const Inputs& x) { return sigmoid(x[0]); });
  add("relu", "basic", [](Generator& g) { return Inputs{away_from_zero(g, {3, 4})}; },
      [](const Inputs& x) { return relu(x[0]); });
  add("gelu", "basic", [](Generator& g) { return Inputs{leaf(g, {3, 4}, -4, 4)}; },
      [](const Inputs& x) { return gelu(x[0]); });
  add("abs", "basic", [](Generator& g) { return Inputs{away_from_zero(g, {5})}; },
      [](const Inputs& x) { return abs(x[0]); });
  add("where", "broadcast",
      [](Generator& g) {
        return Inputs{ids({1, 0, 1, 1}, {4}).to(DType::f64), leaf(g, {3, 4}), leaf(g, {3, 1})};
      },
      [](const Inputs& x) { return where(x[0], x[1], x[2]); });
  add("masked_fill", "broadcast_mask",
      [](Generator& g) { return Inputs{leaf(g, {2, 3, 4}), ids({0, 1, 0, 0, 1, 1}, {2, 3, 1})}; },
      [](const Inputs& x) { return masked_fill(x[0], x[1], -7.0); });
}

void reduction_cases() {
  add("sum", "all", [](Generator& g) { return Inputs{strided_leaf(g, {3, 4})}; },
      [](const Inputs& x) { return sum(x[0]); });
  add("sum", "dim_keepdim", [](Generator& g) { return Inputs{leaf(g, {2, 3, 4})}; },
      [](const Inputs& x) { return sum(x[0], {1}, true); });
  add("sum", "scattered_dims", [](Generator& g) { return Inputs{strided_leaf(g, {2, 3, 4})}; },
      [](const Inputs& x) { return sum(x[0], {0, 2}); });
  add("mean", "dims", [](Generator& g) { return Inputs{leaf(g, {2, 3, 4})}; },
      [](const Inputs& x) { return mean(x[0], {-1}); });
  add("max", "dim", [](Generator& g) { return Inputs{leaf(g, {3, 5})}; },
      [](const Inputs& x) { return max(x[0], 1); });
  add("max", "dim0_keepdim", [](Generator& g) { return Inputs{strided_leaf(g, {4, 3})}; },
      [](const Inputs& x) { return max(x[0], 0, true); });
  add("min", "dim", [](Generator& g) { return Inputs{leaf(g, {3, 5})}; },
      [](const Inputs& x) { return min(x[0], -1); });
}

void linalg_cases() {
  add("matmul", "2d", [](Generator& g) { return Inputs{leaf(g, {3, 4}), leaf(g, {4, 5})}; },
      [](const Inputs& x) { return matmul(x[0], x[1]); });
  add("matmul", "batched", [](Generator& g) { return Inputs{leaf(g, {2, 3, 4}), leaf(g, {2, 4, 2})}; },
      [](const Inputs& x) { return matmul(x[0], x[1]); });
  add("matmul", "broadcast_batch",
      [](Generator& g) { return Inputs{leaf(g, {2, 1, 3, 4}), leaf(g, {3, 4, 2})}; },
      [](const Inputs& x) { return matmul(x[0], x[1]); });
  add("matmul", "shared_rhs", [](Generator& g) { return Inputs{leaf(g, {2, 3, 4}), leaf(g, {4, 3})}; },
      [](const Inputs& x) { return matmul(x[0], x[1]); });
  add("matmul", "transposed_operands",
      [](Generator& g) { return Inputs{strided_leaf(g, {3, 4}), strided_leaf(g, {4, 2})}; },
      [](const Inputs& x) { return matmul(x[0], x[1]); });
  add("matmul", "vectors", [](Generator& g) { return Inputs{leaf(g, {4}), leaf(g, {2, 4, 3})}; },
      [](const Inputs& x) { return matmul(x[0], x[1]); });
  add("linear", "bias",
      [](Generator& g) { return Inputs{leaf(g, {2, 3, 4}), leaf(g, {5, 4}), leaf(g, {5})}; },
      [](const Inputs& x) { return linear(x[0], x[1], x[2]); });
}

void shape_cases() {
  add("reshape", "view", [](Generator& g) { return Inputs{leaf(g, {2, 6})}; },
      [](const Inputs& x) { return x[0].reshape({3, -1}) * x[0].reshape({3, 4}); });
  add("reshape", "copy", [](Generator& g) { return Inputs{strided_leaf(g, {3, 4})}; },
      [](const Inputs& x) { return x[0].reshape({12}); });
  add("transpose", "basic", [](Generator& g) { return Inputs{leaf(g, {2, 3, 4})}; },
      [](const Inputs& x) { return x[0].transpose(0, 2) * 2.0; });
  add("permute", "basic", [](Generator& g) { return Inputs{leaf(g, {2, 3, 4})}; },
      [](const Inputs& x) { return x[0].permute({1, 2, 0}).contiguous(); });
  add("slice", "step", [](Generator& g) { return Inputs{leaf(g, {5, 4})}; },
      [](const Inputs& x) { return x[0].slice(0, 1, 5, 2) * x[0].slice(0, -2, 5); });
  add("select", "basic", [](Generator& g) { return Inputs{leaf(g, {3, 4})}; },
      [](const Inputs& x) { return x[0].select(1, -1) + x[0].narrow(0, 1, 2).sum({0}).slice(0, 0, 3); });
  add("expand", "basic", [](Generator& g) { return Inputs{leaf(g, {3, 1})}; },
      [](const Inputs& x) { return x[0].expand({2, 3, 4}).contiguous(); });
  add("unsqueeze", "squeeze", [](Generator& g) { return Inputs{strided_leaf(g, {3, 2})}; },
      [](const Inputs& x) { return x[0].unsqueeze(1).squeeze(1).flatten(); });
  add("as_strided", "relative_shift", [](Generator& g) { return Inputs{leaf(g, {2, 3, 7})}; },
      [](const Inputs& x) {
        // Transformer-XL's rel_shift on a zero-padded [2, 3, 4 + 3] score block.
        return as_strided(x[0], {2, 3, 4}, {21, 6, 1}, 2);
      });
  add("clone", "basic", [](Generator& g) { return Inputs{strided_leaf(g, {2, 3})}; },
      [](const Inputs& x) { return x[0].clone(); });
  add("cat", "dim1", [](Generator& g) { return Inputs{leaf(g, {2, 3}), strided_leaf(g, {2, 2})}; },
      [](const Inputs& x) { return cat({x[0], x[1], x[0]}, 1); });
  add("stack", "dim0", [](Generator& g) { return Inputs{leaf(g, {2, 3}), leaf(g, {2, 3})}; },
      [](const Inputs& x) { return stack({x[0], x[1]}, 0); });
  add("chunk", "uneven", [](Generator& g) { return Inputs{leaf(g, {5, 2})}; },
      [](const Inputs& x) {
        auto c = chunk(x[0], 2, 0);
        return c[0].sum({0}) * c[1].sum({0});
      });
  add("index_select", "duplicates", [](Generator& g) { return Inputs{leaf(g, {4, 3})}; },
      [](const Inputs& x) { return index_select(x[0], 0, ids({3, 0, 3, 1})); });
  add("index_select", "middle_dim", [](Generator& g) { return Inputs{strided_leaf(g, {2, 4, 3})}; },
      [](const Inputs& x) { return index_select(x[0], 1, ids({2, 2, 0})); });
  // (padding_idx rows get no gradient by design, so they are tested in test_ops.)
  add("embedding", "duplicates", [](Generator& g) { return Inputs{leaf(g, {5, 3})}; },
      [](const Inputs& x) { return embedding(x[0], ids({1, 4, 0, 1, 2, 0}, {2, 3})); });
  add("tril", "basic", [](Generator& g) { return Inputs{leaf(g, {2, 3, 4})}; },
      [](const Inputs& x) { return tril(x[0]) + triu(x[0], 1) * 3.0; });
}

void nn_cases() {
  add("softmax", "last_dim", [](Generator& g) { return Inputs{leaf(g, {3, 5})}; },
      [](const Inputs& x) { return softmax(x[0], -1); });
  add("softmax", "dim0_noncontiguous", [](Generator& g) { return Inputs{strided_leaf(g, {4, 3})}; },
      [](const Inputs& x) { return softmax(x[0], 0); });
  add("log_softmax", "last_dim", [](Generator& g) { return Inputs{leaf(g, {3, 5})}; },
      [](const Inputs& x) { return log_softmax(x[0], -1); });
  add("layer_norm", "affine",
      [](Generator& g) { return Inputs{leaf(g, {2, 3, 5}), leaf(g, {5}), leaf(g, {5})}; },
      [](const Inputs& x) { return layer_norm(x[0], x[1], x[2], 1e-5); });
  add("layer_norm", "no_affine", [](Generator& g) { return Inputs{strided_leaf(g, {4, 6})}; },
      [](const Inputs& x) { return layer_norm(x[0], Tensor(), Tensor(), 1e-5); });
  add("dropout", "train", [](Generator& g) { return Inputs{leaf(g, {4, 5})}; },
      [](const Inputs& x) {
        Generator d(1234);  // the same mask on every call
        return dropout(x[0], 0.3, true, &d);
      });
  add("cross_entropy", "mean_ignore", [](Generator& g) { return Inputs{leaf(g, {4, 5})}; },
      [](const Inputs& x) { return cross_entropy(x[0], ids({1, -100, 4, 0}), -100); });
  add("cross_entropy", "sum_3d", [](Generator& g) { return Inputs{strided_leaf(g, {2, 3, 4})}; },
      [](const Inputs& x) {
        return cross_entropy(x[0], ids({0, 3, 2, 1, 1, 0}, {2, 3}), -100, Reduction::sum);
      });
  add("cross_entropy", "none", [](Generator& g) { return Inputs{leaf(g, {3, 4})}; },
      [](const Inputs& x) { return cross_entropy(x[0], ids({3, 0, 2}), -100, Reduction::none); });
}

RemSpec all_kinds(bool masked, int64_t max_distance = 0) {
  RemSpec s;
  s.regular = 1;
  s.cyclic = 1;
  s.dilated_regular = 1;
  s.dilated_cyclic = 1;
  s.dilations = {2, 3};
  s.masked = masked;
  s.max_distance = max_distance;
  return s;  // 6 heads: reg, cos, sin, reg/2, cos/3, sin/3
}

// eta in [-1.5, 1.5] (negative lambda too), nu in [-1, 2], theta in all quadrants.
Inputs rem_params(Generator& g, const RemSpec& s) {
  return Inputs{leaf(g, {s.num_eta()}, -1.5, 1.5), leaf(g, {s.num_cyclic()}, -1.0, 2.0),
                leaf(g, {s.num_cyclic()}, -3.1, 3.1)};
}

void rem_cases() {
  add("rem_matrix", "masked_memory",
      [](Generator& g) { return rem_params(g, all_kinds(true)); },
      [](const Inputs& x) { return rem_matrix(all_kinds(true), x[0], x[1], x[2], 4, 7); });
  add("rem_matrix", "unmasked_padding_max_distance",
      [](Generator& g) { return rem_params(g, all_kinds(false, 4)); },
      [](const Inputs& x) {
        return rem_matrix(all_kinds(false, 4), x[0], x[1], x[2], 5, 5,
                          ids({0, 0, 1, 0, 0, 0, 0, 0, 0, 1}, {2, 5}));
      });
  add("rem_apply", "masked_memory",
      [](Generator& g) {
        Inputs in = rem_params(g, all_kinds(true));
        in.push_back(strided_leaf(g, {2, 6, 7, 2}));
        return in;
      },
      [](const Inputs& x) { return rem_apply(all_kinds(true), x[0], x[1], x[2], x[3], 4); });
  add("rem_apply", "unmasked_padding_max_distance",
      [](Generator& g) {
        Inputs in = rem_params(g, all_kinds(false, 4));
        in.push_back(leaf(g, {2, 6, 6, 2}));
        return in;
      },
      [](const Inputs& x) {
        return rem_apply(all_kinds(false, 4), x[0], x[1], x[2], x[3], 6,
                         ids({0, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0}, {2, 6}));
      });
  add("rem_apply", "carried_state",
      [](Generator& g) {
        Inputs in = rem_params(g, all_kinds(true));
        in.push_back(leaf(g, {1, 6, 5, 2}));
        in.push_back(leaf(g, {1, 6, 3, 2, 2}));  // dmax = 3
        return in;
      },
      [](const Inputs& x) {
        Tensor so;
        return rem_apply(all_kinds(true), x[0], x[1], x[2], x[3], 5, Tensor(), x[4], &so);
      });
  add("gate", "broadcast_mu",
      [](Generator& g) { return Inputs{leaf(g, {2, 3, 4}), leaf(g, {2, 3, 4}), leaf(g, {3, 1})}; },
      [](const Inputs& x) { return gate(x[0], x[1], x[2]); });
  auto rsa_inputs = [](Generator& g, const RemSpec& s, int64_t B, int64_t H, int64_t Lq,
                       int64_t Lk, int64_t D, int64_t n_mu) {
    Inputs in{leaf(g, {B, H, Lq, D}), leaf(g, {B, H, Lk, D}), leaf(g, {B, H, Lk, D})};
    for (Tensor& t : rem_params(g, s)) in.push_back(t);
    in.push_back(leaf(g, {n_mu}, -3, 3));
    return in;
  };
  add("rsa_attention", "causal_memory",
      [rsa_inputs](Generator& g) { return rsa_inputs(g, all_kinds(true), 1, 7, 3, 5, 2, 6); },
      [](const Inputs& x) {
        // Causal over absolute positions: key j is visible to row i when j <= M + i.
        Tensor mask = triu(Tensor::full({3, 5}, -1e300, DType::f64), 3);  // M = 2
        mask = masked_fill(Tensor::zeros({3, 5}, DType::f64), ne(mask, Tensor::zeros({}, DType::f64)),
                           -std::numeric_limits<double>::infinity());
        return rsa_attention(x[0], x[1], x[2], all_kinds(true), x[3], x[4], x[5], x[6], mask);
      });
  add("rsa_attention", "learned_score_bias",
      [rsa_inputs](Generator& g) {
        Inputs in = rsa_inputs(g, all_kinds(true), 1, 6, 3, 4, 2, 6);
        in.push_back(leaf(g, {1, 6, 3, 4}));  // e.g. Transformer-XL's positional scores
        return in;
      },
      [](const Inputs& x) {
        return rsa_attention(x[0], x[1], x[2], all_kinds(true), x[3], x[4], x[5], x[6], x[7]);
      });
  add("rsa_attention", "padding_dropout_layer_gate",
      [rsa_inputs](Generator& g) { return rsa_inputs(g, all_kinds(false), 2, 6, 4, 4, 2, 1); },
      [](const Inputs& x) {
        Generator d(99);
        RsaOptions o;
        o.dropout = 0.25;
        o.train = true;
        o.gen = &d;
        return rsa_attention(x[0], x[1], x[2], all_kinds(false), x[3], x[4], x[5], x[6], Tensor(),
                             ids({0, 0, 0, 1, 0, 1, 0, 0}, {2, 4}), o);
      });
}

}  // namespace

void register_builtin_gradchecks() {
  rem_cases();
  elementwise_cases();
  reduction_cases();
  linalg_cases();
  shape_cases();
  nn_cases();
}

}  // namespace remora
