package org.dp;

/**
 * Receives dp's log messages (see {@link Log#setCallback}). It may be called from any thread, dp's
 * own worker threads included (they are attached to the JVM as daemon threads), but never
 * concurrently with itself. It must not call {@link Log#setCallback}; exceptions it throws are
 * caught and dropped.
 */
@FunctionalInterface
public interface LogCallback {
  void log(int level, String message);
}
