package org.dp;

/** DP_ERR_UNIMPLEMENTED: a feature or format version dp does not implement. */
public class DpUnimplementedException extends DpException {
  private static final long serialVersionUID = 1L;

  public DpUnimplementedException(String message) {
    super(UNIMPLEMENTED, message);
  }
}
