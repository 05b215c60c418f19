package org.dp;

/** Tensor element types (DP_DTYPE_*). Elements are stored row-major in the platform's byte order. */
public enum DType {
  FLOAT32(1),
  FLOAT16(2),
  BFLOAT16(3),
  FLOAT64(4),
  INT32(5),
  INT64(6),
  UINT8(7),
  /** One byte per element, 0 or 1. */
  BOOL(8);

  /** The DP_DTYPE_* value. */
  public final int code;

  DType(int code) {
    this.code = code;
  }

  /** Element size in bytes (dp_dtype_size). */
  public long size() {
    return Dp.dtypeSize(code);
  }

  /** The DType of a DP_DTYPE_* value. */
  public static DType of(int code) {
    for (DType t : values()) {
      if (t.code == code) return t;
    }
    throw new IllegalArgumentException("unknown dtype " + code);
  }
}
