// SPDX-License-Identifier: BSD-3-Clause
// The libtorch-style nn and optim API: module handles and the call operator,
// containers, activations, losses (modules and nn::functional) against
// hand-computed values, nn::init, module traversal and printing, optimizer
// option builders and parameter groups, LR schedulers against torch's formulas.
#include <catch2/catch.hpp>
#include <cmath>
#include <remora/remora.h>
#include <sstream>

using namespace remora;
namespace F = remora::nn::functional;

namespace {

Tensor vec(std::vector<double> v, const Shape& s = {}, DType dt = DType::f64) {
  return Tensor::from_vector(v, s, dt);
}

// A user module written the libtorch way: an Impl class and a handle.
struct NetImpl : nn::Module {
  NetImpl(int64_t in, int64_t out) {
    fc = register_module("fc", nn::Linear(nn::LinearOptions(in, 8).bias(false)));
    drop = register_module("drop", nn::Dropout(0.5));
    head = register_module("head", nn::Linear(8, out));
    scale = register_parameter("scale", Tensor::ones({out}));
    register_buffer("count", Tensor::zeros({1}));
  }
  std::string type_name() const override { return "Net"; }
  Tensor forward(const Tensor& x) { return head(drop(relu(fc(x)))) * scale; }
  nn::Linear fc{nullptr}, head{nullptr};
  nn::Dropout drop{nullptr};
  Tensor scale;
};
REMORA_MODULE(Net);

}  // namespace

TEST_CASE("module handles: REMORA_MODULE, layer values, fc(x) and fc->forward(x)", "[nn_api]") {
  manual_seed(1);
  nn::Linear fc(nn::LinearOptions(4, 8).bias(false));
  Tensor x = Tensor::randn({3, 4});
  Tensor y = fc(x);
  CHECK(y.shape() == Shape{3, 8});
  CHECK(!fc->bias.defined());
  CHECK(fc->forward(x).to_vector() == y.to_vector());

  Net net(4, 2);
  CHECK(net->named_parameters().keys() ==
        std::vector<std::string>{"scale", "fc.weight", "head.weight", "head.bias"});
  CHECK(net->named_buffers().keys() == std::vector<std::string>{"count"});
  // The member and the registered child are one layer: the same parameter tensors.
  CHECK(net->fc.weight.is_same(net->named_parameters()["fc.weight"]));
  // eval() reaches the member (the dropout becomes the identity).
  net->eval();
  CHECK(!net->drop.is_training());
  CHECK(!net->is_training());
  Tensor a = net(x), b = net->forward(x);
  CHECK(a.to_vector() == b.to_vector());
  net->train();
  CHECK(net->drop.is_training());
  // A copy of the handle shares the module.
  Net same = net;
  CHECK(same.get() == net.get());
  // An empty handle says what is wrong.
  Net empty{nullptr};
  CHECK(empty.is_empty());
  CHECK_THROWS_WITH(empty->forward(x), Catch::Contains("empty module handle"));
  nn::Linear none{nullptr};
  CHECK_THROWS_WITH(none->parameters(), Catch::Contains("empty"));
  // shared_ptr modules keep working beside the handles.
  auto p = std::make_shared<nn::Linear>(4, 2);
  CHECK(p->forward(x).shape() == Shape{3, 2});
}

