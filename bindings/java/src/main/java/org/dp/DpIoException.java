package org.dp;

/** DP_ERR_IO: a file system error. */
public class DpIoException extends DpException {
  private static final long serialVersionUID = 1L;

  public DpIoException(String message) {
    super(IO, message);
  }
}
