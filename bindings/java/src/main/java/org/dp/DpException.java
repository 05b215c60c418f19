package org.dp;

/**
 * A failed dp call: the status's stable {@link #code()} (one of the {@code DP_ERR_*} values of
 * dp.h, also {@link #codeName()}) and its message, which names the op, blob or file concerned.
 * Each code has its own subclass (for example {@link DpNotFoundException}); codes newer than this
 * binding arrive as a plain {@code DpException}. The native status is freed before this is thrown.
 */
public class DpException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public static final int INVALID_ARGUMENT = 1;
  public static final int NOT_FOUND = 2;
  public static final int ALREADY_EXISTS = 3;
  public static final int OUT_OF_RANGE = 4;
  public static final int UNIMPLEMENTED = 5;
  public static final int INTERNAL = 6;
  public static final int UNAVAILABLE = 7;
  public static final int CANCELLED = 8;
  public static final int TIMEOUT = 9;
  public static final int DATA_LOSS = 10;
  public static final int OUT_OF_MEMORY = 11;
  public static final int FAILED_PRECONDITION = 12;
  public static final int IO = 13;
  public static final int PARSE = 14;
  public static final int INVALID_NET = 15;
  public static final int SHAPE = 16;
  public static final int DTYPE = 17;

  private final int code;

  public DpException(int code, String message) {
    super("[" + Dp.statusCodeName(code) + "] " + message);
    this.code = code;
  }

  /** The stable DP_ERR_* code. */
  public int code() {
    return code;
  }

  /** The code's name, e.g. "NOT_FOUND". */
  public String codeName() {
    return Dp.statusCodeName(code);
  }

  /** Called by the JNI glue (cached in JNI_OnLoad): the subclass of a code. */
  static DpException of(int code, String message) {
    switch (code) {
      case INVALID_ARGUMENT: return new DpInvalidArgumentException(message);
      case NOT_FOUND: return new DpNotFoundException(message);
      case ALREADY_EXISTS: return new DpAlreadyExistsException(message);
      case OUT_OF_RANGE: return new DpOutOfRangeException(message);
      case UNIMPLEMENTED: return new DpUnimplementedException(message);
      case INTERNAL: return new DpInternalException(message);
      case UNAVAILABLE: return new DpUnavailableException(message);
      case CANCELLED: return new DpCancelledException(message);
      case TIMEOUT: return new DpTimeoutException(message);
      case DATA_LOSS: return new DpDataLossException(message);
      case OUT_OF_MEMORY: return new DpOutOfMemoryException(message);
      case FAILED_PRECONDITION: return new DpFailedPreconditionException(message);
      case IO: return new DpIoException(message);
      case PARSE: return new DpParseException(message);
      case INVALID_NET: return new DpInvalidNetException(message);
      case SHAPE: return new DpShapeException(message);
      case DTYPE: return new DpDtypeException(message);
      default: return new DpException(code, message);
    }
  }
}