TEST_CASE("named_parameters is an ordered dict with torch's interface", "[nn_api]") {
  nn::Sequential seq(nn::Linear(2, 3), nn::ReLU(), nn::Linear(3, 1));
  auto np = seq->named_parameters();
  CHECK(np.keys() == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK(np.values().size() == 4);
  CHECK(np.contains("2.bias"));
  CHECK(np.find("1.weight") == nullptr);
  CHECK(np["0.weight"].shape() == Shape{3, 2});
  CHECK(np[size_t(3)].key() == "2.bias");
  CHECK_THROWS_WITH(np["nope"], Catch::Contains("no key 'nope'"));
  std::vector<std::string> names;
  for (const auto& item : np) names.push_back(item.key() + ":" + std::to_string(item.value().numel()));
  CHECK(names == std::vector<std::string>{"0.weight:6", "0.bias:3", "2.weight:3", "2.bias:1"});
  for (auto& [name, t] : np) CHECK(t.requires_grad());
  nn::NamedTensors pairs = seq->named_parameters();  // the older spelling still converts
  CHECK(pairs.size() == 4);
  CHECK(seq->parameters().size() == 4);
  CHECK(seq->children().size() == 3);
  CHECK(seq->named_children().keys() == std::vector<std::string>{"0", "1", "2"});
  CHECK(seq->named_modules().size() == 3);
}

TEST_CASE("Sequential chains forward; ModuleList, ModuleDict and Functional", "[nn_api]") {
  manual_seed(2);
  nn::Sequential seq;
  seq->push_back(nn::Linear(4, 5));
  seq->push_back("act", nn::Tanh());
  seq->push_back(std::make_shared<nn::Linear>(5, 2));
  seq->push_back(nn::Functional(softmax, int64_t(-1)));
  CHECK(seq->size() == 4);
  Tensor x = Tensor::randn({3, 4});
  auto l0 = seq->at<nn::Linear>(0), l2 = seq->at<nn::Linear>(2);
  Tensor want = softmax(l2->forward(tanh(l0->forward(x))), -1);
  Tensor got = seq(x);
  REQUIRE(got.shape() == Shape{3, 2});
  auto g = got.to_vector(), w = want.to_vector();
  for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == Approx(w[i]).epsilon(1e-6));
  CHECK(seq->named_children().keys() == std::vector<std::string>{"0", "act", "2", "3"});
  CHECK_THROWS_WITH(seq->at<nn::Linear>(1), Catch::Contains("is a Tanh"));
  CHECK_THROWS_WITH(nn::Sequential()->forward(x), Catch::Contains("empty"));

  // The named form (torch's NamedAnyModule list).
  nn::Sequential named({{"fc", nn::Linear(4, 3)}, {"act", nn::ReLU()}, {"out", std::make_shared<nn::Linear>(3, 1)}});
  CHECK(named->named_children().keys() == std::vector<std::string>{"fc", "act", "out"});
  CHECK(named(x).shape() == Shape{3, 1});
  CHECK(named->at<nn::Linear>(2)->forward(relu(named->at<nn::Linear>(0)->forward(x))).to_vector() ==
        named(x).to_vector());

  nn::ModuleList list(nn::Linear(2, 2), nn::ReLU());
  list->push_back(std::make_shared<nn::Linear>(2, 3));
  CHECK(list->size() == 3);
  CHECK(list->named_parameters().size() == 4);
  CHECK(list[2]->type_name() == "Linear");

  nn::ModuleDict dict;
  dict->insert("enc", nn::Linear(2, 4));
  dict->insert("dec", std::make_shared<nn::Linear>(4, 2));
  CHECK(dict->keys() == std::vector<std::string>{"enc", "dec"});
  CHECK(dict->contains("dec"));
  CHECK(dict->at<nn::Linear>("dec")->out_features == 2);
  CHECK_THROWS_WITH(dict["nope"], Catch::Contains("no module named 'nope'"));

  nn::Functional twice([](const Tensor& t) { return t * 2.0; });
  CHECK(twice(vec({1.5})).item() == 3.0);
}

TEST_CASE("activation modules: values", "[nn_api]") {
  Tensor x = vec({-1.0, 0.0, 1.0});
  auto at = [](const Tensor& t, size_t i) { return t.to_vector()[i]; };
  CHECK(at(nn::ReLU()(x), 0) == 0.0);
  CHECK(at(nn::GELU()(x), 2) == Approx(0.8413447460685429).epsilon(1e-12));
  CHECK(at(nn::GELU(nn::GELUOptions().approximate("tanh"))(x), 2) == Approx(0.8411919906082768).epsilon(1e-12));
  CHECK(at(nn::SiLU()(x), 2) == Approx(0.7310585786300049).epsilon(1e-12));
  CHECK(at(nn::Sigmoid()(x), 0) == Approx(0.2689414213699951).epsilon(1e-12));
  CHECK(at(nn::Tanh()(x), 2) == Approx(std::tanh(1.0)).epsilon(1e-12));
  CHECK(at(nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2))(x), 0) == Approx(-0.2));
  {
    // The gradient is 1 above 0 and the slope at and below 0, as torch's.
    Tensor xl = vec({-1.0, 0.0, 1.0}).requires_grad_();
    sum(nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2))(xl)).backward();
    CHECK(xl.grad().to_vector() == std::vector<double>{0.2, 0.2, 1.0});
  }
  Tensor p = nn::Softmax(0)(x);
  CHECK(at(p, 0) + at(p, 1) + at(p, 2) == Approx(1.0));
  CHECK(at(nn::LogSoftmax(0)(x), 2) == Approx(std::log(at(p, 2))));
  CHECK(nn::Flatten()(Tensor::zeros({2, 3, 4})).shape() == Shape{2, 12});
  CHECK_THROWS_WITH(nn::GELU(nn::GELUOptions().approximate("fast")), Catch::Contains("approximate"));
}

