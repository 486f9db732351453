// TensorBoard event files and SVG loss curves: CRC32C against published vectors, hand-derived
// protobuf and TFRecord bytes, and files read back by tests/tools/read_tfevents.py, a reader written
// separately from the format specifications in Python's standard library.
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>

#include "io/crc32c.h"
#include "io/summary_writer.h"
#include "io/svg_plot.h"
#include "io/tf_event.h"
#include "support/test_support.h"

namespace tg {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string hex(const std::string& bytes) {
  std::string out;
  char buf[4];
  for (unsigned char c : bytes) {
    std::snprintf(buf, sizeof(buf), "%02x", c);
    out += buf;
  }
  return out;
}

uint32_t le32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

// The interpreter for the Python checks: $TG_PYTHON, else python3 on the PATH.
std::string python() {
  const char* env = std::getenv("TG_PYTHON");
  return env ? env : "python3";
}

bool have_python() {
  static const bool found = std::system((python() + " -c pass >/dev/null 2>&1").c_str()) == 0;
  return found;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }  // test paths hold no quotes

// Runs `command`, returning its stdout; fails the test (with stderr) on a non-zero exit status.
std::string run(const std::string& command, const fs::path& err_file) {
  std::string out;
  FILE* pipe = popen((command + " 2>" + quoted(err_file.string())).c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot run " << command;
    return out;
  }
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  EXPECT_EQ(status, 0) << command << "\nstderr: " << read_bytes(err_file);
  return out;
}

std::string reader_script() { return std::string(TG_TEST_DATA_DIR) + "/../tools/read_tfevents.py"; }

// A fresh temporary folder per test.
class SummaryWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tg_summary_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_ / "locked", fs::perms::owner_all, ec);
    fs::remove_all(dir_);
  }
  // What read_tfevents.py makes of `target` (a log directory or an event file).
  json read_events(const fs::path& target) {
    const std::string out = run(python() + " " + quoted(reader_script()) + " " + quoted(target.string()), dir_ / "err");
    return json::parse(out);
  }
  fs::path dir_;
};

TEST(Crc32c, PublishedVectors) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the CRC catalogue's check value for CRC-32C
  EXPECT_EQ(crc32c(""), 0u);
  // RFC 3720 (iSCSI), appendix B.4: 32 zero bytes, 32 0xFF bytes, bytes 0..31.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
}

TEST(Crc32c, MaskRotatesAndAddsTheConstant) {
  // ((0xE3069283 >> 15) | (0xE3069283 << 17)) = 0x2507C60D, + 0xA282EAD8 = 0xC78AB0E5.
  EXPECT_EQ(mask_crc32c(0xE3069283u), 0xC78AB0E5u);
  EXPECT_EQ(mask_crc32c(0), 0xA282EAD8u);
}

TEST(TfRecord, FramesLengthDataAndMaskedChecksums) {
  const std::string record = frame_tfrecord("abc");
  ASSERT_EQ(record.size(), 8u + 4 + 3 + 4);
  EXPECT_EQ(hex(record.substr(0, 8)), "0300000000000000");
  const uint32_t length_crc = crc32c(record.substr(0, 8));
  EXPECT_EQ(le32(record, 8), ((length_crc >> 15) | (length_crc << 17)) + 0xA282EAD8u);
  EXPECT_EQ(le32(record, 8), 0x0E4999B0u);  // the Python reader's masked_crc32c of the length bytes
  EXPECT_EQ(record.substr(12, 3), "abc");
  EXPECT_EQ(le32(record, 15), 0x21F1576Eu);  // its masked_crc32c(b"abc")
}

