package org.dp;

import java.nio.charset.StandardCharsets;

/**
 * dp's logging (dp_log_set_callback). Process wide; {@link #setCallback} may be called from any
 * thread. The native side calls {@link #dispatch} only; the callback itself lives here, so
 * replacing or clearing it never leaves a dangling reference in C.
 */
public final class Log {
  private Log() {}

  public static final int DEBUG = 0;
  public static final int INFO = 1;
  public static final int WARNING = 2;
  public static final int ERROR = 3;

  private static volatile LogCallback callback;

  /**
   * Routes messages of {@code minLevel} and above to {@code cb}; null restores dp's default
   * (stderr, from WARNING).
   */
  public static synchronized void setCallback(LogCallback cb, int minLevel) {
    Native.load();
    callback = cb;
    Native.logSetCallback(cb != null, cb != null ? minLevel : WARNING);
  }

  /** Called by the JNI glue on dp's logging thread. Never throws. */
  static void dispatch(int level, byte[] message) {
    LogCallback cb = callback;
    if (cb == null) return;
    try {
      cb.log(level, new String(message, StandardCharsets.UTF_8));
    } catch (Throwable t) {
      // A callback must not throw into dp; there is nobody to report it to.
    }
  }
}