TEST_CASE("Dropout follows train and eval", "[nn_api]") {
  manual_seed(3);
  nn::Dropout drop(nn::DropoutOptions(0.5));
  Tensor x = Tensor::ones({1000}, DType::f64);
  auto v = drop(x).to_vector();
  int zeros = 0;
  for (double e : v) {
    CHECK((e == 0.0 || e == 2.0));
    zeros += e == 0.0;
  }
  CHECK(zeros > 400);
  CHECK(zeros < 600);
  drop->eval();
  CHECK(drop(x).to_vector() == x.to_vector());
  CHECK(F::dropout(x, F::DropoutFuncOptions().p(0.5).training(false)).to_vector() == x.to_vector());
}

TEST_CASE("regression losses against hand-computed values", "[nn_api][losses]") {
  Tensor in = vec({1, 2, 3}), tg = vec({1, 1, 1});
  CHECK(nn::MSELoss()(in, tg).item() == Approx(5.0 / 3));
  CHECK(nn::MSELoss(nn::MSELossOptions(kSum))(in, tg).item() == Approx(5.0));
  CHECK(F::mse_loss(in, tg, F::MSELossFuncOptions(kNone)).to_vector() == std::vector<double>{0, 1, 4});
  CHECK(nn::L1Loss()(in, tg).item() == Approx(1.0));
  CHECK(F::l1_loss(in, tg, kSum).item() == Approx(3.0));
  // smooth L1, beta 1: d = 0, 1, 2 -> 0, 1 - 0.5, 2 - 0.5; beta 2: 0, 0.5 * 1 / 2, 2 - 1.
  CHECK(nn::SmoothL1Loss()(in, tg).item() == Approx((0 + 0.5 + 1.5) / 3));
  CHECK(F::smooth_l1_loss(in, tg, F::SmoothL1LossFuncOptions().beta(2)).item() == Approx((0 + 0.25 + 1.0) / 3));
  CHECK(F::smooth_l1_loss(vec({0.5}), vec({0.0}), F::SmoothL1LossFuncOptions(kSum).beta(1)).item() ==
        Approx(0.125));
  CHECK_THROWS_WITH(mse_loss(in, vec({1, 1})), Catch::Contains("must have the input's shape"));
  CHECK_THROWS_WITH(mse_loss(in, tg.to(DType::f32)), Catch::Contains("target.to(input.dtype())"));
  CHECK_THROWS_WITH(smooth_l1_loss(in, tg, kMean, 0), Catch::Contains("beta must be > 0"));
}

