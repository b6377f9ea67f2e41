#include "daemon/launch_book.h"

#include <fmt/format.h>

namespace concord::daemon {

void LaunchBook::set_engine(LaunchRecord& r, EngineStep step) {
  if (r.engine == EngineStep::queued) --queued_;
  if (r.engine == EngineStep::running) --running_;
  r.engine = step;
  if (step == EngineStep::queued) ++queued_;
  if (step == EngineStep::running) ++running_;
}

void LaunchBook::erase_if_spent(std::map<uint64_t, LaunchRecord>::iterator it) {
  if (it->second.told == Told::ended && it->second.engine == EngineStep::done) records_.erase(it);
}

Status LaunchBook::notice(uint64_t seq, uint64_t stream, bool released) {
  if (seq != last_noticed_ + 1) {
    return Status::failed_precondition(fmt::format("launch notice: field seq: {} after {} (each notice is the next number)", seq, last_noticed_));
  }
  if (outstanding_ >= max_outstanding_) {
    return Status::failed_precondition(fmt::format("launch notice: field seq: {} launches outstanding, the limit", outstanding_));
  }
  LaunchRecord r;
  r.stream = stream;
  r.told = released ? Told::released : Told::noticed;
  r.engine = engine_ && !dropped_ ? EngineStep::inbox : EngineStep::done;
  records_.emplace(seq, r);
  if (auto s = streams_.find(stream); s != streams_.end()) {
    records_.at(s->second.last).next_on_stream = seq;
    s->second.last = seq;
  } else {
    streams_.emplace(stream, StreamRun{seq, seq});
  }
  last_noticed_ = seq;
  ++outstanding_;
  if (released) ++in_flight_;
  return Status::ok();
}

Result<std::vector<uint64_t>> LaunchBook::end(uint64_t seq, uint64_t stream) {
  if (seq == 0 || seq > last_noticed_) {
    return Status::failed_precondition(fmt::format("completion: field seq: {} was never noticed (last notice {})", seq, last_noticed_));
  }
  if (const auto it = records_.find(seq); it != records_.end() && it->second.told != Told::ended && it->second.stream != stream) {
    return Status::failed_precondition(fmt::format("completion: field stream: launch {} was noticed on stream {:#x}, not {:#x}", seq,
                                                   it->second.stream, stream));
  }
  std::vector<uint64_t> ended;
  const auto s = streams_.find(stream);
  if (s == streams_.end()) return ended;
  // Check first, then change: a refused completion changes nothing.
  for (uint64_t k = s->second.first; k != 0 && k <= seq; k = records_.at(k).next_on_stream) {
    if (records_.at(k).told != Told::released) {
      return Status::failed_precondition(fmt::format("completion: field seq: {} covers launch {}, which was not released", seq, k));
    }
  }
  uint64_t k = s->second.first;
  while (k != 0 && k <= seq) {
    const auto it = records_.find(k);
    ended.push_back(k);
    k = it->second.next_on_stream;
    it->second.told = Told::ended;
    it->second.next_on_stream = 0;
    --outstanding_;
    --in_flight_;
    erase_if_spent(it);
  }
  if (k == 0) {
    streams_.erase(s);
  } else {
    s->second.first = k;
  }
  return ended;
}

Status LaunchBook::queue(uint64_t seq) {
  const auto it = records_.find(seq);
  if (seq != next_queue_ || it == records_.end() || it->second.engine != EngineStep::inbox) {
    return Status::internal(fmt::format("launch book: launch {} queued out of order (next {})", seq, next_queue_));
  }
  ++next_queue_;
  set_engine(it->second, EngineStep::queued);
  return Status::ok();
}

Result<std::chrono::steady_clock::duration> LaunchBook::decide(uint64_t seq, ipc::Verdict verdict, std::chrono::steady_clock::time_point now,
                                                               bool follow_on) {
  const auto it = records_.find(seq);
  if (it == records_.end() || it->second.told == Told::ended) {
    return Status::failed_precondition(fmt::format("decision: field seq: {} is not a launch waiting for one", seq));
  }
  LaunchRecord& r = it->second;
  if (r.told == Told::released) return Status::failed_precondition(fmt::format("decision: field seq: {} was released already", seq));
  if (verdict == ipc::Verdict::hold) {
    if (r.told == Told::held) return Status::failed_precondition(fmt::format("decision: field verdict: {} is held already", seq));
    r.told = Told::held;
    r.held_since = now;
    ++held_;
    return std::chrono::steady_clock::duration::zero();
  }
  std::chrono::steady_clock::duration held_for{0};
  if (r.told == Told::held) {
    --held_;
    held_for = now - r.held_since;
  }
  r.told = Told::released;
  r.followed = follow_on;
  ++in_flight_;
  return held_for;
}

std::optional<std::pair<uint64_t, LaunchRecord*>> LaunchBook::dispatch_next(DispatchId dispatch) {
  if (next_dispatch_ >= next_queue_) return std::nullopt;
  const auto it = records_.find(next_dispatch_);
  if (it == records_.end() || it->second.engine != EngineStep::queued) return std::nullopt;
  ++next_dispatch_;
  set_engine(it->second, EngineStep::running);
  it->second.dispatch = dispatch;
  return std::make_pair(it->first, &it->second);
}

void LaunchBook::finish(uint64_t seq) {
  const auto it = records_.find(seq);
  if (it == records_.end() || it->second.engine != EngineStep::running) return;
  set_engine(it->second, EngineStep::done);
  erase_if_spent(it);
}

void LaunchBook::let_go(uint64_t from, EngineStep step) {
  for (auto it = records_.lower_bound(from); it != records_.end();) {
    const auto next = std::next(it);
    if (it->second.engine == step) {
      set_engine(it->second, EngineStep::done);
      erase_if_spent(it);
    }
    it = next;
  }
}

void LaunchBook::forget_queued() {
  let_go(next_dispatch_, EngineStep::queued);
  next_dispatch_ = next_undecided_ = next_queue_;
}

void LaunchBook::drop() {
  dropped_ = true;
  forget_queued();
  let_go(next_queue_, EngineStep::inbox);
  next_queue_ = next_dispatch_ = next_undecided_ = last_noticed_ + 1;
}

std::vector<uint64_t> LaunchBook::undecided() {
  std::vector<uint64_t> out;
  bool leading = true;
  for (auto it = records_.lower_bound(next_undecided_); it != records_.end() && it->first < next_queue_; ++it) {
    const bool waiting = it->second.engine == EngineStep::queued && it->second.told == Told::noticed;
    if (waiting) {
      out.push_back(it->first);
      leading = false;
    } else if (leading) {
      next_undecided_ = it->first + 1;  // decided (or dispatched) already: never undecided again
    }
  }
  if (leading) next_undecided_ = next_queue_;
  return out;
}

std::optional<uint64_t> LaunchBook::oldest_held() const {
  if (held_ == 0) return std::nullopt;
  for (auto it = records_.lower_bound(next_dispatch_); it != records_.end(); ++it) {
    if (it->second.told == Told::held) return it->first;
  }
  return std::nullopt;
}

std::vector<std::pair<uint64_t, DispatchId>> LaunchBook::running_dispatches() const {
  std::vector<std::pair<uint64_t, DispatchId>> out;
  if (running_ == 0) return out;
  for (const auto& [seq, r] : records_) {
    if (r.engine == EngineStep::running) out.emplace_back(seq, r.dispatch);
  }
  return out;
}

std::optional<DispatchId> LaunchBook::running_as(uint64_t seq) const {
  const auto it = records_.find(seq);
  if (it == records_.end() || it->second.engine != EngineStep::running) return std::nullopt;
  return it->second.dispatch;
}

std::vector<uint64_t> LaunchBook::queued_seqs() const {
  std::vector<uint64_t> out;
  for (auto it = records_.lower_bound(next_dispatch_); it != records_.end() && it->first < next_queue_; ++it) {
    if (it->second.engine == EngineStep::queued) out.push_back(it->first);
  }
  return out;
}

}  // namespace concord::daemon
