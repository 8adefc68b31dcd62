#pragma once

#include <cstdint>
#include <string>
#include <vector>

// Noticing that files a supervisor may rewrite under a running process changed: a Secret or
// ConfigMap the kubelet mounted and updates in place. The kubelet writes each new version into
// a fresh timestamped directory and swaps the volume's `..data` symlink to it, so the visible
// path keeps its name while what it resolves to changes: a change is told by content, never by
// the path's inode or mtime.
namespace outbox {

// A set of paths and a fingerprint of each one's content.
//
// Guarantees: a content change between two looks is reported by the second (a change undone
// before the next look is not); a rewrite with the same content is not a change. Only a
// fingerprint (a 64-bit hash) is kept, never the content: the files hold credentials.
// Caveats: a file rewritten in place (not through a rename or a symlink swap) may be read half
// written; that shows as a change, and the rest of the write as another one.
class FileWatch {
 public:
  FileWatch() = default;  // watches nothing
  // Takes each path's fingerprint now. A directory stands for the files in it whose name does
  // not start with '.' (the kubelet's own entries do), by name and content; a path that cannot
  // be read counts as missing, and its appearance as a change.
  explicit FileWatch(std::vector<std::string> paths);

  // The paths whose content differs from their fingerprint, which is taken again: each change
  // is reported once. Empty when nothing changed.
  std::vector<std::string> changed();
  // Takes every fingerprint again, as the files are now, forgetting what changed before.
  void reset();
  bool empty() const { return paths_.empty(); }

 private:
  std::vector<std::string> paths_;
  std::vector<std::uint64_t> fingerprints_;
};

}  // namespace outbox