TEST_CASE("classification losses against hand-computed values", "[nn_api][losses]") {
  // logits [[1, 2, 3], [0, 0, 0]], targets {0, 2}.
  Tensor logits = vec({1, 2, 3, 0, 0, 0}, {2, 3});
  Tensor target = Tensor::from_vector(std::vector<int64_t>{0, 2}, {2});
  const double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), lse1 = std::log(3.0);
  const double nll0 = lse0 - 1, nll1 = lse1;
  CHECK(nn::CrossEntropyLoss()(logits, target).item() == Approx((nll0 + nll1) / 2));
  // Label smoothing eps: (1 - eps) nll + eps / C * sum_c(-log p_c). torch gives
  // 2.3076 for row 0 with eps = 0.1.
  const double eps = 0.1;
  const double smooth0 = 3 * lse0 - 6, smooth1 = 3 * lse1;
  const double row0 = (1 - eps) * nll0 + eps / 3 * smooth0, row1 = (1 - eps) * nll1 + eps / 3 * smooth1;
  CHECK(row0 == Approx(2.3076).epsilon(1e-4));
  nn::CrossEntropyLoss ls(nn::CrossEntropyLossOptions().label_smoothing(eps));
  CHECK(ls(logits, target).item() == Approx((row0 + row1) / 2).epsilon(1e-12));
  CHECK(F::cross_entropy(logits, target, F::CrossEntropyFuncOptions().label_smoothing(eps).reduction(kSum)).item() ==
        Approx(row0 + row1).epsilon(1e-12));
  // ignore_index: the ignored row counts nothing, also in the mean's count.
  Tensor ig = Tensor::from_vector(std::vector<int64_t>{0, -100}, {2});
  CHECK(ls(logits, ig).item() == Approx(row0).epsilon(1e-12));
  CHECK(F::cross_entropy(logits, Tensor::from_vector(std::vector<int64_t>{0, 1}, {2}),
                         F::CrossEntropyFuncOptions().ignore_index(1))
            .item() == Approx(nll0));
  auto none = F::cross_entropy(logits, ig, F::CrossEntropyFuncOptions().label_smoothing(eps).reduction(kNone));
  CHECK(none.to_vector()[1] == 0.0);

  // NLL on log-probabilities: -logp[target], ignore_index left out of the mean.
  Tensor logp = log_softmax(logits, -1);
  CHECK(nn::NLLLoss()(logp, target).item() == Approx((nll0 + nll1) / 2).epsilon(1e-12));
  CHECK(F::nll_loss(logp, ig).item() == Approx(nll0).epsilon(1e-12));
  CHECK(F::nll_loss(logp, target, F::NLLLossFuncOptions().ignore_index(2).reduction(kSum)).item() ==
        Approx(nll0).epsilon(1e-12));
  CHECK_THROWS_WITH(nll_loss(logp, Tensor::from_vector(std::vector<int64_t>{0, 3}, {2})),
                    Catch::Contains("outside [0, 3)"));
  CHECK_THROWS_WITH(nll_loss(logp, Tensor::from_vector(std::vector<int64_t>{0, 1, 1}, {3})),
                    Catch::Contains("LAST dim"));

  // BCE with logits: the module, the functional form and the op agree.
  Tensor bl = vec({-1, 0.5, 2}), by = vec({0, 1, 1});
  // y = 0: log(1 + e^x); y = 1: log(1 + e^-x).
  const double b_exact = (std::log(1 + std::exp(-1.0)) + std::log(1 + std::exp(-0.5)) + std::log(1 + std::exp(-2.0))) / 3;
  CHECK(nn::BCEWithLogitsLoss()(bl, by).item() == Approx(b_exact).epsilon(1e-12));
  CHECK(F::binary_cross_entropy_with_logits(bl, by, kSum).item() == Approx(3 * b_exact).epsilon(1e-12));
}

TEST_CASE("losses: float64 gradients through the modules", "[nn_api][losses][gradcheck]") {
  Generator g(5);
  Tensor x = Tensor::randn({4, 5}, DType::f64, Device::cpu(), &g).requires_grad_();
  Tensor t = Tensor::from_vector(std::vector<int64_t>{1, -100, 4, 0}, {4});
  nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions().label_smoothing(0.2));
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return ce(in[0], t); }, {x});
  CHECK(r.ok);
  Tensor y = Tensor::randn({4, 5}, DType::f64, Device::cpu(), &g).requires_grad_();
  nn::SmoothL1Loss sl(nn::SmoothL1LossOptions().beta(0.5));
  auto r2 = gradcheck([&](const std::vector<Tensor>& in) { return sl(in[0], in[1]); }, {x, y});
  CHECK(r2.ok);
}

