// SPDX-License-Identifier: BSD-3-Clause
// Runs every registered float64 gradient check (docs/math.md#gradient-checks), and checks that the
// registry covers the ops: every row of the op table (ops/ops.def) has the
// cases its row asks for (or states why it has none), and every case names a
// real op, so neither list can silently drift.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <remora/remora.h>

#include "helpers.h"

using namespace remora;

TEST_CASE("every registered op passes its float64 gradient check", "[gradcheck]") {
  const auto& cases = gradcheck_cases();
  REQUIRE(cases.size() > 50);
  size_t run = 0;
  for (const GradcheckCase& c : cases) {
    // Compared across devices by [backends] instead: too large for a Jacobian,
    // or forward-only (not differentiable).
    if (c.backend_only || !c.differentiable) continue;
    ++run;
    remora_test::check_gradcheck_case(c);
  }
  CHECK(run > 50);
}

namespace {

// Registered case names that are not ops of the table: the layers, models and
// Tensor methods that have cases of their own.
const std::set<std::string> kNotOps = {
    "select", "unsqueeze", "clone",      // Tensor methods (views, copies)
    "unbind_steps", "split_last",        // nn/rnn.h
    "rnn", "lstm", "relrnn", "rellstm",  // nn::RNN, nn::LSTM, models::RelRNNCell, RelLSTMCell
    "starsaber_layer", "starsaber_model",
    "checkpoint",                        // core/activation_checkpoint.h
};

std::string read_source(const std::string& rel) {
  std::ifstream f(std::string(REMORA_SOURCE_DIR) + "/" + rel);
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("every op of the op table has the gradient-check cases its row asks for", "[gradcheck]") {
  std::map<std::string, std::pair<int, int>> cases;  // op -> (cases, differentiable cases)
  for (const GradcheckCase& c : gradcheck_cases()) {
    cases[c.op].first += 1;
    cases[c.op].second += c.differentiable ? 1 : 0;
  }
  const std::vector<OpRow>& table = op_table();
  REQUIRE(table.size() > 100);
  std::set<std::string> ops;
  for (const OpRow& row : table) {
    ops.insert(row.name);
    const auto found = cases.find(row.name);
    const int n = found == cases.end() ? 0 : found->second.first;
    const int differentiable = found == cases.end() ? 0 : found->second.second;
    INFO("op " << row.name << " (" << row.declared_in << ")");
    switch (row.check) {
      case OpCheck::gradcheck: {
        INFO("its row says gradcheck: add a case in cases/ that checks its gradient");
        CHECK(differentiable > 0);
        break;
      }
      case OpCheck::forward_case: {
        INFO("its row says forward_case: add a forward-only case in cases/");
        CHECK(n > 0);
        CHECK(differentiable == 0);
        break;
      }
      case OpCheck::no_case: {
        INFO("its row says no_case(\"" << row.why_no_case << "\") but it has a case: change the row");
        CHECK(n == 0);
        CHECK(std::string(row.why_no_case).size() > 0);
        break;
      }
    }
    // An op declared outside the table must be declared in the header its row names.
    if (std::string(row.declared_in) != "ops/ops.def") {
      INFO(row.declared_in << " does not declare " << row.name);
      CHECK(read_source(row.declared_in).find(std::string(" ") + row.name + "(") != std::string::npos);
    }
  }
  for (const auto& [op, counts] : cases) {
    INFO("case op '" << op << "' is neither a row of ops/ops.def nor a known layer: a typo?");
    CHECK((ops.count(op) == 1 || kNotOps.count(op) == 1));
  }
}

TEST_CASE("the op headers declare no op outside the table", "[gradcheck]") {
  // The headers beside the table declare ops with argument structs of their
  // own; each must have a REMORA_DECLARED_IN row, or the coverage test above
  // would not see it.
  std::set<std::string> rows;
  for (const OpRow& row : op_table()) rows.insert(row.name);
  static const std::regex decl(R"((^|\n)(Tensor|std::vector<Tensor>|SruOutput) ([a-z_0-9]+)\()");
  int seen = 0;
  for (const char* h : {"ops/rem.h", "ops/sru.h", "ops/losses.h", "ops/adaptive_softmax.h"}) {
    const std::string text = read_source(h);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), decl); it != std::sregex_iterator(); ++it) {
      ++seen;
      INFO((*it)[3].str() << " is declared in " << h << " without a REMORA_DECLARED_IN row in ops/ops.def");
      CHECK(rows.count((*it)[3].str()) == 1);
    }
  }
  CHECK(seen > 10);  // the pattern still matches the headers' declarations
}

TEST_CASE("every case builds on the CPU in f32 and f64, with the same values", "[gradcheck]") {
  for (const GradcheckCase& c : gradcheck_cases()) {
    if (c.huge) continue;
    if (c.backend_only && c.op == "rsa_attention_reference") continue;  // slow; [backends] builds them
    DYNAMIC_SECTION(c.name) {
      CaseInstance a = c.make(Device::cpu(), DType::f64), b = c.make(Device::cpu(), DType::f32);
      REQUIRE(a.inputs.size() == b.inputs.size());
      bool any_grad = false;
      for (size_t i = 0; i < a.inputs.size(); ++i) {
        INFO("input " << i);
        REQUIRE(a.inputs[i].defined() == b.inputs[i].defined());
        if (!a.inputs[i].defined()) continue;
        CHECK(a.inputs[i].shape() == b.inputs[i].shape());
        CHECK(a.inputs[i].requires_grad() == b.inputs[i].requires_grad());
        any_grad = any_grad || a.inputs[i].requires_grad();
        if (a.inputs[i].dtype() == DType::f64) {
          CHECK(b.inputs[i].dtype() == DType::f32);
          if (a.inputs[i].numel() <= 100000) CHECK(b.inputs[i].to_vector() == a.inputs[i].to(DType::f32).to_vector());
        } else {
          CHECK(b.inputs[i].dtype() == a.inputs[i].dtype());
        }
      }
      INFO(c.name << (c.differentiable ? " needs an input that requires grad"
                                       : " is forward-only: no input may require grad"));
      CHECK(any_grad == c.differentiable);
    }
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

TEST_CASE("the registry refuses a duplicate case and a backend-only or forward-only Jacobian", "[gradcheck]") {
  const GradcheckCase& first = gradcheck_cases().front();
  CHECK_THROWS_WITH(register_gradcheck(first), Catch::Contains("registered twice"));
  bool backend_only = false, forward_only = false;
  for (const GradcheckCase& c : gradcheck_cases()) {
    if (c.backend_only && !backend_only) {
      CHECK_THROWS_WITH(gradcheck(c), Catch::Contains("backend-only"));
      backend_only = true;
    }
    if (!c.differentiable && !forward_only) {
      CHECK_THROWS_WITH(gradcheck(c), Catch::Contains("forward-only"));
      forward_only = true;
    }
  }
  CHECK(backend_only);
  CHECK(forward_only);
}
