// A TensorBoard event-file writer for scalars, after torch.utils.tensorboard.SummaryWriter: point
// `tensorboard --logdir` at the log directory to see the curves.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace tg {

// When buffered records reach the file; torch's defaults.
struct SummaryWriterOptions {
  int max_queue = 10;          // flush after this many buffered records
  double flush_secs = 120.0;   // flush on the next record once this many seconds have passed
  std::string filename_suffix; // appended to the event file's name, as in torch
};

// Writes scalar summaries to a new event file in a log directory. Not thread-safe.
class SummaryWriter {
 public:
  // Creates `log_dir` (with parents) and the event file
  // events.out.tfevents.<unix seconds>.<hostname>.<pid>.<counter><suffix> in it, starting with the
  // file-version record. A directory or file that cannot be made is an error here, naming the path.
  explicit SummaryWriter(const std::string& log_dir, SummaryWriterOptions options = {});
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;
  // Flushes and closes; write errors here are swallowed (call close() to see them).
  ~SummaryWriter();

  // Records `value` for `tag` at `step`; `wall_time` (seconds since the epoch) defaults to now.
  void add_scalar(const std::string& tag, float value, int64_t step,
                  std::optional<double> wall_time = std::nullopt);
  // Writes buffered records to the file and flushes it to the operating system.
  void flush();
  // Flushes and closes the file; later add_scalar calls are errors, flush and close do nothing.
  void close();

  // The log directory, as given.
  const std::string& log_dir() const { return log_dir_; }
  // The event file's full path.
  const std::string& file_path() const { return file_path_; }

 private:
  void write_record(const std::string& event);

  std::string log_dir_;
  std::string file_path_;
  SummaryWriterOptions options_;
  std::FILE* file_ = nullptr;
  std::string pending_;  // framed records not yet written
  int pending_records_ = 0;
  std::chrono::steady_clock::time_point last_flush_;
};

}  // namespace tg