TEST_CASE("nn::init as torch spells it", "[nn_api]") {
  Generator g(7);
  Tensor w = Tensor::empty({200, 100});
  const double gain = std::sqrt(2.0);  // kaiming with a = 0: leaky_relu gain sqrt(2 / (1 + 0))
  nn::init::kaiming_uniform_(w, 0, nn::init::kFanIn, nn::init::kLeakyReLU, &g);
  const double bound = gain * std::sqrt(3.0 / 100);
  double mx = 0, sq = 0;
  for (double v : w.to_vector()) {
    mx = std::max(mx, std::abs(v));
    sq += v * v;
  }
  CHECK(mx <= bound);
  CHECK(mx > 0.95 * bound);
  CHECK(std::sqrt(sq / 20000) == Approx(gain / std::sqrt(100.0)).epsilon(0.05));
  nn::init::kaiming_normal_(w, 0, nn::init::kFanOut, nn::init::kReLU, &g);
  sq = 0;
  for (double v : w.to_vector()) sq += v * v;
  CHECK(std::sqrt(sq / 20000) == Approx(std::sqrt(2.0) / std::sqrt(200.0)).epsilon(0.05));
  nn::init::xavier_normal_(w, 1, &g);
  sq = 0;
  for (double v : w.to_vector()) sq += v * v;
  CHECK(std::sqrt(sq / 20000) == Approx(std::sqrt(2.0 / 300)).epsilon(0.05));
  nn::init::xavier_uniform_(w, 1, &g);
  for (double v : w.to_vector()) CHECK(std::abs(v) <= std::sqrt(6.0 / 300));
  nn::init::trunc_normal_(w, 0.5, 1.0, -0.5, 1.0, &g);
  double lo = 1e9, hi = -1e9;
  for (double v : w.to_vector()) lo = std::min(lo, v), hi = std::max(hi, v);
  CHECK(lo >= -0.5);
  CHECK(hi <= 1.0);
  CHECK(lo < -0.45);
  CHECK(hi > 0.95);
  nn::init::normal_(w, 2, 0.5, &g);
  nn::init::uniform_(w, -1, 1, &g);
  nn::init::constant_(w, 0.25);
  CHECK(w.to_vector()[7] == 0.25);
  nn::init::zeros_(w);
  CHECK(w.sum().item() == 0.0);
  nn::init::ones_(w);
  CHECK(w.sum().item() == 20000.0);
  CHECK(nn::init::calculate_gain(nn::init::kTanh) == Approx(5.0 / 3));
  CHECK(nn::init::calculate_gain(nn::init::kLeakyReLU, 0.2) == Approx(std::sqrt(2.0 / 1.04)));
  Tensor one = Tensor::empty({3});
  CHECK_THROWS_WITH(nn::init::kaiming_uniform_(one), Catch::Contains("at least 2 dims"));
}

TEST_CASE("module: to(dtype), buffers, children, modes, zero_grad, printing", "[nn_api]") {
  Net net(4, 2);
  net->to(DType::f64);
  for (const Tensor& p : net->parameters()) CHECK(p.dtype() == DType::f64);
  CHECK(net->fc.weight.dtype() == DType::f64);  // the member sees it
  net->to(Device::cpu());
  CHECK(net->buffers().size() == 1);
  CHECK(net->children().size() == 3);
  Tensor loss = net(Tensor::ones({2, 4}, DType::f64)).sum();
  loss.backward();
  CHECK(net->fc.weight.grad().defined());
  net->zero_grad();
  CHECK(!net->fc.weight.grad().defined());
  std::ostringstream os;
  os << net;
  const std::string s = os.str();
  INFO(s);
  CHECK(s.find("Net(") == 0);
  CHECK(s.find("(scale): Parameter f64[2]") != std::string::npos);
  CHECK(s.find("(fc): Linear(in_features=4, out_features=8, bias=false) {weight: f64[8, 4]}") != std::string::npos);
  CHECK(s.find("(drop): Dropout(p=0.5)") != std::string::npos);
  std::ostringstream os2;
  os2 << *nn::Sequential(nn::Linear(2, 2), nn::ReLU()).ptr();
  CHECK(os2.str() ==
        "Sequential(\n  (0): Linear(in_features=2, out_features=2, bias=true) {weight: f32[2, 2], bias: f32[2]}\n"
        "  (1): ReLU()\n)");
}

TEST_CASE("a Sequential MLP learns a regression", "[nn_api]") {
  manual_seed(11);
  nn::Sequential mlp(nn::Linear(1, 32), nn::Tanh(), nn::Linear(32, 1));
  Tensor x = Tensor::arange(-2.0, 2.0, 0.0625, DType::f32).unsqueeze(1);  // 64 x 1
  Tensor y = sin(x * 1.5);
  optim::Adam opt(mlp->parameters(), optim::AdamOptions(0.02));
  double first = 0, last = 0;
  for (int step = 0; step < 300; ++step) {
    opt.zero_grad();
    Tensor loss = F::mse_loss(mlp(x), y);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item();
  }
  INFO("first " << first << " last " << last);
  CHECK(first > 0.1);
  CHECK(last < 0.005);
}

