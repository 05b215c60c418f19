package org.dp;

/** DP_ERR_CANCELLED: the run was cancelled. */
public class DpCancelledException extends DpException {
  private static final long serialVersionUID = 1L;

  public DpCancelledException(String message) {
    super(CANCELLED, message);
  }
}
