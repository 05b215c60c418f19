#include "checkpoint/checkpoint_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <set>

#include <flatbuffers/flatbuffers.h>

#include "checkpoint/atomic_file.h"
#include "checkpoint/checksum.h"
#include "checkpoint/write_pacer.h"
#include "checkpoint_generated.h"
#include "core/utf8.h"
#include "graph/flatbuffer_io.h"  // ScalarsBytewise
#include "dp_config.h"

namespace dp {
namespace {

static_assert(std::endian::native == std::endian::little, "checkpoint files are little-endian");

// "\x89DPCKPT\n": the high byte and the newline catch transfers that mangle
// binary files as text (PNG's trick).
constexpr char kCheckpointMagic[8] = {'\x89', 'D', 'P', 'C', 'K', 'P', 'T', '\n'};
constexpr const char* kIdentifier = "DPCK";
// Far beyond any real header (tens of bytes per tensor), small enough that a
// corrupted size cannot make the reader allocate without bound.
constexpr uint64_t kMaxHeaderSize = uint64_t{1} << 30;
// Bytes hashed and written per step: the checksum reads what the write is
// about to send, while it is still in cache.
constexpr size_t kChunk = size_t{1} << 20;

// The fixed-size start of every checkpoint file (little-endian).
struct Preamble {
  char magic[8];
  uint32_t version;
  uint32_t flags;          // reserved: 0
  uint64_t header_offset;  // kCheckpointPreambleSize
  uint64_t header_size;
  uint64_t header_xxh3;
  uint64_t file_size;      // the whole file: truncation shows here first
  uint64_t reserved;       // 0
  uint64_t preamble_xxh3;  // of the 56 bytes before it
};
static_assert(sizeof(Preamble) == kCheckpointPreambleSize);
constexpr size_t kPreambleHashed = offsetof(Preamble, preamble_xxh3);

uint64_t AlignUp(uint64_t x) { return (x + kCheckpointAlignment - 1) / kCheckpointAlignment * kCheckpointAlignment; }

std::string FileDesc(const std::string& path) { return StrCat("checkpoint '", path, "'"); }

// The header; force_defaults keeps every scalar in the buffer, so the size
// does not depend on the values (the data's checksums are patched in after
// the data is written, into a header of the size planned first).
std::string BuildHeader(const CheckpointMeta& meta, const std::vector<CheckpointEntry>& entries) {
  flatbuffers::FlatBufferBuilder b(1024);
  b.ForceDefaults(true);
  std::vector<flatbuffers::Offset<fb::CheckpointTensor>> ts;
  ts.reserve(entries.size());
  for (const auto& e : entries) {
    auto name = b.CreateString(e.name);
    auto dims = b.CreateVector(e.dims);
    ts.push_back(fb::CreateCheckpointTensor(b, name, static_cast<int32_t>(e.dtype), dims, e.offset, e.length,
                                            e.xxh3));
  }
  auto tensors = b.CreateVector(ts);
  auto version = b.CreateString(meta.dp_version);
  auto model = b.CreateString(meta.model_name);
  auto device = b.CreateString(meta.device_type);
  b.Finish(fb::CreateCheckpoint(b, version, model, meta.iteration, device, meta.replicas, meta.shards, tensors),
           kIdentifier);
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

Preamble MakePreamble(const std::string& header, uint64_t file_size) {
  Preamble p{};
  std::memcpy(p.magic, kCheckpointMagic, sizeof kCheckpointMagic);
  p.version = kCheckpointFormatVersion;
  p.header_offset = kCheckpointPreambleSize;
  p.header_size = header.size();
  p.header_xxh3 = Xxh3(header.data(), header.size());
  p.file_size = file_size;
  p.preamble_xxh3 = Xxh3(&p, kPreambleHashed);
  return p;
}

void CheckTensorToSave(const std::string& path, const std::string& name, const Tensor& t, std::set<std::string>& seen) {
  DP_ENFORCE_CODE(!name.empty(), Code::kInvalidArgument, FileDesc(path), ": a tensor without a name");
  DP_ENFORCE_CODE(FindInvalidUtf8(name) == std::string_view::npos, Code::kInvalidArgument, FileDesc(path),
                  ": tensor name is not valid UTF-8");
  DP_ENFORCE_CODE(seen.insert(name).second, Code::kInvalidArgument, FileDesc(path), ": tensor '", name,
                  "' is listed twice");
  DP_ENFORCE_CODE(t.defined(), Code::kInvalidArgument, FileDesc(path), ": tensor '", name, "' is undefined");
  DP_ENFORCE_CODE(t.device().type == DeviceType::kCPU, Code::kInvalidArgument, FileDesc(path), ": tensor '", name,
                  "' is on ", DeviceName(t.device()), "; copy it to the host first");
  DP_ENFORCE_CODE(t.nbytes() == 0 || t.raw_data() != nullptr, Code::kInternal, FileDesc(path), ": tensor '", name,
                  "' has no storage");
}

// Reads `size` bytes at `offset` (kDataLoss when the file ends first).
void ReadAt(int fd, const std::string& path, uint64_t offset, void* out, size_t size) {
  char* p = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      DP_THROW(Code::kIo, "cannot read ", FileDesc(path), ": ", std::strerror(errno));
    }
    if (n == 0) DP_THROW(Code::kDataLoss, FileDesc(path), " is truncated: it ends before byte ", offset);
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

}  // namespace

void CheckIteration(int64_t iteration, Code code, const std::string& where) {
  DP_ENFORCE_CODE(ValidIteration(iteration), code, where, ": iteration ", iteration, " is not -1 (unknown) or >= 0");
}

void WriteCheckpoint(const std::string& path, std::vector<std::pair<std::string, Tensor>> tensors,
                     const CheckpointMeta& meta_in, double write_share) {
  CheckWriteShare(write_share, StrCat(FileDesc(path), ": the write share"));
  CheckIteration(meta_in.iteration, Code::kInvalidArgument, FileDesc(path));
  CheckpointMeta meta = meta_in;
  meta.dp_version = DP_VERSION_STRING;
  DP_ENFORCE_CODE(FindInvalidUtf8(meta.model_name) == std::string_view::npos, Code::kInvalidArgument,
                  FileDesc(path), ": model name is not valid UTF-8");
  std::set<std::string> seen;
  std::vector<CheckpointEntry> entries;
  entries.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    CheckTensorToSave(path, name, t, seen);
    entries.push_back({name, t.dtype(), t.dims(), 0, t.nbytes(), 0});
  }
  // Plan: the header's size does not depend on offsets or checksums.
  const uint64_t header_size = BuildHeader(meta, entries).size();
  uint64_t cursor = AlignUp(kCheckpointPreambleSize + header_size);
  for (auto& e : entries) {
    e.offset = cursor;
    cursor = AlignUp(e.offset + e.length);
  }
  const uint64_t file_size = entries.empty() ? kCheckpointPreambleSize + header_size : entries.back().offset +
                                                                                          entries.back().length;

