// Peak memory of the worker's PULSE paths on a CI-sized state (~134 M int8 values, S ~ 138 MB):
// an anchor decoded from its spool file and a patch applied in place must each stay within the
// targets of the seed's model (peak <= 1.15 x S for the load; the undo log, not tensor copies,
// for the patch). Each measurement runs in a forked child that allocated nothing big before it:
// the child resets its high-water mark (/proc/self/clear_refs) and reports VmHWM - VmRSS at the
// start, so the figure is what the operation itself added.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "pulse/anchor_stream.h"
#include "pulse/format.h"
#include "pulse/patch.h"
#include "pulse/pulse_test_util.h"
#include "support/sanitizer.h"
#include "support/temp_dir.h"

namespace stoa::pulse {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kTensors = 32, kRows = 4096, kCols = 1024;

int64_t status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(std::strlen(field) + 1));
  return -1;
}

// Runs `body` in a child; returns the bytes its peak RSS rose above its RSS at the start (or -1
// when the body threw or the child failed).
int64_t child_peak_growth(const std::function<void()>& prepare, const std::function<void()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    int64_t growth = -1;
    try {
      prepare();
      std::ofstream("/proc/self/clear_refs") << "5";  // reset VmHWM to the current RSS
      const int64_t start = status_kib("VmRSS:");
      body();
      growth = (status_kib("VmHWM:") - start) * 1024;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
    }
    (void)!::write(fds[1], &growth, sizeof(growth));
    std::_Exit(0);
  }
  ::close(fds[1]);
  int64_t growth = -1;
  if (::read(fds[0], &growth, sizeof(growth)) != sizeof(growth)) growth = -1;
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return growth;
}

struct PulseMemoryTest : stoa::testing::TempDirTest {
  void SetUp() override {
    // Made in a child too, so that this process never holds the state (a fork inherits it).
    ASSERT_GE(child_peak_growth(
                  [] {},
                  [this] {
                    const Int8State a = testing::synthetic_state(kTensors, kRows, kCols, 1);
                    write(anchor_path(), encode_anchor(a));
                    write(patch_path(), encode_patch(make_patch(a, testing::synthetic_step(a))));
                  }),
              0);
    state_bytes = static_cast<int64_t>(kTensors * kRows * kCols * (1 + 2.0 / kInt8GroupSize));
  }
  static void write(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }
  static std::vector<uint8_t> read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
  }
  std::string anchor_path() const { return (dir / "anchor.blob").string(); }
  std::string patch_path() const { return (dir / "patch.blob").string(); }
  int64_t state_bytes = 0;
};

TEST_F(PulseMemoryTest, AnAnchorLoadsFromItsFileWithinOnePointOneFiveTimesTheState) {
  if (stoa::testing::kSanitizerShadowsMemory)
    GTEST_SKIP() << stoa::testing::kNoMemoryBoundsUnderSanitizer;
  const int64_t streamed = child_peak_growth([] {},
                                             [this] {
                                               Int8State s = decode_anchor_file(anchor_path());
                                               if (s.size() != static_cast<size_t>(kTensors))
                                                 throw std::runtime_error("short state");
                                             });
  // The whole-blob path, for the record: blob + inflated payload + state.
  const int64_t in_memory =
      child_peak_growth([] {}, [this] { Int8State s = decode_anchor(read(anchor_path())); });
  const double ratio = static_cast<double>(streamed) / static_cast<double>(state_bytes);
  std::printf(
      "int8 state %.1f MB: anchor from file peaks at +%.1f MB (%.3f x), in memory +%.1f MB\n",
      state_bytes / 1e6, streamed / 1e6, ratio, in_memory / 1e6);
  ASSERT_GT(streamed, 0);
  EXPECT_LE(ratio, 1.15);
  EXPECT_GT(in_memory, streamed);
}

TEST_F(PulseMemoryTest, APatchAppliesInPlaceWithAnUndoLogNotCopies) {
  if (stoa::testing::kSanitizerShadowsMemory)
    GTEST_SKIP() << stoa::testing::kNoMemoryBoundsUnderSanitizer;
  std::optional<Int8State> state;
  std::vector<uint8_t> blob;
  const int64_t growth = child_peak_growth(
      [&] {
        state = decode_anchor_file(anchor_path());
        blob = read(patch_path());
      },
      [&] {
        Patch patch = decode_patch(blob, patch_limits_for(*state));
        apply_patch(*state, patch);
        if (state->version() != 2) throw std::runtime_error("not applied");
      });
  const double ratio = static_cast<double>(growth) / static_cast<double>(state_bytes);
  std::printf("patch of %.2f MB on a %.1f MB state: peak +%.1f MB (%.3f x)\n",
              static_cast<double>(fs::file_size(patch_path())) / 1e6, state_bytes / 1e6,
              growth / 1e6, ratio);
  ASSERT_GT(growth, 0);
  // One copy of a single tensor would already be 1/32 of the state; every touched tensor copied
  // would be ~1x.
  EXPECT_LE(ratio, 0.10);
}

}  // namespace
}  // namespace stoa::pulse
