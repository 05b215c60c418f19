package org.dp;

/** A model's optimizer (dp_optimizer_info), with the model format's defaults filled in. */
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
