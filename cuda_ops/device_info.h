// Device discovery for the CUDA backend. Safe on machines without a GPU: it reports zero devices.
#pragma once

namespace ot::cuda {
// Number of CUDA devices usable now (0 without a driver or GPU, never an error).
int DeviceCount();
}  // namespace ot::cuda
