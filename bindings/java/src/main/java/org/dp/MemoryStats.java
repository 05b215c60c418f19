package org.dp;

/**
 * One device's memory as dp uses it (dp_memory_stats), in bytes and counts since the process
 * started. Immutable. On the CPU (every cpu:N is the host): the memory dp allocates itself, {@link
 * #reserved} equal to {@link #allocated}, the raw counts its host allocations and frees. On a GPU:
 * its caching allocator's blocks handed out ({@link #allocated}, rounded sizes), segments held
 * ({@link #reserved}), cudaMalloc and cudaFree calls. Since 0.6.
 */
public final class MemoryStats {
  /** Bytes dp's storage holds now. */
  public final long allocated;
  /** The most allocated at once since the last {@link Dp#resetPeakMemory}. */
  public final long peak;
  /** Bytes dp holds from the device, its cache included. */
  public final long reserved;
  /** Allocations from the device itself (GPU: cudaMalloc calls). */
  public final long rawAllocs;
  /** Frees to the device itself (GPU: cudaFree calls). */
  public final long rawFrees;

  MemoryStats(long[] v) {
    allocated = v[0];
    peak = v[1];
    reserved = v[2];
    rawAllocs = v[3];
    rawFrees = v[4];
  }

  @Override
  public String toString() {
    return "MemoryStats{allocated=" + allocated + ", peak=" + peak + ", reserved=" + reserved
        + ", rawAllocs=" + rawAllocs + ", rawFrees=" + rawFrees + "}";
  }
}
