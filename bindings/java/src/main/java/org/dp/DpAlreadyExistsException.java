package org.dp;

/** DP_ERR_ALREADY_EXISTS: something that should not exist yet does. */
public class DpAlreadyExistsException extends DpException {
  private static final long serialVersionUID = 1L;

  public DpAlreadyExistsException(String message) {
    super(ALREADY_EXISTS, message);
  }
}