TEST_CASE("optimizers: torch-style options, param_groups, add_param_group", "[nn_api][optim]") {
  Tensor a = Tensor::ones({2}, DType::f64).requires_grad_(), b = Tensor::ones({3}, DType::f64).requires_grad_();
  optim::Adam adam(std::vector<Tensor>{a}, optim::AdamOptions(1e-3).betas({0.9, 0.98}).weight_decay(0.01));
  auto& o = static_cast<optim::AdamOptions&>(adam.param_groups()[0].options());
  CHECK(std::get<1>(o.betas()) == 0.98);
  CHECK(o.weight_decay() == 0.01);
  CHECK(adam.param_groups().size() == 1);

  // SGD with two groups: each updates with its own lr and momentum.
  optim::SGD sgd({optim::OptimizerParamGroup({a}), optim::OptimizerParamGroup({b}, optim::SGDOptions(0.5))},
                 optim::SGDOptions(0.1).momentum(0.9));
  REQUIRE(sgd.param_groups().size() == 2);
  CHECK(sgd.param_groups()[0].options().get_lr() == 0.1);
  CHECK(static_cast<optim::SGDOptions&>(sgd.param_groups()[0].options()).momentum() == 0.9);
  CHECK(static_cast<optim::SGDOptions&>(sgd.param_groups()[1].options()).momentum() == 0.0);
  for (int s = 0; s < 2; ++s) {
    sgd.zero_grad();
    (a.sum() + b.sum()).backward();  // gradient 1 everywhere
    sgd.step();
  }
  // a: momentum 0.9: buf 1 then 1.9 -> 1 - 0.1 * (1 + 1.9); b: plain, 1 - 2 * 0.5.
  CHECK(a.to_vector()[0] == Approx(1 - 0.1 * 2.9));
  CHECK(b.to_vector()[0] == Approx(0.0));
  CHECK(sgd.lr() == 0.1);
  // state() and load_state() keep each group's rate.
  sgd.param_groups()[1].options().set_lr(0.25);
  auto st = sgd.state();
  optim::SGD other({optim::OptimizerParamGroup({a}), optim::OptimizerParamGroup({b}, optim::SGDOptions(0.5))},
                   optim::SGDOptions(0.1).momentum(0.9));
  other.load_state(st);
  CHECK(other.param_groups()[1].options().get_lr() == 0.25);

  Tensor c = Tensor::ones({1}, DType::f64).requires_grad_();
  optim::AdamW adamw(std::vector<Tensor>{a}, optim::AdamWOptions(1e-2));
  adamw.add_param_group(optim::OptimizerParamGroup({c}, optim::AdamWOptions(1e-1).weight_decay(0)));
  adamw.add_param_group(optim::OptimizerParamGroup({Tensor::ones({1}, DType::f64).requires_grad_()}));
  CHECK(adamw.param_groups().size() == 3);
  CHECK(adamw.param_groups()[2].options().get_lr() == 1e-2);  // the defaults
  CHECK(adamw.params().size() == 3);
  CHECK_THROWS_WITH(adamw.add_param_group(optim::OptimizerParamGroup({c})), Catch::Contains("more than once"));
  CHECK_THROWS_WITH(adamw.add_param_group(optim::OptimizerParamGroup({b}, optim::SGDOptions(0.1))),
                    Catch::Contains("AdamOptions or optim::AdamWOptions"));
  // AdamW's group without weight decay: after one step from grad 0, c moves by lr
  // only through Adam (no decay): c = 1 - 0.1 * sign(g).
  adamw.zero_grad();
  (c * 2.0).sum().backward();
  adamw.step();
  CHECK(c.item() == Approx(1 - 0.1).epsilon(1e-6));
  adamw.set_lr(0.5);
  for (const auto& g : adamw.param_groups()) CHECK(g.options().get_lr() == 0.5);
}

