package org.dp;

import java.nio.charset.StandardCharsets;

/**
 * A definition instantiated in a workspace, ready to run many times (dp_net).
 *
 * <p>Threads: runs of one net never overlap: {@link #run} or {@link #runAsync} while a run is in
 * progress throws {@link DpFailedPreconditionException}. {@link #await} from one thread at a time.
 * {@link #cancel} from any thread at any time. Different nets on the same workspace may run
 * concurrently only if they write disjoint blobs. {@link #close} waits for calls in progress;
 * closing a net with an async run not yet awaited cancels that run and waits for it first.
 */
public final class Net extends NativeHandle {
  /** Keeps the Java workspace (and the borrowed buffers it holds) reachable while the net lives. */
  private final Workspace workspace;
  private volatile boolean asyncPending;

  private Net(long ptr, Workspace workspace) {
    super("Net", ptr, Native::netFree);
    this.workspace = workspace;
  }

  /**
   * Creates a net in a workspace (dp_net_create); options may be null. The definition is copied
   * and may be closed afterwards; the net keeps the native workspace alive.
   */
  public static Net create(Workspace workspace, NetDef def, NetOptions options) {
    long ws = acquireOrNull(workspace);
    try {
      long d = acquireOrNull(def);
      try {
        boolean has = options != null;
        long p = Native.netCreate(ws, d, has, has ? options.executor : 0, has ? options.numWorkers : 0,
            has ? options.streamsPerGpu : 0, has && options.profile ? 1 : 0,
            has && options.unreadFeedError ? 1 : 0, has ? options.memory : 0,
            has ? options.cudaGraphs : 0, has ? options.mathMode : 0);
        return new Net(p, workspace);
      } finally {
        releaseOrNull(def);
      }
    } finally {
      releaseOrNull(workspace);
    }
  }

  public static Net create(Workspace workspace, NetDef def) {
    return create(workspace, def, null);
  }

  /** The workspace the net was created in. */
  public Workspace workspace() {
    return workspace;
  }

  /** Runs every op once (dp_net_run); throws {@link DpCancelledException} if cancelled. */
  public void run() {
    long p = acquire();
    try {
      Native.netRun(p);
    } finally {
      release();
    }
  }

  /** Starts a run; collect it with {@link #await}. */
  public void runAsync() {
    long p = acquire();
    try {
      Native.netRunAsync(p);
      asyncPending = true;
    } finally {
      release();
    }
  }

  /**
   * Waits up to timeoutMs (negative: no limit) for the run started by {@link #runAsync}: true when
   * it finished, false when it is still running; throws the run's error.
   */
  public boolean await(long timeoutMs) {
    long p = acquire();
    try {
      boolean done = false;
      try {
        done = Native.netWait(p, timeoutMs);
      } finally {
        if (done) asyncPending = false;
      }
      return done;
    } catch (DpException e) {
      if (!(e instanceof DpFailedPreconditionException)) asyncPending = false;
      throw e;
    } finally {
      release();
    }
  }

  /** Asks the current run to stop at the next op boundary; does nothing when none runs. */
  public void cancel() {
    long p = acquire();
    try {
      Native.netCancel(p);
    } finally {
      release();
    }
  }

  /** The last completed run as Chrome trace JSON (empty events unless created with profile). */
  public String traceJson() {
    long p = acquire();
    try {
      return new String(Native.netTraceJson(p), StandardCharsets.UTF_8);
    } finally {
      release();
    }
  }

  /**
   * The net's memory on device ({@code deviceType}, {@code deviceId}) after its last run
   * (dp_net_memory_stats); {@link DpFailedPreconditionException} while a run is in progress. Since
   * 0.6.
   */
  public NetMemoryStats memoryStats(int deviceType, int deviceId) {
    long p = acquire();
    try {
      long[] v = new long[6];
      Native.netMemoryStats(p, deviceType, deviceId, v);
      return new NetMemoryStats(v);
    } finally {
      release();
    }
  }

  /** Ops and dependencies as Graphviz DOT. */
  public String toDot() {
    long p = acquire();
    try {
      return new String(Native.netToDot(p), StandardCharsets.UTF_8);
    } finally {
      release();
    }
  }

  @Override
  void beforeFree(long p) {
    if (asyncPending) {
      Native.netCancel(p);
      try {
        Native.netWait(p, -1);
      } catch (DpException e) {
        // The run's own error (cancelled, most likely): nobody is waiting for it any more.
      }
      asyncPending = false;
    }
  }
}
