package org.dp;

/** How the loaded library was built and what it found of CUDA (dp_build_info). Immutable. */
public final class BuildInfo {
  /** {@link #cudaState}: dp was built without CUDA (DP_CUDA_STATE_*, since 0.6). */
  public static final int CUDA_STATE_NOT_BUILT = 0;
  /** At least one CUDA device is visible. */
  public static final int CUDA_STATE_AVAILABLE = 1;
  /** Built with CUDA, but libdp_cuda.so is not in dp/ beside libdp (nor at DP_CUDA_MODULE). */
  public static final int CUDA_STATE_MODULE_NOT_FOUND = 2;
  /** The module is there but a CUDA library it needs is missing. */
  public static final int CUDA_STATE_RUNTIME_MISSING = 3;
  /** The module belongs to another build of dp. */
  public static final int CUDA_STATE_MODULE_MISMATCH = 4;
  /** No CUDA driver, or one too old for the runtime. */
  public static final int CUDA_STATE_NO_DRIVER = 5;
  /** A driver, but no GPU visible. */
  public static final int CUDA_STATE_NO_DEVICE = 6;

  public final String version;
  /** True when built with CUDA. */
  public final boolean cuda;
  public final int cudaRuntimeVersion;
  /** The installed driver's CUDA version; 0 without a driver (or without CUDA). */
  public final int cudaDriverVersion;
  public final int cublasVersion;
  public final int ncclVersion;
  public final String cudaArchs;
  public final String blas;
  public final String blasConfig;
  public final String compiler;
  public final String buildType;
  /** Why CUDA devices are there or not: a CUDA_STATE_* value. Since 0.6. */
  public final int cudaState;
  /** The runtime version the CUDA module loaded; 0 when none. Since 0.6. */
  public final int cudaLoadedRuntimeVersion;
  /** One line saying what was found of CUDA. Since 0.6. */
  public final String cudaStateDetail;
  /** The CUDA module's path, loaded or looked for; "" without CUDA. Since 0.6. */
  public final String cudaModule;
  /**
   * True when built with ONNX import and export ({@link Model#fromOnnx} and the rest); false:
   * those throw {@link DpUnimplementedException}. Since 0.6.
   */
  public final boolean onnx;
  /** The ONNX library's version ("1.12.0"); "" without ONNX. Since 0.6. */
  public final String onnxVersion;

  BuildInfo(String[] s, int[] i) {
    version = s[0];
    cudaArchs = s[1];
    blas = s[2];
    blasConfig = s[3];
    compiler = s[4];
    buildType = s[5];
    cuda = i[0] != 0;
    cudaRuntimeVersion = i[1];
    cudaDriverVersion = i[2];
    cublasVersion = i[3];
    ncclVersion = i[4];
    cudaState = i[5];
    cudaLoadedRuntimeVersion = i[6];
    cudaStateDetail = s[6];
    cudaModule = s[7];
    onnxVersion = s[8];
    onnx = i[7] != 0;
  }

  @Override
  public String toString() {
    return "dp " + version + " (" + buildType + ", " + compiler + ", " + blas + (cuda ? ", CUDA " + cudaArchs : "")
        + ")";
  }
}
