// SPDX-License-Identifier: BSD-3-Clause
// `remora gradcheck`: the float64 gradient check of the registered ops.
#include <cstdio>
#include <set>

#include "../../ops/gradcheck.h"
#include "../../cases/cases.h"
#include "common.h"

namespace remora {
namespace driver {
namespace {

int run_gradcheck(const Args& a) {
  cases::register_all_cases();
  std::set<std::string> want(a.positional.begin(), a.positional.end());
  std::set<std::string> known;
  for (const GradcheckCase& c : gradcheck_cases()) known.insert(c.op);
  for (const std::string& w : want)
    if (!known.count(w)) {
      std::string list;
      for (const std::string& k : known) list += " " + k;
      throw UsageError("gradcheck: unknown op '" + w + "'; registered ops:" + list);
    }
  std::printf("%-48s %10s %12s  %s\n", "case", "entries", "max |err|", "result");
  int failed = 0, run = 0;
  for (const GradcheckCase& c : gradcheck_cases()) {
    // Backend-only (too large for a Jacobian) and forward-only (not
    // differentiable) cases are for the device parity test.
    if (c.backend_only || !c.differentiable || (!want.empty() && !want.count(c.op))) continue;
    GradcheckResult r = gradcheck(c);
    ++run;
    failed += !r.ok;
    std::printf("%-48s %10lld %12.3e  %s\n", c.name.c_str(), (long long)r.entries, r.max_abs_err,
                r.ok ? "ok" : ("FAIL: " + r.message).c_str());
  }
  std::printf("%d passed, %d failed\n", run - failed, failed);
  return failed ? 1 : 0;
}

}  // namespace

Command gradcheck_command() {
  Command c;
  c.name = "gradcheck";
  c.summary = "run the gradient check of every registered op (or the named ones)";
  c.positional = "OP";
  c.positional_help = "the ops to check (default: all)";
  c.many = true;
  c.details = R"(Runs the float64 gradient check (docs/math.md#gradient-checks) of every registered op, or of the
named ops, and prints a table. Exit 1 if any check fails.)";
  c.run = run_gradcheck;
  return c;
}

}  // namespace driver
}  // namespace remora
