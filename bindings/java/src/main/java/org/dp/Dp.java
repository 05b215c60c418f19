package org.dp;

/**
 * Library-wide queries and settings of dp (dp.h: version, status code names, devices, the thread
 * budget, build info).
 * Every method may be called from any thread at any time.
 */
public final class Dp {
  private Dp() {}

  /** DP_DEVICE_CPU: CPU replicas are logical devices sharing the host. */
  public static final int DEVICE_CPU = 0;
  /** DP_DEVICE_CUDA. */
  public static final int DEVICE_CUDA = 1;
  /** DP_DEVICE_NONE: a device field that is not set. */
  public static final int DEVICE_NONE = -1;

  /** The dp version this binding was written against (DP_VERSION_NUMBER of dp.h 0.6.0). */
  public static final int BINDING_VERSION_NUMBER = 600;

  static {
    Native.load();
  }

  /** Version of the loaded library, e.g. "0.6.0". */
  public static String version() {
    return Native.version();
  }

  /** DP_VERSION_NUMBER of the loaded library (major*10000 + minor*100 + patch). */
  public static int versionNumber() {
    return Native.versionNumber();
  }

  /** Name of a status code ("INVALID_ARGUMENT"); "UNKNOWN" if unknown. */
  public static String statusCodeName(int code) {
    return Native.statusCodeName(code);
  }

  /**
   * Number of devices of a type ({@link #DEVICE_CPU} reports 1; CUDA 0 without GPUs, see {@link
   * BuildInfo#cudaState}). The first CUDA count loads dp's CUDA module.
   */
  public static int deviceCount(int deviceType) {
    return Native.deviceCount(deviceType);
  }

  /**
   * How the loaded library was built and what it found of CUDA (dp_build_info_get); loads dp's
   * CUDA module in a CUDA build.
   */
  public static BuildInfo buildInfo() {
    String[] s = new String[9];
    int[] i = new int[8];
    Native.buildInfo(s, i);
    return new BuildInfo(s, i);
  }

  /**
   * The memory statistics of device ({@code deviceType}, {@code deviceId}), e.g. ({@link
   * #DEVICE_CUDA}, 0) for cuda:0 (dp_device_memory_stats). Throws {@link
   * DpInvalidArgumentException} for an unknown type or a negative id, {@link
   * DpUnavailableException} for a CUDA device {@link #deviceCount} does not report. Any thread.
   * Since 0.6.
   */
  public static MemoryStats deviceMemoryStats(int deviceType, int deviceId) {
    long[] v = new long[5];
    Native.deviceMemoryStats(deviceType, deviceId, v);
    return new MemoryStats(v);
  }

  /**
   * Makes the device's peak its allocated bytes now (the device's, process wide:
   * dp_device_reset_peak_memory); the errors of {@link #deviceMemoryStats}. Since 0.6.
   */
  public static void resetPeakMemory(int deviceType, int deviceId) {
    Native.resetPeakMemory(deviceType, deviceId);
  }

  /**
   * Caps dp's compute threads at {@code maxThreads} (0: no cap, the default), process wide
   * (dp_set_cpu_threads, since 0.5): nets created afterwards size their worker pools from it, and
   * ops started afterwards split their work within it. Throws {@link DpInvalidArgumentException}
   * for a negative value.
   */
  public static void setCpuThreads(int maxThreads) {
    Native.setCpuThreads(maxThreads);
  }

  /**
   * The threads dp's compute uses now: the usable CPUs (affinity mask and cgroup quota), capped by
   * {@link #setCpuThreads}; at least 1 (dp_cpu_threads, since 0.5).
   */
  public static int cpuThreads() {
    return Native.cpuThreads();
  }

  /** Element size in bytes of a DP_DTYPE_* value; 0 when unknown. */
  public static long dtypeSize(int dtype) {
    return Native.dtypeSize(dtype);
  }
}
