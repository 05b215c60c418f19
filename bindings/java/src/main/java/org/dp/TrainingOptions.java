package org.dp;

/** Options of {@link Model#buildTraining} (dp_training_options). 0 means default. */
public final class TrainingOptions {
  /** Seed of the loss gradients; 0 means 1. */
  public double lossScale;
  /** > 0 replaces the optimizer's base learning rate; 0: the model's. */
  public double lr;
  /** The train net's {@link NetOptions}.MEMORY_*; DEFAULT (0) is SHARE. Since 0.6. */
  public int memory;
  /** DP_LOSS_SCALING_*: off. Since 0.6. */
  public static final int LOSS_SCALING_NONE = 0;
  /**
   * Dynamic loss scaling, which {@link NetOptions#MATH_FP16} needs: the gradients of the loss times a
   * scale, unscaled before the updates; a step whose gradients overflowed is skipped and the scale
   * halved (dp.h). Its state ("optimizer/loss_scale", "optimizer/loss_scale_good_steps") belongs in
   * checkpoints. Since 0.6.
   */
  public static final int LOSS_SCALING_DYNAMIC = 1;
  /** LOSS_SCALING_*. Since 0.6. */
  public int lossScaling;
  /** Its first scale; 0: 65536 (2^16). Since 0.6. */
  public double initialLossScale;

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

  public TrainingOptions lossScaling(int v) {
    lossScaling = v;
    return this;
  }
}
