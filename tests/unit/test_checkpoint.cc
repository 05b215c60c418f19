// Checkpoint files (src/checkpoint/): the layout, exact round trips in both
// load modes, atomic replacement, and every way a file can be bad.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "checkpoint/atomic_file.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_file.h"
#include "checkpoint/checksum.h"
#include "checkpoint/workspace_checkpoint.h"
#include "checkpoint/write_pacer.h"
#include "core/logging.h"
#include "core/workspace.h"
#include "exec/net.h"
#include "graph/net_format.h"
#include "expect_error.h"
#include "temp_dir.h"

using namespace dp;
using dp::testing::ExpectError;
using dp::testing::TempDir;

namespace {

using Bytes = std::vector<char>;

Bytes ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

void WriteAll(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(b.data(), static_cast<std::streamsize>(b.size()));
}

template <typename T>
Tensor Make(Dims dims, DType dtype, T start) {
  Tensor t(dims, dtype);
  T* p = static_cast<T*>(t.raw_mutable_data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(start + static_cast<T>(i));
  return t;
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.dims() == b.dims() && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0);
}

// Tensors of several dtypes and shapes: a scalar, an empty one, odd sizes
// (so that padding is needed), a larger one.
std::vector<std::pair<std::string, Tensor>> Sample() {
  return {{"w", Make<float>({3, 5}, DType::kFloat32, 0.5f)},
          {"optimizer/iter", Make<int64_t>({1}, DType::kInt64, 41)},
          {"bytes", Make<uint8_t>({7}, DType::kUInt8, 200)},
          {"scalar", Make<double>({}, DType::kFloat64, -2.25)},
          {"empty", Tensor({0, 3}, DType::kFloat32)},
          {"big", Make<int32_t>({100, 37}, DType::kInt32, -1000)}};
}

CheckpointMeta SampleMeta() {
  CheckpointMeta m;
  m.model_name = "mlp";
  m.iteration = 41;
  m.device_type = "cpu";
  m.replicas = 2;
  m.shards = 1;
  return m;
}

}  // namespace

TEST_CASE("a checkpoint round-trips exactly, read or mapped, with the layout it documents") {
  TempDir dir("dp_test_ckpt");
  const std::string path = dir.Path("a.dpckpt");
  const auto tensors = Sample();
  WriteCheckpoint(path, tensors, SampleMeta());
  CHECK(dir.Files() == std::vector<std::string>{"a.dpckpt"});  // no temporary file left

  const Bytes bytes = ReadAll(path);
  REQUIRE(bytes.size() > kCheckpointPreambleSize);
  CHECK(std::memcmp(bytes.data(), "\x89" "DPCKPT\n", 8) == 0);
  uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  CHECK(version == kCheckpointFormatVersion);

  CheckpointReader r(path);
  CHECK(r.meta().model_name == "mlp");
  CHECK(r.meta().iteration == 41);
  CHECK(r.meta().device_type == "cpu");
  CHECK(r.meta().replicas == 2);
  CHECK(r.meta().shards == 1);
  CHECK(!r.meta().dp_version.empty());
  REQUIRE(r.entries().size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const CheckpointEntry& e = r.entries()[i];
    CAPTURE(e.name);
    CHECK(e.name == tensors[i].first);
    CHECK(e.offset % 64 == 0);
    CHECK(e.length == tensors[i].second.nbytes());
    CHECK(e.xxh3 == Xxh3(tensors[i].second.raw_data(), e.length));
    CHECK(r.Find(e.name) == static_cast<int>(i));
    for (bool mapped : {false, true}) {
      const Tensor t = r.Load(i, /*verify=*/true, mapped);
      CHECK(SameBytes(t, tensors[i].second));
      CHECK(t.device() == DeviceOption{});
      if (mapped && e.length > 0) {  // a view of the file's bytes
        CHECK(std::memcmp(t.raw_data(), bytes.data() + e.offset, e.length) == 0);
        CHECK(reinterpret_cast<uintptr_t>(t.raw_data()) % 64 == 0);
      }
    }
  }
  CHECK(r.Find("nope") == -1);
  // The last tensor ends the file.
  CHECK(r.entries().back().offset + r.entries().back().length == bytes.size());
}

