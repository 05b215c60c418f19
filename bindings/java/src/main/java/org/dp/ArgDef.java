package org.dp;

/**
 * An argument of an {@link OpDef} (dp_argdef): a borrowed view, valid while its {@link NetDef} is
 * open (calls after close throw {@link IllegalStateException}). Value getters of the wrong kind
 * throw {@link DpInvalidArgumentException} (kinds are never converted), an index past the end
 * {@link DpOutOfRangeException}.
 */
public final class ArgDef {
  public static final int FLOAT = 1;
  public static final int INT = 2;
  public static final int STRING = 3;
  public static final int FLOATS = 4;
  public static final int INTS = 5;
  public static final int STRINGS = 6;
  public static final int NET = 7;
  public static final int NETS = 8;

  private final NetDef def;
  private final long arg;

  ArgDef(NetDef def, long arg) {
    this.def = def;
    this.arg = arg;
  }

  public String name() {
    def.acquireView();
    try {
      return Native.argdefName(arg);
    } finally {
      def.releaseView();
    }
  }

  /** One of the kind constants of this class. */
  public int kind() {
    def.acquireView();
    try {
      return Native.argdefKind(arg);
    } finally {
      def.releaseView();
    }
  }

  /** Length of a list kind, 1 for scalar kinds. */
  public int numValues() {
    def.acquireView();
    try {
      return (int) Native.argdefNumValues(arg);
    } finally {
      def.releaseView();
    }
  }

  public double getFloat() {
    def.acquireView();
    try {
      return Native.argdefGetFloat(arg);
    } finally {
      def.releaseView();
    }
  }

  public long getInt() {
    def.acquireView();
    try {
      return Native.argdefGetInt(arg);
    } finally {
      def.releaseView();
    }
  }

  public String getString() {
    def.acquireView();
    try {
      return Native.argdefGetString(arg);
    } finally {
      def.releaseView();
    }
  }

  public double[] getFloats() {
    def.acquireView();
    try {
      return Native.argdefGetFloats(arg);
    } finally {
      def.releaseView();
    }
  }

  public long[] getInts() {
    def.acquireView();
    try {
      return Native.argdefGetInts(arg);
    } finally {
      def.releaseView();
    }
  }

  /** Element i of a STRINGS argument. */
  public String getStringAt(int i) {
    def.acquireView();
    try {
      return Native.argdefGetStringAt(arg, i);
    } finally {
      def.releaseView();
    }
  }

  /** The nested net of a NET argument: a new NetDef that may outlive this one (close it). */
  public NetDef getNet() {
    def.acquireView();
    try {
      return new NetDef(Native.argdefGetNet(arg));
    } finally {
      def.releaseView();
    }
  }

  /** Element i of a NETS argument, as a new NetDef (close it). */
  public NetDef getNetAt(int i) {
    def.acquireView();
    try {
      return new NetDef(Native.argdefGetNetAt(arg, i));
    } finally {
      def.releaseView();
    }
  }
}
