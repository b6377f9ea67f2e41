#include "ipc/launch_ledger.h"

#include <fmt/format.h>

namespace concord::ipc {

Status LaunchLedger::notice(uint64_t seq, uint64_t stream) {
  if (seq <= last_noticed_) {
    return Status::failed_precondition(fmt::format("launch notice: field seq: {} after {} (numbers only grow)", seq, last_noticed_));
  }
  if (states_.size() >= max_outstanding_) {
    return Status::failed_precondition(fmt::format("launch notice: field seq: {} launches outstanding, the limit", states_.size()));
  }
  states_.emplace(seq, Entry{State::noticed, stream});
  by_stream_[stream].push_back(seq);
  last_noticed_ = seq;
  return Status::ok();
}

Status LaunchLedger::decision(const Decision& decision) {
  const auto it = states_.find(decision.seq);
  if (it == states_.end()) {
    return Status::failed_precondition(fmt::format("decision: field seq: {} is not a launch waiting for one", decision.seq));
  }
  if (it->second.state == State::released) {
    return Status::failed_precondition(fmt::format("decision: field seq: {} was released already", decision.seq));
  }
  if (decision.verdict == Verdict::hold && it->second.state == State::held) {
    return Status::failed_precondition(fmt::format("decision: field verdict: {} is held already", decision.seq));
  }
  it->second.state = decision.verdict == Verdict::release ? State::released : State::held;
  return Status::ok();
}

Result<std::vector<uint64_t>> LaunchLedger::completion(uint64_t seq, uint64_t stream) {
  if (seq == 0) return Status::failed_precondition("completion: field seq: 0 is no launch");
  if (const auto it = states_.find(seq); it != states_.end() && it->second.stream != stream) {
    return Status::failed_precondition(fmt::format("completion: field stream: launch {} was noticed on stream {:#x}, not {:#x}", seq,
                                                   it->second.stream, stream));
  }
  std::vector<uint64_t> ended;
  const auto s = by_stream_.find(stream);
  if (s == by_stream_.end()) return ended;
  std::deque<uint64_t>& q = s->second;
  // Check first, then change: a refused completion changes nothing.
  for (uint64_t k : q) {
    if (k > seq) break;
    if (states_.at(k).state != State::released) {
      return Status::failed_precondition(fmt::format("completion: field seq: {} covers launch {}, which was not released", seq, k));
    }
  }
  while (!q.empty() && q.front() <= seq) {
    ended.push_back(q.front());
    states_.erase(q.front());
    q.pop_front();
  }
  if (q.empty()) by_stream_.erase(s);
  return ended;
}

}  // namespace concord::ipc