TEST_CASE("a mapped tensor outlives its reader and is copied before a write") {
  TempDir dir("dp_test_ckpt");
  const std::string path = dir.Path("m.dpckpt");
  WriteCheckpoint(path, Sample(), {});
  Tensor t;
  {
    CheckpointReader r(path);
    t = r.Load(0, true, /*mapped=*/true);
  }
  const void* view = t.raw_data();
  CHECK(t.data<float>()[2] == 2.5f);
  float* w = t.mutable_data<float>();  // copy-on-write: the file's pages stay untouched
  CHECK(static_cast<const void*>(w) != view);
  w[2] = 99;
  CheckpointReader again(path);
  CHECK(again.Load(0, true, true).data<float>()[2] == 2.5f);
}

TEST_CASE("saving over a checkpoint replaces it whole; a failed save leaves it and no temporary file") {
  TempDir dir("dp_test_ckpt");
  const std::string path = dir.Path("c.dpckpt");
  WriteCheckpoint(path, Sample(), SampleMeta());
  const Bytes before = ReadAll(path);

  std::vector<std::pair<std::string, Tensor>> other = {{"x", Make<float>({4}, DType::kFloat32, 1.0f)}};
  // A full disk at every point of the write: after the first bytes, in the
  // middle of the data, at the very end (the header and preamble patches).
  static uint64_t fail_after;
  for (uint64_t limit : {uint64_t{1}, uint64_t{100}, uint64_t{200}, uint64_t{100000}}) {
    CAPTURE(limit);
    fail_after = limit;
    SetWriteFaultHookForTesting([](uint64_t total) { return total > fail_after ? ENOSPC : 0; });
    std::vector<std::pair<std::string, Tensor>> big = Sample();
    big.emplace_back("more", Make<float>({50000}, DType::kFloat32, 0.0f));
    ExpectError([&] { WriteCheckpoint(path, big, {}); }, Code::kIo, {path, std::strerror(ENOSPC)});
    SetWriteFaultHookForTesting(nullptr);
    CHECK(ReadAll(path) == before);
    CHECK(dir.Files() == std::vector<std::string>{"c.dpckpt"});
  }
  WriteCheckpoint(path, other, {});
  CheckpointReader r(path);
  REQUIRE(r.entries().size() == 1);
  CHECK(r.entries()[0].name == "x");
  CHECK(dir.Files() == std::vector<std::string>{"c.dpckpt"});
}

TEST_CASE("a paced write produces the same file; a write share outside (0, 1] is refused") {
  TempDir dir("dp_test_ckpt");
  const std::string flat = dir.Path("flat.dpckpt"), paced = dir.Path("paced.dpckpt");
  std::vector<std::pair<std::string, Tensor>> tensors = Sample();
  tensors.emplace_back("over_a_piece", Make<float>({300000}, DType::kFloat32, 0.0f));  // 1.2 MB: two pieces
  WriteCheckpoint(flat, tensors, SampleMeta());
  WriteCheckpoint(paced, tensors, SampleMeta(), 0.5);
  CHECK(ReadAll(paced) == ReadAll(flat));
  for (double bad : {0.0, -1.0, 1.5, std::nan("")}) {
    CAPTURE(bad);
    ExpectError([&] { WriteCheckpoint(dir.Path("bad.dpckpt"), tensors, {}, bad); }, Code::kInvalidArgument,
                {"bad.dpckpt", "write share"});
    // Refused at the start, not by the background thread.
    ExpectError([&] { AsyncCheckpointSave save(tensors, dir.Path("bad.dpckpt"), {}, bad); },
                Code::kInvalidArgument, {"bad.dpckpt", "write share"});
  }
  CHECK(dir.Files() == std::vector<std::string>{"flat.dpckpt", "paced.dpckpt"});
  AsyncCheckpointSave save(tensors, paced, {}, 0.25);
  CHECK(save.Wait(-1));
  CHECK(CheckpointReader(paced).entries().size() == tensors.size());
}

