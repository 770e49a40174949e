//===- PerProcess.h - process-wide objects that survive fork ----*- C++ -*-===//

#ifndef FLEXSN_SUPPORT_PERPROCESS_H
#define FLEXSN_SUPPORT_PERPROCESS_H

#include <mutex>

#include <pthread.h>

namespace mlir {
namespace flexsn {

/// The process's one T, for objects that own threads (worker pools): made
/// by `make()` (a `T *`) on first use, never deleted (users may outlive
/// static destructors, and threads waiting on the object never return),
/// and made anew at the first use in a forked child, where the parent's
/// threads do not exist (the parent's object stays there, unused). A fork
/// waits for a making in progress.
template <typename T> class PerProcess {
public:
  template <typename Make> static T &get(Make make) {
    static bool registered = [] {
      pthread_atfork([] { creation().lock(); }, [] { creation().unlock(); },
                     [] {
                       current() = nullptr;
                       creation().unlock();
                     });
      return true;
    }();
    (void)registered;
    std::lock_guard<std::mutex> lock(creation());
    if (!current())
      current() = make();
    return *current();
  }

private:
  static std::mutex &creation() {
    static std::mutex mutex;
    return mutex;
  }
  static T *&current() {
    static T *object = nullptr;
    return object;
  }
};

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_SUPPORT_PERPROCESS_H
