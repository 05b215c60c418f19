package org.dp;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

/**
 * A model definition (dp_model): init net, forward net, blob lists and optimizer. Immutable: every
 * method may be called from any thread, concurrently.
 */
public final class Model extends NativeHandle {
  public static final int PARAMS = 0;
  public static final int COMPUTED_PARAMS = 1;
  public static final int INPUTS = 2;
  public static final int LOSSES = 3;
  public static final int METRICS = 4;

  public static final int INIT_NET = 0;
  public static final int FORWARD_NET = 1;

  private Model(long ptr) {
    super("Model", ptr, Native::modelFree);
  }

  /** From a binary FlatBuffer (identifier "DPMD"). */
  public static Model fromBuffer(byte[] data) {
    return new Model(Native.modelFromBuffer(data));
  }

  public static Model fromJson(String json) {
    return new Model(Native.modelFromJson(json == null ? null : json.getBytes(StandardCharsets.UTF_8)));
  }

  /** From a file holding either form. */
  public static Model fromFile(String path) {
    return new Model(Native.modelFromFile(Native.z("Model.fromFile: path", path)));
  }

  /**
   * From an ONNX model (a serialised ModelProto; opsets 9 to 17): its initializers become the init
   * net, its nodes the forward net, all named as in the graph (dp_model_from_onnx_buffer). options
   * may be null (defaults). Throws {@link DpParseException} for bytes that are not an ONNX model,
   * {@link DpUnimplementedException} for what dp cannot import (and in a build without ONNX, {@link
   * BuildInfo#onnx} false), {@link DpInvalidNetException} for a graph that breaks ONNX's rules.
   * Since 0.6.
   */
  public static Model fromOnnx(byte[] data, OnnxImportOptions options) {
    boolean has = options != null;
    OptimizerInfo o = has ? options.optimizer : null;
    return new Model(Native.modelFromOnnxBuffer(data, has, has ? options.head : 0,
        has ? Native.z("Model.fromOnnx: labels", options.labels) : null, o != null,
        o != null ? Native.z("Model.fromOnnx: optimizer type", o.type) : null,
        o != null ? Native.z("Model.fromOnnx: optimizer lrPolicy", o.lrPolicy) : null,
        o != null ? o.doubles() : null, o != null ? o.longs() : null));
  }

  /**
   * From a file holding an ONNX model (see {@link #fromOnnx}; {@link DpNotFoundException} and
   * {@link DpIoException} for a file that is missing or unreadable). Since 0.6.
   */
  public static Model fromOnnxFile(String path, OnnxImportOptions options) {
    boolean has = options != null;
    OptimizerInfo o = has ? options.optimizer : null;
    return new Model(Native.modelFromOnnxFile(Native.z("Model.fromOnnxFile: path", path), has,
        has ? options.head : 0, has ? Native.z("Model.fromOnnxFile: labels", options.labels) : null, o != null,
        o != null ? Native.z("Model.fromOnnxFile: optimizer type", o.type) : null,
        o != null ? Native.z("Model.fromOnnxFile: optimizer lrPolicy", o.lrPolicy) : null,
        o != null ? o.doubles() : null, o != null ? o.longs() : null));
  }

  /**
   * The model's inference net ({@link #buildInference} with the options' outputs, unfused) as an
   * ONNX model, with the params it reads from the workspace as initializers (dp_model_to_onnx).
   * The workspace must hold an example batch of each model input the net reads (its dtype and dims
   * give the graph input's, the first dim named "N"): run the init net and feed a batch first; not
   * while a net that writes the params runs on it. options may be null (defaults). Throws {@link
   * DpNotFoundException} for a param or input the workspace does not hold, {@link
   * DpUnimplementedException} listing every op without an ONNX form, {@link
   * DpInvalidArgumentException} for an opset outside 11..17. Since 0.6.
   */
  public byte[] toOnnx(Workspace workspace, OnnxExportOptions options) {
    long p = acquire();
    try {
      long ws = acquireOrNull(workspace);
      try {
        boolean has = options != null;
        return Native.modelToOnnx(p, ws, has, has ? options.opset : 0,
            has && options.outputs != null && !options.outputs.isEmpty()
                ? Native.z("Model.toOnnx: output", options.outputs) : null,
            has ? Native.z("Model.toOnnx: paramPrefix", options.paramPrefix) : null);
      } finally {
        releaseOrNull(workspace);
      }
    } finally {
      release();
    }
  }

  /**
   * {@link #toOnnx}'s model written to path atomically (a temporary file beside it, renamed over
   * it; dp_model_save_onnx): {@link DpIoException} naming the file when it cannot be written, and
   * then nothing is left at path that was not there before. Since 0.6.
   */
  public void saveOnnx(Workspace workspace, String path, OnnxExportOptions options) {
    long p = acquire();
    try {
      long ws = acquireOrNull(workspace);
      try {
        boolean has = options != null;
        Native.modelSaveOnnx(p, ws, has, has ? options.opset : 0,
            has && options.outputs != null && !options.outputs.isEmpty()
                ? Native.z("Model.saveOnnx: output", options.outputs) : null,
            has ? Native.z("Model.saveOnnx: paramPrefix", options.paramPrefix) : null,
            Native.z("Model.saveOnnx: path", path));
      } finally {
        releaseOrNull(workspace);
      }
    } finally {
      release();
    }
  }

