package org.dp;

/** DP_ERR_NOT_FOUND: a missing blob, file or op kernel input. */
public class DpNotFoundException extends DpException {
  private static final long serialVersionUID = 1L;

  public DpNotFoundException(String message) {
    super(NOT_FOUND, message);
  }
}
