package org.dp;

import java.util.Arrays;
import java.util.List;

/** Options of checkpoint loads (dp_checkpoint_load_options). Defaults: strict, verified, read. */
public final class CheckpointLoadOptions {
  /** The tensors to load; null: every tensor of the file. */
  public List<String> names;
  /** Create missing blobs and skip names the file lacks (instead of NOT_FOUND). */
  public boolean lenient;
  /** Skip the tensors' checksums. */
  public boolean noVerify;
  /** Map the file: tensors are read-only views of it (the file must not be truncated meanwhile). */
  public boolean mmap;

  public CheckpointLoadOptions names(String... v) {
    names = Arrays.asList(v);
    return this;
  }

  public CheckpointLoadOptions lenient(boolean v) {
    lenient = v;
    return this;
  }

  public CheckpointLoadOptions noVerify(boolean v) {
    noVerify = v;
    return this;
  }

  public CheckpointLoadOptions mmap(boolean v) {
    mmap = v;
    return this;
  }
}
