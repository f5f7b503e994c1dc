// SPDX-License-Identifier: BSD-3-Clause
// The metric sinks: metrics.jsonl and the terminal progress line.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../core/file_io.h"
#include "trainer.h"

namespace remora {
namespace train {
namespace {

using Json = nlohmann::json;

class JsonlSink : public Callback {
 public:
  explicit JsonlSink(std::string path) : path_(std::move(path)) {}
  ~JsonlSink() override {
    if (fd_ >= 0) ::close(fd_);
  }

  void on_train_begin(Trainer& t) override {
    if (!t.main_rank()) return;
    if (t.options().resume) truncate_after(t.step());
    try {
      fd_ = open_append_regular(path_, "metrics.jsonl");
    } catch (const Error& e) {
      throw SetupError(e.what());
    }
  }

  void on_log(Trainer&, const Record& record) override {
    if (fd_ < 0) return;
    const std::string line = to_json(record) + "\n";
    size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw TrainingFailure("cannot write " + path_ + ": " + std::strerror(errno));
      done += size_t(n);
    }
  }

 private:
  // Keeps the lines up to `step` (a resumed run rewrites what follows),
  // rewritten beside and renamed: a full disk must not cost the lines kept.
  void truncate_after(int64_t step) {
    std::string text;
    try {
      struct stat st;
      if (::stat(path_.c_str(), &st) == 0) text = read_regular_file(path_, uint64_t(1) << 32, "metrics.jsonl");
    } catch (const Error& e) {
      throw SetupError(e.what());
    }
    std::string keep, dropped, numbers;
    int64_t n_dropped = 0, line_no = 0;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      try {
        if (Json::parse(line).value("step", int64_t(0)) <= step) keep += line + "\n";
      } catch (const Json::exception&) {
        // Not a record a sink wrote: kept aside, never lost, and named.
        dropped += line + "\n";
        if (++n_dropped <= 5) numbers += (numbers.empty() ? "" : ", ") + std::to_string(line_no);
      }
    }
    try {
      if (n_dropped > 0) {
        const std::string aside = path_ + ".unreadable";
        std::string before;
        struct stat st;
        if (::stat(aside.c_str(), &st) == 0) before = read_regular_file(aside, uint64_t(1) << 32, aside);
        write_file_atomic(aside, before + dropped, aside);
        std::fprintf(stderr, "warning: %s: %lld line(s) are not metrics records (line %s%s); moved to %s\n",
                     path_.c_str(), (long long)n_dropped, numbers.c_str(), n_dropped > 5 ? ", ..." : "",
                     aside.c_str());
      }
      write_file_atomic(path_, keep, "metrics.jsonl");
    } catch (const Error& e) {
      throw TrainingFailure(std::string("cannot rewrite ") + path_ + ": " + e.what());
    }
  }

  std::string path_;
  int fd_ = -1;
};

std::string fixed(double x, int prec) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(prec);
  os << x;
  return os.str();
}

std::string human_time(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = int64_t(s + 0.5);
  std::ostringstream os;
  if (t >= 3600) os << t / 3600 << "h";
  if (t >= 60) os << (t / 60) % 60 << "m";
  os << t % 60 << "s";
  return os.str();
}

class ProgressSink : public Callback {
 public:
  void on_log(Trainer& t, const Record& rec) override {
    const Json r = Json::parse(to_json(rec));
    const std::string split = r.value("split", "");
    const long long step = r.value("step", int64_t(0)), steps = t.options().steps;
    if (split == "train") {
      const double loss = r.value("loss", 0.0), tok_s = r.value("tokens_per_s", 0.0), now = r.value("elapsed", 0.0);
      const double eta = double(steps - step) * now / double(std::max<long long>(1, step));
      if (tty_)
        std::fprintf(stderr, "\r[%lld/%lld] loss %s  %s tok/s  ETA %s   ", step, steps, fixed(loss, 4).c_str(),
                     fixed(tok_s, 0).c_str(), human_time(eta).c_str());
      else
        std::fprintf(stderr, "step %lld/%lld  loss %s  lr %.3g  %s tok/s  ETA %s\n", step, steps,
                     fixed(loss, 4).c_str(), r.value("lr", 0.0), fixed(tok_s, 0).c_str(), human_time(eta).c_str());
      pending_newline_ = tty_;
    } else if (split == "valid") {
      if (tty_) std::fprintf(stderr, "\n");
      std::fprintf(stderr, "step %lld  valid %s\n", step, r.dump().c_str());
      pending_newline_ = false;
    } else if (split == "note") {
      if (pending_newline_) std::fprintf(stderr, "\n");
      std::fprintf(stderr, "note: %s\n", r.dump().c_str());
      pending_newline_ = false;
    }
  }
  void on_train_end(Trainer& t, const FitResult&) override {
    if (t.main_rank() && pending_newline_) std::fprintf(stderr, "\n");
    pending_newline_ = false;
  }

 private:
  bool tty_ = ::isatty(STDERR_FILENO);
  bool pending_newline_ = false;
};

}  // namespace

std::shared_ptr<Callback> jsonl_sink(const std::string& path) { return std::make_shared<JsonlSink>(path); }
std::shared_ptr<Callback> progress_sink() { return std::make_shared<ProgressSink>(); }

}  // namespace train
}  // namespace remora
