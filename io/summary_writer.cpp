#include "io/summary_writer.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "io/tf_event.h"
#include "tensor/check.h"

namespace tg {
namespace {

namespace fs = std::filesystem;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

// Distinguishes writers that one process opens in the same second (TensorBoard's _global_uid).
std::atomic<int64_t> g_writer_counter{0};

std::string event_file_name(double wall_time, const std::string& suffix) {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%010lld", static_cast<long long>(wall_time));
  return std::string("events.out.tfevents.") + seconds + "." + host_name() + "." + std::to_string(getpid()) +
         "." + std::to_string(g_writer_counter.fetch_add(1)) + suffix;
}

}  // namespace

SummaryWriter::SummaryWriter(const std::string& log_dir, SummaryWriterOptions options)
    : log_dir_(log_dir), options_(std::move(options)) {
  TG_CHECK(!log_dir.empty(), "[SummaryWriter] the log directory is an empty path");
  TG_CHECK(options_.max_queue >= 1, "[SummaryWriter] max_queue must be at least 1, got ", options_.max_queue);
  std::error_code ec;
  fs::create_directories(log_dir, ec);
  TG_CHECK(!ec, "[SummaryWriter] cannot create log directory '", log_dir, "': ", ec.message());
  TG_CHECK(fs::is_directory(log_dir, ec), "[SummaryWriter] log directory '", log_dir, "' is not a directory");
  const double wall_time = now_seconds();
  file_path_ = (fs::path(log_dir) / event_file_name(wall_time, options_.filename_suffix)).string();
  file_ = std::fopen(file_path_.c_str(), "wb");
  TG_CHECK(file_ != nullptr, "[SummaryWriter] cannot write in log directory '", log_dir, "': opening '",
           file_path_, "' failed: ", std::strerror(errno));
  last_flush_ = std::chrono::steady_clock::now();
  // Written through at once, so a file that takes no data shows here rather than mid-training.
  try {
    write_record(encode_file_version_event(wall_time));
    flush();
  } catch (...) {
    std::fclose(file_);  // no destructor runs for a constructor that throws
    throw;
  }
}

SummaryWriter::~SummaryWriter() {
  try {
    close();
  } catch (...) {
    // A destructor cannot report; close() does.
  }
}

void SummaryWriter::add_scalar(const std::string& tag, float value, int64_t step, std::optional<double> wall_time) {
  TG_CHECK(file_ != nullptr, "[SummaryWriter] add_scalar(\"", tag, "\") after close() of '", file_path_, "'");
  write_record(encode_scalar_event(wall_time.value_or(now_seconds()), step, tag, value));
}

void SummaryWriter::write_record(const std::string& event) {
  pending_ += frame_tfrecord(event);
  ++pending_records_;
  const std::chrono::duration<double> since = std::chrono::steady_clock::now() - last_flush_;
  if (pending_records_ >= options_.max_queue || since.count() >= options_.flush_secs) flush();
}

void SummaryWriter::flush() {
  if (file_ == nullptr) return;
  last_flush_ = std::chrono::steady_clock::now();
  const size_t n = pending_.size();
  pending_records_ = 0;
  if (n != 0 && std::fwrite(pending_.data(), 1, n, file_) != n) {
    pending_.clear();  // a half-written batch is not retried: it would duplicate records
    TG_FAIL("[SummaryWriter] writing '", file_path_, "' failed: ", std::strerror(errno));
  }
  pending_.clear();
  TG_CHECK(std::fflush(file_) == 0, "[SummaryWriter] flushing '", file_path_, "' failed: ", std::strerror(errno));
}

void SummaryWriter::close() {
  if (file_ == nullptr) return;
  std::FILE* f = file_;
  try {
    flush();
  } catch (...) {
    file_ = nullptr;
    std::fclose(f);
    throw;
  }
  file_ = nullptr;
  TG_CHECK(std::fclose(f) == 0, "[SummaryWriter] closing '", file_path_, "' failed: ", std::strerror(errno));
}

}  // namespace tg
