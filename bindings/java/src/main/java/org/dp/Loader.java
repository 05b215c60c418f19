package org.dp;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/**
 * dp's input pipeline (dp_loader, since 0.5): feeds a workspace one batch per step from tensors
 * held in memory ({@link #create}) or from a {@link LoaderCallback} that writes samples into memory
 * the loader provides ({@link #createCallback}). It shuffles every epoch with a permutation that
 * depends only on the seed and the epoch (the same seed gives the same order in every run and
 * every process, and {@link #seek} resumes mid-run exactly), and gathers the next batches on its
 * own thread while the current step runs.
 *
 * <p>Threads: {@link #next} and {@link #seek} are serialised by the binding; call {@code next}
 * between runs of the nets that read the blobs. The native loader keeps its workspace alive.
 * {@link #close} stops the loader's thread (after the batch it is filling); batches already fed
 * stay in their blobs.
 */
public final class Loader extends NativeHandle {
  /** Keeps the Java workspace reachable, as a {@link Net} does. */
  private final Workspace workspace;
  private final String[] blobs;
  /** Borrowed dataset buffers ({@link Tensor#borrow}), kept reachable while the loader reads them. */
  private final List<ByteBuffer> borrowed;
  /** The callback's holder (null for tensor loaders); the native side holds a global reference. */
  private final Fill fill;
  private final Object order = new Object();

  /** What the native side calls on the loader's thread: the callback, and what it last threw. */
  static final class Fill {
    private final LoaderCallback callback;
    volatile Throwable error;

    Fill(LoaderCallback callback) {
      this.callback = callback;
    }

    /** Called by the JNI glue. Never throws. */
    int run(long[] indices, ByteBuffer[] buffers) {
      try {
        for (ByteBuffer b : buffers) b.order(ByteOrder.nativeOrder());
        return callback.fill(indices, buffers);
      } catch (Throwable t) {
        if (error == null) error = t;
        return -1;
      }
    }
  }

  private Loader(long ptr, Workspace workspace, String[] blobs, List<ByteBuffer> borrowed, Fill fill) {
    super("Loader", ptr, Native::loaderFree);
    this.workspace = workspace;
    this.blobs = blobs;
    this.borrowed = borrowed;
    this.fill = fill;
  }

  /**
   * A loader over tensors (dp_loader_create): input i is {@code tensors.get(i)}, whose dim 0
   * indexes the samples (all share it), fed to blob {@code blobs.get(i)} as a batch of shape
   * [rows, dims[1:]...]. The loader shares the tensors' memory (no copy) and the tensors may be
   * closed at once; a borrowed tensor's buffer ({@link Tensor#borrow}) is kept reachable by the
   * loader and must stay unchanged until it is closed. Throws {@link DpShapeException} when the
   * tensors' dim 0 differ, {@link DpInvalidArgumentException} for bad options (null included:
   * batchSize has no default) or blob names, or a dataset with no (full) batch.
   */
  public static Loader create(Workspace workspace, List<String> blobs, List<Tensor> tensors,
      LoaderOptions options) {
    if (blobs == null || tensors == null) throw new NullPointerException(blobs == null ? "blobs" : "tensors");
    if (blobs.size() != tensors.size()) {
      throw new IllegalArgumentException(blobs.size() + " blob names for " + tensors.size() + " tensors");
    }
    long ws = acquireOrNull(workspace);
    int acquired = 0;
    try {
      long[] t = new long[tensors.size()];
      List<ByteBuffer> keep = new ArrayList<>();
      for (; acquired < t.length; ++acquired) {
        Tensor x = tensors.get(acquired);
        t[acquired] = acquireOrNull(x);
        if (x != null && x.borrowed != null) keep.add(x.borrowed);
      }
      boolean has = options != null;
      long p = Native.loaderCreate(ws, Native.z("Loader.create: blob name", blobs), t, has, has ? options.batchSize : 0,
          has ? options.seed : 0, has && options.noShuffle ? 1 : 0, has && options.keepLast ? 1 : 0,
          has ? options.numShards : 0, has ? options.shardId : 0, has ? options.prefetch : 0,
          has ? options.timeoutMs : 0, has ? options.deviceType : 0, has ? options.deviceId : 0,
          has && options.hostDataset ? 1 : 0);
      return new Loader(p, workspace, blobs.toArray(new String[0]), keep, null);
    } finally {
      for (int i = acquired - 1; i >= 0; --i) releaseOrNull(tensors.get(i));
      releaseOrNull(workspace);
    }
  }

