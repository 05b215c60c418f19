package org.dp;

import java.lang.ref.Cleaner;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.LongConsumer;

/**
 * Base of every handle: owns one dp object and frees it exactly once, on {@link #close()} or, as a
 * safety net, through a {@link Cleaner} once the Java object is unreachable.
 *
 * <p>Each native call holds a read lock of the handle, and close takes the write lock: a close
 * that races with calls on other threads waits for them, and any use after close throws
 * {@link IllegalStateException} instead of passing a freed pointer to dp (which would be undefined
 * behaviour). Closing is idempotent. Do not close a handle from inside a call on the same handle
 * (a log callback, say): the lock is not upgradable.
 */
abstract class NativeHandle implements AutoCloseable {
  static final Cleaner CLEANER = Cleaner.create();

  private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
  private final Cleaner.Cleanable cleanable;
  private final String kind;
  private long ptr;

  /** The cleaning action must not reach the handle, or it would never become unreachable. */
  private static final class Free implements Runnable {
    private final long ptr;
    private final LongConsumer free;

    Free(long ptr, LongConsumer free) {
      this.ptr = ptr;
      this.free = free;
    }

    @Override
    public void run() {
      free.accept(ptr);
    }
  }

  NativeHandle(String kind, long ptr, LongConsumer free) {
    if (ptr == 0) throw new IllegalStateException("dp returned no " + kind);
    this.kind = kind;
    this.ptr = ptr;
    this.cleanable = CLEANER.register(this, new Free(ptr, free));
  }

  /** Locks the handle for one native call and returns its address; pair with {@link #release()}. */
  final long acquire() {
    lock.readLock().lock();
    if (ptr == 0) {
      lock.readLock().unlock();
      throw new IllegalStateException(kind + " is closed");
    }
    return ptr;
  }

  final void release() {
    lock.readLock().unlock();
  }

  /** The address of a handle passed as an argument (0 for null: dp reports INVALID_ARGUMENT). */
  static long acquireOrNull(NativeHandle h) {
    return h == null ? 0 : h.acquire();
  }

  static void releaseOrNull(NativeHandle h) {
    if (h != null) h.release();
  }

  /** True once closed. */
  public final boolean isClosed() {
    lock.readLock().lock();
    try {
      return ptr == 0;
    } finally {
      lock.readLock().unlock();
    }
  }

  /** Hook run under the write lock before the object is freed (e.g. to finish a pending run). */
  void beforeFree(long ptr) {}

  /** Frees the dp object. Idempotent; waits for calls in progress on other threads. */
  @Override
  public void close() {
    lock.writeLock().lock();
    try {
      if (ptr == 0) return;
      long p = ptr;
      ptr = 0;
      beforeFree(p);
      cleanable.clean();
    } finally {
      lock.writeLock().unlock();
    }
  }
}
