package org.dp;

/** DP_ERR_FAILED_PRECONDITION: the call is not valid in this state. */
public class DpFailedPreconditionException extends DpException {
  private static final long serialVersionUID = 1L;

  public DpFailedPreconditionException(String message) {
    super(FAILED_PRECONDITION, message);
  }
}
