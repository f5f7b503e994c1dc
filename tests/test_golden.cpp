// SPDX-License-Identifier: BSD-3-Clause
// Golden tests: Remora's ops against PyTorch 1.13 (the oracle, DESIGN.md).
//
// tests/data/golden_ops.safetensors is written by tools/goldens/make_goldens.py and
// committed, so this suite never needs PyTorch. For each case C the file holds
// C.in.K (inputs), C.out, C.probe and C.grad.K = d sum(C.out * C.probe) / d C.in.K
// for every float input K. Each case below rebuilds C.out from the inputs with
// Remora's ops; the harness makes the float inputs leaves, backpropagates
// sum(out * probe) and compares the output and every gradient:
//   f64: |a - b| <= 1e-10 (1 + |b|)        f32: |a - b| <= 1e-4 (1 + |b|)
// A new case goes into BOTH tools/goldens/make_goldens.py and kCases below (the
// "coverage" test fails when the two lists differ).
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <remora/remora.h>

using namespace remora;

namespace {

constexpr const char* kGoldenPath = REMORA_TEST_DATA "/golden_ops.safetensors";
constexpr const char* kGoldenVersion = "1";  // must match GOLDEN_VERSION in make_goldens.py
constexpr const char* kRegenHint = "regenerate with /usr/bin/python3 tools/goldens/make_goldens.py";

// ---- the golden file, loaded once ----

struct GoldenFile {
  std::optional<Safetensors> st;
  std::string error;  // empty when st is usable
};

const GoldenFile& golden_file() {
  static const GoldenFile f = [] {
    GoldenFile g;
    try {
      g.st = load_safetensors(kGoldenPath);
    } catch (const std::exception& e) {
      g.error = std::string("cannot load the golden file ") + kGoldenPath + ": " + e.what() +
                "\n  " + kRegenHint;
      return g;
    }
    const auto& md = g.st->metadata;
    auto get = [&](const char* k) {
      auto it = md.find(k);
      return it == md.end() ? std::string("<missing>") : it->second;
    };
    if (get("format") != "remora-golden") {
      g.error = std::string(kGoldenPath) + ": __metadata__.format is '" + get("format") +
                "', expected 'remora-golden' (not a golden file?)\n  " + kRegenHint;
    } else if (get("version") != kGoldenVersion) {
      g.error = std::string(kGoldenPath) + ": stale golden file, version '" + get("version") +
                "' but this test expects '" + kGoldenVersion + "'\n  " + kRegenHint;
    }
    return g;
  }();
  return f;
}

const Safetensors& require_golden() {
  const GoldenFile& f = golden_file();
  if (!f.error.empty()) FAIL(f.error);
  return *f.st;
}

// ---- comparison ----

std::string index_str(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    idx[size_t(d)] = flat % shape[size_t(d)];
    flat /= shape[size_t(d)];
  }
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < idx.size(); ++i) os << (i ? ", " : "") << idx[i];
  os << "]";
  return os.str();
}

// Empty when got matches want; otherwise the first mismatch and a count.
std::string compare(const Tensor& got, const Tensor& want, const std::string& what) {
  std::ostringstream os;
  os.precision(17);
  if (!got.defined()) return what + ": Remora produced no tensor (undefined; no gradient reached it?)";
  if (got.shape() != want.shape())
    return what + ": shape " + shape_str(got.shape()) + " but PyTorch has " + shape_str(want.shape());
  if (got.dtype() != want.dtype())
    return what + ": dtype " + dtype_name(got.dtype()) + " but PyTorch has " + dtype_name(want.dtype());
  const double tol = want.dtype() == DType::f64 ? 1e-10 : 1e-4;
  const std::vector<double> a = got.to_vector(), b = want.to_vector();
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double err = std::abs(a[i] - b[i]), lim = tol * (1 + std::abs(b[i]));
    const bool ok = err <= lim || (a[i] == b[i]);  // equal infinities pass
    if (!ok) {
      if (first < 0) first = int64_t(i);
      ++bad;
      worst = std::max(worst, std::isnan(err) ? INFINITY : err / (1 + std::abs(b[i])));
    }
  }
  if (bad == 0) return "";
  os << what << ": " << bad << " of " << a.size() << " elements differ (tolerance " << tol
     << " relative); first at index " << index_str(first, want.shape()) << ": Remora "
     << a[size_t(first)] << ", PyTorch " << b[size_t(first)] << "; worst |a-b|/(1+|b|) = " << worst;
  return os.str();
}

