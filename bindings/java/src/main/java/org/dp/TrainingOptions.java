package org.dp;

/** Options of {@link Model#buildTraining} (dp_training_options). 0 means default. */
public final class TrainingOptions {
  /** Seed of the loss gradients; 0 means 1. */
  public double lossScale;
  /** > 0 replaces the optimizer's base learning rate; 0: the model's. */
  public double lr;
  /** The train net's {@link NetOptions}.MEMORY_*; DEFAULT (0) is SHARE. Since 0.6. */
  public int memory;

  public TrainingOptions lossScale(double v) {
    lossScale = v;
    return this;
  }

  public TrainingOptions lr(double v) {
    lr = v;
    return this;
  }

  public TrainingOptions memory(int v) {
    memory = v;
    return this;
  }
}
