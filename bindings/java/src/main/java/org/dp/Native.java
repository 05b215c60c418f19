package org.dp;

import java.nio.ByteBuffer;

/**
 * The JNI entry points, one per use of a dp.h function (see src/main/c). Handles are passed as
 * {@code long} addresses that the public classes guard; strings go in as NUL-terminated UTF-8
 * {@code byte[]} (see {@link #z}) because JNI's own string functions use modified UTF-8.
 * A failed dp call throws the {@link DpException} subclass of its status.
 */
final class Native {
  private Native() {}

  static {
    // -Ddp.jni.library=/path/libdp_jni.so wins; else java.library.path.
    String path = System.getProperty("dp.jni.library");
    if (path != null && !path.isEmpty()) {
      System.load(path);
    } else {
      System.loadLibrary("dp_jni");
    }
  }

  /** Makes sure the library is loaded (class initialisation does it). */
  static void load() {}

  /**
   * A string as the NUL-terminated UTF-8 bytes C reads (null stays null, which dp refuses where it
   * needs a value). C reads up to the first NUL, so a string holding U+0000 would reach dp as a
   * shorter name or path (another blob, another file): it is refused with a
   * DpInvalidArgumentException naming the argument ({@code what}, e.g. "Workspace.feed: blob
   * name"), as the Go and Rust bindings refuse it. Every string passed to C goes through here.
   */
  static byte[] z(String what, String s) {
    if (s == null) return null;
    if (s.indexOf('\u0000') >= 0) {
      throw new DpInvalidArgumentException(
          what + " contains a NUL byte: \"" + s.replace("\u0000", "\\0") + "\"");
    }
    byte[] b = s.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    return java.util.Arrays.copyOf(b, b.length + 1);
  }

  static byte[][] z(String what, java.util.List<String> list) {
    if (list == null) return null;
    byte[][] out = new byte[list.size()][];
    for (int i = 0; i < out.length; ++i) out[i] = z(what, list.get(i));
    return out;
  }

  // --- jni_status.c ---------------------------------------------------------
  static native String version();
  static native int versionNumber();
  static native String statusCodeName(int code);
  static native int deviceCount(int deviceType);
  static native void buildInfo(String[] strings, int[] ints);
  /** values: allocated, peak, reserved, raw_allocs, raw_frees. */
  static native void deviceMemoryStats(int deviceType, int deviceId, long[] values);

  static native void resetPeakMemory(int deviceType, int deviceId);
  static native long dtypeSize(int dtype);
  static native void setCpuThreads(int maxThreads);
  static native int cpuThreads();

  // --- jni_log.c ------------------------------------------------------------
  static native void logSetCallback(boolean enabled, int minLevel);

  // --- jni_tensor.c ---------------------------------------------------------
  static native long tensorCreateArray(int dtype, long[] dims, Object array, long nbytes);
  /** mode 0: copy, 1: borrowed, 2: owned (a global reference keeps the buffer until dp lets go). */
  static native long tensorCreateDirect(int dtype, long[] dims, ByteBuffer buffer, long offset, long nbytes,
      int mode);
  static native long tensorFromIdxFile(byte[] path);
  static native int tensorDtype(long t);
  static native long tensorNdim(long t);
  static native long[] tensorDims(long t);
  static native long tensorNumel(long t);
  static native long tensorNbytes(long t);
  static native ByteBuffer tensorData(long t);
  static native void tensorCopyToArray(long t, Object array, long nbytes);
  static native void tensorCopyToDirect(long t, ByteBuffer buffer, long offset, long nbytes);
  static native void tensorFree(long t);
  /** Owned tensors over direct buffers whose deleter has not run yet (for tests). */
  static native long liveOwnedBuffers();

  // --- jni_workspace.c ------------------------------------------------------
  static native long workspaceCreate();
  static native long workspaceCreateWithOptions(boolean hasOptions, long maxBytes);
  static native void workspaceFree(long ws);
  static native void workspaceFeed(long ws, byte[] name, long tensor);
  static native long workspaceFetch(long ws, byte[] name);
  static native boolean workspaceHasBlob(long ws, byte[] name);
  static native String[] workspaceListBlobs(long ws, byte[] prefix);

