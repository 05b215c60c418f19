package org.dp;

import java.util.Arrays;
import java.util.List;

/**
 * Checkpoint files (dp.h "Checkpoints"): atomic, checksummed saves of named blobs, loads, and
 * directories of step checkpoints ("step-000000937.dpckpt"). Every method may run on any thread,
 * but not while a net writes the blobs concerned (save) or runs on the workspace (load), and
 * {@link #prune} not concurrently with a save into the same directory.
 */
public final class Checkpoint {
  private Checkpoint() {}

  /** Saves blobs names (null: every blob holding a tensor) to path; options may be null. */
  public static void save(Workspace workspace, List<String> names, String path, CheckpointSaveOptions options) {
    long ws = NativeHandle.acquireOrNull(workspace);
    try {
      boolean has = options != null;
      Native.checkpointSave(ws, Native.z("Checkpoint.save: blob name", names), Native.z("Checkpoint.save: path", path),
          has, has ? Native.z("Checkpoint.save: modelName", options.modelName) : null,
          has ? options.iteration : 0, has ? options.asyncWriteShare : 0);
    } finally {
      NativeHandle.releaseOrNull(workspace);
    }
  }

  /**
   * Starts a background save of a copy-on-write snapshot of the blobs; wait for it with
   * {@link CheckpointJob#await}. Do not run a net on the workspace during this call (during the
   * write is fine).
   */
  public static CheckpointJob saveAsync(Workspace workspace, List<String> names, String path,
      CheckpointSaveOptions options) {
    long ws = NativeHandle.acquireOrNull(workspace);
    try {
      boolean has = options != null;
      return new CheckpointJob(Native.checkpointSaveAsync(ws, Native.z("Checkpoint.saveAsync: blob name", names),
          Native.z("Checkpoint.saveAsync: path", path), has,
          has ? Native.z("Checkpoint.saveAsync: modelName", options.modelName) : null, has ? options.iteration : 0,
          has ? options.asyncWriteShare : 0));
    } finally {
      NativeHandle.releaseOrNull(workspace);
    }
  }

  /** Loads tensors of path into workspace; on any error the workspace is as it was. */
  public static void load(Workspace workspace, String path, CheckpointLoadOptions options) {
    long ws = NativeHandle.acquireOrNull(workspace);
    try {
      boolean has = options != null;
      Native.checkpointLoad(ws, Native.z("Checkpoint.load: path", path), has,
          has ? Native.z("Checkpoint.load: names", options.names) : null,
          has && options.lenient ? 1 : 0, has && options.noVerify ? 1 : 0, has && options.mmap ? 1 : 0);
    } finally {
      NativeHandle.releaseOrNull(workspace);
    }
  }

  /** The step checkpoints of dir whose headers verify, newest first. */
  public static List<String> listSteps(String dir) {
    return Arrays.asList(Native.checkpointListSteps(Native.z("Checkpoint.listSteps: dir", dir)));
  }

  /** Removes all but the keep newest step checkpoints of dir (0 removes none) and stale temporaries. */
  public static void prune(String dir, int keep) {
    Native.checkpointPrune(Native.z("Checkpoint.prune: dir", dir), keep);
  }

  /** The file name of a step checkpoint: "step-%09d.dpckpt". */
  public static String stepFileName(long iteration) {
    return String.format("step-%09d.dpckpt", iteration);
  }
}
