package org.dp;

/** DP_ERR_DATA_LOSS: corrupted or truncated data. */
public class DpDataLossException extends DpException {
  private static final long serialVersionUID = 1L;

  public DpDataLossException(String message) {
    super(DATA_LOSS, message);
  }
}
