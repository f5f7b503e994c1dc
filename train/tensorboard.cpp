// SPDX-License-Identifier: BSD-3-Clause
#include "tensorboard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>

#include "../core/file_io.h"
#include "trainer.h"

namespace remora {
namespace train {

uint32_t crc32c(const void* data, size_t n) {
  static const auto table = [] {
    std::vector<uint32_t> t(256);
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

namespace {

// Protocol-buffer wire format: varints, fixed 32/64-bit little-endian values and
// length-delimited fields, as the Event / Summary / SessionLog messages use them.
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += char(uint8_t(v) | 0x80);
    v >>= 7;
  }
  out += char(uint8_t(v));
}
void fixed(std::string& out, const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
void key(std::string& out, int field, int wire) { varint(out, uint64_t(field) << 3 | uint64_t(wire)); }
void bytes_field(std::string& out, int field, const std::string& b) {
  key(out, field, 2);
  varint(out, b.size());
  out += b;
}
// Event { double wall_time = 1; int64 step = 2; ...; }: the common head of every event.
std::string event_head(double wall_time, int64_t step) {
  std::string e;
  key(e, 1, 1);
  fixed(e, &wall_time, 8);
  if (step != 0) {
    key(e, 2, 0);
    varint(e, uint64_t(step));
  }
  return e;
}

void write_all(int fd, const std::string& s, const std::string& path) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw TrainingFailure("cannot write " + path + ": " + std::strerror(errno));
    done += size_t(n);
  }
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

EventWriter::EventWriter(const std::string& path, double wall_time) : path_(path) {
  struct stat st;
  const bool fresh = ::stat(path.c_str(), &st) != 0 || st.st_size == 0;
  try {
    fd_ = open_append_regular(path, "TensorBoard event file");
  } catch (const Error& e) {
    throw SetupError(e.what());
  }
  if (fresh) {
    std::string e = event_head(wall_time < 0 ? now_s() : wall_time, 0);
    bytes_field(e, 3, "brain.Event:2");  // file_version
    record(e);
  }
}

EventWriter::~EventWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void EventWriter::record(const std::string& payload) {
  std::string r;
  const uint64_t len = payload.size();
  fixed(r, &len, 8);
  const uint32_t len_crc = masked_crc32c(&len, 8);
  fixed(r, &len_crc, 4);
  r += payload;
  const uint32_t data_crc = masked_crc32c(payload.data(), payload.size());
  fixed(r, &data_crc, 4);
  write_all(fd_, r, path_);
}

void EventWriter::scalars(int64_t step, double wall_time,
                          const std::vector<std::pair<std::string, double>>& values) {
  std::string summary;  // Summary { repeated Value value = 1; }
  for (const auto& tv : values) {
    std::string v;  // Value { string tag = 1; float simple_value = 2; }
    bytes_field(v, 1, tv.first);
    const float f = float(tv.second);
    key(v, 2, 5);
    fixed(v, &f, 4);
    bytes_field(summary, 1, v);
  }
  std::string e = event_head(wall_time, step);
  bytes_field(e, 5, summary);  // Event.summary
  record(e);
}

void EventWriter::restart(int64_t step, double wall_time) {
  std::string log;  // SessionLog { SessionStatus status = 1; }  START = 1
  key(log, 1, 0);
  varint(log, 1);
  std::string e = event_head(wall_time, step);
  bytes_field(e, 7, log);  // Event.session_log
  record(e);
}

namespace {

// Rank 0 writes DIR/events.out.tfevents.<seconds>.remora.<pid>.<n>: one file per start of
// `remora train`, as TensorBoard's own writers do; a resumed run's file begins
// with a restart at the resumed step, so the curves read as one run.
class TensorBoardSink : public Callback {
 public:
  explicit TensorBoardSink(std::string dir) : dir_(std::move(dir)) {}

  void on_train_begin(Trainer& t) override {
    if (!t.main_rank()) return;
    const double now = now_s();
    // <seconds>.remora.<pid>.<n>: unique for every start, also of runs in one process.
    static std::atomic<int> started{0};
    const std::string path = dir_ + "/events.out.tfevents." + std::to_string(int64_t(now)) + ".remora." +
                             std::to_string(::getpid()) + "." + std::to_string(started++);
    writer_.reset(new EventWriter(path, now));
    if (t.options().resume) writer_->restart(t.step() + 1, now);
  }

  void on_log(Trainer&, const Record& record) override {
    if (!writer_) return;
    int64_t step = 0;
    std::string split = "train";
    std::vector<std::pair<std::string, double>> values;
    for (const auto& kv : record) {
      if (kv.first == "step") {
        if (const auto* i = std::get_if<int64_t>(&kv.second)) step = *i;
        if (const auto* d = std::get_if<double>(&kv.second)) step = int64_t(*d);
      } else if (kv.first == "split") {
        if (const auto* s = std::get_if<std::string>(&kv.second)) split = *s;
      }
    }
    for (const auto& kv : record) {
      if (kv.first == "step" || kv.first == "split" || kv.first == "elapsed") continue;
      double v;
      if (const auto* d = std::get_if<double>(&kv.second)) {
        v = *d;
      } else if (const auto* i = std::get_if<int64_t>(&kv.second)) {
        v = double(*i);
      } else {
        continue;  // texts and per-bin lists stay in metrics.jsonl
      }
      values.emplace_back(split + "/" + kv.first, v);
    }
    if (!values.empty()) writer_->scalars(step, now_s(), values);
  }

 private:
  std::string dir_;
  std::unique_ptr<EventWriter> writer_;
};

}  // namespace

std::shared_ptr<Callback> tensorboard_sink(const std::string& dir) { return std::make_shared<TensorBoardSink>(dir); }

}  // namespace train
}  // namespace remora
