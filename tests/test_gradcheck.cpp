// Runs every registered float64 gradient check (SPEC §10).
#include <catch2/catch.hpp>
#include <set>
#include <remora/remora.h>

using namespace remora;

TEST_CASE("every registered op passes its float64 gradient check", "[gradcheck]") {
  const auto& cases = gradcheck_cases();
  REQUIRE(cases.size() > 50);
  for (const GradcheckCase& c : cases) {
    DYNAMIC_SECTION(c.name) {
      GradcheckResult r = gradcheck(c.fn, c.make_inputs(), c.options);
      INFO(c.name << ": " << r.message);
      CHECK(r.ok);
      CHECK(r.entries > 0);
    }
  }
}

TEST_CASE("the ops of the foundation are all covered by gradient checks", "[gradcheck]") {
  std::set<std::string> ops;
  for (const GradcheckCase& c : gradcheck_cases()) ops.insert(c.op);
  for (const char* op : {"add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sqrt", "tanh",
                         "sigmoid", "relu", "gelu", "sum", "mean", "max", "matmul", "transpose",
                         "permute", "reshape", "slice", "cat", "stack", "index_select",
                         "embedding", "masked_fill", "where", "softmax", "log_softmax",
                         "layer_norm", "dropout", "cross_entropy"}) {
    INFO(op);
    CHECK(ops.count(op) == 1);
  }
}

TEST_CASE("gradcheck catches a wrong backward", "[gradcheck]") {
  // A deliberately wrong op: forward x^2, backward claims 3x.
  GradFn bad = [](const std::vector<Tensor>& x) {
    Tensor y = pow(x[0].detach(), 2);
    Tensor xd = x[0].detach();
    return record("bad_square", {x[0]}, y, [xd](std::vector<Tensor>& g) {
      return std::vector<Tensor>{mul(g[0], xd * 3.0)};
    });
  };
  Tensor x = Tensor::randn({3}, DType::f64).requires_grad_();
  GradcheckResult r = gradcheck(bad, {x});
  CHECK_FALSE(r.ok);
  CHECK(r.message.find("analytic") != std::string::npos);
}
