package org.dp;

/** DP_ERR_PARSE: malformed FlatBuffer or JSON. */
public class DpParseException extends DpException {
  private static final long serialVersionUID = 1L;

  public DpParseException(String message) {
    super(PARSE, message);
  }
}
