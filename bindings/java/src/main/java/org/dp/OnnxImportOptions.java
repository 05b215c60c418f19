package org.dp;

/**
 * Options of {@link Model#fromOnnx} and {@link Model#fromOnnxFile} (dp_onnx_import_options). Every
 * field 0 / null means its default: the graph as it is, no optimizer. Since 0.6.
 */
public final class OnnxImportOptions {
  /** {@link #head}: the graph as it is, a model that serves (no loss). */
  public static final int HEAD_NONE = 0;
  /**
   * {@link #head}: the graph's first output is logits [N, classes]: adds SoftmaxWithLoss against
   * int32 labels (a new model input, {@link #labels}) writing "softmax" and the loss "loss", and
   * Accuracy writing the metric "accuracy" (each name suffixed "_1", ... if the graph has it).
   */
  public static final int HEAD_SOFTMAX_CROSS_ENTROPY = 1;

  /** HEAD_*. */
  public int head;
  /** The head's labels input; null or "": "label". */
  public String labels;
  /**
   * The model's optimizer, read during the call (e.g. another model's {@link Model#optimizer});
   * null: none, so the model serves but {@link Model#buildTraining} refuses it. Its type is
   * required; any other field that is 0 (null or "" for lrPolicy) takes the model format's default
   * (lr 0.01, momentum 0.9, beta2 0.999, "fixed", ...).
   */
  public OptimizerInfo optimizer;

  public OnnxImportOptions head(int v) {
    head = v;
    return this;
  }

  public OnnxImportOptions labels(String v) {
    labels = v;
    return this;
  }

  public OnnxImportOptions optimizer(OptimizerInfo v) {
    optimizer = v;
    return this;
  }
}
