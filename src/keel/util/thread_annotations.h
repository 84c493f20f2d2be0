#pragma once
// Clang's thread-safety analysis (-Wthread-safety) for keel's own locks: a Mutex that is a
// capability, a scoped MutexLock, and the attributes that say which data a mutex guards
// (KEEL_GUARDED_BY) and which functions must run with it held (KEEL_REQUIRES). Under clang the
// analysis checks every such function and access at compile time (tests/CMakeLists: the
// thread_safety test); under GCC the attributes are empty and Mutex is a std::mutex.
// Mutex and MutexLock are as thread-safe as std::mutex and std::unique_lock.
#include <mutex>

#if defined(__clang__)
#define KEEL_THREAD_ATTRIBUTE(x) __attribute__((x))
#else
#define KEEL_THREAD_ATTRIBUTE(x)
#endif

#define KEEL_CAPABILITY(name) KEEL_THREAD_ATTRIBUTE(capability(name))
#define KEEL_SCOPED_CAPABILITY KEEL_THREAD_ATTRIBUTE(scoped_lockable)
#define KEEL_GUARDED_BY(mutex) KEEL_THREAD_ATTRIBUTE(guarded_by(mutex))
#define KEEL_PT_GUARDED_BY(mutex) KEEL_THREAD_ATTRIBUTE(pt_guarded_by(mutex))
#define KEEL_REQUIRES(...) KEEL_THREAD_ATTRIBUTE(requires_capability(__VA_ARGS__))
#define KEEL_EXCLUDES(...) KEEL_THREAD_ATTRIBUTE(locks_excluded(__VA_ARGS__))
#define KEEL_ACQUIRE(...) KEEL_THREAD_ATTRIBUTE(acquire_capability(__VA_ARGS__))
#define KEEL_RELEASE(...) KEEL_THREAD_ATTRIBUTE(release_capability(__VA_ARGS__))
#define KEEL_ASSERT_CAPABILITY(x) KEEL_THREAD_ATTRIBUTE(assert_capability(x))

namespace keel {

class KEEL_CAPABILITY("mutex") Mutex {
 public:
  void lock() KEEL_ACQUIRE() { mu_.lock(); }
  void unlock() KEEL_RELEASE() { mu_.unlock(); }
  // Tells the analysis what it cannot see: that this mutex, reached by another name (another
  // object's reference to the same owner), is the one the caller holds. Checks nothing at run time.
  void assert_held() const KEEL_ASSERT_CAPABILITY(this) {}

 private:
  std::mutex mu_;
};

// Holds `mu` from construction to destruction; unlock() and lock() let it go and take it back in
// between (a condition variable's wait, or a slow step done without the lock).
class KEEL_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) KEEL_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() KEEL_RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() KEEL_RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  void lock() KEEL_ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

}  // namespace keel
