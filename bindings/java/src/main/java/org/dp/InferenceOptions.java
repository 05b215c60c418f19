package org.dp;

/** Options of {@link Model#buildInference} (dp_inference_options). false / 0 means default. */
public final class InferenceOptions {
  /** Keep FC and Relu separate; false (the default) fuses them, as the training nets do. */
  public boolean noFuse;

  public InferenceOptions noFuse(boolean v) {
    noFuse = v;
    return this;
  }
}