TEST_CASE("the write pacer rests (1/share - 1) times as long as each piece took; share 1 never rests") {
  using Clock = std::chrono::steady_clock;
  CHECK_FALSE(WritePacer(1.0).active());
  WritePacer pacer(0.25);  // rests 3x the work
  REQUIRE(pacer.active());
  for (int piece = 0; piece < 3; ++piece) {
    pacer.Start();
    const Clock::time_point started = Clock::now();
    while (Clock::now() - started < std::chrono::milliseconds(2)) {
    }  // the piece's work
    const Clock::time_point worked = Clock::now();
    pacer.Rest();
    // sleep_for sleeps at least what it is asked: a lower bound, never flaky.
    CHECK(Clock::now() - worked >= 3 * (worked - started));
  }
}

TEST_CASE("temporary files are named so that they are never taken for checkpoints") {
  CHECK(AtomicFileWriter::IsTempName(".step-000100.dpckpt.tmp.123.0"));
  CHECK_FALSE(AtomicFileWriter::IsTempName("step-000100.dpckpt"));
  TempDir dir("dp_test_ckpt");
  {
    AtomicFileWriter w(dir.Path("x.dpckpt"));
    w.Write("abc", 3);
    const auto files = dir.Files();
    REQUIRE(files.size() == 1);
    CHECK(AtomicFileWriter::IsTempName(files[0]));
    CHECK(files[0].rfind(".x.dpckpt.tmp.", 0) == 0);
  }  // abandoned: removed
  CHECK(dir.Files().empty());
  ExpectError([&] { AtomicFileWriter w(dir.Path("no_such_dir/x.dpckpt")); }, Code::kIo, {"no_such_dir"});
  // A directory where no file can be created (procfs answers ENOENT) is kIo too.
  ExpectError([&] { AtomicFileWriter w("/proc/dp_test.dpckpt"); }, Code::kIo, {"/proc"});
}

TEST_CASE("saving refuses what it cannot write faithfully") {
  TempDir dir("dp_test_ckpt");
  const std::string path = dir.Path("bad.dpckpt");
  auto t = Make<float>({2}, DType::kFloat32, 0.0f);
  ExpectError([&] { WriteCheckpoint(path, {{"a", t}, {"a", t}}, {}); }, Code::kInvalidArgument, {"'a'", "twice"});
  ExpectError([&] { WriteCheckpoint(path, {{"", t}}, {}); }, Code::kInvalidArgument, {"without a name"});
  ExpectError([&] { WriteCheckpoint(path, {{"u", Tensor()}}, {}); }, Code::kInvalidArgument, {"'u'", "undefined"});
  ExpectError([&] { WriteCheckpoint(path, {{"bad\xff", t}}, {}); }, Code::kInvalidArgument, {"UTF-8"});
  CHECK(dir.Files().empty());
}

TEST_CASE("every truncation of a checkpoint is detected") {
  TempDir dir("dp_test_ckpt");
  const std::string path = dir.Path("t.dpckpt"), cut = dir.Path("cut.dpckpt");
  WriteCheckpoint(path, {{"w", Make<float>({3, 5}, DType::kFloat32, 0.5f)}, {"b", Make<int64_t>({3}, DType::kInt64, 7)}},
                  SampleMeta());
  const Bytes bytes = ReadAll(path);
  for (size_t len = 0; len < bytes.size(); ++len) {
    CAPTURE(len);
    WriteAll(cut, Bytes(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len)));
    ExpectError([&] { CheckpointReader r(cut); }, Code::kDataLoss, {cut, "truncated"});
  }
  // One byte more is caught too.
  Bytes longer = bytes;
  longer.push_back(0);
  WriteAll(cut, longer);
  ExpectError([&] { CheckpointReader r(cut); }, Code::kDataLoss, {"longer than written"});
}