// ---- the cases ----

// The inputs of one case by key, with a clear error for a missing key.
struct Inputs {
  std::string case_name;
  std::map<std::string, Tensor> t;
  const Tensor& operator[](const std::string& k) const {
    auto it = t.find(k);
    REMORA_CHECK(it != t.end(), "golden case '" << case_name << "' has no input '" << k
                                                << "' in the file; " << kRegenHint);
    return it->second;
  }
};

using CaseFn = std::function<Tensor(const Inputs&)>;
struct GoldenCase {
  const char* family;
  const char* name;
  CaseFn fn;
};

Tensor mlp_block(const Inputs& in) {
  // x [B, T, D]: x + W2 gelu(W1 LN(x) + b1) + b2
  Tensor h = layer_norm(in["x"], in["ln_w"], in["ln_b"], 1e-5);
  h = gelu(linear(h, in["w1"], in["b1"]));
  return in["x"] + linear(h, in["w2"], in["b2"]);
}

Tensor causal_attention(const Inputs& in) {
  // q, k, v [B, T, d]; one head, then cross-entropy of the output rows against target [B, T].
  const Tensor &q = in["q"], &k = in["k"], &v = in["v"];
  const int64_t T = q.size(-2), d = q.size(-1);
  Tensor s = matmul(q, k.transpose(-2, -1)) / std::sqrt(double(d));      // [B, T, T]
  Tensor causal = triu(Tensor::ones({T, T}, q.dtype()), 1);               // 1 above the diagonal
  Tensor p = softmax(masked_fill(s, causal, -std::numeric_limits<double>::infinity()), -1);
  Tensor o = matmul(p, v);                                                // [B, T, d]
  return cross_entropy(o.reshape({-1, d}), in["target"].reshape({-1}), -100, Reduction::mean);
}

