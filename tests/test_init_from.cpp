// SPDX-License-Identifier: BSD-3-Clause
// Fine-tuning from a pretrained model (cli/init_from.h): model.init_from from a
// Remora checkpoint and from a HuggingFace folder, names matched strictly, the
// task head fresh; RSA added to a pretrained softmax BERT through a closed gate
// (attention.rem.init.closed_gate) computes the same function at step 0 and
// then opens; train.freeze keeps parameters as they were.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_run.h"
#include "core/safetensors.h"
#include "ops/rem.h"
#include "temp_dir.h"
#include "train/checkpoint.h"

using namespace remora;
using json = nlohmann::json;
using remora_test::TempDir;

namespace {

const std::string kCfg = std::string(REMORA_SOURCE_DIR) + "/configs/labelled_sst_tiny.json";
const std::string kData = std::string(REMORA_SOURCE_DIR) + "/data/labelled/sst_tiny";

remora_test::CliRun remora_cmd(const std::string& cmd, const std::string& out, std::vector<std::string> sets,
                               std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {cmd, kCfg, "--set", "data.path=" + kData, "--set", "train.threads=2"};
  for (const std::string& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  if (!out.empty()) {
    args.push_back("--out");
    args.push_back(out);
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return remora_test::run_remora(args);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

double eval_loss(const std::string& ckpt, std::vector<std::string> sets) {
  remora_test::CliRun e = remora_cmd("eval", "", sets, {"--checkpoint", ckpt, "--split", "valid"});
  INFO(e.err);
  REQUIRE(e.code == 0);
  return json::parse(e.out)["loss"].get<double>();
}

Tensor tensor_of(const std::string& file, const std::string& name) {
  for (auto& kv : load_safetensors(file).tensors)
    if (kv.first == name) return kv.second;
  FAIL("no tensor " << name << " in " << file);
  return Tensor();
}

}  // namespace

TEST_CASE("init_from: RSA added to a pretrained softmax BERT computes its function at step 0, then learns the gate",
          "[init_from][driver]") {
  TempDir dir;
  const std::string base = dir / "softmax";
  remora_test::CliRun t = remora_cmd("train", base, {"train.steps=30", "train.eval_every=30"});
  INFO(t.err);
  REQUIRE(t.code == 0);
  const std::string pre = base + "/last.safetensors";
  const double softmax_loss = eval_loss(pre, {});

  // One REM head and a softmax one, gate closed: 0 steps trained, evaluated as it starts.
  const std::vector<std::string> rsa = {"model.attention.type=rsa", "model.attention.rem.regular=1",
                                        "model.attention.rem.init.closed_gate=true", "model.init_from=" + pre};
  std::vector<std::string> zero = rsa;
  zero.push_back("train.steps=0");
  const std::string start = dir / "rsa0";
  remora_test::CliRun s = remora_cmd("train", start, zero);
  INFO(s.err);
  REQUIRE(s.code == 0);
  CHECK(has(s.err, "model.init_from " + pre + ": "));
  CHECK(has(s.err, "the task head initialised fresh"));
  CHECK(has(s.err, "tensors not in it initialised fresh (bert.encoder.layer.0.attention.self.rem."));
  // The classifier is fresh, so compare the rest: every loaded tensor is the source's.
  for (const char* name : {"bert.embeddings.word_embeddings.weight", "bert.encoder.layer.1.output.dense.weight"})
    CHECK(max(abs(sub(tensor_of(start + "/last.safetensors", name), tensor_of(pre, name)))).item() == 0);
  CHECK(sum(abs(tensor_of(start + "/last.safetensors", "bert.encoder.layer.0.attention.self.rem.gate_scale")))
            .item() == 0);
  // The same function: with the source's classifier as well (copied over the
  // fresh one), the RSA model's validation loss is the softmax model's.
  {
    Safetensors ck = load_safetensors(start + "/last.safetensors");
    for (auto& kv : ck.tensors)
      if (kv.first.rfind("classifier.", 0) == 0) kv.second = tensor_of(pre, kv.first);
    save_safetensors(dir / "rsa0_with_head.safetensors", ck.tensors, ck.metadata);
  }
  std::vector<std::string> rsa_keys(rsa.begin(), rsa.end() - 1);
  const double rsa_loss = eval_loss(dir / "rsa0_with_head.safetensors", rsa_keys);
  CHECK(rsa_loss == Approx(softmax_loss).epsilon(1e-6));

  // The gate opens in training: gate_scale moves off zero.
  std::vector<std::string> few = rsa;
  few.push_back("train.steps=5");
  few.push_back("train.eval_every=5");
  const std::string trained = dir / "rsa5";
  remora_test::CliRun f = remora_cmd("train", trained, few);
  INFO(f.err);
  REQUIRE(f.code == 0);
  CHECK(sum(abs(tensor_of(trained + "/last.safetensors", "bert.encoder.layer.0.attention.self.rem.gate_scale")))
            .item() > 0);

  // train.freeze: the embeddings stay the pretrained ones, the rest moves.
  std::vector<std::string> frozen = few;
  frozen.push_back("train.freeze=[\"bert.embeddings.*\"]");
  const std::string fr = dir / "frozen";
  remora_test::CliRun z = remora_cmd("train", fr, frozen);
  INFO(z.err);
  REQUIRE(z.code == 0);
  CHECK(has(z.err, "train.freeze: 5 parameters not trained"));
  CHECK(max(abs(sub(tensor_of(fr + "/last.safetensors", "bert.embeddings.word_embeddings.weight"),
                    tensor_of(pre, "bert.embeddings.word_embeddings.weight"))))
            .item() == 0);
  CHECK(max(abs(sub(tensor_of(fr + "/last.safetensors", "bert.encoder.layer.0.output.dense.weight"),
                    tensor_of(pre, "bert.encoder.layer.0.output.dense.weight"))))
            .item() > 0);
  remora_test::CliRun nomatch = remora_cmd("train", dir / "nomatch", {"train.freeze=[\"encoder.*\"]"});
  CHECK(nomatch.code == 2);
  CHECK(has(nomatch.err, "train.freeze: 'encoder.*' matches no parameter"));
}

TEST_CASE("init_from: a HuggingFace folder loads by HF names; a model that does not fit is refused with the list",
          "[init_from][driver]") {
  TempDir dir;
  const std::string base = dir / "softmax";
  remora_test::CliRun t = remora_cmd("train", base, {"train.steps=2", "train.eval_every=2"});
  INFO(t.err);
  REQUIRE(t.code == 0);
  // `remora export` writes the HF folder (config.json, model.safetensors with HF names).
  const std::string hf = dir / "hf";
  remora_test::CliRun x = remora_test::run_remora({"export", kCfg, "--set", "data.path=" + kData, "--checkpoint",
                                                   base + "/last.safetensors", "--out", hf});
  INFO(x.err);
  REQUIRE(x.code == 0);
  const std::string from_hf = dir / "from_hf";
  remora_test::CliRun h = remora_cmd("train", from_hf, {"train.steps=0", "model.init_from=" + hf});
  INFO(h.err);
  REQUIRE(h.code == 0);
  CHECK(has(h.err, "model.init_from " + hf + ": "));
  CHECK(max(abs(sub(tensor_of(from_hf + "/last.safetensors", "bert.encoder.layer.1.attention.self.query.weight"),
                    tensor_of(base + "/last.safetensors", "bert.encoder.layer.1.attention.self.query.weight"))))
            .item() == 0);

  // Another width: every mis-shaped tensor is named, and nothing trains.
  remora_test::CliRun w = remora_cmd("train", dir / "wide", {"model.d_model=48", "model.init_from=" + hf});
  CHECK(w.code == 2);
  CHECK(has(w.err, "does not fit the model of this config (bert); shapes differ: "));
  CHECK(has(w.err, "where the model has [48]"));
  // A layer more: its tensors are missing from the source.
  remora_test::CliRun d = remora_cmd("train", dir / "deep", {"model.n_layer=3", "model.init_from=" + hf});
  CHECK(d.code == 2);
  CHECK(has(d.err, "missing from it: bert.encoder.layer.2."));
  // A path that is not there.
  remora_test::CliRun n = remora_cmd("train", dir / "none", {"model.init_from=" + dir / "absent"});
  CHECK(n.code == 2);
  CHECK(has(n.err, "model.init_from " + dir / "absent" + ": no such file or folder"));
  // A FIFO is refused without waiting, before --overwrite replaces the earlier run.
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  remora_test::CliRun f = remora_cmd("train", base, {"model.init_from=" + dir / "fifo"}, {"--overwrite"});
  CHECK(f.code == 2);
  CHECK(has(f.err, "model.init_from " + dir / "fifo" + " is a FIFO"));
  CHECK(train::read_checkpoint_info(base + "/last.safetensors").step == 2);
}

TEST_CASE("rsa_attention: gate_scale 0 gives the softmax heads exactly, with a gradient to gate_scale only",
          "[init_from][rsa]") {
  manual_seed(11);
  const int64_t B = 2, H = 4, L = 5, D = 4;  // 3 REM heads and a plain one
  Tensor q = Tensor::randn({B, H, L, D}, DType::f64), k = Tensor::randn({B, H, L, D}, DType::f64),
         v = Tensor::randn({B, H, L, D}, DType::f64);
  RemSpec spec;
  spec.regular = 1;
  spec.cyclic = 1;
  spec.masked = false;
  Tensor eta = Tensor::from_vector(std::vector<double>{1.5}, {1}, DType::f64).requires_grad_();
  Tensor nu = Tensor::from_vector(std::vector<double>{1.2}, {1}, DType::f64).requires_grad_();
  Tensor theta = Tensor::from_vector(std::vector<double>{0.7}, {1}, DType::f64).requires_grad_();
  Tensor mu = Tensor::from_vector(std::vector<double>{0.3, -0.4, 0.1}, {3}, DType::f64).requires_grad_();
  Tensor scale = Tensor::zeros({3}, DType::f64).requires_grad_();
  for (bool reference : {false, true}) {
    const RsaProblem p{q, k, v, RemWeights{spec, eta, nu, theta, mu, scale}, Tensor(), Tensor(), RsaOptions{}};
    const RsaProblem plain{q, k, v, RemWeights{}, Tensor(), Tensor(), RsaOptions{}};
    Tensor out = reference ? rsa_attention_reference(p).out : rsa_attention(p).out;
    Tensor want = reference ? rsa_attention_reference(plain).out : rsa_attention(plain).out;
    CHECK(max(abs(sub(out, want))).item() == 0);
    for (Tensor* t : {&mu, &scale, &eta}) t->zero_grad();
    sum(mul(out, out)).backward();
    CHECK(sum(abs(scale.grad())).item() > 1e-6);
    CHECK(sum(abs(mu.grad())).item() == 0);
  }
}
