#include "core/feed_watch.h"

#include <algorithm>

#include "core/closest_name.h"

namespace dp {

void FeedWatch::AddReaders(const std::vector<std::string>& names) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& n : names) ++readers_[n];
  readers_added_.fetch_add(1, std::memory_order_release);
}

std::vector<std::string> FeedWatch::ReadAmong(const std::vector<std::string>& names) {
  std::vector<std::string> read;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& n : names)
    if (readers_.count(n) != 0) read.push_back(n);
  return read;
}

void FeedWatch::RemoveReaders(const std::vector<std::string>& names) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& n : names) {
    auto it = readers_.find(n);
    if (it != readers_.end() && --it->second == 0) readers_.erase(it);
  }
}

void FeedWatch::NoteFed(const Blob& blob) {
  std::lock_guard<std::mutex> lock(mu_);
  // A handful of blobs are fed between runs: a scan beats a set.
  if (std::find(fed_.begin(), fed_.end(), &blob) == fed_.end()) fed_.push_back(&blob);
  pending_.store(true, std::memory_order_release);
}

std::vector<FeedWatch::Unread> FeedWatch::TakeUnread(bool as_warnings) {
  std::vector<Unread> out;
  if (!pending()) return out;
  std::lock_guard<std::mutex> lock(mu_);
  pending_.store(false, std::memory_order_relaxed);
  for (const Blob* b : fed_)
    if (readers_.count(b->name()) == 0)
      out.push_back({b->name(), "", as_warnings ? warned_.insert(b->name()).second : warned_.count(b->name()) == 0});
  fed_.clear();  // keeps its capacity: the next steps' feeds allocate nothing
  if (out.empty()) return out;
  std::vector<std::string> read;
  read.reserve(readers_.size());
  for (const auto& [name, count] : readers_) read.push_back(name);
  std::sort(read.begin(), read.end());  // ties go to the first: make that independent of hashing
  for (Unread& u : out)
    if (const std::string* near = ClosestName(u.blob, read)) u.nearest = *near;
  return out;
}

}  // namespace dp
