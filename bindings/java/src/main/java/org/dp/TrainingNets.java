package org.dp;

/**
 * The init, train and eval definitions of {@link Model#buildTraining} or
 * {@link ParallelModel#nets}; all three run in one workspace. Owns them: close closes all three.
 */
public final class TrainingNets implements AutoCloseable {
  /** Run once: params, optimizer state, iteration counter. */
  public final NetDef init;
  /** One step per batch. */
  public final NetDef train;
  /** The forward net in inference mode. */
  public final NetDef eval;

  TrainingNets(long[] defs) {
    NetDef i = null, t = null;
    try {
      i = new NetDef(defs[0]);
      t = new NetDef(defs[1]);
      eval = new NetDef(defs[2]);
    } catch (RuntimeException e) {
      if (i != null) i.close();
      if (t != null) t.close();
      throw e;
    }
    init = i;
    train = t;
  }

  @Override
  public void close() {
    init.close();
    train.close();
    eval.close();
  }
}