TEST_CASE("a flipped bit anywhere in the preamble, header or tensor bytes is detected") {
  TempDir dir("dp_test_ckpt");
  const std::string path = dir.Path("f.dpckpt"), bad = dir.Path("bad.dpckpt");
  WriteCheckpoint(path, {{"w", Make<float>({3, 5}, DType::kFloat32, 0.5f)}, {"b", Make<int64_t>({3}, DType::kInt64, 7)}},
                  SampleMeta());
  const Bytes bytes = ReadAll(path);
  std::vector<std::pair<uint64_t, uint64_t>> covered;  // [begin, end) under a checksum
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data() + 24, 8);
  covered.emplace_back(0, kCheckpointPreambleSize + header_size);
  {
    CheckpointReader r(path);
    for (const auto& e : r.entries()) covered.emplace_back(e.offset, e.offset + e.length);
  }
  int flips = 0;
  for (const auto& [begin, end] : covered)
    for (uint64_t i = begin; i < end; ++i)
      for (int bit : {0, 7}) {
        CAPTURE(i);
        CAPTURE(bit);
        Bytes b = bytes;
        b[i] = static_cast<char>(b[i] ^ (1 << bit));
        WriteAll(bad, b);
        bool detected = false;
        try {
          CheckpointReader r(bad);
          for (size_t k = 0; k < r.entries().size(); ++k) r.Load(k, /*verify=*/true, /*mapped=*/k % 2 == 1);
        } catch (const Error& e) {
          detected = e.code() == Code::kDataLoss || e.code() == Code::kParse;
          CHECK_MESSAGE(e.message().find(bad) != std::string::npos, e.message());
        }
        CHECK(detected);
        ++flips;
      }
  // The preamble, a header of a few hundred bytes and 15 floats + 3 int64s.
  CHECK(flips == 2 * (64 + static_cast<int>(header_size) + 60 + 24));
  CHECK(header_size > 100);
}

TEST_CASE("not a checkpoint, or a newer format") {
  TempDir dir("dp_test_ckpt");
  const std::string path = dir.Path("x.dpckpt");
  WriteAll(path, Bytes{'h', 'e', 'l', 'l', 'o', '\n'});
  ExpectError([&] { CheckpointReader r(path); }, Code::kParse, {path, "not a dp checkpoint"});
  ExpectError([&] { CheckpointReader r(dir.Path("missing")); }, Code::kNotFound, {"missing"});
  ExpectError([&] { CheckpointReader r(dir.dir()); }, Code::kIo, {dir.dir()});

  WriteCheckpoint(path, Sample(), {});
  Bytes b = ReadAll(path);
  const uint32_t v2 = 2;
  std::memcpy(b.data() + 8, &v2, 4);
  const uint64_t sum = Xxh3(b.data(), 56);  // a consistent preamble of a future version
  std::memcpy(b.data() + 56, &sum, 8);
  WriteAll(path, b);
  ExpectError([&] { CheckpointReader r(path); }, Code::kUnimplemented, {"format version 2"});
}

