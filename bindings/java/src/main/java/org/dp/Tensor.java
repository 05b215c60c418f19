package org.dp;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A dense, row-major tensor in host memory (dp_tensor). Its shape, dtype and contents never
 * change after creation, so a Tensor may be read from many threads at once; {@link #close()}
 * must not race with a use you still need (it waits for calls in progress, later ones throw
 * {@link IllegalStateException}).
 *
 * <p>Where the bytes come from:
 * <ul>
 *   <li>{@code of(...)} (Java arrays) and {@link #zeros}: copied. Heap arrays move under the GC,
 *       so dp cannot keep pointing at them.
 *   <li>{@link #copyOf(DType, ByteBuffer, long...)}: copied from a direct buffer.
 *   <li>{@link #wrap(DType, ByteBuffer, long...)}: zero-copy, dp takes a reference (dp_tensor_create_owned
 *       with a deleter that drops a JNI global reference): the buffer stays reachable for as long
 *       as dp needs it, this Tensor and every workspace blob fed from it included, whoever drops
 *       it last and on whichever thread. The buffer's bytes must not change meanwhile.
 *   <li>{@link #borrow(DType, ByteBuffer, long...)}: zero-copy (dp_tensor_create_borrowed). The
 *       Tensor keeps the buffer reachable, and so does a {@link Workspace} it is fed into (until the
 *       blob is fed again); the bytes must stay unchanged until the Tensor and every blob fed from
 *       it are gone. Prefer {@code wrap}, which needs no such care.
 * </ul>
 * Direct buffers give the bytes from their position to their limit; the data must be aligned to
 * the element size and in {@link ByteOrder#nativeOrder()}.
 */
public final class Tensor extends NativeHandle {
  /** Keeps a borrowed buffer reachable while dp reads it. */
  final ByteBuffer borrowed;

  Tensor(long ptr, ByteBuffer borrowed) {
    super("Tensor", ptr, Native::tensorFree);
    this.borrowed = borrowed;
  }

  private static Tensor fromArray(DType dtype, Object array, long nbytes, long[] dims) {
    return new Tensor(Native.tensorCreateArray(dtype.code, dims, array, nbytes), null);
  }

  /** A float32 tensor holding a copy of data. */
  public static Tensor of(float[] data, long... dims) {
    return fromArray(DType.FLOAT32, data, 4L * data.length, dims);
  }

  /** A float64 tensor holding a copy of data. */
  public static Tensor of(double[] data, long... dims) {
    return fromArray(DType.FLOAT64, data, 8L * data.length, dims);
  }

  /** An int32 tensor holding a copy of data. */
  public static Tensor of(int[] data, long... dims) {
    return fromArray(DType.INT32, data, 4L * data.length, dims);
  }

  /** An int64 tensor holding a copy of data. */
  public static Tensor of(long[] data, long... dims) {
    return fromArray(DType.INT64, data, 8L * data.length, dims);
  }

  /** A bool tensor holding a copy of data. */
  public static Tensor of(boolean[] data, long... dims) {
    return fromArray(DType.BOOL, data, data.length, dims);
  }

  /** A tensor of any one-byte or 16-bit dtype (UINT8, BOOL, FLOAT16, BFLOAT16) from raw bytes, copied. */
  public static Tensor of(DType dtype, byte[] data, long... dims) {
    return fromArray(dtype, data, data.length, dims);
  }

  /** A zero-filled tensor. */
  public static Tensor zeros(DType dtype, long... dims) {
    return fromArray(dtype, null, 0, dims);
  }

  private static Tensor fromDirect(DType dtype, ByteBuffer buf, long[] dims, int mode) {
    if (buf == null) throw new NullPointerException("buffer");
    long ptr = Native.tensorCreateDirect(dtype.code, dims, buf, buf.position(), buf.remaining(), mode);
    return new Tensor(ptr, mode == 1 ? buf : null);
  }

  /** A copy of a direct buffer's remaining bytes. */
  public static Tensor copyOf(DType dtype, ByteBuffer direct, long... dims) {
    return fromDirect(dtype, direct, dims, 0);
  }

  /** Zero-copy over a direct buffer that dp keeps reachable as long as it needs it (see above). */
  public static Tensor wrap(DType dtype, ByteBuffer direct, long... dims) {
    return fromDirect(dtype, direct, dims, 2);
  }

  /** Zero-copy over a direct buffer borrowed while this Tensor (or a Workspace fed from it) holds it. */
  public static Tensor borrow(DType dtype, ByteBuffer direct, long... dims) {
    return fromDirect(dtype, direct, dims, 1);
  }

  /** Reads an IDX (MNIST format) file, gzip-compressed or not (dp_tensor_from_idx_file). */
  public static Tensor fromIdxFile(String path) {
    return new Tensor(Native.tensorFromIdxFile(Native.z("Tensor.fromIdxFile: path", path)), null);
  }

  public DType dtype() {
    long p = acquire();
    try {
      return DType.of(Native.tensorDtype(p));
    } finally {
      release();
    }
  }

  public int ndim() {
    long p = acquire();
    try {
      return (int) Native.tensorNdim(p);
    } finally {
      release();
    }
  }

  /** The dimensions (empty for a scalar). */
  public long[] dims() {
    long p = acquire();
    try {
      return Native.tensorDims(p);
    } finally {
      release();
    }
  }

  public long numel() {
    long p = acquire();
    try {
      return Native.tensorNumel(p);
    } finally {
      release();
    }
  }

  public long nbytes() {
    long p = acquire();
    try {
      return Native.tensorNbytes(p);
    } finally {
      release();
    }
  }

  /**
   * A read-only, native-order view of the elements without copying (dp_tensor_data). It is valid
   * only while this Tensor is open: keep the Tensor reachable and unclosed while using the view
   * (reading it after close reads freed memory). Use {@link #copyTo} or the {@code to*Array}
   * methods for a copy that is always safe.
   */
  public ByteBuffer data() {
    long p = acquire();
    try {
      ByteBuffer b = Native.tensorData(p);
      if (b == null) b = ByteBuffer.allocateDirect(0);
      return b.asReadOnlyBuffer().order(ByteOrder.nativeOrder());
    } finally {
      release();
    }
  }

  /** Copies the elements into a direct buffer from its position (dp_tensor_copy_to). */
  public void copyTo(ByteBuffer direct) {
    long p = acquire();
    try {
      long n = Native.tensorNbytes(p);
      Native.tensorCopyToDirect(p, direct, direct.position(), n);
      direct.position(direct.position() + (int) n);
    } finally {
      release();
    }
  }

  private <A> A copyToArray(DType want, A array, long elemSize, int length) {
    long p = acquire();
    try {
      int have = Native.tensorDtype(p);
      if (have != want.code) {
        throw new DpDtypeException("tensor holds " + DType.of(have) + ", not " + want);
      }
      Native.tensorCopyToArray(p, array, elemSize * length);
      return array;
    } finally {
      release();
    }
  }

  private int count() {
    long n = numel();
    if (n > Integer.MAX_VALUE) throw new IllegalStateException("tensor too large for a Java array");
    return (int) n;
  }

  public float[] toFloatArray() {
    int n = count();
    return copyToArray(DType.FLOAT32, new float[n], 4, n);
  }

  public double[] toDoubleArray() {
    int n = count();
    return copyToArray(DType.FLOAT64, new double[n], 8, n);
  }

  public int[] toIntArray() {
    int n = count();
    return copyToArray(DType.INT32, new int[n], 4, n);
  }

  public long[] toLongArray() {
    int n = count();
    return copyToArray(DType.INT64, new long[n], 8, n);
  }

  /** The raw bytes of a tensor of any dtype. */
  public byte[] toByteArray() {
    long p = acquire();
    try {
      long n = Native.tensorNbytes(p);
      if (n > Integer.MAX_VALUE) throw new IllegalStateException("tensor too large for a Java array");
      byte[] out = new byte[(int) n];
      Native.tensorCopyToArray(p, out, n);
      return out;
    } finally {
      release();
    }
  }

  /** Owned tensors over direct buffers that dp still holds (diagnostics). */
  static long liveWrappedBuffers() {
    return Native.liveOwnedBuffers();
  }
}
