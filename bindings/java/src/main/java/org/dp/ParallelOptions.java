package org.dp;

/**
 * Options of {@link Model#parallelize} (dp_parallel_options). Every field 0/false/null means its
 * default: one replica per device of {@link #deviceType} as dp_device_count reports them.
 */
public final class ParallelOptions {
  public static final int COMPUTED_PARAMS_BROADCAST = 0;
  public static final int COMPUTED_PARAMS_AVERAGE = 1;
  public static final int COMPUTED_PARAMS_NONE = 2;
  public static final int CUDA_COLLECTIVES_NCCL = 0;
  public static final int CUDA_COLLECTIVES_TREE = 1;

  /** {@link Dp#DEVICE_CPU} or {@link Dp#DEVICE_CUDA}. */
  public int deviceType;
  /** One replica per id (distinct, >= 0); null: every device of the type. */
  public int[] deviceIds;
  /** 0 means 1 MiB. */
  public long firstBucketBytes;
  /** 0 means 25 MiB. */
  public long bucketBytes;
  public boolean unevenSplit;
  /** Keep FC and Relu separate. */
  public boolean noFuse;
  /** > 0 replaces the base learning rate. */
  public double lr;
  /** Gradient accumulation over K global batches; 0 means 1. */
  public int accumulateSteps;
  public boolean bmuf;
  /** zeta; 0 means 1.0. */
  public double bmufBlockLr;
  /** mu; 0: 1 - 1/replicas, negative: none. */
  public double bmufBlockMomentum;
  public boolean bmufNoNesterov;
  /** 0 means 8. */
  public int bmufBlockLength;
  /** COMPUTED_PARAMS_*. */
  public int computedParams;
  /** CUDA_COLLECTIVES_*. */
  public int cudaCollectives;
  /** CPU only: one copy of the params for every replica. */
  public boolean sharedModel;
  /** Batch-norm statistics over the global batch. */
  public boolean syncBn;

  /** CPU replicas cpu:0 .. cpu:(n-1). */
  public static ParallelOptions cpu(int n) {
    ParallelOptions o = new ParallelOptions();
    o.deviceType = Dp.DEVICE_CPU;
    o.deviceIds = new int[n];
    for (int i = 0; i < n; ++i) o.deviceIds[i] = i;
    return o;
  }

  public ParallelOptions lr(double v) {
    lr = v;
    return this;
  }

  public ParallelOptions accumulateSteps(int v) {
    accumulateSteps = v;
    return this;
  }

  public ParallelOptions bmuf(int blockLength) {
    bmuf = true;
    bmufBlockLength = blockLength;
    return this;
  }
}
