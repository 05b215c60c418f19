package org.dp;

/**
 * A model's optimizer (dp_optimizer_info): read from a model ({@link Model#optimizer}, with the
 * model format's defaults filled in), or made to give an imported model one ({@link
 * OnnxImportOptions#optimizer}). Immutable.
 */
public final class OptimizerInfo {
  /** "sgd", "momentum", "adam" or "adagrad". */
  public final String type;
  public final double lr;
  public final double momentum;
  public final boolean nesterov;
  public final double beta1;
  public final double beta2;
  public final double epsilon;
  public final double weightDecay;
  /** "fixed", "step", "exp", "inv" or "cosine". */
  public final String lrPolicy;
  public final double gamma;
  public final long stepsize;
  public final double power;
  public final long maxIter;
  public final long warmupIters;
  public final double warmupStartFactor;

  /**
   * An optimizer with every field given, in dp_optimizer_info's order (since 0.6). type: "sgd",
   * "momentum", "adam" or "adagrad"; lrPolicy: "fixed", "step", "exp", "inv" or "cosine" (null or
   * "": "fixed"). As {@link OnnxImportOptions#optimizer}, a value of 0 takes the model format's
   * default.
   */
  public OptimizerInfo(String type, double lr, double momentum, boolean nesterov, double beta1, double beta2,
      double epsilon, double weightDecay, String lrPolicy, double gamma, long stepsize, double power, long maxIter,
      long warmupIters, double warmupStartFactor) {
    this.type = type;
    this.lr = lr;
    this.momentum = momentum;
    this.nesterov = nesterov;
    this.beta1 = beta1;
    this.beta2 = beta2;
    this.epsilon = epsilon;
    this.weightDecay = weightDecay;
    this.lrPolicy = lrPolicy;
    this.gamma = gamma;
    this.stepsize = stepsize;
    this.power = power;
    this.maxIter = maxIter;
    this.warmupIters = warmupIters;
    this.warmupStartFactor = warmupStartFactor;
  }

  /** The doubles as the JNI glue takes them (see jni_model.c's modelGetOptimizer). */
  double[] doubles() {
    return new double[] {lr, momentum, beta1, beta2, epsilon, weightDecay, gamma, power, warmupStartFactor};
  }

  /** The integers as the JNI glue takes them: nesterov, stepsize, maxIter, warmupIters. */
  long[] longs() {
    return new long[] {nesterov ? 1 : 0, stepsize, maxIter, warmupIters};
  }

  OptimizerInfo(String[] s, double[] d, long[] l) {
    type = s[0];
    lrPolicy = s[1];
    lr = d[0];
    momentum = d[1];
    beta1 = d[2];
    beta2 = d[3];
    epsilon = d[4];
    weightDecay = d[5];
    gamma = d[6];
    power = d[7];
    warmupStartFactor = d[8];
    nesterov = l[0] != 0;
    stepsize = l[1];
    maxIter = l[2];
    warmupIters = l[3];
  }
}