TEST_CASE("RAdam: parameter groups with their own options, the rectified step, option errors", "[nn_api][optim]") {
  Tensor a = Tensor::ones({2}, DType::f64).requires_grad_(), b = Tensor::ones({3}, DType::f64).requires_grad_();
  // a takes the defaults (L2 weight decay); b has its own rate and AdamW-style decay.
  optim::RAdam radam({optim::OptimizerParamGroup({a}),
                      optim::OptimizerParamGroup(
                          {b}, optim::RAdamOptions(0.1).weight_decay(0.5).decoupled_weight_decay(true))},
                     optim::RAdamOptions(0.01).betas(0.9, 0.999).weight_decay(0.1));
  CHECK(radam.type_name() == "RAdam");
  REQUIRE(radam.param_groups().size() == 2);
  const auto& o0 = static_cast<const optim::RAdamOptions&>(radam.param_groups()[0].options());
  CHECK(o0.get_lr() == 0.01);
  CHECK_FALSE(o0.decoupled_weight_decay());
  CHECK(static_cast<const optim::RAdamOptions&>(radam.param_groups()[1].options()).decoupled_weight_decay());
  radam.zero_grad();
  (a.sum() + (b * 2.0).sum()).backward();  // gradients 1 (a) and 2 (b)
  radam.step();
  // Step 1 is a momentum step (rho_1 = 1 <= 5): p -= lr * m / (1 - beta1) = lr * g.
  // a: g = 1 + 0.1 * 1 (L2) -> 1 - 0.01 * 1.1; b: 1 * (1 - 0.1 * 0.5) - 0.1 * 2.
  CHECK(a.to_vector()[0] == Approx(1 - 0.01 * 1.1));
  CHECK(b.to_vector()[0] == Approx(0.95 - 0.2));
  // state() and load_state() keep each group's rate and the moments.
  radam.param_groups()[1].options().set_lr(0.25);
  const auto st = radam.state();
  std::vector<std::string> names;
  for (const auto& kv : st) names.push_back(kv.first);
  CHECK(names == std::vector<std::string>{"step", "lr", "group.1.lr", "0.step", "0.exp_avg", "0.exp_avg_sq",
                                          "1.step", "1.exp_avg", "1.exp_avg_sq"});
  optim::RAdam other({optim::OptimizerParamGroup({a}), optim::OptimizerParamGroup({b}, optim::RAdamOptions(0.1))},
                     optim::RAdamOptions(0.01));
  other.load_state(st);
  CHECK(other.param_groups()[1].options().get_lr() == 0.25);
  CHECK(other.steps_taken() == 1);
  CHECK_THROWS_WITH(radam.add_param_group(optim::OptimizerParamGroup({Tensor::ones({1}).requires_grad_()},
                                                                     optim::AdamOptions(0.1))),
                    Catch::Contains("optim::RAdamOptions"));

  // A constant gradient g = 1 keeps m / (1 - beta1^t) = 1 and sqrt(v) = sqrt(1 - beta2^t):
  // steps 1-5 move p by lr, step 6 (rho_6 > 5 with beta2 = 0.999) by lr * r_6.
  Tensor c = Tensor::ones({1}, DType::f64).requires_grad_();
  optim::RAdam rc(std::vector<Tensor>{c}, optim::RAdamOptions(0.01).eps(0));
  for (int s = 0; s < 6; ++s) {
    rc.zero_grad();
    c.sum().backward();
    rc.step();
    if (s == 4) CHECK(c.item() == Approx(1 - 5 * 0.01));
  }
  const double b2 = 0.999, rho_inf = 2 / (1 - b2) - 1;
  const double rho6 = rho_inf - 2 * 6 * std::pow(b2, 6) / (1 - std::pow(b2, 6));
  REQUIRE(rho6 > 5);
  const double r6 = std::sqrt((rho6 - 4) * (rho6 - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho6));
  CHECK(c.item() == Approx(1 - 5 * 0.01 - 0.01 * r6).epsilon(1e-12));

  // Option errors name the value.
  std::vector<Tensor> ps{Tensor::ones({2}, DType::f64).requires_grad_()};
  CHECK_THROWS_AS(optim::RAdam(ps, optim::RAdamOptions(-0.1)), Error);
  CHECK_THROWS_WITH(optim::RAdam(ps, optim::RAdamOptions(-0.1)), Catch::Contains("lr must be >= 0, got -0.1"));
  CHECK_THROWS_WITH(optim::RAdam(ps, optim::RAdamOptions().betas(1.5, 0.999)),
                    Catch::Contains("RAdam: beta1 must be in [0, 1), got 1.5"));
  CHECK_THROWS_WITH(optim::RAdam(ps, 1e-3, 0.9, 1.0), Catch::Contains("RAdam: beta2 must be in [0, 1), got 1"));
  CHECK_THROWS_WITH(optim::RAdam(ps, optim::RAdamOptions().eps(-1)), Catch::Contains("eps must be >= 0, got -1"));
  CHECK_THROWS_WITH(optim::RAdam(ps, optim::RAdamOptions().weight_decay(-0.5)),
                    Catch::Contains("weight_decay must be >= 0, got -0.5"));
  CHECK_THROWS_WITH(optim::RAdam({optim::OptimizerParamGroup(ps, optim::RAdamOptions().betas(0.9, -0.5))},
                                 optim::RAdamOptions()),
                    Catch::Contains("RAdam: beta2 must be in [0, 1), got -0.5"));
  // A group's options changed after construction are checked when step() applies them.
  static_cast<optim::RAdamOptions&>(rc.param_groups()[0].options()).beta1(2);
  rc.zero_grad();
  c.sum().backward();
  CHECK_THROWS_WITH(rc.step(), Catch::Contains("RAdam: beta1 must be in [0, 1), got 2"));
}

