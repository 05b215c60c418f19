// IDX reader (data/idx_reader): every element type, plain and gzip, round
// trips; malformed, truncated and corrupt files give the documented codes
// with the path in the message; the Fashion-MNIST files load.
#include <doctest/doctest.h>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <csignal>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <vector>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "core/storage.h"
#include "data/idx_reader.h"
#include "expect_error.h"
#include "temp_dir.h"
#include "data/device_loader.h"
#include "data/loader.h"

using namespace dp;

namespace {

using dp::testing::TempDir;
using Bytes = std::vector<unsigned char>;

TempDir& Tmp() {
  static TempDir t("dp_test_data");
  return t;
}

void PutBE(Bytes& b, uint64_t v, int size) {
  for (int i = size - 1; i >= 0; --i) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
}

Bytes Header(uint8_t type, const std::vector<uint32_t>& dims) {
  Bytes b = {0, 0, type, static_cast<unsigned char>(dims.size())};
  for (uint32_t d : dims) PutBE(b, d, 4);
  return b;
}

void WritePlain(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  REQUIRE(f.good());
}

void WriteGz(const std::string& path, const Bytes& b) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  if (!b.empty()) REQUIRE(gzwrite(f, b.data(), static_cast<unsigned>(b.size())) == static_cast<int>(b.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

Bytes ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Writes `b` plain and gzipped; returns both paths.
std::vector<std::string> WriteBoth(const std::string& name, const Bytes& b) {
  std::string plain = Tmp().Path(name), gz = Tmp().Path(name + ".gz");
  WritePlain(plain, b);
  WriteGz(gz, b);
  return {plain, gz};
}

// Reading `path` must fail with `code`, naming the path (and the needle).
void ExpectReadError(const std::string& path, Code code, const std::string& needle = "") {
  CAPTURE(path);
  if (needle.empty())
    testing::ExpectError([&] { ReadIdx(path); }, code, {path});
  else
    testing::ExpectError([&] { ReadIdx(path); }, code, {path, needle});
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

uint64_t DoubleBits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

}  // namespace

TEST_CASE("IDX uint8 round trip, plain and gzip") {
  Bytes b = Header(0x08, {2, 3, 4});
  std::vector<uint8_t> want;
  for (int i = 0; i < 24; ++i) want.push_back(static_cast<uint8_t>(i * 11 % 256));
  b.insert(b.end(), want.begin(), want.end());
  for (const auto& path : WriteBoth("u8.idx", b)) {
    CAPTURE(path);
    Tensor t = ReadIdx(path);
    CHECK(t.dtype() == DType::kUInt8);
    CHECK(t.dims() == Dims{2, 3, 4});
    CHECK(Values<uint8_t>(t) == want);
  }
}

TEST_CASE("IDX int8 and int16 are widened to int32 with their sign") {
  Bytes b8 = Header(0x09, {5});
  std::vector<int32_t> want8 = {0, 1, -1, 127, -128};
  for (int32_t v : want8) PutBE(b8, static_cast<uint8_t>(v), 1);
  for (const auto& path : WriteBoth("i8.idx", b8)) {
    Tensor t = ReadIdx(path);
    CHECK(t.dtype() == DType::kInt32);
    CHECK(t.dims() == Dims{5});
    CHECK(Values<int32_t>(t) == want8);
  }
  Bytes b16 = Header(0x0B, {2, 3});
  std::vector<int32_t> want16 = {0, 1, -1, 32767, -32768, 258};
  for (int32_t v : want16) PutBE(b16, static_cast<uint16_t>(v), 2);
  for (const auto& path : WriteBoth("i16.idx", b16)) {
    Tensor t = ReadIdx(path);
    CHECK(t.dtype() == DType::kInt32);
    CHECK(t.dims() == Dims{2, 3});
    CHECK(Values<int32_t>(t) == want16);
  }
}

TEST_CASE("IDX widening crosses chunk boundaries") {
  const uint32_t n = (1u << 20) + 77;  // more than one widening chunk
  Bytes b = Header(0x0B, {n});
  std::vector<int32_t> want(n);
  for (uint32_t i = 0; i < n; ++i) {
    want[i] = static_cast<int16_t>(i * 2654435761u >> 16);
    PutBE(b, static_cast<uint16_t>(want[i]), 2);
  }
  for (const auto& path : WriteBoth("i16_big.idx", b)) {
    Tensor t = ReadIdx(path);
    CHECK(t.dims() == Dims{n});
    CHECK(Values<int32_t>(t) == want);
  }
}

TEST_CASE("IDX int32, float32 and float64 are converted from big-endian") {
  Bytes bi = Header(0x0C, {4});
  std::vector<int32_t> wanti = {0, -2, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()};
  for (int32_t v : wanti) PutBE(bi, static_cast<uint32_t>(v), 4);
  for (const auto& path : WriteBoth("i32.idx", bi)) {
    Tensor t = ReadIdx(path);
    CHECK(t.dtype() == DType::kInt32);
    CHECK(Values<int32_t>(t) == wanti);
  }

  Bytes bf = Header(0x0D, {2, 2});
  std::vector<float> wantf = {1.5f, -0.25f, 3.0e38f, std::numeric_limits<float>::denorm_min()};
  for (float v : wantf) PutBE(bf, FloatBits(v), 4);
  for (const auto& path : WriteBoth("f32.idx", bf)) {
    Tensor t = ReadIdx(path);
    CHECK(t.dtype() == DType::kFloat32);
    CHECK(t.dims() == Dims{2, 2});
    CHECK(Values<float>(t) == wantf);
  }

  Bytes bd = Header(0x0E, {1, 3, 1});
  std::vector<double> wantd = {M_PI, -1e300, -0.0};
  for (double v : wantd) PutBE(bd, DoubleBits(v), 8);
  for (const auto& path : WriteBoth("f64.idx", bd)) {
    Tensor t = ReadIdx(path);
    CHECK(t.dtype() == DType::kFloat64);
    CHECK(t.dims() == Dims{1, 3, 1});
    std::vector<double> got = Values<double>(t);
    CHECK(got == wantd);
    CHECK(std::signbit(got[2]));
  }
}

TEST_CASE("IDX with a zero dimension gives an empty tensor") {
  for (const auto& path : WriteBoth("empty_dim.idx", Header(0x0D, {0, 7}))) {
    Tensor t = ReadIdx(path);
    CHECK(t.dtype() == DType::kFloat32);
    CHECK(t.dims() == Dims{0, 7});
    CHECK(t.numel() == 0);
  }
  // Huge dims next to a zero are still an empty tensor.
  for (const auto& path : WriteBoth("empty_huge.idx", Header(0x08, {0xFFFFFFFF, 0, 0xFFFFFFFF}))) {
    Tensor t = ReadIdx(path);
    CHECK(t.dims() == Dims{0xFFFFFFFF, 0, 0xFFFFFFFF});
    CHECK(t.numel() == 0);
  }
}

TEST_CASE("IDX: missing file, directory, unreadable file") {
  ExpectReadError(Tmp().dir() + "/no_such_file.idx", Code::kNotFound, "not found");
  ExpectReadError(Tmp().dir() + "/no_such_dir/x.idx", Code::kNotFound);
  ExpectReadError(Tmp().dir(), Code::kIo, "directory");
  if (geteuid() != 0) {  // root reads anything
    std::string path = Tmp().Path("unreadable.idx");
    WritePlain(path, Header(0x08, {0}));
    REQUIRE(chmod(path.c_str(), 0) == 0);
    ExpectReadError(path, Code::kIo);
  }
}

TEST_CASE("IDX: bad headers are parse errors") {
  for (const auto& path : WriteBoth("empty.idx", {})) ExpectReadError(path, Code::kParse, "empty");
  for (const auto& path : WriteBoth("short_magic.idx", {0, 0, 8})) ExpectReadError(path, Code::kParse, "truncated");
  Bytes short_dims = Header(0x08, {60000, 28, 28});
  short_dims.resize(10);
  for (const auto& path : WriteBoth("short_dims.idx", short_dims)) ExpectReadError(path, Code::kParse, "truncated");

  Bytes bad_magic = Header(0x08, {1});
  bad_magic[0] = 0x1F;  // not gzip either: 0x1F 0x00
  bad_magic.push_back(0);
  for (const auto& path : WriteBoth("bad_magic.idx", bad_magic)) ExpectReadError(path, Code::kParse, "magic");
  Bytes bad_magic2 = bad_magic;
  bad_magic2[0] = 0;
  bad_magic2[1] = 8;
  for (const auto& path : WriteBoth("bad_magic2.idx", bad_magic2)) ExpectReadError(path, Code::kParse, "magic");

  for (uint8_t code : {0x00, 0x07, 0x0A, 0x0F, 0xFF}) {
    Bytes b = Header(code, {1});
    b.push_back(0);
    for (const auto& path : WriteBoth("bad_type.idx", b)) ExpectReadError(path, Code::kParse, "type code");
  }
  for (const auto& path : WriteBoth("zero_dims.idx", {0, 0, 8, 0})) ExpectReadError(path, Code::kParse, "0 dimensions");

  // Sizes: the product overflows 64 bits, or the tensor exceeds the 4 GiB cap.
  for (const auto& path : WriteBoth("overflow.idx", Header(0x08, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF})))
    ExpectReadError(path, Code::kParse, "limit");
  for (const auto& path : WriteBoth("too_big_u8.idx", Header(0x08, {65536, 65537})))
    ExpectReadError(path, Code::kParse, "limit");
  for (const auto& path : WriteBoth("too_big_f64.idx", Header(0x0E, {(1u << 29) + 1})))
    ExpectReadError(path, Code::kParse, "limit");
  // int16 widened to int32: 2^30 + 1 elements are 2 GiB in the file, > 4 GiB as int32.
  for (const auto& path : WriteBoth("too_big_i16.idx", Header(0x0B, {(1u << 30) + 1})))
    ExpectReadError(path, Code::kParse, "limit");
}

TEST_CASE("IDX: truncated data is data loss") {
  Bytes b = Header(0x08, {10, 10});
  for (int i = 0; i < 60; ++i) b.push_back(static_cast<unsigned char>(i));
  for (const auto& path : WriteBoth("short_data.idx", b)) ExpectReadError(path, Code::kDataLoss, "truncated");
  Bytes w = Header(0x0B, {100});
  for (int i = 0; i < 99; ++i) PutBE(w, static_cast<uint16_t>(i), 2);
  w.push_back(1);  // half an element
  for (const auto& path : WriteBoth("short_widened.idx", w)) ExpectReadError(path, Code::kDataLoss, "truncated");
  Bytes f = Header(0x0D, {3});
  PutBE(f, FloatBits(1), 4);
  for (const auto& path : WriteBoth("short_f32.idx", f)) ExpectReadError(path, Code::kDataLoss, "truncated");
}

TEST_CASE("IDX: trailing bytes after the data are a parse error") {
  Bytes b = Header(0x08, {4});
  for (int i = 0; i < 5; ++i) b.push_back(static_cast<unsigned char>(i));
  for (const auto& path : WriteBoth("trailing.idx", b)) ExpectReadError(path, Code::kParse, "after");
  Bytes big = Header(0x0D, {2});
  big.resize(big.size() + 8 + 100000, 7);
  for (const auto& path : WriteBoth("trailing_big.idx", big)) ExpectReadError(path, Code::kParse, "after");
}

TEST_CASE("IDX: cut and corrupt gzip streams are data loss") {
  Bytes b = Header(0x08, {200, 50});
  for (int i = 0; i < 10000; ++i) b.push_back(static_cast<unsigned char>((i * 7919) >> 3));
  std::string good = Tmp().Path("good.idx.gz");
  WriteGz(good, b);
  CHECK(ReadIdx(good).dims() == Dims{200, 50});
  const Bytes gz = ReadBytes(good);
  REQUIRE(gz.size() > 40);

  // Cut in the deflate data, and cut in the 8-byte trailer (data complete).
  for (size_t keep : {gz.size() / 2, gz.size() - 4, gz.size() - 1}) {
    CAPTURE(keep);
    std::string path = Tmp().Path("cut_" + std::to_string(keep) + ".idx.gz");
    WritePlain(path, Bytes(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(keep)));
    ExpectReadError(path, Code::kDataLoss, "truncated");
  }
  // Cut inside the IDX header (gzip stream of 6 bytes, then stream cut).
  {
    std::string small = Tmp().Path("small.idx.gz");
    WriteGz(small, Header(0x08, {60000, 28, 28}));
    Bytes s = ReadBytes(small);
    std::string path = Tmp().Path("cut_header.idx.gz");
    WritePlain(path, Bytes(s.begin(), s.end() - 10));
    ExpectReadError(path, Code::kDataLoss);
  }
  // A reserved deflate block type at the first data byte (after the 10-byte gzip header).
  {
    Bytes c = gz;
    c[10] = 0x07;
    std::string path = Tmp().Path("bad_block.idx.gz");
    WritePlain(path, c);
    ExpectReadError(path, Code::kDataLoss, "corrupt");
  }
  // A wrong CRC in the trailer.
  {
    Bytes c = gz;
    c[c.size() - 8] ^= 0xFF;
    std::string path = Tmp().Path("bad_crc.idx.gz");
    WritePlain(path, c);
    ExpectReadError(path, Code::kDataLoss, "corrupt");
  }
  // Garbage in the middle of the compressed data: some error, never a crash,
  // and never a successful read.
  for (size_t pos = 12; pos + 8 < gz.size(); pos += 7) {
    Bytes c = gz;
    c[pos] ^= 0x5A;
    std::string path = Tmp().Path("flip_" + std::to_string(pos) + ".idx.gz");
    WritePlain(path, c);
    try {
      ReadIdx(path);
      FAIL("corruption at ", pos, " went unnoticed");
    } catch (const Error& e) {
      CHECK_MESSAGE((e.code() == Code::kDataLoss || e.code() == Code::kParse), e.message());
    }
  }
}

TEST_CASE("IDX: gzip of a plain IDX file and a concatenated gzip stream") {
  Bytes b = Header(0x08, {3});
  b.insert(b.end(), {9, 8, 7});
  std::string a = Tmp().Path("part_a.gz"), c = Tmp().Path("part_b.gz"), cat = Tmp().Path("cat.idx.gz");
  WriteGz(a, Bytes(b.begin(), b.begin() + 5));
  WriteGz(c, Bytes(b.begin() + 5, b.end()));
  Bytes joined = ReadBytes(a), tail = ReadBytes(c);
  joined.insert(joined.end(), tail.begin(), tail.end());
  WritePlain(cat, joined);
  Tensor t = ReadIdx(cat);
  CHECK(Values<uint8_t>(t) == std::vector<uint8_t>{9, 8, 7});
}

TEST_CASE("Fashion-MNIST loads") {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    FAIL("the Fashion-MNIST files are missing: ", dir,
         " does not exist; install the Debian package dataset-fashion-mnist (apt-get install dataset-fashion-mnist)");
    return;
  }
  struct Split {
    const char* name;
    int64_t n;
  };
  for (Split s : {Split{"train", 60000}, Split{"t10k", 10000}}) {
    CAPTURE(s.name);
    Tensor images = ReadIdx(dir + "/" + s.name + "-images-idx3-ubyte.gz");
    Tensor labels = ReadIdx(dir + "/" + s.name + "-labels-idx1-ubyte.gz");
    CHECK(images.dtype() == DType::kUInt8);
    CHECK(images.dims() == Dims{s.n, 28, 28});
    CHECK(labels.dtype() == DType::kUInt8);
    CHECK(labels.dims() == Dims{s.n});
    int64_t counts[10] = {};
    bool in_range = true;
    for (uint8_t l : Values<uint8_t>(labels)) {
      if (l > 9) in_range = false;
      else ++counts[l];
    }
    CHECK(in_range);
    for (int c = 0; c < 10; ++c) CHECK(counts[c] == s.n / 10);  // balanced classes
    int64_t nonzero = 0;
    uint8_t max = 0;
    for (uint8_t p : Values<uint8_t>(images)) {
      nonzero += p != 0;
      if (p > max) max = p;
    }
    CHECK(max == 255);
    CHECK(nonzero > images.numel() / 3);
  }
}

// Issue 10: a header may announce far more data than the file holds (a
// 328-byte file claiming 4.1 GB); reading it must cost memory in proportion
// to the file, not to the claim.
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Runs f and returns how far the CPU storage peak rose above what was
// allocated before; checks that everything f allocated was freed again.
template <typename F>
uint64_t PeakGrowth(F f) {
  const uint64_t before = GetMemoryStats(DeviceType::kCPU).allocated;
  ResetPeakMemory(DeviceType::kCPU);
  f();
  const MemoryStats after = GetMemoryStats(DeviceType::kCPU);
  CHECK(after.allocated == before);
  return after.peak - before;
}

// Writes `b` through a FIFO (a file whose size says nothing) while f reads it.
template <typename F>
void ThroughFifo(const std::string& name, const Bytes& b, F f) {
  static int count = 0;
  std::string path = Tmp().Path(name + "." + std::to_string(count++));
  REQUIRE(mkfifo(path.c_str(), 0600) == 0);
  std::thread writer([&] {
    int fd = ::open(path.c_str(), O_WRONLY);
    if (fd < 0) return;
    size_t off = 0;
    while (off < b.size()) {
      ssize_t n = ::write(fd, b.data() + off, b.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::close(fd);
  });
  f(path);
  writer.join();
}

}  // namespace

TEST_CASE("IDX: a header announcing more than the file holds allocates nothing like it") {
  std::signal(SIGPIPE, SIG_IGN);  // a FIFO reader that gives up early must not kill the test
  // float32 [1027423552]: 4,109,694,208 bytes announced, 320 present (328 bytes in all).
  Bytes f32 = Header(0x0D, {1027423552});
  f32.resize(f32.size() + 320, 0x41);
  REQUIRE(f32.size() == 328);
  // int8 [1000000000]: 1 GB announced, 4 GB once widened to int32; 1000 bytes present.
  Bytes i8 = Header(0x09, {1000000000});
  i8.resize(i8.size() + 1000, 1);
  for (const Bytes* b : {&f32, &i8}) {
    const std::string want = b == &f32 ? "4109694208" : "1000000000";
    for (const auto& path : WriteBoth(b == &f32 ? "huge_f32.idx" : "huge_i8.idx", *b)) {
      CAPTURE(path);
      uint64_t grew =
          PeakGrowth([&] { ExpectReadError(path, Code::kDataLoss, "truncated: the header announces " + want); });
      CHECK_MESSAGE(grew < 2 * kMiB, "reading a ", b->size(), "-byte file took ", grew, " bytes");
    }
    ThroughFifo("huge_fifo.idx", *b, [&](const std::string& path) {
      uint64_t grew = PeakGrowth([&] { ExpectReadError(path, Code::kDataLoss, "truncated"); });
      CHECK_MESSAGE(grew < 2 * kMiB, "reading a ", b->size(), "-byte FIFO took ", grew, " bytes");
    });
  }
  // The message gives the bytes that do follow.
  for (const auto& path : WriteBoth("huge_f32_msg.idx", f32))
    ExpectReadError(path, Code::kDataLoss, "4109694208 bytes but only 320 follow");
}

TEST_CASE("IDX: data buffered in chunks (gzip, FIFO) reads the same as a plain file") {
  std::signal(SIGPIPE, SIG_IGN);
  // Sizes around the chunk sizes (64 KiB doubling to 1 MiB) and the half of
  // the data after which the rest is read in place.
  for (uint32_t n : {1u, 16383u, 16384u, 16385u, 300000u, (1u << 20) + 3}) {
    CAPTURE(n);
    Bytes bf = Header(0x0D, {n});
    std::vector<float> wantf(n);
    for (uint32_t i = 0; i < n; ++i) {
      wantf[i] = static_cast<float>(i) * 0.5f - 7.0f;
      PutBE(bf, FloatBits(wantf[i]), 4);
    }
    for (const auto& path : WriteBoth("chunks_f32.idx", bf)) CHECK(Values<float>(ReadIdx(path)) == wantf);
    ThroughFifo("chunks_f32.fifo", bf, [&](const std::string& path) { CHECK(Values<float>(ReadIdx(path)) == wantf); });

    Bytes b8 = Header(0x09, {n});
    std::vector<int32_t> want8(n);
    for (uint32_t i = 0; i < n; ++i) {
      want8[i] = static_cast<int8_t>(i * 2654435761u >> 24);
      PutBE(b8, static_cast<uint8_t>(want8[i]), 1);
    }
    for (const auto& path : WriteBoth("chunks_i8.idx", b8)) CHECK(Values<int32_t>(ReadIdx(path)) == want8);

    Bytes bd = Header(0x0E, {n / 2 + 1});
    std::vector<double> wantd(n / 2 + 1);
    for (uint32_t i = 0; i < wantd.size(); ++i) {
      wantd[i] = static_cast<double>(i) * -1.25;
      PutBE(bd, DoubleBits(wantd[i]), 8);
    }
    for (const auto& path : WriteBoth("chunks_f64.idx", bd)) CHECK(Values<double>(ReadIdx(path)) == wantd);
  }
  // A gzip file's buffering costs at most half of the tensor on top of it.
  Bytes b = Header(0x08, {8u << 20});
  b.resize(b.size() + (8u << 20), 3);
  std::string gz = Tmp().Path("eight_mib.idx.gz");
  WriteGz(gz, b);
  uint64_t grew = PeakGrowth([&] { CHECK(ReadIdx(gz).numel() == (8 << 20)); });
  CHECK(grew >= 8 * kMiB);
  CHECK(grew <= 12 * kMiB + kMiB);
  // A plain file costs only its tensor.
  std::string plain = Tmp().Path("eight_mib.idx");
  WritePlain(plain, b);
  CHECK(PeakGrowth([&] { CHECK(ReadIdx(plain).numel() == (8 << 20)); }) == 8 * kMiB);
}

// ---- the input pipeline's thread (also run under ThreadSanitizer) -----------

namespace {

// Sample i is the float i (one per row); Fill can be told to fail.
class CountingSource final : public dp::BatchSource {
 public:
  explicit CountingSource(int64_t n, int64_t fail_at = -1) : n_(n), fail_at_(fail_at) {}
  int64_t size() const override { return n_; }
  void Fill(const int64_t* indices, size_t count, void* const* buffers, const size_t* row_bytes) override {
    REQUIRE(row_bytes[0] == sizeof(float));
    for (size_t i = 0; i < count; ++i) {
      if (indices[i] == fail_at_) DP_THROW(dp::Code::kDataLoss, "sample ", indices[i], " is unreadable");
      static_cast<float*>(buffers[0])[i] = static_cast<float>(indices[i]);
    }
  }

 private:
  int64_t n_, fail_at_;
};

std::vector<int> FedRows(dp::Workspace& ws) {
  const dp::Tensor& t = ws.GetTensor("x");
  std::vector<int> rows;
  for (int64_t i = 0; i < t.dim(0); ++i) rows.push_back(static_cast<int>(t.data<float>()[i]));
  return rows;
}

}  // namespace

TEST_CASE("Loader: epochs of distinct samples, seekable, while its thread runs ahead") {
  auto ws = std::make_shared<dp::Workspace>();
  dp::LoaderOptions o;
  o.batch_size = 8;
  o.seed = 11;
  o.prefetch = 3;
  dp::Loader loader(ws, {{"x", dp::DType::kFloat32, {}}}, std::make_unique<CountingSource>(100), o);
  CHECK(loader.steps_per_epoch() == 12);
  std::vector<std::vector<int>> epoch0;
  for (int e = 0; e < 3; ++e) {
    std::set<int> seen;
    int batches = 0;
    while (loader.Next()) {
      const std::vector<int> rows = FedRows(*ws);
      REQUIRE(rows.size() == 8);
      seen.insert(rows.begin(), rows.end());
      if (e == 0) epoch0.push_back(rows);
      ++batches;
    }
    CHECK(batches == 12);
    CHECK(seen.size() == 96);  // no sample twice in an epoch
  }
  // Seek back into epoch 0 while the thread is filling epoch 3's batches.
  loader.Seek(0, 5);
  REQUIRE(loader.Next());
  CHECK(FedRows(*ws) == epoch0[5]);
  // A fetched batch (a tensor still held) is left to its holder.
  dp::Tensor held = ws->GetTensor("x");
  const std::vector<int> kept = FedRows(*ws);
  for (int i = 0; i < 5; ++i) REQUIRE(loader.Next());  // steps 6..10: the ring has turned over
  std::vector<int> still;
  for (int64_t i = 0; i < held.dim(0); ++i) still.push_back(static_cast<int>(held.data<float>()[i]));
  CHECK(still == kept);
}

TEST_CASE("Loader: a failing fill is reported for its batch until a seek") {
  auto ws = std::make_shared<dp::Workspace>();
  dp::LoaderOptions o;
  o.batch_size = 10;
  o.shuffle = false;
  dp::Loader loader(ws, {{"x", dp::DType::kFloat32, {}}}, std::make_unique<CountingSource>(40, 25), o);
  CHECK(loader.Next());
  CHECK(loader.Next());
  CHECK_THROWS_WITH_AS(loader.Next(), doctest::Contains("sample 25 is unreadable"), dp::Error);
  CHECK_THROWS_WITH_AS(loader.Next(), doctest::Contains("batch 2 of epoch 0"), dp::Error);
  loader.Seek(0, 3);
  CHECK(loader.Next());
  CHECK(FedRows(*ws).front() == 30);
  // Destroyed with batches queued and the thread possibly mid-fill.
}

// ---- memory datasets: gathered in chunks by the loader's thread and by Next --

namespace {

// A dataset of n samples: x[i] = {i, -i} (float32 [n, 2]), y[i] = 3 i + 1 (int32 [n]).
std::vector<dp::Tensor> CountingTensors(int64_t n) {
  dp::Tensor x({n, 2}, dp::DType::kFloat32), y({n}, dp::DType::kInt32);
  for (int64_t i = 0; i < n; ++i) {
    x.mutable_data<float>()[2 * i] = static_cast<float>(i);
    x.mutable_data<float>()[2 * i + 1] = -static_cast<float>(i);
    y.mutable_data<int32_t>()[i] = static_cast<int32_t>(3 * i + 1);
  }
  return {x, y};
}

// The samples of the fed batch, after checking that both inputs hold the
// same samples row by row.
std::vector<int> FedSamples(dp::Workspace& ws) {
  const dp::Tensor& x = ws.GetTensor("x");
  const dp::Tensor& y = ws.GetTensor("y");
  REQUIRE(x.dim(0) == y.dim(0));
  std::vector<int> samples;
  for (int64_t r = 0; r < x.dim(0); ++r) {
    const int i = static_cast<int>(x.data<float>()[2 * r]);
    REQUIRE(x.data<float>()[2 * r + 1] == -static_cast<float>(i));
    REQUIRE(y.data<int32_t>()[r] == 3 * i + 1);
    samples.push_back(i);
  }
  return samples;
}

std::unique_ptr<dp::Loader> TensorLoader(const std::shared_ptr<dp::Workspace>& ws, int64_t n, dp::LoaderOptions o) {
  return std::make_unique<dp::Loader>(
      ws, std::vector<dp::LoaderInput>{{"x", dp::DType::kFloat32, {2}}, {"y", dp::DType::kInt32, {}}},
      dp::MakeTensorSource(CountingTensors(n)), o);
}

// Every batch of `epochs` epochs (the last partial one too, keep_last).
std::vector<std::vector<int>> AllBatches(dp::BatchLoader& loader, dp::Workspace& ws, int epochs) {
  std::vector<std::vector<int>> batches;
  for (int e = 0; e < epochs; ++e)
    while (loader.Next()) batches.push_back(FedSamples(ws));
  return batches;
}

}  // namespace

TEST_CASE("Loader over tensors: Next alone, the thread ahead, and both racing on chunks feed the same batches") {
  dp::LoaderOptions o;
  o.batch_size = 10;
  o.seed = 5;
  o.drop_last = false;  // 57 samples: a last batch of 7
  o.chunk_rows = 3;     // chunks of 3, 3, 3, 1 rows
  auto ws_alone = std::make_shared<dp::Workspace>();
  dp::LoaderOptions alone = o;
  alone.gather_ahead = false;  // no thread: Next gathers every chunk
  auto loader = TensorLoader(ws_alone, 57, alone);
  const std::vector<std::vector<int>> want = AllBatches(*loader, *ws_alone, 3);
  REQUIRE(want.size() == 18);
  CHECK(want[5].size() == 7);
  for (int e = 0; e < 3; ++e) {
    std::set<int> seen;
    for (int b = 0; b < 6; ++b) seen.insert(want[static_cast<size_t>(6 * e + b)].begin(), want[static_cast<size_t>(6 * e + b)].end());
    CHECK(seen.size() == 57);
  }
  CHECK(want[0] != want[6]);  // epochs differ

  // The thread ahead, and chunks of one row with a one-batch prefetch (Next
  // often finds its batch unfinished and takes the rest), many times over.
  for (int64_t chunk_rows : {int64_t{3}, int64_t{1}, int64_t{0}})
    for (int round = 0; round < 20; ++round) {
      CAPTURE(chunk_rows);
      CAPTURE(round);
      dp::LoaderOptions ahead = o;
      ahead.chunk_rows = chunk_rows;
      ahead.prefetch = 1;
      auto ws = std::make_shared<dp::Workspace>();
      auto l = TensorLoader(ws, 57, ahead);
      CHECK(AllBatches(*l, *ws, 3) == want);
      // A seek while chunks may be in flight, then the same batches again.
      l->Seek(1, 2);
      REQUIRE(l->Next());
      CHECK(FedSamples(*ws) == want[8]);
      REQUIRE(l->Next());
      CHECK(FedSamples(*ws) == want[9]);
    }
}

TEST_CASE("Loader over tensors: a batch still held is left to its holder, and shards take their rows") {
  dp::LoaderOptions o;
  o.batch_size = 8;
  o.seed = 2;
  o.gather_ahead = false;
  auto ws = std::make_shared<dp::Workspace>();
  auto loader = TensorLoader(ws, 40, o);
  REQUIRE(loader->Next());
  dp::Tensor held = ws->GetTensor("x");
  const std::vector<int> kept = FedSamples(*ws);
  for (int i = 0; i < 4; ++i) REQUIRE(loader->Next());  // the ring of prefetch + 2 = 4 buffers turned over
  for (int64_t r = 0; r < held.dim(0); ++r) CHECK(held.data<float>()[2 * r] == static_cast<float>(kept[static_cast<size_t>(r)]));

  // Two processes' loaders: each feeds its half of every global batch.
  dp::LoaderOptions s = o;
  s.num_shards = 2;
  std::vector<std::vector<int>> halves[2];
  for (int shard = 0; shard < 2; ++shard) {
    s.shard = shard;
    auto wss = std::make_shared<dp::Workspace>();
    auto l = TensorLoader(wss, 40, s);
    halves[shard] = AllBatches(*l, *wss, 1);
  }
  auto wsw = std::make_shared<dp::Workspace>();
  auto whole = TensorLoader(wsw, 40, o);
  const std::vector<std::vector<int>> global = AllBatches(*whole, *wsw, 1);
  REQUIRE(global.size() == 5);
  for (size_t b = 0; b < 5; ++b) {
    std::vector<int> joined = halves[0][b];
    joined.insert(joined.end(), halves[1][b].begin(), halves[1][b].end());
    CHECK(joined == global[b]);
  }
}

// ---- a dataset held on a device (here the CPU): gathered by GatherRows --

TEST_CASE("GatherRows: rows by index in any row size, zeros for an index out of range") {
  for (size_t row_bytes : {size_t{1}, size_t{3}, size_t{8}, size_t{12}}) {
    CAPTURE(row_bytes);
    std::vector<uint8_t> src(5 * row_bytes);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i + 1);
    const std::vector<int64_t> indices = {4, 0, -1, 2, 5, 4};
    std::vector<uint8_t> dst(indices.size() * row_bytes, 0xAB);
    dp::GatherRows(dp::DeviceOption{}, src.data(), 5, row_bytes, indices.data(), static_cast<int64_t>(indices.size()),
                   dst.data());
    for (size_t r = 0; r < indices.size(); ++r)
      for (size_t b = 0; b < row_bytes; ++b) {
        const int64_t s = indices[r];
        const uint8_t want = s >= 0 && s < 5 ? src[static_cast<size_t>(s) * row_bytes + b] : 0;
        CHECK(dst[r * row_bytes + b] == want);
      }
  }
}

namespace {

// Batches of 10 in the order these options give.
dp::LoaderOptions OrderOptions(bool shuffle, bool drop_last, int prefetch, int shards, uint64_t seed) {
  dp::LoaderOptions o;
  o.batch_size = 10;
  o.seed = seed;
  o.shuffle = shuffle;
  o.drop_last = drop_last;
  o.prefetch = prefetch;
  o.num_shards = shards;
  return o;
}

// A loader of prefetch 2 over 40 samples in batches of 8: a fed batch that
// somebody holds keeps its samples while 12 more are fed; the fed batches
// come from the ring of prefetch + 2 = 4 buffers, the held one replaced once.
void CheckHeldBatchLeftAlone(dp::BatchLoader& loader, dp::Workspace& ws) {
  REQUIRE(loader.Next());
  dp::Tensor held = ws.GetTensor("x");
  const std::vector<int> kept = FedSamples(ws);
  std::set<const void*> buffers;
  for (int i = 0; i < 12; ++i) {
    if (!loader.Next()) continue;
    buffers.insert(ws.GetTensor("x").raw_data());
  }
  for (int64_t r = 0; r < held.dim(0); ++r)
    CHECK(held.data<float>()[2 * r] == static_cast<float>(kept[static_cast<size_t>(r)]));
  CHECK(buffers.size() <= 5);
  CHECK(buffers.count(held.raw_data()) == 0);
}

std::unique_ptr<dp::DeviceLoader> DatasetLoader(const std::shared_ptr<dp::Workspace>& ws, int64_t n,
                                                dp::LoaderOptions o) {
  return std::make_unique<dp::DeviceLoader>(ws, std::vector<std::string>{"x", "y"}, CountingTensors(n),
                                            dp::DeviceOption{}, o);
}

}  // namespace

TEST_CASE("DeviceLoader feeds the host loader's batches: shuffled or not, a short last batch, shards, seeks") {
  struct Case {
    bool shuffle, drop_last;
    int prefetch, shards;
  };
  for (const Case c : {Case{true, false, 2, 1}, Case{false, false, 1, 1}, Case{true, true, 3, 1},
                       Case{true, true, 1, 2}, Case{true, true, 64, 1}}) {
    CAPTURE(c.shuffle);
    CAPTURE(c.drop_last);
    CAPTURE(c.prefetch);
    CAPTURE(c.shards);
    dp::LoaderOptions o = OrderOptions(c.shuffle, c.drop_last, c.prefetch, c.shards, 11);
    for (int shard = 0; shard < c.shards; ++shard) {
      CAPTURE(shard);
      o.shard = shard;
      auto ws_host = std::make_shared<dp::Workspace>();
      auto host = TensorLoader(ws_host, 57, o);
      const std::vector<std::vector<int>> want = AllBatches(*host, *ws_host, 3);
      REQUIRE(want.size() == (c.drop_last ? 15u : 18u));

      auto ws = std::make_shared<dp::Workspace>();
      auto loader = DatasetLoader(ws, 57, o);
      CHECK(loader->steps_per_epoch() == host->steps_per_epoch());
      CHECK(loader->batch_rows() == host->batch_rows());
      CHECK(AllBatches(*loader, *ws, 3) == want);
      CHECK(loader->epoch() == 3);
      CHECK(ws->GetTensor("x").dim(0) == static_cast<int64_t>(want.back().size()));
      // Back to epoch 1 (its permutation comes back), then on across an epoch's end.
      const int64_t steps = loader->steps_per_epoch();
      loader->Seek(1, steps - 1);
      CHECK(loader->epoch() == 1);
      CHECK(loader->step() == steps - 1);
      REQUIRE(loader->Next());
      CHECK(FedSamples(*ws) == want[static_cast<size_t>(2 * steps - 1)]);
      CHECK_FALSE(loader->Next());  // the epoch's end, once
      REQUIRE(loader->Next());
      CHECK(FedSamples(*ws) == want[static_cast<size_t>(2 * steps)]);
      loader->Seek(0, 0);
      REQUIRE(loader->Next());
      CHECK(FedSamples(*ws) == want[0]);
    }
  }
}

TEST_CASE("DeviceLoader: a batch still held is left to its holder; the ring is reused, not reallocated") {
  dp::LoaderOptions o;
  o.batch_size = 8;
  o.seed = 2;
  auto ws = std::make_shared<dp::Workspace>();
  auto loader = DatasetLoader(ws, 40, o);
  CheckHeldBatchLeftAlone(*loader, *ws);
}

TEST_CASE("DeviceLoader: a bad dataset or options are errors naming them") {
  auto ws = std::make_shared<dp::Workspace>();
  dp::LoaderOptions o;
  o.batch_size = 4;
  std::vector<dp::Tensor> data = CountingTensors(10);
  data[1] = dp::Tensor({9}, dp::DType::kInt32);
  testing::ExpectError([&] { dp::DeviceLoader(ws, {"x", "y"}, data, dp::DeviceOption{}, o); }, Code::kShape,
                       {"tensors[1]", "must share dim 0"});
  testing::ExpectError([&] { dp::DeviceLoader(ws, {"x", "x"}, CountingTensors(10), dp::DeviceOption{}, o); },
                       Code::kInvalidArgument, {"'x' is named by two inputs"});
  o.batch_size = 11;
  testing::ExpectError([&] { dp::DeviceLoader(ws, {"x", "y"}, CountingTensors(10), dp::DeviceOption{}, o); },
                       Code::kInvalidArgument, {"make no full batch"});
}

// ---- batches staged to a device (here the CPU, force_staging) ------------

namespace {

// A pinned allocator for the test: ordinary memory, counted; or one that
// fails like a system out of page-locked memory. Registered for its scope.
class FakePinnedAllocator final : public dp::Allocator {
 public:
  explicit FakePinnedAllocator(bool fails = false) : fails_(fails), before_(dp::RegisterPinnedAllocator(this)) {}
  ~FakePinnedAllocator() override { dp::RegisterPinnedAllocator(before_); }
  void* Allocate(dp::DeviceOption, size_t nbytes) override {
    if (fails_) DP_THROW(dp::Code::kOutOfMemory, "no page-locked memory left");
    ++allocs;
    const size_t rounded = (nbytes + dp::kCpuAlignment - 1) / dp::kCpuAlignment * dp::kCpuAlignment;
    return std::aligned_alloc(dp::kCpuAlignment, rounded);
  }
  void Free(dp::DeviceOption, void* ptr) noexcept override {
    ++frees;
    std::free(ptr);
  }
  std::atomic<int> allocs{0}, frees{0};

