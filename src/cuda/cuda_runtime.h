// What the rest of the engine needs to know about CUDA, whether or not dp
// was built with it. Without CUDA (or without a driver or GPU) dp simply
// has zero CUDA devices.
#pragma once

namespace dp::cuda {

bool BuiltWithCuda();
// Visible CUDA devices; 0 when not built with CUDA, no driver, or no GPU.
int DeviceCount();
// CUDA version of the installed driver (1000 major + 10 minor, as
// cudaDriverGetVersion); 0 when not built with CUDA or no driver is installed.
// Never throws.
int DriverVersion();

}  // namespace dp::cuda
