// The device headers the fusion compiler needs, embedded at build time (cmake/embed_sources.cmake
// writes fusion_sources.cpp from the files themselves, so they never drift from what nvcc builds).
#pragma once

namespace concord::kernels {

struct EmbeddedSource {
  const char* name;  // as #included: "concord/device/launch.cuh", "kernels/device/bodies.cuh"
  const char* text;
};
extern const EmbeddedSource kFusionSources[];
extern const int kFusionSourceCount;

}  // namespace concord::kernels
