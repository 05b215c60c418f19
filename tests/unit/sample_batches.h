// The sample's model files and synthetic batches shaped like Fashion-MNIST
// ("data" [N, 1, 28, 28] float32 pixels, "label" [N] int32 classes), for the
// tests that train the sample's models.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

#include "core/tensor.h"
#include "core/workspace.h"

namespace dp::testing {

// samples/nets/ of the source tree (meson sets DP_SOURCE_ROOT).
inline std::string SampleNetsDir() {
  const char* root = std::getenv("DP_SOURCE_ROOT");
  REQUIRE_MESSAGE(root != nullptr, "DP_SOURCE_ROOT is not set (meson sets it)");
  return std::string(root) + "/samples/nets/";
}

// Feeds `batch` samples drawn from `seed`: pixels uniform in [-0.8, 2)
// (standardised Fashion-MNIST's range), random labels.
inline void FeedSyntheticBatch(Workspace& ws, int64_t batch, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> px(-0.8f, 2.0f);
  Tensor x({batch, 1, 28, 28}, DType::kFloat32), y({batch}, DType::kInt32);
  float* xp = x.mutable_data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) xp[i] = px(gen);
  for (int64_t i = 0; i < batch; ++i) y.mutable_data<int32_t>()[i] = static_cast<int32_t>(gen() % 10);
  ws.Feed("data", x);
  ws.Feed("label", y);
}

}  // namespace dp::testing
