package org.dp;

/** DP_ERR_DTYPE: a tensor element type mismatch. */
public class DpDtypeException extends DpException {
  private static final long serialVersionUID = 1L;

  public DpDtypeException(String message) {
    super(DTYPE, message);
  }
}
