// The build's identity: the project version and the git commit the binary was built from
// (read on every build by cmake/build_info.cmake; "unknown" outside a git checkout).
#pragma once

namespace concord {

const char* build_version();
const char* build_commit();

}  // namespace concord
