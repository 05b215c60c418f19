package org.dp;

/**
 * What a checkpoint holds, read from its header (dp_checkpoint_info). Immutable: any thread.
 */
public final class CheckpointInfo extends NativeHandle {
  private CheckpointInfo(long ptr) {
    super("CheckpointInfo", ptr, Native::checkpointInfoFree);
  }

  /** Reads and verifies the header of path. */
  public static CheckpointInfo fromFile(String path) {
    return new CheckpointInfo(Native.checkpointInfoFromFile(Native.z("CheckpointInfo.fromFile: path", path)));
  }

  /** The dp version that wrote the file. */
  public String dpVersion() {
    long p = acquire();
    try {
      return Native.checkpointInfoDpVersion(p);
    } finally {
      release();
    }
  }

  public String modelName() {
    long p = acquire();
    try {
      return Native.checkpointInfoModelName(p);
    } finally {
      release();
    }
  }

  /** The recorded iteration; -1 when unknown. */
  public long iteration() {
    long p = acquire();
    try {
      return Native.checkpointInfoIteration(p);
    } finally {
      release();
    }
  }

  public int numTensors() {
    long p = acquire();
    try {
      return (int) Native.checkpointInfoNumTensors(p);
    } finally {
      release();
    }
  }

  private void check(int i) {
    if (i < 0 || i >= numTensors()) throw new IndexOutOfBoundsException("tensor " + i);
  }

  public String tensorName(int i) {
    check(i);
    long p = acquire();
    try {
      return Native.checkpointInfoTensorName(p, i);
    } finally {
      release();
    }
  }

  public DType tensorDtype(int i) {
    check(i);
    long p = acquire();
    try {
      return DType.of(Native.checkpointInfoTensorDtype(p, i));
    } finally {
      release();
    }
  }

  public int tensorNdim(int i) {
    check(i);
    long p = acquire();
    try {
      return (int) Native.checkpointInfoTensorNdim(p, i);
    } finally {
      release();
    }
  }

  public long[] tensorDims(int i) {
    check(i);
    long p = acquire();
    try {
      return Native.checkpointInfoTensorDims(p, i);
    } finally {
      release();
    }
  }

  public long tensorNbytes(int i) {
    check(i);
    long p = acquire();
    try {
      return Native.checkpointInfoTensorNbytes(p, i);
    } finally {
      release();
    }
  }
}
