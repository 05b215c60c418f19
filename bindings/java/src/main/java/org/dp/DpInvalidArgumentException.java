package org.dp;

/** DP_ERR_INVALID_ARGUMENT: a bad argument (a null handle or string, a bad value). */
public class DpInvalidArgumentException extends DpException {
  private static final long serialVersionUID = 1L;

  public DpInvalidArgumentException(String message) {
    super(INVALID_ARGUMENT, message);
  }
}
