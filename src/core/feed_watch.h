// FeedWatch: a workspace's record of the blobs the caller fed since the last
// run of any of its nets, and of the blobs its nets read, so that a run can
// report a feed that no net reads ("X" fed where the net reads "x": the run
// would otherwise go on with the stale "x").
//
// Cheap on the hot path: a run with nothing fed since the last one costs one
// atomic load; a loader feeding the same blobs every step takes one lock and
// allocates nothing once the record has grown to their number.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/blob.h"

namespace dp {

class FeedWatch {
 public:
  // The blobs a net reads from the workspace (its external inputs), counted
  // while the net lives: Add when it is created, Remove when it is freed.
  void AddReaders(const std::vector<std::string>& names);
  void RemoveReaders(const std::vector<std::string>& names);
  // Changes with every AddReaders (one atomic load: a net's memory plan
  // checks it each run, to keep whole the blobs a newer net reads).
  uint64_t readers_added() const { return readers_added_.load(std::memory_order_acquire); }
  // Which of `names` some living net reads.
  std::vector<std::string> ReadAmong(const std::vector<std::string>& names);

  // A blob fed from outside (dp_workspace_feed, a loader's batch). The
  // blob's address is kept: blobs live as long as their workspace.
  void NoteFed(const Blob& blob);

  // Whether anything was fed since the last TakeUnread.
  bool pending() const { return pending_.load(std::memory_order_acquire); }

  struct Unread {
    std::string blob;
    std::string nearest;  // the closest name a net reads ("" when none is close)
    bool first_report;    // false once warned of this blob before
  };
  // The blobs fed since the last call that no net of the workspace reads,
  // and forgets the feeds. `as_warnings`: the caller warns of them, which
  // counts for first_report (an error does not: it is given every time).
  // Call it where no lock is held that a log callback could need: the caller
  // reports what it returns.
  std::vector<Unread> TakeUnread(bool as_warnings = true);

 private:
  std::atomic<bool> pending_{false};
  std::atomic<uint64_t> readers_added_{0};
  std::mutex mu_;
  std::vector<const Blob*> fed_;                  // since the last TakeUnread, each once
  std::unordered_map<std::string, int> readers_;  // name -> nets that read it
  std::unordered_set<std::string> warned_;        // unread feeds warned of before
};

}  // namespace dp