  WritePacer pacer(write_share);
  AtomicFileWriter out(path);
  out.WriteZeros(static_cast<size_t>(entries.empty() ? file_size : entries.front().offset));  // patched below
  for (size_t i = 0; i < entries.size(); ++i) {
    CheckpointEntry& e = entries[i];
    out.WriteZeros(static_cast<size_t>(e.offset - out.size()));
    const char* bytes = static_cast<const char*>(tensors[i].second.raw_data());
    Xxh3Stream hash;
    for (uint64_t done = 0; done < e.length;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, e.length - done));
      pacer.Start();
      hash.Update(bytes + done, n);
      out.Write(bytes + done, n);
      if (pacer.active()) {
        out.Flush(e.offset + done, n);
        pacer.Rest();
      }
      done += n;
    }
    e.xxh3 = hash.Digest();
    tensors[i].second = Tensor();  // written: released (see the header)
  }
  const std::string header = BuildHeader(meta, entries);
  DP_ENFORCE_CODE(header.size() == header_size, Code::kInternal, FileDesc(path), ": header size changed from ",
                  header_size, " to ", header.size(), " bytes");
  const Preamble pre = MakePreamble(header, file_size);
  out.WriteAt(kCheckpointPreambleSize, header.data(), header.size());
  out.WriteAt(0, &pre, sizeof pre);
  DP_ENFORCE_CODE(out.size() == file_size, Code::kInternal, FileDesc(path), ": wrote ", out.size(),
                  " bytes, planned ", file_size);
  out.Commit();
}

// ---- reading ---------------------------------------------------------------

struct CheckpointReader::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr != nullptr) ::munmap(addr, size);
  }
};