TEST(TfEvent, ScalarEventBytes) {
  // Event{wall_time 1.5 (key 0x09, fixed64), step 7 (0x10, varint),
  //       summary (0x2a) {value (0x0a) {tag "a" (0x0a), simple_value 1.0f (0x15, fixed32)}}}.
  EXPECT_EQ(hex(encode_scalar_event(1.5, 7, "a", 1.0f)), "09000000000000f83f" "1007" "2a0a" "0a08" "0a0161" "150000803f");
  // A negative step is the 10-byte varint of its two's complement; step 0 and wall_time 0 are
  // proto3 defaults and left out, but simple_value 0 is a oneof member and stays.
  EXPECT_EQ(hex(encode_scalar_event(0, -1, "a", 0.0f)), "10ffffffffffffffffff01" "2a0a0a080a016115" "00000000");
  EXPECT_EQ(hex(encode_scalar_event(0, 0, "a", 0.0f)), "2a0a0a080a01611500000000");
  EXPECT_EQ(hex(encode_file_version_event(0)), "1a0d" + hex("brain.Event:2"));
}

TEST_F(SummaryWriterTest, FileNameAndFirstRecord) {
  SummaryWriter writer((dir_ / "run").string(), {.filename_suffix = ".v2"});
  const fs::path file(writer.file_path());
  EXPECT_EQ(file.parent_path(), dir_ / "run");
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::regex pattern("events\\.out\\.tfevents\\.[0-9]{10}\\." + std::regex_replace(host, std::regex("\\."), "\\.") +
                           "\\." + std::to_string(getpid()) + "\\.[0-9]+\\.v2");
  EXPECT_TRUE(std::regex_match(file.filename().string(), pattern)) << file.filename();
  // The file-version record is on disk before any scalar: wall_time, then file_version.
  const std::string bytes = read_bytes(file);
  ASSERT_EQ(bytes.size(), 16u + 9 + 2 + 13);
  EXPECT_EQ(bytes[12], '\x09');
  const double wall = std::bit_cast<double>(
      static_cast<uint64_t>(le32(bytes, 13)) | (static_cast<uint64_t>(le32(bytes, 17)) << 32));
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(wall, now, 60);
  EXPECT_EQ(bytes.substr(21, 2), "\x1a\x0d");
  EXPECT_EQ(bytes.substr(23, 13), "brain.Event:2");
  EXPECT_EQ(le32(bytes, 36), mask_crc32c(crc32c(bytes.substr(12, 24))));
  // A second writer in the same second gets its own file.
  SummaryWriter other((dir_ / "run").string());
  EXPECT_NE(other.file_path(), writer.file_path());
}

