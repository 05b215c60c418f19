package org.dp;

/**
 * A net's memory on one device after its last run (dp_net_memory), in bytes and counts.
 * Immutable. Since 0.6.
 */
public final class NetMemoryStats {
  /** What the net does: {@link NetOptions#MEMORY_KEEP}, {@code _SHARE} or {@code _FREE}. */
  public final int mode;
  /** The most the workspace held on the device during the last run. */
  public final long peakBytes;
  /** What it holds there now. */
  public final long bytesInUse;
  /** Blobs the plan empties after their last use. */
  public final long temporaries;
  /** SHARE: the blocks they take turns in. */
  public final long slots;
  /** SHARE: the bytes those blocks hold between runs. */
  public final long slotBytes;

  NetMemoryStats(long[] v) {
    mode = (int) v[0];
    peakBytes = v[1];
    bytesInUse = v[2];
    temporaries = v[3];
    slots = v[4];
    slotBytes = v[5];
  }

  @Override
  public String toString() {
    return "NetMemoryStats{mode=" + mode + ", peakBytes=" + peakBytes + ", bytesInUse=" + bytesInUse
        + ", temporaries=" + temporaries + ", slots=" + slots + ", slotBytes=" + slotBytes + "}";
  }
}