  public String toJson() {
    long p = acquire();
    try {
      return new String(Native.modelToJson(p), StandardCharsets.UTF_8);
    } finally {
      release();
    }
  }

  public byte[] toBuffer() {
    long p = acquire();
    try {
      return Native.modelToBuffer(p);
    } finally {
      release();
    }
  }

  /** One of the blob lists: {@link #PARAMS}, {@link #COMPUTED_PARAMS}, {@link #INPUTS}, ... */
  public List<String> blobs(int which) {
    long p = acquire();
    try {
      return Arrays.asList(Native.modelBlobs(p, which));
    } finally {
      release();
    }
  }

  /** The model's name, "" when unnamed. */
  public String name() {
    long p = acquire();
    try {
      return Native.modelName(p);
    } finally {
      release();
    }
  }

  /** The model's {@link #INIT_NET} or {@link #FORWARD_NET} as a new NetDef (close it). */
  public NetDef net(int which) {
    long p = acquire();
    try {
      return new NetDef(Native.modelNet(p, which));
    } finally {
      release();
    }
  }

  public boolean hasOptimizer() {
    long p = acquire();
    try {
      return Native.modelHasOptimizer(p);
    } finally {
      release();
    }
  }

  /** The optimizer; {@link DpNotFoundException} when the model has none. */
  public OptimizerInfo optimizer() {
    long p = acquire();
    try {
      String[] s = new String[2];
      double[] d = new double[9];
      long[] l = new long[4];
      Native.modelGetOptimizer(p, s, d, l);
      return new OptimizerInfo(s, d, l);
    } finally {
      release();
    }
  }

  /** The nets that train the model on one device (dp_model_build_training); options may be null. */
  public TrainingNets buildTraining(TrainingOptions options) {
    long p = acquire();
    try {
      long[] out = new long[3];
      boolean has = options != null;
      Native.modelBuildTraining(p, has, has ? options.lossScale : 0, has ? options.lr : 0, has ? options.memory : 0,
          has ? options.lossScaling : 0, has ? options.initialLossScale : 0, out);
      return new TrainingNets(out);
    } finally {
      release();
    }
  }

  /**
   * The inference net (dp_model_build_inference): the forward ops that {@code outputs} need, in
   * inference mode, without losses, metrics or labels; null or empty asks for the default outputs
   * (the blobs the losses and metrics are computed from: "logits", "softmax"). It reads the params
   * under the model's names: run it in a workspace holding them, e.g. one per serving thread, each
   * fed the same param tensors ({@link Workspace#fetch} from the trained workspace, then {@link
   * Workspace#feed}: shared, not copied). options may be null. {@link DpNotFoundException} names an
   * output the forward net does not write.
   */
  public NetDef buildInference(List<String> outputs, InferenceOptions options) {
    long p = acquire();
    try {
      boolean has = options != null;
      byte[][] names = outputs == null || outputs.isEmpty() ? null : Native.z("Model.buildInference: output", outputs);
      return new NetDef(Native.modelBuildInference(p, names, has, has && options.noFuse ? 1 : 0));
    } finally {
      release();
    }
  }

  /** Data-parallel training over the devices of options (dp_model_parallelize); null: one CPU replica. */
  public ParallelModel parallelize(ParallelOptions o) {
    if (o == null) o = new ParallelOptions();
    final int sharedModel = o.sharedModelAuto ? ParallelOptions.SHARED_MODEL_AUTO
        : o.sharedModel ? ParallelOptions.SHARED_MODEL_ON : ParallelOptions.SHARED_MODEL_OFF;
    long p = acquire();
    try {
      return new ParallelModel(Native.modelParallelize(p, o.deviceType, o.deviceIds, o.firstBucketBytes,
          o.bucketBytes, o.unevenSplit ? 1 : 0, o.noFuse ? 1 : 0, o.lr, o.accumulateSteps, o.bmuf ? 1 : 0,
          o.bmufBlockLr, o.bmufBlockMomentum, o.bmufNoNesterov ? 1 : 0, o.bmufBlockLength, o.computedParams,
          o.cudaCollectives, sharedModel, o.syncBn ? 1 : 0, o.shardId, o.numShards,
          Native.z("Model.parallelize: ParallelOptions.store", o.store), o.timeoutMs,
          Native.z("Model.parallelize: ParallelOptions.networkInterface", o.networkInterface),
          Native.z("Model.parallelize: ParallelOptions.runId", o.runId),
          Native.z("Model.parallelize: ParallelOptions.localTransport", o.localTransport), o.memory,
          o.gradientCompression, o.shardOptimizerState ? 1 : 0, o.lossScaling, o.initialLossScale));
    } finally {
      release();
    }
  }

  /** The blobs holding the training state (dp_model_checkpoint_blobs). */
  public List<String> checkpointBlobs() {
    long p = acquire();
    try {
      return Arrays.asList(Native.modelCheckpointBlobs(p));
    } finally {
      release();
    }
  }
}
