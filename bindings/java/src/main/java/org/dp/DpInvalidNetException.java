package org.dp;

/** DP_ERR_INVALID_NET: a net that fails validation against the op schemas. */
public class DpInvalidNetException extends DpException {
  private static final long serialVersionUID = 1L;

  public DpInvalidNetException(String message) {
    super(INVALID_NET, message);
  }
}
