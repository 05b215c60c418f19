package org.dp;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What an operator type accepts, from the op catalogue (dp_opschema_*, since 0.6): inputs,
 * outputs, arguments with their kinds and defaults, in-place rules, the devices with a kernel for
 * it and its gradient. {@link #of} copies a type's schema into this immutable object (the native
 * handle is freed before it returns), so it may be shared between threads freely.
 */
public final class OpSchema {
  /** DP_INPLACE_ALLOWED: the output may name the input's blob. */
  public static final int INPLACE_ALLOWED = 1;
  /** DP_INPLACE_ENFORCED: the output must name the input's blob. */
  public static final int INPLACE_ENFORCED = 2;

  /** DP_GRADIENT_UNDECLARED: nothing registered (gradient ops themselves). */
  public static final int GRADIENT_UNDECLARED = 0;
  /** DP_GRADIENT_DIFFERENTIABLE. */
  public static final int GRADIENT_DIFFERENTIABLE = 1;
  /** DP_GRADIENT_NOT_DIFFERENTIABLE: a loss may not depend on a param through it. */
  public static final int GRADIENT_NOT_DIFFERENTIABLE = 2;
  /** DP_GRADIENT_STOP: stops gradients on purpose (StopGradient, fills). */
  public static final int GRADIENT_STOP = 3;

  static {
    Native.load();
  }

  /** An argument an op type accepts. */
  public static final class Arg {
    private final String name;
    private final int kind;
    private final String doc;
    private final boolean required;
    private final Object defaultValue;
    private final String defaultText;

    Arg(String name, int kind, String doc, boolean required, Object defaultValue, String defaultText) {
      this.name = name;
      this.kind = kind;
      this.doc = doc;
      this.required = required;
      this.defaultValue = defaultValue;
      this.defaultText = defaultText;
    }

    public String name() {
      return name;
    }

    /** One of the kind constants of {@link ArgDef} (a FLOAT argument also takes an INT value). */
    public int kind() {
      return kind;
    }

    public String doc() {
      return doc;
    }

    public boolean required() {
      return required;
    }

    /**
     * The value the kernel uses when an op leaves the argument out, by kind: Double, Long, String,
     * double[], long[] or String[] (a copy); null when the argument is required or its default is
     * not one value ({@link #defaultText} describes it then).
     */
    public Object defaultValue() {
      if (defaultValue instanceof double[]) return ((double[]) defaultValue).clone();
      if (defaultValue instanceof long[]) return ((long[]) defaultValue).clone();
      if (defaultValue instanceof String[]) return ((String[]) defaultValue).clone();
      return defaultValue;
    }

    /** The default as text: the value as JSON ("0.9", "\"fixed\"", "[]") or a description. */
    public String defaultText() {
      return defaultText;
    }
  }

  /** An in-place rule: {@link #output()} may (or must) name the blob of {@link #input()}. */
  public static final class InplacePair {
    private final int input;
    private final int output;
    private final int rule;

    InplacePair(int input, int output, int rule) {
      this.input = input;
      this.output = output;
      this.rule = rule;
    }

    public int input() {
      return input;
    }

    public int output() {
      return output;
    }

    /** {@link #INPLACE_ALLOWED} or {@link #INPLACE_ENFORCED}. */
    public int rule() {
      return rule;
    }
  }

  private final String type;
  private final String doc;
  private final int minInputs, maxInputs, minOutputs, maxOutputs, inplaceShift, gradient;
  private final List<String> inputNames, outputNames;
  private final List<Arg> args;
  private final List<InplacePair> inplace;
  private final Map<Integer, List<String>> engines;  // device type -> engines, for devices with a kernel