  // --- jni_netdef.c ---------------------------------------------------------
  static native long netdefFromBuffer(byte[] data);
  static native long netdefFromJson(byte[] json);
  static native long netdefFromFile(byte[] path);
  static native byte[] netdefToBuffer(long def);
  static native byte[] netdefToJson(long def);
  static native byte[] netdefToDot(long def);
  static native String netdefName(long def);
  static native long netdefNumOps(long def);
  static native void netdefFree(long def);
  static native String[] netdefExternalInputs(long def);
  static native String[] netdefExternalOutputs(long def);
  static native int netdefDeviceType(long def);
  static native int netdefDeviceId(long def);
  static native int netdefExecutor(long def);
  static native int netdefNumWorkers(long def);
  static native int netdefMemory(long def);
  static native long netdefOp(long def, long i);
  static native long netdefAddGradients(long def, byte[][] losses, byte[][] wrt, byte[][] stop, double lossScale,
      int memory, Object[] gradMapOut);

  // --- jni_introspect.c -----------------------------------------------------
  static native String opdefType(long op);
  static native String opdefName(long op);
  static native String opdefEngine(long op);
  static native String[] opdefInputs(long op);
  static native String[] opdefOutputs(long op);
  static native String[] opdefControlInputs(long op);
  static native int opdefDeviceType(long op);
  static native int opdefDeviceId(long op);
  static native long opdefNumArgs(long op);
  static native long opdefArg(long op, long i);
  static native long opdefFindArg(long op, byte[] name);
  static native String argdefName(long arg);
  static native int argdefKind(long arg);
  static native long argdefNumValues(long arg);
  static native double argdefGetFloat(long arg);
  static native long argdefGetInt(long arg);
  static native String argdefGetString(long arg);
  static native double[] argdefGetFloats(long arg);
  static native long[] argdefGetInts(long arg);
  static native String argdefGetStringAt(long arg, long i);
  static native long argdefGetNet(long arg);
  static native long argdefGetNetAt(long arg, long i);

  // --- jni_opschema.c (since 0.6) -------------------------------------------
  static native String[] opschemaListTypes();
  static native long opschemaFromType(byte[] type);
  static native void opschemaFree(long schema);
  static native String opschemaType(long schema);
  static native String opschemaDoc(long schema);
  /** {min inputs, max inputs, min outputs, max outputs, in-place shift, gradient}. */
  static native void opschemaCounts(long schema, int[] out);
  static native String[] opschemaInputNames(long schema);
  static native String[] opschemaOutputNames(long schema);
  static native long opschemaNumArgs(long schema);
  /** {name, doc, default text} of argument i. */
  static native void opschemaArgStrings(long schema, long i, String[] out);
  static native int opschemaArgKind(long schema, long i);
  static native boolean opschemaArgRequired(long schema, long i);
  static native long opschemaArgDefault(long schema, long i);
  static native long opschemaNumInplace(long schema);
  /** {input, output, rule} of pair i. */
  static native void opschemaInplaceAt(long schema, long i, int[] out);
  static native boolean opschemaHasKernel(long schema, int deviceType);
  static native String[] opschemaEngines(long schema, int deviceType);

  // --- jni_net.c ------------------------------------------------------------
  static native long netCreate(long ws, long def, boolean hasOptions, int executor, int numWorkers,
      int streamsPerGpu, int profile, int unreadFeedError, int memory, int cudaGraphs, int mathMode);
  static native void netRun(long net);
  static native void netRunAsync(long net);
  static native boolean netWait(long net, long timeoutMs);
  static native void netCancel(long net);
  static native byte[] netTraceJson(long net);
  static native void netMemoryStats(long net, int deviceType, int deviceId, long[] values);
  static native byte[] netToDot(long net);
  static native void netFree(long net);

  // --- jni_model.c ----------------------------------------------------------
  static native long modelFromBuffer(byte[] data);
  static native long modelFromJson(byte[] json);
  static native long modelFromFile(byte[] path);
  static native byte[] modelToJson(long model);
  static native byte[] modelToBuffer(long model);
  static native String[] modelBlobs(long model, int which);
  static native void modelFree(long model);
  static native String modelName(long model);
  static native long modelNet(long model, int which);
  static native boolean modelHasOptimizer(long model);
  static native void modelGetOptimizer(long model, String[] strings, double[] doubles, long[] longs);
  static native void modelBuildTraining(long model, boolean hasOptions, double lossScale, double lr, int memory,
      int lossScaling, double initialLossScale, long[] out);

  static native long modelBuildInference(long model, byte[][] outputs, boolean hasOptions, int noFuse);
  static native String[] modelCheckpointBlobs(long model);

