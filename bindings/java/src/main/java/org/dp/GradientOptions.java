package org.dp;

import java.util.Arrays;
import java.util.List;

/** Options of {@link NetDef#addGradients} (dp_gradient_options). {@link #losses} is required. */
public final class GradientOptions {
  /** The loss blobs (at least one). */
  public List<String> losses;
  /** Blobs to differentiate with respect to; null: every external input. */
  public List<String> wrt;
  /** Blobs through which no gradient flows; may be null. */
  public List<String> stop;
  /** Seed of the loss gradients; 0 means 1. */
  public double lossScale;
  /** The net made: {@link NetOptions}.MEMORY_*; DEFAULT (0) is SHARE. Since 0.6. */
  public int memory;

  public GradientOptions losses(String... v) {
    losses = Arrays.asList(v);
    return this;
  }

  public GradientOptions wrt(String... v) {
    wrt = Arrays.asList(v);
    return this;
  }

  public GradientOptions stop(String... v) {
    stop = Arrays.asList(v);
    return this;
  }

  public GradientOptions lossScale(double v) {
    lossScale = v;
    return this;
  }

  public GradientOptions memory(int v) {
    memory = v;
    return this;
  }
}