TEST_CASE("loading into a workspace checks names, dtypes and shapes before replacing anything") {
  TempDir dir("dp_test_ckpt");
  const std::string path = dir.Path("ws.dpckpt");
  Workspace src;
  for (auto& [name, t] : Sample()) src.Feed(name, t);
  src.CreateBlob("not_a_tensor")->GetMutable<int>();
  SaveCheckpoint(src, SameNames({"w", "optimizer/iter", "big"}), path, {});
  ExpectError([&] { SaveCheckpoint(src, SameNames({"nope"}), path, {}); }, Code::kNotFound, {"'nope'"});
  ExpectError([&] { SaveCheckpoint(src, SameNames({"not_a_tensor"}), path, {}); }, Code::kDType, {"'not_a_tensor'"});

  // Strict: the blobs must exist.
  Workspace fresh;
  ExpectError([&] { LoadCheckpoint(fresh, path, {}); }, Code::kNotFound, {path, "'w'", "no blob 'w'"});
  CHECK(fresh.Blobs().empty());
  LoadCheckpointOptions lenient;
  lenient.lenient = true;
  CHECK(LoadCheckpoint(fresh, path, lenient) == std::vector<std::string>{"w", "optimizer/iter", "big"});
  for (const char* n : {"w", "optimizer/iter", "big"}) CHECK(SameBytes(fresh.GetTensor(n), src.GetTensor(n)));

  // A mismatch anywhere leaves every blob as it was.
  Workspace ws;
  ws.Feed("w", Tensor({3, 5}, DType::kFloat32));
  ws.Feed("optimizer/iter", Tensor({1}, DType::kInt64));
  ws.Feed("big", Tensor({100, 36}, DType::kInt32));  // the wrong shape
  const Tensor w_before = ws.GetTensor("w");
  ExpectError([&] { LoadCheckpoint(ws, path, {}); }, Code::kShape, {path, "'big'", "[100, 37]"});
  CHECK(ws.GetTensor("w").raw_data() == w_before.raw_data());
  ws.Feed("big", Tensor({100, 37}, DType::kFloat32));  // the wrong dtype
  ExpectError([&] { LoadCheckpoint(ws, path, {}); }, Code::kDType, {path, "'big'", "int32"});
  CHECK(ws.GetTensor("w").raw_data() == w_before.raw_data());

  // A subset by name; a name the file lacks is an error unless lenient.
  LoadCheckpointOptions some;
  some.bindings = SameNames({"w"});
  for (bool mapped : {false, true}) {
    some.mapped = mapped;
    CHECK(LoadCheckpoint(ws, path, some) == std::vector<std::string>{"w"});
    CHECK(SameBytes(ws.GetTensor("w"), src.GetTensor("w")));
  }
  some.bindings = SameNames({"w", "missing"});
  ExpectError([&] { LoadCheckpoint(ws, path, some); }, Code::kNotFound, {"'missing'"});
  some.lenient = true;
  CHECK(LoadCheckpoint(ws, path, some) == std::vector<std::string>{"w"});
  // A file name into another blob (how data-parallel models drop their scope).
  some.bindings = {{"w", "cpu_3/w"}};
  CHECK(LoadCheckpoint(ws, path, some) == std::vector<std::string>{"cpu_3/w"});
  CHECK(SameBytes(ws.GetTensor("cpu_3/w"), src.GetTensor("w")));
  some.lenient = false;
  some.bindings = {{"w", "cpu_4/w"}};
  ExpectError([&] { LoadCheckpoint(ws, path, some); }, Code::kNotFound, {"'w'", "no blob 'cpu_4/w'"});

  // A corrupted tensor: nothing is replaced.
  ws.Feed("big", Tensor({100, 37}, DType::kInt32));
  Bytes b = ReadAll(path);
  b[b.size() - 1] = static_cast<char>(b[b.size() - 1] ^ 1);
  WriteAll(path, b);
  const Tensor w_now = ws.GetTensor("w");
  ExpectError([&] { LoadCheckpoint(ws, path, {}); }, Code::kDataLoss, {path, "'big'", "checksum"});
  CHECK(ws.GetTensor("w").raw_data() == w_now.raw_data());
  LoadCheckpointOptions unchecked;
  unchecked.verify = false;  // what no_verify is for: the bytes load as they are
  LoadCheckpoint(ws, path, unchecked);
  CHECK(ws.GetTensor("big").data<int32_t>()[3699] == (2699 ^ (1 << 24)));  // the last byte is its high byte
}

