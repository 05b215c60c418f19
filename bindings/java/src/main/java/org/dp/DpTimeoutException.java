package org.dp;

/** DP_ERR_TIMEOUT: a wait ran out of time. */
public class DpTimeoutException extends DpException {
  private static final long serialVersionUID = 1L;

  public DpTimeoutException(String message) {
    super(TIMEOUT, message);
  }
}