const std::vector<GoldenCase>& cases() {
  using I = const Inputs&;
  static const std::vector<GoldenCase> v = {
      // elementwise with broadcasting
      {"elementwise", "add_bcast", [](I in) { return in["a"] + in["b"]; }},
      {"elementwise", "add_bcast_f32", [](I in) { return in["a"] + in["b"]; }},
      {"elementwise", "add_bcast_both", [](I in) { return add(in["a"], in["b"]); }},
      {"elementwise", "mul_bcast", [](I in) { return in["a"] * in["b"]; }},
      {"elementwise", "mul_bcast_f32", [](I in) { return in["a"] * in["b"]; }},
      {"elementwise", "sub_bcast", [](I in) { return in["a"] - in["b"]; }},
      {"elementwise", "sub_bcast_rank", [](I in) { return sub(in["a"], in["b"]); }},
      {"elementwise", "div_bcast", [](I in) { return in["a"] / in["b"]; }},
      {"elementwise", "div_bcast_num", [](I in) { return div(in["a"], in["b"]); }},
      {"elementwise", "scalar_ops",
       [](I in) { return (2.5 * in["x"] - 1.0) / 4.0 + 3.0 - in["x"] * 0.5; }},
      // unary
      {"unary", "pow_2_5", [](I in) { return pow(in["x"], 2.5); }},
      {"unary", "pow_3", [](I in) { return in["x"].pow(3.0); }},
      {"unary", "pow_neg_half", [](I in) { return pow(in["x"], -0.5); }},
      {"unary", "exp", [](I in) { return exp(in["x"]); }},
      {"unary", "log", [](I in) { return log(in["x"]); }},
      {"unary", "sqrt", [](I in) { return sqrt(in["x"]); }},
      {"unary", "tanh", [](I in) { return tanh(in["x"]); }},
      {"unary", "sigmoid", [](I in) { return sigmoid(in["x"]); }},
      {"unary", "relu", [](I in) { return relu(in["x"]); }},
      {"unary", "gelu", [](I in) { return gelu(in["x"]); }},
      {"unary", "gelu_f32", [](I in) { return gelu(in["x"]); }},
      // reductions
      {"reduce", "sum_all", [](I in) { return sum(in["x"]); }},
      {"reduce", "sum_dim1", [](I in) { return sum(in["x"], {1}); }},
      {"reduce", "sum_dims02_keepdim", [](I in) { return sum(in["x"], {0, 2}, true); }},
      {"reduce", "mean_all", [](I in) { return mean(in["x"]); }},
      {"reduce", "mean_dim_last", [](I in) { return mean(in["x"], {-1}); }},
      {"reduce", "mean_dims01_keepdim", [](I in) { return in["x"].mean({0, 1}, true); }},
      {"reduce", "max_dim1", [](I in) { return max(in["x"], 1); }},
      {"reduce", "max_dim0_keepdim", [](I in) { return max(in["x"], 0, true); }},
      // linear algebra
      {"matmul", "matmul_2d", [](I in) { return matmul(in["a"], in["b"]); }},
      {"matmul", "matmul_batched", [](I in) { return matmul(in["a"], in["b"]); }},
      {"matmul", "matmul_batched_f32", [](I in) { return matmul(in["a"], in["b"]); }},
      {"matmul", "matmul_bcast_batch", [](I in) { return matmul(in["a"], in["b"]); }},
      {"matmul", "matmul_bcast_2d", [](I in) { return in["a"].matmul(in["b"]); }},
      {"matmul", "matmul_tviews", [](I in) { return matmul(in["a"].t(), in["b"].t()); }},
      {"matmul", "linear", [](I in) { return linear(in["x"], in["w"], in["b"]); }},
      // shape ops
      {"shape", "transpose_contig", [](I in) { return in["x"].transpose(0, 2).contiguous(); }},
      {"shape", "permute_contig", [](I in) { return in["x"].permute({2, 0, 1}).contiguous(); }},
      {"shape", "reshape_view", [](I in) { return in["x"].transpose(1, 2).reshape({2, 12}); }},
      {"shape", "slice_dim0", [](I in) { return in["x"].slice(0, 1, 4); }},
      {"shape", "slice_step", [](I in) { return slice(in["x"], 1, 1, 6, 2); }},
      {"shape", "cat_dim1", [](I in) { return cat({in["a"], in["b"], in["c"]}, 1); }},
      {"shape", "cat_dim0", [](I in) { return cat({in["a"], in["b"]}, 0); }},
      {"shape", "stack_dim0", [](I in) { return stack({in["a"], in["b"], in["c"]}, 0); }},
      {"shape", "stack_dim_last", [](I in) { return stack({in["a"], in["b"]}, -1); }},
      {"shape", "index_select_dim0", [](I in) { return index_select(in["x"], 0, in["idx"]); }},
      {"shape", "index_select_dim1", [](I in) { return index_select(in["x"], 1, in["idx"]); }},
      {"shape", "embedding", [](I in) { return embedding(in["w"], in["ids"]); }},
      {"shape", "embedding_pad", [](I in) { return embedding(in["w"], in["ids"], 0); }},
      {"shape", "masked_fill", [](I in) { return masked_fill(in["x"], in["mask"], -2.5); }},
      {"shape", "masked_fill_bcast", [](I in) { return masked_fill(in["x"], in["mask"], 0.75); }},
      {"shape", "where", [](I in) { return where(in["cond"], in["a"], in["b"]); }},
      // neural-network ops
      {"nn", "softmax_last", [](I in) { return softmax(in["x"], -1); }},
      {"nn", "softmax_last_f32", [](I in) { return in["x"].softmax(-1); }},
      {"nn", "softmax_dim0", [](I in) { return softmax(in["x"], 0); }},
      {"nn", "log_softmax_last", [](I in) { return log_softmax(in["x"], -1); }},
      {"nn", "log_softmax_dim1", [](I in) { return log_softmax(in["x"], 1); }},
      {"nn", "layer_norm", [](I in) { return layer_norm(in["x"], in["w"], in["b"], 1e-5); }},
      {"nn", "layer_norm_f32", [](I in) { return layer_norm(in["x"], in["w"], in["b"], 1e-5); }},
      {"nn", "cross_entropy_mean",
       [](I in) { return cross_entropy(in["logits"], in["target"], -100, Reduction::mean); }},
      {"nn", "cross_entropy_mean_f32",
       [](I in) { return cross_entropy(in["logits"], in["target"], -100, Reduction::mean); }},
      {"nn", "cross_entropy_sum",
       [](I in) { return cross_entropy(in["logits"], in["target"], -100, Reduction::sum); }},
      {"nn", "cross_entropy_none",
       [](I in) { return cross_entropy(in["logits"], in["target"], -100, Reduction::none); }},
      // logits [2, 3, 5], target [2, 3]: Remora's [..., C] form
      {"nn", "cross_entropy_3d", [](I in) { return cross_entropy(in["logits"], in["target"]); }},
      // composites
      {"composite", "mlp_block", mlp_block},
      {"composite", "mlp_block_f32", mlp_block},
      {"composite", "causal_attention", causal_attention},
      {"composite", "causal_attention_f32", causal_attention},
      // non-contiguous views, reused inputs (gradients summed), conversions
      {"views", "reuse_input",
       [](I in) {
         const Tensor &x = in["x"], &y = in["y"];
         return x * x + x * y - y / (1.5 + x.tanh());
       }},
      {"views", "scalar_div_tensor", [](I in) { return 2.0 / in["x"]; }},
      {"views", "tanh_on_tview", [](I in) { return tanh(in["x"].t()); }},
      {"views", "add_tviews", [](I in) { return in["a"].t() + in["b"]; }},
      {"views", "sum_on_permuted", [](I in) { return sum(in["x"].permute({2, 0, 1}), {1}); }},
      {"views", "softmax_on_tview", [](I in) { return softmax(in["x"].t(), -1); }},
      {"views", "layer_norm_on_tview",
       [](I in) { return layer_norm(in["x"].transpose(-1, -2), in["w"], in["b"], 1e-5); }},
      {"views", "cross_entropy_on_tview",
       [](I in) { return cross_entropy(in["logits"].t(), in["target"]); }},
      {"views", "matmul_expanded", [](I in) { return matmul(in["a"].expand({3, 4}), in["b"]); }},
      {"views", "softmax_large_logits", [](I in) { return softmax(in["x"], -1); }},
      {"views", "log_softmax_large_logits", [](I in) { return log_softmax(in["x"], -1); }},
      {"views", "where_bcast_cond", [](I in) { return where(in["cond"], in["a"], in["b"]); }},
      {"views", "to_f32", [](I in) { return in["x"].to(DType::f32); }},
      {"views", "chunk_cat",
       [](I in) {
         std::vector<Tensor> c = chunk(in["x"], 3, 1);
         return cat({c[2], c[1], c[0]}, 0);
       }},
      // more unary/binary ops, and points where a formula needs care
      {"unary", "abs", [](I in) { return abs(in["x"]); }},
      {"unary", "pow_0", [](I in) { return pow(in["x"], 0.0); }},
      {"unary", "pow_1", [](I in) { return pow(in["x"], 1.0); }},
      {"unary", "pow_2", [](I in) { return pow(in["x"], 2.0); }},
      {"unary", "neg", [](I in) { return -in["x"]; }},
      {"elementwise", "maximum", [](I in) { return maximum(in["a"], in["b"]); }},
      {"elementwise", "minimum", [](I in) { return minimum(in["a"], in["b"]); }},
      {"nn", "layer_norm_noaffine",
       [](I in) { return layer_norm(in["x"], Tensor(), Tensor(), 1e-5); }},
      {"nn", "cross_entropy_ignore2",
       [](I in) { return cross_entropy(in["logits"], in["target"], 2, Reduction::mean); }},
      {"matmul", "matmul_vec_mat", [](I in) { return matmul(in["a"], in["b"]); }},
      {"matmul", "matmul_bmat_vec", [](I in) { return matmul(in["a"], in["b"]); }},
      {"matmul", "matmul_vec_bmat", [](I in) { return matmul(in["a"], in["b"]); }},
      {"matmul", "matmul_dot", [](I in) { return matmul(in["a"], in["b"]); }},
  };
  return v;
}

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// Rebuilds one case, backpropagates sum(out * probe) and compares everything.
void run_case(const Safetensors& g, const GoldenCase& c) {
  const std::string name = c.name, in_prefix = name + ".in.";
  Inputs in;
  in.case_name = name;
  std::vector<std::string> float_keys;
  for (const auto& kv : g.tensors) {
    if (!starts_with(kv.first, in_prefix)) continue;
    const std::string key = kv.first.substr(in_prefix.size());
    Tensor x = kv.second.detach().clone();  // a fresh leaf per run
    if (is_floating(x.dtype())) {
      x.requires_grad_();
      float_keys.push_back(key);
    }
    in.t[key] = x;
  }
  INFO("golden case '" << name << "'; " << kRegenHint << " if the file is stale");
  REQUIRE(!in.t.empty());
  REQUIRE(g.contains(name + ".out"));
  REQUIRE(g.contains(name + ".probe"));

  Tensor out;
  try {
    out = c.fn(in);
  } catch (const std::exception& e) {
    FAIL("forward threw: " << e.what());
  }
  const std::string out_msg = compare(out, g.get(name + ".out"), name + ".out");
  {
    INFO(out_msg);
    CHECK(out_msg.empty());
  }
  if (!out_msg.empty() && out.shape() != g.get(name + ".out").shape()) return;

  try {
    sum(mul(out, g.get(name + ".probe"))).backward();
  } catch (const std::exception& e) {
    FAIL("backward threw: " << e.what());
  }
  for (const std::string& k : float_keys) {
    const std::string gname = name + ".grad." + k;
    INFO(gname);
    REQUIRE(g.contains(gname));
    const std::string msg = compare(in[k].grad(), g.get(gname), gname);
    INFO(msg);
    CHECK(msg.empty());
  }
}