TEST_CASE("Save and Load are operators: names map blobs to file entries, and a failed Load changes nothing") {
  TempDir dir("dp_test_ckpt");
  const std::string path = dir.Path("ops.dpckpt");
  auto ws = std::make_shared<Workspace>();
  ws->Feed("cpu_0/w", Make<float>({2, 2}, DType::kFloat32, 1.0f));
  ws->Feed("cpu_0/b", Make<float>({2}, DType::kFloat32, 5.0f));
  const std::string save = R"({"name":"save","external_inputs":["cpu_0/w","cpu_0/b"],"ops":[{"type":"Save",
      "inputs":["cpu_0/w","cpu_0/b"],"args":[{"name":"path","s":")" + path + R"("},{"name":"names","strings":["w","b"]},
      {"name":"model_name","s":"m"},{"name":"iteration","i":3}]}]})";
  Net(std::make_shared<const NetDef>(NetDefFromJson(save)), ws).Run();
  {
    CheckpointReader r(path);
    REQUIRE(r.entries().size() == 2);
    CHECK(r.entries()[0].name == "w");
    CHECK(r.entries()[1].name == "b");
    CHECK(r.meta().model_name == "m");
    CHECK(r.meta().iteration == 3);
  }
  // Into other scopes, read and mapped.
  for (int mapped : {0, 1}) {
    const std::string load = R"({"name":"load","ops":[{"type":"Load","outputs":["cpu_1/w","cpu_1/b"],
        "args":[{"name":"path","s":")" + path + R"("},{"name":"names","strings":["w","b"]},{"name":"mmap","i":)" +
                             std::to_string(mapped) + "}]}]}";
    Net(std::make_shared<const NetDef>(NetDefFromJson(load)), ws).Run();
    CHECK(SameBytes(ws->GetTensor("cpu_1/w"), ws->GetTensor("cpu_0/w")));
    CHECK(SameBytes(ws->GetTensor("cpu_1/b"), ws->GetTensor("cpu_0/b")));
  }
  // A mismatching second output: the first is not written either.
  ws->Feed("cpu_2/w", Tensor({2, 2}, DType::kFloat32));
  ws->Feed("cpu_2/b", Tensor({3}, DType::kFloat32));
  const void* before = ws->GetTensor("cpu_2/w").raw_data();
  const std::string load2 = R"({"name":"load2","ops":[{"type":"Load","outputs":["cpu_2/w","cpu_2/b"],
      "args":[{"name":"path","s":")" + path + R"("},{"name":"names","strings":["w","b"]}]}]})";
  Net bad(std::make_shared<const NetDef>(NetDefFromJson(load2)), ws);
  ExpectError([&] { bad.Run(); }, Code::kShape, {path, "'b'", "output 1 'cpu_2/b'"});
  CHECK(ws->GetTensor("cpu_2/w").raw_data() == before);
  const std::string load3 = R"({"name":"load3","ops":[{"type":"Load","outputs":["x"],
      "args":[{"name":"path","s":")" + path + R"("}]}]})";
  Net missing(std::make_shared<const NetDef>(NetDefFromJson(load3)), ws);
  ExpectError([&] { missing.Run(); }, Code::kNotFound, {"no tensor 'x'"});
  const std::string load4 = R"({"name":"load4","ops":[{"type":"Load","outputs":["x"],
      "args":[{"name":"path","s":")" + path + R"("},{"name":"names","strings":["w","b"]}]}]})";
  ExpectError([&] { Net n(std::make_shared<const NetDef>(NetDefFromJson(load4)), ws); }, Code::kInvalidArgument,
              {"'names' has 2 entries for 1 blobs"});
}

TEST_CASE("a directory of step checkpoints: names, newest good first, pruning") {
  CHECK(StepCheckpointName(937) == "step-000000937.dpckpt");
  CHECK(StepCheckpointName(12345678901) == "step-12345678901.dpckpt");
  CHECK(ParseStepCheckpointName("step-000000937.dpckpt") == 937);
  CHECK(ParseStepCheckpointName("step-12345678901.dpckpt") == 12345678901);
  for (const char* other : {"step-.dpckpt", "step-12a.dpckpt", "step-1.dpckpt.tmp.5.0", ".step-1.dpckpt.tmp.5.0",
                            "step-1.ckpt", "xstep-1.dpckpt", "step--1.dpckpt"})
    CHECK_FALSE(ParseStepCheckpointName(other).has_value());
  ExpectError([] { StepCheckpointName(-1); }, Code::kInvalidArgument, {">= 0"});

  TempDir dir("dp_test_ckpt");
  for (int64_t step : {100, 300, 200, 400})
    WriteCheckpoint(dir.Path(StepCheckpointName(step)), {{"w", Make<float>({2}, DType::kFloat32, 1.0f)}}, {});
  // Step 400 is corrupted: listed without it, with a warning naming it.
  Bytes b = ReadAll(dir.Path(StepCheckpointName(400)));
  b[70] = static_cast<char>(b[70] ^ 0x10);
  WriteAll(dir.Path(StepCheckpointName(400)), b);
  WriteAll(dir.Path("notes.txt"), Bytes{'x'});
  static std::string warnings;
  warnings.clear();
  SetLogSink([](void*, int32_t, const char* msg) { warnings += msg; }, nullptr, LogLevel::kWarning);
  const auto listed = ListStepCheckpoints(dir.dir());
  SetLogSink(nullptr, nullptr, LogLevel::kWarning);
  CHECK(listed == std::vector<std::string>{dir.Path("step-000000300.dpckpt"), dir.Path("step-000000200.dpckpt"),
                                           dir.Path("step-000000100.dpckpt")});
  CHECK(warnings.find("step-000000400.dpckpt") != std::string::npos);
  CHECK(warnings.find("checksum") != std::string::npos);

  // Temporary files: a dead writer's goes, a live one's (this process) stays.
  WriteAll(dir.Path(".step-000000500.dpckpt.tmp.999999999.0"), Bytes{'p'});
  WriteAll(dir.Path(".step-000000500.dpckpt.tmp." + std::to_string(::getpid()) + ".7"), Bytes{'p'});
  CHECK(PruneStepCheckpoints(dir.dir(), 2) == 3);  // steps 200 and 100, the dead writer's file
  CHECK(dir.Files() == std::vector<std::string>{".step-000000500.dpckpt.tmp." + std::to_string(::getpid()) + ".7",
                                                "notes.txt", "step-000000300.dpckpt", "step-000000400.dpckpt"});
  CHECK(PruneStepCheckpoints(dir.dir(), 0) == 0);  // keep everything
  ExpectError([&] { ListStepCheckpoints(dir.Path("nope")); }, Code::kNotFound, {"nope"});
}

