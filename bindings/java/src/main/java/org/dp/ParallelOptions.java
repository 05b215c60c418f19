package org.dp;

/**
 * Options of {@link Model#parallelize} (dp_parallel_options). Every field 0/false/null means its
 * default: one replica per device of {@link #deviceType} as dp_device_count reports them.
 */
public final class ParallelOptions {
  public static final int COMPUTED_PARAMS_BROADCAST = 0;
  public static final int COMPUTED_PARAMS_AVERAGE = 1;
  public static final int COMPUTED_PARAMS_NONE = 2;
  /** dp_parallel_options.shared_model (DP_SHARED_MODEL_*), from {@link #sharedModel} and {@link #sharedModelAuto}. */
  public static final int SHARED_MODEL_OFF = 0;
  public static final int SHARED_MODEL_ON = 1;
  public static final int SHARED_MODEL_AUTO = 2;
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
  /** dp picks sharedModel from where the CPU replicas run (shared when their CPUs share a last-level cache). */
  public boolean sharedModelAuto;
  /** Batch-norm statistics over the global batch. */
  public boolean syncBn;

  // Several processes (since 0.3): numShards processes train one model, meeting through store.
  // 0/null reads the environment (what dp-run sets), else the default.
  /** This process's rank in [0, numShards). */
  public int shardId;
  /** 0: DP_WORLD_SIZE and DP_RANK when DP_WORLD_SIZE is set, else 1 (this process alone). */
  public int numShards;
  /** "file:///dir" or "redis://host:port[/prefix]"; null: DP_STORE. */
  public String store;
  /** Bound of every collective; 0: DP_TIMEOUT_MS, else 60000. */
  public long timeoutMs;
  /** The interface to listen on ("eth0"); null: DP_INTERFACE, else the host name's address. */
  public String networkInterface;
  /** The job's id in the store; null: DP_RUN_ID, else "dp". */
  public String runId;
  /**
   * Between the processes of one host (since 0.4): "auto" (shared memory where usable), "shm" or "tcp"; null:
   * DP_LOCAL_TRANSPORT, else "auto".
   */
  public String localTransport;
  /** The train and accumulate nets' {@link NetOptions}.MEMORY_*; DEFAULT (0) is SHARE. Since 0.6. */
  public int memory;
  /**
   * GRADIENT_COMPRESSION_*: the gradient allreduce in 16 bits, half the bytes between processes
   * (dp_parallel_options.gradient_compression). Since 0.6.
   */
  public int gradientCompression;
  /**
   * ZeRO-1: the optimizer state sharded over every replica of every process
   * (dp_parallel_options.shard_optimizer_state). Since 0.6.
   */
  public boolean shardOptimizerState;
  /**
   * {@link TrainingOptions}.LOSS_SCALING_*: dynamic loss scaling (for FP16 math): one scale for every replica; not
   * with BMUF; with {@link #shardOptimizerState} or several GPUs each replica checks its gradients (its shard), one
   * verdict over every process. Since 0.6.
   */
  public int lossScaling;
  /** Its first scale; 0: 65536 (2^16). Since 0.6. */
  public double initialLossScale;

  public static final int GRADIENT_COMPRESSION_NONE = 0;
  public static final int GRADIENT_COMPRESSION_BF16 = 1;
  public static final int GRADIENT_COMPRESSION_FP16 = 2;

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

  /** This process is shard shardId of numShards (see {@link #store}). */
  public ParallelOptions shards(int numShards, int shardId) {
    this.numShards = numShards;
    this.shardId = shardId;
    return this;
  }

  public ParallelOptions store(String v) {
    store = v;
    return this;
  }
}