void run_family(const char* family) {
  const Safetensors& g = require_golden();
  int n = 0;
  for (const GoldenCase& c : cases()) {
    if (std::string(c.family) != family) continue;
    ++n;
    DYNAMIC_SECTION(c.name) { run_case(g, c); }
  }
  CHECK(n > 0);
}

}  // namespace

TEST_CASE("golden file: format, version, and every case has a C++ counterpart", "[golden]") {
  const Safetensors& g = require_golden();
  INFO("golden file made with torch " << g.metadata.at("torch"));
  REQUIRE(g.metadata.count("cases") == 1);
  std::set<std::string> in_file, in_cpp;
  std::stringstream ss(g.metadata.at("cases"));
  for (std::string s; std::getline(ss, s, ',');) in_file.insert(s);
  for (const GoldenCase& c : cases()) CHECK(in_cpp.insert(c.name).second);  // no duplicates
  for (const std::string& s : in_file) {
    INFO("case '" << s << "' is in the golden file but not in tests/test_golden.cpp");
    CHECK(in_cpp.count(s) == 1);
  }
  for (const std::string& s : in_cpp) {
    INFO("case '" << s << "' is in tests/test_golden.cpp but not in the golden file; "
                  << kRegenHint);
    CHECK(in_file.count(s) == 1);
  }
}

