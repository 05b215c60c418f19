package org.dp;

import java.util.Arrays;
import java.util.List;

/**
 * Options of {@link Model#toOnnx} and {@link Model#saveOnnx} (dp_onnx_export_options). Every field
 * 0 / null means its default. Since 0.6.
 */
public final class OnnxExportOptions {
  /** The default domain's opset written, 11 to 17; 0: 13. */
  public int opset;
  /** The graph's outputs, as {@link Model#buildInference}'s; null or empty: its defaults. */
  public List<String> outputs;
  /**
   * Where the params are in the workspace: blob paramPrefix + name ("cpu_0/" for replica 0 of a
   * parallel model); null or "": the model's names.
   */
  public String paramPrefix;

  public OnnxExportOptions opset(int v) {
    opset = v;
    return this;
  }

  public OnnxExportOptions outputs(String... v) {
    outputs = Arrays.asList(v);
    return this;
  }

  public OnnxExportOptions paramPrefix(String v) {
    paramPrefix = v;
    return this;
  }
}
