// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora._C.train (the Trainer, with data sources and callbacks written in
/// Python) and remora._C.text (the tokenizers).
#include <sstream>

#include <remora/text/tokenizer.h>
#include <remora/text/word.h>
#include <remora/text/wordpiece.h>
#include <remora/train/trainer.h>

#include "common.h"

namespace remora {
namespace python {
namespace {

using train::Callback;
using train::DataSource;
using train::Evaluation;
using train::FitResult;
using train::Record;
using train::StepLoss;
using train::Trainer;

// A DataSource whose methods are a Python subclass's. The carried state is
// handed to Python by reference, so assigning state.mems there reaches the Trainer.
class PyDataSource : public DataSource {
 public:
  using DataSource::DataSource;
  StepLoss train_loss(models::SequenceState& state) override {
    py::gil_scoped_acquire gil;
    py::function f = py::get_override(static_cast<const DataSource*>(this), "train_loss");
    if (!f) throw Error("DataSource.train_loss is not implemented");
    py::object r = f(py::cast(&state, py::return_value_policy::reference));
    if (py::isinstance<Tensor>(r)) return StepLoss{r.cast<Tensor>(), 0, 1};
    return r.cast<StepLoss>();
  }
  Evaluation evaluate(const std::string& split, int64_t max_batches) override {
    py::gil_scoped_acquire gil;
    py::function f = py::get_override(static_cast<const DataSource*>(this), "evaluate");
    if (!f) throw Error("DataSource.evaluate is not implemented");
    py::object r = f(split, max_batches);
    if (py::isinstance<py::float_>(r) || py::isinstance<py::int_>(r)) {
      Evaluation e;
      e.loss = e.score = r.cast<double>();
      return e;
    }
    return r.cast<Evaluation>();
  }
  // position / set_position are optional in Python: a source without them is always at 0.
  int64_t position() const override {
    py::gil_scoped_acquire gil;
    py::function f = py::get_override(static_cast<const DataSource*>(this), "position");
    return f ? f().cast<int64_t>() : 0;
  }
  void set_position(int64_t p) override {
    py::gil_scoped_acquire gil;
    py::function f = py::get_override(static_cast<const DataSource*>(this), "set_position");
    if (f) f(p);
  }
  void validate() override {
    py::gil_scoped_acquire gil;
    py::function f = py::get_override(static_cast<const DataSource*>(this), "validate");
    if (f) f();
  }
  void annotate_train_log(Record& line, double loss) const override {
    py::gil_scoped_acquire gil;
    py::function f = py::get_override(static_cast<const DataSource*>(this), "annotate_train_log");
    if (!f) return;
    py::object extra = f(loss);
    if (extra.is_none()) return;
    for (auto& [k, v] : extra.cast<Record>()) line[k] = v;
  }
  int64_t epoch_batches() const override {
    py::gil_scoped_acquire gil;
    py::function f = py::get_override(static_cast<const DataSource*>(this), "epoch_batches");
    return f ? f().cast<int64_t>() : 0;
  }
};

// A Callback whose hooks are a Python subclass's (each optional).
class PyCallback : public Callback {
 public:
  using Callback::Callback;
  template <typename... A>
  void call(const char* name, A&&... args) {
    py::gil_scoped_acquire gil;
    py::function f = py::get_override(static_cast<const Callback*>(this), name);
    if (f) f(std::forward<A>(args)...);
  }
  void on_train_begin(Trainer& t) override { call("on_train_begin", ref(t)); }
  void on_step_begin(Trainer& t, int64_t step) override { call("on_step_begin", ref(t), step); }
  void on_step_end(Trainer& t, int64_t step, double loss) override { call("on_step_end", ref(t), step, loss); }
  void on_log(Trainer& t, const Record& r) override { call("on_log", ref(t), r); }
  void on_evaluate(Trainer& t, int64_t step, const Evaluation& e) override { call("on_evaluate", ref(t), step, e); }
  void on_checkpoint(Trainer& t, const std::string& path) override { call("on_checkpoint", ref(t), path); }
  void on_train_end(Trainer& t, const FitResult& r) override { call("on_train_end", ref(t), r); }