TEST_F(SummaryWriterTest, ScalarsReadBackByTheIndependentReader) {
  if (!have_python()) GTEST_SKIP() << "no " << python() << " (set TG_PYTHON)";
  struct Point {
    std::string tag;
    int64_t step;
    float value;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<Point> points = {
      {"loss/train", 0, 2.302585f},         {"loss/train", 1, 0.1f},
      {"loss/val", 1, -2.5f},               {"lr", 1, 3e-4f},
      {"loss/train", 2, 1e-30f},            {"loss/train", 3, std::numeric_limits<float>::denorm_min()},
      {"loss/val", 1099511627776, 3.4028235e38f}, {"lr", -3, -0.0f},
      {"loss/train", 4, std::nanf("")},     {"loss/train", 5, inf},
      {"loss/train", 6, -inf},              {"unicode/\xc3\xa9t\xc3\xa9", 7, 0.5f},
  };
  {
    SummaryWriter writer((dir_ / "logs" / "a").string());
    for (const Point& p : points) writer.add_scalar(p.tag, p.value, p.step);
    writer.add_scalar("explicit_time", 1.0f, 8, 1700000000.125);
  }  // the destructor flushes
  const json got = read_events(dir_ / "logs" / "a");
  ASSERT_EQ(got["files"].size(), 1u);
  EXPECT_EQ(got["files"][0]["file_version"], "brain.Event:2");
  EXPECT_EQ(got["files"][0]["records"], points.size() + 2);
  ASSERT_EQ(got["scalars"].size(), points.size() + 1);
  for (size_t i = 0; i < points.size(); ++i) {
    const json& s = got["scalars"][i];
    SCOPED_TRACE("point " + std::to_string(i));
    EXPECT_EQ(s["tag"], points[i].tag);
    EXPECT_EQ(s["step"].get<int64_t>(), points[i].step);
    const float v = points[i].value;
    if (std::isnan(v)) {
      EXPECT_EQ(s["value"], "NaN");
    } else if (std::isinf(v)) {
      EXPECT_EQ(s["value"], v > 0 ? "Infinity" : "-Infinity");
    } else {
      // Python prints the float32 value widened to double exactly; narrowing it back must give
      // the same bits (so -0.0 stays negative).
      EXPECT_EQ(std::bit_cast<uint32_t>(static_cast<float>(s["value"].get<double>())), std::bit_cast<uint32_t>(v))
          << s["value"];
    }
  }
  EXPECT_EQ(got["scalars"].back()["wall_time"].get<double>(), 1700000000.125);
}

TEST_F(SummaryWriterTest, BuffersUntilMaxQueueOrFlush) {
  SummaryWriter writer(dir_.string(), {.max_queue = 3, .flush_secs = 1e9});
  const auto header = fs::file_size(writer.file_path());
  writer.add_scalar("x", 1.0f, 1);
  writer.add_scalar("x", 2.0f, 2);
  EXPECT_EQ(fs::file_size(writer.file_path()), header);  // still buffered
  writer.add_scalar("x", 3.0f, 3);
  const auto three = fs::file_size(writer.file_path());
  EXPECT_GT(three, header);  // the third record filled the queue
  writer.add_scalar("x", 4.0f, 4);
  EXPECT_EQ(fs::file_size(writer.file_path()), three);
  writer.flush();
  EXPECT_GT(fs::file_size(writer.file_path()), three);
  writer.close();
  writer.close();  // a second close does nothing
  EXPECT_THROW_MSG(writer.add_scalar("x", 5.0f, 5), "after close()");
}

TEST_F(SummaryWriterTest, FlushSecsFlushesOnTheNextRecord) {
  SummaryWriter writer(dir_.string(), {.max_queue = 1000, .flush_secs = 0});
  const auto header = fs::file_size(writer.file_path());
  writer.add_scalar("x", 1.0f, 1);
  EXPECT_GT(fs::file_size(writer.file_path()), header);
}

TEST_F(SummaryWriterTest, UnusableLogDirIsAnErrorNamingIt) {
  std::ofstream(dir_ / "plain_file") << "not a directory";
  const std::string under_file = (dir_ / "plain_file" / "logs").string();
  EXPECT_THROW_MSG(SummaryWriter{under_file}, "cannot create log directory '" + under_file + "'");
  EXPECT_THROW_MSG(SummaryWriter{(dir_ / "plain_file").string()}, "log directory '" + (dir_ / "plain_file").string() + "'");
  EXPECT_THROW_MSG(SummaryWriter{""}, "empty path");
  EXPECT_THROW(SummaryWriter{under_file}, std::runtime_error);
  if (geteuid() != 0) {  // permissions do not stop root
    const fs::path locked = dir_ / "locked";
    fs::create_directories(locked);
    fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THROW_MSG(SummaryWriter{locked.string()}, "cannot write in log directory '" + locked.string() + "'");
    EXPECT_THROW_MSG(SummaryWriter{(locked / "sub").string()}, "Permission denied");
  }
}

// The SVG chart: the tests look at its text, and Python's XML parser checks that every file a test
// wrote is well-formed (once per test, as starting Python is slow).
class SvgPlotTest : public SummaryWriterTest {
 protected:
  void TearDown() override {
    if (have_python() && !written_.empty()) {
      std::string files;
      for (const fs::path& f : written_) files += " " + quoted(f.string());
      run(python() + " -c 'import sys, xml.etree.ElementTree as E; [E.parse(f) for f in sys.argv[1:]]'" + files,
          dir_ / "err");
    }
    SummaryWriterTest::TearDown();
  }
  void expect_well_formed(const fs::path& file) {
    written_.push_back(file);
    const std::string svg = read_bytes(file);
    EXPECT_EQ(svg.rfind("<svg", 0), 0u) << svg.substr(0, 40);
    EXPECT_EQ(svg.substr(svg.find_last_not_of('\n') - 5, 6), "</svg>");
    EXPECT_EQ(svg.find("nan"), std::string::npos);  // no NaN coordinate or label leaked out
    EXPECT_EQ(svg.find("inf"), std::string::npos);
  }
  static size_t count(const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  }
  std::vector<fs::path> written_;
};

TEST_F(SvgPlotTest, LossCurvesWithLegendAndTitle) {
  const fs::path file = dir_ / "loss.svg";
  write_svg_plot(file.string(),
                 {{"train <loss>", {0, 1, 2, 3}, {2.3, 1.1, 0.7, 0.5}}, {"val & co", {0, 2}, {2.0, 0.9}}},
                 {.title = "Loss \"curves\"", .y_label = "loss"});
  expect_well_formed(file);
  const std::string svg = read_bytes(file);
  EXPECT_NE(svg.find(">train &lt;loss&gt;</text>"), std::string::npos);
  EXPECT_NE(svg.find(">val &amp; co</text>"), std::string::npos);
  EXPECT_NE(svg.find(">Loss &quot;curves&quot;</text>"), std::string::npos);
  EXPECT_NE(svg.find(">step</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  // y ticks (right-aligned) at 0.5 steps from 0.5 to 2.0: 2.3 plus its margin stays below 2.5.
  EXPECT_NE(svg.find("\"end\">0.5</text>"), std::string::npos);
  EXPECT_NE(svg.find("\"end\">2.0</text>"), std::string::npos);
  EXPECT_EQ(svg.find("\"end\">2.5</text>"), std::string::npos);
  EXPECT_NE(svg.find("\"middle\">3.0</text>"), std::string::npos);  // x ticks 0.0 .. 3.0 at 0.5 steps
}

TEST_F(SvgPlotTest, NonFiniteValuesBreakTheLine) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const fs::path file = dir_ / "nan.svg";
  write_svg_plot(file.string(), {{"loss", {0, 1, 2, 3, 4, 5, 6}, {1, 2, nan, 3, 4, inf, 5}}});
  expect_well_formed(file);
  const std::string svg = read_bytes(file);
  EXPECT_EQ(count(svg, "<polyline"), 2u);  // 1,2 and 3,4
  EXPECT_EQ(count(svg, "<circle"), 1u);    // 5 alone after the inf
  EXPECT_NE(svg.find(">5</text>"), std::string::npos);  // the y range ends at 5, not infinity
}

TEST_F(SvgPlotTest, EmptySinglePointAndConstantSeries) {
  const fs::path empty = dir_ / "empty.svg", single = dir_ / "single.svg";
  write_svg_plot(empty.string(), {{"nothing", {}, {}}, {"only NaN", {0}, {std::nan("")}}});
  expect_well_formed(empty);
  EXPECT_NE(read_bytes(empty).find("no data"), std::string::npos);
  write_svg_plot(single.string(), {{"one", {3}, {0.25}}});
  expect_well_formed(single);
  EXPECT_EQ(count(read_bytes(single), "<circle"), 1u);
  int k = 0;
  for (const std::vector<PlotSeries>& series : std::vector<std::vector<PlotSeries>>{
           {{"flat", {0, 1, 2}, {7, 7, 7}}},
           {{"zero", {5, 5}, {0, 0}}},
           {},
           {{"huge", {0, 1}, {-1.7e308, 1.7e308}}},
           {{"tiny span", {0, 1}, {1e16, 1e16 + 2}}},
           {{"big", {0, 1e7}, {1e-7, 3e-7}}}}) {
    const fs::path file = dir_ / ("case" + std::to_string(k++) + ".svg");
    write_svg_plot(file.string(), series);
    expect_well_formed(file);
  }
}

TEST_F(SvgPlotTest, Errors) {
  const std::string bad = (dir_ / "missing" / "plot.svg").string();
  EXPECT_THROW_MSG(write_svg_plot(bad, {{"a", {0}, {1}}}), "cannot open '" + bad + "' for writing");
  EXPECT_THROW_MSG(render_svg_plot({{"a", {0, 1}, {1}}}), "series \"a\" has 2 x values but 1 y values");
  EXPECT_THROW_MSG(render_svg_plot({}, {.width = 10}), "at least 200x150");
}

}  // namespace
}  // namespace tg
