// A tenant client that outlives its daemon: what TenantClient::connect returns when
// `options.reconnect.enabled`.
//
// It holds one registration (a client of connect_once) at a time. When that one turns
// pass-through (its daemon went away, said goodbye, or broke the protocol), a thread of its own
// lets it go and tries to register again on the same socket, with the options of the first
// registration (the class the daemon granted then), until a daemon answers:
// - in between, the client is pass-through (every call answers as a client without a daemon does);
// - the new registration numbers its launches on from the last one (`seq_base`), so the ends of
//   launches made under the daemon that went are answered in the process and never told to the new
//   one, and no number is given out twice;
// - what the new daemon cannot know is told to it again: the LC flag, when it is up (on the new
//   registration's own slot, as soon as its lease names one), an LC request that is open, and the
//   memory in use;
// - the memory quota stays the first registration's (the process allocated under it).
//
// Calls from the application's threads never wait for the thread that reconnects: each holds the
// registration it found through a count (one fetch-add and one fetch-sub), and a registration is
// let go only once that count is zero and no call can find it any more.
#pragma once

#include <functional>
#include <memory>

#include "ipc/tenant_client.h"

namespace concord::ipc {

using ConnectOnce = std::function<Result<std::unique_ptr<TenantClient>>(const TenantClientOptions&)>;

// Wraps `first` (a registration made with `options`); `connect` makes each later one.
std::unique_ptr<TenantClient> reconnecting(std::unique_ptr<TenantClient> first, const TenantClientOptions& options,
                                           ConnectOnce connect);

}  // namespace concord::ipc