 private:
  static py::object ref(Trainer& t) { return py::cast(&t, py::return_value_policy::reference); }
};

}  // namespace

void bind_train(py::module_& top) {
  py::module_ m = top.def_submodule("train", "The Trainer: the training loop, evaluation, checkpoints, resume.");

  py::class_<StepLoss>(m, "StepLoss", "One training step's loss, as a DataSource computes it.")
      .def(py::init([](const Tensor& loss, int64_t tokens, int64_t terms) { return StepLoss{loss, tokens, terms}; }),
           py::arg("loss"), py::arg("tokens") = 0, py::arg("terms") = 1)
      .def_readwrite("loss", &StepLoss::loss, "A scalar with its graph (the Trainer calls backward).")
      .def_readwrite("tokens", &StepLoss::tokens, "Tokens predicted, for tokens/s.")
      .def_readwrite("terms", &StepLoss::terms, "How many terms the loss averages over.");
  py::class_<Evaluation>(m, "Evaluation", "One evaluation: loss, score (lower is better) and extra metrics.")
      .def(py::init([](double loss, std::optional<double> score, const Record& metrics) {
             Evaluation e;
             e.loss = loss;
             e.score = score.value_or(loss);
             e.metrics = metrics;
             return e;
           }), py::arg("loss"), py::arg("score") = py::none(), py::arg("metrics") = Record{})
      .def_readwrite("loss", &Evaluation::loss)
      .def_readwrite("score", &Evaluation::score)
      .def_readwrite("metrics", &Evaluation::metrics);
  py::class_<FitResult>(m, "FitResult", "What Trainer.fit returns.")
      .def_readonly("step", &FitResult::step, "The last completed step.")
      .def_readonly("best", &FitResult::best, "The best evaluation score.")
      .def_readonly("interrupted", &FitResult::interrupted, "Stopped by a signal.")
      .def_readonly("early_stopped", &FitResult::early_stopped, "Stopped by early_stopping_patience.")
      .def_readonly("signal", &FitResult::signal);

  py::class_<DataSource, PyDataSource>(
      m, "DataSource",
      "What a Trainer trains on. Subclass it in Python: train_loss(state) returns a StepLoss (or a "
      "scalar loss tensor), evaluate(split, max_batches) an Evaluation (or a float); position() and "
      "set_position(p) store the data position in checkpoints (default: 0, ignored).")
      .def(py::init<>());

  py::class_<Callback, PyCallback, std::shared_ptr<Callback>>(
      m, "Callback",
      "Hooks of the training loop; override any of on_train_begin(trainer), on_step_begin(trainer, step), "
      "on_step_end(trainer, step, loss), on_log(trainer, record), on_evaluate(trainer, step, evaluation), "
      "on_checkpoint(trainer, path), on_train_end(trainer, result).")
      .def(py::init<>());
  m.def("jsonl_sink", &train::jsonl_sink, py::arg("path"), "A callback writing metrics.jsonl.");
  m.def("progress_sink", &train::progress_sink, "A callback printing the progress line.");

  py::enum_<Precision>(m, "Precision", "f32, or bf16 autocast in forward and backward.")
      .value("f32", Precision::f32)
      .value("bf16", Precision::bf16);
  py::class_<optim::LRSchedule> sched(m, "LRSchedule", "lr at step s = lr * lr_at(s): constant, warmup_cosine, warmup_linear.");
  py::enum_<optim::LRSchedule::Kind>(sched, "Kind")
      .value("constant", optim::LRSchedule::constant)
      .value("warmup_cosine", optim::LRSchedule::warmup_cosine)
      .value("warmup_linear", optim::LRSchedule::warmup_linear);
  sched.def(py::init([](const std::string& kind, int64_t warmup_steps, int64_t total_steps, double min_lr_ratio) {
              optim::LRSchedule s;
              s.kind = optim::LRSchedule::parse_kind(kind);
              s.warmup_steps = warmup_steps;
              s.total_steps = total_steps;
              s.min_lr_ratio = min_lr_ratio;
              return s;
            }), py::arg("kind") = "constant", py::arg("warmup_steps") = 0, py::arg("total_steps") = 0,
            py::arg("min_lr_ratio") = 0.0)
      .def("lr_at", &optim::LRSchedule::lr_at, py::arg("step"))
      .def_readwrite("warmup_steps", &optim::LRSchedule::warmup_steps)
      .def_readwrite("total_steps", &optim::LRSchedule::total_steps)
      .def_readwrite("min_lr_ratio", &optim::LRSchedule::min_lr_ratio);

  py::class_<train::TrainerOptions> opts(m, "TrainerOptions",
                                         "What a Trainer runs and how (train/trainer.h); keyword arguments set fields.");
  opts.def(py::init([](const py::kwargs& kw) {
             auto o = std::make_unique<train::TrainerOptions>();
             o->handle_signals = false;  // Python keeps its own SIGINT (KeyboardInterrupt)
             py::object self = py::cast(o.get(), py::return_value_policy::reference);
             for (auto kv : kw) py::setattr(self, kv.first, kv.second);
             return o;
           }));
#define REMORA_TO_FIELD(f) opts.def_readwrite(#f, &train::TrainerOptions::f);
  REMORA_TO_FIELD(out_dir) REMORA_TO_FIELD(steps) REMORA_TO_FIELD(until) REMORA_TO_FIELD(eval_every)
  REMORA_TO_FIELD(eval_batches) REMORA_TO_FIELD(log_every) REMORA_TO_FIELD(lr) REMORA_TO_FIELD(schedule)
  REMORA_TO_FIELD(clip) REMORA_TO_FIELD(gradient_accumulation_steps) REMORA_TO_FIELD(precision)
  REMORA_TO_FIELD(resume) REMORA_TO_FIELD(overwrite) REMORA_TO_FIELD(metadata) REMORA_TO_FIELD(handle_signals)
  REMORA_TO_FIELD(config_json) REMORA_TO_FIELD(epochs) REMORA_TO_FIELD(best_metric) REMORA_TO_FIELD(best_mode)
  REMORA_TO_FIELD(early_stopping_patience) REMORA_TO_FIELD(early_stopping_min_delta) REMORA_TO_FIELD(keep_best)
#undef REMORA_TO_FIELD

  py::class_<Trainer>(m, "Trainer",
                      "The training loop of one run (train/trainer.h): steps, evaluation, atomic checkpoints "
                      "(last / best), exact resume, metrics. The model, optimizer and data source stay alive "
                      "as long as the Trainer.")
      .def(py::init([](std::shared_ptr<nn::Module> model, optim::Optimizer& opt, DataSource& data,
                       const train::TrainerOptions& o) { return std::make_unique<Trainer>(model, opt, data, o); }),
           py::arg("model"), py::arg("optimizer"), py::arg("data"), py::arg("options"), py::keep_alive<1, 2>(),
           py::keep_alive<1, 3>(), py::keep_alive<1, 4>())
      .def("add_callback", &Trainer::add_callback, py::arg("callback"), py::keep_alive<1, 2>(),
           "Adds a callback (run in the order added).")
      .def("fit", &Trainer::fit, py::call_guard<py::gil_scoped_release>(),
           "Runs (or resumes) the training; returns a FitResult. The GIL is released while the C++ loop runs "
           "(backward, optimizer steps, checkpoints) and taken for each call into the Python data source "
           "and callbacks, so other Python threads run meanwhile.")
      .def_property_readonly("step", &Trainer::step, "Steps completed so far.")
      .def_property_readonly("lr", &Trainer::lr, "The current learning rate.")
      .def("elapsed", &Trainer::elapsed, "Seconds since fit() started.")
      .def("save", &Trainer::save, py::arg("path"), "Saves a checkpoint of the current step.")
      .def_property_readonly("last_path", &Trainer::last_path)
      .def_property_readonly("best_path", &Trainer::best_path);

  // ---- tokenizers ----
  py::module_ t = top.def_submodule("text", "Tokenizers: word level (Transformer-XL) and BERT WordPiece.");
  py::class_<text::Tokenizer>(t, "Tokenizer", "The tokenizer interface: tokenize, encode, decode, JSON.")
      .def_property_readonly("kind", &text::Tokenizer::kind)
      .def_property_readonly("vocab_size", &text::Tokenizer::vocab_size)
      .def("tokenize", &text::Tokenizer::tokenize, py::arg("text"), "The tokens of text.")
      .def("encode", &text::Tokenizer::encode, py::arg("text"), "The ids of text.")
      .def("decode", &text::Tokenizer::decode, py::arg("ids"), py::arg("skip_special") = false, "Text from ids.")
      .def("token_to_id", &text::Tokenizer::token_to_id, py::arg("token"), "The token's id (-1 when absent).")
      .def("id_to_token", &text::Tokenizer::id_to_token, py::arg("id"), "The token of an id.")
      .def("to_json", &text::Tokenizer::to_json, "The tokenizer as JSON (tokenizer_from_json reads it).");
  t.def("tokenizer_from_json", &text::tokenizer_from_json, py::arg("json"), "A tokenizer of any kind from its JSON.");

  py::class_<text::WordTokenizerOptions>(t, "WordTokenizerOptions", "Options of the word-level tokenizer.")
      .def(py::init([](const py::kwargs& kw) {
             auto o = std::make_unique<text::WordTokenizerOptions>();
             py::object self = py::cast(o.get(), py::return_value_policy::reference);
             for (auto kv : kw) py::setattr(self, kv.first, kv.second);
             return o;
           }))
      .def_readwrite("special", &text::WordTokenizerOptions::special)
      .def_readwrite("lower_case", &text::WordTokenizerOptions::lower_case)
      .def_readwrite("min_freq", &text::WordTokenizerOptions::min_freq)
      .def_readwrite("max_size", &text::WordTokenizerOptions::max_size)
      .def_readwrite("add_eos", &text::WordTokenizerOptions::add_eos)
      .def_readwrite("eos_token", &text::WordTokenizerOptions::eos_token)
      .def_readwrite("unk_token", &text::WordTokenizerOptions::unk_token);
  py::class_<text::WordTokenizer, text::Tokenizer>(t, "WordTokenizer",
                                                   "Transformer-XL's word-level tokenizer (split on whitespace).")
      .def_static("build", [](const std::string& corpus, const text::WordTokenizerOptions& o) {
                    std::istringstream in(corpus);
                    return text::WordTokenizer::build(in, o);
                  }, py::arg("text"), py::arg("options") = text::WordTokenizerOptions{},
                  "Builds the vocabulary from a training text (one sentence per line).")
      .def_static("build_from_file", &text::WordTokenizer::build_from_file, py::arg("path"),
                  py::arg("options") = text::WordTokenizerOptions{}, "Builds the vocabulary from a file.")
      .def_static("from_json", &text::WordTokenizer::from_json, py::arg("json"))
      .def("encode_text", [](const text::WordTokenizer& tok, const std::string& s) {
             std::istringstream in(s);
             std::vector<int64_t> all;
             tok.encode_lines(in, [&](const std::vector<int64_t>& ids) { all.insert(all.end(), ids.begin(), ids.end()); });
             return all;
           }, py::arg("text"), "The ids of every line of a multi-line text, one stream (eos after each line).")
      .def_property_readonly("tokens", [](const text::WordTokenizer& w) { return w.vocabulary().tokens(); },
                             "Every token, by id.");
  py::class_<text::Encoding>(t, "Encoding", "A model input: ids, type_ids, attention_mask.")
      .def_readonly("ids", &text::Encoding::ids)
      .def_readonly("type_ids", &text::Encoding::type_ids)
      .def_readonly("attention_mask", &text::Encoding::attention_mask);
  py::class_<text::WordPieceTokenizer, text::Tokenizer>(t, "WordPieceTokenizer",
                                                        "BERT's WordPiece tokenizer (Hugging Face's BertTokenizer).")
      .def_static("from_vocab_file", [](const std::string& path, bool lower) {
                    text::WordPieceOptions o;
                    o.do_lower_case = lower;
                    return text::WordPieceTokenizer::from_vocab_file(path, o);
                  }, py::arg("vocab_txt"), py::arg("do_lower_case") = true, "From a vocab.txt.")
      .def_static("from_pretrained", &text::WordPieceTokenizer::from_pretrained, py::arg("dir"),
                  "From a Hugging Face model directory.")
      .def_static("from_json", &text::WordPieceTokenizer::from_json, py::arg("json"))
      .def("encode_for_model", [](const text::WordPieceTokenizer& w, const std::string& a,
                                  std::optional<std::string> b, int64_t max_length, bool pad) {
             return w.encode_for_model(a, b ? &*b : nullptr, max_length, pad);
           }, py::arg("text"), py::arg("text_pair") = py::none(), py::arg("max_length") = 0,
           py::arg("pad_to_max_length") = false, "[CLS] a [SEP] (b [SEP]) with type ids and mask.")
      .def_property_readonly("cls_id", &text::WordPieceTokenizer::cls_id)
      .def_property_readonly("sep_id", &text::WordPieceTokenizer::sep_id)
      .def_property_readonly("pad_id", &text::WordPieceTokenizer::pad_id)
      .def_property_readonly("mask_id", &text::WordPieceTokenizer::mask_id);
}

}  // namespace python
}  // namespace remora
