// SPDX-License-Identifier: BSD-3-Clause
// `remora export`: a checkpoint's model as weights-only safetensors with its
// config and tokenizer, for sharing and for loading without the training state.
#include <filesystem>
#include <fstream>

#include "../../core/file_io.h"
#include "../../core/safetensors.h"
#include "../../models/bert.h"
#include "common.h"

namespace remora {
namespace driver {
namespace {

// Written whole or not at all (a temporary beside it, synced, then renamed).
void write_text(const std::string& path, const std::string& text) {
  as_input("export: " + path, [&] {
    write_file_atomic(path, text, path);
    return 0;
  });
}

int run_export(const Args& a) {
  Config cfg;
  Experiment ex = load_for_inference(a, "export", &cfg, nullptr, /*generation=*/false, /*reads_data=*/false);
  const std::string out = need(a, "out");
  if (out.empty()) throw UsageError("--out is empty: name a folder to write");
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec || !std::filesystem::is_directory(out))
    throw InputError("export: cannot create the folder " + out + (ec ? " (" + ec.message() + ")" : ""));
  const std::string vocab = ex.vocab_json();
  // A BERT with softmax attention is written as a HuggingFace directory: its
  // tensors already carry HF's names, and config.json is HF's BertConfig, so
  // transformers' from_pretrained(DIR) loads it (the Remora config goes beside
  // it). HF has no RSA attention: an RSA-BERT keeps Remora's config.json.
  const auto bert = std::dynamic_pointer_cast<models::BertForMaskedLM>(ex.model);
  const bool hf = bert && bert->cfg.attention == "softmax";
  // Every file this export writes, checked before the first is written: an
  // input of the command never, an existing file only with --force.
  std::vector<std::string> files = {out + "/model.safetensors", out + "/config.json"};
  if (hf) files.push_back(out + "/remora_config.json");
  if (!vocab.empty()) files.push_back(out + "/tokenizer.json");
  const std::vector<NamedPath> inputs = command_inputs(a);
  for (const std::string& f : files) check_output_file("--out", f, inputs, a.flags.count("force") > 0);
  std::map<std::string, std::string> meta{{"format", "pt"}, {"config", cfg.resolved.dump()}};
  if (!vocab.empty()) meta["vocab"] = vocab;
  const std::string weights = out + "/model.safetensors";
  as_input("export: " + weights, [&] {
    save_safetensors(weights, ex.model->state_dict(), meta);
    return 0;
  });
  write_text(out + "/config.json", hf ? bert->cfg.to_hf_config() + "\n" : cfg.resolved.dump(2) + "\n");
  if (hf) write_text(out + "/remora_config.json", cfg.resolved.dump(2) + "\n");
  if (!vocab.empty()) write_text(out + "/tokenizer.json", json::parse(vocab).dump(2) + "\n");
  std::printf("%s\n", json{{"weights", weights},
                           {"layout", hf ? "huggingface" : "remora"},
                           {"config", out + "/config.json"},
                           {"tokenizer", vocab.empty() ? json(nullptr) : json(out + "/tokenizer.json")},
                           {"tensors", ex.model->state_dict().size()}}
                          .dump()
                          .c_str());
  return 0;
}

}  // namespace

Command export_command() {
  Command c;
  c.name = "export";
  c.summary = "write a checkpoint's model as weights-only safetensors with its config and tokenizer";
  c.positional = "CONFIG";
  c.positional_help = "the config (default: the checkpoint's own, or the config.json beside it)";
  c.config = true;
  c.options = {{"checkpoint", "FILE", "the checkpoint to export (required)", true},
               {"out", "DIR", "the folder to write (created when missing; required)", true},
               {"force", "", "replace the files of an earlier export in DIR (never an input of the command)"}};
  c.details = R"(Writes DIR/model.safetensors (the model's tensors under their official names,
no optimizer or data state; metadata "format": "pt", the resolved "config" and
the tokenizer as "vocab"), DIR/config.json and, for text models, DIR/tokenizer.json.
A file of these that exists is replaced only with --force, and never when it is
the config or the checkpoint the command reads.
eval, generate and infer take DIR/model.safetensors as --checkpoint without a
CONFIG: they read the config and the vocabulary from its metadata.

A BERT with softmax attention is written as a HuggingFace directory: config.json
is HF's BertConfig (the Remora config is DIR/remora_config.json) and the tensors
carry HF's names, so transformers' BertForMaskedLM.from_pretrained(DIR) loads it,
and `remora infer DIR/config.json --checkpoint DIR/model.safetensors` runs it as
any HF BERT. Its tokenizer stays Remora's (DIR/tokenizer.json): HF's
BertTokenizer splits text differently, so give HF the ids Remora's tokenizer
makes.)";
  c.run = run_export;
  return c;
}

}  // namespace driver
}  // namespace remora
