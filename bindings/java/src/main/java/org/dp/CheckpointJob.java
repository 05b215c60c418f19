package org.dp;

/**
 * A save running in the background (dp_checkpoint_job). {@link #await} may be called from any
 * thread; {@link #close} waits for the write if it still runs, then frees the job.
 */
public final class CheckpointJob extends NativeHandle {
  CheckpointJob(long ptr) {
    super("CheckpointJob", ptr, Native::checkpointJobFree);
  }

  /**
   * Waits up to timeoutMs (negative: no limit): true once the file is in place, false while the
   * write still runs; throws the write's error (the previous file is then untouched).
   */
  public boolean await(long timeoutMs) {
    long p = acquire();
    try {
      return Native.checkpointWait(p, timeoutMs);
    } finally {
      release();
    }
  }
}