TEST_CASE("golden: elementwise ops with broadcasting match PyTorch", "[golden]") {
  run_family("elementwise");
}
TEST_CASE("golden: unary ops match PyTorch", "[golden]") { run_family("unary"); }
TEST_CASE("golden: reductions match PyTorch", "[golden]") { run_family("reduce"); }
TEST_CASE("golden: matmul and linear match PyTorch", "[golden]") { run_family("matmul"); }
TEST_CASE("golden: shape, indexing and masking ops match PyTorch", "[golden]") {
  run_family("shape");
}
TEST_CASE("golden: softmax, layer_norm and cross_entropy match PyTorch", "[golden]") {
  run_family("nn");
}
TEST_CASE("golden: MLP block and causal attention match PyTorch", "[golden]") {
  run_family("composite");
}
TEST_CASE("golden: ops on views, reused inputs and conversions match PyTorch", "[golden]") {
  run_family("views");
}

TEST_CASE("golden: the comparison reports the first mismatch", "[golden]") {
  Tensor want = Tensor::from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}, DType::f64);
  CHECK(compare(want.clone(), want, "x").empty());
  Tensor got = Tensor::from_vector(std::vector<double>{1, 2, 3 + 1e-8, 4}, {2, 2}, DType::f64);
  const std::string msg = compare(got, want, "x");
  CHECK(msg.find("index [1, 0]") != std::string::npos);
  CHECK(msg.find("1 of 4") != std::string::npos);
  // 1e-11 relative passes in f64
  Tensor close = Tensor::from_vector(std::vector<double>{1, 2, 3 * (1 + 1e-11), 4}, {2, 2}, DType::f64);
  CHECK(compare(close, want, "x").empty());
}