namespace {

// A write that blocks until the test lets it go (bounded: 10 s).
std::mutex g_gate_mu;
std::condition_variable g_gate_cv;
bool g_gate_open = false;
std::atomic<int> g_gate_hits{0};

int GatedWrite(uint64_t) {
  g_gate_hits.fetch_add(1);
  std::unique_lock<std::mutex> lock(g_gate_mu);
  g_gate_cv.wait_for(lock, std::chrono::seconds(10), [] { return g_gate_open; });
  return 0;
}

}  // namespace

TEST_CASE("an asynchronous save writes the snapshot taken at its start while training overwrites the blobs") {
  TempDir dir("dp_test_ckpt");
  const std::string path = dir.Path("async.dpckpt");
  Workspace ws;
  ws.Feed("w", Make<float>({1000}, DType::kFloat32, 0.0f));
  ws.Feed("b", Make<int64_t>({3}, DType::kInt64, 7));
  const Tensor before = ws.GetTensor("w");
  {
    std::lock_guard<std::mutex> lock(g_gate_mu);
    g_gate_open = false;
  }
  SetWriteFaultHookForTesting(&GatedWrite);
  AsyncCheckpointSave save(SnapshotCheckpoint(ws, SameNames({"w", "b"}), path), path, {});
  CHECK_FALSE(save.Wait(0));  // blocked in its first write
  // "Training" writes the blob in place: copy-on-write leaves the snapshot alone.
  Tensor* w = ws.CreateBlob("w")->GetMutable<Tensor>();
  float* p = w->mutable_data<float>();
  for (int i = 0; i < 1000; ++i) p[i] = -1.0f;
  CHECK(static_cast<const void*>(p) != before.raw_data());
  {
    std::lock_guard<std::mutex> lock(g_gate_mu);
    g_gate_open = true;
  }
  g_gate_cv.notify_all();
  CHECK(save.Wait(-1));
  CHECK(save.Wait(0));  // finished: the same result again
  // The writer has let the snapshot go: "b", never written meanwhile, is this
  // workspace's alone again and is written in place.
  Tensor* bt = ws.CreateBlob("b")->GetMutable<Tensor>();
  const void* b_before = bt->raw_data();
  CHECK(static_cast<const void*>(bt->mutable_data<int64_t>()) == b_before);
  SetWriteFaultHookForTesting(nullptr);
  CHECK(g_gate_hits.load() > 0);
  CheckpointReader r(path);
  CHECK(SameBytes(r.Load(0, true, false), before));
  CHECK(r.Load(0, true, false).data<float>()[999] == 999.0f);

  // A failed write is reported by Wait, every time.
  AsyncCheckpointSave bad(SnapshotCheckpoint(ws, SameNames({"w"}), path), dir.Path("no_dir/x.dpckpt"), {});
  ExpectError([&] { bad.Wait(-1); }, Code::kIo, {"no_dir"});
  ExpectError([&] { bad.Wait(-1); }, Code::kIo, {"no_dir"});
  // Never waited: the destructor waits.
  { AsyncCheckpointSave unwaited(SnapshotCheckpoint(ws, SameNames({"b"}), path), dir.Path("other.dpckpt"), {}); }
  CHECK(CheckpointReader(dir.Path("other.dpckpt")).entries().size() == 1);
}

