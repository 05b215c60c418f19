package org.dp;

/** Options of {@link Workspace#create(WorkspaceOptions)} (dp_workspace_options). Defaults: no limit. */
public final class WorkspaceOptions {
  /** Cap on the bytes of the workspace's blobs; 0 = unlimited. See dp_workspace_create_with_options. */
  public long maxBytes;

  public WorkspaceOptions maxBytes(long v) {
    maxBytes = v;
    return this;
  }
}