 private:
  const bool fails_;
  dp::Allocator* const before_;
};

std::unique_ptr<dp::Loader> StagedLoader(const std::shared_ptr<dp::Workspace>& ws, int64_t n, dp::LoaderOptions o) {
  o.force_staging = true;
  return TensorLoader(ws, n, o);
}

}  // namespace

TEST_CASE("Storage::AllocatePinned: the pinned allocator's memory, counted as host memory; ordinary memory without it") {
  {
    FakePinnedAllocator pinned;
    const uint64_t before = dp::GetMemoryStats(dp::DeviceType::kCPU).allocated;
    {
      auto s = dp::Storage::AllocatePinned(1000);
      CHECK(s->pinned());
      CHECK(s->library_owned());
      CHECK(s->device() == dp::DeviceOption{});
      CHECK(pinned.allocs == 1);
      CHECK(dp::GetMemoryStats(dp::DeviceType::kCPU).allocated == before + 1000);
      CHECK_FALSE(dp::Storage::Allocate(dp::DeviceOption{}, 64)->pinned());
      CHECK(pinned.allocs == 1);
    }
    CHECK(pinned.frees == 1);  // back to the allocator it came from
    CHECK(dp::GetMemoryStats(dp::DeviceType::kCPU).allocated == before);
  }
  FakePinnedAllocator refusing(/*fails=*/true);
  auto s = dp::Storage::AllocatePinned(1000);
  CHECK_FALSE(s->pinned());  // ordinary memory, still usable
  std::memset(s->data(), 1, 1000);
}

TEST_CASE("Loader staged to a device feeds the host loader's batches from the staged buffers, not the host ring") {
  FakePinnedAllocator pinned;
  struct Case {
    bool shuffle, drop_last, ahead;
    int prefetch, shards;
    int64_t chunk_rows;
  };
  for (const Case c : {Case{true, false, true, 2, 1, 0}, Case{false, false, false, 1, 1, 3}, Case{true, true, true, 1, 1, 1},
                       Case{true, true, true, 3, 2, 0}, Case{true, true, true, 64, 1, 2}}) {
    CAPTURE(c.shuffle);
    CAPTURE(c.ahead);
    CAPTURE(c.prefetch);
    CAPTURE(c.shards);
    CAPTURE(c.chunk_rows);
    dp::LoaderOptions o = OrderOptions(c.shuffle, c.drop_last, c.prefetch, c.shards, 7);
    o.chunk_rows = c.chunk_rows;
    o.gather_ahead = c.ahead;
    for (int shard = 0; shard < c.shards; ++shard) {
      CAPTURE(shard);
      o.shard = shard;
      auto ws_host = std::make_shared<dp::Workspace>();
      auto host = TensorLoader(ws_host, 57, o);
      const std::vector<std::vector<int>> want = AllBatches(*host, *ws_host, 3);

      const int allocs_before = pinned.allocs;
      auto ws = std::make_shared<dp::Workspace>();
      auto loader = StagedLoader(ws, 57, o);
      // The host ring is page-locked: two inputs in prefetch + 2 slots.
      CHECK(pinned.allocs - allocs_before == 2 * (c.prefetch + 2));
      std::vector<std::vector<int>> got;
      for (int e = 0; e < 3; ++e)
        while (loader->Next()) {
          got.push_back(FedSamples(*ws));
          // What is fed is the staged copy, never a page-locked host buffer.
          CHECK_FALSE(ws->GetTensor("x").storage()->pinned());
          CHECK_FALSE(ws->GetTensor("y").storage()->pinned());
        }
      CHECK(got == want);
      const int64_t steps = loader->steps_per_epoch();
      loader->Seek(1, steps - 1);
      REQUIRE(loader->Next());
      CHECK(FedSamples(*ws) == want[static_cast<size_t>(2 * steps - 1)]);
      CHECK_FALSE(loader->Next());
      REQUIRE(loader->Next());
      CHECK(FedSamples(*ws) == want[static_cast<size_t>(2 * steps)]);
    }
  }
}

TEST_CASE("Loader staged to a device: a held batch is left to its holder, the rings are reused, a failed fill is its batch's") {
  FakePinnedAllocator pinned;
  dp::LoaderOptions o;
  o.batch_size = 8;
  o.seed = 2;
  o.force_staging = true;
  {
    auto ws = std::make_shared<dp::Workspace>();
    auto loader = TensorLoader(ws, 40, o);
    CheckHeldBatchLeftAlone(*loader, *ws);
    CHECK(pinned.allocs == 2 * 4);  // the host ring: allocated once
  }
  CHECK(pinned.frees == pinned.allocs);

  // A callback-like source (whole batches on the loader's thread) that fails.
  auto ws = std::make_shared<dp::Workspace>();
  dp::LoaderOptions c;
  c.batch_size = 10;
  c.shuffle = false;
  c.force_staging = true;
  dp::Loader loader(ws, {{"x", dp::DType::kFloat32, {}}}, std::make_unique<CountingSource>(40, 25), c);
  REQUIRE(loader.Next());
  CHECK(FedRows(*ws).front() == 0);
  REQUIRE(loader.Next());
  CHECK_THROWS_WITH_AS(loader.Next(), doctest::Contains("sample 25 is unreadable"), dp::Error);
  CHECK_THROWS_WITH_AS(loader.Next(), doctest::Contains("batch 2 of epoch 0"), dp::Error);
  loader.Seek(0, 3);
  REQUIRE(loader.Next());
  CHECK(FedRows(*ws).front() == 30);
  CHECK_FALSE(ws->GetTensor("x").storage()->pinned());
}

TEST_CASE("Loader threads: over tensors the lowest priority (SCHED_IDLE), for a callback the normal one") {
  auto policy_of_new_thread = [](const std::function<std::unique_ptr<dp::Loader>()>& make) {
    auto list = [] {
      std::set<int> tids;
      if (DIR* d = opendir("/proc/self/task")) {
        while (dirent* e = readdir(d))
          if (e->d_name[0] != '.') tids.insert(std::atoi(e->d_name));
        closedir(d);
      }
      return tids;
    };
    const std::set<int> before = list();
    auto loader = make();
    int policy = -1;
    for (int tid : list())
      if (!before.count(tid)) policy = sched_getscheduler(tid);
    return policy;
  };
  dp::LoaderOptions o;
  o.batch_size = 4;
  auto ws = std::make_shared<dp::Workspace>();
  CHECK(policy_of_new_thread([&] { return TensorLoader(ws, 16, o); }) == SCHED_IDLE);
  CHECK(policy_of_new_thread([&] {
          return std::make_unique<dp::Loader>(ws, std::vector<dp::LoaderInput>{{"z", dp::DType::kFloat32, {}}},
                                              std::make_unique<CountingSource>(16), o);
        }) == SCHED_OTHER);
  // A source that fills whole batches cannot do without the thread.
  o.gather_ahead = false;
  CHECK_THROWS_WITH_AS(dp::Loader(ws, {{"z", dp::DType::kFloat32, {}}}, std::make_unique<CountingSource>(16), o),
                       doctest::Contains("needs the loader's thread"), dp::Error);
}