CheckpointReader::CheckpointReader(std::string path) : path_(std::move(path)) {
  DP_ENFORCE_CODE(!path_.empty(), Code::kInvalidArgument, "empty checkpoint path");
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0)
    DP_THROW(errno == ENOENT ? Code::kNotFound : Code::kIo, "cannot open ", FileDesc(path_), ": ",
             std::strerror(errno));
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) DP_THROW(Code::kIo, "cannot stat ", FileDesc(path_), ": ", std::strerror(errno));
    DP_ENFORCE_CODE(S_ISREG(st.st_mode), Code::kIo, FileDesc(path_), " is not a regular file");
    size_ = static_cast<uint64_t>(st.st_size);

    // The magic first (what is there of it): another kind of file is a
    // parse error, a short start of a checkpoint a truncation.
    Preamble p{};
    ReadAt(fd_, path_, 0, &p, static_cast<size_t>(std::min<uint64_t>(size_, sizeof p)));
    const size_t magic_read = static_cast<size_t>(std::min<uint64_t>(size_, sizeof kCheckpointMagic));
    DP_ENFORCE_CODE(std::memcmp(p.magic, kCheckpointMagic, magic_read) == 0,
                    Code::kParse, FileDesc(path_), " is not a dp checkpoint (bad magic)");
    if (size_ < sizeof p)
      DP_THROW(Code::kDataLoss, FileDesc(path_), " is truncated: ", size_, " bytes, shorter than the ", sizeof p,
               "-byte preamble of a checkpoint");
    DP_ENFORCE_CODE(Xxh3(&p, kPreambleHashed) == p.preamble_xxh3, Code::kDataLoss, FileDesc(path_),
                    " is corrupted: preamble checksum mismatch");
    DP_ENFORCE_CODE(p.version == kCheckpointFormatVersion, Code::kUnimplemented, FileDesc(path_),
                    " has format version ", p.version, "; this dp reads version ", kCheckpointFormatVersion);
    DP_ENFORCE_CODE(p.flags == 0 && p.reserved == 0, Code::kUnimplemented, FileDesc(path_),
                    " uses features this dp does not know (flags ", p.flags, ")");
    DP_ENFORCE_CODE(p.file_size == size_, Code::kDataLoss, FileDesc(path_), " is ", size_ < p.file_size ? "truncated" : "longer than written",
                    ": ", size_, " bytes, its preamble says ", p.file_size);
    DP_ENFORCE_CODE(p.header_offset == sizeof p && p.header_size >= 8 && p.header_size <= kMaxHeaderSize &&
                        p.header_size <= size_ - sizeof p,
                    Code::kDataLoss, FileDesc(path_), " is corrupted: header of ", p.header_size, " bytes at ",
                    p.header_offset, " does not fit the file");
    std::vector<uint64_t> words((p.header_size + 7) / 8);  // aligned for the verifier
    ReadAt(fd_, path_, p.header_offset, words.data(), static_cast<size_t>(p.header_size));
    const auto* hdr = reinterpret_cast<const uint8_t*>(words.data());
    const size_t hsize = static_cast<size_t>(p.header_size);
    DP_ENFORCE_CODE(Xxh3(hdr, hsize) == p.header_xxh3, Code::kDataLoss, FileDesc(path_),
                    " is corrupted: header checksum mismatch");
    flatbuffers::Verifier verifier(hdr, hsize, /*max_depth=*/16, /*max_tables=*/100000000);
    DP_ENFORCE_CODE(flatbuffers::BufferHasIdentifier(hdr, kIdentifier) &&
                        verifier.VerifyBuffer<fb::Checkpoint>(kIdentifier),
                    Code::kParse, FileDesc(path_), ": header failed FlatBuffers verification");
    const fb::Checkpoint* root = flatbuffers::GetRoot<fb::Checkpoint>(hdr);
    auto str = [](const flatbuffers::String* s) { return s ? s->str() : std::string(); };
    meta_.dp_version = str(root->dp_version());
    meta_.model_name = str(root->model_name());
    meta_.iteration = root->iteration();
    CheckIteration(meta_.iteration, Code::kParse, StrCat(FileDesc(path_), ": header"));
    meta_.device_type = str(root->device_type());
    meta_.replicas = root->replicas();
    meta_.shards = root->shards();
    for (const std::string* s : {&meta_.dp_version, &meta_.model_name, &meta_.device_type})
      DP_ENFORCE_CODE(FindInvalidUtf8(*s) == std::string_view::npos, Code::kParse, FileDesc(path_),
                      ": metadata is not valid UTF-8");

    // Every entry checked against the layout: a valid dtype and shape whose
    // bytes are its length, an aligned offset past the header, inside the
    // file, after the previous tensor; unique, well-formed names.
    uint64_t end = sizeof p + p.header_size;
    for (const fb::CheckpointTensor* t : *root->tensors()) {
      CheckpointEntry e;
      e.name = t->name()->str();
      DP_ENFORCE_CODE(!e.name.empty() && FindInvalidUtf8(e.name) == std::string_view::npos, Code::kParse,
                      FileDesc(path_), ": a tensor name is empty or not valid UTF-8");
      const std::string where = StrCat(FileDesc(path_), ", tensor '", e.name, "'");
      DP_ENFORCE_CODE(index_.emplace(e.name, entries_.size()).second, Code::kParse, where,
                      ": the name appears twice");
      DP_ENFORCE_CODE(DTypeFromInt(t->dtype(), &e.dtype) && e.dtype != DType::kUndefined, Code::kParse, where,
                      ": unknown dtype ", t->dtype());
      uint64_t bytes = DTypeSize(e.dtype);
      if (t->dims() != nullptr)
        for (int64_t d : ScalarsBytewise(*t->dims())) {
          DP_ENFORCE_CODE(d >= 0, Code::kParse, where, ": negative dimension ", d);
          e.dims.push_back(d);
          DP_ENFORCE_CODE(!__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes), Code::kParse, where,
                          ": its size overflows");
        }
      e.offset = t->offset();
      e.length = t->length();
      e.xxh3 = t->xxh3();
      DP_ENFORCE_CODE(e.length == bytes, Code::kParse, where, ": ", e.length, " bytes, but ", DTypeName(e.dtype),
                      " of its shape needs ", bytes);
      DP_ENFORCE_CODE(e.offset % kCheckpointAlignment == 0 && e.offset >= end && e.offset <= size_ &&
                          e.length <= size_ - e.offset,
                      Code::kDataLoss, where, ": bytes [", e.offset, ", +", e.length, ") are outside the file's ",
                      size_, " bytes or overlap what precedes them");
      end = e.offset + e.length;
      entries_.push_back(std::move(e));
    }
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

