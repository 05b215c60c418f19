package org.dp;

/** DP_ERR_UNAVAILABLE: a device or feature that is not present. */
public class DpUnavailableException extends DpException {
  private static final long serialVersionUID = 1L;

  public DpUnavailableException(String message) {
    super(UNAVAILABLE, message);
  }
}
