package org.dp;

/**
 * Options of {@link Loader} (dp_loader_options, since 0.5). {@link #batchSize} has no default and
 * must be set; every other field 0/false means its default.
 */
public final class LoaderOptions {
  /** The global batch: samples per step over all processes; &gt; 0. */
  public long batchSize;
  /** The shuffle's seed. */
  public long seed;
  /** Every epoch in dataset order. */
  public boolean noShuffle;
  /** Feed a last partial batch too (one process only); false: it is dropped. */
  public boolean keepLast;
  /** Processes that share each global batch (0: 1); {@link #batchSize} divides by it. */
  public int numShards;
  /**
   * This process, 0 &lt;= shardId &lt; numShards: it is fed rows [shardId * B / S, (shardId + 1) * B / S)
   * of every global batch.
   */
  public int shardId;
  /** Batches gathered ahead, 1..64 (0: 2, double buffering). */
  public int prefetch;
  /** Longest {@link Loader#next} waits for a batch (0: 60000). */
  public int timeoutMs;
  /**
   * Where the batches are fed (since 0.6): {@link Dp#DEVICE_CPU} (0, the default) in host memory;
   * {@link Dp#DEVICE_CUDA}: on GPU {@link #deviceId}, {@link Loader#create}'s dataset copied there once
   * and each batch gathered there, unless {@link #hostDataset}; a callback loader's batches staged there.
   */
  public int deviceType;
  /** The GPU, with {@link #deviceType} {@link Dp#DEVICE_CUDA}; 0 otherwise. */
  public int deviceId;
  /**
   * With {@link Dp#DEVICE_CUDA} (since 0.6): {@link Loader#create} keeps the dataset in host memory and
   * stages each batch to the GPU (page-locked buffers, a copy stream ahead of the steps), for a dataset
   * that does not fit there.
   */
  public boolean hostDataset;

  public LoaderOptions batchSize(long v) {
    batchSize = v;
    return this;
  }

  public LoaderOptions seed(long v) {
    seed = v;
    return this;
  }

  public LoaderOptions noShuffle(boolean v) {
    noShuffle = v;
    return this;
  }

  public LoaderOptions keepLast(boolean v) {
    keepLast = v;
    return this;
  }

  /** This process's part: shard {@code id} of {@code n} processes. */
  public LoaderOptions shards(int n, int id) {
    numShards = n;
    shardId = id;
    return this;
  }

  public LoaderOptions prefetch(int v) {
    prefetch = v;
    return this;
  }

  public LoaderOptions timeoutMs(int v) {
    timeoutMs = v;
    return this;
  }

  /** The dataset on GPU {@code id} ({@link Dp#DEVICE_CUDA}). */
  public LoaderOptions onCuda(int id) {
    deviceType = Dp.DEVICE_CUDA;
    deviceId = id;
    return this;
  }

  /** The dataset kept in host memory, its batches staged to the GPU of {@link #onCuda}. */
  public LoaderOptions hostDataset(boolean v) {
    hostDataset = v;
    return this;
  }
}
