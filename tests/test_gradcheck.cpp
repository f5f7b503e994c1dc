// SPDX-License-Identifier: BSD-3-Clause
// Runs every registered float64 gradient check (docs/math.md#gradient-checks), and checks that the
// registry covers the ops: every function of the public op headers that
// returns a tensor has a case (or a stated reason why it has none), and every
// case names a real op, so neither list can silently drift.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <remora/remora.h>

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
    DYNAMIC_SECTION(c.name) {
      GradcheckResult r = gradcheck(c);
      INFO(c.name << ": " << r.message);
      CHECK(r.ok);
      CHECK(r.entries > 0);
    }
  }
  CHECK(run > 50);
}

namespace {

// The functions declared at namespace level in a header that return Tensor,
// std::vector<Tensor> or SruOutput: `Tensor name(` at the start of a line.
std::set<std::string> tensor_functions(const std::string& header) {
  std::ifstream f(std::string(REMORA_SOURCE_DIR) + "/" + header);
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  std::set<std::string> out;
  static const std::regex decl(R"((^|\n)(Tensor|std::vector<Tensor>|SruOutput) ([a-z_0-9]+)\()");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), decl); it != std::sregex_iterator(); ++it)
    out.insert((*it)[3].str());
  return out;
}

// Functions of the op headers that have no gradient-check case, and why. An
// op added to a header must either get a case in ops/cases/ or an entry here.
const std::map<std::string, std::string> kNoCase = {
    {"sin", "no gradient (positional encodings only)"},
    {"cos", "no gradient (positional encodings only)"},
    {"eq", "comparison: no gradient"},
    {"ne", "comparison: no gradient"},
    {"lt", "comparison: no gradient"},
    {"le", "comparison: no gradient"},
    {"gt", "comparison: no gradient"},
    {"ge", "comparison: no gradient"},
    {"argmax", "integer result: no gradient"},
    {"argmin", "integer result: no gradient"},
    {"eq_mask", "comparison: no gradient"},
    {"ne_mask", "comparison: no gradient"},
    {"lt_mask", "comparison: no gradient"},
    {"le_mask", "comparison: no gradient"},
    {"gt_mask", "comparison: no gradient"},
    {"ge_mask", "comparison: no gradient"},
    {"logical_and", "bool result: no gradient"},
    {"logical_or", "bool result: no gradient"},
    {"logical_xor", "bool result: no gradient"},
    {"logical_not", "bool result: no gradient"},
    {"adaptive_restore_order", "cat and index_select (both checked); run by every adaptive_log_softmax_nll case"},
};

// Registered op names that are not functions of the op headers: the layers,
// models and Tensor methods that have cases of their own.
const std::set<std::string> kNotHeaderFunctions = {
    "select", "unsqueeze", "clone",      // Tensor methods (views, copies)
    "unbind_steps", "split_last",        // nn/rnn.h
    "rnn", "lstm", "relrnn", "rellstm",  // nn::RNN, nn::LSTM, models::RelRNNCell, RelLSTMCell
    "starsaber_layer", "starsaber_model",
    "adam_step_",                        // ops/ops.h, returns bool: the fused in-place Adam step (forward-only)
    "topk", "sort",                      // ops/ops.h, return (values, indices) tuples
    "checkpoint",                        // core/checkpoint.h: activation checkpointing
};

}  // namespace

TEST_CASE("every differentiable op of the op headers has a gradient-check case", "[gradcheck]") {
  std::set<std::string> registered;
  for (const GradcheckCase& c : gradcheck_cases()) registered.insert(c.op);
  std::set<std::string> declared;
  for (const char* h : {"ops/ops.h", "ops/rem.h", "ops/sru.h", "ops/losses.h", "ops/adaptive_softmax.h"})
    for (const std::string& f : tensor_functions(h)) declared.insert(f);
  // The parser must see the headers' ops (a format change would empty the list).
  for (const char* op : {"add", "matmul", "softmax", "cross_entropy", "rsa_attention", "sru_recurrence",
                         "binary_cross_entropy_with_logits", "chunk"})
    CHECK(declared.count(op) == 1);
  for (const std::string& f : declared) {
    if (kNoCase.count(f)) {
      INFO(f << " is listed as having no case (" << kNoCase.at(f) << ") but has one: drop it from kNoCase");
      CHECK(registered.count(f) == 0);
      continue;
    }
    INFO("op " << f << " (declared in ops/) has no gradient-check case: add one in ops/cases/, or list it "
               "in kNoCase with the reason");
    CHECK(registered.count(f) == 1);
  }
  for (const std::string& op : registered) {
    INFO("case op '" << op << "' is neither a function of ops/*.h nor a known layer: a typo?");
    CHECK((declared.count(op) == 1 || kNotHeaderFunctions.count(op) == 1));
  }
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