  // --- jni_onnx.c -----------------------------------------------------------
  // The optimizer as modelGetOptimizer gives it: doubles lr, momentum, beta1, beta2, epsilon,
  // weight_decay, gamma, power, warmup_start_factor; longs nesterov, stepsize, max_iter,
  // warmup_iters.
  static native long modelFromOnnxBuffer(byte[] data, boolean hasOptions, int head, byte[] labels,
      boolean hasOptimizer, byte[] optimizerType, byte[] lrPolicy, double[] optimizerDoubles, long[] optimizerLongs);
  static native long modelFromOnnxFile(byte[] path, boolean hasOptions, int head, byte[] labels,
      boolean hasOptimizer, byte[] optimizerType, byte[] lrPolicy, double[] optimizerDoubles, long[] optimizerLongs);
  static native byte[] modelToOnnx(long model, long ws, boolean hasOptions, int opset, byte[][] outputs,
      byte[] paramPrefix);
  static native void modelSaveOnnx(long model, long ws, boolean hasOptions, int opset, byte[][] outputs,
      byte[] paramPrefix, byte[] path);

  // --- jni_parallel.c -------------------------------------------------------
  static native long modelParallelize(long model, int deviceType, int[] deviceIds, long firstBucketBytes,
      long bucketBytes, int unevenSplit, int noFuse, double lr, int accumulateSteps, int bmuf,
      double bmufBlockLr, double bmufBlockMomentum, int bmufNoNesterov, int bmufBlockLength,
      int computedParams, int cudaCollectives, int sharedModel, int syncBn, int shardId, int numShards,
      byte[] store, long timeoutMs, byte[] networkInterface, byte[] runId, byte[] localTransport, int memory,
      int gradientCompression, int shardOptimizerState, int lossScaling, double initialLossScale);
  static native void parallelModelNets(long pm, long[] out);
  static native long parallelModelAccumulateNet(long pm);
  static native long parallelModelBlockNet(long pm, int[] outBlockLength);
  static native long parallelModelSyncNet(long pm);
  static native void parallelModelSync(long pm, long ws);
  static native long parallelModelNumReplicas(long pm);
  static native int parallelModelNumShards(long pm);
  static native int parallelModelShardId(long pm);
  static native long parallelModelJoin(long pm, long ws);
  static native String parallelModelScope(long pm, long i);
  static native void parallelModelFree(long pm);
  static native void parallelModelSave(long pm, long ws, byte[] path, boolean hasOptions, byte[] modelName,
      long iteration, double asyncWriteShare);
  static native void parallelModelLoad(long pm, long ws, byte[] path, boolean hasOptions, byte[][] names,
      int lenient, int noVerify, int mmap);

  // --- jni_checkpoint.c -----------------------------------------------------
  static native void checkpointSave(long ws, byte[][] names, byte[] path, boolean hasOptions, byte[] modelName,
      long iteration, double asyncWriteShare);
  static native long checkpointSaveAsync(long ws, byte[][] names, byte[] path, boolean hasOptions,
      byte[] modelName, long iteration, double asyncWriteShare);
  static native boolean checkpointWait(long job, long timeoutMs);
  static native void checkpointJobFree(long job);
  static native void checkpointLoad(long ws, byte[] path, boolean hasOptions, byte[][] names, int lenient,
      int noVerify, int mmap);
  static native long checkpointInfoFromFile(byte[] path);
  static native String checkpointInfoDpVersion(long info);
  static native String checkpointInfoModelName(long info);
  static native long checkpointInfoIteration(long info);
  static native long checkpointInfoNumTensors(long info);
  static native String checkpointInfoTensorName(long info, long i);
  static native int checkpointInfoTensorDtype(long info, long i);
  static native long checkpointInfoTensorNdim(long info, long i);
  static native long[] checkpointInfoTensorDims(long info, long i);
  static native long checkpointInfoTensorNbytes(long info, long i);
  static native void checkpointInfoFree(long info);
  static native String[] checkpointListSteps(byte[] dir);
  static native void checkpointPrune(byte[] dir, int keep);

  // --- jni_loader.c ---------------------------------------------------------
  static native long loaderCreate(long ws, byte[][] blobs, long[] tensors, boolean hasOptions, long batchSize,
      long seed, int noShuffle, int keepLast, int numShards, int shardId, int prefetch, int timeoutMs,
      int deviceType, int deviceId, int hostDataset);
  /** fill is kept through a JNI global reference until {@link #loaderFree}. */
  static native long loaderCreateCallback(long ws, byte[][] blobs, int[] dtypes, long[][] sampleDims,
      long numSamples, Loader.Fill fill, boolean hasOptions, long batchSize, long seed, int noShuffle,
      int keepLast, int numShards, int shardId, int prefetch, int timeoutMs, int deviceType, int deviceId,
      int hostDataset);
  static native boolean loaderNext(long loader);
  static native void loaderSeek(long loader, long epoch, long step);
  static native long loaderStepsPerEpoch(long loader);
  static native long loaderEpoch(long loader);
  static native long loaderStep(long loader);
  static native long loaderBatchRows(long loader);
  static native void loaderFree(long loader);
}
