package org.dp;

/** DP_ERR_INTERNAL: a bug in dp (please report it). */
public class DpInternalException extends DpException {
  private static final long serialVersionUID = 1L;

  public DpInternalException(String message) {
    super(INTERNAL, message);
  }
}
