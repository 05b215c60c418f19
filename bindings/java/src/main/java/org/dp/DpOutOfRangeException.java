package org.dp;

/** DP_ERR_OUT_OF_RANGE: an index or value out of range. */
public class DpOutOfRangeException extends DpException {
  private static final long serialVersionUID = 1L;

  public DpOutOfRangeException(String message) {
    super(OUT_OF_RANGE, message);
  }
}
