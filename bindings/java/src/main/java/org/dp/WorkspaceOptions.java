package org.dp;

/** Options of {@link Workspace#create(WorkspaceOptions)} (dp_workspace_options). Defaults: no cap of its own. */
public final class WorkspaceOptions {
  /**
   * Cap on the bytes of the workspace's blobs; 0 = no cap of its own (the process's memory limit still
   * bounds host memory). See dp_workspace_create_with_options.
   */
  public long maxBytes;

  public WorkspaceOptions maxBytes(long v) {
    maxBytes = v;
    return this;
  }
}