TEST_CASE("LR schedulers follow torch's formulas", "[nn_api][optim]") {
  Tensor p = Tensor::zeros({1}, DType::f64).requires_grad_();
  auto rates = [&](optim::Optimizer& opt, optim::LRScheduler& s, int n) {
    std::vector<double> out{opt.param_groups()[0].options().get_lr()};
    for (int i = 0; i < n; ++i) {
      s.step();
      out.push_back(opt.param_groups()[0].options().get_lr());
      CHECK(s.get_last_lr()[0] == out.back());
    }
    return out;
  };
  auto near = [](const std::vector<double>& got, const std::vector<double>& want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-12));
  };
  {
    optim::SGD opt(std::vector<Tensor>{p}, optim::SGDOptions(1.0));
    optim::StepLR s(opt, 2, 0.5);
    near(rates(opt, s, 5), {1, 1, 0.5, 0.5, 0.25, 0.25});
  }
  {
    optim::SGD opt(std::vector<Tensor>{p}, optim::SGDOptions(1.0));
    optim::CosineAnnealingLR s(opt, 4, 0.1);
    const double c = 0.1, r = 0.9;
    near(rates(opt, s, 4), {1, c + r * (1 + std::cos(M_PI / 4)) / 2, c + r / 2, c + r * (1 - std::cos(M_PI / 4)) / 2, c});
  }
  {
    optim::SGD opt(std::vector<Tensor>{p}, optim::SGDOptions(2.0));
    optim::LambdaLR s(opt, [](int64_t e) { return 1.0 / double(e + 1); });
    near(rates(opt, s, 3), {2, 1, 2.0 / 3, 0.5});
  }
  {
    optim::Adam opt(std::vector<Tensor>{p}, optim::AdamOptions(0.4));
    optim::LinearLR s(opt, 0.25, 1.0, 3);
    near(rates(opt, s, 4), {0.1, 0.2, 0.3, 0.4, 0.4});
  }
  {
    optim::SGD opt(std::vector<Tensor>{p}, optim::SGDOptions(1.0));
    optim::ExponentialLR s(opt, 0.5);
    near(rates(opt, s, 2), {1, 0.5, 0.25});
  }
  {  // Every group from its own base rate; the step uses the scheduled rate.
    Tensor q = Tensor::zeros({1}, DType::f64).requires_grad_();
    optim::SGD opt({optim::OptimizerParamGroup({p}), optim::OptimizerParamGroup({q}, optim::SGDOptions(0.1))},
                   optim::SGDOptions(1.0));
    optim::StepLR s(opt, 1, 0.5);
    s.step();
    CHECK(s.get_last_lr() == std::vector<double>{0.5, 0.05});
    CHECK(opt.lr() == 0.5);
    opt.zero_grad();
    (p.sum() + q.sum()).backward();
    opt.step();
    CHECK(p.item() == Approx(-0.5));
    CHECK(q.item() == Approx(-0.05));
  }
  {  // Warmup then cosine through LambdaLR over optim::LRSchedule.
    optim::SGD opt(std::vector<Tensor>{p}, optim::SGDOptions(1.0));
    optim::LRSchedule sched{optim::LRSchedule::warmup_cosine, 2, 6, 0.0};
    optim::LambdaLR s(opt, [sched](int64_t e) { return sched.lr_at(e); });
    near(rates(opt, s, 6), {0, 0.5, 1, (1 + std::cos(M_PI / 4)) / 2, 0.5, (1 - std::cos(M_PI / 4)) / 2, 0});
  }
  optim::SGD opt(std::vector<Tensor>{p}, optim::SGDOptions(1.0));
  CHECK_THROWS_WITH(optim::StepLR(opt, 0), Catch::Contains("step_size must be > 0"));
}
