package org.dp;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * An operator of a {@link NetDef} (dp_opdef): a borrowed, read-only view. It keeps its NetDef
 * reachable, and every call checks that the NetDef is still open ({@link IllegalStateException}
 * after it is closed). Any number of threads may read it at once.
 */
public final class OpDef {
  private final NetDef def;
  private final long op;

  OpDef(NetDef def, long op) {
    this.def = def;
    this.op = op;
  }

  /** The NetDef this view belongs to. */
  public NetDef netDef() {
    return def;
  }

  public String type() {
    def.acquireView();
    try {
      return Native.opdefType(op);
    } finally {
      def.releaseView();
    }
  }

  /** The op's name, "" when unnamed. */
  public String name() {
    def.acquireView();
    try {
      return Native.opdefName(op);
    } finally {
      def.releaseView();
    }
  }

  /** The kernel variant, "" for the default. */
  public String engine() {
    def.acquireView();
    try {
      return Native.opdefEngine(op);
    } finally {
      def.releaseView();
    }
  }

  public List<String> inputs() {
    def.acquireView();
    try {
      return Arrays.asList(Native.opdefInputs(op));
    } finally {
      def.releaseView();
    }
  }

  public List<String> outputs() {
    def.acquireView();
    try {
      return Arrays.asList(Native.opdefOutputs(op));
    } finally {
      def.releaseView();
    }
  }

  public List<String> controlInputs() {
    def.acquireView();
    try {
      return Arrays.asList(Native.opdefControlInputs(op));
    } finally {
      def.releaseView();
    }
  }

  /** The device the op sets, or {@link Dp#DEVICE_NONE} (it runs on its net's default device). */
  public int deviceType() {
    def.acquireView();
    try {
      return Native.opdefDeviceType(op);
    } finally {
      def.releaseView();
    }
  }

  public int deviceId() {
    def.acquireView();
    try {
      return Native.opdefDeviceId(op);
    } finally {
      def.releaseView();
    }
  }

  public int numArgs() {
    def.acquireView();
    try {
      return (int) Native.opdefNumArgs(op);
    } finally {
      def.releaseView();
    }
  }

  /** Argument i; {@link IndexOutOfBoundsException} when out of range. */
  public ArgDef arg(int i) {
    def.acquireView();
    try {
      long a = Native.opdefArg(op, i);
      if (a == 0) throw new IndexOutOfBoundsException("argument " + i);
      return new ArgDef(def, a);
    } finally {
      def.releaseView();
    }
  }

  /** The argument named name, or null when there is none (as for a name holding U+0000). */
  public ArgDef findArg(String name) {
    if (name != null && name.indexOf('\u0000') >= 0) return null;
    def.acquireView();
    try {
      long a = Native.opdefFindArg(op, Native.z("OpDef.findArg: name", name));
      return a == 0 ? null : new ArgDef(def, a);
    } finally {
      def.releaseView();
    }
  }

  public List<ArgDef> args() {
    int n = numArgs();
    List<ArgDef> out = new ArrayList<>(n);
    for (int i = 0; i < n; ++i) out.add(arg(i));
    return out;
  }
}
