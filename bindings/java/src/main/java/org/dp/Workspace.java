package org.dp;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Named blobs that nets read and write (dp_workspace). {@link #feed}, {@link #fetch},
 * {@link #hasBlob} and {@link #listBlobs} may be called from any number of threads at once, on the
 * same blob or on different ones, also while nets that only read those blobs run; a blob that a
 * running net reads must not be fed, nor one that it writes fed or fetched (see dp.h). The native
 * workspace lives until it is closed and every {@link Net} created in it is closed (nets keep it
 * alive).
 */
public final class Workspace extends NativeHandle {
  /** Borrowed buffers fed into blobs, kept reachable while a blob may still point at them. */
  final ConcurrentHashMap<String, Object> borrowed = new ConcurrentHashMap<>();

  private Workspace(long ptr) {
    super("Workspace", ptr, Native::workspaceFree);
  }

  /** A workspace with default options (dp_workspace_create). */
  public static Workspace create() {
    return new Workspace(Native.workspaceCreate());
  }

  /** A workspace with options; null means defaults (dp_workspace_create_with_options). */
  public static Workspace create(WorkspaceOptions options) {
    return new Workspace(
        Native.workspaceCreateWithOptions(options != null, options != null ? options.maxBytes : 0));
  }

  /**
   * Makes blob {@code name} share the tensor's memory (no copy). The tensor may be closed at once.
   * A borrowed tensor's buffer is kept reachable by this workspace until the blob is fed again.
   */
  public void feed(String name, Tensor tensor) {
    byte[] cname = Native.z("Workspace.feed: blob name", name);
    long p = acquire();
    try {
      long t = acquireOrNull(tensor);
      try {
        if (name == null) {
          Native.workspaceFeed(p, cname, t); // dp refuses it
        } else {
          // One feed of a name at a time (compute holds the key), so that the buffer kept is the
          // one the blob holds when threads feed the same blob at once.
          borrowed.compute(name, (k, old) -> {
            Native.workspaceFeed(p, cname, t);
            return tensor != null ? tensor.borrowed : null;
          });
        }
      } finally {
        releaseOrNull(tensor);
      }
    } finally {
      release();
    }
  }

  /** Feeds a float32 copy of data. */
  public void feed(String name, float[] data, long... dims) {
    try (Tensor t = Tensor.of(data, dims)) {
      feed(name, t);
    }
  }

  /** Feeds an int32 copy of data. */
  public void feed(String name, int[] data, long... dims) {
    try (Tensor t = Tensor.of(data, dims)) {
      feed(name, t);
    }
  }

  /** The tensor in blob {@code name}, without copying; close it when done. Later runs do not change it. */
  public Tensor fetch(String name) {
    byte[] cname = Native.z("Workspace.fetch: blob name", name);
    long p = acquire();
    try {
      if (name == null) return new Tensor(Native.workspaceFetch(p, cname), null); // dp refuses it
      // One at a time with the feeds of this name, so that a tensor fetched from a blob fed with a
      // borrowed buffer keeps that buffer reachable, however soon another thread feeds the blob.
      long[] fetched = new long[1];
      Object[] keep = new Object[1];
      borrowed.compute(name, (k, held) -> {
        fetched[0] = Native.workspaceFetch(p, cname);
        keep[0] = held;
        return held;
      });
      return new Tensor(fetched[0], (java.nio.ByteBuffer) keep[0]);
    } finally {
      release();
    }
  }

  /** A float32 blob's elements, copied. */
  public float[] fetchFloats(String name) {
    try (Tensor t = fetch(name)) {
      return t.toFloatArray();
    }
  }

  /** True if the blob exists and holds something. */
  public boolean hasBlob(String name) {
    long p = acquire();
    try {
      return Native.workspaceHasBlob(p, Native.z("Workspace.hasBlob: blob name", name));
    } finally {
      release();
    }
  }

  /** Sorted names of the non-empty blobs starting with prefix (null or "" for all). */
  public List<String> listBlobs(String prefix) {
    long p = acquire();
    try {
      return Arrays.asList(Native.workspaceListBlobs(p, Native.z("Workspace.listBlobs: prefix", prefix)));
    } finally {
      release();
    }
  }

  public List<String> listBlobs() {
    return listBlobs(null);
  }
}
