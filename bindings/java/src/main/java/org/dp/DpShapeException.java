package org.dp;

/** DP_ERR_SHAPE: a tensor shape mismatch. */
public class DpShapeException extends DpException {
  private static final long serialVersionUID = 1L;

  public DpShapeException(String message) {
    super(SHAPE, message);
  }
}
