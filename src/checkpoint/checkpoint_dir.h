// A directory of checkpoints, one per training step: "step-<N>.dpckpt" with
// N zero-padded to 9 digits (so that names sort by step). Listing verifies
// each header and skips (with a warning) a file that fails, so that "the
// latest checkpoint" is the newest good one; pruning keeps the newest K and
// removes the temporary files of writers that died.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dp {

// "step-000000100.dpckpt" for step 100 (kInvalidArgument for a negative step).
std::string StepCheckpointName(int64_t step);
// The step of such a name; nullopt for any other name (temporary files too).
std::optional<int64_t> ParseStepCheckpointName(const std::string& name);

// Paths of the step checkpoints in `dir` whose headers verify, newest first.
// kNotFound / kIo when the directory cannot be read.
std::vector<std::string> ListStepCheckpoints(const std::string& dir);

// Removes all but the `keep` newest step checkpoints of `dir` (keep 0: none
// removed) and the temporary files (AtomicFileWriter) of processes that no
// longer run. Returns how many files it removed.
int PruneStepCheckpoints(const std::string& dir, int keep);

}  // namespace dp
