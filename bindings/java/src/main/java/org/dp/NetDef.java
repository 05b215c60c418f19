package org.dp;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A parsed and validated net definition (dp_netdef). Immutable: every method may be called from
 * many threads at once. Its {@link OpDef} and {@link ArgDef} views are valid until it is closed.
 */
public final class NetDef extends NativeHandle {
  NetDef(long ptr) {
    super("NetDef", ptr, Native::netdefFree);
  }

  /** From a binary FlatBuffer (identifier "DPNT"); the bytes are only read during the call. */
  public static NetDef fromBuffer(byte[] data) {
    return new NetDef(Native.netdefFromBuffer(data));
  }

  /** From JSON text. */
  public static NetDef fromJson(String json) {
    return new NetDef(Native.netdefFromJson(json == null ? null : json.getBytes(StandardCharsets.UTF_8)));
  }

  /** From a file holding either form. */
  public static NetDef fromFile(String path) {
    return new NetDef(Native.netdefFromFile(Native.z("NetDef.fromFile: path", path)));
  }

  /** The binary FlatBuffer form. */
  public byte[] toBuffer() {
    long p = acquire();
    try {
      return Native.netdefToBuffer(p);
    } finally {
      release();
    }
  }

  public String toJson() {
    long p = acquire();
    try {
      return new String(Native.netdefToJson(p), StandardCharsets.UTF_8);
    } finally {
      release();
    }
  }

  /** Ops and blob dependencies as Graphviz DOT. */
  public String toDot() {
    long p = acquire();
    try {
      return new String(Native.netdefToDot(p), StandardCharsets.UTF_8);
    } finally {
      release();
    }
  }

  public String name() {
    long p = acquire();
    try {
      return Native.netdefName(p);
    } finally {
      release();
    }
  }

  public int numOps() {
    long p = acquire();
    try {
      return (int) Native.netdefNumOps(p);
    } finally {
      release();
    }
  }

  public List<String> externalInputs() {
    long p = acquire();
    try {
      return Arrays.asList(Native.netdefExternalInputs(p));
    } finally {
      release();
    }
  }

  public List<String> externalOutputs() {
    long p = acquire();
    try {
      return Arrays.asList(Native.netdefExternalOutputs(p));
    } finally {
      release();
    }
  }

  /** Default device of ops that set none ({@link Dp#DEVICE_CPU} unless the definition says otherwise). */
  public int deviceType() {
    long p = acquire();
    try {
      return Native.netdefDeviceType(p);
    } finally {
      release();
    }
  }

  public int deviceId() {
    long p = acquire();
    try {
      return Native.netdefDeviceId(p);
    } finally {
      release();
    }
  }

  /** The executor the definition asks for ({@link NetOptions#EXECUTOR_DEFAULT} ...). */
  public int executor() {
    long p = acquire();
    try {
      return Native.netdefExecutor(p);
    } finally {
      release();
    }
  }

  public int numWorkers() {
    long p = acquire();
    try {
      return Native.netdefNumWorkers(p);
    } finally {
      release();
    }
  }

  /**
   * The memory mode the definition asks for ({@link NetOptions}.MEMORY_*; SHARE for the builders' train nets).
   * Since 0.6.
   */
  public int memory() {
    long p = acquire();
    try {
      return Native.netdefMemory(p);
    } finally {
      release();
    }
  }

  /** Op i in run order; {@link IndexOutOfBoundsException} when out of range. */
  public OpDef op(int i) {
    long p = acquire();
    try {
      long op = Native.netdefOp(p, i);
      if (op == 0) throw new IndexOutOfBoundsException("op " + i);
      return new OpDef(this, op);
    } finally {
      release();
    }
  }

  public List<OpDef> ops() {
    int n = numOps();
    List<OpDef> out = new ArrayList<>(n);
    for (int i = 0; i < n; ++i) out.add(op(i));
    return out;
  }

  /** This definition followed by the gradient ops (dp_netdef_add_gradients). */
  public Gradients addGradients(GradientOptions options) {
    if (options == null) throw new NullPointerException("options (losses are required)");
    long p = acquire();
    try {
      Object[] map = new Object[1];
      long def = Native.netdefAddGradients(p, Native.z("NetDef.addGradients: losses", options.losses),
          Native.z("NetDef.addGradients: wrt", options.wrt), Native.z("NetDef.addGradients: stop", options.stop),
          options.lossScale, options.memory, map);
      return new Gradients(new NetDef(def), (String[]) map[0]);
    } finally {
      release();
    }
  }

  /** Runs body with the address held open (for the views). */
  long acquireView() {
    return acquire();
  }

  void releaseView() {
    release();
  }
}
