package org.dp;

/** Options of checkpoint saves (dp_checkpoint_save_options). 0/null means default. */
public final class CheckpointSaveOptions {
  /** Recorded in the file; null: "" (or, for {@link ParallelModel#save}, the model's name). */
  public String modelName;
  /** The iteration recorded; 0: the blob "optimizer/iter" when saved, else unknown (-1). */
  public long iteration;
  /** Async saves only: the share of wall time spent writing, in (0, 1]; 0 means 0.2. */
  public double asyncWriteShare;

  public CheckpointSaveOptions modelName(String v) {
    modelName = v;
    return this;
  }

  public CheckpointSaveOptions iteration(long v) {
    iteration = v;
    return this;
  }

  public CheckpointSaveOptions asyncWriteShare(double v) {
    asyncWriteShare = v;
    return this;
  }
}
