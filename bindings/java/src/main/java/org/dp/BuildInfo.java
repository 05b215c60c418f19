package org.dp;

/** How the loaded library was built (dp_build_info). Immutable. */
public final class BuildInfo {
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
  }

  @Override
  public String toString() {
    return "dp " + version + " (" + buildType + ", " + compiler + ", " + blas + (cuda ? ", CUDA " + cudaArchs : "")
        + ")";
  }
}