namespace {

// `path` rewritten with the header's iteration set to `iteration` and both
// checksums made right again: what only a hostile or buggy writer produces.
void ForgeIteration(const std::string& path, int64_t marker, int64_t iteration) {
  Bytes b = ReadAll(path);
  uint64_t header_size;
  std::memcpy(&header_size, b.data() + 24, 8);
  const auto begin = b.begin() + kCheckpointPreambleSize, end = begin + static_cast<std::ptrdiff_t>(header_size);
  const char* m = reinterpret_cast<const char*>(&marker);
  const auto at = std::search(begin, end, m, m + 8);
  REQUIRE(at != end);
  std::memcpy(&*at, &iteration, 8);
  const uint64_t header_sum = Xxh3(b.data() + kCheckpointPreambleSize, header_size);
  std::memcpy(b.data() + 32, &header_sum, 8);
  const uint64_t preamble_sum = Xxh3(b.data(), 56);
  std::memcpy(b.data() + 56, &preamble_sum, 8);
  WriteAll(path, b);
}

}  // namespace

TEST_CASE("a checkpoint's iteration is -1 or >= 0 for every writer and reader") {
  TempDir dir("dp_test_ckpt");
  const std::string path = dir.Path("it.dpckpt");
  const auto t = Make<float>({2}, DType::kFloat32, 0.0f);
  for (int64_t ok : {int64_t{-1}, int64_t{0}, std::numeric_limits<int64_t>::max()}) {
    CheckpointMeta meta;
    meta.iteration = ok;
    WriteCheckpoint(path, {{"a", t}}, meta);
    CHECK(CheckpointReader(path).meta().iteration == ok);
  }
  for (int64_t bad : {int64_t{-2}, int64_t{-3250000000000000000}, std::numeric_limits<int64_t>::min()}) {
    CAPTURE(bad);
    CheckpointMeta meta;
    meta.iteration = bad;
    ExpectError([&] { WriteCheckpoint(dir.Path("w.dpckpt"), {{"a", t}}, meta); }, Code::kInvalidArgument,
                {"w.dpckpt", "iteration " + std::to_string(bad), "-1 (unknown) or >= 0"});
  }
  CHECK(dir.Files() == std::vector<std::string>{"it.dpckpt"});

  // The Save operator refuses the argument when it is created.
  auto ws = std::make_shared<Workspace>();
  ws->Feed("w", t);
  const std::string save = R"({"name":"save","external_inputs":["w"],"ops":[{"type":"Save","name":"s",
      "inputs":["w"],"args":[{"name":"path","s":")" + dir.Path("op.dpckpt") + R"("},
      {"name":"iteration","i":-3250000000000000000}]}]})";
  ExpectError([&] { Net(std::make_shared<const NetDef>(NetDefFromJson(save)), ws); }, Code::kInvalidArgument,
              {"Save 's'", "'iteration'", "-3250000000000000000"});

  // A reader refuses a header that says otherwise, though its checksums hold.
  const int64_t marker = 0x0123456789abcdef;
  CheckpointMeta meta;
  meta.iteration = marker;
  WriteCheckpoint(path, {{"a", t}}, meta);
  ForgeIteration(path, marker, -3250000000000000000);
  ExpectError([&] { CheckpointReader r(path); }, Code::kParse, {"it.dpckpt", "header", "iteration -3250000000000000000"});
  ExpectError([&] { LoadCheckpoint(*ws, path, {}); }, Code::kParse, {"iteration -3250000000000000000"});
  ForgeIteration(path, -3250000000000000000, 7);  // the same forgery with a valid value reads
  CHECK(CheckpointReader(path).meta().iteration == 7);
}