CheckpointReader::~CheckpointReader() {
  if (fd_ >= 0) ::close(fd_);
}

Tensor CheckpointReader::Load(size_t i, bool verify, bool mapped, const std::shared_ptr<MemoryBudget>& budget) {
  DP_ENFORCE_CODE(i < entries_.size(), Code::kOutOfRange, FileDesc(path_), ": no tensor ", i);
  const CheckpointEntry& e = entries_[i];
  const std::string where = StrCat(FileDesc(path_), ", tensor '", e.name, "'");
  Tensor t;
  if (mapped && e.length > 0) {
    if (!mapping_) {
      auto m = std::make_shared<Mapping>();
      void* addr = ::mmap(nullptr, static_cast<size_t>(size_), PROT_READ, MAP_PRIVATE, fd_, 0);
      if (addr == MAP_FAILED) DP_THROW(Code::kIo, "cannot map ", FileDesc(path_), ": ", std::strerror(errno));
      m->addr = addr;
      m->size = static_cast<size_t>(size_);
      mapping_ = std::move(m);
    }
    // The tensor holds the mapping alive through its deleter's user data
    // (owned here until the storage has taken it).
    auto keep = std::make_unique<std::shared_ptr<Mapping>>(mapping_);
    ExternalDeleter del{[](void*, void* user) { delete static_cast<std::shared_ptr<Mapping>*>(user); }, keep.get()};
    void* data = static_cast<char*>(mapping_->addr) + e.offset;
    auto storage = Storage::Adopt({}, data, static_cast<size_t>(e.length), del);
    keep.release();
    t = Tensor::FromStorage(e.dims, e.dtype, std::move(storage));
    if (verify)
      DP_ENFORCE_CODE(Xxh3(data, static_cast<size_t>(e.length)) == e.xxh3, Code::kDataLoss, where,
                      " is corrupted: checksum mismatch");
    return t;
  }
  if (budget) t.set_budget(budget);  // charged from the allocation on
  t.Resize(e.dims, e.dtype);
  // Read in pieces, each hashed while it is still in cache; the kernel is
  // told to fetch the whole tensor ahead (small reads alone would keep only a
  // readahead window of the device busy).
  ::posix_fadvise(fd_, static_cast<off_t>(e.offset), static_cast<off_t>(e.length), POSIX_FADV_WILLNEED);
  char* dst = static_cast<char*>(t.raw_mutable_data());
  Xxh3Stream hash;
  for (uint64_t done = 0; done < e.length;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, e.length - done));
    ReadAt(fd_, path_, e.offset + done, dst + done, n);
    if (verify) hash.Update(dst + done, n);
    done += n;
  }
  if (verify && e.length > 0)
    DP_ENFORCE_CODE(hash.Digest() == e.xxh3, Code::kDataLoss, where, " is corrupted: checksum mismatch");
  return t;
}

}  // namespace dp
