// Fuzz target: checkpoint files (dp_checkpoint_info_from_file,
// dp_checkpoint_load). Checksums would stop almost every mutation at the
// preamble, so the first byte picks what the target repairs before writing
// the rest as the file: bit 0 set, the preamble's file size and the header
// and preamble checksums are recomputed, so that mutated headers reach the
// FlatBuffers verifier and the entry checks; bit 1 set, the load skips the
// tensors' checksums, so that mutated layouts reach the tensor reads.
// Promises checked: an accepted header records an iteration of -1 or more
// and describes tensors whose byte sizes match their dtypes and shapes; a load, read or mapped, yields exactly
// those tensors, with the same bytes either way.
#include <vector>

#include "checkpoint/checksum.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

// Preamble fields (docs/CHECKPOINT.md): little-endian u64s.
constexpr size_t kHeaderSizeAt = 24, kHeaderSumAt = 32, kFileSizeAt = 40, kPreambleSumAt = 56, kPreamble = 64;

uint64_t Get(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}

void Put(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

void Repair(std::vector<uint8_t>& b) {
  if (b.size() < kPreamble) return;
  Put(b, kFileSizeAt, b.size());
  const uint64_t header = Get(b, kHeaderSizeAt);
  if (header <= b.size() - kPreamble) Put(b, kHeaderSumAt, dp::Xxh3(b.data() + kPreamble, header));
  Put(b, kPreambleSumAt, dp::Xxh3(b.data(), kPreambleSumAt));
}

// Every tensor of the checkpoint, fetched from `ws`, as described by `info`.
std::vector<std::vector<uint8_t>> Fetch(dp_workspace* ws, const dp_checkpoint_info* info) {
  std::vector<std::vector<uint8_t>> out;
  for (size_t i = 0; i < dp_checkpoint_info_num_tensors(info); ++i) {
    dp_tensor* t = nullptr;
    dp::fuzz::MustSucceed(dp_workspace_fetch(ws, dp_checkpoint_info_tensor_name(info, i), &t), "fetching a loaded tensor");
    if (dp_tensor_nbytes(t) != dp_checkpoint_info_tensor_nbytes(info, i) ||
        dp_tensor_dtype(t) != dp_checkpoint_info_tensor_dtype(info, i) ||
        dp_tensor_ndim(t) != dp_checkpoint_info_tensor_ndim(info, i))
      dp::fuzz::Broken("a loaded tensor differs from its header entry");
    const auto* p = static_cast<const uint8_t*>(dp_tensor_data(t));
    out.emplace_back(p, p + dp_tensor_nbytes(t));
    dp_tensor_free(t);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string path = dp::fuzz::TempPath("checkpoint");
  std::vector<uint8_t> file(data + 1, data + size);
  if (data[0] & 1) Repair(file);
  dp::fuzz::WriteBytes(path, file.data(), file.size());

  dp_checkpoint_info* info = nullptr;
  if (dp::fuzz::Ok(dp_checkpoint_info_from_file(path.c_str(), &info))) {
    if (dp_checkpoint_info_iteration(info) < -1) dp::fuzz::Broken("an accepted header records an iteration below -1");
    for (size_t i = 0; i < dp_checkpoint_info_num_tensors(info); ++i) {
      uint64_t bytes = static_cast<uint64_t>(dp_dtype_size(dp_checkpoint_info_tensor_dtype(info, i)));
      const int64_t* dims = dp_checkpoint_info_tensor_dims(info, i);
      for (size_t d = 0; d < dp_checkpoint_info_tensor_ndim(info, i); ++d) bytes *= static_cast<uint64_t>(dims[d]);
      if (bytes != dp_checkpoint_info_tensor_nbytes(info, i) || bytes > file.size())
        dp::fuzz::Broken("an accepted entry's size disagrees with its dtype and shape, or the file");
    }
    std::vector<std::vector<uint8_t>> loaded[2];
    bool ok[2] = {false, false};
    for (int mapped = 0; mapped < 2; ++mapped) {
      dp_workspace* ws = dp::fuzz::CappedWorkspace();
      dp_checkpoint_load_options o;
      dp_checkpoint_load_options_init(&o, sizeof o);
      o.lenient = 1;
      o.no_verify = (data[0] & 2) ? 1 : 0;
      o.mmap = mapped;
      ok[mapped] = dp::fuzz::Ok(dp_checkpoint_load(ws, path.c_str(), &o));
      if (ok[mapped]) loaded[mapped] = Fetch(ws, info);
      dp_workspace_free(ws);
    }
    // Mapped tensors are not charged to the workspace's budget, so a read
    // may fail for memory where mapping succeeds; never the other way round.
    if (ok[0] && (!ok[1] || loaded[0] != loaded[1])) dp::fuzz::Broken("read and mapped loads disagree");
    dp_checkpoint_info_free(info);
  }
  std::remove(path.c_str());
  return 0;
}
