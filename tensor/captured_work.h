// Work recorded into a CUDA graph that must see the graph's replays. A communicator's watchdog
// watches each eager collective, but the collectives inside a captured graph are launched by the
// device, out of its sight: at capture it notes what the graph holds, and the graph's executor tells
// it of every replay, so it watches the replay as a whole. See Note [Named hangs] in
// docs/data_parallel.md.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tg {

// What a watcher noted about one piece of captured work (its own subclass).
class CapturedNote {
 public:
  virtual ~CapturedNote() = default;
};

// Sees the replays of graphs holding its work.
class ReplayWatcher {
 public:
  virtual ~ReplayWatcher() = default;
  // A graph holding `held` (this watcher's notes from its capture, in order) was just launched on
  // the current stream. `graph` names it ("function 2 backward graph"). Runs on every replay: cheap,
  // no host synchronization.
  virtual void replayed(const std::string& graph, const std::vector<std::shared_ptr<const CapturedNote>>& held) = 0;
};

// Called while a graph is captured on this thread: the graph holds `note`'s work of `watcher`.
// Without a CapturedWorkScope on this thread (a capture outside a graph executor) it does nothing.
void note_captured_work(const std::shared_ptr<ReplayWatcher>& watcher, std::shared_ptr<const CapturedNote> note);

// What one capture noted, per watcher (held weakly: a watcher that is gone is skipped).
class CapturedWork {
 public:
  bool empty() const { return watchers_.empty(); }
  // Tells each watcher of a replay just launched.
  void replayed(const std::string& graph) const;

 private:
  friend void note_captured_work(const std::shared_ptr<ReplayWatcher>&, std::shared_ptr<const CapturedNote>);
  std::vector<std::pair<std::weak_ptr<ReplayWatcher>, std::vector<std::shared_ptr<const CapturedNote>>>> watchers_;
};

// While alive, collects what the captures on this thread note (scopes nest: the innermost collects).
class CapturedWorkScope {
 public:
  CapturedWorkScope();
  ~CapturedWorkScope();
  CapturedWorkScope(const CapturedWorkScope&) = delete;
  CapturedWorkScope& operator=(const CapturedWorkScope&) = delete;
  // What was noted so far (the scope starts empty again).
  CapturedWork take();

 private:
  friend void note_captured_work(const std::shared_ptr<ReplayWatcher>&, std::shared_ptr<const CapturedNote>);
  CapturedWork work_;
  CapturedWorkScope* previous_;
};

}  // namespace tg