  private OpSchema(long h) {
    type = Native.opschemaType(h);
    doc = Native.opschemaDoc(h);
    int[] counts = new int[6];
    Native.opschemaCounts(h, counts);
    minInputs = counts[0];
    maxInputs = counts[1];
    minOutputs = counts[2];
    maxOutputs = counts[3];
    inplaceShift = counts[4];
    gradient = counts[5];
    inputNames = Collections.unmodifiableList(Arrays.asList(Native.opschemaInputNames(h)));
    outputNames = Collections.unmodifiableList(Arrays.asList(Native.opschemaOutputNames(h)));
    List<Arg> a = new ArrayList<>();
    long n = Native.opschemaNumArgs(h);
    for (long i = 0; i < n; ++i) {
      String[] s = new String[3];
      Native.opschemaArgStrings(h, i, s);
      a.add(new Arg(s[0], Native.opschemaArgKind(h, i), s[1], Native.opschemaArgRequired(h, i),
          defaultValue(Native.opschemaArgDefault(h, i)), s[2]));
    }
    args = Collections.unmodifiableList(a);
    List<InplacePair> p = new ArrayList<>();
    long np = Native.opschemaNumInplace(h);
    for (long i = 0; i < np; ++i) {
      int[] v = new int[3];
      Native.opschemaInplaceAt(h, i, v);
      p.add(new InplacePair(v[0], v[1], v[2]));
    }
    inplace = Collections.unmodifiableList(p);
    Map<Integer, List<String>> e = new LinkedHashMap<>();
    for (int device : new int[] {Dp.DEVICE_CPU, Dp.DEVICE_CUDA}) {
      if (Native.opschemaHasKernel(h, device)) {
        e.put(device, Collections.unmodifiableList(Arrays.asList(Native.opschemaEngines(h, device))));
      }
    }
    engines = Collections.unmodifiableMap(e);
  }

  /** A default's value through the dp_argdef glue; null for none. */
  private static Object defaultValue(long arg) {
    if (arg == 0) return null;
    switch (Native.argdefKind(arg)) {
      case ArgDef.FLOAT:
        return Native.argdefGetFloat(arg);
      case ArgDef.INT:
        return Native.argdefGetInt(arg);
      case ArgDef.STRING:
        return Native.argdefGetString(arg);
      case ArgDef.FLOATS:
        return Native.argdefGetFloats(arg);
      case ArgDef.INTS:
        return Native.argdefGetInts(arg);
      case ArgDef.STRINGS: {
        String[] v = new String[(int) Native.argdefNumValues(arg)];
        for (int i = 0; i < v.length; ++i) v[i] = Native.argdefGetStringAt(arg, i);
        return v;
      }
      default:
        throw new DpInternalException("an argument default of kind " + Native.argdefKind(arg));
    }
  }

  /** Every operator type this library knows (gradient ops included), sorted. */
  public static List<String> types() {
    return Collections.unmodifiableList(Arrays.asList(Native.opschemaListTypes()));
  }

  /**
   * The schema of {@code type} (case-sensitive: "Relu"). Throws {@link DpNotFoundException} for an
   * unknown type, naming the nearest known one ("did you mean 'Relu'?"), and {@link
   * DpInvalidArgumentException} for null or a type containing a NUL character.
   */
  public static OpSchema of(String type) {
    long h = Native.opschemaFromType(Native.z("OpSchema.of: op type", type));
    try {
      return new OpSchema(h);
    } finally {
      Native.opschemaFree(h);
    }
  }

  public String type() {
    return type;
  }

  /** What the op computes. */
  public String doc() {
    return doc;
  }

  public int minInputs() {
    return minInputs;
  }

  /** {@link Integer#MAX_VALUE} when there is no limit. */
  public int maxInputs() {
    return maxInputs;
  }

  public int minOutputs() {
    return minOutputs;
  }

  public int maxOutputs() {
    return maxOutputs;
  }

  /** The names of the leading inputs ("X", "W", "b"). */
  public List<String> inputNames() {
    return inputNames;
  }

  public List<String> outputNames() {
    return outputNames;
  }

  public List<Arg> args() {
    return args;
  }

  /** The argument named {@code name}, or null. */
  public Arg arg(String name) {
    for (Arg a : args) {
      if (a.name.equals(name)) return a;
    }
    return null;
  }

  /** Pairs that may or must name the same blob, enforced ones first. */
  public List<InplacePair> inplace() {
    return inplace;
  }

  /** -1, or s &gt;= 0 when every output k must be written in place of input k + s. */
  public int inplaceShift() {
    return inplaceShift;
  }

  /** Whether this library has a kernel for the type on {@code deviceType} (Dp.DEVICE_*). */
  public boolean hasKernel(int deviceType) {
    return engines.containsKey(deviceType);
  }

  /** The engines (kernel variants) registered on {@code deviceType}; empty when none or no kernel. */
  public List<String> engines(int deviceType) {
    return engines.getOrDefault(deviceType, Collections.emptyList());
  }

  /** One of the GRADIENT_* constants. */
  public int gradient() {
    return gradient;
  }
}
