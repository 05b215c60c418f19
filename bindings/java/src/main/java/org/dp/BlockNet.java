package org.dp;

/** The BMUF block net of a {@link ParallelModel} and its block length. Owns the NetDef. */
public final class BlockNet implements AutoCloseable {
  public final NetDef netDef;
  /** Run the block net after this many runs of the train net. */
  public final int blockLength;

  BlockNet(NetDef netDef, int blockLength) {
    this.netDef = netDef;
    this.blockLength = blockLength;
  }

  @Override
  public void close() {
    netDef.close();
  }
}
