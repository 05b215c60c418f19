#include "core/closest_name.h"

#include <algorithm>
#include <cctype>

namespace dp {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

namespace {

bool EqualIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

const std::string* ClosestName(const std::string& given, const std::vector<std::string>& declared) {
  // A name in the wrong case ("relu", "fc") is the likeliest slip of all.
  for (const auto& name : declared)
    if (EqualIgnoringCase(given, name)) return &name;
  const size_t limit = std::min<size_t>(2, std::max<size_t>(1, given.size() / 3));
  const std::string* best = nullptr;
  size_t best_distance = limit + 1;
  for (const auto& name : declared) {
    // The distance is at least the length difference; checking that first
    // also keeps a huge name from costing a huge table.
    const size_t diff = given.size() > name.size() ? given.size() - name.size() : name.size() - given.size();
    if (diff >= best_distance) continue;
    const size_t d = EditDistance(given, name);
    if (d < best_distance) {
      best = &name;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace dp
