package org.dp;

/** Options of {@link Net#create} (dp_net_options). Every field 0 means its default. */
public final class NetOptions {
  public static final int EXECUTOR_DEFAULT = 0;
  public static final int EXECUTOR_SIMPLE = 1;
  public static final int EXECUTOR_ASYNC = 2;
  /**
   * What a net does with the memory of its temporaries (DP_MEMORY_*; blobs a run writes and then
   * reads itself: activations, gradients): keep every blob, share blocks between temporaries whose
   * lives never overlap, or free each after its last use. With SHARE and FREE a temporary is empty
   * after a run. DEFAULT: a definition's mode (KEEP) for a net, SHARE for the builders. Since 0.6.
   */
  public static final int MEMORY_DEFAULT = 0;
  public static final int MEMORY_KEEP = 1;
  public static final int MEMORY_SHARE = 2;
  public static final int MEMORY_FREE = 3;
  /**
   * Whether a net on one GPU runs as a CUDA graph, recorded on its second run and replayed after
   * that (DP_CUDA_GRAPHS_*): DEFAULT and ON do, OFF runs op by op (a profiled run then times every
   * op). Since 0.6.
   */
  public static final int CUDA_GRAPHS_DEFAULT = 0;
  public static final int CUDA_GRAPHS_ON = 1;
  public static final int CUDA_GRAPHS_OFF = 2;
  /**
   * How a net's CUDA GEMMs (FC, Conv and their gradients) compute (DP_MATH_*): tensors stay float32
   * in every mode; TF32, BF16 and FP16 round the GEMMs' inputs for tensor cores and accumulate in
   * float32; a training net in FP16 needs dynamic loss scaling ({@link
   * TrainingOptions#LOSS_SCALING_DYNAMIC}). CPU kernels compute in float32 whatever the mode. Since 0.6.
   */
  public static final int MATH_DEFAULT = 0;
  public static final int MATH_FP32 = 1;
  public static final int MATH_TF32 = 2;
  public static final int MATH_BF16 = 3;
  public static final int MATH_FP16 = 4;

  /** EXECUTOR_*; DEFAULT takes the definition's, else ASYNC for multi-device nets, SIMPLE otherwise. */
  public int executor;
  /** CPU worker threads of the async executor; 0: the definition's, else the core count; at most 1024. */
  public int numWorkers;
  /** CUDA workers per GPU; 0 means 1; at most 64. */
  public int streamsPerGpu;
  /** Record per-op timings of every run (see {@link Net#traceJson}). */
  public boolean profile;
  /**
   * A blob fed since the last run that no net of the workspace reads (a misspelt name) fails the
   * run with {@link DpNotFoundException} before any op runs; false: a warning through the log
   * callback, once per blob. Since 0.6.
   */
  public boolean unreadFeedError;
  /** MEMORY_*; DEFAULT takes the definition's. Since 0.6. */
  public int memory;
  /** CUDA_GRAPHS_*; DEFAULT is ON. Since 0.6. */
  public int cudaGraphs;
  /** MATH_*; DEFAULT is FP32. Since 0.6. */
  public int mathMode;

  public NetOptions executor(int v) {
    executor = v;
    return this;
  }

  public NetOptions numWorkers(int v) {
    numWorkers = v;
    return this;
  }

  public NetOptions streamsPerGpu(int v) {
    streamsPerGpu = v;
    return this;
  }

  public NetOptions profile(boolean v) {
    profile = v;
    return this;
  }

  public NetOptions unreadFeedError(boolean v) {
    unreadFeedError = v;
    return this;
  }

  public NetOptions memory(int v) {
    memory = v;
    return this;
  }

  public NetOptions cudaGraphs(int v) {
    cudaGraphs = v;
    return this;
  }

  public NetOptions mathMode(int v) {
    mathMode = v;
    return this;
  }
}
