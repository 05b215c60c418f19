// The nearest of some names to a name given: the "did you mean" of errors
// and warnings (op arguments, fed blobs no net reads).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dp {

// Edits (insertions, deletions, substitutions, swaps of neighbours) turning a
// into b: optimal string alignment, so "scael" is one edit from "scale".
size_t EditDistance(std::string_view a, std::string_view b);

// The declared name closest to `given` if it is a near miss: the first that
// differs only in case ("fc" -> "FC"), else the nearest within 2 edits, and
// within one for names under 6 characters (short names are all close to
// each other). Ties go to the first declared. nullptr when none is close.
const std::string* ClosestName(const std::string& given, const std::vector<std::string>& declared);

}  // namespace dp
