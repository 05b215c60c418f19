// Keeps a background writer to a share of the wall time. Disk writes cost
// CPU time beyond the writer's own (page cache, file system, block layer and,
// on a virtual machine, the device's emulation), which a low-priority writer
// thread does not contain: training beside a save that writes flat out runs
// ~10-15% slower per step on a 2-core VM. Writing piece by piece, each piece
// flushed to the device before the next, and resting in between so that the
// writing takes `share` of the time, bounds that cost at the price of a save
// lasting ~1/share as long (bench/README.md, "Checkpoints").
#pragma once

#include <chrono>
#include <string_view>
#include <thread>

#include "core/error.h"

namespace dp {

// The one check of a write share: (0, 1], NaN refused. `what` starts the
// message ("checkpoint 'x.dpckpt': the write share").
inline void CheckWriteShare(double share, std::string_view what) {
  DP_ENFORCE_CODE(share > 0 && share <= 1, Code::kInvalidArgument, what, " must be in (0, 1], got ", share);
}

class WritePacer {
 public:
  // share in (0, 1]; 1 never rests.
  explicit WritePacer(double share) : share_(share) {}

  bool active() const { return share_ < 1.0; }

  // Around each piece: Start before hashing and writing it, Rest once it is
  // on the device (the rest is the piece's time scaled by 1/share - 1).
  void Start() { start_ = Clock::now(); }
  void Rest() {
    if (!active()) return;
    const auto worked = Clock::now() - start_;
    std::this_thread::sleep_for(std::chrono::duration_cast<Clock::duration>(worked * (1.0 / share_ - 1.0)));
  }

 private:
  using Clock = std::chrono::steady_clock;
  double share_;
  Clock::time_point start_{};
};

}  // namespace dp
