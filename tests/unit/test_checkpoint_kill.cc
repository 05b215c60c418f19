// A process saving checkpoints in a loop is killed (SIGKILL) at random
// moments: after every kill, the file under the final name loads, verifies
// and holds one whole save (never a mix of two, never a partial one), and
// pruning clears the temporary files the dead writer left.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/atomic_file.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_file.h"
#include "temp_dir.h"

using namespace dp;
using dp::testing::TempDir;

namespace {

constexpr int kKills = 60;
constexpr int64_t kFloats = 1 << 20;  // 4 MiB per tensor: a save takes a few ms

// Save number `v`: two tensors, every element v.
std::vector<std::pair<std::string, Tensor>> Version(int v) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const char* name : {"a", "b"}) {
    Tensor t({kFloats}, DType::kFloat32);
    float* p = t.mutable_data<float>();
    for (int64_t i = 0; i < kFloats; ++i) p[i] = static_cast<float>(v);
    out.emplace_back(name, std::move(t));
  }
  return out;
}

// The save a file holds: every element of every tensor the same version.
int VersionIn(const std::string& path) {
  CheckpointReader r(path);
  REQUIRE(r.entries().size() == 2);
  int version = -1;
  for (size_t i = 0; i < 2; ++i) {
    const Tensor t = r.Load(i, /*verify=*/true, /*mapped=*/false);
    const float* p = t.data<float>();
    if (version < 0) version = static_cast<int>(p[0]);
    for (int64_t k = 0; k < t.numel(); k += 4099) REQUIRE(p[k] == static_cast<float>(version));
    REQUIRE(p[t.numel() - 1] == static_cast<float>(version));
  }
  return version;
}

}  // namespace

TEST_CASE("killing a saving process at random moments never leaves a bad checkpoint under the final name") {
  TempDir dir("dp_test_ckpt_kill");
  const std::string path = dir.Path("step-000000001.dpckpt");
  // Kill moments are drawn over a few saves' time on this disk (a save of
  // 8 MiB with its fsyncs took 3 ms on one machine and 15-70 ms on another).
  const auto save_start = std::chrono::steady_clock::now();
  WriteCheckpoint(path, Version(0), {});
  const int save_us = static_cast<int>(std::chrono::duration_cast<std::chrono::microseconds>(
                                           std::chrono::steady_clock::now() - save_start)
                                           .count());
  const int max_wait_us = std::max(30000, 3 * save_us);
  std::mt19937 rng(20261125);
  int versions_seen = 0, temp_files_left = 0, last_version = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int kill_no = 0; kill_no < kKills; ++kill_no) {
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // the child: saves versions last+1, last+2, ... until killed
      ::close(ready[0]);
      const char go = 1;
      if (::write(ready[1], &go, 1) != 1) ::_exit(3);
      for (int v = last_version + 1;; ++v) {
        try {
          WriteCheckpoint(path, Version(v), {});
        } catch (...) {
          ::_exit(2);
        }
      }
    }
    ::close(ready[1]);
    char go = 0;
    REQUIRE(::read(ready[0], &go, 1) == 1);  // the child runs
    ::close(ready[0]);
    // A random moment: before its first save ends, during a later one, or
    // between two (not a synchronisation: any moment must be safe).
    std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, max_wait_us)(rng)));
    REQUIRE(::kill(pid, SIGKILL) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFSIGNALED(status));  // it was still saving, not failed
    CHECK(WTERMSIG(status) == SIGKILL);

    const int v = VersionIn(path);  // loads and verifies, one whole save
    CHECK(v >= last_version);
    versions_seen += v != last_version;
    last_version = v;
    for (const auto& name : dir.Files()) temp_files_left += AtomicFileWriter::IsTempName(name);
    PruneStepCheckpoints(dir.dir(), 1);  // the dead writer's temporary file goes
    CHECK(dir.Files() == std::vector<std::string>{"step-000000001.dpckpt"});
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE(kKills, " kills in ", seconds, " s (a save: ", save_us, " us): ", versions_seen, " new versions found, ", temp_files_left,
          " kills mid-save (temporary file left)");
  CHECK(temp_files_left > 0);  // some kills did land in the middle of a save
  CHECK(versions_seen > 0);    // and some after a save completed
}
