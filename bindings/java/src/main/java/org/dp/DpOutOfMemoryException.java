package org.dp;

/** DP_ERR_OUT_OF_MEMORY: the device, or a workspace's max_bytes, refused memory. */
public class DpOutOfMemoryException extends DpException {
  private static final long serialVersionUID = 1L;

  public DpOutOfMemoryException(String message) {
    super(OUT_OF_MEMORY, message);
  }
}