  /**
   * A loader over {@code numSamples} samples that {@code fill} writes
   * (dp_loader_create_callback), on the loader's own thread; see {@link LoaderCallback}. The
   * inputs are copied. Errors as {@link #create}.
   */
  public static Loader createCallback(Workspace workspace, List<LoaderInput> inputs, long numSamples,
      LoaderCallback fill, LoaderOptions options) {
    if (inputs == null || fill == null) throw new NullPointerException(inputs == null ? "inputs" : "fill");
    int n = inputs.size();
    byte[][] names = new byte[n][];
    String[] blobs = new String[n];
    int[] dtypes = new int[n];
    long[][] dims = new long[n][];
    for (int i = 0; i < n; ++i) {
      LoaderInput in = inputs.get(i);
      if (in == null) throw new NullPointerException("inputs[" + i + "]");
      blobs[i] = in.blob;
      names[i] = Native.z("Loader.create: LoaderInput.blob", in.blob);
      dtypes[i] = in.dtype == null ? 0 : in.dtype.code;
      dims[i] = in.sampleDims;
    }
    Fill holder = new Fill(fill);
    long ws = acquireOrNull(workspace);
    try {
      boolean has = options != null;
      long p = Native.loaderCreateCallback(ws, names, dtypes, dims, numSamples, holder, has,
          has ? options.batchSize : 0, has ? options.seed : 0, has && options.noShuffle ? 1 : 0,
          has && options.keepLast ? 1 : 0, has ? options.numShards : 0, has ? options.shardId : 0,
          has ? options.prefetch : 0, has ? options.timeoutMs : 0, has ? options.deviceType : 0,
          has ? options.deviceId : 0, has && options.hostDataset ? 1 : 0);
      return new Loader(p, workspace, blobs, new ArrayList<>(), holder);
    } finally {
      releaseOrNull(workspace);
    }
  }

  /** The workspace the loader feeds. */
  public Workspace workspace() {
    return workspace;
  }

  /**
   * Feeds the next batch of the epoch into the blobs (without copying) and returns true; at the
   * end of an epoch feeds nothing and returns false, once: the next call starts the next epoch
   * (dp_loader_next). Throws {@link DpTimeoutException} when the batch is not ready within
   * timeoutMs, and a failed fill's error (the same on every call until {@link #seek}).
   */
  public boolean next() {
    long p = acquire();
    try {
      synchronized (order) {
        boolean fed = Native.loaderNext(p);
        if (fed && workspace != null) {
          // The blobs hold the loader's batch now, no longer a borrowed buffer.
          for (String b : blobs) {
            if (b != null) workspace.borrowed.remove(b);
          }
        }
        return fed;
      }
    } catch (DpInternalException e) {
      Throwable t = fill != null ? fill.error : null;
      if (t != null && e.getCause() == null) e.initCause(t);
      throw e;
    } finally {
      release();
    }
  }

  /**
   * The next {@link #next} feeds step {@code step} of epoch {@code epoch} (both from 0, step &lt;
   * {@link #stepsPerEpoch}): after a checkpoint load, seek to its iteration to continue with
   * exactly the batches an uninterrupted run would have seen (dp_loader_seek). Throws
   * {@link DpOutOfRangeException} otherwise.
   */
  public void seek(long epoch, long step) {
    long p = acquire();
    try {
      synchronized (order) {
        Native.loaderSeek(p, epoch, step);
        if (fill != null) fill.error = null;
      }
    } finally {
      release();
    }
  }

  /** Batches per epoch. */
  public long stepsPerEpoch() {
    long p = acquire();
    try {
      return Native.loaderStepsPerEpoch(p);
    } finally {
      release();
    }
  }

  /** The epoch the next {@link #next} feeds from. */
  public long epoch() {
    long p = acquire();
    try {
      synchronized (order) {
        return Native.loaderEpoch(p);
      }
    } finally {
      release();
    }
  }

  /** The step of its epoch the next {@link #next} feeds. */
  public long step() {
    long p = acquire();
    try {
      synchronized (order) {
        return Native.loaderStep(p);
      }
    } finally {
      release();
    }
  }

  /** This process's samples per batch (batchSize / numShards). */
  public long batchRows() {
    long p = acquire();
    try {
      return Native.loaderBatchRows(p);
    } finally {
      release();
    }
  }
}
