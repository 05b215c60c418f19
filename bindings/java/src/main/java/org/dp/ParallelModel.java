package org.dp;

/**
 * A model turned into N replicas in this process (dp_parallel_model), possibly one shard of a job of
 * several processes ({@link #numShards}). Immutable: any thread. Its
 * nets run in one workspace; {@link #sync}, {@link #join}, {@link #save} and {@link #load} must not run while a
 * net runs on that workspace.
 */
public final class ParallelModel extends NativeHandle {
  ParallelModel(long ptr) {
    super("ParallelModel", ptr, Native::parallelModelFree);
  }

  /** The init, train and eval nets. */
  public TrainingNets nets() {
    long p = acquire();
    try {
      long[] out = new long[3];
      Native.parallelModelNets(p, out);
      return new TrainingNets(out);
    } finally {
      release();
    }
  }

  /** With accumulateSteps K > 1: the local accumulation net ({@link DpFailedPreconditionException} else). */
  public NetDef accumulateNet() {
    long p = acquire();
    try {
      return new NetDef(Native.parallelModelAccumulateNet(p));
    } finally {
      release();
    }
  }

  /** With BMUF: the block net and its length ({@link DpFailedPreconditionException} else). */
  public BlockNet blockNet() {
    long p = acquire();
    try {
      int[] len = new int[1];
      long def = Native.parallelModelBlockNet(p, len);
      return new BlockNet(new NetDef(def), len[0]);
    } finally {
      release();
    }
  }

  /** The net broadcasting replica 0's state to the others. */
  public NetDef syncNet() {
    long p = acquire();
    try {
      return new NetDef(Native.parallelModelSyncNet(p));
    } finally {
      release();
    }
  }

  /** Builds and runs the sync net on workspace once. */
  public void sync(Workspace workspace) {
    long p = acquire();
    try {
      long ws = acquireOrNull(workspace);
      try {
        Native.parallelModelSync(p, ws);
      } finally {
        releaseOrNull(workspace);
      }
    } finally {
      release();
    }
  }

  /**
   * Uneven data across processes (dp_parallel_model_join): a process that has run out of batches calls
   * this instead of running the train net again; it shadows the others' steps until every process has
   * joined. Returns the steps it shadowed (0 at once with one process).
   */
  public long join(Workspace workspace) {
    long p = acquire();
    try {
      long ws = acquireOrNull(workspace);
      try {
        return Native.parallelModelJoin(p, ws);
      } finally {
        releaseOrNull(workspace);
      }
    } finally {
      release();
    }
  }

  public int numReplicas() {
    long p = acquire();
    try {
      return (int) Native.parallelModelNumReplicas(p);
    } finally {
      release();
    }
  }

  /** The job's process count (1 for a one-process model). */
  public int numShards() {
    long p = acquire();
    try {
      return Native.parallelModelNumShards(p);
    } finally {
      release();
    }
  }

  /** This process's rank in the job (0 for a one-process model). */
  public int shardId() {
    long p = acquire();
    try {
      return Native.parallelModelShardId(p);
    } finally {
      release();
    }
  }

  /** Replica i's name scope ("cpu_1/"); null when out of range. */
  public String scope(int i) {
    long p = acquire();
    try {
      return Native.parallelModelScope(p, i);
    } finally {
      release();
    }
  }

  /** Saves replica 0's training state under unscoped names (dp_parallel_model_save); options may be null. */
  public void save(Workspace workspace, String path, CheckpointSaveOptions options) {
    long p = acquire();
    try {
      long ws = acquireOrNull(workspace);
      try {
        boolean has = options != null;
        Native.parallelModelSave(p, ws, Native.z("ParallelModel.save: path", path), has,
            has ? Native.z("ParallelModel.save: modelName", options.modelName) : null,
            has ? options.iteration : 0, has ? options.asyncWriteShare : 0);
      } finally {
        releaseOrNull(workspace);
      }
    } finally {
      release();
    }
  }

  /** Loads a checkpoint into replica 0 and syncs the others (dp_parallel_model_load); options may be null. */
  public void load(Workspace workspace, String path, CheckpointLoadOptions options) {
    long p = acquire();
    try {
      long ws = acquireOrNull(workspace);
      try {
        boolean has = options != null;
        Native.parallelModelLoad(p, ws, Native.z("ParallelModel.load: path", path), has,
            has ? Native.z("ParallelModel.load: names", options.names) : null,
            has && options.lenient ? 1 : 0, has && options.noVerify ? 1 : 0, has && options.mmap ? 1 : 0);
      } finally {
        releaseOrNull(workspace);
      }
    } finally {
      release();
    }
  }
}
