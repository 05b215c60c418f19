// What the rest of the engine needs to know about CUDA, whether or not dp
// was built with it. Without CUDA (or without a driver or GPU) dp simply
// has zero CUDA devices.
#pragma once

namespace dp::cuda {

bool BuiltWithCuda();
// Visible CUDA devices; 0 when not built with CUDA, no driver, or no GPU.
int DeviceCount();

}  // namespace dp::cuda
